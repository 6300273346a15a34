//! Regression tests for defects found by review in the worker loop, the retire path, the
//! statistics and the context thread-local (issues 17 and 18). Each failed (aborted, hung or
//! asserted) before its fix.
//!
//! The ones that would abort or hang the whole test binary run in a child process of their
//! own (see `common::child_test`): the parent asserts that the child exited cleanly and
//! printed its marker, and kills it if it hangs.

mod common;

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{child_test, eventually, is_child, run_child, DEADLINE};
use magpie::Runtime;

/// Runs `body` in a child process (the test `name` of this binary, in child mode `name`)
/// and asserts it finished cleanly. In the child, runs `body` and prints the marker.
fn in_child(name: &str, body: impl FnOnce()) {
    if is_child(name) {
        body();
        println!("child {name}: ok");
        return;
    }
    if std::env::var(common::CHILD_ENV).is_ok() {
        // Another test's child: nothing to do here.
        return;
    }
    let out = run_child(child_test(name, name));
    assert!(
        out.status.success() && out.stdout.contains(&format!("child {name}: ok")),
        "the child for `{name}` failed: {out:?}"
    );
}

/// A runtime of `workers` active workers out of `max`. Its parked workers never wake on their
/// own, so a lost wakeup hangs (before issue 19 a one-second safety net would have rescued
/// it, and these runtimes raised it to an hour).
fn strict_runtime(workers: usize, max: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .max_workers(max)
        .build()
        .unwrap()
}

// ---- thread-local teardown (issue 17, item 5) ------------------------------------------

thread_local! {
    /// Its destructor uses the runtime after the context thread-local is gone.
    static LATE: Late = const { Late(RefCell::new(None)) };
}

