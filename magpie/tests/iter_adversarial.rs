//! Adversarial tests of the parallel iterators (`magpie/src/iter/`), from a review of the
//! adapters, the consumers and the plumbing.
//!
//! What `par_iter.rs`, `sort_soundness.rs` and `fork_join_adversarial.rs` already cover
//! (collect/into_par_iter with a panicking closure, zip of unequal vectors, searches over the
//! longest ranges, `chunks(0)`, zero bounds, the sorts) is not repeated. This file adds:
//! destructors that panic inside the runtime, random stacks of adapters searched against
//! `std`, items numbered at the very end of the longest input, iterators inside destructors
//! that run while a panic unwinds, inside tasks, `block_in_place` and `spawn_blocking`,
//! and a deterministic "one half panics while the other is mid-collect".
//!
//! No test synchronizes by sleeping or asserts a duration; every wait spins on a flag with a
//! deadline, and each test runs under a `Deadline` that aborts a hang.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::deadline::Deadline;
use common::{
    panic_message, payload_text, planned_panic, quiet_planned_panics, runtime, SplitMix64, PLANNED,
};
use magpie::iter::plumbing::{Producer, ProducerCallback};
use magpie::prelude::*;

/// How long any one test here may take before the process aborts (a hang becomes a failure).
const LIMIT: Duration = Duration::from_secs(120);

/// `usize::MAX` units in no memory (a `Vec<()>` has capacity `usize::MAX` without allocating).
#[allow(clippy::uninit_vec)]
fn longest_vec() -> Vec<()> {
    let mut v = Vec::new();
    // SAFETY: `()` is zero-sized and needs no initialisation.
    unsafe { v.set_len(usize::MAX) };
    v
}

/// Spins (yielding) until `flag` is set; false if it was not within a few seconds.
fn wait_for(flag: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !flag.load(SeqCst) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Numbering at the very end of the longest input
// ---------------------------------------------------------------------------------------------

/// Takes the producer of an enumerated iterator, splits off its last `tail` items and
/// collects their indices, sequentially: what any consumer's last piece does.
struct LastIndices {
    len: usize,
    tail: usize,
}

impl<T> ProducerCallback<(usize, T)> for LastIndices {
    type Output = Vec<usize>;

    fn callback<P>(self, producer: P) -> Vec<usize>
    where
        P: Producer<Item = (usize, T)>,
    {
        let (_, last) = producer.split_at(self.len - self.tail);
        // Item by item, as the consumers' folders take them (`for item in iter`).
        let mut indices = Vec::new();
        for (i, _) in last.into_iter() {
            indices.push(i);
        }
        indices
    }
}

/// `enumerate` over an input of `usize::MAX` items numbers its last item `usize::MAX - 1`:
/// the piece that holds it must not count past `usize::MAX` once its items run out.
///
/// Here the piece is cut by hand through the public plumbing (`with_producer`), which is
/// exactly the cut a consumer's rightmost piece gets; `..._through_find_last` below reaches
/// the same piece through an ordinary consumer.
#[test]
fn enumerate_numbers_the_last_items_of_the_longest_input() {
    let _deadline = Deadline::new("enumerate at the end", LIMIT);
    let huge = longest_vec();
    let tail = huge.par_iter().enumerate().with_producer(LastIndices {
        len: usize::MAX,
        tail: 2,
    });
    assert_eq!(tail, [usize::MAX - 2, usize::MAX - 1]);
    let tail = (0..usize::MAX)
        .into_par_iter()
        .enumerate()
        .with_producer(LastIndices {
            len: usize::MAX,
            tail: 1,
        });
    assert_eq!(tail, [usize::MAX - 1]);
    // Not at the end: fine either way.
    let tail = (0..usize::MAX - 1)
        .into_par_iter()
        .enumerate()
        .with_producer(LastIndices {
            len: usize::MAX - 1,
            tail: 2,
        });
    assert_eq!(tail, [usize::MAX - 3, usize::MAX - 2]);
}

const FIND_LAST_CHILD: &str = "find-last-at-the-end";
const FIND_LAST_OK: &str = "find_last at the end: ok";

/// The same last piece, reached by `find_last` / `position_last` over the longest input cut
/// into pieces of one item: every piece left of a match stops, so thieves converge on the
/// right end in a few hundred steps, and the rightmost piece numbers the last item.
/// (With one worker nothing is stolen and the search would walk everything, so 4 workers.)
/// Runs in a child process, so that a search that does not converge fails this test alone.
#[test]
fn enumerate_numbers_the_last_item_of_the_longest_input_through_find_last() {
    let out = common::run_child(common::child_test(
        "child_find_last_at_the_end",
        FIND_LAST_CHILD,
    ));
    assert!(
        out.status.success() && out.stdout.contains(FIND_LAST_OK),
        "child failed: {}\n{}",
        out.status,
        out.stderr
            .lines()
            .filter(
                |l| !l.trim_start().starts_with(|c: char| c.is_ascii_digit())
                    && !l.trim_start().starts_with("at ")
            )
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn child_find_last_at_the_end() {
    if !common::is_child(FIND_LAST_CHILD) {
        return;
    }
    let huge = longest_vec();
    let rt = runtime(4);
    let found = rt.install(|| {
        huge.par_iter()
            .with_max_len(1)
            .enumerate()
            .find_last(|_| true)
            .map(|(i, _)| i)
    });
    assert_eq!(found, Some(usize::MAX - 1));
    let position = rt.install(|| huge.par_iter().with_max_len(1).position_last(|_| true));
    assert_eq!(position, Some(usize::MAX - 1));
    println!("{FIND_LAST_OK}");
}

// ---------------------------------------------------------------------------------------------
// Destructors that panic inside the runtime
// ---------------------------------------------------------------------------------------------

/// An item that counts its drops, and panics (once, outside any unwinding) when it is the bomb.
struct Bomb<'a> {
    id: usize,
    bomb: usize,
    drops: &'a [AtomicUsize],
}

impl Drop for Bomb<'_> {
    fn drop(&mut self) {
        self.drops[self.id].fetch_add(1, SeqCst);
        if self.id == self.bomb && !std::thread::panicking() {
            planned_panic();
        }
    }
}

fn bombs(n: usize, bomb: usize, drops: &[AtomicUsize]) -> Vec<Bomb<'_>> {
    (0..n).map(|id| Bomb { id, bomb, drops }).collect()
}

