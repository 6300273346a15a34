//! [`sleep`], [`sleep_until`] and the [`Sleep`] future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::wheel::TimerKey;
use crate::runtime::context;
use crate::runtime::registry::Registry;
use crate::task::coop;
use std::sync::Arc;

/// Waits until `duration` has elapsed.
///
/// The timer has millisecond resolution and never fires early: the future completes at the
/// first millisecond tick at or after `now + duration`. Any duration is accepted;
/// `Duration::MAX` simply never fires.
///
/// The timer belongs to the runtime the future is first polled on (the worker's, or the one
/// whose `block_on` polls it); polled anywhere else, to the global runtime.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let start = Instant::now();
/// rt.block_on(magpie::time::sleep(Duration::from_millis(5)));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let now = crate::sync::time::now();
    Sleep::new(now.checked_add(duration).unwrap_or_else(far_future))
}

/// Waits until `deadline`. A deadline in the past completes at the first poll.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let deadline = Instant::now() + Duration::from_millis(2);
/// rt.block_on(magpie::time::sleep_until(deadline));
/// assert!(Instant::now() >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline)
}

/// A deadline later than any program will wait for (about 30 years), for durations that
/// overflow `Instant`.
pub(crate) fn far_future() -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);
    let now = crate::sync::time::now();
    now.checked_add(THIRTY_YEARS)
        .or_else(|| now.checked_add(Duration::from_secs(24 * 60 * 60)))
        .unwrap_or(now)
}

/// The future returned by [`sleep`] and [`sleep_until`].
///
/// The first poll files the timer with the current runtime (see [`crate::spawn`]); later
/// polls keep it there, unless that runtime has shut down, in which case the timer moves to
/// the runtime polling it then. Dropping it cancels the timer (its entry leaves the wheel
/// at once).
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Entry>,
}

/// Where a pending `Sleep` is filed.
struct Entry {
    registry: Arc<Registry>,
    key: TimerKey,
}

impl Sleep {
    pub(crate) fn new(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            entry: None,
        }
    }

    /// The instant this sleep completes at.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(magpie::time::sleep_until(deadline).deadline(), deadline);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    ///
    /// # Examples
    ///
    /// ```
    /// let sleep = magpie::time::sleep(std::time::Duration::ZERO);
    /// assert!(sleep.is_elapsed());
    /// ```
    pub fn is_elapsed(&self) -> bool {
        crate::sync::time::now() >= self.deadline
    }

    /// Moves the deadline (for `Interval`); the next poll files the timer again.
    pub(crate) fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let Some(entry) = self.entry.take() {
            entry.registry.timers.deregister(entry.key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // A fired timer is progress: it spends a unit of the cooperative budget.
        let coop = std::task::ready!(coop::poll_proceed(cx));
        let this = &mut *self;
        if crate::sync::time::now() >= this.deadline {
            this.cancel();
            coop.made_progress();
            return Poll::Ready(());
        }
        let (registry, old) = match this.entry.take() {
            // A runtime that shut down fires nothing: file the timer with the current one.
            Some(entry) if entry.registry.is_terminating() => {
                entry.registry.timers.deregister(entry.key);
                (context::current_registry(), None)
            }
            Some(entry) => (entry.registry, Some(entry.key)),
            None => (context::current_registry(), None),
        };
        let deadline_ms = registry.timers.deadline_ms(this.deadline);
        let (key, rearm) = registry
            .timers
            .register(old, deadline_ms, cx.waker().clone());
        registry.rearm_timers(rearm);
        this.entry = Some(Entry { registry, key });
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("registered", &self.entry.is_some())
            .finish()
    }
}
