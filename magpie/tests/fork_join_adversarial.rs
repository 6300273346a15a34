//! Adversarial inputs for fork-join, the parallel iterators and the parallel sorts, from a
//! review of `join/`, `iter/` and the ways into the pool (`install`, `join` from outside).
//!
//! Each test states the rule it pins down. What the other test files already cover (panics in
//! `par_sort_by`/`par_sort_unstable_by` with drop counting, `chunks(0)`, ranges at the
//! extremes of their types, bombs, alternating `install`s with `join`) is not repeated.
//!
//! `driver_hand_off_after_a_nested_join_wait` failed on the code it was written against: a
//! nested `join` wait cleared the worker's R6 mark while the outer wait went on (see its
//! doc; fixed by counting the waits, `WorkerThread::join_waits`).

mod common;

use std::cmp::Ordering;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::deadline::Deadline;
use common::{panic_message, planned_panic, quiet_planned_panics, runtime, SplitMix64, PLANNED};
use magpie::prelude::*;
use magpie::Runtime;

/// How long any one test here may take before the process aborts (a hang becomes a failure).
/// The re-entrant comparators take about 25 s in a debug build alone on 2 CPUs, and passed
/// 60 s once in CI while the machine was also running the shuttle scenarios.
const LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// Sorts
// ---------------------------------------------------------------------------------------------

/// What a comparison does besides comparing: panic at call `panic_at` (never if 0), and
/// re-enter the pool every `reenter` calls (never if 0) with a `join` and, at the 8th,
/// 16th, 32nd, ... re-entry, a parallel sort of its own. (Every 8th re-entry sorted, until
/// December 2026: some 900 nested sorts per sort of 30,000 items, a minute of the debug
/// build, which under the load of a CI run crossed the test's two-minute deadline.)
struct Plan {
    calls: AtomicUsize,
    panic_at: usize,
    reenter: usize,
}

impl Plan {
    fn new(panic_at: usize, reenter: usize) -> Arc<Plan> {
        Arc::new(Plan {
            calls: AtomicUsize::new(0),
            panic_at,
            reenter,
        })
    }

    fn tick(&self) {
        let n = self.calls.fetch_add(1, SeqCst) + 1;
        if n == self.panic_at {
            planned_panic();
        }
        if self.reenter != 0 && n % self.reenter == 0 {
            let (a, b) = magpie::join(|| n, || n + 1);
            assert_eq!(a + 1, b);
            let entry = n / self.reenter;
            if entry >= 8 && entry.is_power_of_two() {
                // Above the sequential cutoffs (4096), so it forks.
                let mut inner: Vec<u64> = (0..5_000u64).rev().collect();
                inner.par_sort_unstable();
                assert!(inner.windows(2).all(|w| w[0] <= w[1]));
                inner.par_sort_by(|a, b| b.cmp(a));
                assert!(inner.windows(2).all(|w| w[0] >= w[1]));
            }
        }
    }
}