/// Items the runtime drops itself (past a match of `find_first`/`any`, beyond the shorter side
/// of a `zip`, in pieces that never start) may panic in their destructor. Every item is
/// dropped exactly once, and the panic is not lost: it reaches the caller, as it would from
/// sequential `std` (whose `vec::IntoIter` drops the rest, and panics, in the same places).
#[test]
fn destructor_panics_inside_the_runtime_reach_the_caller_and_drop_every_item_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("destructor bombs", LIMIT);
    const N: usize = 20_000;
    let mut rng = SplitMix64::new(0x5eed);
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        for round in 0..30 {
            let bomb = rng.below(N as u64) as usize;
            let target = rng.below(N as u64) as usize;
            let short = target / 2;
            let drops: Vec<AtomicUsize> = (0..N + short).map(|_| AtomicUsize::new(0)).collect();
            // `find_last` has its own test below.
            let kind = [0, 2, 3, 4, 5][round % 5];
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| match kind {
                    // The match is handed back and dropped here; the rest in the runtime.
                    0 => bombs(N, bomb, &drops)
                        .into_par_iter()
                        .find_first(|b| b.id == target)
                        .map(|b| b.id),
                    1 => bombs(N, bomb, &drops)
                        .into_par_iter()
                        .find_last(|b| b.id == target)
                        .map(|b| b.id),
                    2 => bombs(N, bomb, &drops)
                        .into_par_iter()
                        .any(|b| b.id == target)
                        .then_some(target),
                    3 => bombs(N, bomb, &drops)
                        .into_par_iter()
                        .position_first(|b| b.id == target),
                    // Beyond the shorter side of a zip: `b`'s ids are N.. in `drops`.
                    4 => {
                        let b: Vec<Bomb<'_>> = (N..N + short)
                            .map(|id| Bomb {
                                id,
                                bomb: usize::MAX,
                                drops: &drops,
                            })
                            .collect();
                        Some(
                            bombs(N, bomb, &drops)
                                .into_par_iter()
                                .zip(b)
                                .map(|(x, y)| x.id + y.id)
                                .count(),
                        )
                    }
                    _ => {
                        bombs(N, bomb, &drops)
                            .into_par_iter()
                            .with_max_len(64)
                            .for_each(drop);
                        Some(0)
                    }
                })
            }));
            let what = format!(
                "{workers} workers, round {round} (kind {kind}), bomb {bomb}, target {target}"
            );
            let expected_items = if kind == 4 { N + short } else { N };
            for (id, d) in drops.iter().enumerate().take(expected_items) {
                let d = d.load(SeqCst);
                assert_eq!(d, 1, "{what}: item {id} dropped {d} times");
            }
            match &result {
                Ok(found) => panic!("{what}: the destructor's panic was lost (result {found:?})"),
                Err(payload) => assert_eq!(payload_text(&**payload), PLANNED, "{what}"),
            }
        }
        assert_eq!(rt.install(|| common::fib(12)), 144);
    }
}

/// A predicate that panics inside the early-exit search (`any`, `find_first`, `find_any`,
/// `position_first`, `all`), at any item of a piece, including one of the unrolled four
/// between two looks at the stop flag: the panic reaches the caller and every item is
/// dropped exactly once (the item being tested during the unwind, and the rest of its
/// piece after it).
#[test]
fn a_panicking_predicate_in_an_early_exit_search_drops_every_item_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("predicate bombs", LIMIT);
    const N: usize = 5_000;
    let mut rng = SplitMix64::new(0x9e37);
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        for round in 0..40 {
            // Near the start of a piece too, where the unrolled group begins.
            let bomb = if round % 4 == 0 {
                round % 7
            } else {
                rng.below(N as u64) as usize
            };
            let drops: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
            let kind = round % 5;
            let items = || {
                (0..N)
                    .map(|id| Bomb {
                        id,
                        bomb: usize::MAX,
                        drops: &drops,
                    })
                    .collect::<Vec<_>>()
            };
            let test = |b: &Bomb<'_>| {
                if b.id == bomb {
                    planned_panic();
                }
                false
            };
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| match kind {
                    0 => items().into_par_iter().any(|b| test(&b)),
                    1 => items().into_par_iter().find_first(test).is_some(),
                    2 => items().into_par_iter().find_any(test).is_some(),
                    3 => items()
                        .into_par_iter()
                        .position_first(|b| test(&b))
                        .is_some(),
                    _ => items().into_par_iter().all(|b| !test(&b)),
                })
            }));
            let what = format!("{workers} workers, round {round} (kind {kind}), bomb {bomb}");
            for (id, d) in drops.iter().enumerate() {
                let d = d.load(SeqCst);
                assert_eq!(d, 1, "{what}: item {id} dropped {d} times");
            }
            match &result {
                Ok(found) => panic!("{what}: the predicate's panic was lost (result {found})"),
                Err(payload) => assert_eq!(payload_text(&**payload), PLANNED, "{what}"),
            }
        }
    }
}

