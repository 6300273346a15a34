//! Batches whose iterator waits on the batch or re-enters the runtime, pools at the edges of
//! the idle bitmap's 64-bit words (64, 65, 128, 129, 130 workers), switching workers off
//! while tasks are queued on them, and shutdown with tasks queued everywhere. Written in the
//! review of issue 19 (many cores): the lock-free task inject queue, the idle bitmap past
//! 64 and 128 workers, and `submit_batch` with user code (the caller's iterator) running
//! between its closures.
//!
//! Hangs are turned into failures: by [`Deadline`] (aborts the binary), and by a
//! `recv_timeout` of [`HANG`] where the test waits inside the batch's iterator, so that the
//! rest of the binary still runs.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, RwLock};
use std::time::Duration;

use common::deadline::Deadline;
use common::{eventually, runtime, Ledger, DEADLINE};
use magpie::{BarrierMode, JoinError, JoinHandle, Runtime, UnhandledPanic};

/// How long a test that demonstrates a hang waits before it reports one. What it waits for
/// takes microseconds when nothing is wrong; the limit only ends the hang.
const HANG: Duration = Duration::from_secs(10);

/// Worker counts at the edges of the idle bitmap's 64-bit words.
const BOUNDARIES: [usize; 5] = [64, 65, 128, 129, 130];

/// Counts its drops: a closure or future holding one was dropped exactly when the count says.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Joins `handle`, aborting the binary if it does not resolve (a lost wakeup or a lost task).
fn join<T>(handle: JoinHandle<T>, what: &'static str) -> Result<T, JoinError> {
    let guard = Deadline::new(what, DEADLINE);
    let result = handle.join();
    drop(guard);
    result
}

/// `rt.wait_idle()`, aborting the binary if it hangs.
fn wait_idle(rt: &Runtime, what: &'static str) {
    let guard = Deadline::new(what, DEADLINE);
    rt.wait_idle();
    drop(guard);
}

/// Waits until every worker of `rt` is parked by its counters (one more park than unpark).
fn wait_until_parked(rt: &Runtime) {
    eventually("every worker parks", || {
        rt.stats().workers.iter().all(|w| w.parks > w.unparks)
    });
}

// ---------------------------------------------------------------------------------------
// A batch's iterator is user code that runs between its closures.
// ---------------------------------------------------------------------------------------

/// `submit_batch` runs each closure "as submit would one by one": an iterator that waits at
/// item 20 for closure 17 gets it. (When the batch was queued in chunks of 16, 32, 64, ...,
/// closure 17 sat built, live and unqueued in the second chunk until closure 47 was built,
/// and this waited for good.)
#[test]
fn a_batch_iterator_that_waits_for_an_earlier_closure_of_its_batch() {
    let rt = runtime(2);
    let (ran, ran_rx) = mpsc::channel::<usize>();
    let mut waited = None;
    let closures = (0..64usize).map(|i| {
        if i == 20 {
            waited = Some(ran_rx.recv_timeout(HANG));
        }
        let ran = ran.clone();
        move || {
            if i == 17 {
                let _ = ran.send(i);
            }
        }
    });
    let handles = rt.submit_batch(closures);
    for handle in handles {
        join(handle, "a closure of the batch").unwrap();
    }
    assert_eq!(
        waited.expect("the iterator reached item 20"),
        Ok(17),
        "closure 17 did not run while the iterator waited for it"
    );
}

/// `wait_idle` called while a batch's iterator is paused (here: by the iterator itself,
/// through another thread, so that the test can give up) returns once the closures yielded
/// so far have run. (With chunks, the built but unqueued closures of a chunk counted as
/// live, so it waited until the iterator went on: for good, here.)
#[test]
fn wait_idle_while_a_batch_iterator_is_paused() {
    let rt = Arc::new(runtime(2));
    let mut returned = None;
    let closures = (0..40usize).map(|i| {
        if i == 20 {
            let (done, done_rx) = mpsc::channel::<()>();
            let waiter = rt.clone();
            std::thread::spawn(move || {
                waiter.wait_idle();
                let _ = done.send(());
            });
            returned = Some(done_rx.recv_timeout(HANG));
        }
        || ()
    });
    let handles = rt.submit_batch(closures);
    for handle in handles {
        join(handle, "a closure of the batch").unwrap();
    }
    assert_eq!(
        returned.expect("the iterator reached item 20"),
        Ok(()),
        "wait_idle did not return while the batch's iterator waited for it"
    );
}

