//! Tests of the task allocation and its handles: polling, waking, joining, aborting, panics
//! and shutdown, with exact accounting of futures, outputs and allocations dropped.
//!
//! Every test holds [`serial`] so that the global [`LIVE_TASKS`] tally is this test's alone,
//! and ends by checking it is back to zero.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use super::block::{Batch, BlockSpares, Tally, LIVE_BLOCKS, MAX_SLOTS, MAX_SPARES};
use super::error::JoinError;
use super::join::JoinHandle;
use super::notified::{new_task, new_task_in, Notified, Schedule};
use super::raw::LIVE_TASKS;
use super::raw::{Identity, Origin};
use crate::sync::atomic::*;
use crate::sync::{lock, Arc, AtomicBool, AtomicUsize, Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    lock(&SERIAL)
}

fn live_tasks() -> usize {
    LIVE_TASKS.load(SeqCst)
}

/// Blocks of batch cells alive (`block.rs`). Only this module's tests make blocks in the
/// library's test binary, and they hold [`serial`].
fn live_blocks() -> usize {
    LIVE_BLOCKS.load(SeqCst)
}

type Queue = Arc<Mutex<VecDeque<Notified<TestSched>>>>;

/// A scheduler that queues tasks for the test thread, and counts how many task allocations
/// were freed (each task owns one `TestSched`, dropped when it is freed).
struct TestSched {
    queue: Queue,
    freed: Arc<AtomicUsize>,
    /// Where freed blocks of batch cells wait, if this runtime keeps any (`block.rs`).
    spares: Option<Arc<BlockSpares>>,
}

impl Schedule for TestSched {
    fn schedule(&self, task: Notified<TestSched>) {
        lock(&self.queue).push_back(task);
    }

    fn block_spares(&self) -> Option<&BlockSpares> {
        self.spares.as_deref()
    }
}

impl Drop for TestSched {
    fn drop(&mut self) {
        self.freed.fetch_add(1, SeqCst);
    }
}

#[derive(Default)]
struct Runtime {
    queue: Queue,
    freed: Arc<AtomicUsize>,
    spares: Option<Arc<BlockSpares>>,
}

impl Runtime {
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (notified, handle) = new_task(
            future,
            self.sched(),
            Identity::new(Origin::caller(), 0, false),
        );
        lock(&self.queue).push_back(notified);
        handle
    }

    /// Spawns `futures` as one batch, as `Runtime::submit_batch` does: their cells share
    /// blocks (`block.rs`), each sized for the tasks still to come if `known_length`, else
    /// growing from 4.
    fn spawn_batch<F>(&self, futures: Vec<F>, known_length: bool) -> Vec<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut cells = Batch::new(self.spares.as_deref()).expect("small cells go in blocks");
        let mut left = futures.len();
        let handles = futures
            .into_iter()
            .map(|future| {
                let sched = self.sched();
                let hint = if known_length { left } else { 0 };
                left -= 1;
                let identity = Identity::new(Origin::caller(), 0, false);
                let (notified, handle) =
                    new_task_in(future, sched, identity, Some((&mut cells, hint)));
                lock(&self.queue).push_back(notified);
                handle
            })
            .collect();
        drop(cells);
        handles
    }

    /// A runtime that keeps freed blocks of batch cells as spares, as the real one does.
    fn with_spares() -> Runtime {
        Runtime {
            spares: Some(Arc::new(BlockSpares::default())),
            ..Runtime::default()
        }
    }

    /// A new task's scheduler.
    fn sched(&self) -> TestSched {
        TestSched {
            queue: self.queue.clone(),
            freed: self.freed.clone(),
            spares: self.spares.clone(),
        }
    }

    fn pop(&self) -> Option<Notified<TestSched>> {
        lock(&self.queue).pop_front()
    }

    /// Runs queued tasks until the queue is empty; returns how many runs there were.
    fn run_until_idle(&self) -> usize {
        let mut runs = 0;
        while let Some(task) = self.pop() {
            task.run();
            runs += 1;
        }
        runs
    }

    fn queued(&self) -> usize {
        lock(&self.queue).len()
    }

    fn freed(&self) -> usize {
        self.freed.load(SeqCst)
    }
}

/// Counts drops of whatever holds it.
#[derive(Clone, Default)]
struct DropCount(Arc<AtomicUsize>);

impl DropCount {
    fn get(&self) -> usize {
        self.0.load(SeqCst)
    }
}

struct Tracked(DropCount);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0 .0.fetch_add(1, SeqCst);
    }
}

/// An output that counts its drops.
struct Output(u32, #[allow(dead_code)] Tracked);

/// A future made of a poll closure, counting its polls and drops.
struct TestFuture<P> {
    poll: P,
    polls: Arc<AtomicUsize>,
    _tracked: Tracked,
}

impl<P: FnMut(&mut Context<'_>) -> Poll<T> + Unpin, T> Future for TestFuture<P> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.polls.fetch_add(1, SeqCst);
        (self.poll)(cx)
    }
}

