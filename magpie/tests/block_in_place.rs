//! `magpie::task::block_in_place` (issue 15, part 5): blocking code on a worker hands the
//! worker's queued tasks to the others first, runs in place (same thread, same worker) inside
//! `join` and `scope`, nests, propagates panics, and on one worker runs anyway while the
//! queued work waits.
//!
//! A hand-off that did not happen shows up as a closure waiting forever for a task queued
//! behind it: every such wait is a `recv_timeout` of [`DEADLINE`] (a minute), which only turns
//! the hang into a failure. No test measures time.

mod common;

use std::panic;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};

use common::{panic_message, runtime, DEADLINE};
use magpie::task::block_in_place;

/// Receives `n` values, failing the test instead of hanging if one never comes.
fn recv_n<T>(rx: &mpsc::Receiver<T>, n: usize, what: &str) -> Vec<T> {
    (0..n)
        .map(|i| {
            rx.recv_timeout(DEADLINE)
                .unwrap_or_else(|_| panic!("{what}: value {i} of {n} never came"))
        })
        .collect()
}

/// Inside a task: tasks queued on the worker before the call (LIFO slot, ring, mailbox),
/// tasks spawned inside the closure, and a task woken inside it all run on the other workers
/// while the closure blocks waiting for them.
fn queued_tasks_run_while_blocked(workers: usize) {
    let rt = Arc::new(runtime(workers));
    for round in 0..20 {
        let rt_in_task = rt.clone();
        let outcome = rt.block_on(rt.spawn(async move {
            let me = magpie::current_worker_index().unwrap();
            let (tx, rx) = mpsc::channel::<usize>();
            let here = || magpie::current_worker_index().unwrap();
            // Queued before: the ring (displaced), the LIFO slot, the mailbox.
            for _ in 0..2 {
                let tx = tx.clone();
                drop(magpie::spawn(async move { tx.send(here()).unwrap() }));
            }
            let tx_mailbox = tx.clone();
            drop(rt_in_task.submit_to(me, move || tx_mailbox.send(here()).unwrap()));
            let ran = block_in_place(|| {
                let mut ran = recv_n(&rx, 3, "queued before the call");
                // Spawned inside: to the inject queue, not to this worker's queues.
                let tx_inside = tx.clone();
                drop(magpie::spawn(
                    async move { tx_inside.send(here()).unwrap() },
                ));
                // Submitted to this very worker inside: the inject queue too.
                let tx_submit = tx.clone();
                drop(rt_in_task.submit_to(me, move || tx_submit.send(here()).unwrap()));
                ran.extend(recv_n(&rx, 2, "spawned inside"));
                // The worker is still itself.
                assert_eq!(magpie::current_worker_index(), Some(me));
                ran
            });
            drop(rt_in_task);
            (me, ran)
        }));
        let (me, ran) = outcome.unwrap();
        assert_eq!(ran.len(), 5);
        for worker in ran {
            assert_ne!(worker, me, "round {round}: ran on the blocked worker");
        }
    }
    let stats = rt.stats();
    let calls: u64 = stats.workers.iter().map(|w| w.block_in_place_calls).sum();
    assert_eq!(calls, 20);
}

#[test]
fn queued_tasks_run_while_blocked_on_2_workers() {
    queued_tasks_run_while_blocked(2);
}

#[test]
fn queued_tasks_run_while_blocked_on_3_workers() {
    queued_tasks_run_while_blocked(3);
}

/// In a `scope` spawn: the closure borrows the scope's data, a task queued on the worker
/// (by the job: to its ring) runs elsewhere meanwhile, the scope's other spawns run, and the
/// results are right. One spawn blocks, so the task needs a third worker: the worker that runs
/// the scope waits for the spawns inside it, and a worker waiting inside `join` or `scope` runs
/// jobs, never tasks. On 2 workers, a thief that took the blocking spawn (thieves take the
/// oldest spawn first) would wait for good (the documented limit, see `block_in_place`).
#[test]
fn inside_scope_spawns() {
    for workers in [3, 4] {
        let rt = runtime(workers);
        for _ in 0..10 {
            let data: Vec<u64> = (1..=100).collect();
            let mut sums = [0u64; 4];
            rt.install(|| {
                magpie::scope(|s| {
                    for (i, sum) in sums.iter_mut().enumerate() {
                        let data = &data;
                        let weighted = move || data.iter().map(|x| x * (i as u64 + 1)).sum();
                        if i != 0 {
                            s.spawn(move |_| *sum = weighted());
                            continue;
                        }
                        s.spawn(move |_| {
                            let me = magpie::current_worker_index().unwrap();
                            let (tx, rx) = mpsc::channel();
                            drop(magpie::spawn(async move {
                                tx.send(magpie::current_worker_index().unwrap()).unwrap();
                            }));
                            *sum = block_in_place(|| {
                                let ran = recv_n(&rx, 1, "a task queued by a scope spawn")[0];
                                assert_ne!(ran, me);
                                assert_eq!(magpie::current_worker_index(), Some(me));
                                weighted()
                            });
                        });
                    }
                });
            });
            assert_eq!(sums, [5050, 10100, 15150, 20200]);
        }
    }
}

