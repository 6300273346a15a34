//! The stall monitor's bell: how the monitor thread (`runtime/monitor.rs`) sleeps while the
//! pool is idle, and how the pool's first worker to wake rings it.
//!
//! # Protocol
//!
//! The monitor samples the workers every tick while any worker is unparked. When it sees the
//! pool idle (the unparked count of `Sleep::state` is 0) it goes to sleep on the bell, with no
//! timeout, so an idle pool costs it no CPU. The transition that makes the pool busy again is
//! a claim that raises the unparked count from 0 (`Sleep::wake_cold`, `Sleep::settle`: the
//! only two operations that raise it, and both already hold the RMW's previous value). That
//! claimer rings the bell, in a cold path, if the monitor is asleep.
//!
//! The Dekker pair, all four operations `SeqCst`:
//!
//! * monitor: `asleep.store(true)`; then `state.load()`; sleeps only if unparked is 0;
//! * claimer: `state.fetch_add(UNPARKED_ONE ..)` returning unparked 0; then `asleep.load()`;
//!   rings if true.
//!
//! In the single total order of `SeqCst` operations, either the monitor's load comes after the
//! claimer's RMW, and sees an unparked count of at least 1 from it (or a later value: if that
//! is 0 again, the pool went idle again through a later R2 decrement, and sleeping is right;
//! the next 0 → 1 claim rings), so it does not sleep; or the claimer's load comes after the
//! monitor's store, sees `asleep`, and rings. The ring is a token under a lock, kept until the
//! monitor consumes it, so a ring that comes before the monitor blocks ends the wait at once.
//! No claim can slip between: the monitor blocks only on the token.
//!
//! The model `loom_monitor_bell_is_rung_when_the_pool_wakes` (`loom_sleep.rs`) checks the
//! pair, with a negative control that skips the monitor's recheck.
//!
//! # Cost
//!
//! To the workers: one compare of a value already in a register per claim (cold paths both:
//! a claim means a worker was parked), and a load of `asleep` only for the claim that wakes an
//! idle pool.

use std::time::Duration;

use crate::sync::atomic::*;
use crate::sync::{lock, wait_until, AtomicBool, Condvar, Mutex};

/// The stall monitor's bell (module docs).
#[derive(Debug, Default)]
pub(crate) struct Bell {
    /// Set by the monitor before its last look at the unparked count, cleared when it wakes.
    asleep: AtomicBool,
    /// A ring not yet consumed.
    rung: Mutex<bool>,
    condvar: Condvar,
}

impl Bell {
    pub(crate) fn new() -> Bell {
        Bell::default()
    }

    /// The monitor is about to sleep: the first half of its side of the pair. It must then
    /// load the unparked count and call [`Bell::sleep`] only if it is 0, else [`Bell::awake`].
    pub(crate) fn going_to_sleep(&self) {
        // SeqCst: pairs with the claimer's RMW on `state` and its load in `ring_if_asleep`
        // (module docs).
        self.asleep.store(true, SeqCst);
    }

    /// The monitor did not sleep after all, or woke.
    pub(crate) fn awake(&self) {
        // Relaxed: only the monitor reads it as its own flag; a claimer that sees it set a
        // moment too long rings once for nothing.
        self.asleep.store(false, Relaxed);
    }

    /// Blocks the monitor until a ring, or `timeout` (the tick, while it samples), and
    /// consumes the ring. Returns whether it was rung.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = timeout.map(|t| crate::sync::time::now() + t);
        let mut rung = lock(&self.rung);
        while !*rung {
            if deadline.is_some_and(|d| crate::sync::time::now() >= d) {
                return false;
            }
            rung = wait_until(&self.condvar, rung, deadline);
        }
        *rung = false;
        true
    }

    /// Rings: ends the monitor's wait, or its next one.
    pub(crate) fn ring(&self) {
        *lock(&self.rung) = true;
        self.condvar.notify_one();
    }

    /// The claimer's side: rings if the monitor is asleep (module docs).
    #[cold]
    pub(crate) fn ring_if_asleep(&self) {
        // SeqCst: pairs with the store in `going_to_sleep` (module docs).
        if self.asleep.load(SeqCst) {
            self.ring();
        }
    }
}
