//! The traits under every parallel iterator: producers, consumers, folders and reducers, and
//! the bridge that splits a producer and a consumer in step across the pool.
//!
//! This module is for code that implements its own parallel iterators; code that only uses
//! them never names it. `README.md` beside this file (`magpie/src/iter/plumbing/`) explains
//! the design, with pictures. In short:
//!
//! * A [`Producer`] is a splittable source of items of known length (a slice, a range). It
//!   can be cut at any index ([`Producer::split_at`]) and turned into a sequential iterator.
//! * A [`Consumer`] is the splittable sink the items go to (a sum, a `collect` target). Cut
//!   at the same index as the producer, it yields two consumers and the [`Reducer`] that joins
//!   their results. An [`UnindexedConsumer`] can also be split without an index, for items
//!   whose count is not known in advance (after `filter`, inside `flat_map`).
//! * A [`Folder`] is one consumer's sequential state: it takes items one by one and finally
//!   gives its result.
//! * [`bridge_producer_consumer`] splits both sides with [`join`](fn@crate::join) until each
//!   piece is small enough, folds each piece with its folder, and reduces the results in
//!   order, left with right.
//!
//! # Examples
//!
//! A parallel iterator over the squares `0, 1, 4, .., (n-1)^2`, written from scratch:
//!
//! ```
//! use magpie::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
//! use magpie::prelude::*;
//!
//! struct Squares(u64, u64); // the range start..end
//!
//! impl Producer for Squares {
//!     type Item = u64;
//!     type IntoIter = std::iter::Map<std::ops::Range<u64>, fn(u64) -> u64>;
//!     fn into_iter(self) -> Self::IntoIter {
//!         (self.0..self.1).map(|i| i * i)
//!     }
//!     fn split_at(self, index: usize) -> (Self, Self) {
//!         let mid = self.0 + index as u64;
//!         (Squares(self.0, mid), Squares(mid, self.1))
//!     }
//! }
//!
//! struct ParSquares(u64);
//!
//! impl ParallelIterator for ParSquares {
//!     type Item = u64;
//!     fn drive_unindexed<C: UnindexedConsumer<u64>>(self, consumer: C) -> C::Result {
//!         bridge(self, consumer)
//!     }
//!     fn opt_len(&self) -> Option<usize> {
//!         Some(self.0 as usize)
//!     }
//! }
//!
//! impl IndexedParallelIterator for ParSquares {
//!     fn len(&self) -> usize {
//!         self.0 as usize
//!     }
//!     fn drive<C: Consumer<u64>>(self, consumer: C) -> C::Result {
//!         bridge(self, consumer)
//!     }
//!     fn with_producer<CB: ProducerCallback<u64>>(self, callback: CB) -> CB::Output {
//!         callback.callback(Squares(0, self.0))
//!     }
//! }
//!
//! let total: u64 = ParSquares(1000).sum();
//! assert_eq!(total, (0..1000u64).map(|i| i * i).sum());
//! ```

mod bridge;

pub use bridge::{bridge, bridge_producer_consumer};

/// A splittable source of a known number of items: the indexed half of the plumbing.
///
/// The [module docs](self) implement one from scratch. Every indexed iterator hands its
/// producer to a [`ProducerCallback`] through
/// [`with_producer`](crate::iter::IndexedParallelIterator::with_producer); generic code
/// meets producers there.
///
/// # Examples
///
/// Cutting the producer of `(0..5).map(..)` in two by hand, and running each half
/// sequentially:
///
/// ```
/// use magpie::iter::plumbing::{Producer, ProducerCallback};
/// use magpie::prelude::*;
///
/// /// Splits the producer at `self.0` and collects each half.
/// struct Halves(usize);
///
/// impl<T> ProducerCallback<T> for Halves {
///     type Output = (Vec<T>, Vec<T>);
///
///     fn callback<P: Producer<Item = T>>(self, producer: P) -> Self::Output {
///         let (left, right) = producer.split_at(self.0);
///         (left.into_iter().collect(), right.into_iter().collect())
///     }
/// }
///
/// let (left, right) = (0..5u32).into_par_iter().map(|x| x * 10).with_producer(Halves(2));
/// assert_eq!(left, [0, 10]);
/// assert_eq!(right, [20, 30, 40]);
/// ```
pub trait Producer: Send + Sized {
    /// The items produced.
    type Item;
    /// The sequential iterator a piece becomes once it is small enough.
    type IntoIter: Iterator<Item = Self::Item>;

