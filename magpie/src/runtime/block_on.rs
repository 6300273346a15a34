//! Driving a future to completion on a thread outside the pool: `Runtime::block_on`,
//! `magpie::block_on` and `JoinHandle::join`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use super::worker::WorkerThread;
use crate::sync::atomic::*;
use crate::sync::thread::{self, Thread};
use crate::sync::AtomicBool;
use crate::task::coop;
use std::sync::Arc as StdArc;

/// Wakes the blocked thread.
struct ThreadWaker {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: StdArc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        // Release: pairs with the Acquire swap in `block_on_thread`, so what the waker's
        // thread wrote before waking is visible to the next poll.
        if !self.woken.swap(true, Release) {
            self.thread.unpark();
        }
    }
}

/// Panics if the calling thread is a worker of any magpie runtime, unless it is inside
/// `block_in_place`: blocking it could deadlock (what it waits for may be queued behind it on
/// that worker). Inside `block_in_place` nothing is queued behind it: its tasks were handed
/// to the other workers, and what it wakes goes to the inject queue (`worker/block.rs`).
pub(crate) fn assert_not_on_worker(what: &str) {
    // SAFETY: a non-null current worker is live while its thread runs work, which includes
    // this call.
    if unsafe { WorkerThread::current().as_ref() }.is_some_and(|worker| !worker.is_blocking()) {
        panic!(
            "magpie: `{what}` called on a worker thread of a magpie runtime; blocking a worker \
             could deadlock the runtime. Use `.await` inside async code, or call `{what}` from \
             a thread outside the pool (e.g. from `spawn_blocking`), or inside \
             `magpie::task::block_in_place`"
        );
    }
}

/// Polls `future` on this thread until it completes, parking between polls. Each poll gets
/// a fresh cooperative budget.
///
/// # Panics
///
/// On a worker thread (see [`assert_not_on_worker`]); `what` names the caller in the message.
pub(crate) fn block_on_thread<F: Future>(future: F, what: &str) -> F::Output {
    assert_not_on_worker(what);
    let mut future = pin!(future);
    let signal = StdArc::new(ThreadWaker {
        thread: thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    // Inside `block_in_place` on a worker (the only case `assert_not_on_worker` lets
    // through), the wait turns that runtime's drivers: nobody else may be left to.
    // SAFETY: a non-null current worker is live while its thread runs work, this call
    // included.
    let blocked_worker = unsafe { WorkerThread::current().as_ref() };
    loop {
        if let Poll::Ready(output) = coop::with_budget(|| future.as_mut().poll(&mut cx)) {
            return output;
        }
        // Acquire: pairs with the Release swap in `wake_by_ref`.
        while !signal.woken.swap(false, Acquire) {
            match blocked_worker {
                Some(worker) => worker.wait_blocked_on(),
                None => thread::park(),
            }
        }
    }
}