// ---------------------------------------------------------------------------------------
// submit_batch and user code: regression tests (pass).
// ---------------------------------------------------------------------------------------

/// The iterator panics midway on a worker (inside `install`, and inside a submitted
/// closure): the closures built so far still run, once each, and `wait_idle` returns. The
/// existing test (task_pool.rs) panics only from outside the pool.
#[test]
fn a_batch_iterator_that_panics_on_a_worker() {
    let rt = Arc::new(runtime(3));
    let ran = Arc::new(AtomicUsize::new(0));
    let batch = |rt: &Runtime, ran: &Arc<AtomicUsize>| {
        let closures = (0..100usize).map(|i| {
            if i == 37 {
                panic!("the iterator fails at 37");
            }
            let ran = ran.clone();
            move || {
                ran.fetch_add(1, SeqCst);
            }
        });
        let err = panic::catch_unwind(AssertUnwindSafe(|| rt.submit_batch(closures)));
        assert!(err.is_err(), "the iterator's panic reached the caller");
    };
    rt.install(|| batch(&rt, &ran));
    wait_idle(&rt, "wait_idle after a batch panicked inside install");
    assert_eq!(ran.load(SeqCst), 37);

    let (inner_rt, inner_ran) = (rt.clone(), ran.clone());
    let outer = rt.submit(move || batch(&inner_rt, &inner_ran));
    join(outer, "the closure whose batch panicked").unwrap();
    wait_idle(&rt, "wait_idle after a batch panicked inside a task");
    assert_eq!(ran.load(SeqCst), 74);
    assert_eq!(rt.stats().tasks_alive, 0);
}

/// An unhandled panic under `ShutdownRuntime` cancels every live task while a batch's
/// iterator is still going: the queued tasks are cancelled, the later ones are refused. Every closure is dropped
/// exactly once, every handle resolves (run, or cancelled), and `wait_idle` returns.
#[test]
fn the_runtime_shuts_its_tasks_down_while_a_batch_is_being_built() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .unhandled_panic(UnhandledPanic::ShutdownRuntime)
        .build()
        .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let closures = (0..100usize).map(|i| {
        if i == 20 {
            // A detached task's panic is unhandled: it shuts the runtime's tasks down.
            drop(rt.submit(|| panic!("an unhandled panic (expected by the test)")));
            eventually("spawns are refused", || {
                rt.submit(|| ()).join().is_err_and(|e| e.is_cancelled())
            });
        }
        let guard = DropCount(drops.clone());
        let ran = ran.clone();
        move || {
            let _guard = guard;
            ran.fetch_add(1, SeqCst);
        }
    });
    let handles = rt.submit_batch(closures);
    let mut finished = 0;
    for (i, handle) in handles.into_iter().enumerate() {
        match join(handle, "a handle of the batch") {
            Ok(()) => finished += 1,
            Err(e) => assert!(e.is_cancelled(), "closure {i}: {e}"),
        }
    }
    wait_idle(&rt, "wait_idle after the shutdown");
    assert_eq!(finished, ran.load(SeqCst));
    assert!(finished <= 20, "a closure built after the shutdown ran");
    assert_eq!(
        drops.load(SeqCst),
        100,
        "every closure dropped exactly once"
    );
    assert_eq!(rt.stats().tasks_alive, 0);
}

/// A closure of a batch submits a batch of its own (re-entering `submit_batch` on a
/// worker), and an iterator item submits to the same runtime: everything runs once.
#[test]
fn batches_submitted_from_a_batch_and_from_its_iterator() {
    let rt = Arc::new(runtime(3));
    let ledger = Ledger::new(100 * 10 + 100);
    let outer = {
        let ledger = ledger.clone();
        let inner_rt = rt.clone();
        let side = rt.clone();
        (0..100usize).map(move |i| {
            // The iterator itself spawns onto the runtime it feeds.
            let side_ledger = ledger.clone();
            drop(side.submit(move || side_ledger.ran(1000 + i)));
            let ledger = ledger.clone();
            let rt = inner_rt.clone();
            move || {
                let inner = (0..10usize).map(|j| {
                    let ledger = ledger.clone();
                    move || ledger.ran(i * 10 + j)
                });
                for handle in rt.submit_batch(inner) {
                    drop(handle);
                }
            }
        })
    };
    for handle in rt.submit_batch(outer) {
        join(handle, "an outer closure").unwrap();
    }
    wait_idle(&rt, "wait_idle after nested batches");
    ledger.assert_each_once();
}

