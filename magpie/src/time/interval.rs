//! [`interval`] and the [`Interval`] stream of ticks.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::sleep::{far_future, Sleep};

/// The shortest period: the timer resolution.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// A timer that ticks every `period`, the first tick at once.
///
/// A period below the 1 ms resolution (zero included) is rounded up to 1 ms, rather than
/// rejected with a panic as tokio does: a zero period has one sensible reading, "as often
/// as the timer can". A period so long that the next tick would overflow `Instant`
/// (`Duration::MAX`) ticks once, at once, and then never again, as
/// [`sleep(Duration::MAX)`](fn@crate::time::sleep) never fires. Ticks missed while the task was
/// busy are delivered at once, one per `tick()`, until the schedule is caught up (tokio
/// calls this "burst").
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let start = Instant::now();
/// rt.block_on(async {
///     let mut ticks = magpie::time::interval(Duration::from_millis(2));
///     for _ in 0..3 {
///         ticks.tick().await;
///     }
/// });
/// assert!(start.elapsed() >= Duration::from_millis(4)); // ticks at 0, 2 and 4 ms
/// ```
pub fn interval(period: Duration) -> Interval {
    interval_at(crate::sync::time::now(), period)
}

/// A timer that ticks every `period`, the first tick at `start`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let start = Instant::now() + Duration::from_millis(1);
/// let ticks = magpie::time::interval_at(start, Duration::from_secs(1));
/// assert_eq!(ticks.period(), Duration::from_secs(1));
/// ```
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    Interval {
        period: period.max(MIN_PERIOD),
        next: start,
        sleep: Sleep::new(start),
    }
}

/// The timer returned by [`interval`].
///
/// Each tick waits on a [`Sleep`], and is filed, moved at a runtime's
/// shutdown, and woken as a `Sleep` is.
///
/// # Examples
///
/// Each tick gives the instant it was scheduled for, `period` after the one before:
///
/// ```
/// use std::time::{Duration, Instant};
///
/// use magpie::time::{interval_at, Interval};
///
/// async fn two_ticks(ticks: &mut Interval) -> [Instant; 2] {
///     [ticks.tick().await, ticks.tick().await]
/// }
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let start = Instant::now();
/// let mut ticks = interval_at(start, Duration::from_millis(2));
/// let [first, second] = rt.block_on(two_ticks(&mut ticks));
/// assert_eq!([first, second], [start, start + Duration::from_millis(2)]);
/// ```
pub struct Interval {
    period: Duration,
    next: Instant,
    sleep: Sleep,
}

impl Interval {
    /// Waits for the next tick and returns the instant it was scheduled for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// rt.block_on(async {
    ///     let mut ticks = magpie::time::interval(Duration::from_millis(1));
    ///     let first = ticks.tick().await;
    ///     let second = ticks.tick().await;
    ///     assert_eq!(second - first, Duration::from_millis(1));
    /// });
    /// ```
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick: the poll-based form of [`Interval::tick`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::task::{Context, Poll};
    ///
    /// let mut ticks = magpie::time::interval(std::time::Duration::from_secs(60));
    /// let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    /// assert!(ticks.poll_tick(&mut cx).is_ready()); // the first tick is immediate
    /// # drop(ticks);
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        match Pin::new(&mut self.sleep).poll(cx) {
            Poll::Ready(()) => {
                let tick = self.next;
                // A tick beyond what `Instant` can hold is a tick that never comes. (Falling
                // back to `tick` itself, in the past, made `interval(Duration::MAX)` tick on
                // every poll.)
                self.next = tick.checked_add(self.period).unwrap_or_else(far_future);
                self.sleep.reset(self.next);
                Poll::Ready(tick)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The period between ticks.
    ///
    /// # Examples
    ///
    /// ```
    /// let ticks = magpie::time::interval(std::time::Duration::ZERO);
    /// assert_eq!(ticks.period(), std::time::Duration::from_millis(1));
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }
}

impl fmt::Debug for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interval")
            .field("period", &self.period)
            .field("next", &self.next)
            .finish()
    }
}
