//! Compensation workers (`Builder::max_compensation_workers`): started while the ordinary
//! workers are stalled, they run the queued work; retired, they take none; they leave
//! `set_active_workers` and shutdown as they were.
//!
//! A stall is simulated by a task that blocks its worker on a std channel until the test
//! releases it. The crate-internal calls the stall monitor makes are reached through
//! `Runtime::__start_compensation_worker` and `__retire_compensation_workers`. Waits use
//! `recv_timeout(WAIT)` only to turn a hang (the bug) into a failure; no outcome depends on
//! timing.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier};

use magpie::task::JoinHandle;
use magpie::Runtime;

mod common;
use common::{fib, Ledger, DEADLINE as WAIT};

fn runtime(workers: usize, max_workers: usize, compensation: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .max_workers(max_workers)
        .max_compensation_workers(compensation)
        // No stall monitor: these tests play its part, and behind a blocker held past the
        // threshold it would start compensation workers of its own (stalls.rs tests those).
        .stall_threshold(None)
        .build()
        .unwrap()
}

/// A task that blocks whichever worker runs it until `release` is sent (or dropped).
struct Blocker {
    release: Sender<()>,
    handle: JoinHandle<()>,
    /// The worker it runs on.
    worker: usize,
}

impl Blocker {
    fn submit(rt: &Runtime) -> Blocker {
        let (started, on) = mpsc::channel();
        let (release, wait) = mpsc::channel::<()>();
        let handle = rt.submit(move || {
            started
                .send(magpie::current_worker_index().unwrap())
                .unwrap();
            let _ = wait.recv();
        });
        let worker = on.recv_timeout(WAIT).expect("the blocker never started");
        Blocker {
            release,
            handle,
            worker,
        }
    }

    fn release(self) {
        self.release.send(()).unwrap();
        self.handle.join().unwrap();
    }
}

/// Submits `n` closures that each report `(i, the worker that ran it)`.
fn submit_reporting(rt: &Runtime, n: usize) -> (Vec<JoinHandle<()>>, Receiver<(usize, usize)>) {
    let (tx, rx) = mpsc::channel();
    let handles = (0..n)
        .map(|i| {
            let tx = tx.clone();
            rt.submit(move || {
                tx.send((i, magpie::current_worker_index().unwrap()))
                    .unwrap()
            })
        })
        .collect();
    (handles, rx)
}

/// Waits for `n` reports from `submit_reporting` and returns the worker of each, by `i`.
fn workers_of(rx: &Receiver<(usize, usize)>, n: usize) -> Vec<usize> {
    let mut workers = vec![usize::MAX; n];
    for _ in 0..n {
        let (i, worker) = rx
            .recv_timeout(WAIT)
            .expect("a queued task never ran: nobody took it");
        assert_eq!(workers[i], usize::MAX, "task {i} ran twice");
        workers[i] = worker;
    }
    workers
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        handle.join().unwrap();
    }
}

#[test]
fn queued_tasks_run_on_a_compensation_worker_while_the_only_worker_is_blocked() {
    let rt = runtime(1, 1, 1);
    assert_eq!((rt.num_workers(), rt.active_workers()), (1, 1));
    let blocker = Blocker::submit(&rt);
    assert_eq!(blocker.worker, 0);

    let (handles, rx) = submit_reporting(&rt, 20);
    // Nobody can run them: the only worker is blocked, the compensation slot is off.
    assert!(rx.try_recv().is_err());
    assert_eq!(rt.stats().workers[1].tasks_executed, 0);

    assert_eq!(rt.__compensation_available(), 1);
    assert!(rt.__start_compensation_worker());
    assert_eq!(rt.__compensation_available(), 0);
    assert!(!rt.__start_compensation_worker(), "beyond the maximum");

    assert_eq!(workers_of(&rx, 20), [1; 20]);
    join_all(handles);
    let stats = rt.stats();
    let extra = &stats.workers[1];
    assert!(extra.compensation && extra.active);
    assert!(!stats.workers[0].compensation);
    assert_eq!(
        (extra.tasks_executed, stats.workers[0].tasks_executed),
        (20, 0)
    );
    assert_eq!(
        (
            stats.active_workers,
            stats.compensation_workers_active,
            stats.compensation_workers_started
        ),
        (1, 1, 1)
    );
    // The user-facing counts and the iterators' splitting do not see it, on it either.
    assert_eq!(rt.num_workers(), 1);
    let on_extra = rt.submit(|| {
        (
            magpie::current_worker_index(),
            magpie::current_num_workers(),
        )
    });
    assert_eq!(on_extra.join().unwrap(), (Some(1), 1));

    // Retire it while it runs a task: it finishes that task, then takes no more.
    let last = Blocker::submit(&rt);
    assert_eq!(last.worker, 1);
    rt.__retire_compensation_workers();
    let stats = rt.stats();
    assert!(!stats.workers[1].active);
    assert_eq!(stats.compensation_workers_active, 0);
    assert_eq!(rt.__compensation_available(), 1);
    // The retire happened before this release, so the compensation worker, when the task
    // returns, sees itself switched off before it looks for work again.
    last.release();
    blocker.release();

    let (handles, rx) = submit_reporting(&rt, 50);
    assert_eq!(workers_of(&rx, 50), [0; 50]);
    join_all(handles);
    assert_eq!(rt.stats().workers[1].tasks_executed, 22);
    assert_eq!(rt.stats().compensation_workers_started, 1);
}

