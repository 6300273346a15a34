//! Async tasks and submitted closures on the workers: each runs exactly once and is dropped
//! exactly once, outputs and panics reach the `JoinHandle`, abort and detach, wakers from
//! other threads, `yield_now` fairness, fork-join inside tasks, `block_on`, `submit`,
//! `submit_to` and `spawn_blocking`.
//!
//! Accounting follows async-task's tests: futures and outputs carry drop counters (per task
//! where a failure should name the task), and the tests wait for events with channels,
//! barriers and `JoinHandle`s, never with sleeps. Each test arms a [`Watchdog`], so that a
//! lost wakeup fails with the test's name instead of stalling the binary.

mod async_support;
mod common;

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};

use async_support::{
    channel_waker, named_runtime, payload_message, poll_once, runtime, watchdog, Counter, DropSlot,
    Forever, Slots,
};
use common::quiesce;
use futures::channel::oneshot;
use magpie::task::{JoinError, JoinHandle};

/// Tasks in the volume tests (about 0.1 s for each 100,000 in a debug build on 2 CPUs).
const MANY: usize = 100_000;

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

/// Blocks until the task behind `handle` has finished, without taking its output: polls the
/// handle once with a waker that reports to a channel, and waits for the wake. The handle
/// must still be pending when this is called (the caller holds the task back with a gate).
fn wait_until_finished<T>(handle: &mut JoinHandle<T>, gate: oneshot::Sender<()>) {
    let (waker, woken) = channel_waker();
    assert!(
        poll_once(handle, &waker).is_pending(),
        "the task finished before its gate opened"
    );
    assert!(!handle.is_finished(), "finished while held at its gate");
    gate.send(()).expect("the task dropped its gate receiver");
    woken.recv().expect("the join waker was dropped unwoken");
    assert!(handle.is_finished(), "woken, but is_finished() is false");
}

/// An output that counts its drops: an output is dropped exactly once, by whoever reads it or
/// by the task when nobody will.
#[derive(Debug)]
struct Output {
    value: usize,
    drops: Counter,
}

impl Drop for Output {
    fn drop(&mut self) {
        self.drops.bump();
    }
}

/// An output that reports its drop on a channel, so a test can wait for it.
struct NoisyDrop(mpsc::Sender<()>);

impl Drop for NoisyDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

// ---------------------------------------------------------------------------------------------
// Exactly once
// ---------------------------------------------------------------------------------------------

#[test]
fn every_task_runs_once_and_drops_its_future_once() {
    let _guard = watchdog("every_task_runs_once_and_drops_its_future_once");
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        let runs = Slots::new(MANY);
        let drops = Slots::new(MANY);
        let handles: Vec<JoinHandle<usize>> = (0..MANY)
            .map(|i| {
                let guard = DropSlot::new(&drops, i);
                let runs = runs.clone();
                rt.spawn(async move {
                    let _guard = guard;
                    // Half the tasks wait once, so they are woken and polled again.
                    if i % 2 == 0 {
                        magpie::task::yield_now().await;
                    }
                    runs.bump(i);
                    i * 3
                })
            })
            .collect();
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(wait(handle).expect("task failed"), i * 3, "task {i}");
        }
        // The harness drops a future before it makes the result visible, so every future is
        // gone once every handle has resolved.
        runs.assert_all(1, &format!("runs on {workers} workers"));
        drops.assert_all(1, &format!("future drops on {workers} workers"));
    }
}

#[test]
fn tasks_spawned_from_tasks_run_once() {
    let _guard = watchdog("tasks_spawned_from_tasks_run_once");
    let rt = runtime(2);
    let runs = Slots::new(MANY);
    let drops = Slots::new(MANY);
    let (r, d) = (runs.clone(), drops.clone());
    // One parent spawns everything from a worker (the worker's local queue, not the inject
    // queue), then awaits every child.
    let sum = wait(rt.spawn(async move {
        let handles: Vec<JoinHandle<usize>> = (0..MANY)
            .map(|i| {
                let guard = DropSlot::new(&d, i);
                let r = r.clone();
                magpie::spawn(async move {
                    let _guard = guard;
                    r.bump(i);
                    i
                })
            })
            .collect();
        let mut sum = 0;
        for handle in handles {
            sum += handle.await.expect("child failed");
        }
        sum
    }))
    .expect("parent failed");
    assert_eq!(sum, MANY * (MANY - 1) / 2);
    runs.assert_all(1, "runs");
    drops.assert_all(1, "future drops");
}

#[test]
fn output_is_dropped_exactly_once() {
    let _guard = watchdog("output_is_dropped_exactly_once");
    let rt = runtime(2);
    let drops = Counter::new();

    // Read through the handle: the reader owns it.
    let d = drops.clone();
    let output = wait(rt.spawn(async move { Output { value: 7, drops: d } })).unwrap();
    assert_eq!(output.value, 7);
    assert_eq!(
        drops.get(),
        0,
        "the output was dropped before the reader dropped it"
    );
    drop(output);
    assert_eq!(drops.get(), 1);

    // The handle is dropped after the task finished, unread: the handle drops it.
    let d = drops.clone();
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let mut handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        Output { value: 8, drops: d }
    });
    wait_until_finished(&mut handle, gate_tx);
    assert_eq!(
        drops.get(),
        1,
        "the finished task dropped an output its handle holds"
    );
    drop(handle);
    assert_eq!(
        drops.get(),
        2,
        "dropping the handle of a finished task leaked its output"
    );

    // The handle is dropped first (detached): the task drops the output when it finishes.
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        NoisyDrop(dropped_tx)
    });
    drop(handle);
    gate_tx.send(()).unwrap();
    dropped_rx
        .recv()
        .expect("a detached task's output was never dropped");
    assert!(
        dropped_rx.try_recv().is_err(),
        "a detached output was dropped twice"
    );
}

