//! `join`: results, panics, real parallelism, volume, and which runtime it runs on.
//!
//! Tests that need two halves to run at the same time use a `std::sync::Barrier` shared by
//! both: the test can only finish if the second half was stolen by another worker. Each such
//! test explains why the steal is always possible, so that a hang means a magpie bug.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Barrier;

use common::{fib, fib_sequential, panic_message, runtime};
use magpie::Runtime;

/// Counts drops, to check that a result is dropped exactly once when the other half panics.
struct DropCounter<'a>(&'a AtomicUsize);

impl Drop for DropCounter<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

#[test]
fn returns_both_results() {
    let rt = runtime(2);
    assert_eq!(rt.install(|| magpie::join(|| 1 + 1, || 2 + 2)), (2, 4));
}

#[test]
fn returns_results_of_different_types() {
    let rt = runtime(2);
    let (s, (v, ((), c))) = rt.install(|| {
        magpie::join(
            || String::from("left"),
            || magpie::join(|| vec![1u8, 2, 3], || magpie::join(|| (), || 'x')),
        )
    });
    assert_eq!(s, "left");
    assert_eq!(v, [1, 2, 3]);
    assert_eq!(c, 'x');
}

#[test]
fn nested_joins_return_all_results() {
    let rt = runtime(2);
    let ((a, b), (c, d)) = rt.install(|| {
        magpie::join(
            || magpie::join(|| 1u8, || 2u16),
            || magpie::join(|| 3u32, || 4u64),
        )
    });
    assert_eq!((a, b, c, d), (1, 2, 3, 4));
}

#[test]
fn halves_borrow_from_the_stack() {
    let rt = runtime(2);
    let input: Vec<u64> = (1..=1000).collect();
    let mut output = vec![0u64; 1000];
    let (left, right) = output.split_at_mut(500);
    let (sum_left, sum_right) = rt.install(|| {
        magpie::join(
            || {
                for (o, i) in left.iter_mut().zip(&input[..500]) {
                    *o = i * 2;
                }
                input[..500].iter().sum::<u64>()
            },
            || {
                for (o, i) in right.iter_mut().zip(&input[500..]) {
                    *o = i * 2;
                }
                input[500..].iter().sum::<u64>()
            },
        )
    });
    assert_eq!(sum_left + sum_right, 500 * 1001);
    assert!(output.iter().zip(&input).all(|(o, i)| *o == i * 2));
}

#[test]
fn fib_matches_sequential_on_1_2_3_and_8_workers() {
    let expected = fib_sequential(20);
    assert_eq!(expected, 6765);
    for workers in [1, 2, 3, 8] {
        let rt = runtime(workers);
        assert_eq!(rt.num_workers(), workers);
        assert_eq!(rt.install(|| fib(20)), expected, "{workers} workers");
        // fib(n) makes fib(n + 1) - 1 joins. Each join whose second half was published is one
        // job, plus one for the install itself; the outermost join is always published
        // (WorkerStats::jobs_executed's documented accounting).
        let jobs = rt.stats().jobs_executed();
        assert!(
            (2..=fib_sequential(21)).contains(&jobs),
            "{jobs} jobs executed on {workers} workers"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------------------------

#[test]
fn panic_in_a_is_resumed_after_b_ran() {
    let rt = runtime(2);
    let a_ran = AtomicBool::new(false);
    let b_ran = AtomicBool::new(false);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || {
                    a_ran.store(true, SeqCst);
                    panic!("panic in a")
                },
                || b_ran.store(true, SeqCst),
            )
        });
    });
    assert_eq!(msg, "panic in a");
    assert!(a_ran.load(SeqCst));
    assert!(b_ran.load(SeqCst), "b must run even though a panicked");
}

#[test]
fn panic_in_b_is_resumed_after_a_ran() {
    let rt = runtime(2);
    let a_ran = AtomicBool::new(false);
    let b_ran = AtomicBool::new(false);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || a_ran.store(true, SeqCst),
                || {
                    b_ran.store(true, SeqCst);
                    panic!("panic in b")
                },
            )
        });
    });
    assert_eq!(msg, "panic in b");
    assert!(a_ran.load(SeqCst));
    assert!(b_ran.load(SeqCst));
}

