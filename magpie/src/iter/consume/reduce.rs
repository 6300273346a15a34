//! The consumers that combine every item into one value: `for_each`, `reduce_with` (and
//! through it `reduce`), `sum` and `product`. None of them can exit early, so none is ever
//! full.

use std::iter::{Product, Sum};
use std::marker::PhantomData;

use crate::iter::plumbing::{Consumer, Folder, NoopReducer, Reducer, UnindexedConsumer};
use crate::iter::ParallelIterator;

pub(crate) fn for_each<I, F>(iter: I, op: &F)
where
    I: ParallelIterator,
    F: Fn(I::Item) + Sync,
{
    iter.drive_unindexed(ForEachConsumer { op });
}

struct ForEachConsumer<'f, F> {
    op: &'f F,
}

impl<'f, T, F> Consumer<T> for ForEachConsumer<'f, F>
where
    F: Fn(T) + Sync,
{
    type Folder = Self;
    type Reducer = NoopReducer;
    type Result = ();

    fn split_at(self, _index: usize) -> (Self, Self, NoopReducer) {
        (self.split_off_left(), self, NoopReducer)
    }

    fn into_folder(self) -> Self {
        self
    }

    fn full(&self) -> bool {
        false
    }

    fn splits_cheaply(&self) -> bool {
        // Each item is handed to the closure alone: pieces show nowhere.
        true
    }
}

impl<'f, T, F> UnindexedConsumer<T> for ForEachConsumer<'f, F>
where
    F: Fn(T) + Sync,
{
    fn split_off_left(&self) -> Self {
        ForEachConsumer { op: self.op }
    }

    fn to_reducer(&self) -> NoopReducer {
        NoopReducer
    }
}

impl<'f, T, F> Folder<T> for ForEachConsumer<'f, F>
where
    F: Fn(T) + Sync,
{
    type Result = ();

    fn consume(self, item: T) -> Self {
        (self.op)(item);
        self
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        iter.into_iter().for_each(self.op);
        self
    }

    fn complete(self) {}

    fn full(&self) -> bool {
        false
    }
}

/// How two partial results combine: `+` for `sum`, `*` for `product`.
trait Combine: Send + Sized {
    fn combine(left: Self, right: Self) -> Self;
}

/// How a sequence of items becomes a partial result. `sum` and `product` share one consumer,
/// and the [`Accumulator`]'s kind picks between them.
trait Accumulate<T>: Combine {
    fn accumulate<I: Iterator<Item = T>>(iter: I) -> Self;
}

struct Summing;
struct Multiplying;

/// An `S` computed by summing or by multiplying, as `Kind` says.
struct Accumulator<S, Kind>(S, PhantomData<Kind>);

impl<S: Sum<S> + Send> Combine for Accumulator<S, Summing> {
    fn combine(left: Self, right: Self) -> Self {
        Accumulator([left.0, right.0].into_iter().sum(), PhantomData)
    }
}

impl<T, S: Sum<T> + Sum<S> + Send> Accumulate<T> for Accumulator<S, Summing> {
    fn accumulate<I: Iterator<Item = T>>(iter: I) -> Self {
        Accumulator(iter.sum(), PhantomData)
    }
}

impl<S: Product<S> + Send> Combine for Accumulator<S, Multiplying> {
    fn combine(left: Self, right: Self) -> Self {
        Accumulator([left.0, right.0].into_iter().product(), PhantomData)
    }
}

impl<T, S: Product<T> + Product<S> + Send> Accumulate<T> for Accumulator<S, Multiplying> {
    fn accumulate<I: Iterator<Item = T>>(iter: I) -> Self {
        Accumulator(iter.product(), PhantomData)
    }
}

pub(crate) fn sum<I, S>(iter: I) -> S
where
    I: ParallelIterator,
    S: Sum<I::Item> + Sum<S> + Send,
{
    iter.drive_unindexed(AccumulateConsumer::<Accumulator<S, Summing>>(PhantomData))
        .0
}

pub(crate) fn product<I, P>(iter: I) -> P
where
    I: ParallelIterator,
    P: Product<I::Item> + Product<P> + Send,
{
    iter.drive_unindexed(AccumulateConsumer::<Accumulator<P, Multiplying>>(
        PhantomData,
    ))
    .0
}

struct AccumulateConsumer<A>(PhantomData<fn() -> A>);

impl<A> Clone for AccumulateConsumer<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for AccumulateConsumer<A> {}