// ---------------------------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------------------------

#[test]
fn panic_is_a_join_error_with_the_payload_and_the_worker_survives() {
    let _guard = watchdog("panic_is_a_join_error_with_the_payload_and_the_worker_survives");
    // One worker: if the panic killed it, nothing after it would run.
    let rt = runtime(1);
    for round in 0..10 {
        let drops = Counter::new();
        let guard = drops.on_drop();
        let err = wait(rt.spawn(async move {
            let _guard = guard;
            panic!("task panic")
        }))
        .expect_err("a panicking task returned Ok");
        assert!(err.is_panic(), "{err:?}");
        assert!(!err.is_cancelled(), "{err:?}");
        assert_eq!(drops.get(), 1, "the panicking future was not dropped once");
        assert!(err.to_string().contains("task panic"), "{err}");
        let payload = err.into_panic();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"task panic"));

        // A formatted message is a `String` payload.
        let err = wait(rt.spawn(async move { panic!("round {round}") })).unwrap_err();
        let payload = err.try_into_panic().expect("try_into_panic on a panic");
        assert_eq!(
            payload.downcast_ref::<String>().unwrap(),
            &format!("round {round}")
        );

        // Still working.
        assert_eq!(wait(rt.spawn(async move { round })).unwrap(), round);
    }
}

#[test]
fn panicking_output_drop_and_payload_drop_do_not_break_the_worker() {
    let _guard = watchdog("panicking_output_drop_and_payload_drop_do_not_break_the_worker");
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("output drop panic");
            }
        }
    }
    let rt = runtime(1);
    // A detached task whose output panics when the task drops it.
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        PanicOnDrop
    });
    drop(handle);
    gate_tx.send(()).unwrap();
    // The one worker still runs tasks.
    for i in 0..10 {
        assert_eq!(wait(rt.spawn(async move { i })).unwrap(), i);
    }
}

// ---------------------------------------------------------------------------------------------
// Abort
// ---------------------------------------------------------------------------------------------

#[test]
fn abort_before_the_task_runs() {
    let _guard = watchdog("abort_before_the_task_runs");
    // One worker, held in a submitted closure until the abort is done: the task cannot have
    // been polled when it is aborted.
    let rt = runtime(1);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = rt.submit(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv().unwrap();

    let polls = Counter::new();
    let drops = Counter::new();
    let handle = rt.spawn(Forever::new(&polls, &drops));
    handle.abort();
    handle.abort(); // Twice is the same as once.
    release_tx.send(()).unwrap();
    wait(blocker).unwrap();

    let err = wait(handle).expect_err("an aborted task returned Ok");
    assert!(err.is_cancelled(), "{err:?}");
    assert!(!err.is_panic(), "{err:?}");
    assert_eq!(polls.get(), 0, "an aborted task was polled");
    assert_eq!(
        drops.get(),
        1,
        "an aborted task's future was not dropped once"
    );
    assert!(err.try_into_panic().unwrap_err().is_cancelled());
}

#[test]
fn abort_a_submitted_closure_before_it_runs() {
    let _guard = watchdog("abort_a_submitted_closure_before_it_runs");
    let rt = runtime(1);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = rt.submit(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv().unwrap();

    let ran = Arc::new(AtomicBool::new(false));
    let drops = Counter::new();
    let guard = drops.on_drop();
    let r = ran.clone();
    let handle = rt.submit(move || {
        let _guard = guard;
        r.store(true, SeqCst);
    });
    handle.abort();
    release_tx.send(()).unwrap();
    wait(blocker).unwrap();
    assert!(wait(handle).unwrap_err().is_cancelled());
    assert!(!ran.load(SeqCst), "an aborted closure ran");
    assert_eq!(drops.get(), 1, "an aborted closure was not dropped once");
}

#[test]
fn abort_while_pending_on_a_future_nobody_wakes() {
    let _guard = watchdog("abort_while_pending_on_a_future_nobody_wakes");
    let rt = runtime(2);
    for _ in 0..100 {
        let polls = Counter::new();
        let drops = Counter::new();
        let (started_tx, started_rx) = mpsc::channel();
        let handle = rt.spawn(Forever::reporting(&polls, &drops, started_tx));
        started_rx.recv().unwrap();
        assert!(!handle.is_finished());
        handle.abort();
        let err = wait(handle).unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
        // Nobody woke it, so the abort dropped it without polling it again.
        assert_eq!(polls.get(), 1);
        assert_eq!(drops.get(), 1);
    }
}

#[test]
fn abort_while_pending_on_a_channel() {
    let _guard = watchdog("abort_while_pending_on_a_channel");
    let rt = runtime(2);
    for _ in 0..100 {
        let drops = Counter::new();
        let guard = drops.on_drop();
        let (started_tx, started_rx) = mpsc::channel();
        let (tx, rx) = oneshot::channel::<u32>();
        let handle = rt.spawn(async move {
            let _guard = guard;
            started_tx.send(()).unwrap();
            rx.await
        });
        started_rx.recv().unwrap();
        handle.abort();
        let err = wait(handle).unwrap_err();
        assert!(err.is_cancelled(), "{err:?}");
        assert_eq!(drops.get(), 1);
        // The receiver went with the future.
        assert!(
            tx.is_canceled(),
            "the aborted task's receiver is still alive"
        );
        assert_eq!(tx.send(1), Err(1));
    }
}

#[test]
fn abort_during_a_poll_cancels_at_the_next_pending() {
    let _guard = watchdog("abort_during_a_poll_cancels_at_the_next_pending");
    /// Reports that it is inside `poll`, waits there for the test's go, and returns Pending.
    struct Stall {
        inside: mpsc::Sender<()>,
        go: mpsc::Receiver<()>,
        polls: Counter,
    }
    impl Future for Stall {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
            self.polls.bump();
            let _ = self.inside.send(());
            let _ = self.go.recv();
            Poll::Pending
        }
    }
    let rt = runtime(2);
    let polls = Counter::new();
    let drops = Counter::new();
    let (inside_tx, inside_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let guard = drops.on_drop();
    let stall = Stall {
        inside: inside_tx,
        go: go_rx,
        polls: polls.clone(),
    };
    let handle = rt.spawn(async move {
        let _guard = guard;
        stall.await
    });
    inside_rx.recv().unwrap();
    handle.abort();
    assert!(
        !handle.is_finished(),
        "finished while its poll is still running"
    );
    go_tx.send(()).unwrap();
    let err = wait(handle).unwrap_err();
    assert!(err.is_cancelled(), "{err:?}");
    assert_eq!(polls.get(), 1);
    assert_eq!(drops.get(), 1);
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let _guard = watchdog("abort_after_completion_keeps_the_output");
    let rt = runtime(2);
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let mut handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        String::from("done")
    });
    wait_until_finished(&mut handle, gate_tx);
    handle.abort();
    assert!(handle.is_finished());
    assert_eq!(
        wait(handle).expect("abort after completion lost the output"),
        "done"
    );
}