/// An element whose every comparison goes through its plan. Each holds a clone of the plan's
/// `Arc`, so the strong count is a count of live elements: a lost element or a double drop
/// shows there (and a double drop would free the plan under the test's feet).
struct Item {
    key: u32,
    id: u32,
    plan: Arc<Plan>,
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Item {}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Item {
    fn cmp(&self, other: &Self) -> Ordering {
        self.plan.tick();
        self.key.cmp(&other.key)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sort {
    Stable,
    StableBy,
    StableByKey,
    Unstable,
    UnstableBy,
    UnstableByKey,
}

const SORTS: [Sort; 6] = [
    Sort::Stable,
    Sort::StableBy,
    Sort::StableByKey,
    Sort::Unstable,
    Sort::UnstableBy,
    Sort::UnstableByKey,
];

impl Sort {
    fn stable(self) -> bool {
        matches!(self, Sort::Stable | Sort::StableBy | Sort::StableByKey)
    }

    /// Sorts by key through the public method this variant names; every comparison (or key
    /// extraction) ticks the plan.
    fn run(self, v: &mut [Item]) {
        match self {
            Sort::Stable => v.par_sort(),
            Sort::StableBy => v.par_sort_by(|a, b| a.cmp(b)),
            Sort::StableByKey => v.par_sort_by_key(|x| {
                x.plan.tick();
                x.key
            }),
            Sort::Unstable => v.par_sort_unstable(),
            Sort::UnstableBy => v.par_sort_unstable_by(|a, b| a.cmp(b)),
            Sort::UnstableByKey => v.par_sort_unstable_by_key(|x| {
                x.plan.tick();
                x.key
            }),
        }
    }
}

fn items(n: usize, seed: u64, plan: &Arc<Plan>) -> Vec<Item> {
    let mut rng = SplitMix64::new(seed);
    // Keys with ties (a stable sort must keep their ids increasing), or sorted/reversed runs.
    let distinct = (n / 4 + 1) as u64;
    (0..n)
        .map(|id| {
            let key = match seed % 4 {
                0 => id as u32,
                1 => (n - id) as u32 / 2,
                _ => rng.below(distinct) as u32,
            };
            Item {
                key,
                id: id as u32,
                plan: plan.clone(),
            }
        })
        .collect()
}

/// Sorts `n` items with `sort`, panicking at comparison `panic_at` (0: never); checks that a
/// panic reached us exactly when one was planned and reached, that the slice holds every item
/// once, sorted (and stably) if nothing panicked, and that dropping it drops every item once.
/// Returns the number of comparisons made.
fn check_sort(sort: Sort, n: usize, seed: u64, panic_at: usize, reenter: usize) -> usize {
    let plan = Plan::new(panic_at, reenter);
    let mut v = items(n, seed, &plan);
    let keys: Vec<u32> = v.iter().map(|x| x.key).collect();
    let result = panic::catch_unwind(AssertUnwindSafe(|| sort.run(&mut v)));
    let calls = plan.calls.load(SeqCst);
    let what = format!("{sort:?}, n = {n}, seed = {seed}, panic at {panic_at}, calls {calls}");
    match &result {
        Err(payload) => {
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&PLANNED),
                "{what}: another panic"
            );
            assert!(
                panic_at != 0 && panic_at <= calls,
                "{what}: unplanned panic"
            );
        }
        Ok(()) => {
            assert!(
                panic_at == 0 || panic_at > calls,
                "{what}: the panic was lost"
            );
            assert!(
                v.windows(2).all(|w| w[0].key <= w[1].key),
                "{what}: not sorted"
            );
            if sort.stable() {
                assert!(
                    v.windows(2)
                        .all(|w| w[0].key < w[1].key || w[0].id < w[1].id),
                    "{what}: not stable"
                );
            }
        }
    }
    assert_eq!(v.len(), n);
    assert_eq!(
        Arc::strong_count(&plan),
        n + 1,
        "{what}: items dropped or duplicated"
    );
    let mut ids: Vec<u32> = v.iter().map(|x| x.id).collect();
    ids.sort_unstable();
    assert!(
        ids.iter().copied().eq(0..n as u32),
        "{what}: not a permutation"
    );
    assert!(
        v.iter().all(|x| x.key == keys[x.id as usize]),
        "{what}: keys changed"
    );
    drop(v);
    assert_eq!(Arc::strong_count(&plan), 1, "{what}: items not dropped");
    calls
}

/// Every public sort at lengths around the sequential cutoffs (0, 1, 2, tiny, 4096 and above),
/// with a comparator (or key function) that panics at its first call, early, in the middle,
/// and at its last call.
fn panics_at_every_stage(reenter: usize) {
    for sort in SORTS {
        for (i, n) in [0usize, 1, 2, 3, 17, 4_097, 30_000].into_iter().enumerate() {
            let seed = i as u64;
            let total = check_sort(sort, n, seed, 0, reenter);
            for k in [1, 2, total / 3, total / 2, total.saturating_sub(1), total] {
                if k > 0 {
                    check_sort(sort, n, seed, k, reenter);
                }
            }
        }
    }
}

#[test]
fn every_sort_keeps_every_item_when_its_comparator_panics() {
    quiet_planned_panics();
    let _deadline = Deadline::new("panicking comparators", LIMIT);
    for workers in [2, 4] {
        runtime(workers).install(|| panics_at_every_stage(0));
    }
    // From a thread outside any pool (the global runtime).
    panics_at_every_stage(0);
}

/// Comparators that re-enter the pool (`join`, another parallel sort) while the sort holds
/// elements in flight, panicking or not, from a pool's worker, from outside, from a task and
/// from a worker of one runtime installed on another.
#[test]
fn comparators_that_reenter_the_pool() {
    quiet_planned_panics();
    let _deadline = Deadline::new("re-entrant comparators", LIMIT);
    let a = Arc::new(runtime(2));
    let b = Arc::new(runtime(3));
    a.install(|| panics_at_every_stage(64));
    panics_at_every_stage(512);
    a.install(|| b.install(|| panics_at_every_stage(256)));
    let handle = a.spawn(async {
        for sort in SORTS {
            let total = check_sort(sort, 20_000, 2, 0, 128);
            check_sort(sort, 20_000, 2, total / 2, 128);
        }
    });
    a.block_on(handle).unwrap();
    // The pools are still usable.
    assert_eq!(a.install(|| common::fib(20)), 6765);
    assert_eq!(b.install(|| common::fib(20)), 6765);
}

/// A comparator that installs on another runtime whose own work installs back on the first:
/// the sort's pieces wait across runtimes, each pool's workers running the other's work.
#[test]
fn comparators_that_install_on_another_runtime() {
    let _deadline = Deadline::new("cross-runtime comparators", LIMIT);
    let a = Arc::new(runtime(2));
    let b = Arc::new(runtime(1));
    let calls = AtomicUsize::new(0);
    let v: Vec<u32> = {
        let mut rng = SplitMix64::new(7);
        (0..40_000).map(|_| rng.next_u64() as u32).collect()
    };
    let mut expected = v.clone();
    expected.sort_unstable();
    for stable in [false, true] {
        let mut w = v.clone();
        let cmp = |x: &u32, y: &u32| {
            if calls.fetch_add(1, SeqCst) % 1_000 == 0 {
                let back = b.install(|| a.install(|| magpie::join(|| x.cmp(y), || 0).0));
                assert_eq!(back, x.cmp(y));
            }
            x.cmp(y)
        };
        a.install(|| {
            if stable {
                w.par_sort_by(cmp);
            } else {
                w.par_sort_unstable_by(cmp);
            }
        });
        assert!(w == expected, "stable = {stable}");
    }
}

/// Comparators that are not a strict weak order (random answers, always `Less`, always
/// `Greater`, `<=` instead of `<`): the result's order is unspecified, but the sort must
/// finish, and the slice must hold every item once; a panic (std's sorts may detect the
/// violation) is allowed, a crash or a lost item is not.
#[test]
fn inconsistent_comparators_keep_every_item() {
    quiet_planned_panics();
    let _deadline = Deadline::new("inconsistent comparators", LIMIT);
    let rt = runtime(4);
    for n in [3usize, 4_097, 50_000] {
        for kind in 0..4u32 {
            for stable in [false, true] {
                let plan = Plan::new(0, 0);
                let mut v = items(n, u64::from(kind) + 2, &plan);
                let calls = AtomicUsize::new(0);
                let cmp = |a: &Item, b: &Item| -> Ordering {
                    let c = calls.fetch_add(1, SeqCst) as u64;
                    match kind {
                        0 => {
                            let h = SplitMix64::new(c ^ (u64::from(a.id) << 32) ^ u64::from(b.id))
                                .next_u64();
                            [Ordering::Less, Ordering::Equal, Ordering::Greater][h as usize % 3]
                        }
                        1 => Ordering::Less,
                        2 => Ordering::Greater,
                        _ => a.key.cmp(&b.key).then(Ordering::Less),
                    }
                };
                let _ = panic::catch_unwind(AssertUnwindSafe(|| {
                    rt.install(|| {
                        if stable {
                            v.par_sort_by(cmp)
                        } else {
                            v.par_sort_unstable_by(cmp)
                        }
                    })
                }));
                let what = format!("n = {n}, kind {kind}, stable = {stable}");
                assert_eq!(Arc::strong_count(&plan), n + 1, "{what}");
                let mut ids: Vec<u32> = v.iter().map(|x| x.id).collect();
                ids.sort_unstable();
                assert!(ids.iter().copied().eq(0..n as u32), "{what}");
                drop(v);
                assert_eq!(Arc::strong_count(&plan), 1, "{what}");
            }
        }
    }
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

/// A zero-sized element that counts its comparisons and its drops.
#[derive(Debug)]
struct Unit;

static UNIT_COMPARISONS: AtomicUsize = AtomicUsize::new(0);

impl PartialEq for Unit {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Unit {}

impl PartialOrd for Unit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Unit {
    fn cmp(&self, _: &Self) -> Ordering {
        UNIT_COMPARISONS.fetch_add(1, SeqCst);
        Ordering::Equal
    }
}

/// `usize::MAX` units: the longest vector there is, in no memory. (`vec![(); usize::MAX]`
/// would write them one by one.)
#[allow(clippy::uninit_vec)] // `()` is zero-sized: there is nothing to initialise.
fn longest_vec() -> Vec<()> {
    let mut v = Vec::new();
    // SAFETY: a vector of a zero-sized type has capacity `usize::MAX` without allocating, and
    // a `()` needs no initialisation.
    unsafe { v.set_len(usize::MAX) };
    v
}

/// Zero-sized elements: every sort, at small lengths and at the longest a slice can have
/// (`usize::MAX` units, which occupy no memory), must finish and keep the length.
#[test]
fn zero_sized_sorts_up_to_the_longest_slice() {
    let _deadline = Deadline::new("zero-sized sorts", LIMIT);
    let rt = runtime(2);
    rt.install(|| {
        for n in [0usize, 1, 2, 5_000, 100_000] {
            let mut v: Vec<Unit> = (0..n).map(|_| Unit).collect();
            v.par_sort();
            v.par_sort_unstable();
            v.par_sort_by(|a, b| a.cmp(b));
            v.par_sort_unstable_by_key(|_| 0u8);
            assert_eq!(v.len(), n);
        }
        let mut huge = longest_vec();
        huge.par_sort();
        huge.par_sort_unstable();
        huge.par_sort_by(|_, _| planned_panic());
        huge.par_sort_unstable_by(|_, _| planned_panic());
        huge.par_sort_by_key(|_| -> u8 { planned_panic() });
        assert_eq!(huge.len(), usize::MAX);
    });
}

// ---------------------------------------------------------------------------------------------
// Parallel iterators: the longest inputs
// ---------------------------------------------------------------------------------------------

/// Searches over `usize::MAX` items stop at the answer: nothing may walk the whole range, and
/// nothing may overflow while splitting it or numbering its items.
#[test]
fn searches_over_the_longest_ranges_stop_early() {
    let _deadline = Deadline::new("searches over the longest ranges", LIMIT);
    for workers in [1, 2, 4] {
        runtime(workers).install(|| {
            let all = || (0..usize::MAX).into_par_iter();
            assert_eq!(all().find_first(|&x| x == 1_000), Some(1_000));
            assert_eq!(all().find_first(|&x| x % 4_096 == 4_095), Some(4_095));
            assert_eq!(all().position_first(|x| x == 777), Some(777));
            assert_eq!(all().with_max_len(1).find_first(|&x| x == 100), Some(100));
            assert_eq!(
                all().with_min_len(usize::MAX).find_first(|&x| x == 10),
                Some(10)
            );
            assert!(all().any(|x| x == 12_345));
            assert!(!all().all(|x| x < 10));
            assert!(all().find_any(|&x| x % 1_000 == 999).is_some());
            assert!(all().position_any(|x| x % 1_000 == 999).is_some());
            assert_eq!(
                all().enumerate().find_first(|&(i, x)| i == x && x == 42),
                Some((42, 42))
            );
            // Two lengths that overflow together: the chain has no length, and is still
            // searched in order.
            assert_eq!(all().chain(0..5usize).find_first(|&x| x == 3), Some(3));
            assert_eq!(
                all().zip(10..13usize).collect::<Vec<_>>(),
                [(0, 10), (1, 11), (2, 12)]
            );
            assert_eq!(
                (i64::MIN..i64::MAX)
                    .into_par_iter()
                    .find_first(|&x| x > i64::MIN + 2),
                Some(i64::MIN + 3)
            );
            assert_eq!(
                (isize::MIN..isize::MAX)
                    .into_par_iter()
                    .position_first(|x| x == isize::MIN + 9),
                Some(9)
            );
            assert_eq!((0..u64::MAX).into_par_iter().find_any(|&x| x == 3), Some(3));
        });
    }
}

/// `chain`'s length overflows: asking for it panics with the documented message rather than
/// wrapping.
#[test]
fn chain_length_overflow_panics_clearly() {
    let message = panic_message(|| {
        let _ = (0..usize::MAX).into_par_iter().chain(0..2usize).len();
    });
    assert!(message.contains("overflows"), "{message}");
}

/// A slice of `usize::MAX` zero-sized items: searches, chunks and numbering work on it without
/// walking it.
#[test]
fn the_longest_slice_of_zero_sized_items() {
    let _deadline = Deadline::new("the longest slice", LIMIT);
    let mut huge = longest_vec();
    runtime(3).install(|| {
        assert_eq!(huge.par_iter().len(), usize::MAX);
        assert_eq!(
            huge.par_iter().enumerate().find_first(|&(i, _)| i == 1_000),
            Some((1_000, &()))
        );
        assert_eq!(huge.par_iter().position_first(|_| true), Some(0));
        assert!(huge.par_iter_mut().any(|_| true));
        assert_eq!(huge.par_chunks(1 << 62).len(), 4);
        assert_eq!(
            huge.par_chunks(1 << 62)
                .map(<[()]>::len)
                .collect::<Vec<_>>(),
            [1 << 62, 1 << 62, 1 << 62, (1 << 62) - 1]
        );
        assert_eq!(
            huge.par_chunks_mut(3)
                .position_first(|c| c.len() == 3)
                .unwrap(),
            0
        );
    });
    // Moved into the iterator: the items not reached are dropped (`()`: nothing to do).
    let found = runtime(2).install(|| huge.into_par_iter().enumerate().find_first(|p| p.0 == 9));
    assert_eq!(found, Some((9, ())));
}

// ---------------------------------------------------------------------------------------------
// Parallel iterators: items moved in, closures that panic
// ---------------------------------------------------------------------------------------------

/// A value that counts itself alive in a shared counter (the `Arc`'s strong count).
type Token = Arc<()>;

fn tokens(token: &Token, n: usize) -> Vec<(usize, Token)> {
    (0..n).map(|i| (i, token.clone())).collect()
}

/// Zip of two vectors of different lengths moved in: the pairs cover the shorter, and every
/// item of both is dropped exactly once, whether or not a closure panics on the way.
#[test]
fn zip_of_unequal_vectors_drops_every_item_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("zip of unequal vectors", LIMIT);
    let rt = runtime(4);
    for (na, nb) in [(0, 5), (1_000, 3_000), (3_001, 999), (10_000, 10_001)] {
        for panic_at in [None, Some(0), Some(na.min(nb) / 2)] {
            let token = Token::new(());
            let a = tokens(&token, na);
            let b = tokens(&token, nb);
            let seen = AtomicUsize::new(0);
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    a.into_par_iter()
                        .zip(b)
                        .map(|((i, x), (j, y))| {
                            assert_eq!(i, j);
                            if Some(i) == panic_at {
                                planned_panic();
                            }
                            seen.fetch_add(1, SeqCst);
                            (x, y)
                        })
                        .collect::<Vec<_>>()
                })
            }));
            let what = format!("{na} zip {nb}, panic at {panic_at:?}");
            match result {
                Ok(pairs) => {
                    assert!(panic_at.is_none() || panic_at >= Some(na.min(nb)), "{what}");
                    assert_eq!(pairs.len(), na.min(nb), "{what}");
                    assert_eq!(Arc::strong_count(&token), 1 + 2 * na.min(nb), "{what}");
                }
                Err(payload) => {
                    assert_eq!(payload.downcast_ref::<&str>(), Some(&PLANNED), "{what}");
                }
            }
            assert_eq!(Arc::strong_count(&token), 1, "{what}: items leaked");
        }
    }
}