/// `find_first`, `find_any` and `find_last` hold the match of a piece while the rest of the
/// piece is dropped (first, any) or walked (last); a later item's destructor that panics
/// (outside any unwinding) must not make them forget that match: every item is dropped
/// exactly once, as with sequential `find`/`rfind` bound to a `let`.
///
/// One piece, one worker: deterministic.
#[test]
fn find_first_and_last_drop_their_match_when_a_later_destructor_panics() {
    quiet_planned_panics();
    let rt = runtime(1);
    let mut leaks = Vec::new();
    for kind in ["find_first", "find_any", "find_last"] {
        for (target, bomb) in [(3, 7), (0, 9), (5, 6)] {
            let drops: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(0)).collect();
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    let one_piece = bombs(10, bomb, &drops)
                        .into_par_iter()
                        .with_min_len(usize::MAX);
                    let found = match kind {
                        "find_first" => one_piece.find_first(|b| b.id == target),
                        "find_any" => one_piece.find_any(|b| b.id == target),
                        _ => one_piece.find_last(|b| b.id == target),
                    };
                    found.map(|b| b.id)
                })
            }));
            assert_eq!(
                payload_text(&*result.expect_err("the panic was lost")),
                PLANNED
            );
            let counts: Vec<usize> = drops.iter().map(|d| d.load(SeqCst)).collect();
            if counts != [1; 10] {
                leaks.push(format!(
                    "{kind}, target {target}, bomb {bomb}: drops per item {counts:?}"
                ));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "items not dropped exactly once:\n{}",
        leaks.join("\n")
    );
    // The same shapes sequentially: every item dropped once.
    let drops: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(0)).collect();
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let found = bombs(10, 7, &drops).into_iter().find(|b| b.id == 3);
        found.map(|b| b.id)
    }));
    assert!(result.is_err());
    assert_eq!(
        drops.iter().map(|d| d.load(SeqCst)).collect::<Vec<_>>(),
        [1; 10]
    );
    let drops: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(0)).collect();
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let found = bombs(10, 7, &drops).into_iter().rfind(|b| b.id == 3);
        found.map(|b| b.id)
    }));
    assert!(result.is_err());
    assert_eq!(
        drops.iter().map(|d| d.load(SeqCst)).collect::<Vec<_>>(),
        [1; 10]
    );
}

// ---------------------------------------------------------------------------------------------
// Random stacks of adapters, searched and collected, against std
// ---------------------------------------------------------------------------------------------