#[test]
fn abort_from_another_thread_while_the_task_waits() {
    let _guard = watchdog("abort_from_another_thread_while_the_task_waits");
    let rt = runtime(2);
    let polls = Counter::new();
    let drops = Counter::new();
    let mut handles = Vec::new();
    let mut started = Vec::new();
    for _ in 0..1000 {
        let (tx, rx) = mpsc::channel();
        handles.push(rt.spawn(Forever::reporting(&polls, &drops, tx)));
        started.push(rx);
    }
    for rx in started {
        rx.recv().unwrap();
    }
    let handles = Arc::new(handles);
    std::thread::scope(|s| {
        let h = handles.clone();
        s.spawn(move || h.iter().for_each(JoinHandle::abort));
        handles.iter().rev().for_each(JoinHandle::abort);
    });
    for handle in Arc::into_inner(handles).unwrap() {
        assert!(wait(handle).unwrap_err().is_cancelled());
    }
    assert_eq!(polls.get(), 1000);
    assert_eq!(drops.get(), 1000);
}

// ---------------------------------------------------------------------------------------------
// is_finished and detaching
// ---------------------------------------------------------------------------------------------

#[test]
fn is_finished_follows_the_task() {
    let _guard = watchdog("is_finished_follows_the_task");
    let rt = runtime(2);
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let mut handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        5
    });
    assert!(!handle.is_finished());
    wait_until_finished(&mut handle, gate_tx);
    assert_eq!(wait(handle).unwrap(), 5);

    // A panicked task is finished too.
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let mut handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        panic!("finished by panicking")
    });
    wait_until_finished(&mut handle, gate_tx);
    assert!(wait(handle).unwrap_err().is_panic());
}

#[test]
fn dropping_the_handle_detaches_the_task() {
    let _guard = watchdog("dropping_the_handle_detaches_the_task");
    let rt = runtime(2);
    let ran = Counter::new();
    let drops = Counter::new();
    let (done_tx, done_rx) = mpsc::channel();
    let mut gates = Vec::new();
    for _ in 0..100 {
        let (gate_tx, gate_rx) = oneshot::channel::<()>();
        gates.push(gate_tx);
        let (ran, guard, done_tx) = (ran.clone(), drops.on_drop(), done_tx.clone());
        let handle = rt.spawn(async move {
            let _guard = guard;
            gate_rx.await.unwrap();
            ran.bump();
            done_tx.send(()).unwrap();
        });
        drop(handle);
    }
    drop(done_tx);
    // Every task is still waiting at its gate: detaching ran nothing.
    assert_eq!(ran.get(), 0);
    for gate in gates {
        gate.send(()).unwrap();
    }
    for _ in 0..100 {
        done_rx.recv().expect("a detached task never ran");
    }
    assert_eq!(ran.get(), 100);
    // The channel disconnects once every detached future (and its sender) is dropped.
    assert!(done_rx.recv().is_err());
    assert_eq!(drops.get(), 100);
}

// ---------------------------------------------------------------------------------------------
// Wakers
// ---------------------------------------------------------------------------------------------

/// Pending until a foreign thread, which it hands its waker to on the first poll, sets its
/// flag and wakes it.
struct WokenElsewhere {
    flag: Arc<AtomicBool>,
    waker_sink: Option<mpsc::Sender<(Waker, Arc<AtomicBool>)>>,
}

impl Future for WokenElsewhere {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.flag.load(SeqCst) {
            return Poll::Ready(());
        }
        if let Some(sink) = self.waker_sink.take() {
            sink.send((cx.waker().clone(), self.flag.clone())).unwrap();
        }
        // The foreign thread sets the flag before it wakes, so a poll that sees it clear will
        // be followed by a wake.
        Poll::Pending
    }
}