// ---------------------------------------------------------------------------------------
// The idle bitmap at 64, 65, 128, 129 and 130 workers: regression tests (pass).
// ---------------------------------------------------------------------------------------

/// Into a fully parked pool at each word boundary: one remote spawn, a `submit_to` to each
/// worker on either side of a boundary, a batch of 2,000, and a ping-pong of
/// remote spawns (each join lets the pool park again). A lost wakeup hangs a join, which
/// the deadline turns into a failure.
#[test]
fn work_reaches_parked_pools_at_the_bitmap_boundaries() {
    for workers in BOUNDARIES {
        let rt = runtime(workers);
        wait_until_parked(&rt);
        assert_eq!(join(rt.submit(|| 7), "a remote spawn").unwrap(), 7);
        for w in [0, 62, 63, 64, 65, 126, 127, 128, 129] {
            if w >= workers {
                continue;
            }
            wait_until_parked(&rt);
            let handle = rt.submit_to(w, move || w).unwrap();
            assert_eq!(join(handle, "a submit_to into a parked pool").unwrap(), w);
        }
        wait_until_parked(&rt);
        let handles = rt.submit_batch((0..2000usize).map(|i| move || i));
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(join(handle, "a batch into a parked pool").unwrap(), i);
        }
        for i in 0..300usize {
            let handle = rt.submit_balanced(move || i + 1);
            assert_eq!(join(handle, "a ping-pong spawn").unwrap(), i + 1);
        }
        wait_idle(&rt, "wait_idle at a bitmap boundary");
        assert_eq!(rt.stats().tasks_alive, 0);
    }
}

/// Remote spawns, `submit_to` the first worker of the second word, and batches of 17 into a
/// 65-worker pool that parks between them,
/// in both barrier modes: each round waits for its work, so the pool keeps going from
/// parked to busy and back, and a lost wakeup hangs a join (the deadline fails the test).
#[test]
fn ping_pong_into_a_65_worker_pool_in_both_barrier_modes() {
    for mode in [BarrierMode::Symmetric, BarrierMode::Asymmetric] {
        let rt = Runtime::builder()
            .worker_threads(65)
            .barrier(mode)
            .build()
            .unwrap();
        for i in 0..500usize {
            let handle = match i % 3 {
                0 => rt.submit(move || i),
                1 => rt.submit_to(64, move || i).unwrap(),
                _ => {
                    let mut batch = rt.submit_batch((0..17).map(move |j| move || i + j));
                    let last = batch.pop().unwrap();
                    for (j, handle) in batch.into_iter().enumerate() {
                        assert_eq!(join(handle, "a batch's closure").unwrap(), i + j);
                    }
                    assert_eq!(join(last, "a batch's last closure").unwrap(), i + 16);
                    continue;
                }
            };
            assert_eq!(join(handle, "a ping-pong closure").unwrap(), i);
        }
        wait_idle(&rt, "wait_idle after the ping-pong");
    }
}