    /// Turns this piece into a sequential iterator over its items.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::{Producer, ProducerCallback};
    /// use magpie::prelude::*;
    ///
    /// /// Runs the whole producer as one sequential iterator.
    /// struct Sequential;
    ///
    /// impl<T> ProducerCallback<T> for Sequential {
    ///     type Output = Vec<T>;
    ///
    ///     fn callback<P: Producer<Item = T>>(self, producer: P) -> Vec<T> {
    ///         producer.into_iter().collect()
    ///     }
    /// }
    ///
    /// assert_eq!(['a', 'b'].par_iter().copied().with_producer(Sequential), ['a', 'b']);
    /// ```
    fn into_iter(self) -> Self::IntoIter;

    /// The smallest piece worth splitting off; the bridge never splits below it. Set by
    /// [`with_min_len`](crate::iter::IndexedParallelIterator::with_min_len).
    ///
    /// # Examples
    ///
    /// (`PieceBounds` gives `(min_len(), max_len())`: see [`ProducerCallback`].)
    ///
    /// ```
    /// # use magpie::iter::plumbing::{Producer, ProducerCallback};
    /// # struct PieceBounds;
    /// # impl<T> ProducerCallback<T> for PieceBounds {
    /// #     type Output = (usize, usize);
    /// #     fn callback<P: Producer<Item = T>>(self, p: P) -> (usize, usize) {
    /// #         (p.min_len(), p.max_len())
    /// #     }
    /// # }
    /// use magpie::prelude::*;
    ///
    /// let (min, _) = (0..100u32).into_par_iter().with_producer(PieceBounds);
    /// assert_eq!(min, 1);
    /// let (min, _) = (0..100u32).into_par_iter().with_min_len(10).with_producer(PieceBounds);
    /// assert_eq!(min, 10);
    /// ```
    fn min_len(&self) -> usize {
        1
    }

    /// The largest piece to leave unsplit. Set by
    /// [`with_max_len`](crate::iter::IndexedParallelIterator::with_max_len).
    ///
    /// # Examples
    ///
    /// (`PieceBounds` gives `(min_len(), max_len())`: see [`ProducerCallback`].)
    ///
    /// ```
    /// # use magpie::iter::plumbing::{Producer, ProducerCallback};
    /// # struct PieceBounds;
    /// # impl<T> ProducerCallback<T> for PieceBounds {
    /// #     type Output = (usize, usize);
    /// #     fn callback<P: Producer<Item = T>>(self, p: P) -> (usize, usize) {
    /// #         (p.min_len(), p.max_len())
    /// #     }
    /// # }
    /// use magpie::prelude::*;
    ///
    /// let (_, max) = (0..100u32).into_par_iter().with_producer(PieceBounds);
    /// assert_eq!(max, usize::MAX);
    /// let (_, max) = (0..100u32).into_par_iter().with_max_len(8).with_producer(PieceBounds);
    /// assert_eq!(max, 8);
    /// ```
    fn max_len(&self) -> usize {
        usize::MAX
    }

    /// Splits into the items before `index` and the items from `index` on.
    ///
    /// # Examples
    ///
    /// A producer of its own, cut as the bridge would cut it:
    ///
    /// ```
    /// use magpie::iter::plumbing::Producer;
    ///
    /// /// The integers `start..end`.
    /// struct Numbers(u32, u32);
    ///
    /// impl Producer for Numbers {
    ///     type Item = u32;
    ///     type IntoIter = std::ops::Range<u32>;
    ///
    ///     fn into_iter(self) -> Self::IntoIter {
    ///         self.0..self.1
    ///     }
    ///     fn split_at(self, index: usize) -> (Self, Self) {
    ///         let mid = self.0 + index as u32;
    ///         (Numbers(self.0, mid), Numbers(mid, self.1))
    ///     }
    /// }
    ///
    /// let (left, right) = Numbers(10, 15).split_at(2);
    /// assert_eq!(left.into_iter().collect::<Vec<_>>(), [10, 11]);
    /// assert_eq!(right.into_iter().collect::<Vec<_>>(), [12, 13, 14]);
    /// ```
    fn split_at(self, index: usize) -> (Self, Self);

