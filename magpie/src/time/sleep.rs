//! [`sleep`], [`sleep_until`] and the [`Sleep`] future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::driver::Registration;
use super::wheel::TimerKey;
use crate::runtime::context;
use crate::runtime::handle::DriverHandle;
use crate::task::coop;

/// Waits until `duration` has elapsed.
///
/// The timer has millisecond resolution and never fires early: the future completes at the
/// first millisecond tick at or after `now + duration`. Any duration is accepted;
/// `Duration::MAX` simply never fires.
///
/// The timer belongs to the runtime the future is first polled on (the worker's, or the one
/// whose `block_on` polls it); polled anywhere else, to the global runtime. It moves only
/// when that runtime shuts down (see [`Sleep`]).
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
/// polls keep it there, whichever thread or executor polls it. When that runtime shuts down
/// (its `Runtime` is dropped), the shutdown wakes every timer still filed with it, and the
/// next poll moves the timer to the runtime polling it then, or, if that is the runtime
/// shutting down (inside one of its blocking closures, or its `block_on`), to the global
/// runtime: a `Sleep` awaited anywhere completes at its deadline, whatever became of the
/// runtime it was filed with. Dropping it cancels the timer (its entry leaves the wheel at
/// once).
///
/// The waker of the last poll is the one woken. Whatever that waker does when woken or
/// dropped, a panic included, stays with it: the runtime catches the panic, and fires the
/// other timers all the same.
///
/// # Examples
///
/// A `Sleep` filed with a runtime, then awaited on a thread of its own, completes though the
/// runtime is dropped meanwhile:
///
/// ```
/// use std::time::Duration;
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let mut nap = Box::pin(magpie::time::sleep(Duration::from_millis(20)));
/// rt.block_on(async {
///     let _ = futures::poll!(nap.as_mut()); // filed with `rt`
/// });
/// let waiter = std::thread::spawn(move || futures::executor::block_on(nap));
/// drop(rt);
/// waiter.join().unwrap();
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    entry: Option<Entry>,
}

/// Where a pending `Sleep` is filed.
struct Entry {
    runtime: DriverHandle,
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
            entry.runtime.timers().deregister(entry.key);
        }
    }

    /// Files the timer with `runtime` (re-filing `old`, its previous key there, if any),
    /// or, if `runtime` closed its timers meanwhile, where [`fallback_runtime`] says: the
    /// `is_terminating` checks in `poll` are a hint, the driver's lock decides (`driver.rs`,
    /// "Closing").
    fn file(&mut self, runtime: DriverHandle, old: Option<TimerKey>, waker: Waker) {
        let deadline_ms = runtime.timers().deadline_ms(self.deadline);
        let (runtime, key, rearm) = match runtime.timers().register(old, deadline_ms, waker) {
            Registration::Filed { key, rearm } => (runtime, key, rearm),
            Registration::Closed(waker) => {
                let Some(fallback) = fallback_runtime() else {
                    return;
                };
                let deadline_ms = fallback.timers().deadline_ms(self.deadline);
                match fallback.timers().register(None, deadline_ms, waker) {
                    Registration::Filed { key, rearm } => (fallback, key, rearm),
                    Registration::Closed(_) => unreachable!("the global runtime never shuts down"),
                }
            }
        };
        runtime.rearm_timers(rearm);
        self.entry = Some(Entry { runtime, key });
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
        // Cloned before the entry is touched: a clone that panics leaves the timer as it was.
        let waker = cx.waker().clone();
        let (runtime, old) = match this.entry.take() {
            // A runtime that is shutting down fires nothing more: move the timer. (`close`
            // took it already, unless this poll runs between `terminate` and `close`.)
            Some(entry) if entry.runtime.is_terminating() => {
                entry.runtime.timers().deregister(entry.key);
                (live_runtime(), None)
            }
            Some(entry) => (Some(entry.runtime), Some(entry.key)),
            None => (live_runtime(), None),
        };
        if let Some(runtime) = runtime {
            this.file(runtime, old, waker);
        }
        Poll::Pending
    }
}

/// The runtime a timer is filed with when it has none that runs: the current one (the
/// worker's, the blocking closure's, the `block_on`'s, else the global one), unless that is
/// shutting down, then [`fallback_runtime`].
fn live_runtime() -> Option<DriverHandle> {
    let current = DriverHandle::current();
    if current.is_terminating() {
        fallback_runtime()
    } else {
        Some(current)
    }
}

/// Where a timer goes whose runtime is shutting down: nowhere if this poll is that runtime's
/// worker polling one of its tasks, which was cancelled and is dropped when the poll returns
/// (filing it elsewhere would start the global runtime for nothing:
/// `context::in_task_of_terminating_runtime`); otherwise the global runtime, which never
/// shuts down (it lives in a `static`), so that a waiter outside the pool still wakes.
fn fallback_runtime() -> Option<DriverHandle> {
    if context::in_task_of_terminating_runtime() {
        None
    } else {
        Some(DriverHandle::global())
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
