//! [`yield_now`]: let the other tasks run.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields to the scheduler once: the task goes to the back of its worker's queue, behind the
/// tasks that were waiting, and resumes when its turn comes again.
///
/// A task that loops without ever awaiting anything that is pending never lets the other
/// tasks of its worker run (the cooperative budget only limits magpie's own futures);
/// `yield_now` is how such a loop takes turns.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let total = rt.block_on(async {
///     let mut total = 0;
///     for i in 0..10 {
///         total += i;
///         magpie::task::yield_now().await;
///     }
///     total
/// });
/// assert_eq!(total, 45);
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`].
///
/// Pending on its first poll (after waking its own task), ready on the next.
///
/// # Examples
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Poll};
///
/// let mut cx = Context::from_waker(futures::task::noop_waker_ref());
/// let mut yielded = pin!(magpie::task::yield_now());
/// assert_eq!(yielded.as_mut().poll(&mut cx), Poll::Pending);
/// assert_eq!(yielded.as_mut().poll(&mut cx), Poll::Ready(()));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // Woken while running, the task is queued behind the others once this poll ends
        // (`Schedule::yield_task`).
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl fmt::Debug for YieldNow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YieldNow")
            .field("yielded", &self.yielded)
            .finish()
    }
}
