//! Splitting a producer and a consumer in step: the only place parallel iterators fork.
//!
//! How many pieces (see README.md beside this file for the whole story):
//!
//! 1. A computation starts with a budget of `splits` = the number of workers, and halves it
//!    at each split, so an undisturbed run cuts its input into about 2 × workers pieces:
//!    enough for every worker to take one, few enough that each piece is long and runs as a
//!    tight sequential loop.
//! 2. A piece that was **stolen** (it runs on another worker than the one that split it)
//!    resets its budget to at least the number of workers: the thief had nothing to do, so
//!    the load is uneven, and the stolen piece is cut again so that its work can spread too.
//!    This is Rayon's *thief-splitting* (rayon-core `iter/plumbing/mod.rs`, `Splitter`), and
//!    it is what handles uneven per-item costs without tuning.
//! 3. A piece is never cut below the producer's `min_len` (at least 1) and always cut above
//!    its `max_len`.
//! 4. An input too short to cut at all runs on the calling thread, without touching the
//!    pool, not even to enter it from outside.

use super::{Consumer, Folder, Producer, ProducerCallback, Reducer};
use crate::iter::IndexedParallelIterator;

/// Drives the indexed iterator `iter` into `consumer`: gets its producer and hands both to
/// [`bridge_producer_consumer`].
///
/// This is how an indexed iterator implements [`drive`](IndexedParallelIterator::drive) and
/// [`drive_unindexed`](crate::iter::ParallelIterator::drive_unindexed). The
/// [module docs](super) implement an iterator that way.
///
/// # Examples
///
/// Driving a range's iterator into a consumer of one's own (`ToVec` collects `u32`s in
/// order: see [`Consumer`]):
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
/// use magpie::iter::plumbing::bridge;
/// use magpie::prelude::*;
///
/// let squares = bridge((0..5u32).into_par_iter().map(|x| x * x), ToVec);
/// assert_eq!(squares, [0, 1, 4, 9, 16]);
/// ```
pub fn bridge<I, C>(iter: I, consumer: C) -> C::Result
where
    I: IndexedParallelIterator,
    C: Consumer<I::Item>,
{
    let len = iter.len();
    iter.with_producer(Callback { len, consumer })
}

struct Callback<C> {
    len: usize,
    consumer: C,
}

impl<C, Item> ProducerCallback<Item> for Callback<C>
where
    C: Consumer<Item>,
{
    type Output = C::Result;

    fn callback<P>(self, producer: P) -> C::Result
    where
        P: Producer<Item = Item>,
    {
        bridge_producer_consumer(self.len, producer, self.consumer)
    }
}

/// Splits `producer` (of `len` items) and `consumer` in step across the current runtime's
/// workers, folds each piece sequentially, and reduces the results in order.
///
/// See the docs of this module (`iter/plumbing/bridge.rs`) and the [plumbing docs](super)
/// for how.
///
/// # Examples
///
/// A producer of one's own, without an iterator around it (`ToVec` collects `u32`s in
/// order: see [`Consumer`]):
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
/// use magpie::iter::plumbing::{bridge_producer_consumer, Producer};
///
/// /// The squares of `start..end`.
/// struct Squares(u32, u32);
///
/// impl Producer for Squares {
///     type Item = u32;
///     type IntoIter = std::iter::Map<std::ops::Range<u32>, fn(u32) -> u32>;
///
///     fn into_iter(self) -> Self::IntoIter {
///         (self.0..self.1).map(|i| i * i)
///     }
///     fn split_at(self, index: usize) -> (Self, Self) {
///         let mid = self.0 + index as u32;
///         (Squares(self.0, mid), Squares(mid, self.1))
///     }
/// }
///
/// let squares = bridge_producer_consumer(1000, Squares(0, 1000), ToVec);
/// assert_eq!(squares.len(), 1000);
/// assert_eq!(squares[999], 999 * 999);
/// assert!(squares.windows(2).all(|w| w[0] < w[1])); // in order
/// ```
pub fn bridge_producer_consumer<P, C>(len: usize, producer: P, consumer: C) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    let min = producer.min_len().max(1);
    if len / 2 < min && len <= producer.max_len() {
        // Rule 4: nothing to split, so nothing to schedule.
        return producer.fold_with(consumer.into_folder()).complete();
    }
    let splitter = LengthSplitter::new(min, producer.max_len(), len);
    split_and_fold(len, false, splitter, producer, consumer)
}

