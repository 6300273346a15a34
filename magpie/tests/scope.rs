//! `scope`: borrowing spawns, nested spawns with exact counts, the body's value, panics, and
//! where the scope and its spawns run.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Barrier;

use common::{panic_message, runtime};
use magpie::{Runtime, Scope};

// ---------------------------------------------------------------------------------------------
// Borrowing
// ---------------------------------------------------------------------------------------------

#[test]
fn spawns_fill_mutable_chunks() {
    let rt = runtime(2);
    let mut v = vec![0u64; 10_000];
    rt.install(|| {
        magpie::scope(|s| {
            for (i, chunk) in v.chunks_mut(97).enumerate() {
                s.spawn(move |_| {
                    for (j, x) in chunk.iter_mut().enumerate() {
                        *x = (i * 97 + j) as u64 * 3 + 1;
                    }
                });
            }
        })
    });
    for (k, x) in v.iter().enumerate() {
        assert_eq!(*x, k as u64 * 3 + 1, "element {k}");
    }
}

/// Splits `data` in halves recursively, spawning a job per half, down to single elements.
fn fill_by_splitting<'s>(s: &Scope<'s>, data: &'s mut [u32], offset: u32) {
    match data.len() {
        0 => {}
        1 => data[0] = offset * offset,
        len => {
            let (lo, hi) = data.split_at_mut(len / 2);
            let mid = offset + lo.len() as u32;
            s.spawn(move |s| fill_by_splitting(s, lo, offset));
            s.spawn(move |s| fill_by_splitting(s, hi, mid));
        }
    }
}

#[test]
fn spawns_borrow_disjoint_splits_mutably() {
    let rt = runtime(2);
    let mut data = vec![u32::MAX; 4099];
    rt.install(|| magpie::scope(|s| fill_by_splitting(s, &mut data, 0)));
    for (k, x) in data.iter().enumerate() {
        assert_eq!(*x, (k * k) as u32, "element {k}");
    }
}

#[test]
fn spawns_read_shared_borrows() {
    let rt = runtime(3);
    let input: Vec<u64> = (0..1000).collect();
    let total = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            for chunk in input.chunks(10) {
                let total = &total;
                s.spawn(move |_| {
                    total.fetch_add(chunk.iter().sum::<u64>() as usize, SeqCst);
                });
            }
        })
    });
    assert_eq!(total.load(SeqCst), 999 * 1000 / 2);
}

// ---------------------------------------------------------------------------------------------
// Counts and values
// ---------------------------------------------------------------------------------------------

#[test]
fn nested_spawns_run_exactly_once_each() {
    let rt = runtime(2);
    let outer = AtomicUsize::new(0);
    let inner = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..100 {
                s.spawn(|s| {
                    outer.fetch_add(1, SeqCst);
                    for _ in 0..100 {
                        s.spawn(|_| {
                            inner.fetch_add(1, SeqCst);
                        });
                    }
                });
            }
        })
    });
    assert_eq!(outer.load(SeqCst), 100);
    assert_eq!(inner.load(SeqCst), 10_000);
    // One job per spawn plus the install (WorkerStats::jobs_executed's accounting).
    assert_eq!(rt.stats().jobs_executed(), 1 + 100 + 10_000);
}

/// A binary tree of spawns, `depth` levels deep: 2^depth leaves.
fn spawn_tree<'s>(s: &Scope<'s>, depth: u32, leaves: &'s AtomicUsize) {
    if depth == 0 {
        leaves.fetch_add(1, SeqCst);
        return;
    }
    s.spawn(move |s| spawn_tree(s, depth - 1, leaves));
    s.spawn(move |s| spawn_tree(s, depth - 1, leaves));
}

#[test]
fn deep_spawn_tree_runs_every_leaf() {
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        let leaves = AtomicUsize::new(0);
        rt.install(|| magpie::scope(|s| spawn_tree(s, 14, &leaves)));
        assert_eq!(leaves.load(SeqCst), 1 << 14, "{workers} workers");
    }
}

#[test]
fn scope_returns_the_body_value() {
    let rt = runtime(2);
    let count = AtomicUsize::new(0);
    let value = rt.install(|| {
        magpie::scope(|s| {
            s.spawn(|_| {
                count.fetch_add(1, SeqCst);
            });
            String::from("body value")
        })
    });
    assert_eq!(value, "body value");
    assert_eq!(count.load(SeqCst), 1);

    // A body that spawns nothing.
    assert_eq!(rt.install(|| magpie::scope(|_| 42)), 42);
}