/// Reports through its channel what the runtime's free functions did in a thread-local
/// destructor.
struct Late(RefCell<Option<mpsc::Sender<&'static str>>>);

impl Drop for Late {
    fn drop(&mut self) {
        let Some(report) = self.0.get_mut().take() else {
            return;
        };
        let spawned = magpie::spawn(async { 1 });
        assert_eq!(spawned.join().unwrap(), 1);
        report.send("spawn").unwrap();
        assert_eq!(magpie::submit(|| 2).join().unwrap(), 2);
        report.send("submit").unwrap();
        assert_eq!(magpie::spawn_blocking(|| 3).join().unwrap(), 3);
        report.send("spawn_blocking").unwrap();
        assert_eq!(magpie::block_on(async { 4 }), 4);
        report.send("block_on").unwrap();
        assert_eq!(magpie::join(|| 5, || 6), (5, 6));
        report.send("join").unwrap();
        magpie::block_on(magpie::time::sleep(Duration::from_millis(1)));
        report.send("sleep").unwrap();
    }
}

/// Before the fix, the context thread-local was read with `with`, which panics once it has
/// been destroyed, and a panic in a thread-local destructor aborts the process.
#[test]
fn the_runtime_works_from_a_thread_local_destructor() {
    in_child("the_runtime_works_from_a_thread_local_destructor", || {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let (report, reports) = mpsc::channel();
        // A joined `std::thread` (not a scoped one): `join` returns only after the thread's
        // thread-local destructors ran.
        std::thread::spawn(move || {
            // `LATE` registers its destructor first, so it runs after the context's
            // (thread-local destructors run in reverse order of registration).
            LATE.with(|late| *late.0.borrow_mut() = Some(report));
            // Touch the context thread-local: `block_on` enters the runtime.
            assert_eq!(rt.block_on(async { 7 }), 7);
        })
        .join()
        .unwrap();
        let done: Vec<_> = reports.try_iter().collect();
        assert_eq!(
            done,
            [
                "spawn",
                "submit",
                "spawn_blocking",
                "block_on",
                "join",
                "sleep"
            ]
        );
    });
}

// ---- switching workers off (issue 17 item 6, issue 18 items 1, 2, 4) --------------------

/// A job spawned by a scope job lands on the deque of the worker that ran the spawning job.
/// Before the fix, that worker retired without handing its deque on (a debug assertion
/// aborted; in release the job was stranded, since thieves skipped switched-off workers),
/// and the scope never completed.
#[test]
fn switching_off_a_worker_hands_its_scope_jobs_on() {
    in_child("switching_off_a_worker_hands_its_scope_jobs_on", || {
        let rt = Arc::new(strict_runtime(2, 2));
        for _ in 0..20 {
            rt.set_active_workers(2).unwrap();
            let rt2 = rt.clone();
            // The scope runs in a task on worker 0: its owner is worker 0.
            let owner = rt.submit_to(0, move || {
                let ran = AtomicUsize::new(0);
                let (stolen, on_thief) = mpsc::channel();
                // A `Receiver` is not `Sync`, and the scope's body must be `Send`.
                let on_thief = Mutex::new(on_thief);
                magpie::scope(|s| {
                    s.spawn(|s| {
                        // Stolen by worker 1 (worker 0 is busy in the scope body below).
                        let me = magpie::current_worker_index().unwrap();
                        s.spawn(|_| {
                            ran.fetch_add(1, SeqCst);
                        });
                        if me == 1 {
                            // Switch ourselves off with the new job still on our deque.
                            rt2.set_active_workers(1).unwrap();
                        }
                        ran.fetch_add(1, SeqCst);
                        stolen.send(me).unwrap();
                    });
                    // Keep worker 0 busy until worker 1 has the first job.
                    on_thief
                        .lock()
                        .unwrap()
                        .recv_timeout(DEADLINE)
                        .expect("the job was not stolen")
                });
                ran.load(SeqCst)
            });
            assert_eq!(owner.unwrap().join().unwrap(), 2);
        }
    });
}

/// Before the fix, a switched-off worker's queues could be taken by nobody until it
/// finished what it was running: idle active workers found the tasks in their pre-park
/// recheck, could not take them, and spun (issue 18, item 1). Here the switched-off worker
/// waits for the tasks queued behind it, so they must be stolen.
#[test]
fn tasks_queued_behind_a_switched_off_worker_are_stolen() {
    in_child(
        "tasks_queued_behind_a_switched_off_worker_are_stolen",
        || {
            // No stall monitor: past its threshold its hand-off would move the queued tasks
            // to the inject queue, and the test would pass with the steal path broken.
            let rt = Arc::new(
                Runtime::builder()
                    .worker_threads(2)
                    .max_workers(2)
                    .stall_threshold(None)
                    .build()
                    .unwrap(),
            );
            for round in 0..10 {
                rt.set_active_workers(2).unwrap();
                // Worker 0 is kept busy, so that worker 1 runs the closure below.
                let release = occupy_worker_0(&rt);
                let rt2 = rt.clone();
                let (queued, on_queued) = mpsc::channel();
                let long = rt.submit_to(1, move || {
                    let (done, finished) = mpsc::channel();
                    for i in 0..10 {
                        let done = done.clone();
                        // Spawned on worker 1: its LIFO slot and ring.
                        drop(magpie::spawn(async move { done.send(i).unwrap() }));
                    }
                    rt2.set_active_workers(1).unwrap();
                    queued.send(()).unwrap();
                    // Only worker 0 can run them now, while we wait here.
                    let mut got: Vec<_> = (0..10)
                        .map(|_| {
                            finished
                                .recv_timeout(DEADLINE)
                                .expect("a queued task never ran")
                        })
                        .collect();
                    got.sort_unstable();
                    (magpie::current_worker_index(), got)
                });
                on_queued.recv_timeout(DEADLINE).unwrap();
                release.send(()).unwrap();
                let (ran_on, got) = long.unwrap().join().unwrap();
                assert_eq!(ran_on, Some(1), "round {round}: worker 0 was occupied");
                assert_eq!(got, (0..10).collect::<Vec<_>>(), "round {round}");
            }
        },
    );
}

/// Occupies worker 0 of a two-worker runtime with a closure that waits until the returned
/// sender is used (or dropped). Whichever worker drains which mailbox, two closures that
/// block at the same time run on different workers: once both have started, the one on
/// worker 1 is released (its sender dropped) and the one on worker 0 is kept.
fn occupy_worker_0(rt: &Runtime) -> mpsc::Sender<()> {
    let (started, on_start) = mpsc::channel();
    for target in 0..2 {
        let started = started.clone();
        drop(
            rt.submit_to(target, move || {
                let (release, released) = mpsc::channel::<()>();
                started
                    .send((magpie::current_worker_index(), release))
                    .unwrap();
                let _ = released.recv();
            })
            .unwrap(),
        );
    }
    // Both are received before either is released: until then each holds its worker.
    let first = on_start.recv_timeout(DEADLINE).unwrap();
    let second = on_start.recv_timeout(DEADLINE).unwrap();
    match (first, second) {
        ((Some(0), release), (Some(1), _)) | ((Some(1), _), (Some(0), release)) => release,
        ((a, _), (b, _)) => panic!("two blocking closures ran on workers {a:?} and {b:?}"),
    }
}

/// Before the fix, the worker that drove the timers could retire without anyone taking
/// the role over: the active workers stayed parked with no timeout, and a timer fired only
/// when the park safety net ran out (then one second by default, an hour here: it hung;
/// today there is none). The test steers worker 1 into
/// the driver role, parks worker 0 without it, and then switches worker 1 off.
#[test]
fn timers_fire_after_the_driver_is_switched_off() {
    in_child("timers_fire_after_the_driver_is_switched_off", || {
        let mut tested = 0;
        for _ in 0..200 {
            if tested == 5 {
                break;
            }
            let rt = strict_runtime(2, 2);
            let parks = |w: usize| rt.stats().workers[w].parks;
            // 1. Worker 0 is busy, so worker 1 polls the sleeping task and parks as the
            //    driver (worker 0 gave the role up when it woke for the closure).
            let (release, released) = mpsc::channel::<()>();
            let (started, on_start) = mpsc::channel();
            let busy = rt
                .submit_to(0, move || {
                    started.send(magpie::current_worker_index()).unwrap();
                    released.recv().unwrap();
                })
                .unwrap();
            if on_start.recv().unwrap() != Some(0) {
                // Worker 1 took the closure out of worker 0's mailbox: try again.
                release.send(()).unwrap();
                busy.join().unwrap();
                continue;
            }
            let before = parks(1);
            let sleeper = rt.spawn(magpie::time::sleep(Duration::from_millis(30)));
            eventually("worker 1 polls the sleeper and parks", || {
                let w = &rt.stats().workers[1];
                w.tasks_polled >= 1 && w.parks > before
            });
            // 2. Worker 0 finishes and parks; the role is taken, so without a timeout.
            let before = parks(0);
            release.send(()).unwrap();
            busy.join().unwrap();
            eventually("worker 0 parks", || parks(0) > before);
            // 3. The driver is switched off.
            rt.set_active_workers(1).unwrap();
            sleeper.join().unwrap();
            // Timers filed afterwards fire too, and after growing again.
            rt.block_on(magpie::time::sleep(Duration::from_millis(1)));
            rt.set_active_workers(2).unwrap();
            rt.block_on(magpie::time::sleep(Duration::from_millis(1)));
            tested += 1;
        }
        assert!(tested > 0, "worker 0 never ran its own mailbox");
    });
}

/// Before the fix, a switched-off worker reported all its time as busy (utilization 1.0
/// with nothing run): it parked without the park bookkeeping. Retired time is idle time.
#[test]
fn switched_off_workers_report_idle_time() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_workers(4)
        .build()
        .unwrap();
    eventually("every switched-off worker reports idle time", || {
        rt.stats()
            .workers
            .iter()
            .skip(1)
            .all(|w| !w.active && w.idle_time_ns > 0)
    });
    // Growing and shrinking again keeps it so, and the active worker is counted as before.
    rt.set_active_workers(4).unwrap();
    rt.install(|| magpie::join(|| (), || ()));
    rt.set_active_workers(1).unwrap();
    let before = rt.stats();
    eventually("idle time grows while switched off", || {
        let now = rt.stats();
        now.workers
            .iter()
            .zip(&before.workers)
            .skip(1)
            .all(|(now, then)| now.idle_time_ns > then.idle_time_ns)
    });
}