    /// Feeds every item of this piece to `folder`. The default goes through
    /// [`into_iter`](Producer::into_iter); override it where a piece can do better.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::{Folder, Producer, ProducerCallback};
    /// use magpie::prelude::*;
    ///
    /// /// Adds up the items it is given.
    /// struct Sum(u64);
    ///
    /// impl Folder<u64> for Sum {
    ///     type Result = u64;
    ///
    ///     fn consume(self, item: u64) -> Self {
    ///         Sum(self.0 + item)
    ///     }
    ///     fn complete(self) -> u64 {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// /// Folds the whole producer with one `Sum`, sequentially.
    /// struct FoldAll;
    ///
    /// impl ProducerCallback<u64> for FoldAll {
    ///     type Output = u64;
    ///
    ///     fn callback<P: Producer<Item = u64>>(self, producer: P) -> u64 {
    ///         producer.fold_with(Sum(0)).complete()
    ///     }
    /// }
    ///
    /// assert_eq!((1..11u64).into_par_iter().with_producer(FoldAll), 55);
    /// ```
    fn fold_with<F>(self, folder: F) -> F
    where
        F: Folder<Self::Item>,
    {
        folder.consume_iter(self.into_iter())
    }
}

/// A splittable sink for items: the other half of the plumbing.
///
/// Cutting a consumer at the index where its producer was cut gives two consumers and the
/// [`Reducer`] that combines their results, left with right.
///
/// # Examples
///
/// A consumer that collects `u32` items in order, with its [`Folder`] and [`Reducer`], driven
/// by indexed and unindexed iterators alike:
///
/// ```
/// use magpie::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
/// use magpie::prelude::*;
///
/// /// Collects the items into a `Vec`, in order.
/// struct ToVec;
/// struct VecFolder(Vec<u32>);
/// /// Appends the right half's items to the left half's.
/// struct Append;
///
/// impl Consumer<u32> for ToVec {
///     type Folder = VecFolder;
///     type Reducer = Append;
///     type Result = Vec<u32>;
///
///     fn split_at(self, _index: usize) -> (Self, Self, Append) {
///         (ToVec, ToVec, Append)
///     }
///     fn into_folder(self) -> VecFolder {
///         VecFolder(Vec::new())
///     }
///     fn full(&self) -> bool {
///         false // every item counts
///     }
/// }
///
/// impl UnindexedConsumer<u32> for ToVec {
///     fn split_off_left(&self) -> Self {
///         ToVec
///     }
///     fn to_reducer(&self) -> Append {
///         Append
///     }
/// }
///
/// impl Folder<u32> for VecFolder {
///     type Result = Vec<u32>;
///
///     fn consume(mut self, item: u32) -> Self {
///         self.0.push(item);
///         self
///     }
///     fn complete(self) -> Vec<u32> {
///         self.0
///     }
///     fn full(&self) -> bool {
///         false
///     }
/// }
///
/// impl<T> Reducer<Vec<T>> for Append {
///     fn reduce(self, mut left: Vec<T>, mut right: Vec<T>) -> Vec<T> {
///         left.append(&mut right);
///         left
///     }
/// }
///
/// let squares = (0..5u32).into_par_iter().map(|x| x * x).drive(ToVec);
/// assert_eq!(squares, [0, 1, 4, 9, 16]);
/// let odd = (0..10u32).into_par_iter().filter(|x| x % 2 == 1).drive_unindexed(ToVec);
/// assert_eq!(odd, [1, 3, 5, 7, 9]);
/// ```
pub trait Consumer<Item>: Send + Sized {
    /// The sequential state that consumes one piece.
    type Folder: Folder<Item, Result = Self::Result>;
    /// Combines the results of the two halves of a split.
    type Reducer: Reducer<Self::Result>;
    /// What consuming gives.
    type Result: Send;