fn future<P, T>(drops: &DropCount, polls: &Arc<AtomicUsize>, poll: P) -> TestFuture<P>
where
    P: FnMut(&mut Context<'_>) -> Poll<T> + Unpin,
{
    TestFuture {
        poll,
        polls: polls.clone(),
        _tracked: Tracked(drops.clone()),
    }
}

/// A future whose destructor panics (after counting the drop).
struct PanicOnDrop(DropCount, &'static str);

impl Future for PanicOnDrop {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
        Poll::Pending
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0 .0.fetch_add(1, SeqCst);
        // `resume_unwind` skips the panic hook, keeping the test output clean.
        resume_unwind(Box::new(self.1));
    }
}

struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Counts wakes.
#[derive(Default)]
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Polls `future` on this thread, parking between polls, for at most 10 s.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(std::sync::Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        assert!(Instant::now() < deadline, "block_on timed out");
        thread::park_timeout(Duration::from_millis(100));
    }
}

/// Polls a handle once with a waker that counts wakes.
fn poll_once<T>(handle: &mut JoinHandle<T>, waker: &Waker) -> Poll<Result<T, JoinError>> {
    Pin::new(handle).poll(&mut Context::from_waker(waker))
}

fn pending_forever(drops: &DropCount, polls: &Arc<AtomicUsize>) -> impl Future<Output = u32> {
    future(drops, polls, |_: &mut Context<'_>| Poll::Pending)
}

#[test]
fn ready_future_yields_its_output() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls, outputs) = (DropCount::default(), Arc::default(), DropCount::default());
    let out = outputs.clone();
    let mut value = Some(Output(42, Tracked(out)));
    let handle = rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
        Poll::Ready(value.take().unwrap())
    }));
    assert!(!handle.is_finished());
    assert_eq!(rt.run_until_idle(), 1);
    assert!(handle.is_finished());
    assert_eq!(drops.get(), 1, "future dropped once, at completion");
    assert_eq!(rt.freed(), 0, "the handle keeps the task");
    let output = block_on(handle).unwrap();
    assert_eq!(output.0, 42);
    assert_eq!(rt.freed(), 1);
    assert_eq!(outputs.get(), 0);
    drop(output);
    assert_eq!(outputs.get(), 1);
    assert_eq!(polls.load(SeqCst), 1);
    assert_eq!(live_tasks(), 0);
}

#[test]
fn pending_task_woken_from_another_thread_completes() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let slot: Arc<Mutex<Option<Waker>>> = Arc::default();
    let flag = Arc::new(AtomicBool::new(false));
    let (s, f) = (slot.clone(), flag.clone());
    let mut handle = rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
        *lock(&s) = Some(cx.waker().clone());
        if f.load(SeqCst) {
            Poll::Ready(5)
        } else {
            Poll::Pending
        }
    }));
    assert_eq!(rt.run_until_idle(), 1);
    assert_eq!(rt.queued(), 0);
    // The handle registers a waker, which completion must wake.
    let join_waker = std::sync::Arc::new(CountWaker::default());
    assert!(poll_once(&mut handle, &Waker::from(join_waker.clone())).is_pending());

    // A clone that outlives the task, woken later.
    let kept = lock(&slot).clone().unwrap();
    let (s, f) = (slot.clone(), flag.clone());
    thread::spawn(move || {
        f.store(true, SeqCst);
        lock(&s).take().unwrap().wake();
    })
    .join()
    .unwrap();
    assert_eq!(rt.queued(), 1);
    assert_eq!(rt.run_until_idle(), 1);
    assert_eq!(
        join_waker.0.load(SeqCst),
        1,
        "completion woke the join waker once"
    );
    assert_eq!(block_on(handle).unwrap(), 5);
    assert_eq!(drops.get(), 1);
    assert_eq!(polls.load(SeqCst), 2);

    // Waking a completed task is a no-op; the kept waker still holds the allocation.
    assert_eq!(rt.freed(), 0);
    kept.wake_by_ref();
    let clone = kept.clone();
    clone.wake(); // By value: drops the clone's reference.

    assert_eq!(rt.queued(), 0);
    // The future stored a second clone in the slot on its last poll.
    lock(&slot).take().unwrap().wake();
    assert_eq!(rt.freed(), 0);
    drop(kept);
    assert_eq!(rt.freed(), 1);
    assert_eq!(live_tasks(), 0);
}

#[test]
fn wake_during_poll_reschedules_once() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let p = polls.clone();
    let handle = rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
        if p.load(SeqCst) < 3 {
            cx.waker().wake_by_ref();
            let clone = cx.waker().clone();
            clone.wake(); // By value, while running: sets NOTIFIED, drops a reference.

            Poll::Pending
        } else {
            Poll::Ready(1)
        }
    }));
    assert_eq!(rt.run_until_idle(), 3);
    assert_eq!(block_on(handle).unwrap(), 1);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