// ---- statistics (issue 18, items 3 and 5) ----------------------------------------------

/// Every counter of every snapshot is at least what it was in the snapshot before, while
/// workers park and wake all the time. Before the fix, an unpark published its length in
/// two steps, and a snapshot between them lost the whole park (idle time went to 0, busy
/// time jumped forward and back).
#[test]
fn snapshots_never_go_backwards() {
    let rt = Arc::new(Runtime::builder().worker_threads(2).build().unwrap());
    let stop = Arc::new(AtomicUsize::new(0));
    // Wakes the pool from outside over and over, so that workers park and unpark.
    let waker = {
        let rt = rt.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while stop.load(SeqCst) == 0 {
                rt.spawn(async {}).join().unwrap();
            }
        })
    };
    let mut last = rt.stats();
    let unparks = |stats: &magpie::Stats| stats.workers.iter().map(|w| w.unparks).sum::<u64>();
    let first = unparks(&last);
    // At least 20,000 snapshots, and until the workers have woken 500 times (each wake is a
    // chance to catch an unpark half published) or a million snapshots were taken.
    for snapshot in 0u64.. {
        let woken = unparks(&last) - first;
        if snapshot >= 1_000_000 || (snapshot >= 20_000 && woken >= 500) {
            break;
        }
        let now = rt.stats();
        common::assert_monotonic(&last, &now);
        last = now;
    }
    stop.store(1, SeqCst);
    waker.join().unwrap();
}