    /// Splits into consumers for the items before `index` and from `index` on.
    ///
    /// # Examples
    ///
    /// What the bridge does with a consumer, by hand (`ToVec` collects `u32`s in order: see
    /// [`Consumer`]):
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
    /// let (left, right, reducer) = ToVec.split_at(2);
    /// let left = left.into_folder().consume_iter([1, 2]).complete();
    /// let right = right.into_folder().consume_iter([3]).complete();
    /// assert_eq!(reducer.reduce(left, right), [1, 2, 3]);
    /// ```
    fn split_at(self, index: usize) -> (Self, Self, Self::Reducer);

    /// The sequential state for one piece.
    ///
    /// # Examples
    ///
    /// (`ToVec` collects `u32`s in order: see [`Consumer`].)
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
    /// let folder = ToVec.into_folder();
    /// assert_eq!(folder.consume(1).consume(2).complete(), [1, 2]);
    /// ```
    fn into_folder(self) -> Self::Folder;

    /// True once no more items can change the result (`any` saw a match, or `find_first`
    /// knows of a match further left): the bridge starts no further pieces.
    ///
    /// # Examples
    ///
    /// A consumer that looks for a zero, sharing one flag among all its pieces so that every
    /// piece stops once any has found one:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    ///
    /// use magpie::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
    /// use magpie::prelude::*;
    ///
    /// #[derive(Clone, Copy)]
    /// struct AnyZero<'a>(&'a AtomicBool);
    /// struct Or;
    ///
    /// impl Consumer<u32> for AnyZero<'_> {
    ///     type Folder = Self;
    ///     type Reducer = Or;
    ///     type Result = bool;
    ///
    ///     fn split_at(self, _index: usize) -> (Self, Self, Or) {
    ///         (self, self, Or)
    ///     }
    ///     fn into_folder(self) -> Self {
    ///         self
    ///     }
    ///     fn full(&self) -> bool {
    ///         self.0.load(Ordering::Relaxed) // found: nothing can change the answer
    ///     }
    /// }
    ///
    /// impl UnindexedConsumer<u32> for AnyZero<'_> {
    ///     fn split_off_left(&self) -> Self {
    ///         *self
    ///     }
    ///     fn to_reducer(&self) -> Or {
    ///         Or
    ///     }
    /// }
    ///
    /// impl Folder<u32> for AnyZero<'_> {
    ///     type Result = bool;
    ///
    ///     fn consume(self, item: u32) -> Self {
    ///         if item == 0 {
    ///             self.0.store(true, Ordering::Relaxed);
    ///         }
    ///         self
    ///     }
    ///     fn complete(self) -> bool {
    ///         self.0.load(Ordering::Relaxed)
    ///     }
    ///     fn full(&self) -> bool {
    ///         self.0.load(Ordering::Relaxed)
    ///     }
    /// }
    ///
    /// impl Reducer<bool> for Or {
    ///     fn reduce(self, left: bool, right: bool) -> bool {
    ///         left || right
    ///     }
    /// }
    ///
    /// let found = AtomicBool::new(false);
    /// assert!((0..1_000_000u32).into_par_iter().drive_unindexed(AnyZero(&found)));
    /// let found = AtomicBool::new(false);
    /// assert!(!(1..1000u32).into_par_iter().drive_unindexed(AnyZero(&found)));
    /// ```
    fn full(&self) -> bool;