/// `collect` (the indexed path: `chain`, `enumerate`, `zip`, `with_max_len(0)`) and the
/// unindexed path (`filter`, `flat_map`) with a closure panicking at one item: every item,
/// moved in or made, is dropped exactly once, and the panic reaches the caller.
#[test]
fn collect_with_a_panicking_closure_drops_every_item_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("collect with panics", LIMIT);
    let rt = runtime(3);
    const N: usize = 20_000;
    let mut rng = SplitMix64::new(11);
    for round in 0..40 {
        let panic_at = rng.below(N as u64 + N as u64 / 4) as usize;
        let token = Token::new(());
        let made = Token::new(());
        let make = |i: usize, t: Token| -> (usize, Token, Token) {
            if i == panic_at {
                planned_panic();
            }
            (i, t, made.clone())
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.install(|| -> usize {
                match round % 5 {
                    0 => tokens(&token, N / 2)
                        .into_par_iter()
                        .chain(
                            tokens(&token, N / 2)
                                .into_par_iter()
                                .map(|(i, t)| (i + N / 2, t)),
                        )
                        .map(|(i, t)| make(i, t))
                        .collect::<Vec<_>>()
                        .len(),
                    1 => tokens(&token, N)
                        .into_par_iter()
                        .with_max_len(0)
                        .enumerate()
                        .map(|(i, (_, t))| make(i, t))
                        .collect::<Vec<_>>()
                        .len(),
                    2 => tokens(&token, N)
                        .into_par_iter()
                        .zip(tokens(&token, N + 7))
                        .map(|((i, t), _)| make(i, t))
                        .collect::<Vec<_>>()
                        .len(),
                    3 => tokens(&token, N)
                        .into_par_iter()
                        .filter(|(i, _)| i % 3 != 1)
                        .map(|(i, t)| make(i, t))
                        .collect::<Vec<_>>()
                        .len(),
                    _ => tokens(&token, N / 4)
                        .into_par_iter()
                        .flat_map(|(i, t)| {
                            (0..4).map(|k| (4 * i + k, t.clone())).collect::<Vec<_>>()
                        })
                        .map(|(i, t)| make(i, t))
                        .collect::<Vec<_>>()
                        .len(),
                }
            })
        }));
        let what = format!("round {round}, panic at {panic_at}");
        match result {
            Ok(len) => assert!(
                panic_at >= N || (round % 5 == 3 && panic_at % 3 == 1),
                "{what}: {len}"
            ),
            Err(payload) => assert_eq!(payload.downcast_ref::<&str>(), Some(&PLANNED), "{what}"),
        }
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "{what}: items moved in leaked"
        );
        assert_eq!(Arc::strong_count(&made), 1, "{what}: items made leaked");
    }
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

