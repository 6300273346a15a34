//! `fold`: one accumulator per piece, handed on as an item once the piece is done. What
//! comes out is as many items as there were pieces, usually reduced next.

use crate::iter::plumbing::{Consumer, Folder, UnindexedConsumer};
use crate::iter::ParallelIterator;

/// The iterator returned by [`ParallelIterator::fold`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Fold;
/// use magpie::prelude::*;
///
/// // One running count per piece; how many pieces there are is the bridge's choice.
/// let counts: Fold<_, _, _> = (0..1000u32).into_par_iter().fold(|| 0usize, |n, _| n + 1);
/// let counts: Vec<usize> = counts.collect();
/// assert!(!counts.is_empty());
/// assert_eq!(counts.iter().sum::<usize>(), 1000);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `reduce` or `collect`"]
#[derive(Clone, Debug)]
pub struct Fold<I, ID, F> {
    base: I,
    identity: ID,
    fold_op: F,
}

impl<I, ID, F> Fold<I, ID, F> {
    pub(crate) fn new(base: I, identity: ID, fold_op: F) -> Self {
        Fold {
            base,
            identity,
            fold_op,
        }
    }
}

impl<I, ID, F, T> ParallelIterator for Fold<I, ID, F>
where
    I: ParallelIterator,
    ID: Fn() -> T + Sync + Send,
    F: Fn(T, I::Item) -> T + Sync + Send,
    T: Send,
{
    type Item = T;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<T>,
    {
        self.base.drive_unindexed(FoldConsumer {
            base: consumer,
            identity: &self.identity,
            fold_op: &self.fold_op,
        })
    }
}

struct FoldConsumer<'f, C, ID, F> {
    base: C,
    identity: &'f ID,
    fold_op: &'f F,
}

impl<'f, C, ID, F, T, Item> Consumer<Item> for FoldConsumer<'f, C, ID, F>
where
    C: Consumer<T>,
    ID: Fn() -> T + Sync,
    F: Fn(T, Item) -> T + Sync,
    T: Send,
{
    type Folder = FoldFolder<'f, C::Folder, F, T>;
    type Reducer = C::Reducer;
    type Result = C::Result;

    fn split_at(self, index: usize) -> (Self, Self, C::Reducer) {
        let (left, right, reducer) = self.base.split_at(index);
        (
            FoldConsumer { base: left, ..self },
            FoldConsumer {
                base: right,
                ..self
            },
            reducer,
        )
    }

    fn into_folder(self) -> Self::Folder {
        FoldFolder {
            base: self.base.into_folder(),
            accumulator: (self.identity)(),
            fold_op: self.fold_op,
        }
    }

    fn full(&self) -> bool {
        self.base.full()
    }
}

impl<'f, C, ID, F, T, Item> UnindexedConsumer<Item> for FoldConsumer<'f, C, ID, F>
where
    C: UnindexedConsumer<T>,
    ID: Fn() -> T + Sync,
    F: Fn(T, Item) -> T + Sync,
    T: Send,
{
    fn split_off_left(&self) -> Self {
        FoldConsumer {
            base: self.base.split_off_left(),
            ..*self
        }
    }

    fn to_reducer(&self) -> C::Reducer {
        self.base.to_reducer()
    }
}

struct FoldFolder<'f, G, F, T> {
    base: G,
    accumulator: T,
    fold_op: &'f F,
}

impl<'f, G, F, T, Item> Folder<Item> for FoldFolder<'f, G, F, T>
where
    G: Folder<T>,
    F: Fn(T, Item) -> T,
{
    type Result = G::Result;

    fn consume(self, item: Item) -> Self {
        FoldFolder {
            accumulator: (self.fold_op)(self.accumulator, item),
            ..self
        }
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = Item>,
    {
        let FoldFolder {
            base,
            accumulator,
            fold_op,
        } = self;
        // Only a consumer further down (a `find_any` after this fold) can become full; ask
        // it between items so an early exit still stops this piece.
        let accumulator = iter
            .into_iter()
            .take_while(|_| !base.full())
            .fold(accumulator, fold_op);
        FoldFolder {
            base,
            accumulator,
            fold_op,
        }
    }

    fn complete(self) -> G::Result {
        self.base.consume(self.accumulator).complete()
    }

    fn full(&self) -> bool {
        self.base.full()
    }
}