/// In a `join` arm: the other arm stays stealable and runs, the closure's borrowed data and
/// thread stay put, and both results come back.
#[test]
fn inside_a_join_arm() {
    for workers in [2, 3] {
        let rt = runtime(workers);
        for _ in 0..10 {
            let data: Vec<u64> = (1..=1000).collect();
            let (a, b) = rt.install(|| {
                magpie::join(
                    || {
                        let me = magpie::current_worker_index();
                        let thread = std::thread::current().id();
                        let (tx, rx) = mpsc::channel();
                        drop(magpie::spawn(async move { tx.send(()).unwrap() }));
                        let sum: u64 = block_in_place(|| {
                            recv_n(&rx, 1, "a task queued by a join arm");
                            // A join inside, on the same worker.
                            let (x, y) = magpie::join(
                                || data[..500].iter().sum::<u64>(),
                                || data[500..].iter().sum::<u64>(),
                            );
                            x + y
                        });
                        assert_eq!(magpie::current_worker_index(), me);
                        assert_eq!(std::thread::current().id(), thread);
                        sum
                    },
                    || common::fib(20),
                )
            });
            assert_eq!((a, b), (500_500, 6765));
        }
    }
}

/// The closure may block until the *other* arm of its own `join` has run: that arm is
/// stealable, and a worker is woken for it.
#[test]
fn waits_for_its_own_join_half() {
    for workers in [2, 3] {
        let rt = runtime(workers);
        for _ in 0..20 {
            let (tx, rx) = mpsc::channel();
            let (got, ()) = rt.install(move || {
                magpie::join(
                    move || block_in_place(|| recv_n(&rx, 1, "the other join half")[0]),
                    move || tx.send(7).unwrap(),
                )
            });
            assert_eq!(got, 7);
        }
    }
}

/// Outside any runtime it just runs the closure.
#[test]
fn outside_any_runtime() {
    let mut touched = false;
    let value = block_in_place(|| {
        touched = true;
        assert_eq!(magpie::current_worker_index(), None);
        42
    });
    assert_eq!((value, touched), (42, true));
    let from_thread = std::thread::spawn(|| block_in_place(|| 5)).join().unwrap();
    assert_eq!(from_thread, 5);
}

/// With one worker nobody else can run the queued tasks: the closure runs anyway, the tasks
/// wait until it returns (still queued, not lost), and fork-join work inside runs in place.
#[test]
fn one_worker_runs_the_closure_and_queued_work_waits() {
    let rt = runtime(1);
    let ran = Arc::new(AtomicBool::new(false));
    let ran_in_task = ran.clone();
    let (seen_inside, queued) = rt
        .block_on(rt.spawn(async move {
            let flag = ran_in_task.clone();
            let queued = magpie::spawn(async move { flag.store(true, SeqCst) });
            let seen_inside = block_in_place(|| {
                // A join inside: both halves on this worker.
                assert_eq!(common::fib(15), 610);
                ran_in_task.load(SeqCst)
            });
            (seen_inside, queued)
        }))
        .unwrap();
    assert!(
        !seen_inside,
        "only one worker: nobody could have run the task"
    );
    rt.block_on(queued).unwrap();
    assert!(ran.load(SeqCst));
    let stats = rt.stats();
    assert_eq!(stats.workers[0].block_in_place_calls, 1);
    assert_eq!(stats.workers[0].block_in_place_handoffs, 1);
}