/// One random pipeline over `0..n` (values `u32`): its parallel and sequential forms.
fn check_pipeline(rng: &mut SplitMix64, n: usize) {
    let v: Vec<u32> = (0..n).map(|_| rng.below(64) as u32).collect();
    let target = rng.below(64) as u32;
    let max_len = 1 + rng.below(40) as usize;
    let min_len = rng.below(20) as usize;
    let split = rng.below(n as u64 + 1) as usize;
    let hit = move |x: &u32| *x == target;
    let what =
        format!("n {n}, target {target}, max_len {max_len}, min_len {min_len}, split {split}");

    // chain of two sources of different kinds, then enumerate, then zip with a range.
    let seq: Vec<(usize, u32, u64)> = v[..split]
        .iter()
        .copied()
        .chain(v[split..].to_vec())
        .enumerate()
        .zip(100u64..)
        .map(|((i, x), k)| (i, x, k))
        .collect();
    let par = || {
        v[..split]
            .par_iter()
            .copied()
            .chain(v[split..].to_vec().into_par_iter())
            .with_max_len(max_len)
            .enumerate()
            .with_min_len(min_len)
            .zip(100u64..100 + n as u64 + 3)
            .map(|((i, x), k)| (i, x, k))
    };
    assert_eq!(par().collect::<Vec<_>>(), seq, "{what}: collect");
    assert_eq!(par().len(), seq.len(), "{what}: len");
    let is = |t: &(usize, u32, u64)| hit(&t.1);
    assert_eq!(
        par().find_first(is),
        seq.iter().copied().find(is),
        "{what}: find_first"
    );
    assert_eq!(
        par().find_last(is),
        seq.iter().copied().rfind(is),
        "{what}: find_last"
    );
    assert_eq!(
        par().position_first(|t| is(&t)),
        seq.iter().position(is),
        "{what}"
    );
    assert_eq!(
        par().position_last(|t| is(&t)),
        seq.iter().rposition(is),
        "{what}"
    );
    assert_eq!(par().any(|t| is(&t)), seq.iter().any(is), "{what}: any");
    assert_eq!(par().all(|t| !is(&t)), !seq.iter().any(is), "{what}: all");
    assert_eq!(
        par().min_by_key(|t| t.1),
        seq.iter().copied().min_by_key(|t| t.1),
        "{what}: min_by_key"
    );
    assert_eq!(
        par().max_by_key(|t| t.1),
        seq.iter().copied().max_by_key(|t| t.1),
        "{what}: max_by_key"
    );

    // Unindexed: flat_map over chunks, filter, chain of an unindexed and an indexed part.
    let chunk = 1 + rng.below(9) as usize;
    let seq2: Vec<(usize, u32)> = v
        .chunks(chunk)
        .enumerate()
        .flat_map(|(c, xs)| xs.iter().map(move |&x| (c, x)).collect::<Vec<_>>())
        .filter(|&(c, _)| c % 3 != 1)
        .chain(v.iter().map(|&x| (usize::MAX, x)))
        .collect();
    let par2 = || {
        v.par_chunks(chunk)
            .enumerate()
            .with_max_len(max_len)
            .flat_map(|(c, xs)| xs.par_iter().map(move |&x| (c, x)).with_max_len(2))
            .filter(|&(c, _)| c % 3 != 1)
            .chain(v.par_iter().map(|&x| (usize::MAX, x)))
    };
    let is2 = |t: &(usize, u32)| hit(&t.1);
    assert_eq!(par2().collect::<Vec<_>>(), seq2, "{what}: collect 2");
    assert_eq!(par2().count(), seq2.len(), "{what}: count 2");
    assert_eq!(
        par2().find_first(is2),
        seq2.iter().copied().find(is2),
        "{what}: find_first 2"
    );
    assert_eq!(
        par2().find_last(is2),
        seq2.iter().copied().rfind(is2),
        "{what}: find_last 2"
    );
    match par2().find_any(is2) {
        Some(t) => assert!(is2(&t) && seq2.contains(&t), "{what}: find_any 2 {t:?}"),
        None => assert!(!seq2.iter().any(is2), "{what}: find_any 2 missed"),
    }

    // flat_map_iter and fold, with a search below the fold.
    let seq3: Vec<u32> = v.iter().flat_map(|&x| [x, x + 100]).collect();
    let par3 = || {
        v.par_iter()
            .with_max_len(max_len)
            .flat_map_iter(|&x| [x, x + 100])
    };
    assert_eq!(par3().collect::<Vec<_>>(), seq3, "{what}: collect 3");
    assert_eq!(
        par3().find_first(|&x| x == target + 100),
        seq3.iter().copied().find(|&x| x == target + 100),
        "{what}: find_first 3"
    );
    let folded: Vec<Vec<u32>> = par3()
        .fold(Vec::new, |mut acc, x| {
            acc.push(x);
            acc
        })
        .collect();
    assert_eq!(folded.concat(), seq3, "{what}: fold then collect");
    assert!(
        folded.iter().all(|p| !p.is_empty()) || seq3.is_empty() || folded.len() == 1,
        "{what}: fold made an empty accumulator among non-empty ones: {folded:?}"
    );
}

