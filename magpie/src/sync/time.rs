//! The clock, from `std` or, under `cfg(loom)`, a virtual one.
//!
//! The runtime reads the time through [`now`] only. In the normal build (and under shuttle)
//! it *is* `Instant::now`. Under loom a model must run the same way every time loom replays a
//! schedule, so the clock cannot be the real one: there it is virtual, stands still while
//! threads run, and moves only when a thread waits with a deadline ([`wait_until`] under loom
//! does not block: it moves the clock to the deadline and returns, as a timed-out wait
//! would). Time therefore passes exactly when something waits for it, which is what a timer
//! model needs: a driver parked until the next deadline wakes at once, the deadline due.
//!
//! [`wait_until`]: super::wait_until

#[cfg(not(loom))]
pub(crate) use std::time::Instant;

/// The current time.
#[cfg(not(loom))]
#[inline(always)]
pub(crate) fn now() -> Instant {
    Instant::now()
}

#[cfg(loom)]
pub(crate) use self::virtual_clock::{advance_to, now, reset, Instant};

/// The deadline `timeout` from now, for a wait with a timeout; `None` for no timeout, and
/// for one too long for an `Instant` (`Builder::park_safety_net(Duration::MAX)`), where
/// `now() + timeout` would panic, on a worker or the monitor, where nothing may (found in
/// the review of issue 19).
pub(crate) fn deadline_after(timeout: Option<std::time::Duration>) -> Option<Instant> {
    timeout.and_then(|t| now().checked_add(t))
}

#[cfg(loom)]
mod virtual_clock {
    use std::cell::Cell;
    use std::time::Duration;
    pub(crate) use std::time::Instant;

    // An OS-thread-local, not a loom one: loom runs every thread of a model as a coroutine
    // on the test's own OS thread, so this is shared by the model's threads, and models run
    // in parallel by the test harness do not see each other's clocks.
    std::thread_local! {
        /// A fixed origin (the first reading on this OS thread) and the time since it.
        static CLOCK: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
    }

    fn get() -> (Instant, Duration) {
        CLOCK.with(|c| {
            let clock = c.get().unwrap_or((Instant::now(), Duration::ZERO));
            c.set(Some(clock));
            clock
        })
    }

    /// The virtual time.
    pub(crate) fn now() -> Instant {
        let (origin, since) = get();
        origin + since
    }

    /// Moves the virtual clock forward to `deadline` (never back).
    pub(crate) fn advance_to(deadline: Instant) {
        let (origin, since) = get();
        let target = deadline.saturating_duration_since(origin).max(since);
        CLOCK.with(|c| c.set(Some((origin, target))));
    }

    /// Sets the virtual clock back to its origin: each loom execution starts at time zero.
    pub(crate) fn reset() {
        let (origin, _) = get();
        CLOCK.with(|c| c.set(Some((origin, Duration::ZERO))));
    }
}
