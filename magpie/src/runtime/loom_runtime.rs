//! Loom models of the whole runtime on two workers.
//!
//! Each model builds a real [`Runtime`]: its workers are loom threads, every atomic, lock and
//! condition variable in the scheduler is loom's, and the clock is the virtual one of
//! [`sync::time`](crate::sync::time) (it moves only when something waits with a deadline).
//! Workers park without a timeout (as everywhere, unless the debugging option
//! `Builder::park_safety_net` is set, which loom ignores), so a wakeup the sleep protocol
//! loses leaves a worker parked for good, which loom reports as a deadlock.
//!
//! They are costly (a runtime's start, search, park and shutdown are a few hundred explored
//! steps), so CI checks them with at most one preemption (`scripts/loom.sh`) and the longer
//! tier with two (`scripts/loom.sh --runtime-bound 2`, see the README's reliability section).
//! `LOOM_MAX_PREEMPTIONS`, when set, overrides the bound.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::sync::atomic::{Acquire, Relaxed, Release};
use crate::sync::{lock, thread, time, AtomicBool, AtomicUsize, Mutex};
use crate::util::loom_support::model;

use super::Runtime;

/// The preemption bound when `LOOM_MAX_PREEMPTIONS` is not set.
const BOUND: usize = 1;

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .stack_size(crate::MIN_STACK_SIZE)
        .build()
        .expect("a loom runtime")
}

/// Checks `f` under loom, each execution starting at virtual time zero.
fn check(f: impl Fn() + Sync + Send + 'static) {
    model(Some(BOUND), move || {
        time::reset();
        f();
    });
}

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// A one-shot event that a task waits for and any thread fires.
#[derive(Default)]
struct Event {
    state: Mutex<(bool, Option<Waker>)>,
}