#[test]
fn panic_in_both_resumes_the_payload_of_a() {
    let rt = runtime(2);
    let a_ran = AtomicBool::new(false);
    let b_ran = AtomicBool::new(false);
    for _ in 0..20 {
        a_ran.store(false, SeqCst);
        b_ran.store(false, SeqCst);
        let msg = panic_message(|| {
            rt.install(|| {
                magpie::join(
                    || {
                        a_ran.store(true, SeqCst);
                        panic!("panic in a")
                    },
                    || {
                        b_ran.store(true, SeqCst);
                        panic!("panic in b")
                    },
                )
            });
        });
        assert_eq!(msg, "panic in a");
        assert!(a_ran.load(SeqCst));
        assert!(b_ran.load(SeqCst));
    }
}

#[test]
fn panic_in_a_waits_for_a_stolen_b() {
    // `a` waits at the barrier until `b` runs, so `b` is certainly stolen by the other
    // worker. After the barrier, `b` waits until `a` is about to panic and only then
    // finishes: a join that resumed `a`'s panic without waiting for `b` would be seen here.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    let a_panicking = AtomicBool::new(false);
    let b_done = AtomicBool::new(false);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || {
                    barrier.wait();
                    a_panicking.store(true, SeqCst);
                    panic!("panic in a")
                },
                || {
                    barrier.wait();
                    while !a_panicking.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                    b_done.store(true, SeqCst);
                },
            )
        });
    });
    assert_eq!(msg, "panic in a");
    assert!(
        b_done.load(SeqCst),
        "join resumed a's panic before b finished"
    );
}

#[test]
fn panic_in_stolen_b_is_resumed() {
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    let a_done = AtomicBool::new(false);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || {
                    barrier.wait();
                    a_done.store(true, SeqCst);
                },
                || {
                    barrier.wait();
                    panic!("panic in stolen b")
                },
            )
        });
    });
    assert_eq!(msg, "panic in stolen b");
    assert!(a_done.load(SeqCst));
}

#[test]
fn panic_in_both_with_stolen_b_resumes_the_payload_of_a() {
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for _ in 0..20 {
        let msg = panic_message(|| {
            rt.install(|| {
                magpie::join(
                    || {
                        barrier.wait();
                        panic!("panic in a")
                    },
                    || {
                        barrier.wait();
                        panic!("panic in b")
                    },
                )
            });
        });
        assert_eq!(msg, "panic in a");
    }
}

#[test]
fn result_of_the_other_half_is_dropped_exactly_once_on_panic() {
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    let drops = AtomicUsize::new(0);

    // `b` taken back and run inline (no barrier: on one worker nobody can steal it).
    let rt1 = runtime(1);
    let _ = panic_message(|| {
        rt1.install(|| magpie::join(|| panic!("a"), || DropCounter(&drops)));
    });
    assert_eq!(drops.load(SeqCst), 1, "b's result, b inline");

    // `b` stolen.
    drops.store(0, SeqCst);
    let _ = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || {
                    barrier.wait();
                    panic!("a")
                },
                || {
                    barrier.wait();
                    DropCounter(&drops)
                },
            )
        });
    });
    assert_eq!(drops.load(SeqCst), 1, "b's result, b stolen");

    // `b` panics: `a`'s result is dropped.
    drops.store(0, SeqCst);
    let _ = panic_message(|| {
        rt1.install(|| magpie::join(|| DropCounter(&drops), || panic!("b")));
    });
    assert_eq!(drops.load(SeqCst), 1, "a's result, b inline");

    drops.store(0, SeqCst);
    let _ = panic_message(|| {
        rt.install(|| {
            magpie::join(
                || {
                    barrier.wait();
                    DropCounter(&drops)
                },
                || {
                    barrier.wait();
                    panic!("b")
                },
            )
        });
    });
    assert_eq!(drops.load(SeqCst), 1, "a's result, b stolen");
}

