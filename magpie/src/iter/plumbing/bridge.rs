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
//! 5. A piece the rules above leave whole is cut on demand, when its consumer
//!    [splits cheaply](Consumer::splits_cheaply) (not a `fold`, whose pieces show) and the
//!    piece is at least [`LOOK_EVERY`] × 4 items long: its worker folds its first half
//!    [`LOOK_EVERY`] items at a time, and between two chunks asks whether another worker of
//!    the pool is awake with nothing to run while its own deque offers nothing to take. If
//!    so, it hands the second half to the pool (`join`, its fold of the first half's rest
//!    as the first closure) and the stolen half splits by rule 2; else it goes on, and once
//!    the first half is done, treats the second half the same way. Rules 1 and 2 cut for
//!    the thieves a run *will* have; this one cuts for those it *has*, at the end of a run
//!    above all, when the last pieces would leave every other worker idle (Rayon stops at
//!    rule 2). One consumer cut per halving, one look per chunk: a few nanoseconds per
//!    [`LOOK_EVERY`] items (BENCHMARKS.md, "eighteenth").

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
        return fold_piece(len, producer, consumer);
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

/// Items a piece folds between two looks at whether other workers starve (rule 5): a few
/// microseconds of the cheapest loops (a sum of `u64`s from memory), so that the look and the
/// loop's restart cost them well under 1%. Under Miri, 64: the same rule on inputs that Miri
/// can run through in seconds.
pub(crate) const LOOK_EVERY: usize = if cfg!(miri) { 64 } else { 4096 };

/// Folds a piece that rules 1 to 4 leave whole, handing half of its rest to the pool when
/// other workers starve (rule 5).
fn fold_piece<P, C>(len: usize, producer: P, consumer: C) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    fold_piece_with(
        len,
        producer,
        consumer,
        &crate::runtime::worker::others_starve,
    )
}

/// [`fold_piece`], with `starving` for the look between chunks (a test's own, or
/// [`others_starve`](crate::runtime::worker::others_starve)).
fn fold_piece_with<P, C>(
    len: usize,
    producer: P,
    consumer: C,
    starving: &dyn Fn() -> bool,
) -> C::Result
where
    P: Producer,
    C: Consumer<P::Item>,
{
    let chunk = LOOK_EVERY.max(producer.min_len());
    // The shortest piece cut on demand: two chunks, then a look, in its first half.
    let shortest = chunk.saturating_mul(4);
    if len < shortest
        || !consumer.splits_cheaply()
        || !crate::runtime::worker::splits_on_demand_here()
    {
        return producer.fold_with(consumer.into_folder()).complete();
    }
    let min = producer.min_len().max(1);
    // The result of the items folded so far, and the reducer that joins it to the rest's.
    let mut done: Option<(C::Result, C::Reducer)> = None;
    let (mut producer, mut consumer, mut len) = (producer, consumer, len);
    while len >= shortest {
        if consumer.full() {
            // An earlier half settled the result (`any`, a `find`): fold nothing more.
            return after(done, consumer.into_folder().complete());
        }
        let mid = len / 2;
        let (first, second) = producer.split_at(mid);
        let (first_consumer, second_consumer, reducer) = consumer.split_at(mid);
        match fold_watching(mid, chunk, first, first_consumer.into_folder(), starving) {
            Watched::Folded(folder) => {
                done = Some((after(done, folder.complete()), reducer));
                (producer, consumer, len) = (second, second_consumer, len - mid);
            }
            Watched::Starving(rest, folder) => {
                // The second half to the pool; the first half's rest here, without looking
                // again: a second thief finds the pieces the first one cuts (rule 2).
                let rest_len = len - mid;
                let origin = crate::current_worker_index();
                let (first, second) = crate::join::join_here(
                    move || rest.fold_with(folder).complete(),
                    move || {
                        let stolen = crate::current_worker_index() != origin;
                        split_and_fold(
                            rest_len,
                            stolen,
                            LengthSplitter::spent(min),
                            second,
                            second_consumer,
                        )
                    },
                );
                return after(done, reducer.reduce(first, second));
            }
        }
    }
    after(done, producer.fold_with(consumer.into_folder()).complete())
}

