//! Adversarial tests of the fixes of review round 2 (`git log 1628776..`): D5 (the driver
//! role when nobody free can take it), `execute_outside_task`, `spawn_blocking` when no
//! thread can start, `Runtime::shutdown` from unusual threads, and the smaller ones.
//!
//! No sleeps as synchronisation and no timing thresholds: counts, channels with the hang
//! guard [`DEADLINE`], and thread states read from `/proc`.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use common::limits::{all_threads_again, become_unprivileged, no_more_threads};
use common::{named_runtime, panic_message, runtime, wait_until_asleep, DEADLINE};
use magpie::task::block_in_place;
use magpie::time::{sleep, sleep_until};
use magpie::Runtime;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Binds a listener on `rt` (from `rt.block_on`, on the calling thread), polls one accept
/// so that it waits for readiness, connects a std client, and awaits the accept. Sends
/// whether it completed on `done`.
fn accept_one_connection(rt: &Runtime, done: mpsc::Sender<bool>) {
    let accepted = rt.block_on(async {
        let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accept = pin!(listener.accept());
        // First poll: nothing to accept yet, so the future waits on the driver.
        let first = std::future::poll_fn(|cx| Poll::Ready(accept.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "accepted before anybody connected");
        let _client = std::net::TcpStream::connect(addr).unwrap();
        accept.await.is_ok()
    });
    let _ = done.send(accepted);
}

// ---------------------------------------------------------------------------------------------
// D5: sources registered while nobody free can take the role
// ---------------------------------------------------------------------------------------------

/// The I/O twin of `time_adversarial::a_timer_filed_while_the_only_worker_blocks_in_block_on_fires`.
/// The only worker is in `block_on` inside `block_in_place`, waiting on a channel: no timer
/// and no source then, so it parks with no timeout. An outside thread then registers a
/// listener with the runtime and waits for a connection. The docs promise that a `block_on`
/// inside `block_in_place` "drives its runtime's timers and sockets itself while it waits",
/// and D5 that such threads sleep "at most 1 ms while sources are registered"; but the
/// registration hook only calls `hand_off_driver` (free parked workers), never
/// `wake_to_drive`, so the blocked thread sleeps on and the readiness is never taken.
#[cfg(target_os = "linux")]
#[test]
fn a_source_registered_while_the_only_worker_blocks_in_block_on_gets_its_readiness() {
    let rt = Arc::new(named_runtime(1, "rfa-io1"));
    let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
    let (blocked_done_tx, blocked_done_rx) = mpsc::channel();
    drop(rt.spawn(async move {
        let _ = block_in_place(|| magpie::block_on(release_rx));
        blocked_done_tx.send(()).unwrap();
    }));
    wait_until_asleep("rfa-io1", 1);
    let (done_tx, done_rx) = mpsc::channel();
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || accept_one_connection(&rt, done_tx))
    };
    let outcome = done_rx.recv_timeout(DEADLINE);
    // Unblock the worker either way: back in its idle loop it takes the role.
    let _ = release_tx.send(());
    blocked_done_rx.recv_timeout(DEADLINE).unwrap();
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a connection to a listener registered while the only worker waited in block_on \
         inside block_in_place was never accepted"
    );
}

