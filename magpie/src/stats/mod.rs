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
    pub(crate) tasks_polled: AtomicU64,
    pub(crate) tasks_completed: AtomicU64,
    pub(crate) tasks_stolen: AtomicU64,
    pub(crate) steal_operations: AtomicU64,
    pub(crate) lifo_hits: AtomicU64,
    pub(crate) lifo_steals: AtomicU64,
    pub(crate) inject_pulls: AtomicU64,
    pub(crate) overflows: AtomicU64,
    /// Gauges, overwritten by the worker.
    pub(crate) interval: AtomicU64,
    pub(crate) mean_task_ns: AtomicU64,
    /// Nanoseconds spent parked, over completed parks.
    pub(crate) parked_ns: AtomicU64,
    /// While parked: when the park began, in nanoseconds since the runtime started, plus 1;
    /// 0 while awake.
    pub(crate) parked_since: AtomicU64,
}

/// Adds one to a counter that only the calling worker writes.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64) {
    // Relaxed load and store: single writer (this worker); readers want no ordering.
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

/// Sets a gauge that only the calling worker writes.
#[inline(always)]
pub(crate) fn set(gauge: &AtomicU64, value: u64) {
    // Relaxed: single writer; readers want no ordering.
    gauge.store(value, Relaxed);
}

impl WorkerCounters {
    /// Adds `n` to a counter that only the calling worker writes.
    #[inline(always)]
    pub(crate) fn add(&self, counter: &AtomicU64, n: u64) {
        // Relaxed load and store: as in `bump`.
        counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// A snapshot; the queue depths are read from the worker's queues by the caller, and
    /// `uptime_ns` is the time since the runtime started.
    pub(crate) fn snapshot(
        &self,
        local_queue_depth: usize,
        mailbox_depth: usize,
        uptime_ns: u64,
    ) -> WorkerStats {
        let parked_since = self.parked_since.load(Relaxed);
        let parked_now = match parked_since {
            0 => 0,
            since => uptime_ns.saturating_sub(since - 1),
        };
        let idle_time_ns = (self.parked_ns.load(Relaxed) + parked_now).min(uptime_ns);
        WorkerStats {
            jobs_executed: self.jobs_executed.load(Relaxed),
            jobs_stolen: self.jobs_stolen.load(Relaxed),
            steal_attempts: self.steal_attempts.load(Relaxed),
            parks: self.parks.load(Relaxed),
            unparks: self.unparks.load(Relaxed),
            tasks_polled: self.tasks_polled.load(Relaxed),
            tasks_executed: self.tasks_completed.load(Relaxed),
            tasks_stolen: self.tasks_stolen.load(Relaxed),
            steal_operations: self.steal_operations.load(Relaxed),
            lifo_hits: self.lifo_hits.load(Relaxed),
            lifo_steals: self.lifo_steals.load(Relaxed),
            inject_pulls: self.inject_pulls.load(Relaxed),
            overflows: self.overflows.load(Relaxed),
            global_queue_interval: self.interval.load(Relaxed),
            mean_task_time_ns: self.mean_task_ns.load(Relaxed),
            local_queue_depth: local_queue_depth as u64,
            mailbox_depth: mailbox_depth as u64,
            busy_time_ns: uptime_ns - idle_time_ns,
            idle_time_ns,
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
    /// Task polls on this worker (a task that waits and is woken is polled several times).
    pub tasks_polled: u64,
    /// Tasks (async tasks and submitted closures) that finished on this worker: completed,
    /// panicked, or dropped after being aborted.
    pub tasks_executed: u64,
    /// Tasks this worker took from other workers (ring halves, mailboxes, LIFO slots).
    pub tasks_stolen: u64,
    /// Successful task steal operations (one may move up to 128 tasks).
    pub steal_operations: u64,
    /// Tasks run from the LIFO slot.
    pub lifo_hits: u64,
    /// Tasks this worker took out of another worker's LIFO slot, because that worker was
    /// busy in a long poll (the stranded-LIFO rescue; see ARCHITECTURE.md).
    pub lifo_steals: u64,
    /// Batches pulled from the global inject queue.
    pub inject_pulls: u64,
    /// Times the local ring was full and half of it moved to the inject queue.
    pub overflows: u64,
    /// The current adaptive interval, in tasks, between checks of the inject queue
    /// (clamp(1 ms / mean task time, 8, 255)).
    pub global_queue_interval: u64,
    /// The mean task poll time in nanoseconds (EWMA, α = 0.1), 0 before the first sample.
    pub mean_task_time_ns: u64,
    /// Tasks queued in this worker's ring right now.
    pub local_queue_depth: u64,
    /// Tasks waiting in this worker's mailbox right now (from `submit_to` and
    /// `submit_balanced`).
    pub mailbox_depth: u64,
    /// Nanoseconds since the runtime started that this worker was not parked: running work
    /// or looking for it.
    pub busy_time_ns: u64,
    /// Nanoseconds since the runtime started that this worker spent parked.
    pub idle_time_ns: u64,
}

impl WorkerStats {
    /// The share of this worker's lifetime it was not parked, from 0.0 to 1.0.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// for w in rt.stats().workers {
    ///     assert!((0.0..=1.0).contains(&w.utilization()));
    /// }
    /// ```
    pub fn utilization(&self) -> f64 {
        let total = self.busy_time_ns + self.idle_time_ns;
        if total == 0 {
            0.0
        } else {
            self.busy_time_ns as f64 / total as f64
        }
    }
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
    /// Tasks spawned and not yet finished (pending, queued or running).
    pub tasks_alive: u64,
    /// Tasks waiting in the global inject queue.
    pub inject_queue_depth: u64,
    /// Timers filed and not yet fired or cancelled.
    pub timers_pending: u64,
    /// Threads of the blocking pool alive now.
    pub blocking_threads: u64,
    /// Closures queued on the blocking pool, not yet started.
    pub blocking_queue_depth: u64,
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

    /// Tasks finished on all workers.
    pub fn tasks_executed(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_executed).sum()
    }

    /// Task polls on all workers.
    pub fn tasks_polled(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_polled).sum()
    }

    /// Tasks stolen by all workers.
    pub fn tasks_stolen(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_stolen).sum()
    }

    /// The share of finished work (jobs and tasks) that ran on another worker than the one
    /// it was queued on: stolen jobs and tasks over executed ones, 0.0 before any ran.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// assert!((0.0..=1.0).contains(&rt.stats().steal_rate()));
    /// ```
    pub fn steal_rate(&self) -> f64 {
        let executed = self.jobs_executed() + self.tasks_executed();
        if executed == 0 {
            0.0
        } else {
            ((self.jobs_stolen() + self.tasks_stolen()) as f64 / executed as f64).min(1.0)
        }
    }

    /// The mean utilization over all workers (see [`WorkerStats::utilization`]).
    pub fn utilization(&self) -> f64 {
        if self.workers.is_empty() {
            return 0.0;
        }
        self.workers
            .iter()
            .map(WorkerStats::utilization)
            .sum::<f64>()
            / self.workers.len() as f64
    }
}
