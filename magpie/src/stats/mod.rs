//! Statistics: per-worker counters and the snapshots [`Runtime::stats`](crate::Runtime::stats)
//! returns.
//!
//! Each counter has exactly one writer, its worker, which bumps it with a Relaxed load and a
//! Relaxed store ([`bump`]), no read-modify-write: on x86 and Arm that is the same `mov`/`add`
//! a plain `u64` would cost, on a cache line no other worker writes. Readers (`stats()`) load
//! with Relaxed and may see a worker's counters a few events behind each other; each value on
//! its own is exact as of some recent moment.

use crate::sync::atomic::*;
use crate::sync::AtomicU64;

/// The live counters of one worker.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounters {
    pub(crate) jobs_executed: AtomicU64,
    pub(crate) jobs_stolen: AtomicU64,
    pub(crate) steal_attempts: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) unparks: AtomicU64,
}

/// Adds one to a counter that only the calling worker writes.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64) {
    // Relaxed load and store: single writer (this worker); readers want no ordering.
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

impl WorkerCounters {
    pub(crate) fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            jobs_executed: self.jobs_executed.load(Relaxed),
            jobs_stolen: self.jobs_stolen.load(Relaxed),
            steal_attempts: self.steal_attempts.load(Relaxed),
            parks: self.parks.load(Relaxed),
            unparks: self.unparks.load(Relaxed),
        }
    }
}

/// A snapshot of one worker's counters, all counted since the runtime was built.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// rt.install(|| magpie::join(|| 1, || 2));
/// let total: u64 = rt.stats().workers.iter().map(|w| w.jobs_executed).sum();
/// assert_eq!(total, 2); // the `install` itself and the (published) `join`'s second half
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WorkerStats {
    /// Jobs this worker ran: every unit of work that was queued, that is the second halves of
    /// `join` that were published to a deque (whether stolen or taken back), scope spawns,
    /// and closures passed to `install` from outside the pool. A `join` that runs both halves
    /// inline (see [`join`](crate::join)) queues nothing and counts nothing.
    pub jobs_executed: u64,
    /// Jobs this worker took from another worker's deque.
    pub jobs_stolen: u64,
    /// Steal operations that found a non-empty deque, successful or not (a failed one lost a
    /// race with the owner or another thief).
    pub steal_attempts: u64,
    /// Times this worker went to sleep for lack of work.
    pub parks: u64,
    /// Times this worker woke up again.
    pub unparks: u64,
}

/// A snapshot of a runtime's statistics.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let stats = rt.stats();
/// assert_eq!(stats.workers.len(), 2);
/// println!("{} jobs so far", stats.jobs_executed());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Stats {
    /// One entry per worker, in worker-index order.
    pub workers: Vec<WorkerStats>,
}

impl Stats {
    /// Jobs run by all workers.
    pub fn jobs_executed(&self) -> u64 {
        self.workers.iter().map(|w| w.jobs_executed).sum()
    }

    /// Jobs stolen by all workers.
    pub fn jobs_stolen(&self) -> u64 {
        self.workers.iter().map(|w| w.jobs_stolen).sum()
    }

    /// Times any worker parked.
    pub fn parks(&self) -> u64 {
        self.workers.iter().map(|w| w.parks).sum()
    }
}
