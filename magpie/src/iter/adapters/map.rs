//! `map` and `inspect`: one closure applied to every item, on the producer side (indexed
//! iterators) or on the consumer side (any iterator).

use crate::iter::plumbing::{Consumer, Folder, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`ParallelIterator::map`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Map;
/// use magpie::prelude::*;
///
/// let squares: Map<_, _> = (0..4u32).into_par_iter().map(|x| x * x);
/// assert_eq!(squares.len(), 4); // still indexed
/// assert_eq!(squares.collect::<Vec<_>>(), [0, 1, 4, 9]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Map<I, F> {
    base: I,
    map_op: F,
}

impl<I, F> Map<I, F> {
    pub(crate) fn new(base: I, map_op: F) -> Self {
        Map { base, map_op }
    }
}

impl<I, F, R> ParallelIterator for Map<I, F>
where
    I: ParallelIterator,
    F: Fn(I::Item) -> R + Sync + Send,
    R: Send,
{
    type Item = R;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<R>,
    {
        self.base
            .drive_unindexed(MapConsumer::new(consumer, &self.map_op))
    }

    fn opt_len(&self) -> Option<usize> {
        self.base.opt_len()
    }
}

impl<I, F, R> IndexedParallelIterator for Map<I, F>
where
    I: IndexedParallelIterator,
    F: Fn(I::Item) -> R + Sync + Send,
    R: Send,
{
    fn len(&self) -> usize {
        self.base.len()
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<R>,
    {
        self.base.drive(MapConsumer::new(consumer, &self.map_op))
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<R>,
    {
        return self.base.with_producer(Callback {
            callback,
            map_op: &self.map_op,
        });

        struct Callback<'f, CB, F> {
            callback: CB,
            map_op: &'f F,
        }

        impl<'f, T, R, CB, F> ProducerCallback<T> for Callback<'f, CB, F>
        where
            CB: ProducerCallback<R>,
            F: Fn(T) -> R + Sync,
        {
            type Output = CB::Output;

            fn callback<P>(self, base: P) -> CB::Output
            where
                P: Producer<Item = T>,
            {
                self.callback.callback(MapProducer {
                    base,
                    map_op: self.map_op,
                })
            }
        }
    }
}

struct MapProducer<'f, P, F> {
    base: P,
    map_op: &'f F,
}

impl<'f, P, F, R> Producer for MapProducer<'f, P, F>
where
    P: Producer,
    F: Fn(P::Item) -> R + Sync,
{
    type Item = R;
    type IntoIter = std::iter::Map<P::IntoIter, &'f F>;

    fn into_iter(self) -> Self::IntoIter {
        self.base.into_iter().map(self.map_op)
    }

    fn min_len(&self) -> usize {
        self.base.min_len()
    }

    fn max_len(&self) -> usize {
        self.base.max_len()
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(index);
        (
            MapProducer {
                base: left,
                map_op: self.map_op,
            },
            MapProducer {
                base: right,
                map_op: self.map_op,
            },
        )
    }

    fn fold_with<G>(self, folder: G) -> G
    where
        G: Folder<R>,
    {
        let folder = MapFolder {
            base: folder,
            map_op: self.map_op,
        };
        self.base.fold_with(folder).base
    }
}

/// Applies `map_op` to each item before `base` sees it. Also used by adapters that are a map
/// underneath (`inspect`, `enumerate`'s consumer side).
pub(crate) struct MapConsumer<'f, C, F> {
    base: C,
    map_op: &'f F,
}

impl<'f, C, F> MapConsumer<'f, C, F> {
    pub(crate) fn new(base: C, map_op: &'f F) -> Self {
        MapConsumer { base, map_op }
    }
}

impl<'f, T, R, C, F> Consumer<T> for MapConsumer<'f, C, F>
where
    C: Consumer<R>,
    F: Fn(T) -> R + Sync,
{
    type Folder = MapFolder<'f, C::Folder, F>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, C::Reducer) {
        let (left, right, reducer) = self.base.split_at(index);
        (
            MapConsumer::new(left, self.map_op),
            MapConsumer::new(right, self.map_op),
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        MapFolder {
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

impl<'f, T, R, C, F> UnindexedConsumer<T> for MapConsumer<'f, C, F>
where
    C: UnindexedConsumer<R>,
    F: Fn(T) -> R + Sync,
{
    fn split_off_left(&self) -> Self {
        MapConsumer::new(self.base.split_off_left(), self.map_op)
    }

    fn to_reducer(&self) -> C::Reducer {
        self.base.to_reducer()
    }
}

pub(crate) struct MapFolder<'f, G, F> {
    base: G,
    map_op: &'f F,
}

impl<'f, T, R, G, F> Folder<T> for MapFolder<'f, G, F>
where
    G: Folder<R>,
    F: Fn(T) -> R,
{
    type Result = G::Result;

    fn consume(self, item: T) -> Self {
        MapFolder {
            base: self.base.consume((self.map_op)(item)),
            map_op: self.map_op,
        }
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        // The whole mapped iterator goes down in one piece, so a `sum` below still sees one
        // tight loop it can vectorize.
        MapFolder {
            base: self.base.consume_iter(iter.into_iter().map(self.map_op)),
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

/// The iterator returned by [`ParallelIterator::inspect`].
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use magpie::iter::Inspect;
/// use magpie::prelude::*;
///
/// let negative = AtomicUsize::new(0);
/// let values = [3, -1, 4, -1, 5];
/// let watched: Inspect<_, _> = values.par_iter().inspect(|&&x| {
///     if x < 0 {
///         negative.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// assert_eq!(watched.sum::<i32>(), 10);
/// assert_eq!(negative.into_inner(), 2);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Inspect<I, F> {
    base: I,
    inspect_op: F,
}

impl<I, F> Inspect<I, F> {
    pub(crate) fn new(base: I, inspect_op: F) -> Self {
        Inspect { base, inspect_op }
    }
}

/// `inspect` is a `map` that hands the item back after showing it to the closure.
fn inspector<T, F: Fn(&T) + Sync>(inspect_op: &F) -> impl Fn(T) -> T + Sync + '_ {
    move |item| {
        inspect_op(&item);
        item
    }
}

impl<I, F> ParallelIterator for Inspect<I, F>
where
    I: ParallelIterator,
    F: Fn(&I::Item) + Sync + Send,
{
    type Item = I::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<I::Item>,
    {
        let op = inspector(&self.inspect_op);
        self.base.drive_unindexed(MapConsumer::new(consumer, &op))
    }

    fn opt_len(&self) -> Option<usize> {
        self.base.opt_len()
    }
}

impl<I, F> IndexedParallelIterator for Inspect<I, F>
where
    I: IndexedParallelIterator,
    F: Fn(&I::Item) + Sync + Send,
{
    fn len(&self) -> usize {
        self.base.len()
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<I::Item>,
    {
        let op = inspector(&self.inspect_op);
        self.base.drive(MapConsumer::new(consumer, &op))
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<I::Item>,
    {
        Map::new(self.base, inspector(&self.inspect_op)).with_producer(callback)
    }
}
