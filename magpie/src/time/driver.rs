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
//!
//! *User code.* The wheel holds wakers, and a waker is user code: its `wake` and its `drop`
//! may panic, block, or drop another `Sleep` of this runtime, whose `deregister` takes the
//! wheel's lock. So no user code runs under the lock (the lock's doc): every waker that
//! leaves the wheel (fired, replaced, cancelled, or taken by `close`) is woken or dropped
//! after the lock is released, and each of those calls is a boundary where the runtime
//! regains control ([`contain`]): a panic is caught there and its payload dropped, so it
//! unwinds neither into a worker (which aborts on a panic of its own) nor into a
//! `Runtime::drop`, and the other wakers of the same batch still run.
//!
//! *Closing.* A runtime that shuts down fires no more timers, but a timer filed with it may
//! belong to a future polled elsewhere (a `block_on` on another thread, a blocking closure
//! the shutdown waits for). [`Driver::close`] marks the driver closed and takes every filed
//! waker under one lock hold, then wakes them all; [`Driver::register`] refuses, under the
//! same lock, to file anything on a closed driver and gives the waker back. So a
//! registration racing the close is either filed before it (and woken by it) or refused
//! (and its `Sleep` files it with a runtime that still runs), never stranded
//! (`loom_driver.rs` checks this).

use std::task::Waker;
use std::time::{Duration, Instant};

use super::wheel::{TimerKey, Wheel};
use crate::sync::atomic::*;
use crate::sync::{lock, AtomicU64, AtomicUsize, Mutex};
use crate::task::raw::drop_payload;
use crate::util::unwind::halt_unwinding;

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

/// What [`Driver::register`] did with a timer.
#[must_use]
#[derive(Debug)]
pub(crate) enum Registration {
    /// Filed under `key`; the caller must honour `rearm` (`Registry::rearm_timers`).
    Filed { key: TimerKey, rearm: Rearm },
    /// Refused: the driver is closed (its runtime is shutting down). Nothing was filed, the
    /// previous filing is gone already (`close` took it), and here is the waker back.
    Closed(Waker),
}

/// The part of the driver only its lock reaches.
#[derive(Debug)]
struct Synced {
    wheel: Wheel<Waker>,
    /// Set once, by `close`; nothing is filed afterwards.
    closed: bool,
}

/// One runtime's timers.
#[derive(Debug)]
pub(crate) struct Driver {
    start: Instant,
    /// The wheel. No user code runs under this lock: wakers are moved in and out of it
    /// here, and woken or dropped only after it is released (module docs, "User code").
    synced: Mutex<Synced>,
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
            synced: Mutex::new(Synced {
                wheel: Wheel::new(),
                closed: false,
            }),
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
    /// this timer's previous filing, if any; it is removed first (and its waker dropped,
    /// contained, after the lock). Returns the new key and whom the caller must wake, or
    /// the waker back if the driver is closed (module docs, "Closing").
    pub(crate) fn register(
        &self,
        old: Option<TimerKey>,
        deadline_ms: u64,
        waker: Waker,
    ) -> Registration {
        let (key, replaced) = {
            let mut synced = lock(&self.synced);
            if synced.closed {
                // `close` took every filing, `old`'s included: there is nothing to remove.
                return Registration::Closed(waker);
            }
            let replaced = old.and_then(|old| synced.wheel.remove(old));
            if replaced.is_some() {
                self.pending.fetch_sub(1, Relaxed);
            }
            self.pending.fetch_add(1, Relaxed);
            (synced.wheel.insert(deadline_ms, waker), replaced)
        };
        // SeqCst: the lowering and the load of `driver` below take part in the total order
        // with `try_drive` (module docs).
        let prev = self.next_ms.fetch_min(deadline_ms, SeqCst);
        let rearm = if deadline_ms >= prev {
            Rearm::Nobody
        } else {
            // Pairs with the fence in `park_timeout` (module docs: "the fences").
            fence(SeqCst);
            // SeqCst: see above.
            match self.driver.load(SeqCst) {
                NO_DRIVER => Rearm::Anyone,
                worker => Rearm::Driver(worker),
            }
        };
        // After the lock: its drop may drop another `Sleep` of this runtime (module docs).
        if let Some(replaced) = replaced {
            contain(|| drop(replaced));
        }
        Registration::Filed { key, rearm }
    }