#[test]
fn no_compensation_means_no_slot_and_no_start() {
    let rt = runtime(2, 2, 0);
    assert_eq!(rt.__compensation_available(), 0);
    assert!(!rt.__start_compensation_worker());
    rt.__retire_compensation_workers();
    let stats = rt.stats();
    assert_eq!(stats.workers.len(), 2);
    assert!(stats.workers.iter().all(|w| !w.compensation && w.active));
    assert_eq!(
        (
            stats.compensation_workers_active,
            stats.compensation_workers_started
        ),
        (0, 0)
    );
}

#[test]
fn starts_beyond_the_maximum_are_refused() {
    let rt = runtime(1, 1, 2);
    assert!(rt.__start_compensation_worker());
    assert!(rt.__start_compensation_worker());
    assert!(!rt.__start_compensation_worker());
    assert_eq!(rt.stats().compensation_workers_active, 2);
    rt.__retire_compensation_workers();
    assert_eq!(rt.__compensation_available(), 2);
    assert_eq!(rt.stats().compensation_workers_started, 2);
}

#[test]
fn a_join_splits_across_an_ordinary_and_a_compensation_worker() {
    // Both halves wait for each other, so the join completes only if the second half runs
    // on the other worker at the same time: one of the two is the compensation worker.
    let rt = runtime(1, 1, 1);
    assert!(rt.__start_compensation_worker());
    let barrier = Barrier::new(2);
    let on = rt.install(|| {
        magpie::join(
            || {
                barrier.wait();
                magpie::current_worker_index().unwrap()
            },
            || {
                barrier.wait();
                magpie::current_worker_index().unwrap()
            },
        )
    });
    let mut on = [on.0, on.1];
    on.sort_unstable();
    assert_eq!(on, [0, 1]);

    // A scope whose spawns wait for each other, likewise.
    let barrier = Barrier::new(2);
    let ran = AtomicUsize::new(0);
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..2 {
                s.spawn(|_| {
                    barrier.wait();
                    ran.fetch_add(1, SeqCst);
                });
            }
        })
    });
    assert_eq!(ran.load(SeqCst), 2);

    // Retired, the runtime runs joins on its one worker again.
    rt.__retire_compensation_workers();
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
}

#[test]
fn set_active_workers_leaves_running_compensation_workers_alone() {
    // Ordinary workers 0..3 (1 and 2 start switched off), compensation slot 3.
    let rt = runtime(1, 3, 1);
    let blocker = Blocker::submit(&rt);
    assert_eq!(blocker.worker, 0);
    assert!(rt.__start_compensation_worker());
    let (handles, rx) = submit_reporting(&rt, 10);
    assert_eq!(workers_of(&rx, 10), [3; 10]);
    join_all(handles);

    let flags =
        |rt: &Runtime| -> Vec<bool> { rt.stats().workers.iter().map(|w| w.active).collect() };
    rt.set_active_workers(3).unwrap();
    assert_eq!(flags(&rt), [true, true, true, true]);
    // Worker 0 is still blocked: the others run these.
    let (handles, rx) = submit_reporting(&rt, 20);
    assert!(workers_of(&rx, 20).iter().all(|&w| (1..=3).contains(&w)));
    join_all(handles);

    rt.set_active_workers(1).unwrap();
    assert_eq!(flags(&rt), [true, false, false, true]);
    assert_eq!(rt.stats().compensation_workers_active, 1);
    // Its range is the ordinary workers only.
    let err = rt.set_active_workers(4).unwrap_err();
    assert_eq!(err.max(), 3);
    let (handles, rx) = submit_reporting(&rt, 20);
    assert!(workers_of(&rx, 20).iter().all(|&w| w != 0));
    join_all(handles);

    // Retiring compensation leaves the ordinary count as it was.
    rt.__retire_compensation_workers();
    assert_eq!(flags(&rt), [true, false, false, false]);
    assert_eq!(rt.active_workers(), 1);
    blocker.release();
    let (handles, rx) = submit_reporting(&rt, 10);
    workers_of(&rx, 10);
    join_all(handles);
}