// A task that wakes itself by reference during its own poll: with a completion, an abort,
// a wake from another thread, and another task's polls nested in its own on the same thread.
// (They also guard any shortcut for self-wakes, such as the thread-local mark tried and
// dropped on 2026-11-26: BENCHMARKS.md, "yield_many against the futures pool".)

#[test]
fn self_wake_then_ready_runs_once() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let handle = rt.spawn(future(&drops, &polls, |cx: &mut Context<'_>| {
        cx.waker().wake_by_ref();
        Poll::Ready(4)
    }));
    assert_eq!(rt.run_until_idle(), 1, "a completed task is not requeued");
    assert_eq!(block_on(handle).unwrap(), 4);
    assert_eq!(polls.load(SeqCst), 1);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

#[test]
fn self_wake_then_abort_during_the_poll_cancels() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let handle: Arc<Mutex<Option<JoinHandle<u32>>>> = Arc::default();
    let h = handle.clone();
    *lock(&handle) = Some(
        rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
            cx.waker().wake_by_ref();
            lock(&h).as_ref().unwrap().abort();
            Poll::Pending
        })),
    );
    assert_eq!(rt.run_until_idle(), 1, "cancelled, not requeued");
    assert_eq!(drops.get(), 1);
    let handle = lock(&handle).take().unwrap();
    assert!(block_on(handle).unwrap_err().is_cancelled());
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn self_wake_from_another_thread_during_the_poll_takes_the_ordinary_path() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let p = polls.clone();
    let handle = rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
        if p.load(SeqCst) == 1 {
            // Not this thread's poll: the wake sets NOTIFIED on the running task itself.
            let waker = cx.waker();
            thread::scope(|s| {
                s.spawn(move || waker.wake_by_ref());
            });
            Poll::Pending
        } else {
            Poll::Ready(5)
        }
    }));
    assert_eq!(
        rt.run_until_idle(),
        2,
        "requeued once by the other thread's wake"
    );
    assert_eq!(block_on(handle).unwrap(), 5);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

/// Polls a task that, in its first poll, optionally wakes itself by reference, then runs
/// another task's polls nested in its own on the same thread; that inner task wakes itself
/// and optionally wakes the outer one by reference. Returns how many runs the outer task
/// got.
fn nested_self_wakes(outer_wakes_itself: bool, inner_wakes_outer: bool) -> usize {
    let rt = std::sync::Arc::new(Runtime::default());
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let (inner_drops, inner_polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let outer_waker: std::sync::Arc<Mutex<Option<Waker>>> = Default::default();
    let (p, nested_rt, ow) = (polls.clone(), rt.clone(), outer_waker.clone());
    let (id, ip, iw) = (
        inner_drops.clone(),
        inner_polls.clone(),
        outer_waker.clone(),
    );
    let outer = rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
        if p.load(SeqCst) > 1 {
            return Poll::Ready(1);
        }
        *lock(&ow) = Some(cx.waker().clone());
        if outer_wakes_itself {
            cx.waker().wake_by_ref();
        }
        let (count, iw) = (ip.clone(), iw.clone());
        let inner = nested_rt.spawn(future(&id, &ip, move |cx: &mut Context<'_>| {
            if count.load(SeqCst) == 1 {
                cx.waker().wake_by_ref();
                if inner_wakes_outer {
                    lock(&iw).as_ref().unwrap().wake_by_ref();
                }
                Poll::Pending
            } else {
                Poll::Ready(2)
            }
        }));
        assert_eq!(
            nested_rt.run_until_idle(),
            2,
            "the inner task woke itself once"
        );
        assert_eq!(block_on(inner).unwrap(), 2);
        Poll::Pending
    }));
    let runs = rt.run_until_idle();
    if runs == 2 {
        assert_eq!(block_on(outer).unwrap(), 1);
    } else {
        drop(outer);
    }
    drop(lock(&outer_waker).take());
    assert_eq!(rt.run_until_idle(), 0, "no stray Notified left queued");
    assert_eq!(inner_polls.load(SeqCst), 2);
    assert_eq!((drops.get(), inner_drops.get()), (1, 1));
    assert_eq!((rt.freed(), live_tasks()), (2, 0));
    runs
}

#[test]
fn self_wake_survives_a_nested_poll_on_the_same_thread() {
    let _s = serial();
    // The outer task's wake of itself is kept across the inner task's poll, whose own
    // wake is the inner task's: the outer task runs again once.
    assert_eq!(nested_self_wakes(true, false), 2);
}

#[test]
fn waking_an_outer_task_from_a_nested_poll_takes_the_ordinary_path() {
    let _s = serial();
    // The inner poll wakes the outer task, running one frame up: the wake goes to the
    // outer task (not the inner one), which runs again once.
    assert_eq!(nested_self_wakes(false, true), 2);
    assert_eq!(nested_self_wakes(true, true), 2, "two wakes, one requeue");
}

