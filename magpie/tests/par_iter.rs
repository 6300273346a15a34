//! Parallel iterators and parallel sorts, against the sequential `std` iterators and sorts.
//!
//! * **Properties** (proptest): every source, adapter and consumer on random `Vec`s whose
//!   lengths include 0, 1, primes and random lengths up to 3000, and whose values repeat a
//!   lot, so that `min`/`max` tie-breaking and `find_first`/`find_last` are really tested
//!   (items carry their index, or are compared by address, to check *which* one came back).
//!   Each case runs inside one of four pools of 1, 2, 3 and 4 workers, built once.
//! * **Early exit**: the first (last) match wins even when a piece to its right (left)
//!   finished first; `any`, `all`, `find_any`, `find_first` and `position_first` stop well
//!   before the end (a count of predicate calls, not a timing).
//! * **Panics**: a panic in a closure reaches the caller with its payload, the pool survives,
//!   and every item made is dropped exactly once (collect, `Vec::into_par_iter`, early exit).
//! * **Sorting**: all six sorts against `std` on random, sorted, reversed, all-equal,
//!   few-distinct and sawtooth inputs; stability; a panicking comparator.
//! * **Works from anywhere**: a plain thread (global runtime), `install`, `join`, `scope`,
//!   async tasks, `block_on`, and nested parallel iterators.
//!
//! No test synchronizes by sleeping or asserts a duration. The waits in the early-exit tests
//! spin (yielding) on a flag that another piece sets, and give up after a deadline: a run
//! whose wait timed out still checks its result, only without the interleaving it aimed at;
//! each such test fails only if *none* of its runs (a dozen or more) got that interleaving.

mod common;

use std::cmp::{Ordering, Reverse};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicU8, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use magpie::prelude::*;
use magpie::Runtime;
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------------------------
// Pools, configuration, strategies
// ---------------------------------------------------------------------------------------------

/// The pool of `workers` workers (1 to 4), built once for the whole test binary.
fn pool(workers: usize) -> &'static Runtime {
    static POOLS: OnceLock<Vec<Runtime>> = OnceLock::new();
    &POOLS.get_or_init(|| (1..=4).map(common::runtime).collect())[workers - 1]
}

/// Runs `f` on a worker of the pool of `workers` workers, where the parallel iterators in it
/// use that pool.
fn run<R: Send>(workers: usize, f: impl FnOnce() -> R + Send) -> R {
    pool(workers).install(f)
}

/// 64 cases per property; no regression files written next to the sources; shrinking bounded
/// so that a failure reports in seconds.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..ProptestConfig::with_cases(64)
    }
}

/// The longest random input of the iterator properties.
const MAX_LEN: usize = 3000;

/// Lengths that matter: empty, one item, and primes (which never split evenly).
const EDGE_LENGTHS: [usize; 8] = [0, 1, 2, 3, 7, 31, 127, 1009];

/// A length up to `max`: half the time one of [`EDGE_LENGTHS`], else uniform.
fn length(max: usize) -> impl Strategy<Value = usize> {
    let edges: Vec<usize> = EDGE_LENGTHS.into_iter().filter(|&n| n <= max).collect();
    prop_oneof![prop::sample::select(edges), 0..=max]
}

/// A vector of up to `max_len` values from `0..d`, with `d` mostly tiny: ties everywhere. The
/// largest `d` is `u32::MAX`, so `u32::MAX` itself never occurs (an absent value).
fn values(max_len: usize) -> impl Strategy<Value = Vec<u32>> {
    let distinct = prop::sample::select(vec![1u32, 2, 3, 5, 16, 1000, u32::MAX]);
    (length(max_len), distinct).prop_flat_map(|(len, d)| prop::collection::vec(0..d, len))
}

/// Vectors of vectors, many of them empty.
fn nested() -> impl Strategy<Value = Vec<Vec<u32>>> {
    let inner = prop_oneof![
        2 => Just(Vec::new()),
        3 => prop::collection::vec(0..5u32, 1..8),
    ];
    length(400).prop_flat_map(move |len| prop::collection::vec(inner.clone(), len))
}