/// The I/O twin of `time_adversarial::a_timer_fires_while_the_only_free_worker_waits_in_a_scope`:
/// one worker waits in a `scope` for a spawn the other took, which blocks in
/// `block_in_place` on a channel. An outside thread registers a listener and waits for a
/// connection. The scope's worker parked with no timeout (nothing to drive then) and the
/// registration wakes only free workers (`hand_off_driver`): the readiness is never taken.
#[cfg(target_os = "linux")]
#[test]
fn a_source_registered_while_the_only_free_worker_waits_in_a_scope_gets_its_readiness() {
    let rt = Arc::new(named_runtime(2, "rfa-io2"));
    let (tx, rx) = mpsc::channel::<bool>();
    let taken = Arc::new(AtomicBool::new(false));
    let (scope_done_tx, scope_done_rx) = mpsc::channel();
    let installer = {
        let rt = rt.clone();
        let taken = taken.clone();
        std::thread::spawn(move || {
            rt.install(move || {
                let taken = &taken;
                magpie::scope(|s| {
                    s.spawn(move |_| {
                        taken.store(true, SeqCst);
                        let _ = block_in_place(|| rx.recv_timeout(DEADLINE * 3));
                    });
                    while !taken.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                });
            });
            let _ = scope_done_tx.send(());
        })
    };
    wait_until_asleep("rfa-io2", 2);
    let (done_tx, done_rx) = mpsc::channel();
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || accept_one_connection(&rt, done_tx))
    };
    let outcome = done_rx.recv_timeout(DEADLINE);
    let _ = tx.send(false);
    scope_done_rx
        .recv_timeout(DEADLINE * 4)
        .expect("the scope never ended");
    installer.join().unwrap();
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a connection to a listener registered while the only free worker waited in a scope \
         was never accepted"
    );
}

/// Holds one worker of `rt` inside `join`: a task of `rt` waits in an `install` on another
/// runtime (a `join`-style wait: the worker runs only jobs, and parks) until the returned
/// sender sends or is dropped; a test that panics drops it, which ends the wait. Returns
/// that worker's index, the sender, and the task, which answers whether it was released.
fn hold_a_worker_in_join(rt: &Runtime) -> (usize, mpsc::Sender<()>, magpie::JoinHandle<bool>) {
    let other = runtime(1);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (index_tx, index_rx) = mpsc::channel();
    let waiter = rt.spawn(async move {
        index_tx
            .send(magpie::current_worker_index().unwrap())
            .unwrap();
        other.install(move || release_rx.recv().is_ok())
    });
    let held = index_rx.recv_timeout(DEADLINE).unwrap();
    (held, release_tx, waiter)
}

// ---------------------------------------------------------------------------------------------
// D5: a parked join-waiter woken again and again
// ---------------------------------------------------------------------------------------------

/// Worker A waits inside `join` (a task's cross-runtime `install` whose job blocks on the
/// other runtime). Worker B is free and holds the driver role in its parks (a timer an hour
/// away is filed). 100 closures are then submitted one at a time, each after B parked
/// again: B leaves the role to run each, and `found_work` calls
/// `hand_off_driver_to_anyone`, which (no free worker being parked) wakes A with
/// `wake_any_cold`. A can do nothing with that wake: it parks again at once (B is back in
/// the driver soon, and no deadline is near). Before D5 A slept through all of it; it should
/// wake about once per deadline (none is due here), not once per closure.
///
/// Both barrier modes. In the asymmetric mode the last searcher's R3 wake
/// (`Sleep::last_searcher_found_work`) also woke A once per closure, until 2026-11-29: it
/// woke the lowest parked worker without looking for work, and A was the only one parked
/// whenever B found the closure while searching. It now wakes a worker inside `join` only
/// for a job it sees (sleep/README.md, R3).
#[cfg(target_os = "linux")]
#[test]
fn a_join_waiter_is_not_woken_for_every_task_the_driver_runs() {
    join_waiter_sleeps_while_the_driver_runs_closures(magpie::BarrierMode::Symmetric, "rfa-jws");
}

/// [`a_join_waiter_is_not_woken_for_every_task_the_driver_runs`] in the asymmetric mode,
/// where the last searcher's wake was the second cause.
#[cfg(target_os = "linux")]
#[test]
fn a_join_waiter_is_not_woken_for_every_task_the_driver_runs_asymmetric() {
    join_waiter_sleeps_while_the_driver_runs_closures(magpie::BarrierMode::Asymmetric, "rfa-jwa");
}

