//! [`ParallelIterator`]: the adapters and consumers every parallel iterator has.

use std::cmp::Ordering;
use std::iter::{Product, Sum};

use super::adapters::{
    Chain, Cloned, Copied, Filter, FilterMap, FlatMap, FlatMapIter, Flatten, FlattenIter, Fold,
    Inspect, Map,
};
use super::consume::{find, reduce};
use super::plumbing::UnindexedConsumer;
use super::{FromParallelIterator, IntoParallelIterator};

/// A parallel iterator: items produced and consumed by several workers at once.
///
/// The methods mirror [`Iterator`]'s and Rayon's: adapters (`map`, `filter`, `flat_map`,
/// `chain`, ...) build a description of the work; consumers (`for_each`, `sum`, `collect`,
/// `find_first`, ...) run it on the current runtime (see [`crate::join`](fn@crate::join) for
/// which) and return when every piece is done. Whatever the interleaving, consumers that
/// combine items do so in the iterator's order, so `collect` preserves it and `reduce` needs
/// only an associative operation, not a commutative one.
///
/// # Panics
///
/// A panic in a closure stops no piece that already runs; once all have finished, the first
/// panic (in reduction order) resumes in the caller. Nothing is leaked: items already
/// produced are dropped.
///
/// # Examples
///
/// Code generic over parallel iterators, as over [`Iterator`]s:
///
/// ```
/// use magpie::prelude::*;
///
/// /// The total length of some strings, counted in parallel.
/// fn total_len<I>(strings: I) -> usize
/// where
///     I: ParallelIterator,
///     I::Item: AsRef<str>,
/// {
///     strings.map(|s| s.as_ref().len()).sum()
/// }
///
/// assert_eq!(total_len(["a", "bc"].par_iter()), 3);
/// assert_eq!(total_len(vec![String::from("def")].into_par_iter()), 3);
/// ```
pub trait ParallelIterator: Sized + Send {
    /// The items, which may be handed from one worker to another.
    type Item: Send;

    /// Feeds every item into `consumer`, splitting both as the bridge decides: the one
    /// required method. See [`plumbing`](super::plumbing).
    ///
    /// # Examples
    ///
    /// A parallel iterator of one's own that hands its work to another:
    ///
    /// ```
    /// use magpie::iter::plumbing::UnindexedConsumer;
    /// use magpie::prelude::*;
    ///
    /// /// The lines of a text, in parallel.
    /// struct Lines(Vec<String>);
    ///
    /// impl ParallelIterator for Lines {
    ///     type Item = String;
    ///
    ///     fn drive_unindexed<C: UnindexedConsumer<String>>(self, consumer: C) -> C::Result {
    ///         self.0.into_par_iter().drive_unindexed(consumer)
    ///     }
    /// }
    ///
    /// let text = Lines(vec!["one".into(), "two".into(), "three".into()]);
    /// assert_eq!(text.filter(|line| line.contains('o')).count(), 2);
    /// ```
    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<Self::Item>;

    /// The exact number of items, if known in advance. `Some` promises that
    /// [`drive_unindexed`](Self::drive_unindexed) splits its consumer only with
    /// [`Consumer::split_at`](super::plumbing::Consumer::split_at) at true item indices.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((0..10u32).into_par_iter().map(|x| x * 2).opt_len(), Some(10));
    /// // How many items pass a filter is known only once it has run.
    /// assert_eq!((0..10u32).into_par_iter().filter(|x| x % 2 == 0).opt_len(), None);
    /// ```
    fn opt_len(&self) -> Option<usize> {
        None
    }

    /// Calls `op` on every item, in parallel.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// let total = AtomicU64::new(0);
    /// (1..=100u64).collect::<Vec<_>>().par_iter().for_each(|&x| {
    ///     total.fetch_add(x, Ordering::Relaxed);
    /// });
    /// assert_eq!(total.into_inner(), 5050);
    /// ```
    fn for_each<F>(self, op: F)
    where
        F: Fn(Self::Item) + Sync + Send,
    {
        reduce::for_each(self, &op)
    }

