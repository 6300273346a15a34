//! [`JoinHandle`]: the spawner's handle to a task's output.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::error::JoinError;
use super::raw::RawTask;
use super::state::TransitionToCancelled;

/// An owned permission to wait for a task's output: a future resolving to
/// `Ok(output)`, or to a [`JoinError`] if the task was cancelled or panicked.
///
/// Dropping the handle detaches the task: it keeps running, and its output is dropped when
/// it finishes (or at once, if it already has). (Re-exported from the crate root by the
/// async-task issue.)
#[allow(unreachable_pub)] // Re-exported by the async-task issue.
pub struct JoinHandle<T> {
    raw: RawTask,
    _output: PhantomData<T>,
}

// SAFETY: the handle only moves the output out (to the thread that polls it) or drops it;
// every other access goes through the task's atomic state word.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` allows only `abort` and `is_finished`, which touch nothing but the
// state word (and the scheduler, which is `Sync`).
unsafe impl<T: Send> Sync for JoinHandle<T> {}

// The handle never pins the output: it moves it out.
impl<T> Unpin for JoinHandle<T> {}

#[allow(unreachable_pub)] // Re-exported by the async-task issue.
impl<T> JoinHandle<T> {
    /// # Safety
    ///
    /// The caller hands over a reference to `raw` and its `JOIN_INTEREST` bit, and the
    /// task's output type is `T`.
    pub(crate) unsafe fn from_raw(raw: RawTask) -> JoinHandle<T> {
        JoinHandle {
            raw,
            _output: PhantomData,
        }
    }

    /// Cancels the task: unless it has already finished, its future is dropped (on a worker,
    /// the next time it would have run) and the handle resolves to a cancelled `JoinError`.
    ///
    /// Aborting a finished task does nothing: the handle still yields its output.
    pub fn abort(&self) {
        // SAFETY: raw.rs invariant 2: the handle holds a reference.
        match unsafe { self.raw.state() }.transition_to_cancelled() {
            TransitionToCancelled::DoNothing => {}
            // SAFETY: state.rs invariant 1: the RMW took a reference for a new Notified.
            TransitionToCancelled::Submit => unsafe { self.raw.schedule() },
        }
    }

    /// Whether the task has finished (with an output, cancelled, or panicked), so that
    /// awaiting the handle will not wait.
    pub fn is_finished(&self) -> bool {
        // SAFETY: raw.rs invariant 2: the handle holds a reference.
        unsafe { self.raw.state() }.load().is_complete()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// # Panics
    ///
    /// If polled again after it returned `Poll::Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut output = Poll::Pending;
        // SAFETY: the handle holds a reference and JOIN_INTEREST, and `output` is a
        // `Poll<Result<T, JoinError>>` with `T` the task's output type (`from_raw`).
        unsafe {
            self.raw.try_read_output(
                &mut output as *mut Poll<Self::Output> as *mut (),
                cx.waker(),
            )
        };
        output
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: the handle's reference and JOIN_INTEREST are given up here, once.
        unsafe { self.raw.drop_join_handle() }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