/// A piece-length bound for `with_min_len` / `with_max_len`, extremes included.
fn len_bound() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![1usize, 2, 3, 7, 64, 1000, usize::MAX])
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// An item ordered by `key` alone, so that equal keys tie; `index` says which one a consumer
/// returned.
#[derive(Clone, Copy, Debug)]
struct Keyed {
    key: u32,
    index: usize,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

fn keyed(v: &[u32]) -> Vec<Keyed> {
    v.iter()
        .enumerate()
        .map(|(index, &key)| Keyed { key, index })
        .collect()
}

/// Which item: its key and its index.
fn which(k: Option<Keyed>) -> Option<(u32, usize)> {
    k.map(|k| (k.key, k.index))
}

/// Whether both are `None`, or both point at the same element (not merely an equal one).
fn same<T>(a: Option<&T>, b: Option<&T>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => ptr::eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// `x -> a*x + b (mod P)`: composition is associative but not commutative, so a `reduce`
/// with it checks that the pieces combine in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Affine(u64, u64);

const P: u64 = 1_000_003;

impl Affine {
    const IDENTITY: Affine = Affine(1, 0);

    fn of(x: u32) -> Affine {
        Affine(1 + u64::from(x) % (P - 1), u64::from(x) % P)
    }

    /// `self`, then `next`.
    fn then(self, next: Affine) -> Affine {
        Affine(next.0 * self.0 % P, (next.0 * self.1 + next.1) % P)
    }
}

/// One counter per index, to check that every item is visited exactly once.
fn hit_counters(n: usize) -> Vec<AtomicU8> {
    (0..n).map(|_| AtomicU8::new(0)).collect()
}

fn all_hit_once(hits: &[AtomicU8]) -> bool {
    hits.iter().all(|h| h.load(SeqCst) == 1)
}

/// The payload of the panics these tests cause on purpose.
#[derive(Debug, PartialEq, Eq)]
struct Boom(usize);

fn boom(id: usize) -> ! {
    panic::panic_any(Boom(id))
}

/// Keeps the default panic hook from printing the panics these tests cause on purpose (a
/// `Boom` payload, or a message starting with "intended"); every other panic still prints.
fn quiet_intended_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let intended = payload.is::<Boom>()
                || payload
                    .downcast_ref::<String>()
                    .is_some_and(|s| s.starts_with("intended"))
                || payload
                    .downcast_ref::<&str>()
                    .is_some_and(|s| s.starts_with("intended"));
            if !intended {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, which must panic with `Boom(id)`.
#[track_caller]
fn expect_boom(id: usize, what: &str, f: impl FnOnce()) {
    let payload =
        panic::catch_unwind(AssertUnwindSafe(f)).expect_err(&format!("{what}: expected a panic"));
    assert_eq!(
        payload.downcast_ref::<Boom>(),
        Some(&Boom(id)),
        "{what}: the panic arrived with another payload"
    );
}

/// Counts, per id, the items made and dropped: a leak or a double drop shows as a mismatch.
struct Ledger {
    made: Vec<AtomicU8>,
    dropped: Vec<AtomicU8>,
}

/// An item that reports its drop to its ledger.
#[derive(Debug)]
struct Tracked<'a> {
    id: usize,
    ledger: &'a Ledger,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

impl Ledger {
    fn new(n: usize) -> Ledger {
        Ledger {
            made: hit_counters(n),
            dropped: hit_counters(n),
        }
    }

    fn make(&self, id: usize) -> Tracked<'_> {
        self.made[id].fetch_add(1, SeqCst);
        Tracked { id, ledger: self }
    }

    /// Items `0..n`, in order.
    fn vec(&self) -> Vec<Tracked<'_>> {
        (0..self.made.len()).map(|id| self.make(id)).collect()
    }

    fn made(&self, id: usize) -> u8 {
        self.made[id].load(SeqCst)
    }

    fn dropped(&self, id: usize) -> u8 {
        self.dropped[id].load(SeqCst)
    }

    fn dropped_total(&self) -> usize {
        self.dropped
            .iter()
            .map(|d| usize::from(d.load(SeqCst)))
            .sum()
    }

    /// Every item made was made once and dropped exactly once.
    #[track_caller]
    fn assert_balanced(&self, what: &str) {
        for id in 0..self.made.len() {
            let (made, dropped) = (self.made(id), self.dropped(id));
            assert!(
                made <= 1 && made == dropped,
                "{what}: item {id} made {made} times, dropped {dropped} times"
            );
        }
    }

    /// Every item was made, and dropped exactly once.
    #[track_caller]
    fn assert_all_dropped_once(&self, what: &str) {
        for id in 0..self.made.len() {
            let (made, dropped) = (self.made(id), self.dropped(id));
            assert!(
                made == 1 && dropped == 1,
                "{what}: item {id} made {made} times, dropped {dropped} times"
            );
        }
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.ledger.dropped[self.id].fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// Properties: sources, adapters, consumers
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// `collect` keeps the order through the adapters that keep the length and through those
    /// that do not; `collect_into_vec` replaces what the vector held.
    #[test]
    fn collect_preserves_order(workers in 1..=4usize, v in values(MAX_LEN)) {
        run(workers, || -> Result<(), TestCaseError> {
            let wide = |&x: &u32| u64::from(x) * 2;
            prop_assert_eq!(
                v.par_iter().map(wide).collect::<Vec<_>>(),
                v.iter().map(wide).collect::<Vec<_>>()
            );
            prop_assert_eq!(&v.par_iter().copied().collect::<Vec<u32>>(), &v);
            prop_assert_eq!(&v.par_iter().cloned().collect::<Vec<u32>>(), &v);
            // The references themselves, in order: each points at its own element.
            let refs: Vec<&u32> = v.par_iter().collect();
            prop_assert_eq!(refs.len(), v.len());
            prop_assert!(refs.iter().zip(&v).all(|(r, x)| ptr::eq(*r, x)));

            let seen = AtomicUsize::new(0);
            let inspected: Vec<u32> = v
                .par_iter()
                .inspect(|_| {
                    seen.fetch_add(1, Relaxed);
                })
                .copied()
                .collect();
            prop_assert_eq!(&inspected, &v);
            prop_assert_eq!(seen.load(Relaxed), v.len());

            for filler in [0, 5, v.len() + 10] {
                let mut out = vec![u32::MAX; filler];
                v.par_iter().copied().collect_into_vec(&mut out);
                prop_assert_eq!(&out, &v);
            }

            let even = |x: &u32| x % 2 == 0;
            prop_assert_eq!(
                v.par_iter().copied().filter(even).collect::<Vec<_>>(),
                v.iter().copied().filter(even).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                v.par_iter().filter(|x| even(x)).count(),
                v.iter().filter(|x| even(x)).count()
            );
            let some_of = |&x: &u32| (x % 3 != 1).then(|| u64::from(x) + 1);
            prop_assert_eq!(
                v.par_iter().filter_map(some_of).collect::<Vec<_>>(),
                v.iter().filter_map(some_of).collect::<Vec<_>>()
            );

            prop_assert_eq!(
                v.par_iter().copied().enumerate().collect::<Vec<_>>(),
                v.iter().copied().enumerate().collect::<Vec<_>>()
            );
            let pick = |&(i, x): &(usize, u32)| (i + x as usize) % 3 == 0;
            prop_assert_eq!(
                v.par_iter().map(|&x| x / 2).enumerate().filter(pick).collect::<Vec<_>>(),
                v.iter().map(|&x| x / 2).enumerate().filter(pick).collect::<Vec<_>>()
            );
            prop_assert_eq!(v.par_iter().count(), v.len());
            prop_assert_eq!(v.par_iter().len(), v.len());
            prop_assert_eq!(v.par_iter().map(wide).enumerate().len(), v.len());
            Ok(())
        })?;
    }

    /// `sum`, `product`, `reduce`, `reduce_with`, `fold`, and `min`/`max` and their `_by` and
    /// `_by_key` forms, which must return the first of equal minima and the last of equal
    /// maxima, as `std` does.
    #[test]
    fn reductions_match_sequential(workers in 1..=4usize, v in values(MAX_LEN)) {
        run(workers, || -> Result<(), TestCaseError> {
            let wide = |&x: &u32| u64::from(x);
            let sum: u64 = v.iter().map(wide).sum();
            prop_assert_eq!(v.par_iter().map(wide).sum::<u64>(), sum);
            prop_assert_eq!(
                v.par_iter().filter(|&&x| x % 2 == 1).map(wide).sum::<u64>(),
                v.iter().filter(|&&x| x % 2 == 1).map(wide).sum::<u64>()
            );
            prop_assert_eq!(v.par_iter().map(wide).reduce(|| 0, |a, b| a + b), sum);

            // Products of values that cannot overflow.
            let prefix = &v[..v.len().min(63)];
            let one_or_two = |&x: &u32| 1 + u64::from(x & 1);
            prop_assert_eq!(
                prefix.par_iter().map(one_or_two).product::<u64>(),
                prefix.iter().map(one_or_two).product::<u64>()
            );
            let sign = |&x: &u32| if x % 3 == 0 { -1i64 } else { 1 };
            prop_assert_eq!(
                v.par_iter().map(sign).product::<i64>(),
                v.iter().map(sign).product::<i64>()
            );
            let zero_or_one = |&x: &u32| u64::from(x % 7 != 0);
            prop_assert_eq!(
                v.par_iter().map(zero_or_one).product::<u64>(),
                v.iter().map(zero_or_one).product::<u64>()
            );

            // An associative, non-commutative operation: the pieces must combine in order.
            let affine = v.iter().map(|&x| Affine::of(x)).fold(Affine::IDENTITY, Affine::then);
            prop_assert_eq!(
                v.par_iter().map(|&x| Affine::of(x)).reduce(|| Affine::IDENTITY, Affine::then),
                affine
            );
            prop_assert_eq!(
                v.par_iter().map(|&x| Affine::of(x)).reduce_with(Affine::then),
                v.iter().map(|&x| Affine::of(x)).reduce(Affine::then)
            );
            prop_assert_eq!(
                v.par_iter()
                    .filter(|&&x| x % 3 != 0)
                    .map(|&x| Affine::of(x))
                    .reduce_with(Affine::then),
                v.iter().filter(|&&x| x % 3 != 0).map(|&x| Affine::of(x)).reduce(Affine::then)
            );

            // fold: one accumulator per piece, the pieces in order.
            let push = |mut acc: Vec<u32>, &x: &u32| {
                acc.push(x);
                acc
            };
            let pieces: Vec<Vec<u32>> = v.par_iter().fold(Vec::new, push).collect();
            prop_assert_eq!(pieces.concat(), v.clone());
            let folded = v.par_iter().fold(Vec::new, push).reduce(Vec::new, |mut a, mut b| {
                a.append(&mut b);
                a
            });
            prop_assert_eq!(&folded, &v);
            prop_assert_eq!(
                v.par_iter().fold(|| 0u64, |acc, &x| acc + u64::from(x)).sum::<u64>(),
                sum
            );
            prop_assert_eq!(
                v.par_iter()
                    .fold(|| Affine::IDENTITY, |acc, &x| acc.then(Affine::of(x)))
                    .reduce(|| Affine::IDENTITY, Affine::then),
                affine
            );
            prop_assert_eq!(
                v.par_iter()
                    .filter(|&&x| x % 2 == 0)
                    .fold(|| 0usize, |n, _| n + 1)
                    .sum::<usize>(),
                v.iter().filter(|&&x| x % 2 == 0).count()
            );

            // min / max: which of several equal items.
            let k = keyed(&v);
            prop_assert_eq!(which(k.par_iter().copied().min()), which(k.iter().copied().min()));
            prop_assert_eq!(which(k.par_iter().copied().max()), which(k.iter().copied().max()));
            let by_key = |a: &Keyed, b: &Keyed| a.key.cmp(&b.key);
            prop_assert_eq!(
                which(k.par_iter().copied().min_by(by_key)),
                which(k.iter().copied().min_by(by_key))
            );
            prop_assert_eq!(
                which(k.par_iter().copied().max_by(by_key)),
                which(k.iter().copied().max_by(by_key))
            );
            let coarse = |k: &Keyed| k.key % 3;
            prop_assert_eq!(
                which(k.par_iter().copied().min_by_key(coarse)),
                which(k.iter().copied().min_by_key(coarse))
            );
            prop_assert_eq!(
                which(k.par_iter().copied().max_by_key(coarse)),
                which(k.iter().copied().max_by_key(coarse))
            );
            let sparse = |k: &Keyed| k.index % 3 != 0;
            prop_assert_eq!(
                which(k.par_iter().copied().filter(sparse).min()),
                which(k.iter().copied().filter(sparse).min())
            );
            prop_assert_eq!(
                which(k.par_iter().copied().filter(sparse).max_by_key(coarse)),
                which(k.iter().copied().filter(sparse).max_by_key(coarse))
            );
            // On references: the very element, by address.
            prop_assert!(same(v.par_iter().min(), v.iter().min()));
            prop_assert!(same(v.par_iter().max(), v.iter().max()));
            prop_assert!(same(
                v.par_iter().min_by_key(|&&x| x % 4),
                v.iter().min_by_key(|&&x| x % 4)
            ));
            prop_assert!(same(
                v.par_iter().max_by(|a, b| (*a % 4).cmp(&(*b % 4))),
                v.iter().max_by(|a, b| (*a % 4).cmp(&(*b % 4)))
            ));
            Ok(())
        })?;
    }

    /// `any`, `all`, `find_*` and `position_*` find the right element: the first or last of
    /// several equal ones, by address or index.
    #[test]
    fn searches_find_the_right_element(
        workers in 1..=4usize,
        v in values(MAX_LEN),
        pick in any::<Index>(),
        absent in any::<bool>(),
    ) {
        let target = if absent || v.is_empty() { u32::MAX } else { v[pick.index(v.len())] };
        let is_target = |x: &u32| *x == target;
        run(workers, || -> Result<(), TestCaseError> {
            let exists = v.contains(&target);
            prop_assert_eq!(v.par_iter().any(is_target), exists);
            prop_assert_eq!(v.par_iter().all(|x| !is_target(x)), !exists);
            prop_assert!(same(
                v.par_iter().find_first(|x| is_target(x)),
                v.iter().find(|x| is_target(x))
            ));
            prop_assert!(same(
                v.par_iter().find_last(|x| is_target(x)),
                v.iter().rev().find(|x| is_target(x))
            ));
            match v.par_iter().find_any(|x| is_target(x)) {
                Some(found) => {
                    prop_assert!(is_target(found));
                    prop_assert!(v.as_ptr_range().contains(&(found as *const u32)));
                }
                None => prop_assert!(!exists),
            }
            prop_assert_eq!(
                v.par_iter().position_first(is_target),
                v.iter().position(is_target)
            );
            prop_assert_eq!(
                v.par_iter().position_last(is_target),
                v.iter().rposition(is_target)
            );
            match v.par_iter().position_any(is_target) {
                Some(i) => prop_assert_eq!(v[i], target),
                None => prop_assert!(!exists),
            }

            // Unindexed (after a filter), the index carried along.
            let odd = |&(i, _): &(usize, &u32)| i % 2 == 1;
            let hit = |&(_, x): &(usize, &u32)| *x == target;
            prop_assert_eq!(
                v.par_iter().enumerate().filter(odd).find_first(hit),
                v.iter().enumerate().filter(odd).find(hit)
            );
            prop_assert_eq!(
                v.par_iter().enumerate().filter(odd).find_last(hit),
                v.iter().enumerate().filter(odd).rfind(hit)
            );
            prop_assert_eq!(
                v.par_iter().enumerate().filter(odd).any(|p| hit(&p)),
                v.iter().enumerate().filter(odd).any(|p| hit(&p))
            );

            // Many matches: every item not above the target.
            let small = |x: &u32| *x <= target;
            prop_assert_eq!(v.par_iter().position_first(small), v.iter().position(small));
            prop_assert_eq!(v.par_iter().position_last(small), v.iter().rposition(small));
            prop_assert_eq!(v.par_iter().all(small), v.iter().all(small));
            Ok(())
        })?;
    }

    /// `zip` is as long as the shorter side, whichever it is, and pairs items in order.
    #[test]
    fn zip_stops_at_the_shorter_side(
        workers in 1..=4usize,
        a in values(MAX_LEN),
        b in values(MAX_LEN),
    ) {
        run(workers, || -> Result<(), TestCaseError> {
            let expected: Vec<(u32, u32)> = a.iter().copied().zip(b.iter().copied()).collect();
            prop_assert_eq!(a.par_iter().zip(&b).len(), a.len().min(b.len()));
            prop_assert_eq!(
                &a.par_iter().copied().zip(b.par_iter().copied()).collect::<Vec<_>>(),
                &expected
            );
            prop_assert_eq!(
                &b.par_iter()
                    .copied()
                    .zip(a.par_iter().copied())
                    .map(|(y, x)| (x, y))
                    .collect::<Vec<_>>(),
                &expected
            );
            prop_assert_eq!(
                &a.clone().into_par_iter().zip(b.clone()).collect::<Vec<_>>(),
                &expected
            );
            let n = b.len() as u64;
            prop_assert_eq!(
                a.par_iter().copied().zip(0..n).collect::<Vec<_>>(),
                a.iter().copied().zip(0..n).collect::<Vec<_>>()
            );
            prop_assert!(a
                .par_iter()
                .enumerate()
                .zip(b.par_iter().enumerate())
                .all(|((i, _), (j, _))| i == j));
            prop_assert_eq!(
                &a.par_iter()
                    .copied()
                    .with_max_len(1)
                    .zip(b.par_iter().copied().with_min_len(64))
                    .collect::<Vec<_>>(),
                &expected
            );

            let mut out = a.clone();
            out.par_iter_mut().zip(&b).for_each(|(o, &y)| *o = o.wrapping_mul(3).wrapping_add(y));
            let mut seq = a.clone();
            seq.iter_mut().zip(&b).for_each(|(o, &y)| *o = o.wrapping_mul(3).wrapping_add(y));
            prop_assert_eq!(out, seq);

            let equal = |(x, y): (&u32, &u32)| x == y;
            let product_mod = |(&x, &y): (&u32, &u32)| u64::from(x % 1000) * u64::from(y % 1000);
            prop_assert_eq!(
                a.par_iter().zip(&b).position_first(equal),
                a.iter().zip(&b).position(equal)
            );
            prop_assert_eq!(
                a.par_iter().zip(&b).position_last(equal),
                a.iter().zip(&b).rposition(equal)
            );
            prop_assert_eq!(
                a.par_iter().zip(&b).map(product_mod).sum::<u64>(),
                a.iter().zip(&b).map(product_mod).sum::<u64>()
            );
            Ok(())
        })?;
    }

    /// `chain`: indexed on both sides (then `enumerate`, `zip`, `position_*` work across the
    /// seam) and unindexed on either side.
    #[test]
    fn chain_keeps_both_sides_in_order(
        workers in 1..=4usize,
        a in values(MAX_LEN),
        b in values(MAX_LEN),
        pick in any::<Index>(),
    ) {
        let both: Vec<u32> = a.iter().chain(&b).copied().collect();
        let target = if both.is_empty() { 0 } else { both[pick.index(both.len())] };
        let is_target = |x: &&u32| **x == target;
        run(workers, || -> Result<(), TestCaseError> {
            prop_assert_eq!(a.par_iter().chain(&b).len(), both.len());
            prop_assert_eq!(&a.par_iter().chain(&b).copied().collect::<Vec<_>>(), &both);
            prop_assert_eq!(
                a.par_iter().copied().chain(b.par_iter().copied()).enumerate().collect::<Vec<_>>(),
                both.iter().copied().enumerate().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                a.par_iter().chain(&b).zip(b.par_iter().chain(&a)).collect::<Vec<_>>(),
                a.iter().chain(&b).zip(b.iter().chain(&a)).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                &a.par_iter().chain(&b).with_max_len(1).copied().collect::<Vec<_>>(),
                &both
            );
            prop_assert_eq!(
                a.par_iter().chain(&b).chain(&a).copied().collect::<Vec<_>>(),
                a.iter().chain(&b).chain(&a).copied().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                a.clone().into_par_iter().chain(b.clone()).collect::<Vec<_>>(),
                both.clone()
            );
            prop_assert_eq!(
                a.par_iter().chain(&b).position_first(|x| is_target(&x)),
                both.iter().position(|x| is_target(&x))
            );
            prop_assert_eq!(
                a.par_iter().chain(&b).position_last(|x| is_target(&x)),
                both.iter().rposition(|x| is_target(&x))
            );
            prop_assert!(same(
                a.par_iter().chain(&b).find_first(is_target),
                a.iter().chain(&b).find(is_target)
            ));
            prop_assert!(same(
                a.par_iter().chain(&b).find_last(is_target),
                a.iter().chain(&b).rev().find(is_target)
            ));

            // Unindexed on the left, on the right, on both.
            let keep = |x: &&u32| **x % 3 != 0;
            prop_assert_eq!(
                a.par_iter().filter(keep).chain(&b).copied().collect::<Vec<_>>(),
                a.iter().filter(keep).chain(&b).copied().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                a.par_iter().chain(b.par_iter().filter(keep)).copied().collect::<Vec<_>>(),
                a.iter().chain(b.iter().filter(keep)).copied().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                a.par_iter().filter(keep).chain(b.par_iter().filter(keep)).count(),
                a.iter().filter(keep).chain(b.iter().filter(keep)).count()
            );
            prop_assert_eq!(
                a.par_iter()
                    .filter(keep)
                    .chain(&b)
                    .map(|&x| Affine::of(x))
                    .reduce_with(Affine::then),
                a.iter().filter(keep).chain(&b).map(|&x| Affine::of(x)).reduce(Affine::then)
            );
            prop_assert!(same(
                a.par_iter().filter(keep).chain(&b).find_first(is_target),
                a.iter().filter(keep).chain(&b).find(is_target)
            ));
            prop_assert!(same(
                a.par_iter().chain(b.par_iter().filter(keep)).find_last(is_target),
                a.iter().chain(b.iter().filter(keep)).rev().find(is_target)
            ));
            Ok(())
        })?;
    }

    /// `flat_map`, `flat_map_iter`, `flatten` and `flatten_iter`, with many empty inner
    /// vectors; searches through them find the right element.
    #[test]
    fn flat_map_and_flatten_match_sequential(
        workers in 1..=4usize,
        vv in nested(),
        pick in any::<Index>(),
    ) {
        let flat: Vec<u32> = vv.concat();
        let target = if flat.is_empty() { 0 } else { flat[pick.index(flat.len())] };
        let is_target = |x: &&u32| **x == target;
        run(workers, || -> Result<(), TestCaseError> {
            prop_assert_eq!(
                &vv.par_iter().flat_map(|inner| inner.par_iter().copied()).collect::<Vec<_>>(),
                &flat
            );
            prop_assert_eq!(
                &vv.par_iter().flat_map(|inner| inner.clone()).collect::<Vec<_>>(),
                &flat
            );
            prop_assert_eq!(
                &vv.par_iter().flat_map_iter(|inner| inner.iter().copied()).collect::<Vec<_>>(),
                &flat
            );
            prop_assert_eq!(&vv.par_iter().flatten().copied().collect::<Vec<_>>(), &flat);
            prop_assert_eq!(&vv.clone().into_par_iter().flatten().collect::<Vec<_>>(), &flat);
            prop_assert_eq!(&vv.par_iter().flatten_iter().copied().collect::<Vec<_>>(), &flat);
            prop_assert_eq!(&vv.clone().into_par_iter().flatten_iter().collect::<Vec<_>>(), &flat);
            prop_assert_eq!(
                vv.par_iter().flat_map(|inner| 0..inner.len() as u32).collect::<Vec<_>>(),
                vv.iter().flat_map(|inner| 0..inner.len() as u32).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                vv.par_iter()
                    .enumerate()
                    .flat_map(|(i, inner)| inner.par_iter().with_max_len(1).map(move |&x| (i, x)))
                    .collect::<Vec<_>>(),
                vv.iter()
                    .enumerate()
                    .flat_map(|(i, inner)| inner.iter().map(move |&x| (i, x)))
                    .collect::<Vec<_>>()
            );
            prop_assert_eq!(vv.par_iter().flatten().count(), flat.len());
            prop_assert_eq!(
                vv.par_iter()
                    .flat_map(|inner| inner.par_iter())
                    .map(|&x| u64::from(x))
                    .sum::<u64>(),
                flat.iter().map(|&x| u64::from(x)).sum::<u64>()
            );
            prop_assert_eq!(
                vv.par_iter()
                    .flat_map(|inner| inner.par_iter().map(|&x| Affine::of(x)))
                    .reduce_with(Affine::then),
                flat.iter().map(|&x| Affine::of(x)).reduce(Affine::then)
            );
            prop_assert!(same(
                vv.par_iter().flat_map(|inner| inner.par_iter()).find_first(is_target),
                vv.iter().flatten().find(is_target)
            ));
            prop_assert!(same(
                vv.par_iter().flat_map(|inner| inner.par_iter()).find_last(is_target),
                vv.iter().flatten().rev().find(is_target)
            ));
            prop_assert!(same(
                vv.par_iter().flatten_iter().find_first(is_target),
                vv.iter().flatten().find(is_target)
            ));
            prop_assert!(same(
                vv.par_iter().flat_map_iter(|inner| inner.iter()).find_last(is_target),
                vv.iter().flatten().rev().find(is_target)
            ));
            prop_assert_eq!(
                vv.par_iter().flatten().any(|x| is_target(&x)),
                flat.iter().any(|x| is_target(&x))
            );
            Ok(())
        })?;
    }

    /// `par_chunks` and `par_chunks_mut` for every chunk size from 1 to `len + 1`.
    #[test]
    fn chunks_match_sequential(
        workers in 1..=4usize,
        v in values(MAX_LEN),
        size in any::<Index>(),
        small in 1..=4usize,
        use_small in any::<bool>(),
    ) {
        let chunk = if use_small { small } else { 1 + size.index(v.len() + 1) };
        run(workers, || -> Result<(), TestCaseError> {
            prop_assert_eq!(v.par_chunks(chunk).len(), v.chunks(chunk).len());
            prop_assert_eq!(
                v.par_chunks(chunk).map(<[u32]>::to_vec).collect::<Vec<_>>(),
                v.chunks(chunk).map(<[u32]>::to_vec).collect::<Vec<_>>()
            );
            // The chunks are the very subslices.
            let chunks: Vec<&[u32]> = v.par_chunks(chunk).collect();
            prop_assert!(chunks
                .iter()
                .zip(v.chunks(chunk))
                .all(|(c, s)| ptr::eq(*c, s)));
            prop_assert_eq!(
                v.par_chunks(chunk)
                    .enumerate()
                    .map(|(i, c)| (i, c.iter().map(|&x| u64::from(x)).sum::<u64>()))
                    .collect::<Vec<_>>(),
                v.chunks(chunk)
                    .enumerate()
                    .map(|(i, c)| (i, c.iter().map(|&x| u64::from(x)).sum::<u64>()))
                    .collect::<Vec<_>>()
            );
            prop_assert_eq!(
                v.par_chunks(chunk).with_max_len(1).position_last(|c| c.len() == chunk),
                v.chunks(chunk).rposition(|c| c.len() == chunk)
            );

            let mut w = v.clone();
            w.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| {
                for x in c.iter_mut() {
                    *x = x.wrapping_mul(3).wrapping_add(i as u32);
                }
                c.reverse();
            });
            let mut s = v.clone();
            s.chunks_mut(chunk).enumerate().for_each(|(i, c)| {
                for x in c.iter_mut() {
                    *x = x.wrapping_mul(3).wrapping_add(i as u32);
                }
                c.reverse();
            });
            prop_assert_eq!(&w, &s);
            prop_assert_eq!(w.par_chunks_mut(chunk).len(), s.chunks_mut(chunk).len());

            let mut copy = vec![u32::MAX; v.len()];
            copy.par_chunks_mut(chunk)
                .zip(v.par_chunks(chunk))
                .for_each(|(dst, src)| dst.copy_from_slice(src));
            prop_assert_eq!(&copy, &v);
            Ok(())
        })?;
    }

    /// `par_iter_mut` writes every element exactly once, in place.
    #[test]
    fn par_iter_mut_writes_every_element(workers in 1..=4usize, v in values(MAX_LEN)) {
        run(workers, || -> Result<(), TestCaseError> {
            let mut w = v.clone();
            w.par_iter_mut().for_each(|x| *x = x.wrapping_mul(7) ^ 5);
            prop_assert_eq!(w, v.iter().map(|x| x.wrapping_mul(7) ^ 5).collect::<Vec<_>>());

            let mut w = v.clone();
            w.par_iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = x.wrapping_add(i as u32));
            prop_assert_eq!(
                w,
                v.iter().enumerate().map(|(i, x)| x.wrapping_add(i as u32)).collect::<Vec<_>>()
            );

            // Every element incremented exactly once, whatever the pieces.
            let mut w = v.clone();
            w.par_iter_mut().with_max_len(1).for_each(|x| *x += 1);
            prop_assert_eq!(w, v.iter().map(|x| x + 1).collect::<Vec<_>>());
            let mut w = v.clone();
            w.par_iter_mut().filter(|x| **x % 2 == 0).for_each(|x| *x /= 2);
            prop_assert_eq!(
                w,
                v.iter().map(|&x| if x % 2 == 0 { x / 2 } else { x }).collect::<Vec<_>>()
            );

            // The references come back in order, one per element.
            let mut w = v.clone();
            let start = w.as_ptr() as usize;
            let addresses: Vec<usize> = w
                .par_iter_mut()
                .map(|x| x as *mut u32 as usize)
                .collect();
            prop_assert!(addresses
                .iter()
                .enumerate()
                .all(|(i, &a)| a == start + i * std::mem::size_of::<u32>()));

            let hits = hit_counters(v.len());
            v.par_iter().enumerate().for_each(|(i, _)| {
                hits[i].fetch_add(1, SeqCst);
            });
            prop_assert!(all_hit_once(&hits));
            Ok(())
        })?;
    }

