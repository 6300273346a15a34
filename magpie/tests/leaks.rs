//! No task allocation outlives its runtime and its handles.
//!
//! One test on purpose: [`magpie::task::live_tasks`] counts task allocations for the whole
//! process, so this binary runs its scenarios one after another on a single test thread and
//! checks the count is back to 0 after each runtime (and every handle and waker) is gone.
//! `scripts/valgrind.sh` runs this binary under valgrind's memcheck as well, where any block
//! the count missed would show up as definitely lost.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use magpie::Runtime;

/// Asserts no task allocation is alive (in builds that count them).
fn assert_no_live_tasks(after: &str) {
    if let Some(live) = magpie::task::live_tasks() {
        assert_eq!(live, 0, "task allocations alive after {after}");
    }
}

/// Sizes: smaller under valgrind (`MAGPIE_LEAK_SMALL=1`), which runs about 50 times slower.
fn size(normal: usize) -> usize {
    if std::env::var_os("MAGPIE_LEAK_SMALL").is_some() {
        (normal / 20).max(4)
    } else {
        normal
    }
}

fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("runtime")
}

/// Pending until dropped; counts its drop.
struct Pending(Arc<AtomicUsize>);

impl Future for Pending {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Stores its own waker in `slot` and stays pending: a task reachable only through a waker.
struct ParkedWaker {
    slot: Arc<Mutex<Vec<Waker>>>,
}

impl Future for ParkedWaker {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.slot.lock().unwrap().push(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn no_task_allocation_outlives_its_runtime() {
    assert_no_live_tasks("start");
    for workers in [1, 2, 3] {
        never_ready_futures_on_every_queue(workers);
        assert_no_live_tasks("dropping a runtime with never-ready tasks");
        timers_pending_at_shutdown(workers);
        assert_no_live_tasks("dropping a runtime with pending timers");
        finished_panicked_and_aborted_tasks(workers);
        assert_no_live_tasks("finished, panicked and aborted tasks");
        wakers_that_outlive_the_runtime(workers);
        assert_no_live_tasks("dropping wakers kept past the runtime");
        tasks_waking_each_other_in_a_cycle(workers);
        assert_no_live_tasks("a cycle of tasks holding each other's wakers");
        destructors_that_spawn_during_shutdown(workers);
        assert_no_live_tasks("destructors that spawn during shutdown");
        parked_workers_with_queued_tasks(workers);
        assert_no_live_tasks("shrinking the active workers, then dropping");
    }
}

/// Never-ready futures spawned from outside (inject queue), from a task (LIFO slot and
/// ring), submitted to each worker's mailbox, and balanced; the runtime is dropped with all
/// of them pending.
fn never_ready_futures_on_every_queue(workers: usize) {
    let n = size(2_000);
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = runtime(workers);
    let mut handles = Vec::new();
    for _ in 0..n {
        handles.push(rt.spawn(Pending(drops.clone())));
    }
    let spawner_drops = drops.clone();
    rt.block_on(async move {
        for _ in 0..n {
            drop(magpie::spawn(Pending(spawner_drops.clone())));
        }
    });
    for i in 0..n {
        let pending = Pending(drops.clone());
        drop(rt.submit_to(i % workers, move || drop(pending)).unwrap());
        let pending = Pending(drops.clone());
        drop(rt.submit_balanced(move || drop(pending)));
    }
    drop(rt);
    // Every future was dropped once: the pending ones by shutdown, the submitted ones with
    // their closures, whether they ran or were cancelled (a cancelled closure is dropped
    // unrun, and its captured `Pending` with it).
    assert_eq!(drops.load(SeqCst), 4 * n);
    for handle in handles {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
}

fn timers_pending_at_shutdown(workers: usize) {
    let rt = runtime(workers);
    let handles: Vec<_> = (0..size(1_000))
        .map(|i| {
            rt.spawn(async move {
                magpie::time::sleep(Duration::from_secs(3_600 + i as u64)).await;
            })
        })
        .collect();
    // Make sure every timer is registered: each task has been polled once.
    rt.block_on(async {
        magpie::time::sleep(Duration::from_millis(1)).await;
    });
    drop(rt);
    for handle in handles {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
}

fn finished_panicked_and_aborted_tasks(workers: usize) {
    let rt = runtime(workers);
    let n = size(1_000);
    let mut kept = Vec::new();
    for i in 0..n {
        match i % 4 {
            // Detached, finishes with an output nobody reads.
            0 => drop(rt.spawn(async move { vec![i; 4] })),
            // Panics; the handle reads the panic.
            1 => kept.push(rt.spawn(async move {
                if i < usize::MAX {
                    panic!("task {i} panics on purpose");
                }
                Vec::new()
            })),
            // Aborted before or while it runs.
            2 => {
                let handle = rt.spawn(std::future::pending::<Vec<usize>>());
                handle.abort();
                kept.push(handle);
            }
            // A closure whose output is read.
            _ => kept.push(rt.submit(move || vec![i])),
        }
    }
    for (i, handle) in kept.into_iter().enumerate() {
        let result = handle.join();
        match i % 3 {
            0 => assert!(result.unwrap_err().is_panic()),
            1 => assert!(result.unwrap_err().is_cancelled()),
            _ => assert_eq!(result.unwrap().len(), 1),
        }
    }
    rt.wait_idle();
    drop(rt);
}

/// Wakers taken out of the runtime (kept in a Mutex here) keep their tasks' allocations
/// alive after the runtime is gone, until they are dropped; waking them then does nothing.
fn wakers_that_outlive_the_runtime(workers: usize) {
    let slot = Arc::new(Mutex::new(Vec::new()));
    let rt = runtime(workers);
    let n = size(200);
    let (polled_tx, polled_rx) = mpsc::channel();
    for _ in 0..n {
        let slot = slot.clone();
        let polled_tx = polled_tx.clone();
        drop(rt.spawn(async move {
            let parked = ParkedWaker { slot };
            let _ = polled_tx.send(());
            parked.await;
        }));
    }
    for _ in 0..n {
        polled_rx.recv().unwrap();
    }
    drop(rt);
    let wakers = std::mem::take(&mut *slot.lock().unwrap());
    if let Some(live) = magpie::task::live_tasks() {
        assert!(live >= 1, "the kept wakers hold their tasks");
    }
    for waker in wakers {
        waker.wake();
    }
}

/// Two sets of tasks that each hold the other's waker and stay pending: a reference cycle
/// that only shutdown (which drops every future) breaks.
fn tasks_waking_each_other_in_a_cycle(workers: usize) {
    let rt = runtime(workers);
    for _ in 0..size(100) {
        let a_slot = Arc::new(Mutex::new(Vec::new()));
        let b_slot = Arc::new(Mutex::new(Vec::new()));
        drop(rt.spawn(ParkedWaker {
            slot: b_slot.clone(),
        }));
        drop(rt.spawn(ParkedWaker {
            slot: a_slot.clone(),
        }));
        // Each task's future owns the slot the other writes its waker into.
        drop(rt.spawn(async move {
            let _keep = (a_slot, b_slot);
            std::future::pending::<()>().await;
        }));
    }
    drop(rt);
}

/// A future whose destructor spawns another task: during shutdown that spawn is refused
/// (the new future is dropped at once), and nothing leaks.
fn destructors_that_spawn_during_shutdown(workers: usize) {
    struct SpawnOnDrop(Arc<AtomicUsize>);
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            let spawned = self.0.clone();
            drop(magpie::spawn(async move {
                spawned.fetch_add(1, SeqCst);
            }));
        }
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let rt = runtime(workers);
    for _ in 0..size(500) {
        let guard = SpawnOnDrop(ran.clone());
        drop(rt.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
    }
    drop(rt);
    // Spawns from destructors during shutdown go to the runtime being shut down, which
    // refuses them: none ran.
    assert_eq!(ran.load(SeqCst), 0);
}

/// Workers parked by `set_active_workers` hand their queued tasks on; dropping the runtime
/// then cancels whatever is left, wherever it is.
fn parked_workers_with_queued_tasks(workers: usize) {
    let rt = Runtime::builder()
        .worker_threads(workers)
        .max_workers(workers + 1)
        .build()
        .expect("runtime");
    let drops = Arc::new(AtomicUsize::new(0));
    let n = size(500);
    for i in 0..n {
        let pending = Pending(drops.clone());
        drop(
            rt.submit_to(i % (workers + 1), move || drop(pending))
                .unwrap(),
        );
        drop(rt.spawn(Pending(drops.clone())));
    }
    rt.set_active_workers(1).unwrap();
    drop(rt);
    assert_eq!(drops.load(SeqCst), 2 * n);
}