/// Random pipelines mixing every adapter, on every pool size, against the sequential
/// iterators: collect, len, every search, min/max_by_key.
#[test]
fn random_adapter_stacks_match_sequential() {
    let _deadline = Deadline::new("random adapter stacks", LIMIT);
    let seed = common::seed("random_adapter_stacks_match_sequential");
    let mut rng = SplitMix64::new(seed);
    for workers in 1..=4 {
        let rt = runtime(workers);
        for _ in 0..40 {
            let n = match rng.below(4) {
                0 => rng.below(4) as usize,
                1 => rng.below(100) as usize,
                _ => rng.below(3_000) as usize,
            };
            rt.install(|| check_pipeline(&mut rng, n));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// reduce's identity, empty inputs
// ---------------------------------------------------------------------------------------------

/// `reduce`'s identity runs only for an empty input, and a panic in it reaches the caller with
/// its message; every consumer answers as `std` does on empty inputs of every kind.
#[test]
fn empty_inputs_and_reduce_identity() {
    quiet_planned_panics();
    let rt = runtime(3);
    rt.install(|| {
        let sum = (0..10_000u64)
            .into_par_iter()
            .reduce(|| planned_panic(), |a, b| a + b);
        assert_eq!(sum, 49_995_000);
        let message = panic_message(|| {
            let _ = (5..5u64)
                .into_par_iter()
                .reduce(|| planned_panic(), |a, b| a + b);
        });
        assert_eq!(message, PLANNED);
        let message = panic_message(|| {
            let _ = Vec::<String>::new()
                .into_par_iter()
                .filter(|_| true)
                .reduce(|| planned_panic(), |a, _| a);
        });
        assert_eq!(message, PLANNED);

        #[allow(clippy::reversed_empty_ranges)]
        let reversed = || (10..3i32).into_par_iter();
        assert_eq!(reversed().len(), 0);
        assert_eq!(reversed().count(), 0);
        assert_eq!(reversed().max(), None);
        assert_eq!(reversed().collect::<Vec<_>>(), Vec::<i32>::new());
        assert!(reversed().all(|_| false));
        assert!(!reversed().any(|_| true));
        assert_eq!(reversed().sum::<i32>(), 0);
        assert_eq!(reversed().product::<i32>(), 1);
        assert_eq!(reversed().enumerate().position_last(|_| true), None);
        assert_eq!(reversed().chain(reversed()).find_last(|_| true), None);
        assert_eq!(reversed().zip(0..100u8).len(), 0);
        let empty: Vec<u8> = Vec::new();
        assert_eq!(empty.par_chunks(3).flat_map(|c| c.par_iter()).count(), 0);
        assert_eq!(
            empty.par_iter().fold(|| 1u8, |a, _| a).collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(
            (0..0u8)
                .into_par_iter()
                .flat_map(|_| 0..5u8)
                .reduce_with(|a, b| a + b),
            None
        );
        let mut into = vec![String::from("old")];
        empty
            .par_iter()
            .map(|x| x.to_string())
            .collect_into_vec(&mut into);
        assert!(into.is_empty());
    });
}

// ---------------------------------------------------------------------------------------------
// Panics in one half while the other half is mid-collect
// ---------------------------------------------------------------------------------------------

/// Two pieces of a `collect` of owned strings: the left one is stopped mid-way (it waits for
/// the right one to have panicked), then writes the rest. Every item, moved in or made, is
/// dropped exactly once, the panic reaches the caller, and the pool is usable.
#[test]
fn a_panic_in_one_half_while_the_other_is_mid_collect() {
    quiet_planned_panics();
    let _deadline = Deadline::new("panic while mid-collect", LIMIT);
    const N: usize = 4_000;
    let mut interleaved = 0;
    for workers in [2, 3, 4] {
        let rt = runtime(workers);
        for round in 0..8 {
            let made = AtomicUsize::new(0);
            let dropped = Arc::new(AtomicUsize::new(0));
            struct Counted(String, Arc<AtomicUsize>);
            impl Drop for Counted {
                fn drop(&mut self) {
                    self.1.fetch_add(1, SeqCst);
                }
            }
            let right_panicking = AtomicBool::new(false);
            let met = AtomicBool::new(false);
            let input: Vec<Counted> = (0..N)
                .map(|i| Counted(i.to_string(), dropped.clone()))
                .collect();
            let left_wait = N / 4 + round;
            let right_panic = 3 * N / 4 + round;
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    input
                        .into_par_iter()
                        .enumerate()
                        .map(|(i, c)| {
                            if i == left_wait && wait_for(&right_panicking) {
                                met.store(true, SeqCst);
                            }
                            if i == right_panic {
                                right_panicking.store(true, SeqCst);
                                planned_panic();
                            }
                            made.fetch_add(1, SeqCst);
                            Counted(format!("{}!", c.0), c.1.clone())
                        })
                        .collect::<Vec<_>>()
                })
            }));
            let payload = result.err().expect("the panic was lost");
            assert_eq!(payload_text(&*payload), PLANNED);
            interleaved += usize::from(met.load(SeqCst));
            assert_eq!(
                dropped.load(SeqCst),
                N + made.load(SeqCst),
                "{workers} workers, round {round}: items moved in + items made"
            );
            assert_eq!(
                Arc::strong_count(&dropped),
                1,
                "{workers} workers, round {round}"
            );
            assert_eq!(rt.install(|| common::fib(12)), 144);
        }
    }
    assert!(interleaved > 0, "the halves never ran at the same time");
}

/// `collect_into_vec` into a vector that held items: the old items are dropped once, and a
/// panic half-way drops every new item once and leaves the vector empty and usable.
#[test]
fn collect_into_vec_over_old_items_with_a_panic() {
    quiet_planned_panics();
    let _deadline = Deadline::new("collect_into_vec", LIMIT);
    let rt = runtime(3);
    let token = Arc::new(());
    for panic_at in [None, Some(0), Some(777), Some(9_999)] {
        let mut target: Vec<Arc<()>> = (0..5_000).map(|_| token.clone()).collect();
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.install(|| {
                (0..10_000usize)
                    .into_par_iter()
                    .map(|i| {
                        if Some(i) == panic_at {
                            planned_panic();
                        }
                        token.clone()
                    })
                    .collect_into_vec(&mut target)
            })
        }));
        match (result, panic_at) {
            (Ok(()), None) => assert_eq!(target.len(), 10_000),
            (Err(payload), Some(_)) => {
                assert_eq!(payload_text(&*payload), PLANNED);
                assert!(
                    target.is_empty(),
                    "{panic_at:?}: {} items left",
                    target.len()
                );
            }
            (r, p) => panic!("panic at {p:?}, got {:?}", r.map_err(|e| payload_text(&*e))),
        }
        assert_eq!(Arc::strong_count(&token), 1 + target.len(), "{panic_at:?}");
        target.clear();
        target.push(token.clone());
        assert_eq!(Arc::strong_count(&token), 2);
        target.clear();
    }
}