/// Nested calls work, and each restores the state of the one around it: `block_on` is
/// allowed inside, and refused again on the worker once the outermost call returns.
#[test]
fn nested_calls_and_block_on_inside() {
    let rt = runtime(2);
    let outcome = rt.block_on(rt.spawn(async {
        let value = block_in_place(|| {
            let inner = block_in_place(|| {
                // Inside, `block_on` may wait for a task of the same runtime.
                magpie::block_on(async { magpie::spawn(async { 20 }).await.unwrap() })
            });
            // Still inside the outer call after the inner one returned.
            let again = magpie::spawn(async { 1 }).join().unwrap();
            inner + again
        });
        // Back in the task: blocking is refused again.
        let refused = panic::catch_unwind(|| magpie::block_on(async {})).is_err();
        (value, refused)
    }));
    assert_eq!(outcome.unwrap(), (21, true));
}

/// A panic in the closure reaches the caller unchanged and leaves the worker usable: it runs
/// tasks again, refuses `block_on` again, and a task whose closure panicked reports the panic.
#[test]
fn a_panic_propagates_and_the_worker_stays_usable() {
    let rt = runtime(2);
    let outcome = rt.block_on(rt.spawn(async {
        let message = panic_message(|| {
            block_in_place(|| -> () { panic!("boom inside") });
        });
        let refused = panic::catch_unwind(|| magpie::block_on(async {})).is_err();
        // Spawns from the task go to this worker's queues again, and run.
        let after = magpie::spawn(async { 3 }).await.unwrap();
        (message, refused, after)
    }));
    assert_eq!(outcome.unwrap(), ("boom inside".to_owned(), true, 3));
    let failed = rt.block_on(rt.spawn(async {
        block_in_place(|| panic!("task's panic"));
    }));
    let payload = failed.unwrap_err().into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"task's panic"));
    // And in a `join` arm, through `join`.
    let message = panic_message(|| {
        rt.install(|| magpie::join(|| block_in_place(|| panic!("in join")), || ()));
    });
    assert_eq!(message, "in join");
    // The runtime still runs everything.
    let sum: i32 = (0..50)
        .map(|i| rt.spawn(async move { i }))
        .map(|h| rt.block_on(h).unwrap())
        .sum();
    assert_eq!(sum, 1225);
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

/// The hand-off reaches workers that never search: the other worker runs a task that yields
/// forever, so its own ring is never empty and it never steals, but it looks at the inject
/// queue at maintenance. Tasks left in the blocked worker's LIFO slot or ring would wait
/// there for the whole closure (here: forever); handed to the inject queue, they run.
#[test]
fn handed_off_tasks_reach_a_busy_worker() {
    let rt = Arc::new(runtime(2));
    for round in 0..20 {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_spinner = stop.clone();
        // The spinner starts on worker 1 (spawned inside a poll there: its LIFO slot).
        let spinner = rt
            .submit_to(1, move || {
                magpie::spawn(async move {
                    while !stop_spinner.load(SeqCst) {
                        magpie::task::yield_now().await;
                    }
                })
            })
            .unwrap()
            .join()
            .unwrap();
        let blocked = rt
            .submit_to(0, || {
                let (tx, rx) = mpsc::channel();
                for _ in 0..3 {
                    let tx = tx.clone();
                    drop(magpie::spawn(async move { tx.send(()).unwrap() }));
                }
                block_in_place(|| recv_n(&rx, 3, "tasks behind a blocked worker").len())
            })
            .unwrap();
        let outcome = blocked.join();
        stop.store(true, SeqCst);
        rt.block_on(spinner).unwrap();
        assert_eq!(outcome.unwrap(), 3, "round {round}");
    }
}

/// Inside the closure, `block_on` may wait for timers, and another runtime's `block_on`
/// makes that runtime the current one for the free functions until it returns.
#[test]
fn block_on_inside_uses_timers_and_the_runtime_it_belongs_to() {
    let rt = runtime(2);
    let other = Arc::new(runtime(3));
    let other_in_task = other.clone();
    let outcome = rt.block_on(rt.spawn(async move {
        block_in_place(|| {
            // A timer of this runtime, driven by its other worker meanwhile.
            magpie::block_on(magpie::time::sleep(std::time::Duration::from_millis(1)));
            let here = magpie::current_num_workers();
            let there = other_in_task.block_on(async {
                // `magpie::spawn` goes to the runtime whose `block_on` runs here.
                magpie::spawn(async { magpie::current_num_workers() })
                    .await
                    .unwrap()
            });
            let back = magpie::spawn(async { magpie::current_num_workers() });
            (here, there, back.join().unwrap())
        })
    }));
    assert_eq!(outcome.unwrap(), (2, 3, 2));
}