#[test]
fn shutdown_while_a_compensation_worker_runs_a_task() {
    let rt = runtime(1, 1, 1);
    let blocker = Blocker::submit(&rt);
    assert!(rt.__start_compensation_worker());
    let running = Blocker::submit(&rt);
    assert_eq!(running.worker, 1);
    blocker.release();
    let pending = rt.spawn(std::future::pending::<()>());

    let (dropped, done) = mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(rt);
        dropped.send(()).unwrap();
    });
    // The drop cancels every task first: once `pending` is cancelled it is under way, and
    // waits for the compensation worker's task.
    assert!(pending.join().unwrap_err().is_cancelled());
    running.release.send(()).unwrap();
    done.recv_timeout(WAIT)
        .expect("the runtime's drop hung on its compensation worker");
    dropper.join().unwrap();
    // The running task finished (cancelled while it ran: its output is not delivered).
    let _ = running.handle.join();
}

#[test]
fn stress_start_and_retire_while_tasks_and_joins_run() {
    use magpie::prelude::*;

    const ROUNDS: usize = 20;
    const TASKS: usize = 100;
    let rt = Arc::new(runtime(2, 2, 2));
    let stop = Arc::new(AtomicU8::new(0));
    let cycles = Arc::new(AtomicUsize::new(0));
    // Switches compensation on and off for as long as the work runs.
    let controller = {
        let (rt, stop, cycles) = (rt.clone(), stop.clone(), cycles.clone());
        std::thread::spawn(move || {
            while stop.load(SeqCst) == 0 {
                rt.__start_compensation_worker();
                rt.__start_compensation_worker();
                std::thread::yield_now();
                rt.__retire_compensation_workers();
                rt.__start_compensation_worker();
                std::thread::yield_now();
                rt.__retire_compensation_workers();
                cycles.fetch_add(1, SeqCst);
            }
        })
    };
    // The work starts once the controller has gone round, so that the two overlap however
    // the OS schedules the threads.
    common::eventually("the controller has cycled once", || cycles.load(SeqCst) > 0);

    let ledger = Ledger::new(ROUNDS * TASKS);
    for round in 0..ROUNDS {
        let handles: Vec<_> = (0..TASKS)
            .map(|t| {
                let i = round * TASKS + t;
                let ledger = ledger.clone();
                match t % 3 {
                    0 => rt.submit(move || {
                        assert_eq!(fib(12), 144);
                        ledger.ran(i);
                    }),
                    1 => rt.spawn(async move {
                        let v: Vec<u64> = (0..1000).collect();
                        assert_eq!(v.par_iter().sum::<u64>(), 499_500);
                        magpie::task::yield_now().await;
                        ledger.ran(i);
                    }),
                    _ => rt.submit_balanced(move || {
                        let (a, b) = magpie::join(|| fib(8), || fib(9));
                        assert_eq!(a + b, 55);
                        ledger.ran(i);
                    }),
                }
            })
            .collect();
        // Fork-join from outside the pool, meanwhile.
        assert_eq!(rt.install(|| fib(15)), 610);
        for handle in handles {
            handle.join().unwrap();
        }
    }
    stop.store(1, SeqCst);
    controller.join().unwrap();
    ledger.assert_each_once();
    rt.wait_idle();
    let stats = rt.stats();
    assert_eq!(stats.tasks_executed(), (ROUNDS * TASKS) as u64);
    assert_eq!(stats.compensation_workers_active, 0);
    // Every cycle's three starts found a slot free.
    assert_eq!(
        stats.compensation_workers_started,
        3 * cycles.load(SeqCst) as u64
    );
}