    /// Whether cutting this consumer into more pieces than the bridge's split rules ask for
    /// costs no more than the cuts and the reductions: its result does not show where the
    /// pieces fall (a sum, a `collect`, `any`), as a [`fold`](crate::iter::ParallelIterator::fold)'s
    /// does, one accumulator per piece. Then the bridge may fold a long piece in halves and
    /// hand the second half to the pool when another worker runs out of work (rule 5 of
    /// [`bridge_producer_consumer`]). `false` unless a consumer says otherwise; adapters pass
    /// their inner consumer's answer on.
    ///
    /// # Examples
    ///
    /// A consumer whose pieces are whole numbers added up: any number of them gives the same
    /// sum.
    ///
    /// ```
    /// use magpie::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
    /// use magpie::prelude::*;
    ///
    /// struct Total;
    /// struct TotalFolder(u64);
    /// struct Add;
    ///
    /// impl Consumer<u64> for Total {
    ///     type Folder = TotalFolder;
    ///     type Reducer = Add;
    ///     type Result = u64;
    ///
    ///     fn split_at(self, _index: usize) -> (Self, Self, Add) {
    ///         (Total, Total, Add)
    ///     }
    ///     fn into_folder(self) -> TotalFolder {
    ///         TotalFolder(0)
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    ///     fn splits_cheaply(&self) -> bool {
    ///         true // the pieces' sums add up the same however they are cut
    ///     }
    /// }
    ///
    /// impl UnindexedConsumer<u64> for Total {
    ///     fn split_off_left(&self) -> Self {
    ///         Total
    ///     }
    ///     fn to_reducer(&self) -> Add {
    ///         Add
    ///     }
    /// }
    ///
    /// impl Folder<u64> for TotalFolder {
    ///     type Result = u64;
    ///
    ///     fn consume(self, item: u64) -> Self {
    ///         TotalFolder(self.0 + item)
    ///     }
    ///     fn complete(self) -> u64 {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// impl Reducer<u64> for Add {
    ///     fn reduce(self, left: u64, right: u64) -> u64 {
    ///         left + right
    ///     }
    /// }
    ///
    /// assert!(Total.splits_cheaply());
    /// let n = 1_000_000u64;
    /// assert_eq!((0..n).into_par_iter().drive(Total), n * (n - 1) / 2);
    /// ```
    fn splits_cheaply(&self) -> bool {
        false
    }
}

/// A consumer that can also be split without knowing where its items end.
///
/// What [`ParallelIterator::drive_unindexed`](crate::iter::ParallelIterator::drive_unindexed)
/// takes, so what every parallel iterator can feed, indexed or not.
///
/// # Examples
///
/// `ToVec`, the consumer of [`Consumer`]'s example, after a `flat_map`, where no piece
/// knows how many items it will yield:
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
/// let v = (1..4u32).into_par_iter().flat_map(|n| 0..n).drive_unindexed(ToVec);
/// assert_eq!(v, [0, 0, 1, 0, 1, 2]);
/// ```
pub trait UnindexedConsumer<Item>: Consumer<Item> {
    /// Splits off a consumer for items that all come before the items `self` will see.
    ///
    /// # Examples
    ///
    /// (`ToVec` collects `u32`s in order: see [`Consumer`].)
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
    /// let right = ToVec;
    /// let left = right.split_off_left();
    /// let reducer = right.to_reducer();
    /// let left = left.into_folder().consume(1).complete();
    /// let right = right.into_folder().consume_iter([2, 3]).complete();
    /// assert_eq!(reducer.reduce(left, right), [1, 2, 3]);
    /// ```
    fn split_off_left(&self) -> Self;

    /// The reducer for a result of [`split_off_left`](Self::split_off_left) (left) and one
    /// of `self` (right).
    ///
    /// # Examples
    ///
    /// (`ToVec` collects `u32`s in order: see [`Consumer`].)
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
    /// let reducer = ToVec.to_reducer();
    /// assert_eq!(reducer.reduce(vec![1, 2], vec![3]), [1, 2, 3]);
    /// ```
    fn to_reducer(&self) -> Self::Reducer;
}

/// The sequential state of a [`Consumer`] working through one piece.
///
/// # Examples
///
/// A folder that counts the items it is given:
///
/// ```
/// use magpie::iter::plumbing::Folder;
///
/// struct Count(usize);
///
/// impl Folder<char> for Count {
///     type Result = usize;
///
///     fn consume(self, _item: char) -> Self {
///         Count(self.0 + 1)
///     }
///     fn complete(self) -> usize {
///         self.0
///     }
///     fn full(&self) -> bool {
///         false
///     }
/// }
///
/// assert_eq!(Count(0).consume_iter("abc".chars()).complete(), 3);
/// ```
pub trait Folder<Item>: Sized {
    /// What the folder gives when complete.
    type Result;