#[test]
fn wakers_fired_from_a_foreign_thread() {
    let _guard = watchdog("wakers_fired_from_a_foreign_thread");
    let rt = runtime(2);
    let (sink, wakers) = mpsc::channel::<(Waker, Arc<AtomicBool>)>();
    let waker_thread = std::thread::spawn(move || {
        let mut n = 0;
        for (i, (waker, flag)) in wakers.into_iter().enumerate() {
            flag.store(true, SeqCst);
            // Both ways of waking, from a thread that is not a worker.
            if i % 2 == 0 {
                waker.wake();
            } else {
                waker.wake_by_ref();
            }
            n += 1;
        }
        n
    });
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let future = WokenElsewhere {
                flag: Arc::new(AtomicBool::new(false)),
                waker_sink: Some(sink.clone()),
            };
            rt.spawn(async move {
                future.await;
                i
            })
        })
        .collect();
    drop(sink);
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i);
    }
    assert_eq!(waker_thread.join().unwrap(), 1000);
}

#[test]
fn waking_a_finished_task_does_nothing() {
    let _guard = watchdog("waking_a_finished_task_does_nothing");
    /// Ready on the second poll; gives away a clone of its waker on the first.
    struct KeepWaker {
        polls: Counter,
        out: Option<mpsc::Sender<Waker>>,
    }
    impl Future for KeepWaker {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.bump();
            match self.out.take() {
                Some(out) => {
                    out.send(cx.waker().clone()).unwrap();
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                None => Poll::Ready(()),
            }
        }
    }
    let rt = runtime(2);
    let polls = Counter::new();
    let (tx, rx) = mpsc::channel();
    let handle = rt.spawn(KeepWaker {
        polls: polls.clone(),
        out: Some(tx),
    });
    let waker = rx.recv().unwrap();
    wait(handle).unwrap();
    assert_eq!(polls.get(), 2);
    // The waker outlives its task; waking it, from here and from another thread, is a no-op.
    waker.wake_by_ref();
    let clone = waker.clone();
    std::thread::spawn(move || clone.wake()).join().unwrap();
    // A new task on the same worker proves the runtime is fine; the old one was not polled.
    assert_eq!(wait(rt.spawn(async { 3 })).unwrap(), 3);
    assert_eq!(polls.get(), 2, "a finished task was polled after a wake");
    drop(waker);
}

// ---------------------------------------------------------------------------------------------
// Fairness
// ---------------------------------------------------------------------------------------------

#[test]
fn yield_now_lets_another_task_run_on_one_worker() {
    let _guard = watchdog("yield_now_lets_another_task_run_on_one_worker");
    let rt = runtime(1);
    for _ in 0..20 {
        let flag = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let f = flag.clone();
        // A waits for a flag only B sets, yielding in between: on one worker, B can only run
        // if yield_now really gives the worker up.
        let a = rt.spawn(async move {
            started_tx.send(()).unwrap();
            let mut yields = 0u64;
            while !f.load(SeqCst) {
                magpie::task::yield_now().await;
                yields += 1;
            }
            yields
        });
        started_rx.recv().unwrap();
        let f = flag.clone();
        let b = rt.spawn(async move { f.store(true, SeqCst) });
        let yields = wait(a).unwrap();
        wait(b).unwrap();
        assert!(yields >= 1, "A saw B's flag without yielding");
    }
}

#[test]
fn yield_now_lets_locally_spawned_tasks_run_on_one_worker() {
    let _guard = watchdog("yield_now_lets_locally_spawned_tasks_run_on_one_worker");
    // As above, but the children are spawned by the yielding task itself, so they wait in
    // the worker's own queues (LIFO slot and ring), not in the inject queue that a worker
    // checks every so many tasks anyway: yield_now must put the parent behind them.
    let rt = runtime(1);
    let result = wait(rt.spawn(async {
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..8 {
            let done = done.clone();
            drop(magpie::spawn(async move {
                magpie::task::yield_now().await;
                done.fetch_add(1, SeqCst);
            }));
        }
        let mut yields = 0u64;
        while done.load(SeqCst) < 8 {
            magpie::task::yield_now().await;
            yields += 1;
        }
        yields
    }));
    assert!(result.unwrap() >= 1);
}

