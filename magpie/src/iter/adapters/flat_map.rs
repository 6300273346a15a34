//! `flat_map` / `flatten` (each item becomes a parallel iterator of its own) and
//! `flat_map_iter` / `flatten_iter` (each item becomes a sequential iterator).

use crate::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
use crate::iter::{IntoParallelIterator, ParallelIterator};

/// The iterator returned by [`ParallelIterator::flat_map`].
///
/// # Examples
///
/// ```
/// use magpie::iter::FlatMap;
/// use magpie::prelude::*;
///
/// // Every pair (i, j) with j < i < 4, the inner ranges in parallel too.
/// let pairs: FlatMap<_, _> = (0..4u32)
///     .into_par_iter()
///     .flat_map(|i| (0..i).into_par_iter().map(move |j| (i, j)));
/// assert_eq!(pairs.count(), 6);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct FlatMap<I, F> {
    base: I,
    map_op: F,
}

impl<I, F> FlatMap<I, F> {
    pub(crate) fn new(base: I, map_op: F) -> Self {
        FlatMap { base, map_op }
    }
}

impl<I, F, PI> ParallelIterator for FlatMap<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> PI + Sync + Send,
    PI: IntoParallelIterator,
{
    type Item = PI::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<PI::Item>,
    {
        self.base.drive_unindexed(FlatMapConsumer {
            base: consumer,
            map_op: &self.map_op,
        })
    }
}

/// The iterator returned by [`ParallelIterator::flatten`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Flatten;
/// use magpie::prelude::*;
///
/// let batches = vec![vec![1, 2], vec![], vec![3]];
/// let items: Flatten<_> = batches.into_par_iter().flatten();
/// assert_eq!(items.collect::<Vec<i32>>(), [1, 2, 3]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Flatten<I> {
    base: I,
}

impl<I> Flatten<I> {
    pub(crate) fn new(base: I) -> Self {
        Flatten { base }
    }
}

fn identity<T>(item: T) -> T {
    item
}

impl<I> ParallelIterator for Flatten<I>
where
    I: ParallelIterator,
    I::Item: IntoParallelIterator,
{
    type Item = <I::Item as IntoParallelIterator>::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<Self::Item>,
    {
        self.base.drive_unindexed(FlatMapConsumer {
            base: consumer,
            map_op: &identity::<I::Item>,
        })
    }
}

/// Drives each item's iterator into a consumer split off to the left of the rest, so the
/// inner iterators run in parallel too and their results still reduce in order.
struct FlatMapConsumer<'f, C, F> {
    base: C,
    map_op: &'f F,
}

impl<'f, T, C, F, PI> Consumer<T> for FlatMapConsumer<'f, C, F>
where
    C: UnindexedConsumer<PI::Item>,
    F: Fn(T) -> PI + Sync,
    PI: IntoParallelIterator,
{
    type Folder = FlatMapFolder<'f, C, F, C::Result>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, C::Reducer) {
        let (left, right, reducer) = self.base.split_at(index);
        (
            FlatMapConsumer {
                base: left,
                map_op: self.map_op,
            },
            FlatMapConsumer {
                base: right,
                map_op: self.map_op,
            },
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        FlatMapFolder {
            base: self.base,
            map_op: self.map_op,
            previous: None,
        }
    }

    fn full(&self) -> bool {
        self.base.full()
    }

    fn splits_cheaply(&self) -> bool {
        self.base.splits_cheaply()
    }
}

impl<'f, T, C, F, PI> UnindexedConsumer<T> for FlatMapConsumer<'f, C, F>
where
    C: UnindexedConsumer<PI::Item>,
    F: Fn(T) -> PI + Sync,
    PI: IntoParallelIterator,
{
    fn split_off_left(&self) -> Self {
        FlatMapConsumer {
            base: self.base.split_off_left(),
            map_op: self.map_op,
        }
    }

    fn to_reducer(&self) -> C::Reducer {
        self.base.to_reducer()
    }
}

struct FlatMapFolder<'f, C, F, R> {
    base: C,
    map_op: &'f F,
    previous: Option<R>,
}

impl<'f, T, C, F, PI> Folder<T> for FlatMapFolder<'f, C, F, C::Result>
where
    C: UnindexedConsumer<PI::Item>,
    F: Fn(T) -> PI + Sync,
    PI: IntoParallelIterator,
{
    type Result = C::Result;

    fn consume(self, item: T) -> Self {
        let inner = (self.map_op)(item).into_par_iter();
        let result = inner.drive_unindexed(self.base.split_off_left());
        let previous = match self.previous {
            None => result,
            Some(previous) => self.base.to_reducer().reduce(previous, result),
        };
        FlatMapFolder {
            base: self.base,
            map_op: self.map_op,
            previous: Some(previous),
        }
    }

    fn complete(self) -> C::Result {
        match self.previous {
            Some(result) => result,
            None => self.base.into_folder().complete(),
        }
    }

    fn full(&self) -> bool {
        self.base.full()
    }
}