#[test]
fn a_nested_poll_without_wakes_leaves_the_outer_task_idle() {
    let _s = serial();
    assert_eq!(nested_self_wakes(false, false), 1);
}

#[test]
fn join_waker_is_replaced_and_woken_once() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let mut handle = rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
        if f.load(SeqCst) {
            Poll::Ready(3)
        } else {
            cx.waker().wake_by_ref(); // Stay queued: the test flips the flag.
            Poll::Pending
        }
    }));
    let (a, b) = (
        std::sync::Arc::new(CountWaker::default()),
        std::sync::Arc::new(CountWaker::default()),
    );
    let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
    assert!(poll_once(&mut handle, &wa).is_pending());
    assert!(poll_once(&mut handle, &wa).is_pending()); // Same waker: kept.
    assert!(poll_once(&mut handle, &wb).is_pending()); // Replaced.
    rt.pop().unwrap().run();
    flag.store(true, SeqCst);
    rt.run_until_idle();
    assert_eq!((a.0.load(SeqCst), b.0.load(SeqCst)), (0, 1));
    assert!(matches!(poll_once(&mut handle, &wa), Poll::Ready(Ok(3))));
    drop(handle);
    assert_eq!(
        std::sync::Arc::strong_count(&b),
        2,
        "the join waker was dropped"
    );
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

#[test]
fn join_handle_dropped_before_completion() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls, outputs) = (DropCount::default(), Arc::default(), DropCount::default());
    let out = outputs.clone();
    let handle = rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
        Poll::Ready(Output(1, Tracked(out.clone())))
    }));
    drop(handle);
    assert_eq!(rt.freed(), 0, "the Notified keeps the task");
    rt.run_until_idle();
    assert_eq!((drops.get(), outputs.get(), rt.freed()), (1, 1, 1));
    assert_eq!(live_tasks(), 0);
}

#[test]
fn join_handle_dropped_after_completion() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls, outputs) = (DropCount::default(), Arc::default(), DropCount::default());
    let out = outputs.clone();
    let mut handle = rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
        Poll::Ready(Output(1, Tracked(out.clone())))
    }));
    // A registered join waker, which the handle must drop (the completer gave it back).
    let w = std::sync::Arc::new(CountWaker::default());
    assert!(poll_once(&mut handle, &Waker::from(w.clone())).is_pending());
    rt.run_until_idle();
    assert_eq!((drops.get(), outputs.get(), rt.freed()), (1, 0, 0));
    drop(handle);
    assert_eq!((outputs.get(), rt.freed()), (1, 1));
    assert_eq!(std::sync::Arc::strong_count(&w), 1);
    assert_eq!(live_tasks(), 0);
}

#[test]
fn join_handle_read_then_dropped() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls, outputs) = (DropCount::default(), Arc::default(), DropCount::default());
    let out = outputs.clone();
    let mut handle = rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
        Poll::Ready(Output(9, Tracked(out.clone())))
    }));
    rt.run_until_idle();
    let waker = Waker::from(std::sync::Arc::new(CountWaker::default()));
    let Poll::Ready(Ok(output)) = poll_once(&mut handle, &waker) else {
        panic!("not ready")
    };
    drop(handle);
    assert_eq!(
        (outputs.get(), rt.freed()),
        (0, 1),
        "the reader owns the output"
    );
    drop(output);
    assert_eq!(outputs.get(), 1);
    assert_eq!(live_tasks(), 0);
}

#[test]
fn join_handle_dropped_while_completing() {
    let _s = serial();
    let rt = Runtime::default();
    let outputs = DropCount::default();
    for _ in 0..300 {
        let (drops, polls) = (DropCount::default(), Arc::default());
        let out = outputs.clone();
        let mut handle = rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
            Poll::Ready(Output(0, Tracked(out.clone())))
        }));
        let w = Waker::from(std::sync::Arc::new(CountWaker::default()));
        assert!(poll_once(&mut handle, &w).is_pending()); // JOIN_WAKER set.
        let task = rt.pop().unwrap();
        let dropper = thread::spawn(move || drop(handle));
        task.run();
        dropper.join().unwrap();
        assert_eq!(drops.get(), 1);
    }
    assert_eq!((outputs.get(), rt.freed(), live_tasks()), (300, 300, 0));
}