#[test]
fn a_task_that_wakes_itself_does_not_starve_others() {
    let _guard = watchdog("a_task_that_wakes_itself_does_not_starve_others");
    /// Always ready to run again: wakes itself and returns Pending until the flag is set.
    struct Spin {
        flag: Arc<AtomicBool>,
        started: Option<mpsc::Sender<()>>,
    }
    impl Future for Spin {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if let Some(started) = self.started.take() {
                started.send(()).unwrap();
            }
            if self.flag.load(SeqCst) {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    let rt = runtime(1);
    let flag = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = mpsc::channel();
    let spin = rt.spawn(Spin {
        flag: flag.clone(),
        started: Some(started_tx),
    });
    started_rx.recv().unwrap();
    // Another task, a submitted closure and a task spawned by a task all get the worker.
    let f = flag.clone();
    let other = rt.spawn(async move {
        magpie::spawn(async { 1 }).await.unwrap() + magpie::submit(|| 2).await.unwrap()
    });
    assert_eq!(wait(other).unwrap(), 3);
    let closure = rt.submit(move || f.store(true, SeqCst));
    wait(closure).unwrap();
    wait(spin).unwrap();

    // The same with the other task in the worker's own queues: a parent spawns a child that
    // sets the flag, then spins on it, waking itself.
    for _ in 0..20 {
        let flag = Arc::new(AtomicBool::new(false));
        let parent = rt.spawn(async move {
            let f = flag.clone();
            drop(magpie::spawn(async move { f.store(true, SeqCst) }));
            Spin {
                flag,
                started: None,
            }
            .await
        });
        wait(parent).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Fork-join inside tasks
// ---------------------------------------------------------------------------------------------

#[test]
fn join_and_scope_inside_a_task() {
    let _guard = watchdog("join_and_scope_inside_a_task");
    for workers in [1, 2] {
        let rt = runtime(workers);
        let handle = rt.spawn(async move {
            let (a, b) = magpie::join(|| fib(15), || fib(16));
            let mut squares = vec![0u64; 16];
            let total = AtomicUsize::new(0);
            magpie::scope(|s| {
                for (i, slot) in squares.iter_mut().enumerate() {
                    let total = &total;
                    s.spawn(move |_| {
                        *slot = (i * i) as u64;
                        total.fetch_add(1, SeqCst);
                    });
                }
            });
            (
                a,
                b,
                squares,
                total.into_inner(),
                magpie::current_num_workers(),
            )
        });
        let (a, b, squares, total, num) = wait(handle).unwrap();
        assert_eq!((a, b), (610, 987), "{workers} workers");
        assert_eq!(squares, (0..16u64).map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(total, 16);
        assert_eq!(num, workers, "join inside a task used another runtime");
    }
}

#[test]
fn join_inside_a_task_runs_halves_in_parallel() {
    let _guard = watchdog("join_inside_a_task_runs_halves_in_parallel");
    // Both halves wait on one barrier, so the join can only return if the other worker
    // (idle: nothing else runs on this runtime) steals the second half.
    let rt = named_runtime(2, "task-join");
    let handle = rt.spawn(async {
        let barrier = Barrier::new(2);
        let name = || std::thread::current().name().unwrap().to_owned();
        magpie::join(
            || {
                barrier.wait();
                name()
            },
            || {
                barrier.wait();
                name()
            },
        )
    });
    let (a, b) = wait(handle).unwrap();
    assert_ne!(a, b);
    assert!(
        a.starts_with("task-join-") && b.starts_with("task-join-"),
        "{a} {b}"
    );
}

#[test]
fn panic_in_a_join_inside_a_task_is_the_tasks_panic() {
    let _guard = watchdog("panic_in_a_join_inside_a_task_is_the_tasks_panic");
    let rt = runtime(2);
    let err = wait(rt.spawn(async { magpie::join(|| 1, || -> i32 { panic!("right half") }) }))
        .unwrap_err();
    assert_eq!(payload_message(&*err.into_panic()), "right half");
    assert_eq!(
        wait(rt.spawn(async { magpie::join(|| 1, || 2) })).unwrap(),
        (1, 2)
    );
}

// ---------------------------------------------------------------------------------------------
// Spawning from tasks
// ---------------------------------------------------------------------------------------------

#[test]
fn spawn_inside_a_task_uses_the_tasks_runtime() {
    let _guard = watchdog("spawn_inside_a_task_uses_the_tasks_runtime");
    // Three workers: not the global runtime's count on a 2-CPU machine, nor 1.
    let rt = runtime(3);
    let inner = wait(rt.spawn(async {
        let h = magpie::spawn(async { (magpie::current_num_workers(), 40) });
        let (workers, value) = h.await.unwrap();
        (workers, value + 2)
    }))
    .unwrap();
    assert_eq!(inner, (3, 42));
}

#[test]
fn a_chain_of_detached_spawns_runs_to_the_end() {
    let _guard = watchdog("a_chain_of_detached_spawns_runs_to_the_end");
    fn link(remaining: usize, hops: Counter, done: mpsc::Sender<()>) {
        hops.bump();
        if remaining == 0 {
            done.send(()).unwrap();
        } else {
            // Detached: the handle is dropped at once.
            drop(magpie::spawn(
                async move { link(remaining - 1, hops, done) },
            ));
        }
    }
    let rt = runtime(2);
    let hops = Counter::new();
    let (done_tx, done_rx) = mpsc::channel();
    let h = hops.clone();
    drop(rt.spawn(async move { link(1000, h, done_tx) }));
    done_rx.recv().expect("the chain broke");
    assert_eq!(hops.get(), 1001);
}

// ---------------------------------------------------------------------------------------------
// block_on
// ---------------------------------------------------------------------------------------------

#[test]
fn block_on_from_an_outside_thread_returns_the_value() {
    let _guard = watchdog("block_on_from_an_outside_thread_returns_the_value");
    let rt = runtime(2);
    assert_eq!(rt.block_on(async { 6 * 7 }), 42);
    // A future that waits for a task on the runtime.
    let h = rt.spawn(async { String::from("from a task") });
    assert_eq!(rt.block_on(h).unwrap(), "from a task");
    // A future woken by a foreign thread.
    let (tx, rx) = oneshot::channel();
    let sender = std::thread::spawn(move || tx.send(9).unwrap());
    assert_eq!(rt.block_on(rx), Ok(9));
    sender.join().unwrap();
    // block_on itself runs on the calling thread, not on a worker.
    assert_eq!(rt.block_on(async { magpie::current_worker_index() }), None);
}

#[test]
fn block_on_makes_its_runtime_current() {
    let _guard = watchdog("block_on_makes_its_runtime_current");
    let rt = named_runtime(3, "current");
    let (workers, spawned, joined) = rt.block_on(async {
        let spawned = magpie::spawn(async { std::thread::current().name().unwrap().to_owned() })
            .await
            .unwrap();
        let joined = magpie::join(
            || std::thread::current().name().map(str::to_owned),
            || std::thread::current().name().map(str::to_owned),
        );
        (magpie::current_num_workers(), spawned, joined)
    });
    let ours = |name: &Option<String>| name.as_deref().is_some_and(|n| n.starts_with("current-"));
    assert!(
        spawned.starts_with("current-") && ours(&joined.0) && ours(&joined.1) && workers == 3,
        "inside block_on: magpie::spawn ran on {spawned:?}, magpie::join's halves on {:?} and \
         {:?}, current_num_workers() is {workers}; expected the block_on's runtime \
         (\"current-*\", 3 workers) for all",
        joined.0,
        joined.1
    );
}

#[test]
fn block_on_from_many_threads_at_once() {
    let _guard = watchdog("block_on_from_many_threads_at_once");
    let rt = runtime(2);
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (rt, total) = (&rt, &total);
            s.spawn(move || {
                for i in 0..100 {
                    let v =
                        rt.block_on(
                            async move { rt.spawn(async move { t * 1000 + i }).await.unwrap() },
                        );
                    assert_eq!(v, t * 1000 + i);
                    total.fetch_add(1, SeqCst);
                }
            });
        }
    });
    assert_eq!(total.load(SeqCst), 800);
}

#[test]
fn free_block_on_outside_any_runtime_uses_the_global_one() {
    let _guard = watchdog("free_block_on_outside_any_runtime_uses_the_global_one");
    let value = magpie::block_on(async { magpie::spawn(async { 11 }).await.unwrap() });
    assert_eq!(value, 11);
}

#[test]
fn block_on_on_a_worker_panics_with_a_clear_message() {
    let _guard = watchdog("block_on_on_a_worker_panics_with_a_clear_message");
    let rt = runtime(1);

    // Inside install.
    let result = rt.install(|| panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(async { 1 }))));
    let message = payload_message(&*result.expect_err("block_on on a worker returned"));
    assert!(message.contains("block_on"), "unclear message: {message:?}");

    // Inside a task, through the free function.
    let err = wait(rt.spawn(async { magpie::block_on(async { 1 }) })).unwrap_err();
    assert!(err.is_panic(), "{err:?}");
    let message = payload_message(&*err.into_panic());
    assert!(message.contains("block_on"), "unclear message: {message:?}");

    // Inside a submitted closure.
    let err = wait(rt.submit(|| magpie::block_on(async { 1 }))).unwrap_err();
    assert!(err.is_panic(), "{err:?}");

    // JoinHandle::join blocks too: refused on a worker in the same way.
    let err = wait(rt.spawn(async {
        let inner = magpie::spawn(async { 1 });
        inner.join()
    }))
    .unwrap_err();
    let message = payload_message(&*err.into_panic());
    assert!(message.contains("join"), "unclear message: {message:?}");

    // The one worker survived all four.
    assert_eq!(rt.block_on(async { 5 }), 5);
    assert_eq!(wait(rt.spawn(async { 6 })).unwrap(), 6);
}