#[test]
fn spawn_from_a_join_inside_the_scope() {
    let rt = runtime(2);
    let count = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            magpie::join(
                || {
                    for _ in 0..100 {
                        s.spawn(|_| {
                            count.fetch_add(1, SeqCst);
                        });
                    }
                },
                || {
                    for _ in 0..100 {
                        s.spawn(|_| {
                            count.fetch_add(1, SeqCst);
                        });
                    }
                },
            );
        })
    });
    assert_eq!(count.load(SeqCst), 200);
}

#[test]
fn nested_scopes_wait_for_their_own_spawns() {
    let rt = runtime(2);
    let count = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..10 {
                s.spawn(|_| {
                    let inner = AtomicUsize::new(0);
                    magpie::scope(|s2| {
                        for _ in 0..10 {
                            s2.spawn(|_| {
                                inner.fetch_add(1, SeqCst);
                            });
                        }
                    });
                    // The inner scope returned: all its spawns are done.
                    assert_eq!(inner.load(SeqCst), 10);
                    count.fetch_add(10, SeqCst);
                });
            }
        })
    });
    assert_eq!(count.load(SeqCst), 100);
}

// ---------------------------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------------------------

#[test]
fn spawn_panic_is_resumed_after_all_others_finished() {
    for workers in [1, 2] {
        let rt = runtime(workers);
        let others = AtomicUsize::new(0);
        let msg = panic_message(|| {
            rt.install(|| {
                magpie::scope(|s| {
                    s.spawn(|_| panic!("spawn panic"));
                    for _ in 0..99 {
                        s.spawn(|s| {
                            // Spawn more after the panic may have happened: they run too.
                            s.spawn(|_| {
                                others.fetch_add(1, SeqCst);
                            });
                        });
                    }
                })
            });
        });
        assert_eq!(msg, "spawn panic");
        assert_eq!(others.load(SeqCst), 99, "{workers} workers");
        // Still usable.
        assert_eq!(rt.install(|| magpie::scope(|_| 7)), 7);
    }
}

#[test]
fn spawn_panic_waits_for_a_running_spawn() {
    // Two workers: the first spawn is held at the barrier until the second spawn runs on the
    // other worker, and then waits until that one has panicked. A scope that resumed the
    // panic without waiting for every spawn would return before `slow_done` is set.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    let panicked = AtomicBool::new(false);
    let slow_done = AtomicBool::new(false);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::scope(|s| {
                s.spawn(|_| {
                    barrier.wait();
                    while !panicked.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                    slow_done.store(true, SeqCst);
                });
                s.spawn(|_| {
                    barrier.wait();
                    panicked.store(true, SeqCst);
                    panic!("fast spawn panic")
                });
            })
        });
    });
    assert_eq!(msg, "fast spawn panic");
    assert!(slow_done.load(SeqCst));
}

#[test]
fn body_panic_wins_over_spawn_panic() {
    // Two workers: the body waits until the spawn has run (stolen by the other worker, since
    // this one is busy in the body), so both panics happen.
    let rt = runtime(2);
    let spawn_ran = AtomicBool::new(false);
    let after_body = AtomicUsize::new(0);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::scope(|s| {
                s.spawn(|_| {
                    spawn_ran.store(true, SeqCst);
                    panic!("spawn panic")
                });
                while !spawn_ran.load(SeqCst) {
                    std::thread::yield_now();
                }
                for _ in 0..10 {
                    s.spawn(|_| {
                        after_body.fetch_add(1, SeqCst);
                    });
                }
                panic!("body panic")
            })
        });
    });
    assert_eq!(msg, "body panic");
    assert!(spawn_ran.load(SeqCst));
    // The body's panic still lets the spawns it made run before the scope unwinds.
    assert_eq!(after_body.load(SeqCst), 10);

    // Also when the spawn panics after the body did (single worker: spawns run only once the
    // body is done).
    let rt1 = runtime(1);
    let msg = panic_message(|| {
        rt1.install(|| {
            magpie::scope(|s| {
                s.spawn(|_| panic!("spawn panic"));
                panic!("body panic")
            })
        });
    });
    assert_eq!(msg, "body panic");
}