#[test]
fn runtime_is_usable_after_panics() {
    for workers in [1, 2] {
        let rt = runtime(workers);
        for round in 0..10 {
            let _ = panic_message(|| {
                rt.install(|| magpie::join(|| panic!("a"), || ()));
            });
            let _ = panic_message(|| {
                rt.install(|| magpie::join(|| (), || panic!("b")));
            });
            // A panic deep inside a recursion, unwinding through many joins.
            let _ = panic_message(|| {
                rt.install(|| {
                    magpie::join(|| fib(12), || magpie::join(|| fib(10), || panic!("deep")))
                });
            });
            assert_eq!(
                rt.install(|| magpie::join(|| fib(15), || fib(14))),
                (610, 377),
                "{workers} workers, round {round}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Real parallelism
// ---------------------------------------------------------------------------------------------

#[test]
fn halves_run_in_parallel_on_two_workers() {
    // The worker running `a` blocks at the barrier, so only the other worker can run `b`:
    // it must steal `b`, the only job in the pool.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for _ in 0..100 {
        let (ia, ib) = rt.install(|| {
            magpie::join(
                || {
                    barrier.wait();
                    magpie::current_worker_index()
                },
                || {
                    barrier.wait();
                    magpie::current_worker_index()
                },
            )
        });
        let (ia, ib) = (ia.unwrap(), ib.unwrap());
        assert_ne!(ia, ib);
        assert!(ia < 2 && ib < 2);
    }
}

/// `depth` joins nested in first position, each with a no-op second half, around `f`.
fn nested_in_a<R: Send>(depth: usize, f: &(dyn Fn() -> R + Sync)) -> R {
    if depth == 0 {
        f()
    } else {
        magpie::join(|| nested_in_a(depth - 1, f), || ()).0
    }
}

#[test]
fn outer_b_is_stolen_past_nested_joins() {
    // join(|| join(|| join(.. barrier ..), noop), || barrier): the worker running the
    // outer `a` pushes the outer `b` first, then the no-op halves, and blocks at the barrier
    // with all of them in its deque. A thief takes the oldest job, the outer `b`, so the
    // other worker meets the barrier. (A thief that took a newest job first would still
    // get through them: each no-op returns and it steals again.)
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for depth in [1, 2, 5, 20] {
        for _ in 0..100 {
            rt.install(|| {
                magpie::join(|| nested_in_a(depth, &|| barrier.wait()), || barrier.wait())
            });
        }
    }
}

#[test]
fn stolen_half_can_nest_joins() {
    // join(|| barrier, || join(|| join(.. barrier ..), noop)): the other worker steals the
    // outer `b` (the only job), and reaches the barrier inside its own nested joins.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for depth in [1, 2, 5, 20] {
        for _ in 0..100 {
            rt.install(|| {
                magpie::join(|| barrier.wait(), || nested_in_a(depth, &|| barrier.wait()))
            });
        }
    }
}

#[test]
fn three_halves_meet_on_three_workers() {
    // Three jobs that each block until all three run: every one of them must be stolen by,
    // or left to, a different worker. In join(|| join(w, w), w) the first worker blocks in
    // the innermost `a` with both `b`s in its deque, one for each other worker; in
    // join(w, || join(w, w)) the second worker steals the outer `b` and blocks with the
    // inner `b` in its own deque, for the third.
    let rt = runtime(3);
    let barrier = Barrier::new(3);
    let wait = || {
        barrier.wait();
        magpie::current_worker_index().unwrap()
    };
    for _ in 0..50 {
        let ((i, j), k) = rt.install(|| magpie::join(|| magpie::join(wait, wait), wait));
        let mut seen = [i, j, k];
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);

        let (i, (j, k)) = rt.install(|| magpie::join(wait, || magpie::join(wait, wait)));
        let mut seen = [i, j, k];
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);
    }
}

#[test]
fn blocked_inner_b_does_not_prevent_steal_of_outer_b() {
    // join(|| join(noop, || barrier), || barrier): the first worker takes back its inner `b`
    // and blocks in it; the outer `b` is still in its deque (or already stolen), and the
    // other worker steals it.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for _ in 0..100 {
        rt.install(|| magpie::join(|| magpie::join(|| (), || barrier.wait()), || barrier.wait()));
    }
}

