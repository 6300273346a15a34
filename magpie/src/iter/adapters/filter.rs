//! `filter` and `filter_map`: consumer-side adapters. How many items survive is unknown
//! until the end, so the result is never indexed.

use crate::iter::plumbing::{Consumer, Folder, UnindexedConsumer};
use crate::iter::ParallelIterator;

/// The iterator returned by [`ParallelIterator::filter`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Filter;
/// use magpie::prelude::*;
///
/// let small: Filter<_, _> = (0..100u32).into_par_iter().filter(|&x| x < 10);
/// assert_eq!(small.opt_len(), None); // not indexed: the count is known only at the end
/// assert_eq!(small.count(), 10);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Filter<I, P> {
    base: I,
    predicate: P,
}

impl<I, P> Filter<I, P> {
    pub(crate) fn new(base: I, predicate: P) -> Self {
        Filter { base, predicate }
    }
}

impl<I, P> ParallelIterator for Filter<I, P>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync + Send,
{
    type Item = I::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<I::Item>,
    {
        let keep = |item: I::Item| (self.predicate)(&item).then_some(item);
        self.base.drive_unindexed(FilterMapConsumer {
            base: consumer,
            op: &keep,
        })
    }
}

/// The iterator returned by [`ParallelIterator::filter_map`].
///
/// # Examples
///
/// ```
/// use magpie::iter::FilterMap;
/// use magpie::prelude::*;
///
/// let inputs = ["4", "four", "2"];
/// let numbers: FilterMap<_, _> = inputs.par_iter().filter_map(|s| s.parse::<u32>().ok());
/// assert_eq!(numbers.sum::<u32>(), 6);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct FilterMap<I, F> {
    base: I,
    op: F,
}

impl<I, F> FilterMap<I, F> {
    pub(crate) fn new(base: I, op: F) -> Self {
        FilterMap { base, op }
    }
}

impl<I, F, R> ParallelIterator for FilterMap<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> Option<R> + Sync + Send,
    R: Send,
{
    type Item = R;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<R>,
    {
        self.base.drive_unindexed(FilterMapConsumer {
            base: consumer,
            op: &self.op,
        })
    }
}

/// Passes on `op(item)` for each item where it is `Some`. Split only without an index: the
/// index of a split means nothing once items are dropped.
struct FilterMapConsumer<'f, C, F> {
    base: C,
    op: &'f F,
}

impl<'f, T, R, C, F> Consumer<T> for FilterMapConsumer<'f, C, F>
where
    C: Consumer<R>,
    F: Fn(T) -> Option<R> + Sync,
{
    type Folder = FilterMapFolder<'f, C::Folder, F>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, C::Reducer) {
        let (left, right, reducer) = self.base.split_at(index);
        (
            FilterMapConsumer {
                base: left,
                op: self.op,
            },
            FilterMapConsumer {
                base: right,
                op: self.op,
            },
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        FilterMapFolder {
            base: self.base.into_folder(),
            op: self.op,
        }
    }

    fn full(&self) -> bool {
        self.base.full()
    }

    fn splits_cheaply(&self) -> bool {
        self.base.splits_cheaply()
    }
}

impl<'f, T, R, C, F> UnindexedConsumer<T> for FilterMapConsumer<'f, C, F>
where
    C: UnindexedConsumer<R>,
    F: Fn(T) -> Option<R> + Sync,
{
    fn split_off_left(&self) -> Self {
        FilterMapConsumer {
            base: self.base.split_off_left(),
            op: self.op,
        }
    }

    fn to_reducer(&self) -> C::Reducer {
        self.base.to_reducer()
    }
}

struct FilterMapFolder<'f, G, F> {
    base: G,
    op: &'f F,
}

impl<'f, T, R, G, F> Folder<T> for FilterMapFolder<'f, G, F>
where
    G: Folder<R>,
    F: Fn(T) -> Option<R>,
{
    type Result = G::Result;

    fn consume(self, item: T) -> Self {
        match (self.op)(item) {
            Some(mapped) => FilterMapFolder {
                base: self.base.consume(mapped),
                op: self.op,
            },
            None => self,
        }
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        FilterMapFolder {
            base: self.base.consume_iter(iter.into_iter().filter_map(self.op)),
            op: self.op,
        }
    }

    fn complete(self) -> G::Result {
        self.base.complete()
    }

    fn full(&self) -> bool {
        self.base.full()
    }
}