/// The wakes a large machine makes, on this one: pools of 3 to 16 workers that assume as
/// many CPUs (`Builder::assume_cpus`), so that R1c wakes a worker for a remote task queued
/// behind others and R1b one for a job pushed behind another (sleep/README.md), whoever
/// searches (on 2 CPUs neither fires otherwise). Streams of remote spawns and batches into
/// pools that park between rounds, and fork-join inside the tasks, in both barrier modes:
/// every task runs exactly once, every join returns, and a lost wakeup hangs a join or
/// `wait_idle` (the deadline fails the test).
#[test]
fn streams_into_pools_that_wake_as_large_machines_do() {
    for workers in [3, 4, 8, 16] {
        for mode in [BarrierMode::Symmetric, BarrierMode::Asymmetric] {
            let rt = Runtime::builder()
                .worker_threads(workers)
                .assume_cpus(workers)
                .barrier(mode)
                .build()
                .unwrap();
            for round in 0..20usize {
                wait_until_parked(&rt);
                let runs: Arc<Vec<AtomicUsize>> =
                    Arc::new((0..200).map(|_| AtomicUsize::new(0)).collect());
                let handles: Vec<_> = (0..200usize)
                    .map(|i| {
                        let runs = runs.clone();
                        rt.submit(move || {
                            runs[i].fetch_add(1, SeqCst);
                            // A little fork-join inside, for R1b's pushes.
                            let (a, b) = magpie::join(|| i * 2, || round + 1);
                            a + b
                        })
                    })
                    .collect();
                for (i, handle) in handles.into_iter().enumerate() {
                    assert_eq!(
                        join(handle, "a streamed closure").unwrap(),
                        i * 2 + round + 1
                    );
                }
                if round % 4 == 0 {
                    wait_until_parked(&rt);
                    let batch = rt.submit_batch((0..100usize).map(|i| {
                        let runs = runs.clone();
                        move || runs[i].fetch_add(1, SeqCst)
                    }));
                    for handle in batch {
                        join(handle, "a batch's closure").unwrap();
                    }
                }
                wait_idle(&rt, "wait_idle after a stream");
                let expected = |i: usize| 1 + usize::from(round % 4 == 0 && i < 100);
                for (i, count) in runs.iter().enumerate() {
                    assert_eq!(
                        count.load(SeqCst),
                        expected(i),
                        "{workers} workers, {mode:?}, task {i}"
                    );
                }
            }
            assert_eq!(rt.stats().tasks_alive, 0);
        }
    }
}

/// Every worker of a 130-worker pool waits inside a task for one of the others' tasks to
/// be spawned from inside the pool (tasks woken across the three words of the bitmap, by
/// workers that park and wake around them).
#[test]
fn tasks_wake_each_other_across_the_bitmap_words() {
    const WORKERS: usize = 130;
    let rt = runtime(WORKERS);
    for round in 0..3 {
        let (tx, rx) = mpsc::channel::<usize>();
        // A chain: task k spawns task k + 1 from inside the pool and awaits it.
        fn link(k: usize, end: usize, tx: mpsc::Sender<usize>) -> JoinHandle<usize> {
            magpie::spawn(async move {
                if k == end {
                    let _ = tx.send(k);
                    return k;
                }
                link(k + 1, end, tx).await.unwrap()
            })
        }
        let end = 300 + round;
        let head = rt.spawn(async move { link(0, end, tx).await.unwrap() });
        assert_eq!(join(head, "a chain of 300 tasks").unwrap(), end);
        assert_eq!(rx.recv().unwrap(), end);
    }
    wait_idle(&rt, "wait_idle after the chains");
}

// ---------------------------------------------------------------------------------------
// Switching workers off with tasks queued on them: regression tests (pass).
// ---------------------------------------------------------------------------------------

/// Holds every worker of `rt` inside a closure until the returned write guard drops; each
/// closure first spawns `spawned` tasks onto its own worker's LIFO slot and ring (recorded
/// in `ledger` from `base`). Returns once every worker holds one.
fn hold_every_worker<'g>(
    rt: &Runtime,
    gate: &'g Arc<RwLock<()>>,
    ledger: &Arc<Ledger>,
    base: usize,
    spawned: usize,
) -> (std::sync::RwLockWriteGuard<'g, ()>, Vec<JoinHandle<()>>) {
    let n = rt.num_workers();
    let closed = gate.write().unwrap();
    let started = Arc::new(Barrier::new(n + 1));
    let handles = (0..n)
        .map(|w| {
            let started = started.clone();
            let gate = gate.clone();
            let ledger = ledger.clone();
            rt.submit_to(w, move || {
                for j in 0..spawned {
                    let ledger = ledger.clone();
                    let i = base + w * spawned + j;
                    drop(magpie::spawn(async move { ledger.ran(i) }));
                }
                started.wait();
                drop(gate.read().unwrap());
            })
            .unwrap()
        })
        .collect();
    started.wait();
    (closed, handles)
}