/// `flat_map_iter` whose inner iterators own items and panic half-way through one of them:
/// the inner vectors' rest, the outer vector's rest, and what was collected are all dropped.
#[test]
fn flat_map_iter_panicking_inside_an_inner_iterator_drops_everything_once() {
    quiet_planned_panics();
    let _deadline = Deadline::new("flat_map_iter panics", LIMIT);
    let token = Arc::new(());
    let mut rng = SplitMix64::new(77);
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        for _ in 0..10 {
            let outer = 500;
            let panic_at = (rng.below(outer), rng.below(8) as usize);
            let input: Vec<(u64, Vec<Arc<()>>)> = (0..outer)
                .map(|i| (i, (0..8).map(|_| token.clone()).collect()))
                .collect();
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    input
                        .into_par_iter()
                        .flat_map_iter(|(i, inner)| {
                            inner.into_iter().enumerate().map(move |(k, t)| {
                                if (i, k) == panic_at {
                                    planned_panic();
                                }
                                t
                            })
                        })
                        .collect::<Vec<_>>()
                })
            }));
            assert_eq!(payload_text(&*result.err().unwrap()), PLANNED);
            assert_eq!(
                Arc::strong_count(&token),
                1,
                "{workers} workers, {panic_at:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Re-entrant closures, and iterators from everywhere
// ---------------------------------------------------------------------------------------------

/// Key functions, comparators and predicates that run parallel iterators (and sorts) of
/// their own: results as sequential.
#[test]
fn closures_that_reenter_the_pool() {
    let _deadline = Deadline::new("re-entrant closures", LIMIT);
    let rows: Vec<Vec<u32>> = (0..200u32)
        .map(|r| {
            (0..(r % 37) * 10)
                .map(|c| (r * 31 + c * 17) % 101)
                .collect()
        })
        .collect();
    let seq_key = |row: &Vec<u32>| row.iter().map(|&x| u64::from(x)).sum::<u64>();
    for workers in 1..=4 {
        runtime(workers).install(|| {
            let par_key = |row: &&Vec<u32>| row.par_iter().map(|&x| u64::from(x)).sum::<u64>();
            assert_eq!(
                rows.par_iter().min_by_key(par_key).map(|r| r.as_ptr()),
                rows.iter().min_by_key(|r| seq_key(r)).map(|r| r.as_ptr())
            );
            assert_eq!(
                rows.par_iter().max_by_key(par_key).map(|r| r.as_ptr()),
                rows.iter().max_by_key(|r| seq_key(r)).map(|r| r.as_ptr())
            );
            assert_eq!(
                rows.par_iter()
                    .min_by(|a, b| par_key(a).cmp(&par_key(b)))
                    .map(|r| r.as_ptr()),
                rows.iter().min_by_key(|r| seq_key(r)).map(|r| r.as_ptr())
            );
            assert_eq!(
                rows.par_iter()
                    .position_first(|r| r.par_iter().any(|&x| x == 100)),
                rows.iter().position(|r| r.contains(&100))
            );
            assert_eq!(
                rows.par_iter()
                    .position_last(|r| r.par_iter().filter(|&&x| x < 5).count() > 2),
                rows.iter()
                    .rposition(|r| r.iter().filter(|&&x| x < 5).count() > 2)
            );
            // Sorting the rows by a key that sorts a copy of the row in parallel.
            let mut sorted = rows.clone();
            sorted.par_sort_by_key(|r| {
                let mut copy = r.clone();
                copy.par_sort_unstable();
                copy.first().copied()
            });
            let mut expected = rows.clone();
            expected.sort_by_key(|r| r.iter().min().copied());
            assert_eq!(sorted, expected);
        });
    }
}

fn small_checksum() -> u64 {
    let v: Vec<u64> = (0..20_000).collect();
    let a = v
        .par_iter()
        .map(|&x| x * 3)
        .filter(|x| x % 2 == 0)
        .sum::<u64>();
    let b = v
        .par_chunks(7)
        .map(|c| c.iter().sum::<u64>())
        .reduce(|| 0, |x, y| x + y);
    let c = v
        .clone()
        .into_par_iter()
        .enumerate()
        .find_last(|&(i, x)| i as u64 == x && x % 1000 == 3);
    a + b + c.map_or(0, |(i, _)| i as u64)
}

fn small_checksum_expected() -> u64 {
    let v: Vec<u64> = (0..20_000).collect();
    let a = v.iter().map(|&x| x * 3).filter(|x| x % 2 == 0).sum::<u64>();
    let b = v.iter().sum::<u64>();
    a + b + 19_003
}

/// A parallel iterator inside an async task, inside `block_in_place` (in a task and in a
/// `join` half), inside `spawn_blocking`, and inside a task that `block_in_place`s into
/// `block_on` of another runtime.
#[test]
fn iterators_from_tasks_block_in_place_and_spawn_blocking() {
    let _deadline = Deadline::new("iterators from everywhere", LIMIT);
    let expected = small_checksum_expected();
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        let other = runtime(2);
        let got = rt.block_on(rt.spawn(async { small_checksum() })).unwrap();
        assert_eq!(got, expected, "{workers}: task");
        let got = rt
            .block_on(rt.spawn(async { magpie::task::block_in_place(small_checksum) }))
            .unwrap();
        assert_eq!(got, expected, "{workers}: block_in_place in a task");
        let (a, b) = rt.install(|| {
            magpie::join(
                || magpie::task::block_in_place(small_checksum),
                small_checksum,
            )
        });
        assert_eq!(
            (a, b),
            (expected, expected),
            "{workers}: block_in_place in join"
        );
        let got = rt.spawn_blocking(small_checksum).join().unwrap();
        assert_eq!(got, expected, "{workers}: spawn_blocking");
        let got = rt
            .block_on(rt.spawn(async move {
                magpie::task::block_in_place(|| other.block_on(async { small_checksum() }))
            }))
            .unwrap();
        assert_eq!(
            got, expected,
            "{workers}: block_on of another runtime in block_in_place"
        );
        // Many tasks at once, each running a parallel iterator.
        let handles: Vec<_> = (0..16)
            .map(|_| rt.spawn(async { small_checksum() }))
            .collect();
        for h in handles {
            assert_eq!(rt.block_on(h).unwrap(), expected, "{workers}: many tasks");
        }
    }
}