// ---------------------------------------------------------------------------------------------
// submit and submit_to
// ---------------------------------------------------------------------------------------------

#[test]
fn submit_runs_the_closure_on_a_worker() {
    let _guard = watchdog("submit_runs_the_closure_on_a_worker");
    let rt = runtime(2);
    let handles: Vec<_> = (0..1000)
        .map(|i| rt.submit(move || (i * 2, magpie::current_worker_index())))
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        let (value, worker) = wait(handle).unwrap();
        assert_eq!(value, i * 2);
        assert!(worker.is_some_and(|w| w < 2), "ran on {worker:?}");
    }
    // A panic in a closure is the handle's error; the workers keep going.
    let err = wait(rt.submit(|| -> u8 { panic!("closure panic") })).unwrap_err();
    assert_eq!(payload_message(&*err.into_panic()), "closure panic");
    assert_eq!(rt.submit(|| 1).join().unwrap(), 1);
    // The free function, from a task: the task's runtime.
    let n = wait(rt.spawn(async { magpie::submit(magpie::current_num_workers).await.unwrap() }));
    assert_eq!(n.unwrap(), 2);
}

#[test]
fn submit_to_runs_on_a_worker_and_returns_the_value() {
    let _guard = watchdog("submit_to_runs_on_a_worker_and_returns_the_value");
    let rt = runtime(3);
    for round in 0..50 {
        for index in 0..3 {
            let handle = rt
                .submit_to(index, move || (round, magpie::current_worker_index()))
                .expect("an index in range was refused");
            let (value, worker) = wait(handle).unwrap();
            assert_eq!(value, round);
            // Another worker may have stolen it; it ran on a worker all the same.
            assert!(worker.is_some_and(|w| w < 3), "ran on {worker:?}");
        }
    }
    // One worker: the index is 0, and only worker 0 can run it.
    let rt = runtime(1);
    let worker = wait(rt.submit_to(0, magpie::current_worker_index).unwrap()).unwrap();
    assert_eq!(worker, Some(0));
}