#[test]
fn abort_before_first_poll() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let handle = rt.spawn(pending_forever(&drops, &polls));
    handle.abort();
    assert_eq!(rt.queued(), 1, "the queued Notified acts on CANCELLED");
    rt.run_until_idle();
    assert_eq!((drops.get(), polls.load(SeqCst)), (1, 0));
    assert!(handle.is_finished());
    handle.abort(); // No effect.
    let error = block_on(handle).unwrap_err();
    assert!(error.is_cancelled() && !error.is_panic());
    assert_eq!(error.to_string(), "task was cancelled");
    assert!(error.try_into_panic().unwrap_err().is_cancelled());
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn abort_while_pending_from_another_thread() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let handle = Arc::new(rt.spawn(pending_forever(&drops, &polls)));
    rt.run_until_idle();
    assert_eq!((polls.load(SeqCst), drops.get()), (1, 0));
    let h = handle.clone();
    thread::spawn(move || h.abort()).join().unwrap();
    assert_eq!(drops.get(), 0, "the aborter does not drop the future");
    assert_eq!(rt.queued(), 1);
    handle.abort(); // Already cancelled: nothing more queued.
    assert_eq!(rt.queued(), 1);
    rt.run_until_idle();
    assert_eq!((polls.load(SeqCst), drops.get()), (1, 1));
    let handle = Arc::try_unwrap(handle).unwrap();
    assert!(block_on(handle).unwrap_err().is_cancelled());
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn abort_during_poll() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let handle: Arc<Mutex<Option<JoinHandle<u32>>>> = Arc::default();
    let h = handle.clone();
    *lock(&handle) = Some(rt.spawn(future(&drops, &polls, move |_: &mut Context<'_>| {
        lock(&h).as_ref().unwrap().abort();
        Poll::Pending
    })));
    assert_eq!(
        rt.run_until_idle(),
        1,
        "cancelled in transition_to_idle, not requeued"
    );
    assert_eq!(drops.get(), 1);
    let handle = lock(&handle).take().unwrap();
    assert!(block_on(handle).unwrap_err().is_cancelled());
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn abort_after_completion_has_no_effect() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let handle = rt.spawn(future(&drops, &polls, |_: &mut Context<'_>| Poll::Ready(8)));
    rt.run_until_idle();
    handle.abort();
    assert_eq!(rt.queued(), 0);
    assert_eq!(block_on(handle).unwrap(), 8);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

#[test]
fn panic_in_poll_is_the_result() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::default());
    let handle = rt.spawn(future(&drops, &polls, |_: &mut Context<'_>| -> Poll<u32> {
        resume_unwind(Box::new("boom"))
    }));
    rt.run_until_idle();
    assert_eq!(drops.get(), 1);
    let error = block_on(handle).unwrap_err();
    assert!(error.is_panic() && !error.is_cancelled());
    assert_eq!(format!("{error:?}"), "JoinError::Panic(\"boom\", ..)");
    assert_eq!(*error.into_panic().downcast::<&str>().unwrap(), "boom");
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn panic_in_drop_during_cancellation_is_caught() {
    let _s = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let handle = rt.spawn(PanicOnDrop(drops.clone(), "drop boom"));
    rt.run_until_idle();
    handle.abort();
    rt.run_until_idle();
    assert_eq!(drops.get(), 1);
    let error = block_on(handle).unwrap_err();
    assert!(error.is_panic(), "the drop's panic replaces Cancelled");
    assert_eq!(*error.into_panic().downcast::<&str>().unwrap(), "drop boom");
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn panic_in_drop_after_ready_keeps_the_output() {
    struct ReadyThenPanicOnDrop(DropCount);
    impl Future for ReadyThenPanicOnDrop {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
            Poll::Ready(4)
        }
    }
    impl Drop for ReadyThenPanicOnDrop {
        fn drop(&mut self) {
            self.0 .0.fetch_add(1, SeqCst);
            resume_unwind(Box::new("late"));
        }
    }
    let _s = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let handle = rt.spawn(ReadyThenPanicOnDrop(drops.clone()));
    rt.run_until_idle();
    assert_eq!(block_on(handle).unwrap(), 4);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));
}

#[test]
fn detached_pending_task_freed_by_its_last_waker() {
    let _s = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let slot: Arc<Mutex<Option<Waker>>> = Arc::default();
    let s = slot.clone();
    let polls = Arc::default();
    drop(rt.spawn(future(
        &drops,
        &polls,
        move |cx: &mut Context<'_>| -> Poll<u32> {
            *lock(&s) = Some(cx.waker().clone());
            Poll::Pending
        },
    )));
    rt.run_until_idle();
    assert_eq!((drops.get(), rt.freed()), (0, 0));
    let waker = lock(&slot).take().unwrap();
    drop(waker); // The last reference: frees the task and drops its future.
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (1, 1, 0));

    // And a panicking destructor there is swallowed.
    let handle = rt.spawn(PanicOnDrop(drops.clone(), "detached"));
    rt.run_until_idle(); // Idle with no waker: the handle is the last reference.
    drop(handle);
    assert_eq!((drops.get(), rt.freed(), live_tasks()), (2, 2, 0));
}

#[test]
fn shutdown_cancels_an_idle_task_in_place() {
    let _s = serial();
    let rt = Runtime::default();
    let (drops, polls) = (DropCount::default(), Arc::new(AtomicUsize::new(0)));
    let handle = rt.spawn(pending_forever(&drops, &polls));
    // The queued Notified's reference stands in for the runtime's owned-task reference.
    let raw = rt.pop().unwrap().into_raw();
    // SAFETY: `raw`'s reference came from the Notified, and is consumed here.
    unsafe { raw.shutdown() };
    assert_eq!((drops.get(), polls.load(SeqCst)), (1, 0));
    assert!(block_on(handle).unwrap_err().is_cancelled());
    assert_eq!((rt.freed(), live_tasks()), (1, 0));
}