    /// Takes one item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::Folder;
    ///
    /// struct Max(Option<i32>);
    ///
    /// impl Folder<i32> for Max {
    ///     type Result = Option<i32>;
    ///
    ///     fn consume(self, item: i32) -> Self {
    ///         Max(Some(self.0.map_or(item, |max| max.max(item))))
    ///     }
    ///     fn complete(self) -> Option<i32> {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// assert_eq!(Max(None).consume(3).consume(-1).consume(7).complete(), Some(7));
    /// ```
    fn consume(self, item: Item) -> Self;

    /// Takes items until the iterator ends or the folder is [`full`](Self::full). Folders
    /// override it to hand the whole iterator to a tight loop (a `sum` that vectorizes).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::Folder;
    ///
    /// struct Sum(u64);
    ///
    /// impl Folder<u64> for Sum {
    ///     type Result = u64;
    ///
    ///     fn consume(self, item: u64) -> Self {
    ///         Sum(self.0 + item)
    ///     }
    ///     // One loop over the whole piece instead of a call per item.
    ///     fn consume_iter<I: IntoIterator<Item = u64>>(self, iter: I) -> Self {
    ///         Sum(self.0 + iter.into_iter().sum::<u64>())
    ///     }
    ///     fn complete(self) -> u64 {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// assert_eq!(Sum(0).consume_iter(1..=100).complete(), 5050);
    /// ```
    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = Item>,
    {
        for item in iter {
            self = self.consume(item);
            if self.full() {
                break;
            }
        }
        self
    }

    /// Finishes the piece.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::Folder;
    ///
    /// /// Joins words with spaces.
    /// struct Sentence(String);
    ///
    /// impl<'a> Folder<&'a str> for Sentence {
    ///     type Result = String;
    ///
    ///     fn consume(mut self, word: &'a str) -> Self {
    ///         if !self.0.is_empty() {
    ///             self.0.push(' ');
    ///         }
    ///         self.0.push_str(word);
    ///         self
    ///     }
    ///     fn complete(self) -> String {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         false
    ///     }
    /// }
    ///
    /// let folder = Sentence(String::new()).consume_iter(["fold", "then", "complete"]);
    /// assert_eq!(folder.complete(), "fold then complete");
    /// ```
    fn complete(self) -> Self::Result;

    /// True once more items cannot change the result.
    ///
    /// # Examples
    ///
    /// A folder that keeps the first three items: the default
    /// [`consume_iter`](Folder::consume_iter) stops as soon as it is full.
    ///
    /// ```
    /// use magpie::iter::plumbing::Folder;
    ///
    /// struct FirstThree(Vec<u32>);
    ///
    /// impl Folder<u32> for FirstThree {
    ///     type Result = Vec<u32>;
    ///
    ///     fn consume(mut self, item: u32) -> Self {
    ///         self.0.push(item);
    ///         self
    ///     }
    ///     fn complete(self) -> Vec<u32> {
    ///         self.0
    ///     }
    ///     fn full(&self) -> bool {
    ///         self.0.len() >= 3
    ///     }
    /// }
    ///
    /// let mut seen = 0;
    /// let folder = FirstThree(Vec::new()).consume_iter((0..100).inspect(|_| seen += 1));
    /// assert!(folder.full());
    /// assert_eq!(folder.complete(), [0, 1, 2]);
    /// assert_eq!(seen, 3);
    /// ```
    fn full(&self) -> bool;
}

/// Combines the results of the two halves of a split, in order.
///
/// # Examples
///
/// The reducer of a consumer that finds the longest word: on a tie the left one wins, as
/// the first of several equal items should.
///
/// ```
/// use magpie::iter::plumbing::Reducer;
///
/// struct Longest;
///
/// impl<'a> Reducer<&'a str> for Longest {
///     fn reduce(self, left: &'a str, right: &'a str) -> &'a str {
///         if right.len() > left.len() { right } else { left }
///     }
/// }
///
/// assert_eq!(Longest.reduce("ab", "cd"), "ab");
/// assert_eq!(Longest.reduce("ab", "cde"), "cde");
/// ```
pub trait Reducer<Result> {
    /// Combines `left` (the earlier items) with `right` (the later ones).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::iter::plumbing::Reducer;
    ///
    /// /// Concatenates, so the order must be kept.
    /// struct Concat;
    ///
    /// impl Reducer<String> for Concat {
    ///     fn reduce(self, left: String, right: String) -> String {
    ///         left + &right
    ///     }
    /// }
    ///
    /// assert_eq!(Concat.reduce("left, ".to_owned(), "right".to_owned()), "left, right");
    /// ```
    fn reduce(self, left: Result, right: Result) -> Result;
}