impl Event {
    fn fire(&self) {
        let waker = {
            let mut state = lock(&self.state);
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

struct WaitEvent(Arc<Event>);

impl Future for WaitEvent {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.0.state);
        if state.0 {
            Poll::Ready(())
        } else {
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// Whether every worker of `rt` has parked (or is past its last recheck, about to).
/// Reads the counters directly: a whole `stats()` snapshot is dozens of loom steps.
fn all_parked(rt: &Runtime) -> bool {
    rt.registry
        .counters
        .iter()
        .all(|c| c.parks.load(Relaxed) > c.unparks.load(Relaxed))
}

/// The simplest whole run: an outside spawn, its result, shutdown.
#[test]
fn loom_runtime_spawn_and_shutdown() {
    check(|| {
        let rt = runtime();
        let handle = rt.spawn(async { 7 });
        assert_eq!(rt.block_on(handle).unwrap(), 7);
    });
}

/// tokio#4383: a worker that stops searching as the last searcher races a notification
/// that saw it searching and so woke nobody. Here a task running on one worker spawns a
/// child and then holds that worker until the child has run, so only the other worker can
/// run it: if the notification is lost, that worker parks for good and the parent spins
/// until loom gives up on the execution (it exceeds loom's branch limit).
///
/// The negative control: with `--cfg magpie_loom_broken` a worker parks without rechecking
/// the task queues (R5 in `sleep/README.md`), and this model must fail.
#[test]
#[cfg_attr(
    magpie_loom_broken,
    should_panic(expected = "exceeded maximum number of branches")
)]
fn loom_runtime_last_searcher_vs_notification() {
    check(|| {
        let rt = runtime();
        let parent = rt.spawn(async {
            let ran = Arc::new(AtomicBool::new(false));
            let flag = ran.clone();
            let child = crate::spawn(async move {
                // Release: pairs with the parent's Acquire load.
                flag.store(true, Release);
            });
            // Acquire: pairs with the child's Release store.
            while !ran.load(Acquire) {
                thread::yield_now();
            }
            child
        });
        let child = rt.block_on(parent).unwrap();
        rt.block_on(child).unwrap();
    });
}

/// An outside spawn into a pool whose workers have both parked: the spawn must wake one.
#[test]
fn loom_runtime_outside_spawn_into_parked_pool() {
    check(|| {
        let rt = runtime();
        while !all_parked(&rt) {
            thread::yield_now();
        }
        let handle = rt.spawn(async { 11 });
        assert_eq!(rt.block_on(handle).unwrap(), 11);
    });
}

/// The workers park while an outside thread wakes the task they ran: park ∥ unpark. The
/// wake must reach a worker whatever point of its parking sequence it is at.
#[test]
fn loom_runtime_park_vs_unpark() {
    check(|| {
        let rt = runtime();
        let event = Arc::new(Event::default());
        let wait = WaitEvent(event.clone());
        let handle = rt.spawn(async move {
            wait.await;
            5
        });
        // From this (outside) thread, while the workers run the task to its first `Pending`
        // and go to park.
        event.fire();
        assert_eq!(rt.block_on(handle).unwrap(), 5);
    });
}

/// A spawn from inside the pool races the runtime's shutdown: a task spawns a child while
/// the runtime is dropped. Each task either ran (its handle gives the output) or was
/// cancelled (the handle says so), never both or neither, and each future is dropped
/// exactly once either way.
#[test]
fn loom_runtime_spawn_vs_shutdown() {
    check(|| {
        let rt = runtime();
        let drops = Arc::new(AtomicUsize::new(0));
        let child_slot = Arc::new(Mutex::new(None));
        let parent = {
            let guard = DropCount(drops.clone());
            let child_guard = DropCount(drops.clone());
            let child_slot = child_slot.clone();
            rt.spawn(async move {
                let _guard = guard;
                let child = crate::spawn(async move {
                    let _guard = child_guard;
                    2
                });
                *lock(&child_slot) = Some(child);
                1
            })
        };
        drop(rt);
        let child = lock(&child_slot).take();
        match parent.join() {
            Ok(value) => {
                assert_eq!(value, 1);
                let child = child.expect("the parent ran but its child is missing");
                match child.join() {
                    Ok(value) => assert_eq!(value, 2),
                    Err(err) => assert!(err.is_cancelled(), "{err:?}"),
                }
            }
            Err(err) => {
                assert!(err.is_cancelled(), "{err:?}");
                assert!(child.is_none(), "a cancelled parent that ran");
            }
        }
        // Both futures are gone (the child's never existed if the parent never ran: its
        // guard went with the parent's future).
        assert_eq!(drops.load(Relaxed), 2, "a future dropped other than once");
    });
}

/// A task files a timer and cancels it (drops its `Sleep`), then sleeps on a second one with
/// the same deadline, while the other worker may be parked as the timer driver, moving the
/// clock and firing: register ∥ fire ∥ cancel. The sleep ends no earlier than its
/// deadline, and the cancelled timer wakes nobody after its cancellation. (A firing that
/// collected it before the cancellation may still wake its waker once, as in tokio. The
/// virtual clock tells which case this is: it stands still unless someone waits, so if it
/// still reads before the deadline once the `Sleep` is dropped, no firing can have taken
/// the timer.)
#[test]
fn loom_runtime_timer_register_fire_cancel() {
    /// Counts wakes.
    struct CountWaker(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for CountWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    check(|| {
        let rt = runtime();
        let count = Arc::new(CountWaker(Default::default()));
        let task = {
            let count = count.clone();
            rt.spawn(async move {
                let mut cancelled = Box::pin(crate::time::sleep(Duration::from_millis(1)));
                let deadline = cancelled.deadline();
                let waker = Waker::from(count);
                // Files the timer (unless it is due already), then cancels it.
                let _ = cancelled.as_mut().poll(&mut Context::from_waker(&waker));
                drop(cancelled);
                let cancelled_at = time::now();
                let sleep = crate::time::sleep(Duration::from_millis(1));
                let wanted = sleep.deadline();
                sleep.await;
                (deadline, cancelled_at, wanted, time::now())
            })
        };
        let (deadline, cancelled_at, wanted, woke_at) = rt.block_on(task).unwrap();
        assert!(woke_at >= wanted, "a timer fired early");
        drop(rt);
        let wakes = count.0.load(std::sync::atomic::Ordering::Relaxed);
        assert!(wakes <= 1, "a timer fired twice");
        if cancelled_at < deadline {
            assert_eq!(wakes, 0, "a cancelled timer fired");
        }
    });
}