#[test]
fn stress_wakes_from_four_threads() {
    // Fewer under Miri, which interprets ~100x slower than a debug build.
    const TASKS: usize = if cfg!(miri) { 200 } else { 10_000 };
    const WAKERS: usize = 4;
    let _s = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let completed = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(TASKS);
    let mut cells = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let cell: Arc<(AtomicBool, Mutex<Option<Waker>>)> = Arc::default();
        let (c, done) = (cell.clone(), completed.clone());
        let polls = Arc::default();
        handles.push(
            rt.spawn(future(&drops, &polls, move |cx: &mut Context<'_>| {
                // Store the waker first, then check: a waker thread that sets the flag either
                // finds this waker, or this poll sees the flag.
                *lock(&c.1) = Some(cx.waker().clone());
                if c.0.load(SeqCst) {
                    done.fetch_add(1, SeqCst);
                    Poll::Ready(i)
                } else {
                    Poll::Pending
                }
            })),
        );
        cells.push(cell);
    }
    let cells = Arc::new(cells);
    let threads: Vec<_> = (0..WAKERS)
        .map(|t| {
            let cells = cells.clone();
            thread::spawn(move || {
                for k in 0..TASKS {
                    let cell = &cells[(k + t * TASKS / WAKERS) % TASKS];
                    cell.0.store(true, SeqCst);
                    let waker = lock(&cell.1).clone();
                    if let Some(waker) = waker {
                        if k % 2 == 0 {
                            waker.wake();
                        } else {
                            waker.wake_by_ref();
                        }
                    }
                }
            })
        })
        .collect();
    // Miri runs with real time (-Zmiri-disable-isolation) but interprets slowly.
    let deadline = Instant::now() + Duration::from_secs(if cfg!(miri) { 600 } else { 20 });
    while completed.load(SeqCst) < TASKS {
        if rt.run_until_idle() == 0 {
            thread::yield_now();
        }
        assert!(Instant::now() < deadline, "stress test stuck");
    }
    for t in threads {
        t.join().unwrap();
    }
    rt.run_until_idle(); // Late wakes of complete tasks queue nothing; drain anyway.
    assert_eq!(rt.queued(), 0);
    assert_eq!(
        completed.load(SeqCst),
        TASKS,
        "every task completed exactly once"
    );
    assert_eq!(drops.get(), TASKS);
    for (i, handle) in handles.into_iter().enumerate() {
        assert!(handle.is_finished());
        assert_eq!(block_on(handle).unwrap(), i);
    }
    // The futures' stored wakers are gone with them; the cells hold the last clones.
    drop(cells);
    assert_eq!((rt.freed(), live_tasks()), (TASKS, 0));
}

/// The header's size on 64-bit targets: 56 bytes, before task identity and with it (raw.rs,
/// `Header`, says why it must not grow).
#[test]
#[cfg(target_pointer_width = "64")]
fn header_size() {
    assert_eq!(std::mem::size_of::<super::raw::Header>(), 56);
}

/// An identity keeps the location it was given, and its name and counters when asked.
#[test]
fn identity_origin_round_trips() {
    let here = std::panic::Location::caller();
    let plain = Identity::new(Origin::caller(), 0, false);
    assert!(plain.insight().is_none());
    assert_eq!(plain.name(), None);
    assert_eq!(
        (plain.location().file(), plain.location().line()),
        (file!(), here.line() + 1)
    );
    let named = Identity::new(
        Origin {
            location: here,
            name: Some("n".to_owned()),
        },
        5,
        false,
    );
    assert_eq!((named.name(), named.location()), (Some("n"), here));
    assert_eq!(named.insight().unwrap().spawned_ns, 5);
    let counted = Identity::new(Origin::caller(), 7, true);
    assert_eq!(counted.name(), None);
    assert_eq!(counted.insight().unwrap().spawned_ns, 7);
    assert_ne!(plain.id, named.id);
}

/// Off the workers, `task::try_id` names the task whose poll is running, for the poll only;
/// a run nested in another task's poll names the inner task, then the outer one again.
#[test]
fn try_id_follows_nested_runs_off_the_workers() {
    let _s = serial();
    let rt = Runtime::default();
    let outer = rt.spawn(async {
        let before = crate::task::try_id();
        let inner_rt = Runtime::default();
        let inner = inner_rt.spawn(async { crate::task::try_id() });
        let inner_id = inner.id();
        inner_rt.run_until_idle();
        let seen_inside = inner.await.unwrap();
        (before, inner_id, seen_inside, crate::task::try_id())
    });
    let outer_id = outer.id();
    assert_eq!(crate::task::try_id(), None);
    rt.run_until_idle();
    assert_eq!(crate::task::try_id(), None);
    let (before, inner_id, seen_inside, after) = block_on(outer).unwrap();
    assert_ne!(inner_id, outer_id);
    assert_eq!(before, Some(outer_id));
    assert_eq!(seen_inside, Some(inner_id));
    assert_eq!(after, Some(outer_id));
}

