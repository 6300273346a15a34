//! The timer driver: one runtime's wheel, its clock, and who drives it.
//!
//! Timers are filed in a [`Wheel`] of wakers under a mutex. Nobody runs a timer thread: the
//! worker that parks while no other worker drives the wheel becomes the *driver* and parks
//! with a timeout to the next deadline ([`Driver::park_timeout`]); when it wakes it fires what
//! is due ([`Driver::fire_due`]) and gives the role up. Busy workers also fire due timers at
//! their periodic maintenance, so timers fire while every worker is busy too.
//!
//! A timer filed with a deadline earlier than the one the driver parked for must cut the
//! driver's park short: [`Driver::register`] says whom to wake. The race between a worker
//! becoming the driver (CAS on `driver`, then load `next_ms`) and a registration (lower
//! `next_ms`, then load `driver`) is settled by SeqCst on both: either the driver sees the
//! new deadline, or the registrar sees the driver and wakes it (its token survives until the
//! park, see `sleep/parker.rs`).
//!
//! *The fences.* In the C++ memory model the four SeqCst accesses alone settle that race.
//! loom, though, models a SeqCst load or read-modify-write as only AcqRel (tokio-rs/loom#180): without
//! more, it reports a driver that read the old `next_ms` while the registrar read the old
//! `driver`, and parks for good; `loom_runtime_timer_register_fire_cancel` did exactly that.
//! A SeqCst fence between each side's write and read settles the race in both models, so
//! each side has one; they cost one barrier per registration that lowers the deadline and
//! per driver park, next to a lock and a futex call.
//!
//! Times are whole milliseconds since `start`. A deadline is rounded *up* and the clock
//! *down*, so a timer fires only when `Instant::now() >= deadline`: never early.

use std::task::Waker;
use std::time::{Duration, Instant};

use super::wheel::{TimerKey, Wheel};
use crate::sync::atomic::*;
use crate::sync::{lock, AtomicU64, AtomicUsize, Mutex};

/// `driver` when nobody drives the wheel.
const NO_DRIVER: usize = usize::MAX;
/// `next_ms` when the wheel is empty.
const NONE: u64 = u64::MAX;

/// Whom a registration must wake so that the new deadline is seen.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rearm {
    /// Nobody: the deadline is not the earliest, or the driver will see it.
    Nobody,
    /// This worker drives the wheel, parked for a later deadline.
    Driver(usize),
    /// Nobody drives the wheel: wake any parked worker, which will take the role.
    Anyone,
}

/// One runtime's timers.
#[derive(Debug)]
pub(crate) struct Driver {
    start: Instant,
    wheel: Mutex<Wheel<Waker>>,
    /// The earliest time the wheel may have something to fire, or `NONE`. Lowered by
    /// registrations, recomputed by `fire_due`.
    next_ms: AtomicU64,
    /// The worker driving the wheel, or `NO_DRIVER`.
    driver: AtomicUsize,
    /// Filed timers, for statistics. Relaxed: a gauge.
    pending: AtomicUsize,
}

impl Driver {
    pub(crate) fn new() -> Driver {
        Driver {
            start: crate::sync::time::now(),
            wheel: Mutex::new(Wheel::new()),
            next_ms: AtomicU64::new(NONE),
            driver: AtomicUsize::new(NO_DRIVER),
            pending: AtomicUsize::new(0),
        }
    }