    /// `Vec::into_par_iter` moves `String`s out, in order, through every kind of consumer.
    #[test]
    fn vec_into_par_iter_moves_strings(
        workers in 1..=4usize,
        v in values(MAX_LEN),
        w in values(127),
        pick in any::<Index>(),
    ) {
        let strings: Vec<String> = v.iter().map(|x| format!("s{x}")).collect();
        let others: Vec<String> = w.iter().map(|x| format!("t{x}")).collect();
        let target = if strings.is_empty() {
            String::new()
        } else {
            strings[pick.index(strings.len())].clone()
        };
        run(workers, || -> Result<(), TestCaseError> {
            prop_assert_eq!(strings.clone().into_par_iter().len(), strings.len());
            prop_assert_eq!(&strings.clone().into_par_iter().collect::<Vec<String>>(), &strings);
            prop_assert_eq!(
                strings.clone().into_par_iter().map(|s| s.len()).collect::<Vec<_>>(),
                strings.iter().map(String::len).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().filter(|s| s.len() % 2 == 0).collect::<Vec<_>>(),
                strings.iter().filter(|s| s.len() % 2 == 0).cloned().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().enumerate().collect::<Vec<_>>(),
                strings.iter().cloned().enumerate().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().zip(others.clone()).collect::<Vec<_>>(),
                strings.iter().cloned().zip(others.iter().cloned()).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                others.clone().into_par_iter().zip(strings.clone()).collect::<Vec<_>>(),
                others.iter().cloned().zip(strings.iter().cloned()).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().chain(others.clone()).collect::<Vec<_>>(),
                strings.iter().chain(&others).cloned().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().enumerate().find_first(|(_, s)| *s == target),
                strings.iter().cloned().enumerate().find(|(_, s)| *s == target)
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().enumerate().find_last(|(_, s)| *s == target),
                strings.iter().cloned().enumerate().rev().find(|(_, s)| *s == target)
            );
            prop_assert_eq!(
                strings.clone().into_par_iter().with_max_len(1).map(|s| s.len()).sum::<usize>(),
                strings.iter().map(String::len).sum::<usize>()
            );
            prop_assert_eq!(
                strings
                    .clone()
                    .into_par_iter()
                    .flat_map_iter(String::into_bytes)
                    .collect::<Vec<u8>>(),
                strings.concat().into_bytes()
            );
            let total = AtomicUsize::new(0);
            strings.clone().into_par_iter().for_each(|s| {
                total.fetch_add(s.len(), Relaxed);
            });
            prop_assert_eq!(total.into_inner(), strings.iter().map(String::len).sum::<usize>());
            Ok(())
        })?;
    }