impl<T, A> Consumer<T> for AccumulateConsumer<A>
where
    A: Accumulate<T>,
{
    type Folder = AccumulateFolder<A>;
    type Reducer = Self;
    type Result = A;

    fn split_at(self, _index: usize) -> (Self, Self, Self) {
        (self, self, self)
    }

    fn into_folder(self) -> AccumulateFolder<A> {
        AccumulateFolder(A::accumulate(std::iter::empty()))
    }

    fn full(&self) -> bool {
        false
    }

    fn splits_cheaply(&self) -> bool {
        // Pieces are folded from the identity and joined with the associative
        // operation (a sum, a product, a minimum): where they fall does not show.
        true
    }
}

impl<T, A> UnindexedConsumer<T> for AccumulateConsumer<A>
where
    A: Accumulate<T>,
{
    fn split_off_left(&self) -> Self {
        *self
    }

    fn to_reducer(&self) -> Self {
        *self
    }
}

impl<A> Reducer<A> for AccumulateConsumer<A>
where
    A: Combine,
{
    fn reduce(self, left: A, right: A) -> A {
        A::combine(left, right)
    }
}

struct AccumulateFolder<A>(A);

impl<T, A> Folder<T> for AccumulateFolder<A>
where
    A: Accumulate<T>,
{
    type Result = A;

    fn consume(self, item: T) -> Self {
        self.consume_iter(std::iter::once(item))
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        // The whole piece in one call to `Sum::sum`: for slices of numbers, a vectorized loop.
        AccumulateFolder(A::combine(self.0, A::accumulate(iter.into_iter())))
    }

    fn complete(self) -> A {
        self.0
    }

    fn full(&self) -> bool {
        false
    }
}

pub(crate) fn reduce_with<I, OP>(iter: I, op: &OP) -> Option<I::Item>
where
    I: ParallelIterator,
    OP: Fn(I::Item, I::Item) -> I::Item + Sync,
{
    iter.drive_unindexed(ReduceWithConsumer { op })
}

/// `reduce` without an identity: a piece's result is `None` until it sees its first item.
struct ReduceWithConsumer<'f, OP> {
    op: &'f OP,
}

impl<'f, OP> Clone for ReduceWithConsumer<'f, OP> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<'f, OP> Copy for ReduceWithConsumer<'f, OP> {}

impl<'f, T, OP> Consumer<T> for ReduceWithConsumer<'f, OP>
where
    OP: Fn(T, T) -> T + Sync,
    T: Send,
{
    type Folder = ReduceWithFolder<'f, OP, T>;
    type Reducer = Self;
    type Result = Option<T>;

    fn split_at(self, _index: usize) -> (Self, Self, Self) {
        (self, self, self)
    }

    fn into_folder(self) -> Self::Folder {
        ReduceWithFolder {
            op: self.op,
            item: None,
        }
    }

    fn full(&self) -> bool {
        false
    }

    fn splits_cheaply(&self) -> bool {
        // Pieces are joined with the associative operation, as items are.
        true
    }
}

impl<'f, T, OP> UnindexedConsumer<T> for ReduceWithConsumer<'f, OP>
where
    OP: Fn(T, T) -> T + Sync,
    T: Send,
{
    fn split_off_left(&self) -> Self {
        *self
    }

    fn to_reducer(&self) -> Self {
        *self
    }
}

impl<'f, T, OP> Reducer<Option<T>> for ReduceWithConsumer<'f, OP>
where
    OP: Fn(T, T) -> T + Sync,
{
    fn reduce(self, left: Option<T>, right: Option<T>) -> Option<T> {
        match (left, right) {
            (Some(left), Some(right)) => Some((self.op)(left, right)),
            (left, None) => left,
            (None, right) => right,
        }
    }
}

struct ReduceWithFolder<'f, OP, T> {
    op: &'f OP,
    item: Option<T>,
}

impl<'f, T, OP> Folder<T> for ReduceWithFolder<'f, OP, T>
where
    OP: Fn(T, T) -> T + Sync,
{
    type Result = Option<T>;

    fn consume(self, item: T) -> Self {
        let item = match self.item {
            Some(acc) => (self.op)(acc, item),
            None => item,
        };
        ReduceWithFolder {
            op: self.op,
            item: Some(item),
        }
    }

    fn consume_iter<I>(self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        // Settle the `Option` once, so the loop itself carries a plain `T` (as `Iterator::
        // min_by_key` does): measurably faster for `min`/`max` over numbers.
        let mut iter = iter.into_iter();
        let first = self.item.or_else(|| iter.next());
        ReduceWithFolder {
            op: self.op,
            item: first.map(|first| iter.fold(first, self.op)),
        }
    }

    fn complete(self) -> Option<T> {
        self.item
    }

    fn full(&self) -> bool {
        false
    }
}
