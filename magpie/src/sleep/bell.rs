//! The stall monitor's bell: how the monitor thread (`runtime/monitor.rs`) sleeps while the
//! pool is idle, and how the pool's first worker to wake rings it.
//!
//! # Protocol
//!
//! The monitor samples the workers every period while any worker is unparked. When it sees the
//! pool idle (the unparked count of `Sleep::state` is 0) it goes to sleep on the bell, with no
//! timeout, so an idle pool costs it no CPU. The transition that makes the pool busy again is
//! a claim that raises the unparked count from 0 (`Sleep::wake_cold`, `Sleep::settle`: the
//! only two operations that raise it, and both already hold the RMW's previous value). That
//! claimer rings the bell, in a cold path, if the monitor is asleep.
//!
//! The Dekker pair, written with fences (as the rest of the protocol is, so that loom, which
//! checks `SeqCst` fences but treats `SeqCst` loads and stores as acquire/release, checks it):
//!
//! * monitor: `asleep.store(true)`; `fence(SeqCst)`; `state.load()`; sleeps only if
//!   unparked is 0;
//! * claimer: `state.fetch_add(UNPARKED_ONE ..)` returning unparked 0; `fence(SeqCst)`;
//!   `asleep.load()`; rings if true.
//!
//! The two fences are ordered one way or the other. If the monitor's comes first, the
//! claimer's load, after its own fence, sees `asleep` (stored before the monitor's fence),
//! and it rings. If the claimer's comes first, the monitor's load of `state` sees the
//! claimer's RMW or a later value; it finds unparked at least 1 and does not sleep, or 0
//! again, because the pool went idle again through a later R2 decrement, and then sleeping
//! is right (the next 0 → 1 claim rings). The ring is a token under a lock, kept until the
//! monitor consumes it, so a ring that comes before the monitor blocks ends the wait at once.
//!
//! The model `loom_monitor_bell_is_rung_when_the_pool_wakes` (`loom_sleep.rs`) checks the
//! pair, with a negative control that skips the monitor's recheck.
//!
//! # Cost
//!
//! To the workers: one compare of a value already in a register per claim (cold paths both:
//! a claim means a worker was parked), and a fence and a load of `asleep` only for the claim
//! that wakes an idle pool.

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
    /// load the unparked count and call [`Bell::wait`] only if it is 0, else [`Bell::awake`].
    pub(crate) fn going_to_sleep(&self) {
        // Relaxed: ordered before the caller's load of `state` by the fence below.
        self.asleep.store(true, Relaxed);
        // SeqCst: pairs with the fence in `ring_if_asleep` (module docs).
        fence(SeqCst);
    }

    /// The monitor did not sleep after all, or woke.
    pub(crate) fn awake(&self) {
        // Relaxed: only the monitor reads it as its own flag; a claimer that sees it set a
        // moment too long rings once for nothing.
        self.asleep.store(false, Relaxed);
    }

    /// Blocks the monitor until a ring, or `timeout` (the sample period, while it samples), and
    /// consumes the ring. Returns whether it was rung.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = crate::sync::time::deadline_after(timeout);
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
        // SeqCst: pairs with the fence in `going_to_sleep`; the caller's RMW on `state`
        // comes before it (module docs).
        fence(SeqCst);
        // Relaxed: ordered by the fence.
        if self.asleep.load(Relaxed) {
            self.ring();
        }
    }
}