    /// `with_min_len` / `with_max_len` at their extremes change no result; a piece is never
    /// shorter than `min` items (when the input is at least that long), and never longer than
    /// `max` (when `min` leaves room to cut).
    #[test]
    fn min_and_max_len_change_no_result(
        workers in 1..=4usize,
        v in values(MAX_LEN),
        min in len_bound(),
        max in len_bound(),
        pick in any::<Index>(),
    ) {
        let target = if v.is_empty() { 0 } else { v[pick.index(v.len())] };
        let is_target = |x: &&u32| **x == target;
        run(workers, || -> Result<(), TestCaseError> {
            let bounded = || v.par_iter().with_min_len(min).with_max_len(max);
            prop_assert_eq!(&bounded().copied().collect::<Vec<_>>(), &v);
            prop_assert_eq!(
                &v.par_iter().with_max_len(max).with_min_len(min).copied().collect::<Vec<_>>(),
                &v
            );
            prop_assert_eq!(
                bounded().map(|&x| u64::from(x)).sum::<u64>(),
                v.iter().map(|&x| u64::from(x)).sum::<u64>()
            );
            prop_assert_eq!(
                bounded().map(|&x| Affine::of(x)).reduce(|| Affine::IDENTITY, Affine::then),
                v.iter().map(|&x| Affine::of(x)).fold(Affine::IDENTITY, Affine::then)
            );
            prop_assert_eq!(
                bounded().enumerate().map(|(i, &x)| (i, x)).collect::<Vec<_>>(),
                v.iter().copied().enumerate().collect::<Vec<_>>()
            );
            prop_assert!(same(bounded().find_first(is_target), v.iter().find(is_target)));
            prop_assert!(same(bounded().find_last(is_target), v.iter().rev().find(is_target)));
            prop_assert_eq!(
                bounded().position_first(|x| is_target(&x)),
                v.iter().position(|x| is_target(&x))
            );
            prop_assert_eq!(
                bounded().filter(|&&x| x % 2 == 0).copied().collect::<Vec<_>>(),
                v.iter().filter(|&&x| x % 2 == 0).copied().collect::<Vec<_>>()
            );
            prop_assert_eq!(
                bounded().zip(v.par_iter().with_max_len(1)).collect::<Vec<_>>(),
                v.iter().zip(&v).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                bounded().chain(v.par_iter().with_min_len(usize::MAX)).copied().collect::<Vec<_>>(),
                v.iter().chain(&v).copied().collect::<Vec<_>>()
            );
            let hits = hit_counters(v.len());
            bounded().enumerate().for_each(|(i, _)| {
                hits[i].fetch_add(1, SeqCst);
            });
            prop_assert!(all_hit_once(&hits));

            // The documented bounds on the pieces, seen through `fold` (one item per piece).
            let pieces: Vec<usize> = bounded().fold(|| 0usize, |n, _| n + 1).collect();
            prop_assert_eq!(pieces.iter().sum::<usize>(), v.len());
            if v.len() >= min {
                prop_assert!(
                    pieces.iter().all(|&n| n >= min),
                    "a piece shorter than min_len {}: {:?}", min, pieces
                );
            }
            if min.saturating_mul(2) <= max || min == 1 {
                prop_assert!(
                    pieces.iter().all(|&n| n <= max),
                    "a piece longer than max_len {}: {:?}", max, pieces
                );
            }
            Ok(())
        })?;
    }
}

// ---------------------------------------------------------------------------------------------
// Properties: integer ranges
// ---------------------------------------------------------------------------------------------

/// A range end point in `lo..=hi`: anywhere, at either extreme, or near zero.
fn endpoint(lo: i128, hi: i128) -> impl Strategy<Value = i128> {
    prop_oneof![
        lo..=hi,
        Just(lo),
        Just(hi),
        (-5i128..5).prop_map(move |x| x.clamp(lo, hi)),
    ]
}

/// How far the end is from the start: backwards (an empty range) a quarter of the time.
fn delta() -> impl Strategy<Value = i128> {
    prop_oneof![1 => -3000i128..=0, 3 => 0i128..3000]
}

macro_rules! range_properties {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        proptest! {
            #![proptest_config(config())]

            /// `(a..b).into_par_iter()` against `a..b`, negative, empty and backwards
            /// ranges and both extremes of the type included.
            #[test]
            fn $name(
                workers in 1..=4usize,
                start in endpoint(<$t>::MIN as i128, <$t>::MAX as i128),
                delta in delta(),
            ) {
                let end = (start + delta).clamp(<$t>::MIN as i128, <$t>::MAX as i128);
                let range = (start as $t)..(end as $t);
                let expected: Vec<$t> = range.clone().collect();
                run(workers, || -> Result<(), TestCaseError> {
                    let par = || range.clone().into_par_iter();
                    prop_assert_eq!(par().len(), expected.len());
                    prop_assert_eq!(&par().collect::<Vec<$t>>(), &expected);
                    prop_assert_eq!(par().count(), expected.len());
                    prop_assert_eq!(
                        par().map(|x| x as i128).sum::<i128>(),
                        expected.iter().map(|&x| x as i128).sum::<i128>()
                    );
                    prop_assert_eq!(
                        par().enumerate().collect::<Vec<_>>(),
                        expected.iter().copied().enumerate().collect::<Vec<_>>()
                    );
                    prop_assert_eq!(
                        par().find_first(|&x| x % 5 == 3),
                        expected.iter().copied().find(|&x| x % 5 == 3)
                    );
                    prop_assert_eq!(
                        par().find_last(|&x| x % 5 == 3),
                        expected.iter().copied().rev().find(|&x| x % 5 == 3)
                    );
                    prop_assert_eq!(
                        par().position_first(|x| x % 3 == 0),
                        expected.iter().position(|&x| x % 3 == 0)
                    );
                    prop_assert_eq!(
                        par().position_last(|x| x % 3 == 0),
                        expected.iter().rposition(|&x| x % 3 == 0)
                    );
                    prop_assert_eq!(&par().with_max_len(1).collect::<Vec<_>>(), &expected);
                    prop_assert_eq!(&par().with_min_len(usize::MAX).collect::<Vec<_>>(), &expected);
                    prop_assert_eq!(
                        par().zip(0..expected.len() / 2).collect::<Vec<_>>(),
                        expected.iter().copied().zip(0..expected.len() / 2).collect::<Vec<_>>()
                    );
                    prop_assert_eq!(
                        par().chain(range.clone()).collect::<Vec<_>>(),
                        expected.iter().chain(&expected).copied().collect::<Vec<_>>()
                    );
                    // Through the chain's producer (`enumerate`, `with_max_len` cut it at
                    // any index, up to the whole first range: past `<$t>::MAX` for i8).
                    prop_assert_eq!(
                        par().chain(range.clone()).enumerate().collect::<Vec<_>>(),
                        expected.iter().chain(&expected).copied().enumerate().collect::<Vec<_>>()
                    );
                    prop_assert_eq!(
                        par().chain(range.clone()).with_max_len(1).collect::<Vec<_>>(),
                        expected.iter().chain(&expected).copied().collect::<Vec<_>>()
                    );
                    prop_assert_eq!(
                        par().filter(|x| x % 2 == 0).count(),
                        expected.iter().filter(|&&x| x % 2 == 0).count()
                    );
                    Ok(())
                })?;
            }
        }
    )*};
}

range_properties!(
    range_u8: u8,
    range_u16: u16,
    range_u32: u32,
    range_u64: u64,
    range_usize: usize,
    range_i8: i8,
    range_i16: i16,
    range_i32: i32,
    range_i64: i64,
    range_isize: isize,
);