#[test]
fn submit_to_reaches_the_free_worker_when_the_other_is_busy() {
    let _guard = watchdog("submit_to_reaches_the_free_worker_when_the_other_is_busy");
    // Worker `b` is held in a closure; a closure submitted to the other worker can only run
    // there (b cannot steal while it is blocked).
    let rt = runtime(2);
    for _ in 0..20 {
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let blocker = rt
            .submit_to(0, move || {
                started_tx
                    .send(magpie::current_worker_index().unwrap())
                    .unwrap();
                release_rx.recv().unwrap();
            })
            .unwrap();
        let busy = started_rx.recv().unwrap();
        let free = 1 - busy;
        let ran_on = wait(rt.submit_to(free, magpie::current_worker_index).unwrap()).unwrap();
        assert_eq!(ran_on, Some(free));
        release_tx.send(()).unwrap();
        wait(blocker).unwrap();
    }
}

#[test]
fn submit_to_out_of_range_is_an_error_naming_the_index() {
    let _guard = watchdog("submit_to_out_of_range_is_an_error_naming_the_index");
    let rt = runtime(2);
    for index in [2, 3, 1000, usize::MAX] {
        let ran = Arc::new(AtomicBool::new(false));
        let drops = Counter::new();
        let guard = drops.on_drop();
        let r = ran.clone();
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.submit_to(index, move || {
                let _guard = guard;
                r.store(true, SeqCst);
            })
        }))
        .expect("submit_to panicked on a bad index");
        let err = result.expect_err("an out-of-range index was accepted");
        let message = err.to_string();
        assert!(
            message.contains(&index.to_string()),
            "the message does not name index {index}: {message:?}"
        );
        let _: &dyn std::error::Error = &err;
        // The error does not hand the closure back: submit_to dropped it, unrun.
        assert!(!ran.load(SeqCst));
        assert_eq!(drops.get(), 1, "the refused closure was not dropped once");
    }
    // The runtime is unaffected.
    assert_eq!(wait(rt.submit_to(1, || 1).unwrap()).unwrap(), 1);
}

// ---------------------------------------------------------------------------------------------
// spawn_blocking
// ---------------------------------------------------------------------------------------------

#[test]
fn spawn_blocking_runs_off_the_workers() {
    let _guard = watchdog("spawn_blocking_runs_off_the_workers");
    let rt = runtime(2);
    let (value, worker) = wait(rt.spawn_blocking(|| (17, magpie::current_worker_index()))).unwrap();
    assert_eq!(value, 17);
    assert_eq!(worker, None, "a blocking closure ran on a worker");
    // The free function, from a task, awaited in the task.
    let worker = wait(rt.spawn(async {
        magpie::spawn_blocking(magpie::current_worker_index)
            .await
            .unwrap()
    }))
    .unwrap();
    assert_eq!(worker, None);
    // A panic is the handle's error.
    let err = wait(rt.spawn_blocking(|| -> u8 { panic!("blocking panic") })).unwrap_err();
    assert_eq!(payload_message(&*err.into_panic()), "blocking panic");
}

#[test]
fn a_blocking_closure_spawns_onto_its_own_runtime() {
    let _guard = watchdog("a_blocking_closure_spawns_onto_its_own_runtime");
    // The closure's `magpie::spawn` must reach `rt` (its count of tasks spawned from outside
    // its workers goes up by one), not the global runtime; the worker count tells the two
    // apart too, unless the machine has exactly three cores.
    let rt = runtime(3);
    let before = rt.stats().tasks_spawned_remote;
    let (workers, on_worker) = wait(rt.spawn_blocking(|| {
        let task = magpie::spawn(async { magpie::current_worker_index() });
        (magpie::current_num_workers(), task.join().unwrap())
    }))
    .unwrap();
    assert_eq!(workers, 3, "the blocking closure saw another runtime");
    assert!(
        on_worker.is_some(),
        "the spawned task did not run on a worker"
    );
    assert_eq!(
        rt.stats().tasks_spawned_remote,
        before + 1,
        "the spawned task went to another runtime"
    );
}

#[test]
fn sixty_four_blocking_closures_run_at_once() {
    let _guard = watchdog("sixty_four_blocking_closures_run_at_once");
    // Each waits until all 64 are running: the pool must give each its own thread.
    let rt = runtime(2);
    let barrier = Arc::new(Barrier::new(64));
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let barrier = barrier.clone();
            rt.spawn_blocking(move || {
                barrier.wait();
                i
            })
        })
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i);
    }
}

#[test]
fn a_blocked_closure_does_not_hold_the_worker() {
    let _guard = watchdog("a_blocked_closure_does_not_hold_the_worker");
    // One worker. The blocking closure waits for a value that only a later task sends: the
    // task can run only if the blocking closure is not on the worker.
    let rt = runtime(1);
    let (tx, rx) = mpsc::channel::<u32>();
    let blocked = rt.spawn(async move {
        magpie::spawn_blocking(move || rx.recv().unwrap())
            .await
            .unwrap()
    });
    let sender = rt.spawn(async move { tx.send(23).unwrap() });
    wait(sender).unwrap();
    assert_eq!(wait(blocked).unwrap(), 23);
}

// ---------------------------------------------------------------------------------------------
// JoinHandle::join and the handle's traits
// ---------------------------------------------------------------------------------------------