fn split_and_fold<P, C>(
    len: usize,
    stolen: bool,
    mut splitter: LengthSplitter,
    producer: P,
    consumer: C,
) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    if consumer.full() {
        // The answer is already certain (early exit): start nothing more.
        return consumer.into_folder().complete();
    }
    if !splitter.try_split(len, stolen) {
        return producer.fold_with(consumer.into_folder()).complete();
    }
    let mid = len / 2;
    let (left_producer, right_producer) = producer.split_at(mid);
    let (left_consumer, right_consumer, reducer) = consumer.split_at(mid);
    let (left, right) = join_migrated(
        |stolen| split_and_fold(mid, stolen, splitter, left_producer, left_consumer),
        |stolen| split_and_fold(len - mid, stolen, splitter, right_producer, right_consumer),
    );
    reducer.reduce(left, right)
}

/// [`join`](fn@crate::join), telling each half whether it runs on another worker than the one
/// that called: `true` for a stolen half, and for both halves of a call from outside the pool.
fn join_migrated<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce(bool) -> RA + Send,
    B: FnOnce(bool) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let origin = crate::current_worker_index();
    crate::join(
        move || a(crate::current_worker_index() != origin),
        move || b(crate::current_worker_index() != origin),
    )
}

/// The split budget (rules 1 and 2 of the module docs).
#[derive(Clone, Copy, Debug)]
struct Splitter {
    splits: usize,
}

impl Splitter {
    fn new() -> Splitter {
        Splitter {
            splits: crate::current_num_workers(),
        }
    }

    /// Whether to split once more; `stolen` says the piece at hand was stolen.
    fn try_split(&mut self, stolen: bool) -> bool {
        if stolen {
            self.splits = (self.splits / 2).max(crate::current_num_workers());
            true
        } else if self.splits > 0 {
            self.splits /= 2;
            true
        } else {
            false
        }
    }
}

/// [`Splitter`] plus the length bounds of rule 3.
#[derive(Clone, Copy, Debug)]
struct LengthSplitter {
    inner: Splitter,
    min: usize,
}

impl LengthSplitter {
    fn new(min: usize, max: usize, len: usize) -> LengthSplitter {
        let mut inner = Splitter::new();
        // Pieces of at most `max` items need at least `len / max` splits; the budget halves
        // per level, so a budget of `len / max` covers that many levels' worth of pieces.
        let needed = len / max.max(1);
        inner.splits = inner.splits.max(needed);
        LengthSplitter { inner, min }
    }

    fn try_split(&mut self, len: usize, stolen: bool) -> bool {
        len / 2 >= self.min && self.inner.try_split(stolen)
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use crate::Runtime;

    /// The number of items in each piece, in order: `fold` yields one accumulator per piece.
    fn piece_sizes<I: IndexedParallelIterator>(iter: I) -> Vec<usize> {
        iter.fold(|| 0usize, |n, _| n + 1).collect()
    }

    #[test]
    fn unsplittable_input_runs_on_the_calling_thread() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        rt.block_on(async {
            // Inside `block_on` the runtime is current, but this thread is not a worker.
            let ran_on = std::sync::Mutex::new(Vec::new());
            let record = || ran_on.lock().unwrap().push(crate::current_worker_index());
            [1u8].par_iter().for_each(|_| record());
            (0..10u8)
                .into_par_iter()
                .with_min_len(10)
                .for_each(|_| record());
            assert_eq!(ran_on.into_inner().unwrap(), vec![None; 11]);
        });
    }

    #[test]
    fn splittable_input_runs_on_workers() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        rt.block_on(async {
            let on_workers = (0..1000u32)
                .into_par_iter()
                .map(|_| crate::current_worker_index().is_some())
                .all(|on_worker| on_worker);
            assert!(on_workers);
        });
    }

    #[test]
    fn max_len_bounds_every_piece() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        for max in [1, 3, 64] {
            let sizes = rt.install(|| piece_sizes((0..1000u32).into_par_iter().with_max_len(max)));
            assert_eq!(sizes.iter().sum::<usize>(), 1000);
            assert!(sizes.iter().all(|&n| n <= max), "max {max}: {sizes:?}");
        }
    }

    #[test]
    fn min_len_bounds_every_piece() {
        let rt = Runtime::builder().worker_threads(4).build().unwrap();
        let sizes = rt.install(|| piece_sizes((0..1000u32).into_par_iter().with_min_len(300)));
        assert_eq!(sizes.iter().sum::<usize>(), 1000);
        assert!(sizes.iter().all(|&n| n >= 300), "{sizes:?}");
        let whole = rt.install(|| piece_sizes((0..1000u32).into_par_iter().with_min_len(1000)));
        assert_eq!(whole, [1000]);
    }

    #[test]
    fn an_undisturbed_run_makes_a_few_pieces_per_worker() {
        // One worker: nothing is ever stolen, so the split budget alone decides: 1 split at
        // the top, then 0: two pieces.
        let rt = Runtime::builder().worker_threads(1).build().unwrap();
        let sizes = rt.install(|| piece_sizes((0..1000u32).into_par_iter()));
        assert_eq!(sizes, [500, 500]);
    }
}