#[test]
fn one_of_several_spawn_panics_is_resumed() {
    let rt = runtime(2);
    let ran = AtomicUsize::new(0);
    let msg = panic_message(|| {
        rt.install(|| {
            magpie::scope(|s| {
                for i in 0..10 {
                    let ran = &ran;
                    s.spawn(move |_| {
                        ran.fetch_add(1, SeqCst);
                        panic!("spawn {i}")
                    });
                }
            })
        });
    });
    assert!(
        (0..10).any(|i| msg == format!("spawn {i}")),
        "unexpected payload {msg:?}"
    );
    assert_eq!(ran.load(SeqCst), 10);
}

// ---------------------------------------------------------------------------------------------
// Where it runs
// ---------------------------------------------------------------------------------------------

#[test]
fn scope_outside_any_runtime_uses_the_global_runtime() {
    assert_eq!(magpie::current_worker_index(), None);
    let workers = magpie::current_num_workers();
    let count = AtomicUsize::new(0);
    let body_index = magpie::scope(|s| {
        for _ in 0..100 {
            s.spawn(|_| {
                assert!(magpie::current_worker_index().is_some_and(|i| i < workers));
                count.fetch_add(1, SeqCst);
            });
        }
        magpie::current_worker_index()
    });
    assert!(body_index.is_some_and(|i| i < workers));
    assert_eq!(count.load(SeqCst), 100);
}

#[test]
fn scope_inside_install_runs_on_that_runtime() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .thread_name("scope-rt")
        .build()
        .unwrap();
    let names = std::sync::Mutex::new(Vec::new());
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..50 {
                s.spawn(|_| {
                    let index = magpie::current_worker_index().expect("spawn ran off the pool");
                    let name = std::thread::current().name().unwrap().to_owned();
                    names.lock().unwrap().push((index, name));
                });
            }
        })
    });
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 50);
    for (index, name) in names {
        assert_eq!(name, format!("scope-rt-{index}"));
    }
}

#[test]
fn spawns_run_in_parallel_on_two_workers() {
    // The scope's worker takes back the newest spawn and blocks in it at the barrier; the
    // other spawn can then only run on the other worker.
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for _ in 0..100 {
        let indices = std::sync::Mutex::new(Vec::new());
        rt.install(|| {
            magpie::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|_| {
                        barrier.wait();
                        indices
                            .lock()
                            .unwrap()
                            .push(magpie::current_worker_index().unwrap());
                    });
                }
            })
        });
        let mut indices = indices.into_inner().unwrap();
        indices.sort_unstable();
        assert_eq!(indices, [0, 1]);
    }
}

#[test]
fn spawn_from_a_thread_outside_the_pool() {
    // `Scope` is `Sync`: a plain thread started in the body may spawn on it. Those jobs go
    // through the runtime's inject queue, and the scope still waits for them.
    let rt = runtime(2);
    let count = AtomicUsize::new(0);
    let on_pool = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            std::thread::scope(|ts| {
                ts.spawn(|| {
                    assert_eq!(magpie::current_worker_index(), None);
                    for _ in 0..100 {
                        s.spawn(|_| {
                            if magpie::current_worker_index().is_some() {
                                on_pool.fetch_add(1, SeqCst);
                            }
                            count.fetch_add(1, SeqCst);
                        });
                    }
                });
            });
        })
    });
    assert_eq!(count.load(SeqCst), 100);
    assert_eq!(on_pool.load(SeqCst), 100);
}

#[test]
fn spawn_from_a_worker_of_another_runtime() {
    // A spawn made on a worker of runtime B for a scope of runtime A runs on A.
    let rt_a = Runtime::builder()
        .worker_threads(2)
        .thread_name("spawn-a")
        .build()
        .unwrap();
    let rt_b = Runtime::builder()
        .worker_threads(2)
        .thread_name("spawn-b")
        .build()
        .unwrap();
    let names = std::sync::Mutex::new(Vec::new());
    rt_a.install(|| {
        magpie::scope(|s| {
            rt_b.install(|| {
                for _ in 0..20 {
                    s.spawn(|_| {
                        let name = std::thread::current().name().unwrap().to_owned();
                        names.lock().unwrap().push(name);
                    });
                }
            });
        })
    });
    let names = names.into_inner().unwrap();
    assert_eq!(names.len(), 20);
    for name in names {
        assert!(name.starts_with("spawn-a-"), "spawn ran on {name}");
    }
}