/// Early exits (`any`, `find_any`, `find_first`, `position_any`) over items moved in, with a
/// predicate that panics at some item: every item is dropped exactly once, the answer or the
/// panic reaches the caller, and the pool is usable afterwards.
#[test]
fn short_circuits_with_panics_drop_every_item_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("short circuits with panics", LIMIT);
    let rt = runtime(4);
    const N: usize = 50_000;
    let mut rng = SplitMix64::new(5);
    for round in 0..60 {
        let panic_at = rng.below(2 * N as u64) as usize;
        let target = rng.below(2 * N as u64) as usize;
        let token = Token::new(());
        let pred = |p: &(usize, Token)| {
            if p.0 == panic_at {
                planned_panic();
            }
            p.0 == target
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.install(|| {
                let v = tokens(&token, N);
                match round % 4 {
                    0 => v.into_par_iter().any(|p| pred(&p)).then_some(target),
                    1 => v.into_par_iter().find_any(pred).map(|p| p.0),
                    2 => v.into_par_iter().find_first(pred).map(|p| p.0),
                    _ => v.into_par_iter().position_any(|p| pred(&p)),
                }
            })
        }));
        let what = format!("round {round}: target {target}, panic at {panic_at}");
        if let Ok(found) = result {
            if target < N {
                assert_eq!(found, Some(target), "{what}");
            } else {
                assert_eq!(found, None, "{what}");
                assert!(panic_at >= N, "{what}: a panic was lost");
            }
        }
        assert_eq!(Arc::strong_count(&token), 1, "{what}: items leaked");
    }
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