#[cfg(target_os = "linux")]
fn join_waiter_sleeps_while_the_driver_runs_closures(mode: magpie::BarrierMode, name: &str) {
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .thread_name(name)
            .barrier(mode)
            .build()
            .unwrap(),
    );
    // A far timer: something needs driving, so the role matters.
    let far = rt.spawn(sleep(Duration::from_secs(3600)));
    let (a, release_tx, waiter) = hold_a_worker_in_join(&rt);
    let b = 1 - a;
    wait_until_asleep(name, 2);
    let before = rt.stats();
    const N: u64 = 100;
    for _ in 0..N {
        let parks = rt.stats().workers[b].parks;
        rt.submit(|| ()).join().unwrap();
        // B parks again (in the driver) before the next one arrives.
        common::eventually("worker B parks again", || {
            rt.stats().workers[b].parks > parks
        });
    }
    let after = rt.stats();
    release_tx.send(()).unwrap();
    assert!(rt.block_on(waiter).unwrap());
    far.abort();
    let a_unparks = after.workers[a].unparks - before.workers[a].unparks;
    let b_unparks = after.workers[b].unparks - before.workers[b].unparks;
    assert!(
        a_unparks <= N / 10,
        "the worker waiting in join woke {a_unparks} times while the free worker ran {N} \
         closures ({b_unparks} wakes of its own), with no deadline due: woken by every \
         driver hand-off or last-searcher wake ({mode:?})"
    );
}

/// D5's last window (noticed 2026-11-26, closed 2026-11-29). Worker A waits inside `join`
/// (a task's cross-runtime `install`), parked with no timeout: no timer exists yet. Worker B
/// is free and parked, holding the driver role or not (with nothing to drive, the role may
/// have been left free when A woke for the task). A thread outside the pool then files a
/// timer: it lowers the earliest deadline, so B alone was woken, to see it or to take the
/// role (`Rearm::Driver` or `Rearm::Anyone`). B parks again for that deadline, holding the
/// role. Then a closure arrives: B leaves the role to run it (D4's hand-off finds no free
/// worker parked), and the closure spins until the timer has fired. Nobody else could fire
/// it: A slept on with no timeout, and B turns the drivers only between polls, so the
/// closure spun out its guard. Now the filing also wakes A, which parks again for the new
/// deadline and fires the timer then. (The `Rearm::Anyone` case was first missed: CI's
/// symmetric-mode pass caught it, in about one run in three.)
///
/// The closure must start before the deadline, or B fires the timer itself from its park and
/// the round says nothing: such a round is run again, with a fresh runtime.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_filed_while_the_holder_drives_fires_when_it_leaves_for_a_long_poll() {
    for round in 0..20 {
        if let Some(fired_in_the_poll) = timer_behind_a_long_poll() {
            assert!(
                fired_in_the_poll,
                "the timer filed while worker B held the role never fired while B ran one \
                 long closure: worker A, parked inside `join`, slept on with no timeout"
            );
            return;
        }
        eprintln!("round {round}: the timer fired before the closure started; again");
    }
    panic!("in 20 rounds the closure never started before the timer's deadline");
}

/// One round of the test above: `None` if the timer fired before the closure started,
/// else whether it fired while the closure ran.
#[cfg(target_os = "linux")]
fn timer_behind_a_long_poll() -> Option<bool> {
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .thread_name("rfa-tl")
            // The monitor's hand-off of B's queue would wake A on its own.
            .stall_threshold(None)
            .build()
            .unwrap(),
    );
    let (a, release_tx, waiter) = hold_a_worker_in_join(&rt);
    let b = 1 - a;
    wait_until_asleep("rfa-tl", 2);
    let b_parks = rt.stats().workers[b].parks;
    // The timer, filed from outside the pool, which does not drive it.
    let fired = Arc::new(AtomicBool::new(false));
    let (filed_tx, filed_rx) = mpsc::channel();
    let outside = {
        let (rt, fired) = (rt.clone(), fired.clone());
        std::thread::spawn(move || {
            rt.block_on(async {
                let mut timer = pin!(sleep(Duration::from_millis(300)));
                let mut first = true;
                std::future::poll_fn(|cx| {
                    let polled = timer.as_mut().poll(cx);
                    if std::mem::take(&mut first) {
                        filed_tx.send(()).unwrap();
                    }
                    polled
                })
                .await;
            });
            fired.store(true, SeqCst);
        })
    };
    filed_rx.recv_timeout(DEADLINE).unwrap();
    // B was woken for the new deadline and parks again, holding the role.
    common::eventually("worker B parks again", || {
        rt.stats().workers[b].parks > b_parks
    });
    wait_until_asleep("rfa-tl", 2);
    let fired_in_the_poll = {
        let fired = fired.clone();
        rt.submit(move || {
            if fired.load(SeqCst) {
                return None;
            }
            let guard = Instant::now() + DEADLINE;
            while !fired.load(SeqCst) && Instant::now() < guard {
                std::hint::spin_loop();
            }
            Some(fired.load(SeqCst))
        })
    };
    let fired_in_the_poll = fired_in_the_poll.join().unwrap();
    outside.join().unwrap();
    release_tx.send(()).unwrap();
    assert!(rt.block_on(waiter).unwrap());
    fired_in_the_poll
}