/// At 130 workers, every worker busy and with tasks in its LIFO slot, ring and mailbox,
/// the pool shrinks to 1, 64, 65, 128 and 129 workers (the retiring workers straddle the
/// bitmap's words), then the workers are released: every queued task runs exactly once on
/// the workers that stay, and the pool grows back.
#[test]
fn shrinking_across_the_bitmap_words_with_tasks_queued_on_the_retiring_workers() {
    const WORKERS: usize = 130;
    const SPAWNED: usize = 3;
    let rt = runtime(WORKERS);
    let gate = Arc::new(RwLock::new(()));
    for active in [1, 64, 65, 128, 129] {
        let ledger = Ledger::new(WORKERS * SPAWNED + WORKERS);
        let (closed, held) = hold_every_worker(&rt, &gate, &ledger, 0, SPAWNED);
        // Into every mailbox while its owner is busy.
        let mailed: Vec<_> = (0..WORKERS)
            .map(|w| {
                let ledger = ledger.clone();
                rt.submit_to(w, move || ledger.ran(WORKERS * SPAWNED + w))
                    .unwrap()
            })
            .collect();
        rt.set_active_workers(active).unwrap();
        drop(closed);
        for handle in held.into_iter().chain(mailed) {
            join(handle, "a task queued on a retiring worker").unwrap();
        }
        wait_idle(&rt, "wait_idle after shrinking");
        ledger.assert_each_once();
        assert_eq!(rt.active_workers(), active);
        // The retired workers stay out of the work: submit_to them goes to the others.
        let handle = rt.submit_to(WORKERS - 1, || 5).unwrap();
        assert_eq!(join(handle, "a submit_to a retired worker").unwrap(), 5);
        rt.set_active_workers(WORKERS).unwrap();
    }
}

/// Two threads submit to workers on both sides of the words' boundaries (`submit_to` and
/// `submit_balanced`) while a third keeps switching the active count across them: each
/// closure runs exactly once and `wait_idle` returns.
#[test]
fn submissions_race_shrinking_and_growing_across_the_bitmap_words() {
    const WORKERS: usize = 130;
    const PER_THREAD: usize = 3000;
    let rt = Arc::new(runtime(WORKERS));
    let ledger = Ledger::new(2 * PER_THREAD);
    let stop = Arc::new(AtomicUsize::new(0));
    let switches = Arc::new(AtomicUsize::new(0));
    let switcher = {
        let rt = rt.clone();
        let (stop, switches) = (stop.clone(), switches.clone());
        std::thread::spawn(move || {
            let counts = [1, 130, 64, 65, 2, 128, 129, 63];
            while stop.load(SeqCst) == 0 {
                let k = switches.load(SeqCst);
                rt.set_active_workers(counts[k % counts.len()]).unwrap();
                switches.store(k + 1, SeqCst);
                std::thread::yield_now();
            }
            rt.set_active_workers(WORKERS).unwrap();
        })
    };
    // The submissions start once the switcher runs, so that they race it however the OS
    // schedules the threads (on 2 CPUs they could otherwise all end before its first turn).
    eventually("the switcher has switched once", || {
        switches.load(SeqCst) > 0
    });
    let submitters: Vec<_> = (0..2)
        .map(|t| {
            let rt = rt.clone();
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                let targets = [0, 1, 63, 64, 65, 127, 128, 129];
                let handles: Vec<_> = (0..PER_THREAD)
                    .map(|i| {
                        let ledger = ledger.clone();
                        let n = t * PER_THREAD + i;
                        if i % 3 == 0 {
                            rt.submit_balanced(move || ledger.ran(n))
                        } else {
                            rt.submit_to(targets[i % targets.len()], move || ledger.ran(n))
                                .unwrap()
                        }
                    })
                    .collect();
                for handle in handles {
                    join(handle, "a submission racing the switches").unwrap();
                }
            })
        })
        .collect();
    for submitter in submitters {
        submitter.join().unwrap();
    }
    stop.store(1, SeqCst);
    switcher.join().unwrap();
    wait_idle(&rt, "wait_idle after the race");
    ledger.assert_each_once();
}

// ---------------------------------------------------------------------------------------
// Shutdown with tasks queued everywhere: regression tests (pass).
// ---------------------------------------------------------------------------------------

