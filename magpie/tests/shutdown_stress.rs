//! Shutdown under load, beyond `shutdown.rs`: tasks pending in every queue a runtime has
//! (LIFO slots, rings, the inject queue, the timer wheel, idle futures) at once; many
//! create-run-drop cycles with exact drop counts and no thread left behind; destructors that
//! wake, abort and spawn while the shutdown runs; spawns racing the shutdown, each task
//! either run or cancelled; `shutdown_timeout(Duration::ZERO)` beside a spinning blocking
//! closure.
//!
//! No sleeps and no timing thresholds: every wait is on a channel, a flag or a handle, and a
//! hang is turned into a failure by a watchdog. Sizes are smaller in debug builds
//! ([`scale`]). The thread-count check runs in a child process of its own, since the other
//! tests of this binary start and stop threads meanwhile.

mod async_support;
mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_support::{runtime, watchdog, Counter, DropSlot, Slots};
use common::{assert_thread_count_returns_to, child_test, is_child, run_child, thread_count};
use magpie::task::{JoinError, JoinHandle};

fn scale(debug: usize, release: usize) -> usize {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

#[track_caller]
fn assert_cancelled<T>(result: Result<T, JoinError>, what: &str) {
    match result {
        Ok(_) => panic!("{what}: a task pending at shutdown returned Ok"),
        Err(err) => assert!(err.is_cancelled(), "{what}: {err:?}"),
    }
}

/// Keeps blocked workers blocked: each pending future holds a clone, and the blocked polls
/// return when the last clone is dropped, that is, once the shutdown has dropped every
/// pending future. (Released any earlier, a worker would run queued tasks that the shutdown
/// has not reached yet, and they would finish instead of being cancelled.)
type Hold = Arc<Vec<mpsc::Sender<()>>>;

// ---------------------------------------------------------------------------------------------
// Pending everywhere at once
// ---------------------------------------------------------------------------------------------

/// `PENDING` tasks at the drop, a fifth in each place: children spawned on worker 0 and on
/// worker 1 (each worker's LIFO slot and ring, the overflow in the inject queue), tasks
/// spawned from outside (the inject queue), tasks asleep in the timer wheel, and idle
/// futures nobody wakes. Each future's drop is counted in its own slot: exactly once each.
#[test]
fn drop_with_tasks_pending_in_every_queue() {
    let _guard = watchdog("drop_with_tasks_pending_in_every_queue");
    const PENDING: usize = 100_000;
    let per_kind = PENDING / 5;
    // No stall monitor: the blockers hold both workers on purpose, for as long as the
    // checks below take, and past the stall threshold the monitor would hand their queued
    // tasks on to the inject queue, emptying the rings the test checks (it did, on busy
    // cores and under AddressSanitizer).
    let rt = magpie::Runtime::builder()
        .worker_threads(2)
        .stall_threshold(None)
        .build()
        .unwrap();
    let drops = Slots::new(PENDING);
    let mut handles = Vec::with_capacity(PENDING);
    let (release_txs, release_rxs): (Vec<_>, Vec<_>) =
        (0..2).map(|_| mpsc::channel::<()>()).unzip();
    let hold: Hold = Arc::new(release_txs);

    // Timers and idle futures first, each polled once before the workers are blocked.
    let polled = Arc::new(AtomicUsize::new(0));
    let (all_polled_tx, all_polled_rx) = mpsc::channel::<()>();
    for i in 0..2 * per_kind {
        let guard = DropSlot::new(&drops, i);
        let (polled, all_polled, hold) = (polled.clone(), all_polled_tx.clone(), hold.clone());
        handles.push(rt.spawn(async move {
            let _guard = (guard, hold);
            let mut sleep = std::pin::pin!(magpie::time::sleep(Duration::from_secs(3600)));
            if i % 2 == 0 {
                // Filed before it counts as polled, so the count below sees every timer.
                assert!(futures::poll!(sleep.as_mut()).is_pending());
            }
            if polled.fetch_add(1, SeqCst) + 1 == 2 * per_kind {
                all_polled.send(()).unwrap();
            }
            if i % 2 == 0 {
                sleep.await;
            } else {
                std::future::pending::<()>().await;
            }
        }));
    }
    all_polled_rx.recv().unwrap();
    assert_eq!(rt.stats().timers_pending, per_kind as u64);

    // One blocker per worker spawns its children from that worker (LIFO slot, ring, and
    // what overflows the ring to the inject queue), then blocks the worker until the
    // shutdown has dropped every pending future (see `Hold`). The blockers meet at a
    // barrier before spawning, so both workers are held by then: nothing is run or stolen.
    let both_held = Arc::new(Barrier::new(2));
    let (inside_tx, inside_rx) = mpsc::channel();
    let mut blockers = Vec::new();
    for (worker, release_rx) in release_rxs.into_iter().enumerate() {
        let (inside, drops) = (inside_tx.clone(), drops.clone());
        let (both_held, hold) = (both_held.clone(), hold.clone());
        let first = (2 + worker) * per_kind;
        let blocker = rt.submit_to(worker, move || {
            both_held.wait();
            let spawned: Vec<_> = (first..first + per_kind)
                .map(|i| {
                    let (guard, hold) = (DropSlot::new(&drops, i), hold.clone());
                    magpie::spawn(async move {
                        let _guard = (guard, hold);
                    })
                })
                .collect();
            drop(hold);
            inside.send(spawned).unwrap();
            // Returns (disconnected) when the last pending future is dropped.
            let _ = release_rx.recv();
        });
        blockers.push(blocker.unwrap());
    }
    for _ in 0..2 {
        handles.extend(inside_rx.recv().unwrap());
    }

    // From outside: the inject queue.
    for i in 4 * per_kind..PENDING {
        let (guard, hold) = (DropSlot::new(&drops, i), hold.clone());
        handles.push(rt.spawn(async move {
            let _guard = (guard, hold);
        }));
    }
    drop(hold);

    // Every place holds something (the workers are blocked, so this is stable).
    let stats = rt.stats();
    for (index, worker) in stats.workers.iter().enumerate() {
        assert!(
            worker.local_queue_depth > 0,
            "worker {index}'s ring is empty: {stats:?}"
        );
    }
    assert!(stats.inject_queue_depth >= (PENDING - 4 * per_kind) as u64);
    assert_eq!(stats.tasks_alive as usize, PENDING + 2);

    drop(rt);
    drops.assert_all(1, "futures dropped by the shutdown");
    assert_eq!(handles.len(), PENDING);
    for (n, handle) in handles.into_iter().enumerate() {
        assert_cancelled(wait(handle), &format!("task {n}"));
    }
    // A closure cannot be cut short: the blockers ran to their end, after the shutdown
    // began, and their handles hold the (unit) output.
    for blocker in blockers {
        wait(blocker).expect("a blocker that ran to its end");
    }
}

// ---------------------------------------------------------------------------------------------
// Many runtimes
// ---------------------------------------------------------------------------------------------

const CYCLES_CHILD: &str = "shutdown_stress_cycles";
const CYCLES_OK: &str = "cycles child: ok";

/// Create, run, drop, a thousand times: every future dropped once per cycle, and the
/// process ends with as many threads as it started with (each worker and blocking thread
/// started was also stopped). In a child: it counts the process's threads.
#[test]
fn create_run_drop_cycles() {
    let out = run_child(child_test("child_create_run_drop_cycles", CYCLES_CHILD));
    assert!(
        out.status.success() && out.stdout.contains(CYCLES_OK),
        "child failed: {out:?}"
    );
}

#[test]
fn child_create_run_drop_cycles() {
    if !is_child(CYCLES_CHILD) {
        return;
    }
    let before = thread_count();
    let cycles = 1000;
    // Per cycle: tasks that finish, tasks that never do, a timer, a submitted closure and a
    // blocking closure.
    const TASKS: usize = 8;
    for cycle in 0..cycles {
        let rt = runtime(2);
        let drops = Slots::new(TASKS);
        let mut finished = Vec::new();
        let mut pending = Vec::new();
        for i in 0..TASKS {
            let guard = DropSlot::new(&drops, i);
            match i % 4 {
                0 => finished.push(rt.spawn(async move {
                    let _guard = guard;
                })),
                1 => finished.push(rt.submit(move || {
                    let _guard = guard;
                })),
                2 => finished.push(rt.spawn_blocking(move || {
                    let _guard = guard;
                })),
                _ => pending.push(rt.spawn(async move {
                    let _guard = guard;
                    if i % 8 == 3 {
                        std::future::pending::<()>().await;
                    } else {
                        magpie::time::sleep(Duration::from_secs(3600)).await;
                    }
                })),
            }
        }
        for handle in finished {
            wait(handle).unwrap();
        }
        drop(rt);
        drops.assert_all(1, &format!("cycle {cycle}"));
        for handle in pending {
            assert_cancelled(wait(handle), &format!("cycle {cycle}"));
        }
    }
    assert_thread_count_returns_to(before, &format!("after {cycles} runtimes"));
    println!("{CYCLES_OK}");
}

// ---------------------------------------------------------------------------------------------
// Destructors that act during the shutdown
// ---------------------------------------------------------------------------------------------

/// A task in a ring of tasks: pending forever; its destructor wakes its own waker and its
/// neighbour's, aborts and drops its neighbour's handle, and spawns a child, all while the
/// shutdown is dropping the ring.
struct Meddler {
    index: usize,
    wakers: Arc<Vec<Mutex<Option<Waker>>>>,
    handles: Arc<Vec<Mutex<Option<JoinHandle<()>>>>>,
    polled: Option<mpsc::Sender<()>>,
    children: mpsc::Sender<JoinHandle<()>>,
    child_drops: Counter,
    _drop: DropSlot,
}

impl Future for Meddler {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.wakers[self.index].lock().unwrap() = Some(cx.waker().clone());
        if let Some(polled) = self.polled.take() {
            let _ = polled.send(());
        }
        Poll::Pending
    }
}