    /// Applies `map_op` to every item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let doubled: Vec<i32> = [1, 2, 3].par_iter().map(|x| x * 2).collect();
    /// assert_eq!(doubled, [2, 4, 6]);
    /// ```
    fn map<F, R>(self, map_op: F) -> Map<Self, F>
    where
        F: Fn(Self::Item) -> R + Sync + Send,
        R: Send,
    {
        Map::new(self, map_op)
    }

    /// Shows every item to `inspect_op` on its way through.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let seen = AtomicUsize::new(0);
    /// let sum: i32 = [1, 2, 3]
    ///     .par_iter()
    ///     .inspect(|_| { seen.fetch_add(1, Ordering::Relaxed); })
    ///     .sum();
    /// assert_eq!((sum, seen.into_inner()), (6, 3));
    /// ```
    fn inspect<F>(self, inspect_op: F) -> Inspect<Self, F>
    where
        F: Fn(&Self::Item) + Sync + Send,
    {
        Inspect::new(self, inspect_op)
    }

    /// Copies items out of references.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<u8> = [1u8, 2, 3].par_iter().copied().collect();
    /// assert_eq!(v, [1, 2, 3]);
    /// ```
    fn copied<'a, T>(self) -> Copied<Self>
    where
        Self: ParallelIterator<Item = &'a T>,
        T: 'a + Copy + Send + Sync,
    {
        Copied::new(self)
    }

    /// Clones items out of references.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let names = [String::from("a"), String::from("b")];
    /// let owned: Vec<String> = names.par_iter().cloned().collect();
    /// assert_eq!(owned, names);
    /// ```
    fn cloned<'a, T>(self) -> Cloned<Self>
    where
        Self: ParallelIterator<Item = &'a T>,
        T: 'a + Clone + Send + Sync,
    {
        Cloned::new(self)
    }