/// Right after `wait_idle`, no worker shows more tasks executed than polled. Before the fix
/// polls were published later than completions (4 in 200 snapshots were behind).
#[test]
fn polls_are_published_before_completions() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    for round in 0..200 {
        for _ in 0..500 {
            drop(rt.spawn(async {}));
        }
        rt.wait_idle();
        let stats = rt.stats();
        let polled: u64 = stats.workers.iter().map(|w| w.tasks_polled).sum();
        let executed: u64 = stats.workers.iter().map(|w| w.tasks_executed).sum();
        assert!(
            polled >= executed,
            "round {round}: {polled} polled, {executed} executed"
        );
        for w in &stats.workers {
            assert!(w.tasks_polled >= w.tasks_executed, "round {round}: {w:?}");
        }
    }
}

// ---- shutdown (issue 17, item 7b) --------------------------------------------------------

/// Before the fix, dropping the last handle of a runtime inside one of its own blocking
/// closures waited for every blocking closure to finish, this one included: it hung.
#[test]
fn a_runtime_dropped_in_its_own_blocking_closure_detaches() {
    in_child(
        "a_runtime_dropped_in_its_own_blocking_closure_detaches",
        || {
            let rt = Runtime::builder().worker_threads(2).build().unwrap();
            let (give, take) = mpsc::channel::<Runtime>();
            let (done, dropped) = mpsc::channel();
            let handle = rt.spawn_blocking(move || {
                let rt = take.recv().unwrap();
                assert_eq!(rt.block_on(async { 1 }), 1);
                drop(rt);
                done.send(()).unwrap();
                "finished"
            });
            give.send(rt).unwrap();
            dropped
                .recv_timeout(DEADLINE)
                .expect("the drop never returned");
            // The closure's output still reaches its handle.
            assert_eq!(handle.join().unwrap(), "finished");
        },
    );
}

/// A task polled for the first time while its runtime shuts down files its timer nowhere.
/// Before the fix, the timer moved to the global runtime (its own was closing), which started
/// that runtime's threads for a task that was cancelled already: a process that never used the
/// global runtime had its threads left over (`shutdown_stress::create_run_drop_cycles` saw
/// them, once in a CI run).
#[test]
fn a_cancelled_task_files_no_timer_with_the_global_runtime() {
    in_child(
        "a_cancelled_task_files_no_timer_with_the_global_runtime",
        || {
            let before = common::thread_count();
            for _ in 0..2_000 {
                let rt = Runtime::builder().worker_threads(1).build().unwrap();
                // Dropped at once: the first poll of each races the shutdown.
                for _ in 0..4 {
                    drop(rt.spawn(magpie::time::sleep(Duration::from_secs(3600))));
                }
                drop(rt);
            }
            common::assert_thread_count_returns_to(before, "after 2,000 runtimes");
        },
    );
}