/// Items whose destructor runs a parallel iterator (whose own closure panics and is caught,
/// every other time), dropped by the runtime while a panic from a `map` closure unwinds
/// through the pieces: no abort, every item dropped once, the first panic reaches the caller.
#[test]
fn iterators_inside_destructors_while_a_panic_unwinds() {
    quiet_planned_panics();
    let _deadline = Deadline::new("iterators in destructors", LIMIT);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Heavy(usize);
    impl Drop for Heavy {
        fn drop(&mut self) {
            let sum: u64 = (0..2_000u64).into_par_iter().map(|x| x % 7).sum();
            assert_eq!(sum, (0..2_000u64).map(|x| x % 7).sum::<u64>());
            if self.0 % 2 == 0 {
                let caught = panic::catch_unwind(|| {
                    (0..100u32).into_par_iter().for_each(|x| {
                        if x == 50 {
                            planned_panic();
                        }
                    })
                });
                assert!(caught.is_err());
            }
            DROPPED.fetch_add(1, SeqCst);
        }
    }
    const N: usize = 600;
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        for panic_at in [0, N / 3, N - 1] {
            DROPPED.store(0, SeqCst);
            let input: Vec<Heavy> = (0..N).map(Heavy).collect();
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    input
                        .into_par_iter()
                        .with_max_len(16)
                        .map(|h| {
                            if h.0 == panic_at {
                                planned_panic();
                            }
                            h
                        })
                        .collect::<Vec<_>>()
                })
            }));
            assert_eq!(payload_text(&*result.err().unwrap()), PLANNED);
            assert_eq!(
                DROPPED.load(SeqCst),
                N,
                "{workers} workers, panic at {panic_at}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ranges and zero-sized items at their extremes, through every adapter
// ---------------------------------------------------------------------------------------------

/// Small ranges at the ends of their types, through enumerate, zip, chain and pieces of one
/// item: as sequential.
#[test]
fn small_ranges_at_the_ends_of_their_types_through_adapters() {
    let rt = runtime(3);
    rt.install(|| {
        let seq: Vec<(usize, i8)> = (i8::MIN..i8::MAX).enumerate().collect();
        assert_eq!(
            (i8::MIN..i8::MAX)
                .into_par_iter()
                .with_max_len(1)
                .enumerate()
                .collect::<Vec<_>>(),
            seq
        );
        let seq: Vec<(u64, i64)> = (u64::MAX - 9..u64::MAX).zip(i64::MIN..).collect();
        assert_eq!(
            (u64::MAX - 9..u64::MAX)
                .into_par_iter()
                .zip((i64::MIN..i64::MIN + 100).into_par_iter())
                .with_max_len(1)
                .collect::<Vec<_>>(),
            seq
        );
        let seq: Vec<usize> = (usize::MAX - 5..usize::MAX).chain(0..3).collect();
        assert_eq!(
            (usize::MAX - 5..usize::MAX)
                .into_par_iter()
                .chain(0..3usize)
                .with_max_len(1)
                .collect::<Vec<_>>(),
            seq
        );
        assert_eq!(
            (usize::MAX - 5..usize::MAX)
                .into_par_iter()
                .chain(0..3usize)
                .position_last(|x| x == usize::MAX - 1),
            Some(4)
        );
        assert_eq!(
            (isize::MAX - 3..isize::MAX).into_par_iter().max(),
            Some(isize::MAX - 1)
        );
        assert_eq!((u8::MAX..u8::MAX).into_par_iter().len(), 0);
        assert_eq!(
            (0..u8::MAX).into_par_iter().map(u32::from).sum::<u32>(),
            32_385
        );
    });
}

/// Zero-sized items with a destructor, moved through zip, chain, enumerate and flat_map with a
/// panic part-way: every one dropped exactly once.
#[test]
fn zero_sized_items_with_destructors_through_adapters_with_a_panic() {
    quiet_planned_panics();
    let _deadline = Deadline::new("zero-sized items", LIMIT);
    static ALIVE: AtomicUsize = AtomicUsize::new(0);
    struct Zst;
    impl Zst {
        fn new() -> Zst {
            ALIVE.fetch_add(1, SeqCst);
            Zst
        }
    }
    impl Drop for Zst {
        fn drop(&mut self) {
            ALIVE.fetch_sub(1, SeqCst);
        }
    }
    let zsts = |n: usize| (0..n).map(|_| Zst::new()).collect::<Vec<_>>();
    for workers in [1, 3] {
        let rt = runtime(workers);
        for panic_at in [None, Some(0), Some(2_500), Some(4_999)] {
            let what = format!("{workers} workers, panic at {panic_at:?}");
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    zsts(3_000)
                        .into_par_iter()
                        .chain(zsts(2_000))
                        .enumerate()
                        .zip(zsts(6_000))
                        .map(|((i, a), b)| {
                            if Some(i) == panic_at {
                                planned_panic();
                            }
                            drop(b);
                            a
                        })
                        .collect::<Vec<Zst>>()
                        .len()
                })
            }));
            match r {
                Ok(n) => assert_eq!((n, panic_at), (5_000, None), "{what}"),
                Err(p) => assert_eq!(payload_text(&*p), PLANNED, "{what}"),
            }
            assert_eq!(ALIVE.load(SeqCst), 0, "{what}: zip/chain/enumerate");
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    zsts(100)
                        .into_par_iter()
                        .enumerate()
                        .flat_map(|(i, z)| {
                            drop(z);
                            zsts(50).into_par_iter().enumerate().map(move |(k, z)| {
                                if Some(i * 50 + k) == panic_at {
                                    planned_panic();
                                }
                                z
                            })
                        })
                        .collect::<Vec<Zst>>()
                        .len()
                })
            }));
            match r {
                Ok(n) => assert_eq!((n, panic_at), (5_000, None), "{what}"),
                Err(p) => assert_eq!(payload_text(&*p), PLANNED, "{what}"),
            }
            assert_eq!(ALIVE.load(SeqCst), 0, "{what}: flat_map");
        }
    }
}