// ---------------------------------------------------------------------------------------------
// execute_outside_task
// ---------------------------------------------------------------------------------------------

/// What the jobs of `a_scope_spawn_left_on_the_waiting_workers_deque_runs_outside_the_task`
/// saw.
#[derive(Debug, Default)]
struct Seen {
    job: Option<(Option<magpie::task::Id>, Option<usize>)>,
    child: Option<(Option<magpie::task::Id>, Option<usize>)>,
}

/// A task T on worker A waits in a cross-runtime `install` (a `join`-style wait). A steals
/// J, a `scope` spawn queued by the scope body on worker B: J runs outside T (the word is
/// cleared: `execute_outside_task`). J spawns a child into its scope and returns; the child
/// lands on A's own deque (`Scope::queue` pushes to the current worker). A's wait loop then
/// pops it from its own deque, on the assumption that "what it holds belongs to the frames
/// that wait here", and runs it with T's id restored: `task::try_id` in the child names T,
/// which it is no part of (as would the stall monitor).
#[test]
fn a_scope_spawn_left_on_the_waiting_workers_deque_runs_outside_the_task() {
    let rt = Arc::new(runtime(2));
    let other = Arc::new(runtime(1));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let body_worker = Arc::new(Mutex::new(None));
    let go = Arc::new(AtomicBool::new(false));
    let child_done = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = mpsc::channel();
    let installer = {
        let rt = rt.clone();
        let seen = seen.clone();
        let body_worker = body_worker.clone();
        let go = go.clone();
        let child_done = child_done.clone();
        std::thread::spawn(move || {
            rt.install(|| {
                magpie::scope(|s| {
                    *body_worker.lock().unwrap() = magpie::current_worker_index();
                    started_tx.send(()).unwrap();
                    let deadline = Instant::now() + DEADLINE;
                    while !go.load(SeqCst) && Instant::now() < deadline {
                        std::hint::spin_loop();
                    }
                    let seen = &seen;
                    let child_done = &child_done;
                    s.spawn(move |s| {
                        seen.lock().unwrap().job =
                            Some((magpie::task::try_id(), magpie::current_worker_index()));
                        s.spawn(move |_| {
                            seen.lock().unwrap().child =
                                Some((magpie::task::try_id(), magpie::current_worker_index()));
                            child_done.store(true, SeqCst);
                        });
                    });
                    // Keep this worker busy (it takes neither J nor the child) until the
                    // child ran elsewhere; the hang guard lets the scope finish them here.
                    while !child_done.load(SeqCst) && Instant::now() < deadline {
                        std::hint::spin_loop();
                    }
                });
            });
        })
    };
    started_rx.recv_timeout(DEADLINE).unwrap();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (id_tx, id_rx) = mpsc::channel();
    let task = {
        let other = other.clone();
        rt.spawn(async move {
            id_tx
                .send((magpie::task::id(), magpie::current_worker_index()))
                .unwrap();
            other.install(move || release_rx.recv_timeout(DEADLINE).is_ok())
        })
    };
    let (task_id, task_worker) = id_rx.recv_timeout(DEADLINE).unwrap();
    go.store(true, SeqCst);
    common::eventually("the child ran", || child_done.load(SeqCst));
    release_tx.send(()).unwrap();
    assert!(rt.block_on(task).unwrap());
    installer.join().unwrap();
    let seen = seen.lock().unwrap();
    let body_worker = *body_worker.lock().unwrap();
    assert_ne!(
        body_worker, task_worker,
        "the scope body and the task shared a worker"
    );
    let (job_id, job_worker) = seen.job.expect("J never ran");
    let (child_id, child_worker) = seen.child.expect("the child never ran");
    // Precondition: both ran on the waiting task's worker (the body's worker spun).
    assert_eq!(job_worker, task_worker, "J ran elsewhere: {seen:?}");
    assert_eq!(
        child_worker, task_worker,
        "the child ran elsewhere: {seen:?}"
    );
    assert_eq!(
        job_id, None,
        "J, stolen while {task_id:?} waited, ran inside it"
    );
    assert_eq!(
        child_id, None,
        "a scope spawn of a stolen job ran inside the task {task_id:?} that waited on its \
         worker (J saw {job_id:?})"
    );
}