impl Drop for Meddler {
    fn drop(&mut self) {
        let next = (self.index + 1) % self.wakers.len();
        let own = self.wakers[self.index].lock().unwrap().take();
        let neighbour = self.wakers[next].lock().unwrap().clone();
        for waker in own.into_iter().chain(neighbour) {
            waker.wake_by_ref();
            waker.wake();
        }
        let handle = self.handles[next].lock().unwrap().take();
        if let Some(handle) = handle {
            handle.abort();
        }
        let guard = self.child_drops.on_drop();
        let child = magpie::spawn(async move {
            let _guard = guard;
        });
        let _ = self.children.send(child);
    }
}

#[test]
fn destructors_wake_abort_and_spawn_during_shutdown() {
    let _guard = watchdog("destructors_wake_abort_and_spawn_during_shutdown");
    let n = scale(2_000, 20_000);
    for round in 0..5 {
        let rt = runtime(2);
        let drops = Slots::new(n);
        let wakers: Arc<Vec<_>> = Arc::new((0..n).map(|_| Mutex::new(None)).collect());
        let handles: Arc<Vec<_>> = Arc::new((0..n).map(|_| Mutex::new(None)).collect());
        let (polled_tx, polled_rx) = mpsc::channel();
        let (children_tx, children_rx) = mpsc::channel();
        let child_drops = Counter::new();
        for index in 0..n {
            let handle = rt.spawn(Meddler {
                index,
                wakers: wakers.clone(),
                handles: handles.clone(),
                polled: Some(polled_tx.clone()),
                children: children_tx.clone(),
                child_drops: child_drops.clone(),
                _drop: DropSlot::new(&drops, index),
            });
            *handles[index].lock().unwrap() = Some(handle);
        }
        drop((polled_tx, children_tx));
        // Half the rounds drop the ring while every task is idle, half while many are queued.
        if round % 2 == 0 {
            for _ in 0..n {
                polled_rx.recv().unwrap();
            }
        }
        drop(rt);
        drops.assert_all(1, &format!("round {round}: meddlers dropped"));
        // Each destructor spawned once; every child is dropped once, run or refused.
        let children: Vec<_> = children_rx.iter().collect();
        assert_eq!(children.len(), n, "round {round}: destructors run");
        for child in children {
            if let Err(err) = wait(child) {
                assert!(err.is_cancelled(), "round {round}: {err:?}");
            }
        }
        assert_eq!(child_drops.get(), n, "round {round}: children dropped");
        // The handles nobody aborted resolve to cancelled too.
        for slot in handles.iter() {
            if let Some(handle) = slot.lock().unwrap().take() {
                assert_cancelled(wait(handle), &format!("round {round}: a meddler"));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Spawns racing the shutdown
// ---------------------------------------------------------------------------------------------

/// A child's state: `RAN` set by its body, `DROPPED` by its future's destructor.
const RAN: u8 = 1;
const DROPPED: u8 = 2;

/// The children spawned so far, with their indices.
type Children = Vec<(usize, JoinHandle<()>)>;

/// Sets a bit of a child's state when dropped.
struct MarkDropped(Arc<[AtomicU8]>, usize);

impl Drop for MarkDropped {
    fn drop(&mut self) {
        let before = self.0[self.1].fetch_or(DROPPED, SeqCst);
        assert_eq!(before & DROPPED, 0, "child {} dropped twice", self.1);
    }
}

/// Parents on both workers spawn children as fast as they can while the runtime is dropped:
/// every child either ran (its handle says `Ok`) or was cancelled without running (its handle
/// says cancelled), never both, never neither, and its future is dropped exactly once.
#[test]
fn spawns_race_the_shutdown() {
    let _guard = watchdog("spawns_race_the_shutdown");
    // Spawns to check in all: each round races one runtime's drop and checks the children
    // its parents got to spawn before they were cancelled.
    let target = scale(10_000, 100_000);
    let per_round = 1_000;
    let (mut ran, mut cancelled) = (0, 0);
    let mut round = 0;
    while ran + cancelled < target {
        round += 1;
        assert!(
            round < 100 * target / per_round,
            "too few spawns raced the drops"
        );
        let rt = runtime(2);
        let states: Arc<[AtomicU8]> = (0..per_round).map(|_| AtomicU8::new(0)).collect();
        let next = Arc::new(AtomicUsize::new(0));
        let children: Arc<Mutex<Children>> = Arc::default();
        let (started_tx, started_rx) = mpsc::channel();
        let parents: Vec<_> = (0..2)
            .map(|_| {
                let (states, next, children) = (states.clone(), next.clone(), children.clone());
                let started = started_tx.clone();
                rt.spawn(async move {
                    started.send(()).unwrap();
                    loop {
                        let i = next.fetch_add(1, SeqCst);
                        if i >= per_round {
                            std::future::pending::<()>().await;
                        }
                        let mark = MarkDropped(states.clone(), i);
                        let states = states.clone();
                        let child = magpie::spawn(async move {
                            let _mark = mark;
                            states[i].fetch_or(RAN, SeqCst);
                        });
                        children.lock().unwrap().push((i, child));
                        if i % 16 == 0 {
                            magpie::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            started_rx.recv().unwrap();
        }
        drop(rt);
        for parent in parents {
            assert_cancelled(wait(parent), "a parent");
        }
        let children = std::mem::take(&mut *children.lock().unwrap());
        for (i, child) in children {
            assert!(
                child.is_finished(),
                "round {round}: child {i} never resolved"
            );
            let state = states[i].load(SeqCst);
            assert_ne!(state & DROPPED, 0, "round {round}: child {i} never dropped");
            match wait(child) {
                Ok(()) => {
                    assert_ne!(state & RAN, 0, "round {round}: child {i}: Ok, not run");
                    ran += 1;
                }
                Err(err) => {
                    assert!(err.is_cancelled(), "round {round}: child {i}: {err:?}");
                    assert_eq!(
                        state & RAN,
                        0,
                        "round {round}: child {i} ran and was cancelled"
                    );
                    cancelled += 1;
                }
            }
        }
    }
    println!("spawns racing the shutdown, {round} rounds: {ran} ran, {cancelled} cancelled");
}

// ---------------------------------------------------------------------------------------------
// A busy blocking closure
// ---------------------------------------------------------------------------------------------

/// `shutdown_timeout(Duration::ZERO)` returns while a blocking closure is still spinning (it
/// cannot be interrupted); the closure finishes once released, and its output reaches its
/// handle.
#[test]
fn shutdown_timeout_zero_returns_beside_a_spinning_blocking_closure() {
    let _guard = watchdog("shutdown_timeout_zero_returns_beside_a_spinning_blocking_closure");
    for _ in 0..scale(5, 20) {
        let rt = runtime(2);
        let (started_tx, started_rx) = mpsc::channel();
        let release = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let (r, f) = (release.clone(), finished.clone());
        let blocking = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            while !r.load(SeqCst) {
                std::hint::spin_loop();
            }
            f.store(true, SeqCst);
            7
        });
        started_rx.recv().unwrap();
        rt.shutdown_timeout(Duration::ZERO);
        // Returned while the closure spins: it cannot finish before `release` is set.
        assert!(
            !finished.load(SeqCst),
            "shutdown_timeout waited for the closure"
        );
        assert!(!blocking.is_finished());
        release.store(true, SeqCst);
        assert_eq!(wait(blocking).expect("the running closure's output"), 7);
        assert!(finished.load(SeqCst));
    }
}
