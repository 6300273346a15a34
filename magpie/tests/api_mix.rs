//! The whole public API at once, in random order, from several threads: async tasks, timers
//! and timeouts, closures one at a time and in batches, fork-join and parallel iterators,
//! `block_on` of one runtime waiting on another's task, `spawn_blocking`, aborts, detached
//! tasks, the active worker count moved up and down, and statistics read meanwhile.
//!
//! Each test exercises one feature at a time; this one looks for what only their mix finds
//! (a shrink racing a batch, an abort racing a timer, a detached task outliving the thread
//! that spawned it). It checks:
//!
//! * every handle kept resolves as planned: its value, the planned panic, or (only if it
//!   was aborted) cancellation; every fork-join answer matches the sequential one;
//! * nothing hangs: a [`Watchdog`] aborts the process if no operation completes for five
//!   seconds, and dumps the runtime's statistics;
//! * afterwards the runtime has no live task (`wait_idle`, then `tasks_alive == 0`), and
//!   no counter of `stats()` ever went backwards.
//!
//! The seed is printed and replays with `SEED=<u64>`; release builds run more rounds.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    assert_monotonic, planned_panic, quiet_planned_panics, seed, SplitMix64, Watchdog, PLANNED,
};
use magpie::prelude::*;
use magpie::{JoinError, JoinHandle, Runtime};

/// Operations per thread per round: a debug build runs fewer.
const OPS: u64 = if cfg!(debug_assertions) { 250 } else { 1000 };
const ROUNDS: u64 = if cfg!(debug_assertions) { 5 } else { 20 };
const THREADS: u64 = 3;
const WORKERS: usize = 3;

/// What a kept handle must resolve to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Value(u64),
    Panic,
}

/// A handle kept for the final check, with what it must give and whether it was aborted.
struct Kept {
    handle: JoinHandle<u64>,
    expect: Expect,
    aborted: bool,
    what: &'static str,
}

/// The value or the planned panic for case `x` of a closure (one in eight panics).
fn outcome(x: u64) -> Expect {
    if x % 8 == 0 {
        Expect::Panic
    } else {
        Expect::Value(x.wrapping_mul(0x9e37_79b9) >> 40)
    }
}

/// Runs case `x`: returns its value, or panics as planned.
fn run_case(x: u64) -> u64 {
    match outcome(x) {
        Expect::Value(v) => v,
        Expect::Panic => planned_panic(),
    }
}

/// Checks one kept handle's result against its plan.
fn check(kept: Kept, seed: u64) {
    let Kept {
        handle,
        expect,
        aborted,
        what,
    } = kept;
    match (handle.join(), expect) {
        (Ok(v), Expect::Value(e)) => assert_eq!(v, e, "{what}: wrong value (seed {seed})"),
        (Err(err), _) if err.is_cancelled() => {
            assert!(aborted, "{what}: cancelled without an abort (seed {seed})")
        }
        (Err(err), Expect::Panic) if err.is_panic() => {
            let payload = JoinError::into_panic(err);
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&PLANNED),
                "{what}: a panic that was not planned (seed {seed})"
            );
        }
        (got, expect) => panic!(
            "{what}: got {:?}, planned {expect:?} (seed {seed})",
            got.map_err(|e| e.to_string())
        ),
    }
}

/// What the threads of a round share.
struct Round<'a> {
    /// The runtime under test.
    rt: &'a Runtime,
    /// A second runtime, whose `block_on` waits for tasks of the first.
    other: &'a Runtime,
    kept: Mutex<Vec<Kept>>,
    /// The last `stats()` read, to compare the next with.
    last_stats: Mutex<magpie::Stats>,
    progress: &'a AtomicU64,
    seed: u64,
}