// ---------------------------------------------------------------------------------------------
// D5: the holder of the role switched off
// ---------------------------------------------------------------------------------------------

/// Worker 0 waits inside `join` (a closure's cross-runtime `install`), so it parked with no
/// timeout: worker 1, free, held the driver role, with an outside `block_on`'s sleep filed.
/// Worker 1 is then switched off (`set_active_workers(1)`). It leaves the driver park,
/// releases the role, and `retire` hands it off with `hand_off_driver`, which wakes only free
/// parked workers: not worker 0, the only active worker left, which D5 says turns the
/// drivers "while nobody holds the role". The sleep never fires.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_fires_after_its_driver_is_switched_off_while_the_other_waits_in_join() {
    let rt = Arc::new(named_runtime(2, "rfa-so"));
    let other = Arc::new(runtime(1));
    // The waiter must run on worker 0 (only worker 1 can be switched off). It is submitted
    // while worker 1 is off, so that nobody can take it from worker 0's mailbox, as a thief
    // may: retrying until it landed there failed 50 times in a row, in about one run in six
    // of the whole file (not when this test ran alone). Worker 1 is back on, free, before
    // the sleep is filed.
    rt.set_active_workers(1).unwrap();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (index_tx, index_rx) = mpsc::channel();
    let waiter = {
        let other = other.clone();
        rt.submit_to(0, move || {
            index_tx.send(magpie::current_worker_index()).unwrap();
            other.install(move || release_rx.recv_timeout(DEADLINE).is_ok())
        })
        .unwrap()
    };
    assert_eq!(index_rx.recv_timeout(DEADLINE).unwrap(), Some(0));
    rt.set_active_workers(2).unwrap();
    wait_until_asleep("rfa-so", 2);
    let (slept_tx, slept_rx) = mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(500);
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            rt.block_on(sleep_until(deadline));
            let _ = slept_tx.send(Instant::now() >= deadline);
        })
    };
    // The timer is filed (worker 1 re-parks in the driver with its deadline)...
    common::eventually("the sleep is filed", || rt.stats().timers_pending == 1);
    wait_until_asleep("rfa-so", 2);
    // ...and its driver is switched off. (Should the deadline pass before, worker 1 fires
    // it and the test passes without showing anything.)
    rt.set_active_workers(1).unwrap();
    let outcome = slept_rx.recv_timeout(DEADLINE);
    // Either way: switch worker 1 back on (it takes the role again) and release worker 0.
    rt.set_active_workers(2).unwrap();
    release_tx.send(()).unwrap();
    assert!(waiter.join().unwrap());
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a sleep never fired after its driver was switched off, while the only active \
         worker waited in join"
    );
}

// ---------------------------------------------------------------------------------------------
// execute_outside_task: block_in_place, spawn and nested joins inside a stolen job
// ---------------------------------------------------------------------------------------------

