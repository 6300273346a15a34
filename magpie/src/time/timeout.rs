//! [`timeout`] and the [`Timeout`] future.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::sleep::{far_future, Sleep};
use crate::task::coop;

/// Runs `future` for at most `duration`: resolves to `Ok(output)` if it completes first,
/// otherwise to `Err(Elapsed)`, dropping the future.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let quick = rt.block_on(magpie::time::timeout(Duration::from_secs(5), async { 7 }));
/// assert_eq!(quick, Ok(7));
///
/// let never = std::future::pending::<()>();
/// let slow = rt.block_on(magpie::time::timeout(Duration::from_millis(2), never));
/// assert!(slow.is_err());
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    let deadline = crate::sync::time::now()
        .checked_add(duration)
        .unwrap_or_else(far_future);
    timeout_at(deadline, future)
}

/// Runs `future` until `deadline`: as [`timeout`], with an instant instead of a duration.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let deadline = Instant::now() + Duration::from_secs(5);
/// assert_eq!(rt.block_on(magpie::time::timeout_at(deadline, async { 1 })), Ok(1));
/// ```
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: Sleep::new(deadline),
    }
}

/// The future returned by [`timeout`] and [`timeout_at`].
///
/// Its deadline is a [`Sleep`], filed, moved at a runtime's shutdown,
/// and woken as a `Sleep` is.
///
/// # Examples
///
/// A `Timeout` is a future like any other: it can be spawned as a task of its own.
///
/// ```
/// use std::time::Duration;
///
/// use magpie::time::{timeout, Timeout};
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let guarded: Timeout<_> = timeout(Duration::from_secs(5), async { 6 * 7 });
/// assert_eq!(rt.spawn(guarded).join().unwrap(), Ok(42));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    /// The wrapped future.
    ///
    /// # Examples
    ///
    /// ```
    /// let t = magpie::time::timeout(std::time::Duration::from_secs(1), async { 3 });
    /// let _inner = t.into_inner();
    /// ```
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `future`: it is never moved out while pinned
        // (`into_inner` takes `self` by value, which an unpinned `Timeout` allows only), and
        // `Timeout` has no `Drop` impl that could move it. `sleep` is `Unpin` and not pinned.
        let (future, sleep) = unsafe {
            let this = self.get_unchecked_mut();
            (Pin::new_unchecked(&mut this.future), &mut this.sleep)
        };
        if let Poll::Ready(output) = future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // With the budget spent (by the inner future, a loop of ready sleeps say, or by a
        // sibling polled before us in a `select`), the deadline's check would be refused at
        // every poll, each of which starts the same way: the timeout would never elapse. So
        // the check then runs unconstrained. (tokio's covers only the first case; its
        // `select!` polls branches in random order.)
        let sleep = Pin::new(sleep);
        let fired = if coop::has_budget_remaining() {
            sleep.poll(cx)
        } else {
            coop::unconstrained(|| sleep.poll(cx))
        };
        match fired {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("deadline", &self.sleep.deadline())
            .finish_non_exhaustive()
    }
}

/// The error of a [`timeout`] whose future did not finish in time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let err = rt
///     .block_on(magpie::time::timeout(Duration::ZERO, std::future::pending::<()>()))
///     .unwrap_err();
/// assert_eq!(err.to_string(), "deadline has elapsed");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl Error for Elapsed {}