#[test]
fn ranges_at_the_extremes_of_their_types() {
    let rt = pool(3);
    rt.install(|| {
        assert_eq!(
            (i8::MIN..i8::MAX).into_par_iter().collect::<Vec<_>>(),
            (i8::MIN..i8::MAX).collect::<Vec<_>>()
        );
        assert_eq!(
            (u8::MIN..u8::MAX).into_par_iter().collect::<Vec<_>>(),
            (u8::MIN..u8::MAX).collect::<Vec<_>>()
        );
        assert_eq!(
            (i16::MIN..i16::MAX)
                .into_par_iter()
                .map(i64::from)
                .sum::<i64>(),
            (i16::MIN..i16::MAX).map(i64::from).sum::<i64>()
        );
        assert_eq!(
            (i64::MAX - 3..i64::MAX).into_par_iter().collect::<Vec<_>>(),
            [i64::MAX - 3, i64::MAX - 2, i64::MAX - 1]
        );
        assert_eq!(
            (i64::MIN..i64::MIN + 3).into_par_iter().collect::<Vec<_>>(),
            [i64::MIN, i64::MIN + 1, i64::MIN + 2]
        );
        assert_eq!(
            (u64::MAX - 2..u64::MAX).into_par_iter().collect::<Vec<_>>(),
            [u64::MAX - 2, u64::MAX - 1]
        );
        // The longest ranges: their lengths fit a usize exactly.
        assert_eq!((u64::MIN..u64::MAX).into_par_iter().len(), usize::MAX);
        assert_eq!((i64::MIN..i64::MAX).into_par_iter().len(), usize::MAX);
        assert_eq!((isize::MIN..isize::MAX).into_par_iter().len(), usize::MAX);
        assert_eq!((0..usize::MAX).into_par_iter().len(), usize::MAX);
        // Backwards ranges are empty (built from variables: a literal one is a lint error).
        let backwards = |start: i32, end: i32| start..end;
        assert_eq!(backwards(5, -5).into_par_iter().len(), 0);
        assert!(backwards(5, -5)
            .into_par_iter()
            .collect::<Vec<_>>()
            .is_empty());
        assert_eq!(backwards(5, -5).into_par_iter().sum::<i32>(), 0);
        assert_eq!(backwards(5, -5).into_par_iter().find_first(|_| true), None);
        let (max, min) = (i64::MAX, i64::MIN);
        assert_eq!((max..min).into_par_iter().count(), 0);
        assert_eq!((max..min).into_par_iter().with_max_len(1).count(), 0);
        let (max, min) = (u8::MAX, u8::MIN);
        assert_eq!((max..min).into_par_iter().collect::<Vec<_>>(), []);
        assert_eq!((7..7u16).into_par_iter().max(), None);
    });
}

// ---------------------------------------------------------------------------------------------
// Early exit
// ---------------------------------------------------------------------------------------------