/// A task T waits in a cross-runtime `install` on one worker; a job it never saw (an
/// `install` from an outside thread, injected) runs there meanwhile, outside T. Inside that
/// job: `try_id` is `None`, a `block_in_place` and a nested `join` keep it `None`, and
/// `magpie::spawn` from it lands on this runtime and runs. After the wait, T's id is back.
#[test]
fn a_job_run_during_a_tasks_join_wait_stays_outside_the_task_through_block_in_place() {
    let rt = Arc::new(runtime(2));
    let other = Arc::new(runtime(1));
    // Worker B is kept busy by a spinning task, so the injected job can only go to A.
    let spin = Arc::new(AtomicBool::new(true));
    let (spinning_tx, spinning_rx) = mpsc::channel();
    let spinner = {
        let spin = spin.clone();
        rt.spawn(async move {
            spinning_tx
                .send(magpie::current_worker_index().unwrap())
                .unwrap();
            let deadline = Instant::now() + DEADLINE;
            while spin.load(SeqCst) && Instant::now() < deadline {
                std::hint::spin_loop();
            }
        })
    };
    let spinner_worker = spinning_rx.recv_timeout(DEADLINE).unwrap();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (id_tx, id_rx) = mpsc::channel();
    let task = {
        let other = other.clone();
        rt.spawn(async move {
            let id = magpie::task::id();
            id_tx.send(magpie::current_worker_index().unwrap()).unwrap();
            let released = other.install(move || release_rx.recv_timeout(DEADLINE).is_ok());
            (id, magpie::task::try_id(), released)
        })
    };
    let task_worker = id_rx.recv_timeout(DEADLINE).unwrap();
    assert_ne!(task_worker, spinner_worker);
    let seen = rt.install(|| {
        let worker = magpie::current_worker_index();
        let outer = magpie::task::try_id();
        let in_place = block_in_place(|| {
            let (a, b) = magpie::join(magpie::task::try_id, magpie::task::try_id);
            (magpie::task::try_id(), a, b)
        });
        let after = magpie::task::try_id();
        let spawned = magpie::spawn(async { 5 });
        (worker, outer, in_place, after, spawned)
    });
    let (worker, outer, in_place, after, spawned) = seen;
    release_tx.send(()).unwrap();
    spin.store(false, SeqCst);
    let (id, back, released) = rt.block_on(task).unwrap();
    rt.block_on(spinner).unwrap();
    assert!(released);
    assert_eq!(worker, Some(task_worker), "the job ran elsewhere");
    assert_eq!(outer, None, "the injected job ran inside {id:?}");
    assert_eq!(in_place, (None, None, None), "inside block_in_place");
    assert_eq!(after, None, "after block_in_place");
    assert_eq!(
        back,
        Some(id),
        "the task's id was not restored after its wait"
    );
    assert_eq!(rt.block_on(spawned).unwrap(), 5);
}

// ---------------------------------------------------------------------------------------------
// Statistics: tasks_polled never below tasks_executed
// ---------------------------------------------------------------------------------------------