/// `fold` and `reduce` closures that panic: the panic reaches the caller, accumulators and
/// items are all dropped.
#[test]
fn fold_and_reduce_panics_drop_every_accumulator() {
    quiet_planned_panics();
    let _deadline = Deadline::new("fold and reduce panics", LIMIT);
    let rt = runtime(3);
    const N: usize = 30_000;
    for panic_at in [0, 1, N / 3, N - 1] {
        for reduce_panics in [false, true] {
            let token = Token::new(());
            let acc_token = Token::new(());
            let calls = AtomicUsize::new(0);
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    tokens(&token, N)
                        .into_par_iter()
                        .fold(
                            || (0usize, vec![acc_token.clone()]),
                            |(n, mut acc), (i, t)| {
                                if !reduce_panics && i == panic_at {
                                    planned_panic();
                                }
                                acc.push(t);
                                (n + 1, acc)
                            },
                        )
                        .reduce(
                            || (0, Vec::new()),
                            |(a, mut x), (b, y)| {
                                if reduce_panics && calls.fetch_add(1, SeqCst) == panic_at % 3 {
                                    planned_panic();
                                }
                                x.extend(y);
                                (a + b, x)
                            },
                        )
                        .0
                })
            }));
            let what = format!("panic at {panic_at}, in reduce: {reduce_panics}");
            match result {
                // The reduction may have fewer calls than planned with few pieces.
                Ok(n) => {
                    assert!(reduce_panics, "{what}: the panic was lost");
                    assert_eq!(n, N, "{what}");
                }
                Err(payload) => {
                    assert_eq!(payload.downcast_ref::<&str>(), Some(&PLANNED), "{what}")
                }
            }
            assert_eq!(Arc::strong_count(&token), 1, "{what}: items leaked");
            assert_eq!(
                Arc::strong_count(&acc_token),
                1,
                "{what}: accumulators leaked"
            );
        }
    }
}

/// Zero as a piece bound on every kind of source, and chunks at the edges of the slice.
#[test]
fn zero_bounds_and_edge_chunk_sizes() {
    let _deadline = Deadline::new("zero bounds", LIMIT);
    let rt = runtime(2);
    rt.install(|| {
        let v: Vec<u32> = (0..1_000).collect();
        let expected: u64 = (0..1_000u64).sum();
        let min0: u64 = v.par_iter().with_min_len(0).map(|&x| u64::from(x)).sum();
        assert_eq!(min0, expected);
        let max0: u64 = v.par_iter().with_max_len(0).map(|&x| u64::from(x)).sum();
        assert_eq!(max0, expected);
        let both: u64 = (0..1_000u64)
            .into_par_iter()
            .with_max_len(0)
            .with_min_len(0)
            .sum();
        assert_eq!(both, expected);
        assert_eq!(
            v.par_chunks(usize::MAX)
                .map(<[u32]>::len)
                .collect::<Vec<_>>(),
            [1_000]
        );
        assert_eq!(v.par_chunks(999).count(), 2);
        assert_eq!(
            v.par_chunks(1)
                .with_max_len(0)
                .position_first(|c| c[0] == 500),
            Some(500)
        );
        let empty: Vec<u32> = Vec::new();
        assert_eq!(empty.par_chunks(usize::MAX).count(), 0);
        assert_eq!(empty.into_par_iter().with_max_len(0).count(), 0);
    });
}

// ---------------------------------------------------------------------------------------------
// join and scope across runtimes
// ---------------------------------------------------------------------------------------------

/// `depth` levels of `scope`, alternating between two runtimes: each level's body spawns a
/// job that installs the next level on the other runtime, and jobs that spawn more jobs on
/// every enclosing scope, some from the other runtime's workers. Counts every job.
fn alternate_scopes(rts: &[Arc<Runtime>; 2], depth: usize, count: &AtomicUsize) {
    if depth == 0 {
        count.fetch_add(1, SeqCst);
        return;
    }
    let rt = &rts[depth % 2];
    let other = &rts[(depth + 1) % 2];
    rt.install(|| {
        magpie::scope(|s| {
            s.spawn(move |_| alternate_scopes(rts, depth - 1, count));
            for _ in 0..3 {
                s.spawn(move |s| {
                    count.fetch_add(1, SeqCst);
                    // A spawn on this scope from a worker of the other runtime.
                    other.install(|| {
                        s.spawn(move |_| {
                            count.fetch_add(1, SeqCst);
                        })
                    });
                });
            }
        });
    });
}

fn alternate_scopes_expected(depth: usize) -> usize {
    if depth == 0 {
        1
    } else {
        6 + alternate_scopes_expected(depth - 1)
    }
}

#[test]
fn scopes_alternating_between_two_runtimes() {
    let _deadline = Deadline::new("alternating scopes", LIMIT);
    let rts = [Arc::new(runtime(1)), Arc::new(runtime(2))];
    for depth in 1..=8 {
        for _ in 0..10 {
            let count = AtomicUsize::new(0);
            alternate_scopes(&rts, depth, &count);
            assert_eq!(
                count.load(SeqCst),
                alternate_scopes_expected(depth),
                "depth {depth}"
            );
        }
    }
    // Starting from either runtime's worker, and from a task.
    for start in 0..2 {
        let count = AtomicUsize::new(0);
        rts[start].install(|| alternate_scopes(&rts, 8, &count));
        assert_eq!(count.load(SeqCst), alternate_scopes_expected(8));
        let rts2 = rts.clone();
        let from_task = rts[start].spawn(async move {
            let count = AtomicUsize::new(0);
            alternate_scopes(&rts2, 6, &count);
            count.into_inner()
        });
        assert_eq!(
            rts[start].block_on(from_task).unwrap(),
            alternate_scopes_expected(6)
        );
    }
}