/// Spins, yielding, until `flag` is set; returns whether another thread set it. Gives up after
/// a deadline and sets it itself: the wait only makes an interleaving likely, and how it ends
/// changes no expected result.
fn wait_until_set(flag: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !flag.load(SeqCst) {
        if Instant::now() >= deadline {
            flag.store(true, SeqCst);
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// `find_first` / `position_first` return the first match even when the pieces to its right
/// found their matches first: every item before the match waits (yielding) until a later
/// item has matched, and every item after the match matches.
#[test]
fn find_first_returns_the_first_match_even_when_later_pieces_finish_first() {
    const N: usize = 100_000;
    let slice: Vec<usize> = (0..N).collect();
    let mut interleaved = 0;
    for workers in 2..=4 {
        for m in [0, 1, 999, 5_000, 12_000] {
            for shape in 0..4 {
                let later_matched = AtomicBool::new(false);
                let timed_out = AtomicBool::new(false);
                let predicate = |i: usize| match i.cmp(&m) {
                    Ordering::Less => {
                        if !wait_until_set(&later_matched) {
                            timed_out.store(true, SeqCst);
                        }
                        false
                    }
                    Ordering::Equal => true,
                    Ordering::Greater => {
                        later_matched.store(true, SeqCst);
                        true
                    }
                };
                let found = pool(workers).install(|| match shape {
                    0 => (0..N).into_par_iter().find_first(|&i| predicate(i)),
                    1 => slice.par_iter().position_first(|&i| predicate(i)),
                    2 => slice
                        .par_iter()
                        .filter(|_| true)
                        .find_first(|&&i| predicate(i))
                        .copied(),
                    _ => (0..N / 100)
                        .into_par_iter()
                        .flat_map(|c| c * 100..(c + 1) * 100)
                        .find_first(|&i| predicate(i)),
                });
                assert_eq!(
                    found,
                    Some(m),
                    "workers {workers}, match at {m}, shape {shape}"
                );
                // With m > 0 the items before m waited; without a timeout, a later item had
                // matched before m was even looked at.
                interleaved += usize::from(m > 0 && !timed_out.load(SeqCst));
            }
        }
    }
    assert!(interleaved > 0, "no run had a later piece match first");
}

/// The mirror image: `find_last` / `position_last` return the last match even when pieces to
/// its left matched first. Every item after the match waits until an item in the first
/// quarter (another piece) has matched; every item before the match matches.
#[test]
fn find_last_returns_the_last_match_even_when_earlier_pieces_finish_first() {
    const N: usize = 100_000;
    let slice: Vec<usize> = (0..N).collect();
    let mut interleaved = 0;
    for workers in 2..=4 {
        for m in [N - 1, N - 2, N - 1_000, N - 5_000, N - 12_000] {
            for shape in 0..4 {
                let earlier_matched = AtomicBool::new(false);
                let waited = AtomicBool::new(false);
                let timed_out = AtomicBool::new(false);
                let predicate = |i: usize| match i.cmp(&m) {
                    Ordering::Greater => {
                        waited.store(true, SeqCst);
                        if !wait_until_set(&earlier_matched) {
                            timed_out.store(true, SeqCst);
                        }
                        false
                    }
                    Ordering::Equal => true,
                    Ordering::Less => {
                        if i < N / 4 {
                            earlier_matched.store(true, SeqCst);
                        }
                        true
                    }
                };
                let found = pool(workers).install(|| match shape {
                    0 => (0..N).into_par_iter().find_last(|&i| predicate(i)),
                    1 => slice.par_iter().position_last(|&i| predicate(i)),
                    2 => slice
                        .par_iter()
                        .filter(|_| true)
                        .find_last(|&&i| predicate(i))
                        .copied(),
                    _ => (0..N / 100)
                        .into_par_iter()
                        .flat_map(|c| c * 100..(c + 1) * 100)
                        .find_last(|&i| predicate(i)),
                });
                assert_eq!(
                    found,
                    Some(m),
                    "workers {workers}, match at {m}, shape {shape}"
                );
                interleaved += usize::from(waited.load(SeqCst) && !timed_out.load(SeqCst));
            }
        }
    }
    assert!(interleaved > 0, "no run had an earlier piece match first");
}

/// Deep inside one `flat_map` piece, the spans `find_first` / `find_last` use to order pieces
/// run out of bits (they halve for every inner iterator split off), and later inner iterators
/// share one span start. A parallel inner iterator there must still not be stopped by its own
/// other half: the half that finishes first must not make the other one give up. The 150th
/// of 200 inner iterators (all in one piece) holds the answer: in its first half for
/// `find_first` (which waits until the second half matched), in its second half for
/// `find_last` (which waits until the first half matched).
#[test]
fn find_first_and_last_deep_inside_one_flat_map_piece() {
    const OUTER: usize = 200;
    const AT: usize = 150;

    /// Runs `find` over the `(outer, inner)` pairs on `workers` workers: in the inner
    /// iterator at `AT`, index `wait` waits for a match in the other half, `answer` is the
    /// expected result and the remaining indices match at once. Returns what `find` found
    /// and whether the wait saw the other half match (rather than timing out).
    fn run(
        workers: usize,
        wait: usize,
        answer: usize,
        find: impl Fn(&(dyn Fn(&(usize, usize)) -> bool + Sync)) -> Option<(usize, usize)> + Sync,
    ) -> (Option<(usize, usize)>, bool) {
        let other_half = AtomicBool::new(false);
        let timed_out = AtomicBool::new(false);
        let predicate = |&(o, i): &(usize, usize)| {
            if o != AT {
                return false;
            }
            if i == wait {
                if !wait_until_set(&other_half) {
                    timed_out.store(true, SeqCst);
                }
                false
            } else if i == answer {
                true
            } else {
                other_half.store(true, SeqCst);
                true
            }
        };
        let found = pool(workers).install(|| find(&predicate));
        (found, !timed_out.load(SeqCst))
    }

    let pairs = || {
        (0..OUTER)
            .into_par_iter()
            .with_min_len(usize::MAX)
            .flat_map(|o| (0..4usize).into_par_iter().map(move |i| (o, i)))
    };
    let mut interleaved = 0;
    for workers in 2..=4 {
        for round in 0..4 {
            // find_first: (AT, 0) waits for a match in the other half, (AT, 1) is the answer.
            let (found, met) = run(workers, 0, 1, |p| pairs().find_first(|x| p(x)));
            assert_eq!(
                found,
                Some((AT, 1)),
                "find_first, {workers} workers, round {round}"
            );
            interleaved += usize::from(met);

            // find_last: (AT, 2) waits for a match in the first half, (AT, 3) is the answer.
            let (found, met) = run(workers, 2, 3, |p| pairs().find_last(|x| p(x)));
            assert_eq!(
                found,
                Some((AT, 3)),
                "find_last, {workers} workers, round {round}"
            );
            interleaved += usize::from(met);
        }
    }
    assert!(interleaved > 0, "the halves never ran at the same time");
}

/// Runs `attempt` (which returns how many items its predicate saw out of `total`) until one
/// run saw fewer than half. Three tries, so that one run whose finder was descheduled at the
/// wrong moment does not fail the test; a consumer that never stops early fails all three.
///
/// On a machine that gives this process one CPU (`taskset -c 0`, a one-CPU container) the two
/// workers take turns: the worker that stole the second half may scan all of it before the
/// finder, in the first half, gets the CPU back and raises the stop flag. There the bound is
/// fewer than all the items (the finder's half stopped), which a consumer that never stops
/// still fails.
#[track_caller]
fn assert_stops_early(what: &str, total: usize, attempt: impl Fn() -> usize) {
    let one_cpu = std::thread::available_parallelism().map_or(true, |n| n.get() == 1);
    let bound = if one_cpu { total } else { total / 2 };
    let mut counts = Vec::new();
    for _ in 0..3 {
        let seen = attempt();
        if seen < bound {
            return;
        }
        counts.push(seen);
    }
    panic!("{what}: the predicate saw {counts:?} of {total} items; it should stop before {bound}");
}

#[test]
fn any_all_and_find_stop_early() {
    const N: usize = 1_000_000;
    let v: Vec<u32> = (0..N as u32).collect();
    let rt = pool(2);
    let counted = |seen: &AtomicUsize| {
        seen.fetch_add(1, Relaxed);
    };
    assert_stops_early("any", N, || {
        let seen = AtomicUsize::new(0);
        let found = rt.install(|| {
            v.par_iter().any(|&x| {
                counted(&seen);
                x == 1000
            })
        });
        assert!(found);
        seen.into_inner()
    });
    assert_stops_early("all", N, || {
        let seen = AtomicUsize::new(0);
        let holds = rt.install(|| {
            v.par_iter().all(|&x| {
                counted(&seen);
                x != 1000
            })
        });
        assert!(!holds);
        seen.into_inner()
    });
    assert_stops_early("find_any", N, || {
        let seen = AtomicUsize::new(0);
        let found = rt.install(|| {
            v.par_iter().find_any(|&&x| {
                counted(&seen);
                x == 1000
            })
        });
        assert_eq!(found, Some(&1000));
        seen.into_inner()
    });
    assert_stops_early("find_first", N, || {
        let seen = AtomicUsize::new(0);
        let found = rt.install(|| {
            v.par_iter().find_first(|&&x| {
                counted(&seen);
                x == 1000
            })
        });
        assert!(same(found, Some(&v[1000])));
        seen.into_inner()
    });
    assert_stops_early("find_first with many matches", N, || {
        let seen = AtomicUsize::new(0);
        let found = rt.install(|| {
            (0..N).into_par_iter().find_first(|&x| {
                counted(&seen);
                x >= 1000 && x % 1000 == 0
            })
        });
        assert_eq!(found, Some(1000));
        seen.into_inner()
    });
    assert_stops_early("position_first", N, || {
        let seen = AtomicUsize::new(0);
        let found = rt.install(|| {
            v.par_iter().position_first(|&x| {
                counted(&seen);
                x == 1000
            })
        });
        assert_eq!(found, Some(1000));
        seen.into_inner()
    });
}

// ---------------------------------------------------------------------------------------------
// Panics and drops
// ---------------------------------------------------------------------------------------------

/// A panic in `map` at one item reaches the caller with its payload, through every kind of
/// consumer, and the pool computes correctly afterwards.
#[test]
fn a_panic_in_map_reaches_the_caller_and_the_pool_survives() {
    quiet_intended_panics();
    const N: u32 = 10_000;
    let v: Vec<u32> = (0..N).collect();
    let expected: u64 = v.iter().map(|&x| u64::from(x)).sum();
    for workers in 1..=4 {
        let rt = pool(workers);
        for k in [0, 1, N / 2, N - 1] {
            let bomb = |&x: &u32| -> u64 {
                if x == k {
                    boom(k as usize)
                }
                u64::from(x)
            };
            // Each returns something of what it computed, so that nothing is optimized away.
            type Run<'a> = Box<dyn Fn() -> u64 + Sync + 'a>;
            let runs: Vec<(&str, Run<'_>)> = vec![
                (
                    "collect",
                    Box::new(|| v.par_iter().map(bomb).collect::<Vec<_>>()[0]),
                ),
                ("sum", Box::new(|| v.par_iter().map(bomb).sum::<u64>())),
                (
                    "for_each",
                    Box::new(|| {
                        v.par_iter().for_each(|x| {
                            bomb(x);
                        });
                        0
                    }),
                ),
                (
                    "collect after filter",
                    Box::new(|| v.par_iter().filter(|_| true).map(bomb).collect::<Vec<_>>()[0]),
                ),
                (
                    "collect_into_vec",
                    Box::new(|| {
                        let mut out = Vec::new();
                        v.par_iter().map(bomb).collect_into_vec(&mut out);
                        out[0]
                    }),
                ),
                (
                    "reduce",
                    Box::new(|| v.par_iter().map(bomb).reduce(|| 0, |a, b| a + b)),
                ),
                ("min", Box::new(|| v.par_iter().map(bomb).min().unwrap())),
                (
                    "find_first",
                    Box::new(|| v.par_iter().map(bomb).find_first(|_| false).unwrap_or(0)),
                ),
                (
                    "flat_map",
                    Box::new(|| {
                        v.par_chunks(100)
                            .flat_map(|c| c.par_iter().map(bomb))
                            .sum::<u64>()
                    }),
                ),
                (
                    "with_max_len(1)",
                    Box::new(|| v.par_iter().with_max_len(1).map(bomb).collect::<Vec<_>>()[0]),
                ),
            ];
            for (what, run) in &runs {
                let what = format!("{what}, {workers} workers, panic at {k}");
                expect_boom(k as usize, &what, || {
                    rt.install(run);
                });
                assert_eq!(
                    rt.install(|| v.par_iter().map(|&x| u64::from(x)).sum::<u64>()),
                    expected,
                    "{what}: the pool computes wrongly after the panic"
                );
            }
        }
    }
}

/// With several panics, the one resumed is the first in the iterator's order (the doc's
/// "first panic (in reduction order)"), whichever piece panicked first in time.
#[test]
fn the_leftmost_panic_is_the_one_resumed() {
    quiet_intended_panics();
    const N: usize = 10_000;
    for workers in 1..=4 {
        let rt = pool(workers);
        expect_boom(0, "every item panics", || {
            rt.install(|| (0..N).into_par_iter().for_each(|i| boom(i)))
        });
        expect_boom(0, "every item panics, with_max_len(1)", || {
            rt.install(|| (0..N).into_par_iter().with_max_len(1).for_each(|i| boom(i)))
        });
        for (first, second) in [(10, N - 10), (N / 2 - 1, N / 2), (3, 4)] {
            expect_boom(first, &format!("panics at {first} and {second}"), || {
                rt.install(|| {
                    (0..N).into_par_iter().for_each(|i| {
                        if i == first || i == second {
                            boom(i)
                        }
                    })
                })
            });
        }
        assert_eq!(
            rt.install(|| (0..N).into_par_iter().sum::<usize>()),
            N * (N - 1) / 2
        );
    }
}

/// A panic from the calling thread (global runtime) carries a formatted message.
#[test]
fn a_panic_with_a_message_reaches_a_plain_thread() {
    quiet_intended_panics();
    let v: Vec<u32> = (0..50_000).collect();
    let message = common::panic_message(|| {
        v.par_iter()
            .map(|&x| {
                if x == 31_337 {
                    panic!("intended panic at {x}");
                }
                x
            })
            .for_each(drop);
    });
    assert_eq!(message, "intended panic at 31337");
    assert_eq!(v.par_iter().filter(|&&x| x % 2 == 0).count(), 25_000);
}

/// `collect` of items with a drop counter, when `map` panics at item `k`: every item made
/// was dropped exactly once (by the unwinding collect), on the indexed and unindexed paths.
#[test]
fn collect_drops_every_item_made_when_map_panics() {
    quiet_intended_panics();
    const N: usize = 5_000;
    for workers in 1..=4 {
        let rt = pool(workers);
        for k in [0, 1, N / 2, N - 1] {
            for shape in 0..5 {
                let ledger = Ledger::new(N);
                let make = |i: usize| {
                    if i == k {
                        boom(k)
                    }
                    ledger.make(i)
                };
                let what = format!("shape {shape}, {workers} workers, panic at {k}");
                expect_boom(k, &what, || {
                    rt.install(|| match shape {
                        0 => drop((0..N).into_par_iter().map(make).collect::<Vec<_>>()),
                        1 => drop(
                            (0..N)
                                .into_par_iter()
                                .with_max_len(7)
                                .map(make)
                                .collect::<Vec<_>>(),
                        ),
                        2 => drop(
                            (0..N)
                                .into_par_iter()
                                .filter(|_| true)
                                .map(make)
                                .collect::<Vec<_>>(),
                        ),
                        3 => {
                            let mut out = Vec::new();
                            (0..N).into_par_iter().map(make).collect_into_vec(&mut out);
                        }
                        // The panic while an item is alive: the closure's argument drops it.
                        _ => drop(
                            (0..N)
                                .into_par_iter()
                                .map(|i| ledger.make(i))
                                .map(|t| {
                                    if t.id == k {
                                        boom(k)
                                    }
                                    t
                                })
                                .collect::<Vec<_>>(),
                        ),
                    })
                });
                ledger.assert_balanced(&what);
                assert_eq!(ledger.made(k), u8::from(shape == 4), "{what}");
            }
        }
    }
}

/// `Vec::into_par_iter`, when the consumer panics: every element of the source vector is
/// dropped exactly once, handed out or not.
#[test]
fn into_par_iter_drops_every_element_once_when_a_closure_panics() {
    quiet_intended_panics();
    const N: usize = 5_000;
    for workers in 1..=4 {
        let rt = pool(workers);
        for k in [0, 1, N / 2 - 1, N - 1] {
            for shape in 0..5 {
                let ledger = Ledger::new(N);
                let others = Ledger::new(N / 2);
                let v = ledger.vec();
                let w = others.vec();
                let what = format!("shape {shape}, {workers} workers, panic at {k}");
                let check = |t: &Tracked<'_>| {
                    if t.id == k {
                        boom(k)
                    }
                };
                expect_boom(k, &what, move || {
                    rt.install(move || match shape {
                        0 => v.into_par_iter().for_each(|t| check(&t)),
                        1 => v.into_par_iter().with_max_len(1).for_each(|t| check(&t)),
                        2 => drop(
                            v.into_par_iter()
                                .map(|t| {
                                    check(&t);
                                    t.id
                                })
                                .sum::<usize>(),
                        ),
                        3 => drop(
                            v.into_par_iter()
                                .filter(|t| t.id % 2 == 0 || t.id == k)
                                .map(|t| {
                                    check(&t);
                                    t
                                })
                                .collect::<Vec<_>>(),
                        ),
                        // Zipped with a vector half as long: when the panic is in the part
                        // that is never paired, the panic comes from a later `for_each`.
                        _ => {
                            let pairs: Vec<_> = v.into_par_iter().zip(w).collect();
                            assert_eq!(pairs.len(), N / 2);
                            pairs.into_par_iter().for_each(|(t, _)| check(&t));
                            if k >= N / 2 {
                                boom(k)
                            }
                        }
                    })
                });
                ledger.assert_all_dropped_once(&what);
                others.assert_all_dropped_once(&what);
            }
        }
    }
}

/// `Vec::into_par_iter` with consumers that stop early: the items never looked at, and those
/// looked at and rejected, are all dropped exactly once; the one returned is alive until the
/// caller drops it.
#[test]
fn into_par_iter_drops_every_element_once_when_stopping_early() {
    const N: usize = 20_000;
    for workers in 1..=4 {
        let rt = pool(workers);
        for k in [0, 1, N / 2, N - 1] {
            for shape in 0..8 {
                let ledger = Ledger::new(N);
                let v = ledger.vec();
                let what = format!("shape {shape}, {workers} workers, item {k}");
                let found: Option<Tracked<'_>> = rt.install(|| match shape {
                    0 => v.into_par_iter().find_any(|t| t.id == k),
                    1 => v.into_par_iter().find_first(|t| t.id >= k),
                    2 => v.into_par_iter().find_last(|t| t.id <= k),
                    3 => v
                        .into_par_iter()
                        .filter(|t| t.id % 2 == k % 2)
                        .find_first(|t| t.id >= k),
                    4 => {
                        assert!(v.into_par_iter().any(|t| t.id == k), "{what}");
                        None
                    }
                    5 => {
                        assert!(!v.into_par_iter().all(|t| t.id != k), "{what}");
                        None
                    }
                    6 => {
                        assert_eq!(
                            v.into_par_iter().position_first(|t| t.id == k),
                            Some(k),
                            "{what}"
                        );
                        None
                    }
                    _ => {
                        assert!(v.into_par_iter().find_first(|_| false).is_none(), "{what}");
                        None
                    }
                });
                if let Some(t) = &found {
                    assert_eq!(t.id, k, "{what}: found the wrong item");
                    assert_eq!(ledger.dropped(k), 0, "{what}: the item found was dropped");
                    assert_eq!(ledger.dropped_total(), N - 1, "{what}");
                }
                drop(found);
                ledger.assert_all_dropped_once(&what);
            }
        }
    }
    // Zip of two owned vectors of unequal lengths: the unpaired tail is dropped too.
    for workers in 1..=4 {
        let (long, short) = (Ledger::new(3_000), Ledger::new(1_001));
        let pairs: Vec<_> =
            pool(workers).install(|| long.vec().into_par_iter().zip(short.vec()).collect());
        assert_eq!(pairs.len(), 1_001);
        assert!(pairs
            .iter()
            .enumerate()
            .all(|(i, (a, b))| a.id == i && b.id == i));
        drop(pairs);
        long.assert_all_dropped_once("zip, long side");
        short.assert_all_dropped_once("zip, short side");
    }
}

// ---------------------------------------------------------------------------------------------
// Sorting
// ---------------------------------------------------------------------------------------------

/// The shapes of input that sorting algorithms treat specially.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    Random,
    /// Ascending, each value twice.
    Sorted,
    /// Strictly descending.
    Reversed,
    /// Descending, each value three times: a descending run with ties, which a sort must
    /// not simply reverse if it is to stay stable.
    ReversedWithTies,
    AllEqual,
    /// Random values in `0..4`.
    FewDistinct,
    /// Ascending runs of a random period.
    Sawtooth,
}