/// How [`fold_watching`] ended.
enum Watched<P, F> {
    /// Every item folded (or the folder full).
    Folded(F),
    /// Another worker starves: the items still to fold, and the folder so far.
    Starving(P, F),
}

/// Folds `producer`'s `len` items into `folder`, `chunk` at a time, asking `starving` after
/// each chunk but the last.
fn fold_watching<P, F>(
    mut len: usize,
    chunk: usize,
    mut producer: P,
    mut folder: F,
    starving: &dyn Fn() -> bool,
) -> Watched<P, F>
where
    P: Producer,
    F: Folder<P::Item>,
{
    while len > chunk {
        let (head, rest) = producer.split_at(chunk);
        folder = head.fold_with(folder);
        (producer, len) = (rest, len - chunk);
        if folder.full() {
            // Nothing more can change the result: the rest need not be folded.
            return Watched::Folded(folder);
        }
        if starving() {
            return Watched::Starving(producer, folder);
        }
    }
    Watched::Folded(producer.fold_with(folder))
}

/// `next`, after what `done` holds, if anything.
fn after<T, R: Reducer<T>>(done: Option<(T, R)>, next: T) -> T {
    match done {
        Some((done, reducer)) => reducer.reduce(done, next),
        None => next,
    }
}

/// [`join`](fn@crate::join), telling each half whether it runs on another worker than the one
/// that called: `true` for a stolen half, and for both halves of a call from outside the pool.
/// The second half is offered to the pool at every level, whatever the worker's deque holds
/// (`join_offered`: the split spine has no work between its levels, so `join`'s reserve would
/// keep the deepest ones from thieves).
fn join_migrated<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce(bool) -> RA + Send,
    B: FnOnce(bool) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let origin = crate::current_worker_index();
    crate::join::join_offered(
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

    /// A budget spent: the piece stays whole unless stolen (rule 2) or cut on demand
    /// (rule 5).
    fn spent(min: usize) -> LengthSplitter {
        LengthSplitter {
            inner: Splitter { splits: 0 },
            min,
        }
    }

    fn try_split(&mut self, len: usize, stolen: bool) -> bool {
        len / 2 >= self.min && self.inner.try_split(stolen)
    }
}

#[cfg(test)]
mod tests {
    use super::{Consumer, Folder, Producer, ProducerCallback, Reducer};
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