/// `join` on a worker of A whose halves install on B, which joins and installs back on A,
/// on single-worker pools (the deadlock-prone case): every level's waiting worker must keep
/// running the other levels' work. Panics in the innermost halves cross both runtimes.
#[test]
fn joins_whose_halves_install_across_single_worker_runtimes() {
    quiet_planned_panics();
    let _deadline = Deadline::new("joins across single-worker runtimes", LIMIT);
    let rts = [Arc::new(runtime(1)), Arc::new(runtime(1))];
    fn level(rts: &[Arc<Runtime>; 2], depth: usize, panic_at: Option<usize>) -> u64 {
        if Some(depth) == panic_at {
            planned_panic();
        }
        if depth == 0 {
            return 1;
        }
        rts[depth % 2].install(|| {
            let (x, y) = magpie::join(
                || level(rts, depth - 1, panic_at),
                || rts[(depth + 1) % 2].install(|| magpie::join(|| 1, || 1).0),
            );
            x + y
        })
    }
    for depth in 1..=10 {
        assert_eq!(level(&rts, depth, None), 1 + depth as u64, "depth {depth}");
        let message = panic_message(|| {
            level(&rts, depth, Some(0));
        });
        assert_eq!(message, PLANNED);
    }
    for rt in &rts {
        assert_eq!(rt.install(|| common::fib(15)), 610);
    }
}

/// A scope whose spawns keep spawning (from several workers, to a depth) while one of them
/// panics: the panic reaches the caller after every other job ran, each exactly once, and the
/// scope's borrows stay valid throughout.
#[test]
fn scope_spawn_panics_while_others_keep_spawning() {
    quiet_planned_panics();
    let _deadline = Deadline::new("scope panics while spawning", LIMIT);
    let rt = runtime(4);
    fn tree<'s>(
        s: &magpie::Scope<'s>,
        id: usize,
        depth: u32,
        ran: &'s [AtomicUsize],
        panic_at: usize,
    ) {
        ran[id].fetch_add(1, SeqCst);
        if id == panic_at {
            planned_panic();
        }
        if depth > 0 {
            for k in 1..=2 {
                s.spawn(move |s| tree(s, 2 * id + k, depth - 1, ran, panic_at));
            }
        }
    }
    const DEPTH: u32 = 12;
    let jobs = (1usize << (DEPTH + 1)) - 1;
    for panic_at in [0, 1, 100, jobs / 2, jobs - 1] {
        let ran: Vec<AtomicUsize> = (0..jobs).map(|_| AtomicUsize::new(0)).collect();
        let finished = AtomicBool::new(false);
        let message = panic_message(|| {
            rt.install(|| {
                magpie::scope(|s| {
                    s.spawn(|s| tree(s, 0, DEPTH, &ran, panic_at));
                });
                finished.store(true, SeqCst);
            })
        });
        assert_eq!(message, PLANNED);
        assert!(!finished.load(SeqCst));
        // The panicking job's subtree never spawned; every other job ran exactly once.
        let mut skipped = vec![false; jobs];
        for id in 0..jobs {
            let parent_skipped = id > 0 && (skipped[(id - 1) / 2] || (id - 1) / 2 == panic_at);
            skipped[id] = parent_skipped;
            let expected = usize::from(!parent_skipped);
            assert_eq!(
                ran[id].load(SeqCst),
                expected,
                "job {id}, panic at {panic_at}"
            );
        }
    }
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

// ---------------------------------------------------------------------------------------------
// Every entry point, nested at random
// ---------------------------------------------------------------------------------------------

/// Runs a random tree of fork-join work `depth` levels deep: each node is a `join`, a `scope`
/// with spawns, an `install` on one of `rts` (often another runtime than the current one), a
/// parallel iterator or a parallel sort whose closures recurse, and some nodes panic. Returns
/// the number of leaves reached; a panic anywhere below resumes in the caller.
fn random_work(rts: &[Arc<Runtime>], seed: u64, depth: u32) -> u64 {
    let mut rng = SplitMix64::new(seed);
    if depth == 0 {
        if rng.one_in(40) {
            planned_panic();
        }
        return 1;
    }
    let a = rng.next_u64();
    let b = rng.next_u64();
    match rng.below(6) {
        0 => {
            let (x, y) = magpie::join(
                || random_work(rts, a, depth - 1),
                || random_work(rts, b, depth - 1),
            );
            x + y
        }
        1 => {
            let total = AtomicUsize::new(0);
            let panicked = AtomicBool::new(false);
            magpie::scope(|s| {
                for k in 0..3u64 {
                    let (total, panicked) = (&total, &panicked);
                    s.spawn(move |_| {
                        match panic::catch_unwind(AssertUnwindSafe(|| {
                            random_work(rts, a ^ k, depth - 1)
                        })) {
                            Ok(n) => {
                                total.fetch_add(n as usize, SeqCst);
                            }
                            Err(_) => panicked.store(true, SeqCst),
                        }
                    });
                }
            });
            if panicked.load(SeqCst) {
                planned_panic();
            }
            total.into_inner() as u64
        }
        2 => {
            let rt = &rts[rng.below(rts.len() as u64) as usize];
            rt.install(|| random_work(rts, a, depth - 1))
        }
        3 => (0..3u64)
            .into_par_iter()
            .map(|k| random_work(rts, a ^ (k << 8), depth - 1))
            .sum(),
        4 => {
            // A sort whose comparator recurses once, at its first call.
            let once = AtomicBool::new(false);
            let inner = AtomicUsize::new(0);
            let mut v: Vec<u32> = (0..5_000).map(|i| (i * 7_919) % 5_000).collect();
            v.par_sort_unstable_by(|x, y| {
                if !once.swap(true, SeqCst) {
                    inner.store(random_work(rts, a, depth - 1) as usize, SeqCst);
                }
                x.cmp(y)
            });
            assert!(v.iter().copied().eq(0..5_000));
            inner.into_inner() as u64
        }
        _ => {
            let found = (0..10_000u64)
                .into_par_iter()
                .map(|k| {
                    if k == 7_777 {
                        random_work(rts, a, depth - 1)
                    } else {
                        0
                    }
                })
                .find_first(|&n| n > 0);
            found.unwrap_or(0)
        }
    }
}