const PATTERNS: [Pattern; 7] = [
    Pattern::Random,
    Pattern::Sorted,
    Pattern::Reversed,
    Pattern::ReversedWithTies,
    Pattern::AllEqual,
    Pattern::FewDistinct,
    Pattern::Sawtooth,
];

/// SplitMix64: a few random numbers from a seed, without another dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn make_input(pattern: Pattern, len: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix(seed);
    let n = len as u32;
    match pattern {
        Pattern::Random => (0..len).map(|_| rng.next() as u32).collect(),
        Pattern::Sorted => (0..n).map(|i| i / 2).collect(),
        Pattern::Reversed => (0..n).rev().collect(),
        Pattern::ReversedWithTies => (0..n).rev().map(|i| i / 3).collect(),
        Pattern::AllEqual => vec![42; len],
        Pattern::FewDistinct => (0..len).map(|_| (rng.next() % 4) as u32).collect(),
        Pattern::Sawtooth => {
            let period = 1 + (rng.next() % 100) as u32;
            (0..n).map(|i| i % period).collect()
        }
    }
}

/// Each value with its original index: sorting by the value alone shows stability.
fn with_index(v: &[u32]) -> Vec<(u32, usize)> {
    v.iter().copied().zip(0..).collect()
}

fn is_sorted_by_key<T, K: Ord>(v: &[T], key: impl Fn(&T) -> K) -> bool {
    v.windows(2).all(|w| key(&w[0]) <= key(&w[1]))
}

/// Checks every sort of `v` against `std`'s, on the current runtime.
fn check_sorts(v: &[u32]) -> Result<(), TestCaseError> {
    let mut ascending = v.to_vec();
    ascending.sort();
    let mut descending = v.to_vec();
    descending.sort_by(|a, b| b.cmp(a));

    let mut w = v.to_vec();
    w.par_sort();
    prop_assert_eq!(&w, &ascending, "par_sort");
    let mut w = v.to_vec();
    w.par_sort_unstable();
    prop_assert_eq!(&w, &ascending, "par_sort_unstable");
    let mut w = v.to_vec();
    w.par_sort_by(|a, b| b.cmp(a));
    prop_assert_eq!(&w, &descending, "par_sort_by");
    let mut w = v.to_vec();
    w.par_sort_unstable_by(|a, b| b.cmp(a));
    prop_assert_eq!(&w, &descending, "par_sort_unstable_by");
    let mut w = v.to_vec();
    w.par_sort_unstable_by_key(|&x| Reverse(x));
    prop_assert_eq!(&w, &descending, "par_sort_unstable_by_key");

    // Stable sorts keep equal keys in their original order: exactly std's stable result.
    let pairs = with_index(v);
    let mut all_sorted = pairs.clone();
    all_sorted.sort();
    for modulus in [u32::MAX, 4] {
        let key = |p: &(u32, usize)| p.0 % modulus;
        let mut expected = pairs.clone();
        expected.sort_by_key(key);
        let mut w = pairs.clone();
        w.par_sort_by_key(key);
        prop_assert_eq!(&w, &expected, "par_sort_by_key, key % {}", modulus);
        let mut w = pairs.clone();
        w.par_sort_by(|a, b| key(a).cmp(&key(b)));
        prop_assert_eq!(&w, &expected, "par_sort_by, key % {}", modulus);
        let mut expected = pairs.clone();
        expected.sort_by_key(|p| Reverse(key(p)));
        let mut w = pairs.clone();
        w.par_sort_by_key(|p| Reverse(key(p)));
        prop_assert_eq!(
            &w,
            &expected,
            "par_sort_by_key descending, key % {}",
            modulus
        );

        // Unstable sorts by key: keys in order, and the same elements.
        let mut w = pairs.clone();
        w.par_sort_unstable_by_key(key);
        prop_assert!(
            is_sorted_by_key(&w, key),
            "par_sort_unstable_by_key, key % {}",
            modulus
        );
        w.sort();
        prop_assert_eq!(&w, &all_sorted, "par_sort_unstable_by_key lost elements");
        let mut w = pairs.clone();
        w.par_sort_unstable_by(|a, b| key(b).cmp(&key(a)));
        prop_assert!(is_sorted_by_key(&w, |p| Reverse(key(p))));
        w.sort();
        prop_assert_eq!(&w, &all_sorted, "par_sort_unstable_by lost elements");
    }
    let mut w = pairs.clone();
    w.par_sort_unstable();
    prop_assert_eq!(&w, &all_sorted, "par_sort_unstable on distinct pairs");
    Ok(())
}

fn sort_length() -> impl Strategy<Value = usize> {
    prop_oneof![prop::sample::select(EDGE_LENGTHS.to_vec()), 0..5000usize]
}

proptest! {
    #![proptest_config(config())]

    /// All six sorts equal `std`'s, on every pattern of input.
    #[test]
    fn sorts_match_std(
        workers in 1..=4usize,
        pattern in prop::sample::select(PATTERNS.to_vec()),
        len in sort_length(),
        seed in any::<u64>(),
    ) {
        let v = make_input(pattern, len, seed);
        run(workers, || check_sorts(&v))?;
    }
}

/// The sorts on 200,000 elements of every pattern, once each: long enough for every level of
/// a parallel sort to split.
#[test]
fn large_sorts_match_std() {
    for (i, pattern) in PATTERNS.into_iter().enumerate() {
        let v = make_input(pattern, 200_000, 0x5eed + i as u64);
        let workers = 1 + i % 4;
        let result = run(workers, || {
            let mut expected = v.clone();
            expected.sort_unstable();
            let mut w = v.clone();
            w.par_sort();
            prop_assert_eq!(&w, &expected, "par_sort");
            let mut w = v.clone();
            w.par_sort_unstable();
            prop_assert_eq!(&w, &expected, "par_sort_unstable");
            let pairs = with_index(&v);
            let mut expected = pairs.clone();
            expected.sort_by_key(|p| p.0 % 16);
            let mut w = pairs.clone();
            w.par_sort_by_key(|p| p.0 % 16);
            prop_assert_eq!(&w, &expected, "par_sort_by_key");
            let mut w = pairs;
            w.par_sort_unstable_by(|a, b| b.cmp(a));
            expected.sort_by(|a, b| b.cmp(a));
            prop_assert_eq!(&w, &expected, "par_sort_unstable_by");
            Ok(())
        });
        if let Err(e) = result {
            panic!("{pattern:?} on {workers} workers: {e}");
        }
    }
    // On the global runtime, from a plain thread, too.
    let v = make_input(Pattern::Random, 200_000, 7);
    let mut w = v.clone();
    w.par_sort_unstable();
    let mut expected = v;
    expected.sort_unstable();
    assert_eq!(w, expected);
}

/// Sorts slices of every kind: arrays, subslices, empty ones.
#[test]
fn sorts_work_on_arrays_and_subslices() {
    let mut array = [5u8, 3, 9, 1, 1, 0, 7];
    array.par_sort();
    assert_eq!(array, [0, 1, 1, 3, 5, 7, 9]);
    let mut v: Vec<i64> = (0..10_000).map(|i| (i * 7919) % 10_007 - 5_000).collect();
    v[2_000..8_000].par_sort_unstable();
    assert!(v[2_000..8_000].windows(2).all(|w| w[0] <= w[1]));
    let mut empty: [u32; 0] = [];
    empty.par_sort();
    empty.par_sort_unstable_by_key(|&x| x);
    let mut strings: Vec<String> = (0..1_000)
        .map(|i| format!("{}", (i * 37) % 1_000))
        .collect();
    let mut expected = strings.clone();
    expected.sort();
    strings.par_sort();
    assert_eq!(strings, expected);
}

/// A comparator that panics after `k` comparisons: the panic reaches the caller, and the
/// slice still holds exactly its elements (in some order). If the sort needs fewer than `k`
/// comparisons, it simply sorts.
#[test]
fn a_comparator_panic_leaves_every_element_in_place() {
    quiet_intended_panics();
    const N: usize = 20_000;
    let mut round = 0;
    for pattern in PATTERNS {
        let v = make_input(pattern, N, 99);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        for stable in [true, false] {
            for k in [0, 1, 1_000, 19_999, 100_000, 10_000_000] {
                round += 1;
                let workers = 1 + round % 4;
                let what = format!("{pattern:?}, stable {stable}, panic at comparison {k}");
                let calls = AtomicUsize::new(0);
                let compare = |a: &u32, b: &u32| {
                    if calls.fetch_add(1, Relaxed) == k {
                        boom(k)
                    }
                    a.cmp(b)
                };
                let mut w = v.clone();
                let result = panic::catch_unwind(AssertUnwindSafe(|| {
                    run(workers, || {
                        if stable {
                            w.par_sort_by(compare)
                        } else {
                            w.par_sort_unstable_by(compare)
                        }
                    })
                }));
                match result {
                    Err(payload) => {
                        assert_eq!(payload.downcast_ref::<Boom>(), Some(&Boom(k)), "{what}");
                        w.sort_unstable();
                        assert!(w == sorted, "{what}: the elements changed");
                    }
                    Ok(()) => {
                        assert!(
                            calls.load(SeqCst) <= k,
                            "{what}: no panic after {k} comparisons"
                        );
                        assert!(w == sorted, "{what}: not sorted");
                    }
                }
            }
        }
    }
}

