//! [`IndexedParallelIterator`]: iterators that know their length and where each item is.

use super::adapters::{Enumerate, MaxLen, MinLen, Zip};
use super::consume::collect;
use super::plumbing::{Consumer, ProducerCallback};
use super::{IntoParallelIterator, ParallelIterator};

/// A parallel iterator that knows its exact length and can be cut at any index: slices,
/// `Vec`s, ranges, and what `map`, `enumerate`, `zip`, `chain` and the like make of them.
///
/// Only these can be `enumerate`d or `zip`ped, and `position_*` needs one.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// /// The dot product of two sequences of the same length.
/// fn dot<A, B>(a: A, b: B) -> i64
/// where
///     A: IndexedParallelIterator<Item = i64>,
///     B: IndexedParallelIterator<Item = i64>,
/// {
///     assert_eq!(a.len(), b.len());
///     a.zip(b).map(|(x, y)| x * y).sum()
/// }
///
/// let a = vec![1, 2, 3];
/// let b = vec![4, 5, 6];
/// assert_eq!(dot(a.par_iter().copied(), b.into_par_iter()), 32);
/// ```
// No `is_empty`: Rayon's trait has none, and code moving over from Rayon should not find a
// method that its `ExactSizeIterator` imports would make ambiguous.
#[allow(clippy::len_without_is_empty)]
pub trait IndexedParallelIterator: ParallelIterator {
    /// The exact number of items.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((0..10u32).into_par_iter().map(|x| x + 1).len(), 10);
    /// ```
    fn len(&self) -> usize;

    /// Feeds every item into `consumer`, splitting at true indices. See
    /// [`plumbing`](super::plumbing).
    ///
    /// # Examples
    ///
    /// (`ToVec` collects `u32`s in order: see
    /// [`Consumer`].)
    ///
    /// ```
    /// # use magpie::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
    /// # struct ToVec;
    /// # struct VecFolder(Vec<u32>);
    /// # struct Append;
    /// # impl Consumer<u32> for ToVec {
    /// #     type Folder = VecFolder; type Reducer = Append; type Result = Vec<u32>;
    /// #     fn split_at(self, _: usize) -> (Self, Self, Append) { (ToVec, ToVec, Append) }
    /// #     fn into_folder(self) -> VecFolder { VecFolder(Vec::new()) }
    /// #     fn full(&self) -> bool { false }
    /// # }
    /// # impl UnindexedConsumer<u32> for ToVec {
    /// #     fn split_off_left(&self) -> Self { ToVec }
    /// #     fn to_reducer(&self) -> Append { Append }
    /// # }
    /// # impl Folder<u32> for VecFolder {
    /// #     type Result = Vec<u32>;
    /// #     fn consume(mut self, item: u32) -> Self { self.0.push(item); self }
    /// #     fn complete(self) -> Vec<u32> { self.0 }
    /// #     fn full(&self) -> bool { false }
    /// # }
    /// # impl<T> Reducer<Vec<T>> for Append {
    /// #     fn reduce(self, mut l: Vec<T>, mut r: Vec<T>) -> Vec<T> { l.append(&mut r); l }
    /// # }
    /// use magpie::prelude::*;
    ///
    /// let v = (0..4u32).into_par_iter().map(|x| 10 * x).drive(ToVec);
    /// assert_eq!(v, [0, 10, 20, 30]);
    /// ```
    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<Self::Item>;

    /// Calls `callback` with this iterator's [`Producer`](super::plumbing::Producer). See
    /// [`plumbing`](super::plumbing).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::{Producer, ProducerCallback};
    /// use magpie::prelude::*;
    ///
    /// /// The first item, taken from the producer without running the rest.
    /// struct First;
    ///
    /// impl<T> ProducerCallback<T> for First {
    ///     type Output = Option<T>;
    ///
    ///     fn callback<P: Producer<Item = T>>(self, producer: P) -> Option<T> {
    ///         let (first, _rest) = producer.split_at(1);
    ///         first.into_iter().next()
    ///     }
    /// }
    ///
    /// let words = ["alpha", "beta"];
    /// assert_eq!(words.par_iter().map(|w| w.len()).with_producer(First), Some(5));
    /// ```
    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<Self::Item>;

    /// Pairs every item with its index.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<(usize, char)> = ['a', 'b'].par_iter().copied().enumerate().collect();
    /// assert_eq!(v, [(0, 'a'), (1, 'b')]);
    /// ```
    fn enumerate(self) -> Enumerate<Self> {
        Enumerate::new(self)
    }

    /// Pairs items with those of `other`, as long as the shorter of the two.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let a = [1, 2, 3];
    /// let b = [10, 20];
    /// let sums: Vec<i32> = a.par_iter().zip(&b).map(|(x, y)| x + y).collect();
    /// assert_eq!(sums, [11, 22]);
    /// ```
    fn zip<Z>(self, other: Z) -> Zip<Self, Z::Iter>
    where
        Z: IntoParallelIterator,
        Z::Iter: IndexedParallelIterator,
    {
        Zip::new(self, other.into_par_iter())
    }

    /// Never cuts a piece shorter than `min` items: raise it when items are so cheap that
    /// scheduling a piece costs more than running it.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let sum: u64 = (0..10_000u64).into_par_iter().with_min_len(4096).sum();
    /// assert_eq!(sum, 49_995_000);
    /// ```
    fn with_min_len(self, min: usize) -> MinLen<Self> {
        MinLen::new(self, min)
    }

    /// Always cuts pieces longer than `max` items: lower it when a few items cost far more
    /// than the rest.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let sum: u64 = (0..10_000u64).into_par_iter().with_max_len(100).sum();
    /// assert_eq!(sum, 49_995_000);
    /// ```
    fn with_max_len(self, max: usize) -> MaxLen<Self> {
        MaxLen::new(self, max)
    }

    /// The index of some item for which `predicate` holds. Stops early.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let i = [1, 3, 4, 5].par_iter().position_any(|x| x % 2 == 0);
    /// assert_eq!(i, Some(2));
    /// ```
    fn position_any<P>(self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        self.map(predicate)
            .enumerate()
            .find_any(|&(_, matched)| matched)
            .map(|(index, _)| index)
    }

    /// The index of the first item for which `predicate` holds. Stops early: pieces to the
    /// right of a match stop.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let i = [2, 3, 4, 5].par_iter().position_first(|x| x % 2 == 1);
    /// assert_eq!(i, Some(1));
    /// ```
    fn position_first<P>(self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        self.map(predicate)
            .enumerate()
            .find_first(|&(_, matched)| matched)
            .map(|(index, _)| index)
    }

    /// The index of the last item for which `predicate` holds. Stops early: pieces to the
    /// left of a match stop.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let i = [2, 3, 4, 5].par_iter().position_last(|x| x % 2 == 1);
    /// assert_eq!(i, Some(3));
    /// ```
    fn position_last<P>(self, predicate: P) -> Option<usize>
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        self.map(predicate)
            .enumerate()
            .find_last(|&(_, matched)| matched)
            .map(|(index, _)| index)
    }

    /// Collects the items, in order, into `vec`, replacing what it held and reusing its
    /// allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![9; 100];
    /// (0..3u8).into_par_iter().collect_into_vec(&mut v);
    /// assert_eq!(v, [0, 1, 2]);
    /// ```
    fn collect_into_vec(self, vec: &mut Vec<Self::Item>) {
        collect::collect_into_vec(self, vec)
    }
}