    /// Removes a timer that has not fired (dropping a `Sleep`). A stale key does nothing.
    pub(crate) fn deregister(&self, key: TimerKey) {
        let removed = lock(&self.synced).wheel.remove(key);
        if let Some(waker) = removed {
            self.pending.fetch_sub(1, Relaxed);
            // After the lock (the statement above released it), contained.
            contain(|| drop(waker));
        }
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
            let mut synced = lock(&self.synced);
            synced.wheel.poll(self.now_ms(), &mut fired);
            let next = synced.wheel.next_expiration().unwrap_or(NONE);
            if cfg!(magpie_loom_broken) {
                // A negative control for `loom_driver`: storing after unlocking lets a stale
                // `next` overwrite a registration's lowering, stranding its timer.
                drop(synced);
            }
            // SeqCst: see the module docs. Under the lock, so registrations (which lower it
            // after inserting, under the same lock first) cannot be overwritten by a stale
            // value: a registration that inserted before our `poll` is in `next`, one that
            // inserts after lowers it after this store.
            self.next_ms.store(next, SeqCst);
        }
        self.pending.fetch_sub(fired.len(), Relaxed);
        let count = fired.len();
        // Outside the lock: waking schedules tasks, which may file timers.
        wake_all(fired);
        count
    }

    /// Whether a worker holds the driver role now.
    pub(crate) fn is_driven(&self) -> bool {
        // SeqCst: the caller's side of a Dekker pair with `try_drive` (see
        // `Registry::hand_off_driver`).
        self.driver.load(SeqCst) != NO_DRIVER
    }

    /// Whether any timer is filed (one may be due later).
    pub(crate) fn has_timers(&self) -> bool {
        // SeqCst: the caller's side of a Dekker pair with `register`'s lowering, as in
        // `Registry::hand_off_driver`.
        self.next_ms.load(SeqCst) != NONE
    }

    /// Timers filed and not yet fired or removed.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Relaxed)
    }

    /// Closes the driver (shutdown: its runtime fires nothing more): from now on
    /// [`Driver::register`] files nothing, and every timer filed so far is woken, so that
    /// its future files it elsewhere (module docs, "Closing"). Returns how many were woken.
    /// Idempotent.
    pub(crate) fn close(&self) -> usize {
        let mut all = Vec::new();
        {
            let mut synced = lock(&self.synced);
            synced.wheel.drain(&mut all);
            if cfg!(magpie_loom_broken) {
                // A negative control for `loom_driver`: taking the timers and closing in two
                // lock holds lets a registration slip in between, filed and never woken.
                drop(synced);
                synced = lock(&self.synced);
            }
            synced.closed = true;
            // Relaxed: nothing lowers it any more; a worker that still reads the old value
            // only fires an empty wheel or parks with a timeout it did not need.
            self.next_ms.store(NONE, Relaxed);
        }
        self.pending.fetch_sub(all.len(), Relaxed);
        let count = all.len();
        wake_all(all);
        count
    }
}

/// Runs `f`, a call into a waker (user code), where the runtime regains control: a panic is
/// caught and its payload dropped, itself contained (`drop_payload`).
fn contain(f: impl FnOnce()) {
    if let Err(payload) = halt_unwinding(f) {
        drop_payload(payload);
    }
}

/// Wakes every waker of a batch taken from the wheel, each contained: one that panics does
/// not keep the others asleep.
fn wake_all(batch: Vec<(TimerKey, Waker)>) {
    for (_, waker) in batch {
        contain(|| waker.wake());
    }
}

#[cfg(all(test, loom))]
#[path = "loom_driver.rs"]
mod loom_driver;