    /// `deadline` in wheel milliseconds, rounded up (never early), saturating.
    pub(crate) fn deadline_ms(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.start);
        let ms = since.as_millis();
        let round_up = u128::from(since.subsec_nanos() % 1_000_000 != 0);
        u64::try_from(ms + round_up).unwrap_or(u64::MAX - 1)
    }

    /// Now in wheel milliseconds, rounded down.
    pub(crate) fn now_ms(&self) -> u64 {
        self.ms_at(crate::sync::time::now())
    }

    /// `now` in wheel milliseconds, rounded down.
    fn ms_at(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.start);
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// Files (or re-files) a timer for `deadline_ms` that wakes `waker`. `old` is the key of
    /// this timer's previous filing, if any; it is removed first. Returns the new key and
    /// whom the caller must wake.
    pub(crate) fn register(
        &self,
        old: Option<TimerKey>,
        deadline_ms: u64,
        waker: Waker,
    ) -> (TimerKey, Rearm) {
        let key = {
            let mut wheel = lock(&self.wheel);
            if let Some(old) = old {
                if wheel.remove(old).is_some() {
                    self.pending.fetch_sub(1, Relaxed);
                }
            }
            self.pending.fetch_add(1, Relaxed);
            wheel.insert(deadline_ms, waker)
        };
        // SeqCst: the lowering and the load of `driver` below take part in the total order
        // with `try_drive` (module docs).
        let prev = self.next_ms.fetch_min(deadline_ms, SeqCst);
        if deadline_ms >= prev {
            return (key, Rearm::Nobody);
        }
        // Pairs with the fence in `park_timeout` (module docs: "the fences").
        fence(SeqCst);
        // SeqCst: see above.
        let rearm = match self.driver.load(SeqCst) {
            NO_DRIVER => Rearm::Anyone,
            worker => Rearm::Driver(worker),
        };
        (key, rearm)
    }

    /// Removes a timer that has not fired (dropping a `Sleep`). A stale key does nothing.
    pub(crate) fn deregister(&self, key: TimerKey) {
        let removed = lock(&self.wheel).remove(key);
        if removed.is_some() {
            self.pending.fetch_sub(1, Relaxed);
        }
        // The waker is dropped outside the lock: its drop may free a task.
        drop(removed);
    }

    /// Tries to make `worker` the driver. The caller must then park no longer than
    /// [`Driver::park_timeout`] and call [`Driver::fire_due`] and [`Driver::release`].
    pub(crate) fn try_drive(&self, worker: usize) -> bool {
        // SeqCst: see the module docs (paired with the loads in `register`).
        self.driver
            .compare_exchange(NO_DRIVER, worker, SeqCst, Relaxed)
            .is_ok()
    }

    /// Gives the driver role up.
    pub(crate) fn release(&self) {
        // SeqCst: a registrar that reads NO_DRIVER after this wakes somebody.
        self.driver.store(NO_DRIVER, SeqCst);
    }

    /// How long the driver may park: until the next deadline, or `None` with no timers.
    pub(crate) fn park_timeout(&self) -> Option<Duration> {
        // Pairs with the fence in `register` (module docs: "the fences").
        fence(SeqCst);
        // SeqCst: see the module docs.
        let next = self.next_ms.load(SeqCst);
        if next == NONE {
            return None;
        }
        let now = self.now_ms();
        Some(Duration::from_millis(next.saturating_sub(now)))
    }

    /// Whether a timer may be due at `now` (cheap: one load; the caller has the clock).
    pub(crate) fn is_due(&self, now: Instant) -> bool {
        // Relaxed: a hint; `fire_due` rereads under the lock.
        let next = self.next_ms.load(Relaxed);
        next != NONE && next <= self.ms_at(now)
    }

    /// Fires every timer that is due and recomputes the next deadline. Returns how many fired.
    pub(crate) fn fire_due(&self) -> usize {
        let mut fired = Vec::new();
        {
            let mut wheel = lock(&self.wheel);
            wheel.poll(self.now_ms(), &mut fired);
            let next = wheel.next_expiration().unwrap_or(NONE);
            if cfg!(magpie_loom_broken) {
                // A negative control for `loom_driver`: storing after unlocking lets a stale
                // `next` overwrite a registration's lowering, stranding its timer.
                drop(wheel);
            }
            // SeqCst: see the module docs. Under the lock, so registrations (which lower it
            // after inserting, under the same lock first) cannot be overwritten by a stale
            // value: a registration that inserted before our `poll` is in `next`, one that
            // inserts after lowers it after this store.
            self.next_ms.store(next, SeqCst);
        }
        self.pending.fetch_sub(fired.len(), Relaxed);
        let count = fired.len();
        // Wake outside the lock: waking schedules tasks, which may file timers.
        for (_, waker) in fired {
            waker.wake();
        }
        count
    }

    /// Whether timers are filed and nobody drives the wheel (see `worker.rs`, `retire`).
    pub(crate) fn needs_driver(&self) -> bool {
        // SeqCst: as in `register` (module docs), with the caller's fence.
        self.next_ms.load(SeqCst) != NONE && self.driver.load(SeqCst) == NO_DRIVER
    }

    /// Timers filed and not yet fired or removed.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Relaxed)
    }

    /// Drops every filed timer (shutdown: their tasks are cancelled already).
    pub(crate) fn clear(&self) {
        let mut all = Vec::new();
        {
            let mut wheel = lock(&self.wheel);
            wheel.poll(u64::MAX - 1, &mut all);
            self.next_ms.store(NONE, SeqCst);
        }
        self.pending.fetch_sub(all.len(), Relaxed);
        drop(all);
    }
}

#[cfg(all(test, loom))]
#[path = "loom_driver.rs"]
mod loom_driver;