// ---- Batch cells in shared blocks (`block.rs`) ----

#[test]
fn batch_cells_share_a_block_that_their_last_cell_frees() {
    let _serial = serial();
    let rt = Runtime::default();
    let mut handles = rt.spawn_batch((0..10u32).map(|i| async move { i * 3 }).collect(), true);
    assert_eq!(live_blocks(), 1, "ten small cells, one block");
    assert_eq!(live_tasks(), 10);
    assert_eq!(rt.run_until_idle(), 10);
    // Every task but one is read and freed; the one left keeps the block.
    let kept = handles.remove(4);
    let outputs: Vec<u32> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
    assert_eq!(outputs, [0, 3, 6, 9, 15, 18, 21, 24, 27]);
    assert_eq!(rt.freed(), 9);
    assert_eq!(live_blocks(), 1, "one cell is left in the block");
    assert_eq!(block_on(kept).unwrap(), 12);
    assert_eq!(live_blocks(), 0, "its last cell freed the block");
    assert_eq!((rt.freed(), live_tasks()), (10, 0));
}

#[test]
fn a_batch_of_unknown_length_grows_its_blocks_and_gives_back_unused_slots() {
    let _serial = serial();
    let rt = Runtime::default();
    // Blocks of 4, then 8 slots: five tasks take two blocks; the second block's seven unused
    // slots are given back as the batch ends, and its one cell still holds it.
    let handles = rt.spawn_batch((0..5u32).map(|i| async move { i }).collect(), false);
    assert_eq!(live_blocks(), 2);
    assert_eq!(rt.run_until_idle(), 5);
    let total: u32 = handles.into_iter().map(|h| block_on(h).unwrap()).sum();
    assert_eq!(total, 10);
    assert_eq!((live_blocks(), live_tasks(), rt.freed()), (0, 0, 5));
}

#[test]
fn a_long_batch_fills_whole_blocks() {
    let _serial = serial();
    let rt = Runtime::default();
    let n = MAX_SLOTS * 2 + 1;
    let handles = rt.spawn_batch((0..n).map(|i| async move { i }).collect(), true);
    assert_eq!(
        live_blocks(),
        3,
        "two full blocks and one for the last task"
    );
    // Dropped unread, then run: each completer drops its output and frees its cell.
    drop(handles);
    assert_eq!(rt.run_until_idle(), n);
    assert_eq!((live_blocks(), live_tasks(), rt.freed()), (0, 0, n));
}

#[test]
fn batch_cells_cancelled_or_panicking_give_their_slots_back() {
    let _serial = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let poll_of = |n: u32| {
        move |_: &mut Context<'_>| match n {
            0 => Poll::Pending,
            1 => resume_unwind(Box::new("the future's poll panics")),
            _ => Poll::Ready(n),
        }
    };
    let futures = (0..3).map(|n| future(&drops, &polls, poll_of(n))).collect();
    let handles = rt.spawn_batch(futures, true);
    assert_eq!(live_blocks(), 1);
    // The pending one is aborted before it runs: its runner cancels it.
    handles[0].abort();
    assert_eq!(rt.run_until_idle(), 3);
    let results: Vec<_> = handles.into_iter().map(block_on).collect();
    assert!(results[0].as_ref().unwrap_err().is_cancelled());
    assert!(results[1].as_ref().unwrap_err().is_panic());
    assert_eq!(*results[2].as_ref().unwrap(), 2);
    assert_eq!(drops.get(), 3, "every future dropped once");
    drop(results);
    assert_eq!((live_blocks(), live_tasks(), rt.freed()), (0, 0, 3));
}