/// `WorkerStats::tasks_polled` is documented "never below `tasks_executed` in one snapshot"
/// (the round-2 fix reorders the loads for it). Tasks cancelled by an unhandled panic under
/// `UnhandledPanic::ShutdownRuntime` while queued and never polled must not break it (they
/// are cancelled on a worker: `Registry::shutdown_tasks`).
///
/// Observed from an `on_task_terminate` hook, which runs right after `release` counted the
/// task finished (the cancelled tasks' own queue entries, run later as no-ops, bring the
/// poll count back up, so a snapshot from outside only catches this by chance).
#[test]
fn tasks_polled_is_never_below_tasks_executed_after_a_shutdown_by_panic() {
    let cell: Arc<std::sync::OnceLock<std::sync::Weak<Runtime>>> = Arc::default();
    let worst: Arc<Mutex<Option<(u64, u64)>>> = Arc::default();
    let rt = Arc::new({
        let (cell, worst) = (cell.clone(), worst.clone());
        Runtime::builder()
            .worker_threads(1)
            .unhandled_panic(magpie::UnhandledPanic::ShutdownRuntime)
            .on_task_terminate(move |_| {
                let Some(rt) = cell.get().and_then(std::sync::Weak::upgrade) else {
                    return;
                };
                let stats = rt.stats();
                let w = &stats.workers[0];
                if w.tasks_executed > w.tasks_polled {
                    let mut worst = worst.lock().unwrap();
                    if worst.map_or(true, |(e, p)| e - p < w.tasks_executed - w.tasks_polled) {
                        *worst = Some((w.tasks_executed, w.tasks_polled));
                    }
                }
            })
            .build()
            .unwrap()
    });
    cell.set(Arc::downgrade(&rt)).unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    drop(rt.spawn(async move {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(DEADLINE);
        panic!("unhandled");
    }));
    started_rx.recv_timeout(DEADLINE).unwrap();
    // Queued behind the blocked worker, never polled.
    let queued: Vec<_> = (0..100)
        .map(|_| rt.spawn(std::future::pending::<()>()))
        .collect();
    release_tx.send(()).unwrap();
    for handle in queued {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
    let worst = *worst.lock().unwrap();
    assert_eq!(
        worst, None,
        "worker 0: a snapshot showed (tasks_executed, tasks_polled) = {worst:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Timeout and the budget
// ---------------------------------------------------------------------------------------------

/// Spends one budget unit per iteration, for ever (each `sleep(ZERO)` is ready at once).
async fn spend_the_budget_for_ever() {
    loop {
        sleep(Duration::ZERO).await;
    }
}

/// The round-2 `Timeout` fix polls the deadline unconstrained only when its *inner* future
/// spent the budget. A sibling polled first in the same task (here `select`, which polls
/// its first future first, as `futures::join!` and hand-written combinators do) that spends
/// the whole budget leaves the `Timeout` a zero budget at every poll: `had_budget` is false,
/// the deadline's check is refused each time, and the timeout never elapses.
#[test]
fn a_timeout_elapses_when_a_sibling_spent_the_budget_before_it() {
    let rt = runtime(1);
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        let limited =
            magpie::time::timeout(Duration::from_millis(10), std::future::pending::<()>());
        let spender = pin!(spend_the_budget_for_ever());
        let limited = pin!(limited);
        let raced = futures::future::select(spender, limited).await;
        let elapsed = match raced {
            futures::future::Either::Right((result, _)) => result.is_err(),
            futures::future::Either::Left(_) => false,
        };
        let _ = tx.send(elapsed);
    }));
    let outcome = rx.recv_timeout(DEADLINE);
    // On a hang the task spins for ever: leak the runtime rather than wait for it.
    if outcome.is_err() {
        std::mem::forget(rt);
    }
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a 10 ms timeout never elapsed next to a sibling that spends the budget first"
    );
}

// ---------------------------------------------------------------------------------------------
// Children: thread limits and thread counts
// ---------------------------------------------------------------------------------------------

const CHILD_OK: &str = "review_fixes child: ok";