// ---------------------------------------------------------------------------------------------
// Volume
// ---------------------------------------------------------------------------------------------

/// A join tree over the leaves `lo..hi`; each leaf marks itself visited and counts itself.
fn leaves(lo: usize, hi: usize, visited: &[AtomicBool], count: &AtomicUsize) -> u64 {
    if hi - lo == 1 {
        assert!(!visited[lo].swap(true, SeqCst), "leaf {lo} ran twice");
        count.fetch_add(1, SeqCst);
        return lo as u64;
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = magpie::join(
        || leaves(lo, mid, visited, count),
        || leaves(mid, hi, visited, count),
    );
    a + b
}

#[test]
fn half_a_million_joins_run_every_leaf_exactly_once() {
    const LEAVES: usize = 500_000;
    let rt = runtime(2);
    let visited: Vec<AtomicBool> = (0..LEAVES).map(|_| AtomicBool::new(false)).collect();
    let count = AtomicUsize::new(0);
    let sum = rt.install(|| leaves(0, LEAVES, &visited, &count));
    assert_eq!(count.load(SeqCst), LEAVES);
    assert_eq!(sum, (LEAVES as u64 - 1) * LEAVES as u64 / 2);
    assert!(visited.iter().all(|v| v.load(SeqCst)));
    // At most LEAVES - 1 published joins plus the install; at least the outermost join.
    let jobs = rt.stats().jobs_executed();
    assert!((2..=LEAVES as u64).contains(&jobs), "{jobs} jobs");
}

// ---------------------------------------------------------------------------------------------
// Where it runs
// ---------------------------------------------------------------------------------------------

#[test]
fn join_outside_any_runtime_uses_the_global_runtime() {
    assert_eq!(magpie::current_worker_index(), None);
    let global_workers = magpie::current_num_workers();
    assert!(global_workers >= 1);
    let (a, b) = magpie::join(
        || {
            (
                magpie::current_worker_index(),
                magpie::current_num_workers(),
                std::thread::current().name().map(str::to_owned),
            )
        },
        || {
            (
                magpie::current_worker_index(),
                magpie::current_num_workers(),
                std::thread::current().name().map(str::to_owned),
            )
        },
    );
    for (index, workers, name) in [a, b] {
        assert!(index.is_some_and(|i| i < global_workers));
        assert_eq!(workers, global_workers);
        let name = name.expect("worker threads are named");
        assert!(name.starts_with("magpie-worker-"), "thread name {name}");
    }
    // Still off the pool here, and the global runtime computes correctly.
    assert_eq!(magpie::current_worker_index(), None);
    assert_eq!(fib(18), fib_sequential(18));
}

fn where_am_i() -> (Option<usize>, String) {
    (
        magpie::current_worker_index(),
        std::thread::current().name().unwrap_or("").to_owned(),
    )
}

#[test]
fn join_inside_install_runs_on_that_runtime() {
    let rt_a = Runtime::builder()
        .worker_threads(2)
        .thread_name("rt-a")
        .build()
        .unwrap();
    let rt_b = Runtime::builder()
        .worker_threads(2)
        .thread_name("rt-b")
        .build()
        .unwrap();

    let check = |(index, name): (Option<usize>, String), prefix: &str| {
        let index = index.expect("half ran off the pool");
        assert!(index < 2);
        assert_eq!(name, format!("{prefix}-{index}"));
    };

    for _ in 0..20 {
        let (a, b) = rt_a.install(|| magpie::join(where_am_i, where_am_i));
        check(a, "rt-a");
        check(b, "rt-a");

        // From a worker of B into A: the halves run on A, and back in B afterwards.
        let ((a, b), after) = rt_b.install(|| {
            let halves = rt_a.install(|| magpie::join(where_am_i, where_am_i));
            (halves, where_am_i())
        });
        check(a, "rt-a");
        check(b, "rt-a");
        check(after, "rt-b");
    }
}
