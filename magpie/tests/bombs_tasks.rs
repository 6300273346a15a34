//! Bombs for tasks (`spawn`, `submit`, `spawn_blocking`): panic payloads, outputs, futures and
//! captured values whose `Drop` panics, and `JoinHandle` wakers whose `wake`, `clone` or
//! `drop` panics (issue 17, "keep the classes out"; `bombs_fork_join.rs` and
//! `bombs_timers.rs` do the same for fork-join and timers).
//!
//! Whatever magpie drops on a worker goes off harmlessly: the process survives, every bomb
//! is dropped exactly once, the handle resolves (a payload reaches it intact: dropping that is
//! the caller's business, and is defused here), and the runtime keeps running tasks.

mod async_support;

use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};

use async_support::bomb::{quiet_bombs, BombWaker, Fuses, BOOM};
use async_support::{runtime, watchdog};
use magpie::{JoinHandle, Runtime};

/// Panics when dropped, once, and counts the drop first.
struct Bomb(Arc<AtomicUsize>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        if !std::thread::panicking() {
            panic!("{BOOM} (a value's drop)");
        }
    }
}

fn ledger() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// Drops `value`, defusing the bomb inside it.
fn defuse<T>(value: T) {
    let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(value)));
}

/// The runtime still runs tasks and closures.
fn still_runs(rt: &Runtime) {
    assert_eq!(rt.block_on(rt.spawn(async { 40 + 2 })).unwrap(), 42);
    assert_eq!(rt.submit(|| 7).join().unwrap(), 7);
}

#[test]
fn a_panic_payload_whose_drop_panics() {
    let _dog = watchdog("a_panic_payload_whose_drop_panics");
    quiet_bombs();
    for workers in [1, 2] {
        let rt = runtime(workers);
        let dropped = ledger();
        // Awaited: the payload reaches the handle intact.
        let d = dropped.clone();
        let err = rt
            .spawn(async move { panic::panic_any(Bomb(d)) })
            .join()
            .unwrap_err();
        assert!(err.is_panic());
        assert_eq!(dropped.load(SeqCst), 0);
        defuse(err);
        assert_eq!(dropped.load(SeqCst), 1);
        // Detached (handle dropped first), from a task and a closure: magpie drops it.
        let d = dropped.clone();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let detached = rt.spawn(async move {
            let _ = wait.recv();
            panic::panic_any(Bomb(d))
        });
        drop(detached);
        go.send(()).unwrap();
        let d = dropped.clone();
        drop(rt.submit(move || panic::panic_any(Bomb(d))));
        rt.wait_idle();
        assert_eq!(dropped.load(SeqCst), 3);
        still_runs(&rt);
    }
}

#[test]
fn an_output_whose_drop_panics() {
    let _dog = watchdog("an_output_whose_drop_panics");
    quiet_bombs();
    let rt = runtime(2);
    let dropped = ledger();
    // Detached before it completes: the worker drops the output.
    for _ in 0..20 {
        let d = dropped.clone();
        drop(rt.spawn(async move { Bomb(d) }));
        let d = dropped.clone();
        drop(rt.submit(move || Bomb(d)));
        let d = dropped.clone();
        drop(rt.spawn_blocking(move || Bomb(d)));
    }
    rt.wait_idle();
    // Blocking closures are not tasks of the pool: wait for their drops.
    while dropped.load(SeqCst) < 60 {
        std::thread::yield_now();
    }
    // Awaited: the caller owns it.
    let d = dropped.clone();
    let out = rt.spawn(async move { Bomb(d) }).join().unwrap();
    defuse(out);
    assert_eq!(dropped.load(SeqCst), 61);
    still_runs(&rt);
}

/// A future that panics when dropped: cancelled by `abort`, by shutdown, and after it
/// completed (then the worker drops it).
struct BombFuture {
    bomb: Option<Bomb>,
    ready: bool,
}

impl Future for BombFuture {
    type Output = u32;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<u32> {
        if self.ready {
            Poll::Ready(1)
        } else {
            Poll::Pending
        }
    }
}

impl Drop for BombFuture {
    fn drop(&mut self) {
        drop(self.bomb.take());
    }
}

#[test]
fn futures_and_closures_whose_drop_panics() {
    let _dog = watchdog("futures_and_closures_whose_drop_panics");
    quiet_bombs();
    let dropped = ledger();
    {
        let rt = runtime(2);
        let bomb = |ready| BombFuture {
            bomb: Some(Bomb(dropped.clone())),
            ready,
        };
        // Completed: dropped by the worker after its last poll.
        assert_eq!(rt.spawn(bomb(true)).join().unwrap(), 1);
        // Aborted while pending: the drop's panic is the task's outcome (the `JoinHandle`
        // docs' table: a future that panics in drop).
        let pending = rt.spawn(bomb(false));
        pending.abort();
        assert!(pending.join().is_err());
        // A closure capturing a bomb: dropped after it runs.
        let d = Bomb(dropped.clone());
        assert!(rt.submit(move || d.0.load(SeqCst)).join().is_err());
        // Still pending at shutdown.
        let left: Vec<JoinHandle<u32>> = (0..4).map(|_| rt.spawn(bomb(false))).collect();
        still_runs(&rt);
        drop(rt);
        for handle in left {
            assert!(handle.join().is_err());
        }
    }
    assert_eq!(dropped.load(SeqCst), 7);
}

#[test]
fn join_handle_wakers_that_panic() {
    let _dog = watchdog("join_handle_wakers_that_panic");
    quiet_bombs();
    let rt = runtime(2);
    for fuses in [
        Fuses {
            wake: true,
            wake_by_ref: true,
            ..Fuses::CALM
        },
        Fuses {
            drop: true,
            ..Fuses::CALM
        },
    ] {
        for _ in 0..20 {
            let bomb = BombWaker::new(fuses);
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let mut handle = rt.spawn(async move {
                let _ = wait.recv();
                5
            });
            // Poll the handle with the bomb waker (another executor awaiting it), then let
            // the task complete: the worker wakes (and drops) the bomb.
            let waker = bomb.waker();
            let mut cx = Context::from_waker(&waker);
            if Pin::new(&mut handle).poll(&mut cx).is_pending() {
                go.send(()).unwrap();
                if !fuses.drop {
                    bomb.wait_for_wakes(1);
                }
            }
            // Polling again with another waker drops the bomb's clone on this thread: that
            // panic is the caller's own waker's, and reaches the caller (as any drop of a
            // value it gave away would), once; the handle stays usable.
            let mut panics = 0;
            let out = loop {
                match panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(&mut handle))) {
                    Ok(out) => break out,
                    Err(_) => panics += 1,
                }
                assert!(panics <= 1, "the handle keeps panicking");
            };
            assert_eq!(out.unwrap(), 5);
            drop(handle);
            // The completer may still hold the waker it woke, and drop it after the handle
            // is gone; every reference but the test's own goes (the watchdog reports a leak).
            while bomb.refs() != 1 {
                std::thread::yield_now();
            }
        }
    }
    // A waker whose clone panics: the poll panics in the caller, and nothing is filed.
    let bomb = BombWaker::new(Fuses {
        clone: true,
        ..Fuses::CALM
    });
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let mut handle = rt.spawn(async move {
        let _ = wait.recv();
        6
    });
    let waker = bomb.waker();
    let polled = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut cx = Context::from_waker(&waker);
        let _ = Pin::new(&mut handle).poll(&mut cx);
    }));
    assert!(polled.is_err());
    go.send(()).unwrap();
    assert_eq!(rt.block_on(handle).unwrap(), 6);
    still_runs(&rt);
}