fn in_child(name: &str) {
    let out = common::run_child(common::child_test(name, name));
    assert!(
        out.status.success() && out.stdout.contains(CHILD_OK),
        "child {name} failed: status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

/// With one blocking thread busy and no new thread possible, spawns from four threads at
/// once all queue behind it (none panics: "with a thread running, `f` waits for it"), and
/// all run once it is free. Then, with the pool empty (zero keep-alive), a refused spawn
/// panics, drops its closure once, and the task hooks see as many ends as spawns.
#[cfg(target_os = "linux")]
#[test]
fn spawn_blocking_storm_behind_one_busy_thread_while_no_thread_can_start() {
    in_child("child_spawn_blocking_storm");
}

#[cfg(target_os = "linux")]
#[test]
fn child_spawn_blocking_storm() {
    if !common::is_child("child_spawn_blocking_storm") {
        return;
    }
    assert!(become_unprivileged(47101), "could not drop root");
    let spawned = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let rt = Arc::new({
        let (spawned, ended) = (spawned.clone(), ended.clone());
        Runtime::builder()
            .worker_threads(1)
            .blocking_keep_alive(Duration::ZERO)
            .on_task_spawn(move |_| {
                spawned.fetch_add(1, SeqCst);
            })
            .on_task_terminate(move |_| {
                ended.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap()
    });
    let baseline = common::thread_count();
    let (busy_tx, busy_rx) = mpsc::channel::<()>();
    let (running_tx, running_rx) = mpsc::channel();
    let busy = rt.spawn_blocking(move || {
        running_tx.send(()).unwrap();
        busy_rx.recv_timeout(DEADLINE).is_ok()
    });
    running_rx.recv_timeout(DEADLINE).unwrap();
    let gate = Arc::new(std::sync::Barrier::new(5));
    let ran = Arc::new(AtomicUsize::new(0));
    let spawners: Vec<_> = (0..4)
        .map(|_| {
            let (rt, gate, ran) = (rt.clone(), gate.clone(), ran.clone());
            std::thread::spawn(move || {
                gate.wait();
                let mut handles = Vec::new();
                let mut refused = 0;
                for _ in 0..25 {
                    let ran = ran.clone();
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        rt.spawn_blocking(move || {
                            ran.fetch_add(1, SeqCst);
                        })
                    })) {
                        Ok(handle) => handles.push(handle),
                        Err(_) => refused += 1,
                    }
                }
                (handles, refused)
            })
        })
        .collect();
    no_more_threads();
    gate.wait();
    let mut handles = Vec::new();
    let mut refused = 0;
    for spawner in spawners {
        let (h, r) = spawner.join().unwrap();
        handles.extend(h);
        refused += r;
    }
    assert_eq!(
        refused, 0,
        "spawns refused while a blocking thread was running"
    );
    busy_tx.send(()).unwrap();
    assert!(busy.join().unwrap());
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(ran.load(SeqCst), 100);
    // The pool's thread exits (zero keep-alive); then a spawn is refused.
    common::eventually("the blocking thread exits", || {
        rt.stats().blocking_threads == 0
    });
    // The spawners and the pool's thread exited (the kernel may count them a moment
    // longer): take their room away again.
    common::assert_thread_count_returns_to(baseline, "spawners and pool thread");
    no_more_threads();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let token = CountDrop(dropped.clone());
    let message = panic_message(|| {
        drop(rt.spawn_blocking(move || {
            let _token = token;
        }))
    });
    assert!(message.contains("cannot start a thread"), "{message}");
    assert_eq!(
        dropped.load(SeqCst),
        1,
        "the refused closure was not dropped once"
    );
    common::eventually("every spawned blocking task ended", || {
        ended.load(SeqCst) == spawned.load(SeqCst)
    });
    all_threads_again();
    assert_eq!(rt.block_on(rt.spawn_blocking(|| 3)).unwrap(), 3);
    println!("{CHILD_OK}");
}

/// A runtime (with its stall monitor) dropped on another runtime's worker, in a job that
/// runs while a task of that runtime waits in `join`, and another dropped in a blocking
/// closure of a third: every thread of both exits on its own (nothing left joined nor
/// running).
#[cfg(target_os = "linux")]
#[test]
fn runtimes_dropped_on_odd_threads_leave_no_thread_behind() {
    in_child("child_runtimes_dropped_on_odd_threads");
}

#[cfg(target_os = "linux")]
#[test]
fn child_runtimes_dropped_on_odd_threads() {
    if !common::is_child("child_runtimes_dropped_on_odd_threads") {
        return;
    }
    let before = common::thread_count();
    {
        let host = runtime(2);
        let third = Arc::new(runtime(1));
        for _ in 0..20 {
            let dropped = Runtime::builder()
                .worker_threads(2)
                .stall_threshold(Duration::from_millis(50))
                .build()
                .unwrap();
            let busy = dropped.spawn(async { 1 });
            assert_eq!(dropped.block_on(busy).unwrap(), 1);
            // Dropped in a `join` half on `host` (a worker, outside block_in_place).
            let slot = Mutex::new(Some(dropped));
            host.install(|| {
                magpie::join(
                    || drop(slot.lock().unwrap().take()),
                    || {
                        let third = third.clone();
                        third.install(|| ())
                    },
                )
            });
            // Dropped in a blocking closure of `host`.
            let dropped = runtime(2);
            host.block_on(host.spawn_blocking(move || drop(dropped)))
                .unwrap();
        }
    }
    common::assert_thread_count_returns_to(before, "runtimes dropped on odd threads");
    println!("{CHILD_OK}");
}