/// Thread `t`'s share of a round: `OPS` operations picked by `rng`.
fn client(t: u64, rng: &mut SplitMix64, round: &Round<'_>) {
    let Round {
        rt,
        other,
        kept,
        last_stats,
        progress,
        seed,
    } = round;
    let seed = *seed;
    for _ in 0..OPS {
        let x = rng.next_u64();
        let keep = |handle: JoinHandle<u64>, expect: Expect, what: &'static str| {
            kept.lock().unwrap().push(Kept {
                handle,
                expect,
                aborted: false,
                what,
            })
        };
        match rng.below(13) {
            0 => {
                // An async task that yields and sleeps a few microseconds.
                let micros = x % 50;
                let h = rt.spawn(async move {
                    magpie::task::yield_now().await;
                    magpie::time::sleep(Duration::from_micros(micros)).await;
                    run_case(x | 1)
                });
                keep(h, outcome(x | 1), "spawn");
            }
            1 => keep(rt.submit(move || run_case(x)), outcome(x), "submit"),
            2 => {
                let n = rng.below(8);
                let cases: Vec<u64> = (0..n).map(|i| x.wrapping_add(i)).collect();
                let handles = rt.submit_batch(cases.iter().map(|&c| move || run_case(c)));
                assert_eq!(handles.len(), cases.len());
                for (h, c) in handles.into_iter().zip(cases) {
                    keep(h, outcome(c), "submit_batch");
                }
            }
            3 => {
                // Fork-join from outside: a parallel sum and a join inside it.
                let n = x % 5000;
                let (sum, pair) = rt.install(|| {
                    let sum: u64 = (0..n).into_par_iter().map(|i| i * i).sum();
                    (sum, magpie::join(|| common::fib(12), || n))
                });
                assert_eq!(sum, (0..n).map(|i| i * i).sum::<u64>(), "seed {seed}");
                assert_eq!(pair, (144, n), "seed {seed}");
            }
            4 => {
                // One runtime's `block_on` waits for the other's task.
                let h = rt.spawn(async move { run_case(x | 1) });
                let got = other.block_on(h);
                assert_eq!(got.ok().map(Expect::Value), Some(outcome(x | 1)));
            }
            5 => {
                let h = rt.spawn(async move {
                    match magpie::spawn_blocking(move || run_case(x)).await {
                        Ok(v) => v,
                        Err(_) => planned_panic(),
                    }
                });
                keep(h, outcome(x), "spawn_blocking");
            }
            6 => {
                // Abort one kept handle at random (it may have finished already).
                let mut kept = kept.lock().unwrap();
                if !kept.is_empty() {
                    let i = (x % kept.len() as u64) as usize;
                    kept[i].handle.abort();
                    kept[i].aborted = true;
                }
            }
            7 => {
                // A timeout that must fire before its hour-long sleep.
                let micros = x % 100;
                let h = rt.spawn(async move {
                    let slept = magpie::time::timeout(
                        Duration::from_micros(micros),
                        magpie::time::sleep(Duration::from_secs(3600)),
                    )
                    .await;
                    u64::from(slept.is_err())
                });
                keep(h, Expect::Value(1), "timeout");
            }
            8 if t == 0 => {
                // Shrink or grow the pool while the others keep submitting.
                let n = 1 + (x % WORKERS as u64) as usize;
                rt.set_active_workers(n).expect("within the worker count");
            }
            9 if t == 0 => {
                let now = rt.stats();
                let mut last = last_stats.lock().unwrap();
                assert_monotonic(&last, &now);
                *last = now;
            }
            10 => {
                // A task that spawns a child and awaits it; a detached grandchild too.
                let h = rt.spawn(async move {
                    drop(magpie::spawn(async move { x }));
                    magpie::spawn(async move { run_case(x | 1) })
                        .await
                        .unwrap_or_else(|_| planned_panic())
                });
                keep(h, outcome(x | 1), "nested spawn");
            }
            11 => {
                // Detached: dropped at once; `wait_idle` below waits for it.
                drop(rt.submit(move || run_case(x)));
                drop(rt.spawn(async move {
                    magpie::time::sleep(Duration::from_micros(x % 30)).await;
                }));
            }
            _ => {
                let count = AtomicUsize::new(0);
                let n = (x % 64) as usize;
                rt.install(|| {
                    magpie::scope(|s| {
                        for _ in 0..n {
                            s.spawn(|_| {
                                count.fetch_add(1, Relaxed);
                            });
                        }
                    })
                });
                assert_eq!(count.load(Relaxed), n, "seed {seed}");
            }
        }
        progress.fetch_add(1, Relaxed);
    }
}

#[test]
fn the_whole_api_mixed_across_threads() {
    quiet_planned_panics();
    let seed = seed("the_whole_api_mixed_across_threads");
    let watchdog = Watchdog::start("the_whole_api_mixed_across_threads");
    let progress = watchdog.progress();
    let other = common::runtime(1);
    for r in 0..ROUNDS {
        let rt = Arc::new(common::runtime(WORKERS));
        watchdog.phase(format!("round {r}"), &rt);
        let round = Round {
            rt: &rt,
            other: &other,
            kept: Mutex::new(Vec::new()),
            last_stats: Mutex::new(rt.stats()),
            progress: &progress,
            seed,
        };
        std::thread::scope(|threads| {
            for t in 0..THREADS {
                let round = &round;
                let mut rng = SplitMix64::new(seed ^ (r << 32) ^ t);
                threads.spawn(move || client(t, &mut rng, round));
            }
        });
        watchdog.phase(format!("round {r}: joining the kept handles"), &rt);
        rt.set_active_workers(WORKERS).unwrap();
        for kept in round.kept.into_inner().unwrap() {
            check(kept, seed);
            progress.fetch_add(1, Relaxed);
        }
        watchdog.phase(format!("round {r}: wait_idle"), &rt);
        rt.wait_idle();
        let stats = rt.stats();
        assert_eq!(stats.tasks_alive, 0, "seed {seed}");
        assert_monotonic(&round.last_stats.into_inner().unwrap(), &stats);
    }
}
