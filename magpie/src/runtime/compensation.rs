//! Compensation workers: extra worker slots that the stall monitor switches on while every
//! worker is stalled, and off again when the stall ends (issue 15 part 4; Go's sysmon hands
//! a P to a new M, .NET's thread pool adds threads).
//!
//! # Slots
//!
//! [`Builder::max_compensation_workers(n)`](crate::Builder::max_compensation_workers) makes
//! the runtime allocate `n` worker slots beyond the ordinary ones: with `m` ordinary workers
//! (`Builder::max_workers`, else the worker threads), slots `m..m + n`. Each slot is a
//! worker like any other (a deque, a ring, a mailbox, counters, a parker, a thread started
//! with the runtime), but it starts *switched off*, exactly as an ordinary worker above
//! `set_active_workers`' count: it parks outside the idle bitmap (`Sleep::park_retired`)
//! until it is switched on.
//!
//! Which slots are on is two counts, not a set: ordinary workers `0..active` (the prefix
//! `set_active_workers` moves) and compensation slots `m..m + on` (the prefix this file
//! moves). [`Registry::is_switched_on`] reads the one that concerns the slot asking, so the
//! two never disturb each other: `set_active_workers(k)` wakes only ordinary workers whose
//! side changed, and starting or retiring compensation wakes only compensation slots.
//! A per-slot flag would do too, but would cost `set_active_workers` one store per slot and
//! gain nothing: compensation slots are interchangeable, so a prefix says all there is.
//!
//! Switching on and off reuses the retirement of `set_active_workers` unchanged
//! (`worker/mod.rs`, `WorkerThread::retire`): the count changes first, then a plain wake of
//! each slot whose side changed; a slot switched off finishes the unit of work it is
//! running, hands its queues on (jobs to the job inject queue, tasks to the task inject
//! queue) and parks switched-off; a slot switched on leaves that park and enters the main
//! loop, where it takes from the inject queue and steals like any worker.
//!
//! The counts are written and read Relaxed: the plain wake that follows each change sets
//! the slot's token under its parker's lock, and the slot takes the token under that lock
//! before it rereads the count, so it sees the change (or a later one). A slot that reads a
//! stale count between wakes switches one unit of work late, as with `set_active_workers`.
//!
//! # The sleep protocol
//!
//! A switched-off slot is not in the idle bitmap and counts as *unparked* in the state
//! word, as every switched-off ordinary worker does (`Sleep::park_retired`). So:
//!
//! * the saturation check (`Sleep::saturated_state`: every slot unparked, none searching)
//!   and the wake conditions (`unparked < slots`) still mean "some switched-on worker is
//!   parked in the bitmap": a switched-off slot never makes a notifier skip a wake that a
//!   parked worker needed, nor wake one it cannot find (it scans the bitmap only);
//! * R2' (a park that brings the unparked count to 0 skips the heavy barrier) never fires
//!   while a slot is switched off, since that slot stays counted. That is a lost fast path,
//!   never a lost wakeup: R2' is an optimization whose soundness argument needs every
//!   other *counted* worker to be parked, and the heavy barrier it skips is always sound.
//!   Its cost: with `n > 0`, a park that leaves the pool idle pays the heavy barrier (a
//!   `membarrier` in the asymmetric mode) as one that leaves a worker running does, the
//!   price `max_workers` above the worker threads already pays;
//! * a slot that is switched on joins the protocol as any worker does: when it finds no
//!   work it registers in the bitmap (R2), rechecks (R5) and parks, and notifiers wake it.
//!
//! # Why slots, not threads started on demand
//!
//! The monitor switches compensation on from its stall path, where starting a thread could
//! fail (out of memory, a thread limit) or take long; a slot's thread already exists. And
//! every per-worker array of the registry (queues, counters, parkers, bitmaps, steal
//! victims, trace rings) stays fixed-size, so no worker ever sees an array grow under it.
//! With `n = 0` (the default) nothing is allocated and nothing changes: no slot, no thread,
//! and the only new work on a hot path is the compare with the ordinary count in
//! [`Registry::is_switched_on`].

use crate::sync::atomic::*;
use crate::sync::{AtomicUsize, StatAtomicU64 as AtomicU64};
use crate::util::CachePadded;

use super::registry::Registry;

/// The compensation slots of a registry and how many are switched on.
#[derive(Debug)]
pub(crate) struct Compensation {
    /// The first compensation slot: the ordinary worker count.
    first: usize,
    /// How many compensation slots there are (`Builder::max_compensation_workers`).
    max: usize,
    /// Slots `first..first + on` are switched on; `on <= max`. Read by each compensation
    /// worker once per unit of work, written by the monitor: a line of its own.
    on: CachePadded<AtomicUsize>,
    /// Successful `start_compensation_worker` calls, for the statistics.
    started: AtomicU64,
}

impl Compensation {
    pub(crate) fn new(first: usize, max: usize) -> Compensation {
        Compensation {
            first,
            max,
            on: CachePadded::new(AtomicUsize::new(0)),
            started: AtomicU64::new(0),
        }
    }

    /// How many compensation slots are switched on now.
    #[inline]
    pub(crate) fn on(&self) -> usize {
        // Relaxed: see the module docs; the wakes carry the news.
        self.on.load(Relaxed)
    }

    /// The word [`Compensation::on`] reads (`Registry::switch_of`).
    pub(crate) fn on_word(&self) -> &AtomicUsize {
        &self.on
    }

    /// Compensation workers started so far.
    pub(crate) fn started(&self) -> u64 {
        // Relaxed: a statistic.
        self.started.load(Relaxed)
    }
}

impl Registry {
    /// How many more compensation workers may start now: 0 while the runtime shuts down.
    pub(crate) fn compensation_available(&self) -> usize {
        if self.is_terminating() {
            return 0;
        }
        let comp = &self.compensation;
        comp.max.saturating_sub(comp.on())
    }

    /// Switches one more compensation slot on: it then runs like any worker (takes from the
    /// inject queue, steals, parks in the bitmap when idle) until
    /// [`Registry::retire_compensation_workers`]. Returns false, changing nothing, if every
    /// slot is on already (or there are none) or the runtime is shutting down.
    pub(crate) fn start_compensation_worker(&self) -> bool {
        if self.is_terminating() {
            return false;
        }
        let comp = &self.compensation;
        // Relaxed: see the module docs. A CAS, not a fetch_add: the count must never pass
        // `max`, or a slot index beyond the arrays would be woken.
        let mut on = comp.on();
        loop {
            if on >= comp.max {
                return false;
            }
            match comp.on.compare_exchange_weak(on, on + 1, Relaxed, Relaxed) {
                Ok(_) => break,
                Err(now) => on = now,
            }
        }
        if cfg!(not(magpie_no_stats)) {
            // Relaxed: a statistic.
            comp.started.fetch_add(1, Relaxed);
        }
        // After the change it announces (the slot rereads the count once it has the token).
        // Should a retire have switched the slot off again meanwhile, the wake only makes
        // the slot look and park again.
        self.sleep.wake_worker(comp.first + on);
        true
    }

    /// Switches every compensation slot off. Each one that was on finishes the unit of work
    /// it is running, hands its queues on and parks switched-off, as a worker switched off
    /// by `set_active_workers` does. Returns at once; ordinary workers are not touched.
    pub(crate) fn retire_compensation_workers(&self) {
        let comp = &self.compensation;
        // Relaxed: see the module docs; the wakes below carry the news.
        let old = comp.on.swap(0, Relaxed);
        for slot in comp.first..comp.first + old {
            self.sleep.wake_worker(slot);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