#[test]
fn batch_cells_shut_down_unrun_give_their_slots_back() {
    let _serial = serial();
    let rt = Runtime::default();
    let drops = DropCount::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let futures = (0..6)
        .map(|_| future(&drops, &polls, |_: &mut Context<'_>| Poll::<u32>::Pending))
        .collect();
    let handles = rt.spawn_batch(futures, true);
    drop(handles);
    // The runtime shuts its queued tasks down: each is cancelled in place and freed.
    while let Some(task) = rt.pop() {
        task.shutdown();
    }
    assert_eq!(polls.load(SeqCst), 0);
    assert_eq!(drops.get(), 6);
    assert_eq!((live_blocks(), live_tasks(), rt.freed()), (0, 0, 6));
}

#[test]
fn a_cell_too_large_for_blocks_is_boxed() {
    // Fewer than two fit in a block: `Batch::new` declines, and `submit_batch` boxes each.
    let bytes = [0u8; 8 * 1024];
    let large = async move { bytes[0] };
    fn batch_for<F: Future>(_: &F) -> Option<Batch<'static, F, TestSched>> {
        Batch::new(None)
    }
    assert!(batch_for(&large).is_none());
    let small = async { 1u8 };
    assert!(batch_for(&small).is_some());
}

#[test]
fn freed_blocks_wait_as_spares_for_the_next_batch_and_go_with_their_runtime() {
    let _serial = serial();
    let rt = Runtime::with_spares();
    let batch = |n: usize| {
        let handles = rt.spawn_batch((0..n).map(|i| async move { i }).collect(), true);
        drop(handles);
        assert_eq!(rt.run_until_idle(), n);
    };
    // Two full blocks, freed by their last cells: both kept.
    batch(2 * MAX_SLOTS);
    assert_eq!(live_blocks(), 2);
    // The next batch of the same shape takes them instead of allocating.
    batch(2 * MAX_SLOTS);
    assert_eq!(live_blocks(), 2, "the spares were reused");
    // A short batch takes a spare too, whole, and gives it back whole.
    batch(3);
    assert_eq!(live_blocks(), 2);
    // No more than MAX_SPARES are kept: the rest are freed.
    batch((MAX_SPARES + 3) * MAX_SLOTS);
    assert_eq!(live_blocks(), MAX_SPARES);
    assert_eq!(live_tasks(), 0);
    // The spares go with the last holder of the runtime's scheduler.
    drop(rt);
    assert_eq!(live_blocks(), 0);
}

#[test]
fn a_block_sized_for_a_short_batch_is_not_kept_as_a_spare() {
    let _serial = serial();
    let rt = Runtime::with_spares();
    // No spare yet: the block is made for 3, and freed, not kept.
    let handles = rt.spawn_batch((0..3u8).map(|i| async move { i }).collect(), true);
    assert_eq!(live_blocks(), 1);
    assert_eq!(rt.run_until_idle(), 3);
    drop(handles);
    assert_eq!((live_blocks(), live_tasks()), (0, 0));
}

/// Frees the tasks of `rt`'s queue, never run, through `tally`, in the order `order` gives
/// (indices into the queue), checking `live_blocks()` after each as `expect` says. Each task
/// holds two references then, its `Notified`'s and its handle's (`handles` are forgotten, so
/// that the two are the last), and is out of any live list: the test runtime keeps none.
fn free_through_tally(
    rt: &Runtime,
    handles: Vec<JoinHandle<usize>>,
    tally: &mut Tally<'_>,
    order: &[usize],
    expect: &[usize],
) {
    let tasks: Vec<_> = lock(&rt.queue).drain(..).map(Notified::into_raw).collect();
    // The handles' references stay counted: the frees below drop them.
    handles.into_iter().for_each(std::mem::forget);
    for (&i, &blocks) in order.iter().zip(expect) {
        // SAFETY: the Notified's and the handle's references, both given up above; no list
        // holds the task.
        unsafe { tasks[i].drop_unlinked_references(2, tally) };
        assert_eq!(live_blocks(), blocks, "after freeing task {i}");
    }
}

#[test]
fn a_tally_gives_back_neighbouring_slots_together_and_the_rest_at_its_drop() {
    let _serial = serial();
    let rt = Runtime::default();
    // A full block (tasks 0 to MAX_SLOTS - 1) and a block of one (task MAX_SLOTS).
    let n = MAX_SLOTS + 1;
    let handles = rt.spawn_batch((0..n).map(|i| async move { i }).collect(), true);
    assert_eq!(live_blocks(), 2);
    let mut tally = Tally::new(None);
    let last = MAX_SLOTS;
    // The first half of the full block, then the lone block's task (the tally gives the
    // half back and holds the lone slot), then the second half (the lone block goes back
    // and is freed), with the tally holding the second half until it drops.
    let order: Vec<usize> = (0..MAX_SLOTS / 2)
        .chain([last])
        .chain(MAX_SLOTS / 2..MAX_SLOTS)
        .collect();
    let mut expect = vec![2; MAX_SLOTS / 2 + 1];
    expect.resize(order.len(), 1);
    free_through_tally(&rt, handles, &mut tally, &order, &expect);
    assert_eq!((rt.freed(), live_tasks()), (n, 0));
    assert_eq!(live_blocks(), 1, "the tally still holds the last half");
    drop(tally);
    assert_eq!(live_blocks(), 0);
}

#[test]
fn a_tally_for_another_runtimes_spares_leaves_a_cell_its_own_give_back() {
    let _serial = serial();
    let rt = Runtime::default();
    let handles = rt.spawn_batch((0..2usize).map(|i| async move { i }).collect(), true);
    let elsewhere = BlockSpares::default();
    let mut tally = Tally::new(Some(&elsewhere));
    // The cells' scheduler keeps no spares, so the tally does not serve them: each slot goes
    // back at its free, and the block with the second.
    free_through_tally(&rt, handles, &mut tally, &[0, 1], &[1, 0]);
    drop(tally);
    assert_eq!((live_blocks(), live_tasks(), rt.freed()), (0, 0, 2));
}