/// Mutable chunks zipped with shared chunks of another slice, numbered, each sorted in
/// parallel inside the piece, across two runtimes (the inner sort installs on the other
/// one): every chunk written once, as sequential.
#[test]
fn chunks_mut_zipped_numbered_and_sorted_across_runtimes() {
    let _deadline = Deadline::new("chunks across runtimes", LIMIT);
    let outer = runtime(3);
    let inner = Arc::new(runtime(2));
    let mut rng = SplitMix64::new(99);
    for chunk in [1usize, 3, 64, 1000] {
        let n = 5_000 + chunk / 2;
        let data: Vec<u32> = (0..n).map(|_| rng.below(1_000) as u32).collect();
        let offsets: Vec<u32> = (0..n).map(|i| i as u32 % 7).collect();
        let mut expected = data.clone();
        for (c, (xs, os)) in expected
            .chunks_mut(chunk)
            .zip(offsets.chunks(chunk + 1))
            .enumerate()
        {
            for (x, o) in xs.iter_mut().zip(os.iter().cycle()) {
                *x += o + c as u32;
            }
            xs.sort_unstable();
        }
        let mut got = data.clone();
        let inner = inner.clone();
        outer.install(|| {
            got.par_chunks_mut(chunk)
                .zip(offsets.par_chunks(chunk + 1))
                .enumerate()
                .for_each(|(c, (xs, os))| {
                    for (x, o) in xs.iter_mut().zip(os.iter().cycle()) {
                        *x += o + c as u32;
                    }
                    inner.install(|| xs.par_sort_unstable());
                })
        });
        assert_eq!(got, expected, "chunk {chunk}");
    }
}

/// A `map` closure panics in one piece while items collected by other pieces include one
/// whose destructor panics when those pieces' results are thrown away: the closure's panic
/// is the one the caller sees, and every item (moved in, collected, or left) is dropped once.
#[test]
fn a_destructor_panic_while_results_are_thrown_away_after_a_closure_panic() {
    quiet_planned_panics();
    let _deadline = Deadline::new("bombs in discarded results", LIMIT);
    const N: usize = 20_000;
    let mut rng = SplitMix64::new(4242);
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        for round in 0..20 {
            let panic_at = rng.below(N as u64) as usize;
            let bomb = rng.below(N as u64) as usize;
            let drops: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                rt.install(|| {
                    let items = bombs(N, bomb, &drops).into_par_iter().with_max_len(500);
                    if round % 2 == 0 {
                        items
                            .map(|b| {
                                if b.id == panic_at {
                                    panic!("closure panic");
                                }
                                b
                            })
                            .collect::<Vec<_>>()
                            .len()
                    } else {
                        items
                            .filter(|b| {
                                if b.id == panic_at {
                                    panic!("closure panic");
                                }
                                b.id % 3 != 0
                            })
                            .collect::<Vec<_>>()
                            .len()
                    }
                })
            }));
            let what =
                format!("{workers} workers, round {round}: panic at {panic_at}, bomb {bomb}");
            let payload = result.expect_err("no panic reached the caller");
            let text = payload_text(&*payload);
            // Results are thrown away (and the bomb goes off, swallowed) only after the
            // closure panicked, so the closure's panic is the one resumed; unless the bomb
            // sat in an item that `filter` drops inside its piece (id % 3 == 0), where it is
            // a panic of its own, and the first in reduction order wins.
            let bomb_dropped_in_a_piece = round % 2 == 1 && bomb % 3 == 0;
            if !bomb_dropped_in_a_piece {
                assert_eq!(text, "closure panic", "{what}");
            } else {
                assert!(text == "closure panic" || text == PLANNED, "{what}: {text}");
            }
            for (id, d) in drops.iter().enumerate() {
                let d = d.load(SeqCst);
                assert_eq!(d, 1, "{what}: item {id} dropped {d} times");
            }
        }
    }
}