#[test]
fn join_from_plain_threads() {
    let _guard = watchdog("join_from_plain_threads");
    let rt = runtime(2);
    let handles: Vec<_> = (0..16).map(|i| rt.spawn(async move { i * i })).collect();
    let waiters: Vec<_> = handles
        .into_iter()
        .map(|h| std::thread::spawn(move || h.join()))
        .collect();
    for (i, waiter) in waiters.into_iter().enumerate() {
        assert_eq!(waiter.join().unwrap().unwrap(), i * i);
    }
    // A task that finishes after join() started waiting.
    let (gate_tx, gate_rx) = oneshot::channel::<()>();
    let handle = rt.spawn(async move {
        gate_rx.await.unwrap();
        "late"
    });
    let waiter = std::thread::spawn(move || handle.join());
    gate_tx.send(()).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), "late");
    // join() of a panicked task and of an aborted one.
    let err = rt
        .spawn(async { panic!("joined panic") })
        .join()
        .unwrap_err();
    assert!(err.is_panic());
    let polls = Counter::new();
    let drops = Counter::new();
    let handle = rt.spawn(Forever::new(&polls, &drops));
    handle.abort();
    assert!(handle.join().unwrap_err().is_cancelled());
    assert_eq!(drops.get(), 1);
}

#[test]
fn handles_and_errors_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn unpin<T: Unpin>() {}
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    send_sync::<JoinHandle<u8>>();
    send_sync::<JoinHandle<Mutex<u8>>>();
    unpin::<JoinHandle<std::marker::PhantomPinned>>();
    error::<JoinError>();
    send_sync::<magpie::SubmitError>();
    error::<magpie::SubmitError>();
    // The crate-root re-export is the same type.
    let rt = runtime(1);
    let handle: magpie::JoinHandle<u8> = rt.spawn(async { 1 });
    assert_eq!(handle.join().unwrap(), 1);
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

#[test]
fn stats_count_tasks_exactly() {
    let _guard = watchdog("stats_count_tasks_exactly");
    let rt = runtime(2);
    let stats = rt.stats();
    assert_eq!(
        (
            stats.tasks_executed(),
            stats.tasks_polled(),
            stats.tasks_alive
        ),
        (0, 0, 0),
        "a new runtime has counted tasks: {stats:?}"
    );

    // 100 tasks that wait on a channel: alive, polled once, not finished.
    let mut senders = Vec::new();
    let mut started = Vec::new();
    let waiting: Vec<_> = (0..100)
        .map(|i| {
            let (tx, rx) = oneshot::channel::<usize>();
            let (started_tx, started_rx) = mpsc::channel();
            senders.push(tx);
            started.push(started_rx);
            rt.spawn(async move {
                started_tx.send(()).unwrap();
                rx.await.unwrap() + i
            })
        })
        .collect();
    for rx in started {
        rx.recv().unwrap();
    }
    quiesce(&rt);
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 100, "{stats:?}");
    assert_eq!(stats.tasks_executed(), 0, "{stats:?}");
    assert_eq!(stats.tasks_polled(), 100, "{stats:?}");

    // 1000 tasks and 500 closures that finish on their first poll; then the 100 waiting
    // ones, each polled a second time.
    let ready: Vec<_> = (0..1000).map(|i| rt.spawn(async move { i })).collect();
    let closures: Vec<_> = (0..500).map(|i| rt.submit(move || i)).collect();
    for (i, handle) in ready.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i);
    }
    for (i, handle) in closures.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i);
    }
    for tx in senders {
        tx.send(1).unwrap();
    }
    for (i, handle) in waiting.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i + 1);
    }
    quiesce(&rt);
    let stats = rt.stats();
    assert_eq!(stats.tasks_executed(), 1600, "{stats:?}");
    // Each task is polled at least once, the waiting ones twice; a poll is never lost.
    assert!(stats.tasks_polled() >= 1700, "{stats:?}");
    assert_eq!(
        stats.tasks_alive, 0,
        "finished tasks still counted alive: {stats:?}"
    );
    let per_worker: u64 = stats.workers.iter().map(|w| w.tasks_executed).sum();
    assert_eq!(per_worker, 1600);
    // Every task spawned from this thread went through the inject queue.
    assert!(
        stats.workers.iter().any(|w| w.inject_pulls > 0),
        "{stats:?}"
    );
}

#[test]
fn children_of_a_blocked_worker_are_stolen() {
    let _guard = watchdog("children_of_a_blocked_worker_are_stolen");
    // The parent queues ten children on its own worker, then blocks that worker until all
    // ten have run: only the other worker can run them, by stealing them. No stall monitor:
    // past the threshold it would hand them to the inject queue, and none would be stolen.
    let rt = common::runtime_without_monitor(2);
    let parent = rt.spawn(async {
        let parent_worker = magpie::current_worker_index().unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..10 {
            let tx = tx.clone();
            drop(magpie::spawn(async move {
                tx.send((i, magpie::current_worker_index().unwrap()))
                    .unwrap();
            }));
        }
        let ran: Vec<(usize, usize)> = (0..10).map(|_| rx.recv().unwrap()).collect();
        (parent_worker, ran)
    });
    let (parent_worker, ran) = wait(parent).unwrap();
    let mut seen: Vec<usize> = ran.iter().map(|&(i, _)| i).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert!(
        ran.iter().all(|&(_, worker)| worker != parent_worker),
        "a child ran on its blocked parent's worker: {ran:?}"
    );
    quiesce(&rt);
    let stats = rt.stats();
    let thief = &stats.workers[1 - parent_worker];
    assert!(thief.tasks_stolen >= 1, "{stats:?}");
    assert!(thief.steal_operations + thief.lifo_steals >= 1, "{stats:?}");
}