/// What an indexed iterator calls with its producer: the type-level way for the iterator to
/// hand a producer (whose type it alone knows) to generic code.
///
/// # Examples
///
/// A callback that reports how long the producer's pieces may be, for any indexed
/// iterator:
///
/// ```
/// use magpie::iter::plumbing::{Producer, ProducerCallback};
/// use magpie::prelude::*;
///
/// struct PieceBounds;
///
/// impl<T> ProducerCallback<T> for PieceBounds {
///     type Output = (usize, usize);
///
///     fn callback<P: Producer<Item = T>>(self, producer: P) -> (usize, usize) {
///         (producer.min_len(), producer.max_len())
///     }
/// }
///
/// let iter = (0..1000u32).into_par_iter().with_min_len(50).with_max_len(200);
/// assert_eq!(iter.with_producer(PieceBounds), (50, 200));
/// ```
pub trait ProducerCallback<Item> {
    /// What the callback returns.
    type Output;

    /// Called with the producer of the iterator's items.
    ///
    /// # Examples
    ///
    /// What [`bridge`](fn@bridge) does: the length and the consumer travel in the callback, to
    /// meet the producer (`ToVec` collects `u32`s in order: see [`Consumer`]).
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
    /// use magpie::iter::plumbing::{bridge_producer_consumer, Producer, ProducerCallback};
    /// use magpie::prelude::*;
    ///
    /// struct Drive<C> {
    ///     len: usize,
    ///     consumer: C,
    /// }
    ///
    /// impl<T, C: Consumer<T>> ProducerCallback<T> for Drive<C> {
    ///     type Output = C::Result;
    ///
    ///     fn callback<P: Producer<Item = T>>(self, producer: P) -> C::Result {
    ///         bridge_producer_consumer(self.len, producer, self.consumer)
    ///     }
    /// }
    ///
    /// let iter = (0..5u32).into_par_iter().map(|x| x + 1);
    /// let drive = Drive { len: iter.len(), consumer: ToVec };
    /// assert_eq!(iter.with_producer(drive), [1, 2, 3, 4, 5]);
    /// ```
    fn callback<P>(self, producer: P) -> Self::Output
    where
        P: Producer<Item = Item>;
}

/// A reducer for results that carry nothing (`for_each`).
///
/// # Examples
///
/// The reducer of a consumer whose pieces leave their results elsewhere (here, in a shared
/// counter):
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use magpie::iter::plumbing::{Consumer, Folder, NoopReducer, UnindexedConsumer};
/// use magpie::prelude::*;
///
/// #[derive(Clone, Copy)]
/// struct CountInto<'a>(&'a AtomicUsize);
///
/// impl<T> Consumer<T> for CountInto<'_> {
///     type Folder = Self;
///     type Reducer = NoopReducer;
///     type Result = ();
///
///     fn split_at(self, _index: usize) -> (Self, Self, NoopReducer) {
///         (self, self, NoopReducer)
///     }
///     fn into_folder(self) -> Self {
///         self
///     }
///     fn full(&self) -> bool {
///         false
///     }
/// }
///
/// impl<T> UnindexedConsumer<T> for CountInto<'_> {
///     fn split_off_left(&self) -> Self {
///         *self
///     }
///     fn to_reducer(&self) -> NoopReducer {
///         NoopReducer
///     }
/// }
///
/// impl<T> Folder<T> for CountInto<'_> {
///     type Result = ();
///
///     fn consume(self, _item: T) -> Self {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         self
///     }
///     fn complete(self) {}
///     fn full(&self) -> bool {
///         false
///     }
/// }
///
/// let count = AtomicUsize::new(0);
/// (0..1000u32).into_par_iter().filter(|x| x % 3 == 0).drive_unindexed(CountInto(&count));
/// assert_eq!(count.into_inner(), 334);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopReducer;

impl Reducer<()> for NoopReducer {
    fn reduce(self, _left: (), _right: ()) {}
}