/// A 65-worker runtime is dropped right after it shrank to one worker, while every worker
/// still holds a closure and has never-ready futures in its LIFO slot, ring and mailbox:
/// every future is dropped exactly once, and every handle of a queued one resolves as
/// cancelled.
#[test]
fn dropping_a_runtime_that_just_shrank_with_tasks_queued_on_the_retiring_workers() {
    const WORKERS: usize = 65;
    let rt = runtime(WORKERS);
    let drops = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(RwLock::new(()));
    let closed = gate.write().unwrap();
    let started = Arc::new(Barrier::new(WORKERS + 1));
    let (spawned_tx, spawned_rx) = mpsc::channel::<JoinHandle<()>>();
    let held: Vec<_> = (0..WORKERS)
        .map(|w| {
            let started = started.clone();
            let gate = gate.clone();
            let drops = drops.clone();
            let spawned_tx = spawned_tx.clone();
            rt.submit_to(w, move || {
                for _ in 0..3 {
                    let guard = DropCount(drops.clone());
                    let handle = magpie::spawn(async move {
                        let _guard = guard;
                        std::future::pending::<()>().await;
                    });
                    spawned_tx.send(handle).unwrap();
                }
                started.wait();
                drop(gate.read().unwrap());
            })
            .unwrap()
        })
        .collect();
    drop(spawned_tx);
    started.wait();
    let mailed: Vec<_> = (0..WORKERS)
        .map(|w| {
            let guard = DropCount(drops.clone());
            rt.submit_to(w, move || drop(guard)).unwrap()
        })
        .collect();
    rt.set_active_workers(1).unwrap();
    drop(closed);
    let guard = Deadline::new("dropping the runtime", DEADLINE);
    drop(rt);
    drop(guard);
    for handle in held {
        // Running when the runtime dropped: finished, or marked cancelled by the shutdown.
        if let Err(e) = handle.join() {
            assert!(e.is_cancelled(), "{e}");
        }
    }
    for handle in spawned_rx.iter() {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
    for handle in mailed {
        // Run before the drop, or cancelled by it.
        if let Err(e) = handle.join() {
            assert!(e.is_cancelled(), "{e}");
        }
    }
    assert_eq!(drops.load(SeqCst), WORKERS * 3 + WORKERS);
}

/// The closures of a batch are dropped at shutdown while still queued in the inject queue
/// (every worker is held until just before the drop), and each destructor spawns onto the
/// same runtime (from the dropping thread, or from a worker for a closure that ran first):
/// every closure is dropped once, every handle, the spawned ones too, resolves, and nothing
/// hangs.
#[test]
fn dropping_a_runtime_with_a_queued_batch_whose_destructors_spawn() {
    const WORKERS: usize = 3;
    const BATCH: usize = 1500;
    type Spawned = Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>;
    struct SpawnOnDrop {
        drops: Arc<AtomicUsize>,
        spawned: Spawned,
    }
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            self.drops.fetch_add(1, SeqCst);
            // The runtime's context is current here (its shutdown, or a worker).
            let handle = magpie::spawn(async {});
            self.spawned.lock().unwrap().push(handle);
        }
    }
    let rt = runtime(WORKERS);
    let drops = Arc::new(AtomicUsize::new(0));
    let spawned: Spawned = Arc::default();
    let gate = Arc::new(RwLock::new(()));
    let ledger = Ledger::new(0);
    let (closed, held) = hold_every_worker(&rt, &gate, &ledger, 0, 0);
    let handles = rt.submit_batch((0..BATCH).map(|_| {
        let bomb = SpawnOnDrop {
            drops: drops.clone(),
            spawned: spawned.clone(),
        };
        move || drop(bomb)
    }));
    drop(closed);
    let guard = Deadline::new("dropping the runtime with a queued batch", DEADLINE);
    drop(rt);
    drop(guard);
    for handle in held.into_iter().chain(handles) {
        if let Err(e) = handle.join() {
            assert!(e.is_cancelled(), "{e}");
        }
    }
    assert_eq!(drops.load(SeqCst), BATCH);
    let spawned = std::mem::take(&mut *spawned.lock().unwrap());
    assert_eq!(spawned.len(), BATCH);
    for handle in spawned {
        if let Err(e) = handle.join() {
            assert!(e.is_cancelled(), "{e}");
        }
    }
}