/// The iterator returned by [`ParallelIterator::flat_map_iter`].
///
/// # Examples
///
/// ```
/// use magpie::iter::FlatMapIter;
/// use magpie::prelude::*;
///
/// let lines = ["a b", "c"];
/// let words: FlatMapIter<_, _> = lines.par_iter().flat_map_iter(|l| l.split(' '));
/// assert_eq!(words.collect::<Vec<_>>(), ["a", "b", "c"]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct FlatMapIter<I, F> {
    base: I,
    map_op: F,
}

impl<I, F> FlatMapIter<I, F> {
    pub(crate) fn new(base: I, map_op: F) -> Self {
        FlatMapIter { base, map_op }
    }
}

impl<I, F, SI> ParallelIterator for FlatMapIter<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> SI + Sync + Send,
    SI: IntoIterator,
    SI::Item: Send,
{
    type Item = SI::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<SI::Item>,
    {
        self.base.drive_unindexed(FlatMapIterConsumer {
            base: consumer,
            map_op: &self.map_op,
        })
    }
}

/// The iterator returned by [`ParallelIterator::flatten_iter`].
///
/// # Examples
///
/// ```
/// use magpie::iter::FlattenIter;
/// use magpie::prelude::*;
///
/// let maybe = vec![Some(1), None, Some(3)];
/// let present: FlattenIter<_> = maybe.into_par_iter().flatten_iter(); // `Option` iterates too
/// assert_eq!(present.collect::<Vec<i32>>(), [1, 3]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct FlattenIter<I> {
    base: I,
}

impl<I> FlattenIter<I> {
    pub(crate) fn new(base: I) -> Self {
        FlattenIter { base }
    }
}

impl<I> ParallelIterator for FlattenIter<I>
where
    I: ParallelIterator,
    I::Item: IntoIterator,
    <I::Item as IntoIterator>::Item: Send,
{
    type Item = <I::Item as IntoIterator>::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<Self::Item>,
    {
        self.base.drive_unindexed(FlatMapIterConsumer {
            base: consumer,
            map_op: &identity::<I::Item>,
        })
    }
}

/// Feeds each item's sequential iterator straight into the folder.
struct FlatMapIterConsumer<'f, C, F> {
    base: C,
    map_op: &'f F,
}

impl<'f, T, C, F, SI> Consumer<T> for FlatMapIterConsumer<'f, C, F>
where
    C: UnindexedConsumer<SI::Item>,
    F: Fn(T) -> SI + Sync,
    SI: IntoIterator,
{
    type Folder = FlatMapIterFolder<'f, C::Folder, F>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, C::Reducer) {
        let (left, right, reducer) = self.base.split_at(index);
        (
            FlatMapIterConsumer {
                base: left,
                map_op: self.map_op,
            },
            FlatMapIterConsumer {
                base: right,
                map_op: self.map_op,
            },
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        FlatMapIterFolder {
            base: self.base.into_folder(),
            map_op: self.map_op,
        }
    }

    fn full(&self) -> bool {
        self.base.full()
    }

    fn splits_cheaply(&self) -> bool {
        self.base.splits_cheaply()
    }
}

impl<'f, T, C, F, SI> UnindexedConsumer<T> for FlatMapIterConsumer<'f, C, F>
where
    C: UnindexedConsumer<SI::Item>,
    F: Fn(T) -> SI + Sync,
    SI: IntoIterator,
{
    fn split_off_left(&self) -> Self {
        FlatMapIterConsumer {
            base: self.base.split_off_left(),
            map_op: self.map_op,
        }
    }

    fn to_reducer(&self) -> C::Reducer {
        self.base.to_reducer()
    }
}

struct FlatMapIterFolder<'f, G, F> {
    base: G,
    map_op: &'f F,
}

impl<'f, T, G, F, SI> Folder<T> for FlatMapIterFolder<'f, G, F>
where
    G: Folder<SI::Item>,
    F: Fn(T) -> SI,
    SI: IntoIterator,
{
    type Result = G::Result;

    fn consume(self, item: T) -> Self {
        FlatMapIterFolder {
            base: self.base.consume_iter((self.map_op)(item)),
            map_op: self.map_op,
        }
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        FlatMapIterFolder {
            base: self
                .base
                .consume_iter(iter.into_iter().flat_map(self.map_op)),
            map_op: self.map_op,
        }
    }

    fn complete(self) -> G::Result {
        self.base.complete()
    }

    fn full(&self) -> bool {
        self.base.full()
    }
}