/// The same tree run sequentially gives the expected leaf count (or the expectation that it
/// panics); the parallel runs must agree, and never hang.
fn random_work_expected(seed: u64, depth: u32) -> Option<u64> {
    let mut rng = SplitMix64::new(seed);
    if depth == 0 {
        return if rng.one_in(40) { None } else { Some(1) };
    }
    let a = rng.next_u64();
    let b = rng.next_u64();
    match rng.below(6) {
        0 => Some(random_work_expected(a, depth - 1)? + random_work_expected(b, depth - 1)?),
        1 => {
            let mut total = 0;
            let mut failed = false;
            for k in 0..3 {
                match random_work_expected(a ^ k, depth - 1) {
                    Some(n) => total += n,
                    None => failed = true,
                }
            }
            (!failed).then_some(total)
        }
        2 => {
            let _ = rng.below(2);
            random_work_expected(a, depth - 1)
        }
        3 => (0..3u64)
            .map(|k| random_work_expected(a ^ (k << 8), depth - 1))
            .sum(),
        _ => random_work_expected(a, depth - 1),
    }
}

#[test]
fn every_entry_point_nested_at_random() {
    const DEPTH: u32 = 8;
    quiet_planned_panics();
    let _deadline = Deadline::new("random nesting", LIMIT);
    let base = common::seed("every_entry_point_nested_at_random");
    let rts: Vec<Arc<Runtime>> = [1, 2, 3]
        .into_iter()
        .map(|n| Arc::new(runtime(n)))
        .collect();
    for i in 0..200 {
        let seed = base.wrapping_add(i);
        let expected = random_work_expected(seed, DEPTH);
        let rts2 = &rts;
        let got = panic::catch_unwind(AssertUnwindSafe(|| match i % 3 {
            0 => random_work(rts2, seed, DEPTH),
            1 => rts2[0].install(|| random_work(rts2, seed, DEPTH)),
            _ => rts2[1].install(|| rts2[2].install(|| random_work(rts2, seed, DEPTH))),
        }));
        match (got, expected) {
            (Ok(n), Some(e)) => assert_eq!(n, e, "seed {seed}"),
            (Err(payload), None) => {
                assert_eq!(
                    payload.downcast_ref::<&str>(),
                    Some(&PLANNED),
                    "seed {seed}"
                )
            }
            (got, expected) => panic!("seed {seed}: got {:?}, expected {expected:?}", got.ok()),
        }
    }
    for rt in &rts {
        assert_eq!(rt.install(|| common::fib(15)), 610);
    }
}

/// Several threads outside the pools enter them at once (`install`, `join` and parallel
/// iterators from outside), with the random trees above, panics included; then the runtimes
/// are dropped while idle. Nothing may hang, and every answer must match.
#[test]
fn many_outside_threads_enter_the_same_runtimes() {
    quiet_planned_panics();
    let _deadline = Deadline::new("many outside threads", LIMIT);
    let base = common::seed("many_outside_threads_enter_the_same_runtimes");
    let rts: Vec<Arc<Runtime>> = [1, 2].into_iter().map(|n| Arc::new(runtime(n))).collect();
    std::thread::scope(|threads| {
        for t in 0..6u64 {
            let rts = &rts;
            threads.spawn(move || {
                for i in 0..60u64 {
                    let seed = base ^ (t << 32) ^ i;
                    let expected = random_work_expected(seed, 6);
                    let got = panic::catch_unwind(AssertUnwindSafe(|| match i % 3 {
                        0 => random_work(rts, seed, 6),
                        1 => rts[(t % 2) as usize].install(|| random_work(rts, seed, 6)),
                        _ => {
                            let (x, y) = magpie::join(
                                || random_work(rts, seed, 6),
                                || rts[0].install(|| magpie::join(|| 1, || 2).1),
                            );
                            assert_eq!(y, 2);
                            x
                        }
                    }));
                    match (got, expected) {
                        (Ok(n), Some(e)) => assert_eq!(n, e, "seed {seed}"),
                        (Err(_), None) => {}
                        (got, expected) => {
                            panic!("seed {seed}: got {:?}, expected {expected:?}", got.ok())
                        }
                    }
                }
            });
        }
    });
    for rt in &rts {
        assert_eq!(rt.install(|| common::fib(15)), 610);
    }
}

// ---------------------------------------------------------------------------------------------
// A join-waiter's R6 mark after a nested wait
// ---------------------------------------------------------------------------------------------

/// Spins until `flag` is set; fails the test after the deadline.
fn spin_until(what: &str, flag: &AtomicBool) {
    common::eventually(what, || flag.load(SeqCst));
}

/// Whether worker `i` has parked more often than it woke: it is parked now (or about to).
fn parked(rt: &Runtime, i: usize) -> bool {
    let w = &rt.stats().workers[i];
    w.parks > w.unparks
}

fn flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

/// Occupies a worker (`target`, unless another steals the closure first) with a closure that
/// spins until released; returns the worker's index, the release flag and the handle.
fn hold(rt: &Runtime, target: usize) -> (usize, Arc<AtomicBool>, magpie::JoinHandle<()>) {
    let (started, release) = (Arc::new(AtomicUsize::new(usize::MAX)), flag());
    let handle = {
        let (started, release) = (started.clone(), release.clone());
        rt.submit_to(target, move || {
            started.store(magpie::current_worker_index().unwrap(), SeqCst);
            spin_until("released", &release);
        })
        .unwrap()
    };
    common::eventually("a worker is held", || started.load(SeqCst) != usize::MAX);
    (started.load(SeqCst), release, handle)
}