/// The same with elements that count their drops: none is dropped by the interrupted sort,
/// none is duplicated, and each is dropped exactly once with the vector.
#[test]
fn a_comparator_panic_drops_every_element_once() {
    quiet_intended_panics();
    const N: usize = 5_000;
    let mut round = 0;
    for pattern in [
        Pattern::Random,
        Pattern::FewDistinct,
        Pattern::ReversedWithTies,
    ] {
        let keys = make_input(pattern, N, 3);
        for stable in [true, false] {
            for k in [0, 10, 2_000, 30_000, 10_000_000] {
                round += 1;
                let workers = 1 + round % 4;
                let what = format!("{pattern:?}, stable {stable}, panic at comparison {k}");
                let ledger = Ledger::new(N);
                let mut v: Vec<(u32, Tracked<'_>)> =
                    keys.iter().copied().zip(ledger.vec()).collect();
                let calls = AtomicUsize::new(0);
                let compare = |a: &(u32, Tracked<'_>), b: &(u32, Tracked<'_>)| {
                    if calls.fetch_add(1, Relaxed) == k {
                        boom(k)
                    }
                    a.0.cmp(&b.0)
                };
                let result = panic::catch_unwind(AssertUnwindSafe(|| {
                    run(workers, || {
                        if stable {
                            v.par_sort_by(compare)
                        } else {
                            v.par_sort_unstable_by(compare)
                        }
                    })
                }));
                if let Err(payload) = result {
                    assert_eq!(payload.downcast_ref::<Boom>(), Some(&Boom(k)), "{what}");
                } else {
                    assert!(is_sorted_by_key(&v, |p| p.0), "{what}: not sorted");
                }
                assert_eq!(
                    ledger.dropped_total(),
                    0,
                    "{what}: the sort dropped elements"
                );
                let mut ids: Vec<usize> = v.iter().map(|(_, t)| t.id).collect();
                ids.sort_unstable();
                assert!(
                    ids.iter().copied().eq(0..N),
                    "{what}: elements lost or duplicated"
                );
                assert!(
                    v.iter().all(|(key, t)| *key == keys[t.id]),
                    "{what}: keys mixed up"
                );
                drop(v);
                ledger.assert_all_dropped_once(&what);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Works from anywhere
// ---------------------------------------------------------------------------------------------

/// A collect, a sum and a sort, each checked against the sequential answer; returns the sum.
fn small_computation() -> u64 {
    let v: Vec<u64> = (0..20_000).collect();
    let squares: Vec<u64> = v.par_iter().map(|&x| x * x % 1_000).collect();
    assert_eq!(
        squares,
        v.iter().map(|&x| x * x % 1_000).collect::<Vec<_>>()
    );
    let sum: u64 = squares.par_iter().sum();
    assert_eq!(sum, squares.iter().sum::<u64>());
    let mut sorted = squares.clone();
    sorted.par_sort();
    let mut expected = squares;
    expected.sort();
    assert_eq!(sorted, expected);
    sum
}

fn small_sum() -> u64 {
    (0..20_000u64).map(|x| x * x % 1_000).sum()
}

#[test]
fn works_on_a_plain_thread_with_the_global_runtime() {
    let (sum, on_worker) = std::thread::spawn(|| {
        assert_eq!(magpie::current_worker_index(), None);
        let on_worker = AtomicBool::new(false);
        (0..100_000u32).into_par_iter().for_each(|_| {
            if magpie::current_worker_index().is_some() {
                on_worker.store(true, Relaxed);
            }
        });
        (small_computation(), on_worker.into_inner())
    })
    .join()
    .unwrap();
    assert_eq!(sum, small_sum());
    assert!(on_worker, "no piece ran on a worker of the global runtime");
    assert_eq!(small_computation(), small_sum());
}

#[test]
fn works_inside_install_join_and_scope() {
    for workers in 1..=4 {
        let rt = pool(workers);
        assert_eq!(rt.install(small_computation), small_sum());
        // Every piece runs on this pool's workers.
        let foreign = AtomicUsize::new(0);
        rt.install(|| {
            (0..100_000u32).into_par_iter().for_each(|_| {
                if !magpie::current_worker_index().is_some_and(|i| i < workers) {
                    foreign.fetch_add(1, Relaxed);
                }
            })
        });
        assert_eq!(foreign.into_inner(), 0);
        assert_eq!(
            rt.install(|| magpie::join(small_computation, small_computation)),
            (small_sum(), small_sum())
        );
        let sums: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        rt.install(|| {
            magpie::scope(|s| {
                for slot in &sums {
                    s.spawn(move |_| slot.store(small_computation(), SeqCst));
                }
            })
        });
        assert!(sums.iter().all(|s| s.load(SeqCst) == small_sum()));
        // From a worker of another runtime.
        let other = pool(1 + workers % 4);
        assert_eq!(other.install(|| rt.install(small_computation)), small_sum());
    }
}

#[test]
fn works_inside_async_tasks_and_block_on() {
    for workers in 1..=4 {
        let rt = pool(workers);
        let v: Vec<u64> = (0..50_000).collect();
        let expected: u64 = v.iter().sum();
        let handle = rt.spawn(async move { v.par_iter().sum::<u64>() });
        assert_eq!(handle.join().unwrap(), expected);
        assert_eq!(
            rt.spawn(async { small_computation() }).join().unwrap(),
            small_sum()
        );
        assert_eq!(rt.block_on(async { small_computation() }), small_sum());
        assert_eq!(
            rt.block_on(async { magpie::spawn(async { small_computation() }).await.unwrap() }),
            small_sum()
        );
        // Several tasks at once, each running parallel iterators on the same workers.
        let handles: Vec<_> = (0..8)
            .map(|_| rt.spawn(async { small_computation() }))
            .collect();
        for handle in handles {
            assert_eq!(handle.join().unwrap(), small_sum());
        }
    }
    assert_eq!(magpie::block_on(async { small_computation() }), small_sum());
}

#[test]
fn nested_parallel_iterators() {
    let rows: Vec<Vec<u64>> = (0..64u64)
        .map(|r| (0..1_000).map(|c| r * c % 97).collect())
        .collect();
    let expected: Vec<u64> = rows.iter().map(|row| row.iter().sum()).collect();
    let check = || {
        let sums: Vec<AtomicU64> = rows.iter().map(|_| AtomicU64::new(u64::MAX)).collect();
        rows.par_iter().enumerate().for_each(|(r, row)| {
            sums[r].store(row.par_iter().sum::<u64>(), SeqCst);
        });
        assert_eq!(
            sums.iter().map(|s| s.load(SeqCst)).collect::<Vec<_>>(),
            expected
        );
        assert_eq!(
            rows.par_iter()
                .map(|row| row.par_iter().sum::<u64>())
                .collect::<Vec<_>>(),
            expected
        );
        assert_eq!(
            rows.par_iter()
                .map(|row| row.par_iter().position_first(|&x| x == 96))
                .collect::<Vec<_>>(),
            rows.iter()
                .map(|row| row.iter().position(|&x| x == 96))
                .collect::<Vec<_>>()
        );
        let mut data: Vec<u64> = rows.concat();
        data.par_chunks_mut(1_000)
            .for_each(|c| c.par_sort_unstable());
        assert!(data
            .chunks(1_000)
            .all(|c| c.windows(2).all(|w| w[0] <= w[1])));
        let hits = hit_counters(8 * 8 * 8);
        (0..8usize).into_par_iter().for_each(|a| {
            (0..8usize).into_par_iter().for_each(|b| {
                (0..8usize).into_par_iter().for_each(|c| {
                    hits[a * 64 + b * 8 + c].fetch_add(1, SeqCst);
                })
            })
        });
        assert!(all_hit_once(&hits));
    };
    for workers in 1..=4 {
        pool(workers).install(check);
    }
    check();
}

// ---------------------------------------------------------------------------------------------
// Odds and ends
// ---------------------------------------------------------------------------------------------

#[test]
fn chunk_size_zero_panics() {
    let mut v = [1, 2, 3];
    let message = common::panic_message(|| drop(v.par_chunks(0)));
    assert!(message.contains("chunk size"), "{message}");
    let message = common::panic_message(|| drop(v.par_chunks_mut(0)));
    assert!(message.contains("chunk size"), "{message}");
    // An empty slice too.
    let empty: [u8; 0] = [];
    common::panic_message(|| drop(empty.par_chunks(0)));
}

#[test]
fn arrays_and_slices_are_sources() {
    pool(2).install(|| {
        let mut array = [0u64; 97];
        array
            .par_iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i * i) as u64);
        assert_eq!(
            array.par_iter().sum::<u64>(),
            (0..97u64).map(|i| i * i).sum::<u64>()
        );
        assert_eq!((&array).into_par_iter().count(), 97);
        let slice: &mut [u64] = &mut array[10..20];
        slice.into_par_iter().for_each(|x| *x = 0);
        assert!(array[10..20].iter().all(|&x| x == 0));
        assert_eq!(array[..10].par_iter().copied().max(), Some(81));
        let empty: &[u32] = &[];
        assert_eq!(empty.par_iter().max(), None);
        assert_eq!(empty.par_iter().sum::<u32>(), 0);
        assert_eq!(empty.par_iter().product::<u32>(), 1);
        assert_eq!(empty.par_iter().copied().reduce(|| 7, |a, b| a + b), 7);
        assert_eq!(empty.par_chunks(3).count(), 0);
    });
}

/// Zero-sized items (every slot at one address), with a drop counter; and zero as a piece
/// bound, which must neither hang nor change a result.
#[test]
fn zero_sized_items_and_zero_bounds() {
    static ZST_DROPS: AtomicUsize = AtomicUsize::new(0);
    #[derive(Clone)]
    struct Zst;
    impl Drop for Zst {
        fn drop(&mut self) {
            ZST_DROPS.fetch_add(1, SeqCst);
        }
    }
    const N: usize = 10_000;
    for workers in 1..=4 {
        pool(workers).install(|| {
            ZST_DROPS.store(0, SeqCst);
            let made: Vec<Zst> = (0..N).into_par_iter().map(|_| Zst).collect();
            assert_eq!(made.len(), N);
            assert_eq!(ZST_DROPS.load(SeqCst), 0);
            made.into_par_iter().with_max_len(7).for_each(drop);
            assert_eq!(ZST_DROPS.load(SeqCst), N);
            let unit = vec![(); N];
            assert_eq!(
                unit.par_iter().enumerate().map(|(i, _)| i).sum::<usize>(),
                N * (N - 1) / 2
            );
            assert_eq!(unit.clone().into_par_iter().filter(|_| true).count(), N);
            assert_eq!(unit.par_chunks(3).count(), N.div_ceil(3));

            let v: Vec<u32> = (0..3_000).collect();
            assert_eq!(v.par_iter().with_max_len(0).copied().collect::<Vec<_>>(), v);
            assert_eq!(v.par_iter().with_min_len(0).copied().collect::<Vec<_>>(), v);
            assert_eq!(
                v.par_iter().with_max_len(0).position_last(|&x| x == 7),
                Some(7)
            );
        });
    }
}

/// Long pieces cut on demand (rule 5 of `iter/plumbing/bridge.rs`: a worker folding a piece
/// of 16,384 items or more hands half of its rest to a worker with nothing to do) lose,
/// repeat and reorder nothing: every consumer that allows it, on inputs long enough, on pools
/// of 2 to 8 workers and one with the rule off, against the sequential answers.
#[test]
fn long_pieces_cut_on_demand_keep_every_answer() {
    let pools: Vec<Runtime> = [2, 3, 4, 8]
        .into_iter()
        .map(common::runtime)
        .chain([Runtime::builder()
            .worker_threads(3)
            .split_on_demand(false)
            .build()
            .unwrap()])
        .collect();
    for len in [4 * 4096 * 2 - 1, 100_003, 1_000_003] {
        let v: Vec<u32> = (0..len as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % 1_000_000)
            .collect();
        let target = v[len * 2 / 3];
        let wide = |&x: &u32| u64::from(x);
        for rt in &pools {
            for _ in 0..4 {
                rt.install(|| {
                    let hits = hit_counters(len);
                    let doubled: Vec<u64> = v
                        .par_iter()
                        .enumerate()
                        .map(|(i, &x)| {
                            hits[i].fetch_add(1, SeqCst);
                            u64::from(x) * 2
                        })
                        .collect();
                    assert!(
                        all_hit_once(&hits),
                        "len {len}: an item was lost or repeated"
                    );
                    assert!(doubled.iter().zip(&v).all(|(&d, &x)| d == u64::from(x) * 2));
                    assert_eq!(
                        v.par_iter().map(wide).sum::<u64>(),
                        v.iter().map(wide).sum::<u64>()
                    );
                    assert_eq!(
                        v.par_iter()
                            .map(|&x| Affine::of(x))
                            .reduce_with(Affine::then),
                        v.iter().map(|&x| Affine::of(x)).reduce(Affine::then)
                    );
                    assert_eq!(v.par_iter().min_by_key(|&&x| x), v.iter().min());
                    assert_eq!(
                        v.par_iter().position_first(|&x| x == target),
                        v.iter().position(|&x| x == target)
                    );
                    assert_eq!(
                        v.par_iter().position_last(|&x| x == target),
                        v.iter().rposition(|&x| x == target)
                    );
                    assert!(v.par_iter().any(|&x| x == target));
                    assert!(!v.par_iter().any(|&x| x == 1_000_000));
                    assert_eq!(
                        v.par_iter().filter(|&&x| x % 3 == 0).count(),
                        v.iter().filter(|&&x| x % 3 == 0).count()
                    );
                });
            }
        }
    }
}