    /// Keeps the items for which `predicate` is true.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let even: Vec<u32> = (0..10u32).into_par_iter().filter(|x| x % 2 == 0).collect();
    /// assert_eq!(even, [0, 2, 4, 6, 8]);
    /// ```
    fn filter<P>(self, predicate: P) -> Filter<Self, P>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        Filter::new(self, predicate)
    }

    /// Applies `op` to every item and keeps the `Some` results.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let parsed: Vec<i32> = ["1", "x", "3"].par_iter().filter_map(|s| s.parse().ok()).collect();
    /// assert_eq!(parsed, [1, 3]);
    /// ```
    fn filter_map<F, R>(self, op: F) -> FilterMap<Self, F>
    where
        F: Fn(Self::Item) -> Option<R> + Sync + Send,
        R: Send,
    {
        FilterMap::new(self, op)
    }

    /// Replaces every item by the items of the parallel iterator `map_op` makes of it; those
    /// run in parallel too.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<u32> = (1..4u32).into_par_iter().flat_map(|n| 0..n).collect();
    /// assert_eq!(v, [0, 0, 1, 0, 1, 2]);
    /// ```
    fn flat_map<F, PI>(self, map_op: F) -> FlatMap<Self, F>
    where
        F: Fn(Self::Item) -> PI + Sync + Send,
        PI: IntoParallelIterator,
    {
        FlatMap::new(self, map_op)
    }

    /// Replaces every item by the items of the sequential iterator `map_op` makes of it:
    /// cheaper than [`flat_map`](Self::flat_map) when each item expands to little.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<char> = ["ab", "c"].par_iter().flat_map_iter(|s| s.chars()).collect();
    /// assert_eq!(v, ['a', 'b', 'c']);
    /// ```
    fn flat_map_iter<F, SI>(self, map_op: F) -> FlatMapIter<Self, F>
    where
        F: Fn(Self::Item) -> SI + Sync + Send,
        SI: IntoIterator,
        SI::Item: Send,
    {
        FlatMapIter::new(self, map_op)
    }

    /// Flattens items that are themselves parallel iterables.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let nested = vec![vec![1, 2], vec![], vec![3]];
    /// let flat: Vec<i32> = nested.into_par_iter().flatten().collect();
    /// assert_eq!(flat, [1, 2, 3]);
    /// ```
    fn flatten(self) -> Flatten<Self>
    where
        Self::Item: IntoParallelIterator,
    {
        Flatten::new(self)
    }

    /// Flattens items that are sequential iterables.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let nested = vec![vec![1, 2], vec![3]];
    /// let flat: Vec<i32> = nested.into_par_iter().flatten_iter().collect();
    /// assert_eq!(flat, [1, 2, 3]);
    /// ```
    fn flatten_iter(self) -> FlattenIter<Self>
    where
        Self::Item: IntoIterator,
        <Self::Item as IntoIterator>::Item: Send,
    {
        FlattenIter::new(self)
    }

    /// This iterator's items, then `other`'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<u8> = (0..3u8).into_par_iter().chain(7..9u8).collect();
    /// assert_eq!(v, [0, 1, 2, 7, 8]);
    /// ```
    fn chain<C>(self, other: C) -> Chain<Self, C::Iter>
    where
        C: IntoParallelIterator<Item = Self::Item>,
    {
        Chain::new(self, other.into_par_iter())
    }

    /// Folds the items of each piece into an accumulator that starts as `identity()`, and
    /// yields the accumulators: one per piece, in order. Usually followed by a `reduce` or a
    /// `sum`; use it to keep a per-piece buffer instead of allocating per item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let words = ["a", "bb", "ccc"];
    /// let total_len = words
    ///     .par_iter()
    ///     .fold(|| 0usize, |acc, w| acc + w.len())
    ///     .sum::<usize>();
    /// assert_eq!(total_len, 6);
    /// ```
    fn fold<T, ID, F>(self, identity: ID, fold_op: F) -> Fold<Self, ID, F>
    where
        ID: Fn() -> T + Sync + Send,
        F: Fn(T, Self::Item) -> T + Sync + Send,
        T: Send,
    {
        Fold::new(self, identity, fold_op)
    }

    /// Combines all items with `op`, which must be associative; `identity()` must be its
    /// neutral element (it may be used any number of times).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let max = [3, 9, 2].par_iter().copied().reduce(|| i32::MIN, i32::max);
    /// assert_eq!(max, 9);
    /// ```
    fn reduce<ID, OP>(self, identity: ID, op: OP) -> Self::Item
    where
        ID: Fn() -> Self::Item + Sync + Send,
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        // `identity` is neutral for `op`, so only an empty iterator needs it.
        reduce::reduce_with(self, &op).unwrap_or_else(identity)
    }

    /// Combines all items with the associative `op`, or gives `None` if there are none.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let longest = ["a", "ccc", "bb"].par_iter().copied().reduce_with(|a, b| {
    ///     if b.len() > a.len() { b } else { a }
    /// });
    /// assert_eq!(longest, Some("ccc"));
    /// ```
    fn reduce_with<OP>(self, op: OP) -> Option<Self::Item>
    where
        OP: Fn(Self::Item, Self::Item) -> Self::Item + Sync + Send,
    {
        reduce::reduce_with(self, &op)
    }

    /// Sums the items, as [`Iterator::sum`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<u64> = (1..=1000).collect();
    /// assert_eq!(v.par_iter().sum::<u64>(), 500_500);
    /// ```
    fn sum<S>(self) -> S
    where
        S: Send + Sum<Self::Item> + Sum<S>,
    {
        reduce::sum(self)
    }

    /// Multiplies the items, as [`Iterator::product`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((1..=10u64).collect::<Vec<_>>().par_iter().product::<u64>(), 3_628_800);
    /// ```
    fn product<P>(self) -> P
    where
        P: Send + Product<Self::Item> + Product<P>,
    {
        reduce::product(self)
    }

    /// Counts the items.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((0..100u32).into_par_iter().filter(|x| x % 3 == 0).count(), 34);
    /// ```
    fn count(self) -> usize {
        self.map(|_| 1usize).sum()
    }

    /// The least item; the first of several equal ones, as [`Iterator::min`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!([4, 1, 7].par_iter().min(), Some(&1));
    /// ```
    fn min(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        self.min_by(Ord::cmp)
    }

    /// The greatest item; the last of several equal ones, as [`Iterator::max`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!([4, 1, 7].par_iter().max(), Some(&7));
    /// ```
    fn max(self) -> Option<Self::Item>
    where
        Self::Item: Ord,
    {
        self.max_by(Ord::cmp)
    }

    /// The least item by `compare`; the first of several equal ones.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v = [2.5f64, -1.0, 3.0];
    /// assert_eq!(v.par_iter().min_by(|a, b| a.total_cmp(b)), Some(&-1.0));
    /// ```
    fn min_by<F>(self, compare: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> Ordering + Sync + Send,
    {
        self.reduce_with(|a, b| match compare(&b, &a) {
            Ordering::Less => b,
            _ => a,
        })
    }

    /// The greatest item by `compare`; the last of several equal ones.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v = [2.5f64, -1.0, 3.0];
    /// assert_eq!(v.par_iter().max_by(|a, b| a.total_cmp(b)), Some(&3.0));
    /// ```
    fn max_by<F>(self, compare: F) -> Option<Self::Item>
    where
        F: Fn(&Self::Item, &Self::Item) -> Ordering + Sync + Send,
    {
        self.reduce_with(|a, b| match compare(&b, &a) {
            Ordering::Less => a,
            _ => b,
        })
    }

    /// The item with the least key; the first of several with equal keys. The key is
    /// computed once per item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let words = ["ccc", "a", "bb", "d"];
    /// assert_eq!(words.par_iter().min_by_key(|w| w.len()), Some(&"a"));
    /// ```
    fn min_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord + Send,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        self.map(|item| (key(&item), item))
            .min_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, item)| item)
    }

    /// The item with the greatest key; the last of several with equal keys. The key is
    /// computed once per item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let words = ["ccc", "a", "bb", "ddd"];
    /// assert_eq!(words.par_iter().max_by_key(|w| w.len()), Some(&"ddd"));
    /// ```
    fn max_by_key<K, F>(self, key: F) -> Option<Self::Item>
    where
        K: Ord + Send,
        F: Fn(&Self::Item) -> K + Sync + Send,
    {
        self.map(|item| (key(&item), item))
            .max_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, item)| item)
    }

    /// True if `predicate` holds for some item. Stops early: once one piece finds a match,
    /// no new piece starts and running pieces stop at their next item.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert!((0..1_000_000u32).into_par_iter().any(|x| x == 12_345));
    /// ```
    fn any<P>(self, predicate: P) -> bool
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        self.map(predicate).find_any(|&matched| matched).is_some()
    }

    /// True if `predicate` holds for every item. Stops early at the first item for which it
    /// does not.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert!([2, 4, 6].par_iter().all(|x| x % 2 == 0));
    /// ```
    fn all<P>(self, predicate: P) -> bool
    where
        P: Fn(Self::Item) -> bool + Sync + Send,
    {
        self.map(predicate).find_any(|&holds| !holds).is_none()
    }

    /// Some item for which `predicate` holds, not necessarily the first. Stops early.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let found = (0..100u32).into_par_iter().find_any(|x| x % 7 == 6);
    /// assert!(matches!(found, Some(x) if x % 7 == 6));
    /// ```
    fn find_any<P>(self, predicate: P) -> Option<Self::Item>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        find::find_any(self, &predicate)
    }

    /// The first item for which `predicate` holds. Stops early: pieces to the right of a
    /// match stop; only pieces to its left keep looking.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((0..100u32).into_par_iter().find_first(|x| x % 7 == 6), Some(6));
    /// ```
    fn find_first<P>(self, predicate: P) -> Option<Self::Item>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        find::find_first(self, &predicate)
    }

    /// The last item for which `predicate` holds. Stops early: pieces to the left of a
    /// match stop.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// assert_eq!((0..100u32).into_par_iter().find_last(|x| x % 7 == 6), Some(97));
    /// ```
    fn find_last<P>(self, predicate: P) -> Option<Self::Item>
    where
        P: Fn(&Self::Item) -> bool + Sync + Send,
    {
        find::find_last(self, &predicate)
    }

    /// Collects the items, in order, into a collection (a `Vec`).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v: Vec<u32> = (0..5u32).into_par_iter().map(|x| x * x).collect();
    /// assert_eq!(v, [0, 1, 4, 9, 16]);
    /// ```
    fn collect<C>(self) -> C
    where
        C: FromParallelIterator<Self::Item>,
    {
        C::from_par_iter(self)
    }
}