    /// Rule 5's test consumer: the pieces it was cut into, as the ranges of items each
    /// folder took, in order. `cheap` is what it says of its splits; it is full once it has
    /// seen `stop_at`, if given.
    #[derive(Clone, Copy)]
    struct Pieces<'a> {
        cheap: bool,
        stop_at: Option<usize>,
        seen_stop: &'a std::sync::atomic::AtomicBool,
    }

    struct PiecesFolder<'a> {
        of: Pieces<'a>,
        items: Vec<usize>,
    }

    struct Concat;

    impl<'a> Consumer<usize> for Pieces<'a> {
        type Folder = PiecesFolder<'a>;
        type Reducer = Concat;
        type Result = Vec<Vec<usize>>;

        fn split_at(self, _: usize) -> (Self, Self, Concat) {
            (self, self, Concat)
        }
        fn into_folder(self) -> PiecesFolder<'a> {
            PiecesFolder {
                of: self,
                items: Vec::new(),
            }
        }
        fn full(&self) -> bool {
            self.seen_stop.load(std::sync::atomic::Ordering::Relaxed)
        }
        fn splits_cheaply(&self) -> bool {
            self.cheap
        }
    }

    impl Folder<usize> for PiecesFolder<'_> {
        type Result = Vec<Vec<usize>>;

        fn consume(mut self, item: usize) -> Self {
            if Some(item) == self.of.stop_at {
                self.of
                    .seen_stop
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            self.items.push(item);
            self
        }
        fn complete(self) -> Vec<Vec<usize>> {
            if self.items.is_empty() {
                Vec::new()
            } else {
                vec![self.items]
            }
        }
        fn full(&self) -> bool {
            self.of.full()
        }
    }

    impl Reducer<Vec<Vec<usize>>> for Concat {
        fn reduce(self, mut left: Vec<Vec<usize>>, right: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
            left.extend(right);
            left
        }
    }

    /// Folds `0..len` as one piece through `fold_piece_with`, asking `starving`: the pieces,
    /// as `(first item, items)`, after checking that together they hold every item in order.
    fn fold_one_piece(
        len: usize,
        consumer: Pieces<'_>,
        starving: &dyn Fn() -> bool,
    ) -> Vec<(usize, usize)> {
        struct Fold<'a, 'b> {
            len: usize,
            consumer: Pieces<'a>,
            starving: &'b dyn Fn() -> bool,
        }
        impl ProducerCallback<usize> for Fold<'_, '_> {
            type Output = Vec<Vec<usize>>;
            fn callback<P: Producer<Item = usize>>(self, producer: P) -> Vec<Vec<usize>> {
                super::fold_piece_with(self.len, producer, self.consumer, self.starving)
            }
        }
        let pieces = (0..len).into_par_iter().with_producer(Fold {
            len,
            consumer,
            starving,
        });
        let items: Vec<usize> = pieces.iter().flatten().copied().collect();
        let stopped = consumer.stop_at.is_some();
        assert!(
            items.iter().copied().eq(0..items.len()),
            "the pieces lost or reordered items"
        );
        assert!(
            stopped || items.len() == len,
            "{} of {len} items",
            items.len()
        );
        pieces.iter().map(|p| (p[0], p.len())).collect()
    }

    fn unstopped(cheap: bool, seen: &std::sync::atomic::AtomicBool) -> Pieces<'_> {
        Pieces {
            cheap,
            stop_at: None,
            seen_stop: seen,
        }
    }

    #[test]
    fn a_long_piece_nobody_starves_for_is_folded_in_halves() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let chunk = super::LOOK_EVERY;
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let seen = std::sync::atomic::AtomicBool::new(false);
        let looks = AtomicUsize::new(0);
        let never = || {
            looks.fetch_add(1, Relaxed);
            false
        };
        let len = 16 * chunk + 5;
        let pieces = rt.install(|| fold_one_piece(len, unstopped(true, &seen), &never));
        // Halves until less than four chunks are left, then the rest whole.
        let (mut expected, mut at, mut left) = (Vec::new(), 0, len);
        while left >= 4 * chunk {
            expected.push((at, left / 2));
            at += left / 2;
            left -= left / 2;
        }
        expected.push((at, left));
        assert_eq!(pieces, expected);
        // One look after each chunk of each half but its last.
        let wanted: usize = expected[..expected.len() - 1]
            .iter()
            .map(|&(_, n)| n.div_ceil(chunk) - 1)
            .sum();
        assert_eq!(looks.load(Relaxed), wanted);
    }

    #[test]
    fn a_piece_hands_its_second_half_over_when_another_worker_starves() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let chunk = super::LOOK_EVERY;
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let seen = std::sync::atomic::AtomicBool::new(false);
        let len = 16 * chunk;
        // Starving at the third look: the first half is one piece whatever happens next, and
        // the second is folded by the pool (stolen or taken back, cut further or not).
        let looks = AtomicUsize::new(0);
        let third = || looks.fetch_add(1, Relaxed) + 1 == 3;
        let pieces = rt.install(|| fold_one_piece(len, unstopped(true, &seen), &third));
        assert_eq!(pieces[0], (0, len / 2), "{pieces:?}");
        assert!(pieces.len() >= 2, "{pieces:?}");
        assert_eq!(
            looks.load(Relaxed),
            3,
            "the first half looked on after handing over"
        );
    }

    #[test]
    fn a_consumer_whose_pieces_show_is_never_cut_on_demand() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let seen = std::sync::atomic::AtomicBool::new(false);
        let len = 16 * super::LOOK_EVERY;
        let asked = || -> bool { panic!("a fold's piece looked for starving workers") };
        let pieces = rt.install(|| fold_one_piece(len, unstopped(false, &seen), &asked));
        assert_eq!(pieces, [(0, len)]);
        // Nor on a pool of one worker, where nobody else could take a half, nor on one
        // told not to, nor off the pool.
        let one = Runtime::builder().worker_threads(1).build().unwrap();
        let pieces = one.install(|| fold_one_piece(len, unstopped(true, &seen), &asked));
        assert_eq!(pieces, [(0, len)]);
        let off = Runtime::builder()
            .worker_threads(2)
            .split_on_demand(false)
            .build()
            .unwrap();
        let pieces = off.install(|| fold_one_piece(len, unstopped(true, &seen), &asked));
        assert_eq!(pieces, [(0, len)]);
        assert_eq!(
            fold_one_piece(len, unstopped(true, &seen), &asked),
            [(0, len)]
        );
    }

    #[test]
    fn a_full_consumer_stops_folding() {
        let chunk = super::LOOK_EVERY;
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let seen = std::sync::atomic::AtomicBool::new(false);
        let stop = Pieces {
            cheap: true,
            stop_at: Some(chunk + 7),
            seen_stop: &seen,
        };
        let pieces = rt.install(|| fold_one_piece(16 * chunk, stop, &|| false));
        // The folder stops at the match (`consume_iter` asks it after each item), and no
        // later chunk or half is folded.
        assert_eq!(pieces, [(0, chunk + 8)]);
    }

    /// A pool of `workers` whose every look of rule 5 finds a starving worker: each long
    /// piece hands half of its rest to the pool at its first look, whatever the timing and
    /// whatever its worker's deque holds. The first piece of a computation is folded by the
    /// worker that split it (it is `join`'s first half all the way down), so on 2 or 3
    /// workers, where pieces are a quarter of the input, an input of at least four chunks
    /// after its first is looked at, and cut, every time.
    fn starving_pool(workers: usize) -> Runtime {
        Runtime::builder()
            .worker_threads(workers)
            .starving_always()
            .build()
            .unwrap()
    }

    /// Long enough for a piece of it to be cut on demand several times over.
    fn cut_len() -> usize {
        24 * super::LOOK_EVERY + 3
    }

    #[test]
    fn every_consumer_keeps_its_answer_when_every_look_cuts() {
        use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
        let len = cut_len();
        for workers in [2, 3] {
            let rt = starving_pool(workers);
            rt.install(|| {
                // Items that own memory: a slot written twice, or an item dropped twice or
                // never, shows under Miri and the sanitizers as well as in the values.
                let boxed: Vec<Box<usize>> = (0..len).into_par_iter().map(Box::new).collect();
                assert!(boxed.iter().map(|b| **b).eq(0..len), "collect");
                assert_eq!((0..len).into_par_iter().sum::<usize>(), len * (len - 1) / 2);
                // Ranges that must meet: a reduction out of order, or of a piece twice,
                // breaks the chain.
                let span =
                    (0..len)
                        .into_par_iter()
                        .map(|i| (i, i + 1))
                        .reduce_with(|(a, b), (c, d)| {
                            assert_eq!(b, c, "pieces reduced out of order");
                            (a, d)
                        });
                assert_eq!(span, Some((0, len)));
                let target = len / 3;
                let nearest = (0..len).into_par_iter().min_by_key(|&i| i.abs_diff(target));
                assert_eq!(nearest, Some(target));
                let every = super::LOOK_EVERY + 1;
                let matches = move |i: usize| i % every == every - 1;
                assert_eq!(
                    (0..len).into_par_iter().position_first(matches),
                    Some(every - 1)
                );
                assert_eq!(
                    (0..len).into_par_iter().position_last(matches),
                    (0..len).rev().find(|&i| matches(i))
                );
                assert!(!(0..len).into_par_iter().any(|i| i == len));
                assert!((0..len).into_par_iter().any(|i| i == len - 1));
                assert_eq!(
                    (0..len).into_par_iter().filter(|i| i % 3 == 0).count(),
                    len.div_ceil(3)
                );
                let runs: Vec<AtomicU8> = (0..len).map(|_| AtomicU8::new(0)).collect();
                (0..len).into_par_iter().for_each(|i| {
                    runs[i].fetch_add(1, Relaxed);
                });
                assert!(runs.iter().all(|n| n.load(Relaxed) == 1), "for_each");
            });
            assert!(
                rt.registry().sleep.starving_answers() > 0,
                "no piece was cut on demand on {workers} workers"
            );
        }
    }

    #[test]
    fn a_panic_in_a_piece_cut_on_demand_drops_each_collected_item_once() {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        /// An item that counts itself among the live ones while it exists.
        struct Counted<'a>(&'a AtomicUsize, #[allow(dead_code)] Box<usize>);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Relaxed);
            }
        }
        let len = cut_len();
        let chunk = super::LOOK_EVERY;
        let rt = starving_pool(2);
        // In the first chunk (before any look), just after the first look (in the first
        // half's rest), in the half handed over, and at the last item.
        for panic_at in [5, chunk + 1, len / 2 + 7, len - 1] {
            let live = AtomicUsize::new(0);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                rt.install(|| {
                    (0..len)
                        .into_par_iter()
                        .map(|i| {
                            assert_ne!(i, panic_at, "a panic in a cut piece");
                            live.fetch_add(1, Relaxed);
                            Counted(&live, Box::new(i))
                        })
                        .collect::<Vec<_>>()
                })
            }));
            assert!(
                outcome.is_err(),
                "the panic at {panic_at} was not propagated"
            );
            assert_eq!(
                live.load(Relaxed),
                0,
                "items leaked after a panic at {panic_at}"
            );
        }
        assert!(rt.registry().sleep.starving_answers() > 0);
    }

    #[test]
    fn every_level_of_the_split_is_stealable_while_the_first_piece_runs() {
        // 16 workers, 15 of them held by tasks so that nobody steals: the worker that splits
        // halves the budget of 16 five times (16, 8, 4, 2, 1) before its first piece, and
        // each level's second half must still wait in its deque for a thief then, the two
        // deepest too. With `join`'s reserve (`offer_every_split(false)`), 3 of the 5. An
        // inner iterator run from there finds a spine's worth already offered and adds
        // nothing: its splits run inline, as `join`'s do past its reserve.
        let workers = 16;
        for (every, offered) in [(true, 5), (false, 3)] {
            let rt = Runtime::builder()
                .worker_threads(workers)
                .offer_every_split(every)
                // The holders block their workers on purpose.
                .stall_threshold(None)
                .build()
                .unwrap();
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let release = std::sync::Arc::new(std::sync::Barrier::new(workers));
            let holders: Vec<_> = (1..workers)
                .map(|_| {
                    let (started, release) = (started_tx.clone(), release.clone());
                    rt.spawn(async move {
                        started.send(()).unwrap();
                        release.wait();
                    })
                })
                .collect();
            for _ in 1..workers {
                started_rx.recv().unwrap();
            }
            let seen = std::sync::Mutex::new(None);
            let seen_inner = std::sync::Mutex::new(None);
            rt.install(|| {
                (0..1usize << 12).into_par_iter().for_each(|i| {
                    if i == 0 {
                        *seen.lock().unwrap() = crate::runtime::worker::current_deque_len();
                        (0..1usize << 12).into_par_iter().for_each(|j| {
                            if j == 0 {
                                *seen_inner.lock().unwrap() =
                                    crate::runtime::worker::current_deque_len();
                            }
                        });
                    }
                });
            });
            release.wait();
            for holder in holders {
                rt.block_on(holder).unwrap();
            }
            assert_eq!(
                seen.into_inner().unwrap(),
                Some(offered),
                "offer_every_split({every})"
            );
            assert_eq!(
                seen_inner.into_inner().unwrap(),
                Some(offered),
                "offer_every_split({every}), an inner iterator"
            );
        }
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