/// One attempt at the scenario of [`driver_hand_off_after_a_nested_join_wait`], with the
/// nested wait or (the control) without: `None` if the workers took roles that cannot show
/// the problem (the join-waiter must have a lower index than the free worker), else whether
/// the timer fired.
fn nested_wait_then_hand_off(nested: bool) -> Option<bool> {
    let rt = Arc::new(runtime(4));
    // Each closure below goes to a parked worker's mailbox, which wakes that worker alone, so
    // the roles come out as targeted even on one CPU (a worker still searching after its
    // start or its last task would take the closure first, and on one CPU the same one
    // always did: the roles were never usable there).
    let others_park = |busy: &[usize]| {
        common::eventually("the other workers park", || {
            (0..4).all(|i| busy.contains(&i) || parked(&rt, i))
        });
    };
    // Two workers busy (task polls never steal jobs): the join below and the half it
    // publishes go to the other two.
    others_park(&[]);
    let (h1, release1, held1) = hold(&rt, 3);
    others_park(&[h1]);
    let (h2, release2, held2) = hold(&rt, 2);
    others_park(&[h1, h2]);

    // Worker `w`: an outer join whose second half worker `x` steals and keeps; while `w`
    // waits for it, it steals a job of `x` (`d`) that joins and waits in turn (for `f`,
    // which `x` steals back), so a wait nests inside `w`'s outer wait.
    let w_index = Arc::new(AtomicUsize::new(usize::MAX));
    let (b_started, d_started, f_started, nested_done, release_b) =
        (flag(), flag(), flag(), flag(), flag());
    let outer = {
        let rt2 = rt.clone();
        let w_index = w_index.clone();
        let (b_started, d_started, f_started, nested_done, release_b) = (
            b_started.clone(),
            d_started.clone(),
            f_started.clone(),
            nested_done.clone(),
            release_b.clone(),
        );
        rt.submit_to(0, move || {
            let w = magpie::current_worker_index().unwrap();
            w_index.store(w, SeqCst);
            magpie::join(
                || spin_until("b stolen", &b_started),
                || {
                    b_started.store(true, SeqCst);
                    magpie::join(
                        || spin_until("d stolen", &d_started),
                        || {
                            d_started.store(true, SeqCst);
                            if !nested {
                                return;
                            }
                            let parks = rt2.stats().workers[w].parks;
                            magpie::join(
                                || spin_until("f stolen", &f_started),
                                || {
                                    f_started.store(true, SeqCst);
                                    // Keep `w` in its nested wait until it parks there.
                                    common::eventually("w parks in the nested wait", || {
                                        rt2.stats().workers[w].parks > parks
                                    });
                                },
                            );
                        },
                    );
                    nested_done.store(true, SeqCst);
                    spin_until("b released", &release_b);
                },
            );
        })
        .unwrap()
    };
    spin_until("the nested wait ended", &nested_done);
    let w = w_index.load(SeqCst);
    // `w` is back in its outer wait, with nothing to run: it parks.
    common::eventually("w parks in the outer wait", || parked(&rt, w));
    // The free worker must come after `w` in the idle bitmap, the driver is the other one.
    let (f, release_f, held_f, d, release_d, held_d) = if h1 > w && (h2 < w || h1 > h2) {
        (h1, release1, held1, h2, release2, held2)
    } else {
        (h2, release2, held2, h1, release1, held1)
    };
    let usable = f > w;

    // The driver-to-be parks first and takes the driver role; a timer is filed; then the
    // free worker parks, without the role.
    release_d.store(true, SeqCst);
    rt.block_on(held_d).unwrap();
    common::eventually("d parks", || parked(&rt, d));
    let (timer_done, polled) = (flag(), flag());
    let timer = {
        let (timer_done, polled) = (timer_done.clone(), polled.clone());
        rt.spawn(async move {
            polled.store(true, SeqCst);
            magpie::time::sleep(Duration::from_millis(300)).await;
            timer_done.store(true, SeqCst);
        })
    };
    spin_until("the timer task polled", &polled);
    common::eventually("w and d park", || parked(&rt, w) && parked(&rt, d));
    release_f.store(true, SeqCst);
    rt.block_on(held_f).unwrap();
    common::eventually("w, d and f park", || {
        parked(&rt, w) && parked(&rt, d) && parked(&rt, f)
    });
    let stats = rt.stats();
    let usable = usable && stats.workers[d].driver_polls_blocking > 0 && !timer_done.load(SeqCst);

    // The driver leaves its role for a long poll that waits for the timer.
    let fired = {
        let timer_done = timer_done.clone();
        rt.submit_to(d, move || {
            let give_up = std::time::Instant::now() + Duration::from_secs(3);
            while !timer_done.load(SeqCst) {
                if std::time::Instant::now() > give_up {
                    return false;
                }
                std::hint::spin_loop();
            }
            true
        })
        .unwrap()
    };
    let fired = rt.block_on(fired).unwrap();
    release_b.store(true, SeqCst);
    rt.block_on(outer).unwrap();
    rt.block_on(timer).unwrap();
    eprintln!("nested {nested}: w = {w}, d = {d}, f = {f}: usable {usable}, fired {fired}");
    usable.then_some(fired)
}

/// A worker waiting inside `join` runs only jobs, so the sleep protocol marks it
/// (`Sleep::set_join_waiting`, R6 in sleep/README.md) and never hands it the driver role or a
/// timer's re-arm. `WorkerThread::wait_until_cold` set the mark on entry and cleared it on
/// exit, with no count of nesting: a wait nested in another (the waiting worker runs a job
/// that itself waits for a stolen half) cleared the mark while the outer wait went on, and
/// the outer waiter then looked free to `wake_free_cold` and `has_parked_free`. The mark now
/// lasts until the outermost wait ends.
///
/// This builds that state on a worker `w` of a 4-worker pool, then has the driver `d` leave
/// its role to run a long poll while a timer is pending and a worker `f` (after `w` in the
/// idle bitmap) is parked free. The hand-off (`Registry::hand_off_driver`) must wake `f`,
/// which takes the role and fires the timer; waking `w` instead, which never drives from
/// inside `join`, leaves the timer unfired while `d` waits for it. The same scenario without
/// the nested wait (the control, run first) passes.
#[test]
fn driver_hand_off_after_a_nested_join_wait() {
    let _deadline = Deadline::new("driver hand-off after a nested join wait", LIMIT);
    for nested in [false, true] {
        let (mut tried, mut attempts) = (0, 0);
        while tried < 2 {
            attempts += 1;
            assert!(attempts <= 20, "the workers never took usable roles");
            if let Some(fired) = nested_wait_then_hand_off(nested) {
                assert!(
                    fired,
                    "nested = {nested}: the timer did not fire while the old driver waited for \
                     it in a poll: the driver role went to a worker waiting inside `join`"
                );
                tried += 1;
            }
        }
    }
}
