//! Statistics: per-worker counters and the snapshots [`Runtime::stats`](crate::Runtime::stats)
//! returns.
//!
//! Each counter has exactly one writer, its worker, which bumps it with a Relaxed load and a
//! Relaxed store ([`bump`]), no read-modify-write: on x86 and Arm that is the same `mov`/`add`
//! a plain `u64` would cost, on a cache line no other worker writes. Readers (`stats()`) load
//! with Relaxed and may see a worker's counters a few events behind each other; each value on
//! its own is exact as of some recent moment.
//!
//! The issue that asked for statistics suggested counting in plain worker-local integers and
//! flushing them to shared atomics at parks and every few hundred ticks. We do not: a
//! Relaxed load and store to a counter that only its worker writes compiles to the same
//! instructions as a plain integer in memory, so a separate flush could only add work, and
//! every snapshot is current instead of up to a few hundred ticks stale (`wait_idle` then
//! `stats()` gives exact totals). The cost, measured against a build with the counters
//! compiled out (`--cfg magpie_no_stats`), is in BENCHMARKS.md.
//!
//! Two of the counters bumped on every poll (local schedules, LIFO hits) are the exception:
//! the worker counts them in plain integers on its own stack and adds them to the shared
//! counters at maintenance (at most every 255 polls), when its local queues run dry, and
//! before it parks. `magpie/examples/overhead.rs` showed why: on `yield_many`, where a poll
//! takes about 25 ns, the shared counters' extra instructions cost a measurable share. The
//! poll count itself (`tasks_polled`) goes to its shared counter before every poll, since
//! the stall monitor reads it as the worker's progress (`runtime/monitor.rs`).
//!
//! The poll-time histogram needs two clock reads per poll, so, as in tokio, it is off unless
//! [`Builder::poll_time_histogram`](crate::Builder::poll_time_histogram) turns it on.

pub(crate) mod trace;

use crate::sync::atomic::*;
use crate::sync::StatAtomicU64 as AtomicU64;

/// Buckets of the poll-time histogram. Bucket 0 holds polls under 256 ns, bucket `i` polls
/// of `256 << (i - 1)` to `256 << i` ns, the last one everything from about 4.2 ms up.
pub(crate) const HISTOGRAM_BUCKETS: usize = 16;

/// The bucket of a poll that took `ns` nanoseconds.
#[inline]
pub(crate) fn histogram_bucket(ns: u64) -> usize {
    ((64 - (ns >> 8).leading_zeros()) as usize).min(HISTOGRAM_BUCKETS - 1)
}

/// The lower bound, in nanoseconds, of each histogram bucket.
pub(crate) fn histogram_bounds_ns() -> Vec<u64> {
    (0..HISTOGRAM_BUCKETS)
        .map(|i| if i == 0 { 0 } else { 256 << (i - 1) })
        .collect()
}

/// [`WorkerCounters::activity`]: the worker runs a unit of work other than a task poll.
pub(crate) const ACTIVITY_BUSY: u64 = 1;
/// [`WorkerCounters::activity`]: what the worker runs waits without stalling.
pub(crate) const ACTIVITY_WAITING: u64 = 2;
/// [`WorkerCounters::activity`]: one unit started.
pub(crate) const ACTIVITY_STEP: u64 = 4;

/// The live counters of one worker.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounters {
    /// The *polling word*: the id of the task this worker runs, 0 when none, with bit 63 set
    /// while that run is inside `block_in_place` (task/id.rs, "The current task"). Written
    /// by the task harness as a run begins and by the worker when it has returned; the
    /// worker's "inside a task" flag, read by `task::id`, by `Runtime::tasks` for
    /// `TaskState::Running` and by the stall monitor (a word here rather than in every task:
    /// raw.rs, `Header`).
    pub(crate) polling: AtomicU64,
    /// The id of the task whose run waits inside a `join` on this worker while the worker
    /// runs a job that is no part of it (`WorkerThread::execute_outside_task`, which clears
    /// the polling word meanwhile), else 0. Only `Runtime::tasks` reads it: the task is
    /// still being polled here, and shows as running on this worker, not as scheduled.
    /// Written by the worker, Relaxed, on that cold path only.
    pub(crate) suspended: AtomicU64,
    /// The worker's *activity word*, for the stall monitor (`runtime/monitor.rs`): a count
    /// of the units of work other than task polls it started (jobs), in steps of
    /// [`ACTIVITY_STEP`], with [`ACTIVITY_BUSY`] set while it runs one and
    /// [`ACTIVITY_WAITING`] while the unit or poll it runs waits without stalling (parked
    /// inside `join`, in `block_in_place`). Written only by the worker, with a Relaxed store
    /// per job (`WorkerThread::begin_unit`); read by the monitor, which needs no ordering:
    /// an unchanged word and poll count over a whole threshold, busy or polling, is a stall.
    pub(crate) activity: AtomicU64,
    /// Written by the stall monitor, its only writer (`bump`'s single-writer rule holds):
    /// stalls seen on this worker, the longest one's length so far, and the tasks the
    /// monitor moved from this worker's queues to the inject queue.
    pub(crate) stalls: AtomicU64,
    pub(crate) longest_stall_ns: AtomicU64,
    pub(crate) stall_handoffs: AtomicU64,
    pub(crate) jobs_executed: AtomicU64,
    pub(crate) jobs_stolen: AtomicU64,
    pub(crate) steal_attempts: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) unparks: AtomicU64,
    /// Bumped by the worker before every poll, never compiled out: besides the statistic, it
    /// is how the stall monitor sees a new poll begin (`runtime/monitor.rs`).
    pub(crate) tasks_polled: AtomicU64,
    pub(crate) tasks_completed: AtomicU64,
    pub(crate) tasks_stolen: AtomicU64,
    pub(crate) steal_operations: AtomicU64,
    pub(crate) lifo_hits: AtomicU64,
    pub(crate) lifo_steals: AtomicU64,
    pub(crate) watch_looks: AtomicU64,
    pub(crate) inject_pulls: AtomicU64,
    pub(crate) overflows: AtomicU64,
    pub(crate) failed_steals: AtomicU64,
    pub(crate) steals_in_group: AtomicU64,
    pub(crate) steals_across_groups: AtomicU64,
    pub(crate) local_schedules: AtomicU64,
    pub(crate) budget_forced_yields: AtomicU64,
    pub(crate) noops: AtomicU64,
    pub(crate) tasks_spawned: AtomicU64,
    pub(crate) io_events: AtomicU64,
    pub(crate) driver_polls_blocking: AtomicU64,
    pub(crate) driver_polls_nonblocking: AtomicU64,
    pub(crate) driver_handoffs: AtomicU64,
    pub(crate) block_in_place_calls: AtomicU64,
    pub(crate) block_in_place_handoffs: AtomicU64,
    /// A gauge: the worker thread's heavy barriers so far (`sync::barrier::heavy_count`),
    /// copied in whenever the worker flushes its per-poll counters.
    pub(crate) heavy_barriers: AtomicU64,
    pub(crate) steal_heavy_barriers: AtomicU64,
    pub(crate) poll_time_histogram: [AtomicU64; HISTOGRAM_BUCKETS],
    /// The worker's OS thread id (Linux `gettid`), 0 elsewhere or before it started.
    pub(crate) thread_id: AtomicU64,
    /// Gauges, overwritten by the worker.
    pub(crate) interval: AtomicU64,
    pub(crate) mean_task_ns: AtomicU64,
    /// Nanoseconds spent parked, over completed parks. Written with `parked_since` under
    /// `park_seq` (see [`WorkerCounters::end_park`]).
    parked_ns: AtomicU64,
    /// While parked: when the park began, in nanoseconds since the runtime started, plus 1;
    /// 0 while awake.
    parked_since: AtomicU64,
    /// A sequence lock over `parked_ns` and `parked_since`: odd while the worker rewrites
    /// them. A snapshot that read them between the two writes of an unpark would lose the
    /// whole park (seen: idle time 5,197,747 ns, then 0), and busy time, which is uptime less
    /// idle time, would jump forward and then back.
    park_seq: AtomicU64,
}

/// Adds one to a counter that only the calling worker writes.
#[inline(always)]
pub(crate) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// Adds `n` to a counter that only the calling worker writes.
#[inline(always)]
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    if cfg!(not(magpie_no_stats)) {
        add_always(counter, n);
    }
}

/// [`add`] in every build, `--cfg magpie_no_stats` included: for the counts that are more
/// than statistics (`tasks_polled`, which the stall monitor reads as a worker's progress).
#[inline(always)]
pub(crate) fn add_always(counter: &AtomicU64, n: u64) {
    // Relaxed load and store: single writer (this worker); readers want no ordering.
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Counts a task finished on the calling worker (`tasks_completed`). Release: pairs with
/// the Acquire load in [`WorkerCounters::snapshot`]; the poll that finished the task was
/// counted before, in `tasks_polled`.
#[inline(always)]
pub(crate) fn bump_completed(counter: &AtomicU64) {
    if cfg!(not(magpie_no_stats)) {
        counter.store(counter.load(Relaxed).wrapping_add(1), Release);
    }
}

/// Sets a gauge that only the calling worker writes.
#[inline(always)]
pub(crate) fn set(gauge: &AtomicU64, value: u64) {
    // Relaxed: single writer; readers want no ordering.
    gauge.store(value, Relaxed);
}

/// What a worker's snapshot needs besides its counters.
#[derive(Clone, Copy)]
pub(crate) struct WorkerContext<'a> {
    pub(crate) local_queue_depth: usize,
    pub(crate) mailbox_depth: usize,
    /// Reads the nanoseconds since the runtime started (once per worker: see `read_park`).
    pub(crate) clock: &'a dyn Fn() -> u64,
    pub(crate) steal_group: usize,
    pub(crate) active: bool,
    pub(crate) compensation: bool,
}

impl WorkerCounters {
    /// A snapshot of this worker.
    pub(crate) fn snapshot(&self, cx: WorkerContext<'_>) -> WorkerStats {
        let WorkerContext {
            local_queue_depth,
            mailbox_depth,
            clock,
            steal_group,
            active,
            compensation,
        } = cx;
        let (parked_ns, parked_since, uptime_ns) = self.read_park(clock);
        let parked_now = match parked_since {
            0 => 0,
            since => uptime_ns.saturating_sub(since - 1),
        };
        let idle_time_ns = (parked_ns + parked_now).min(uptime_ns);
        // Finished before polled, Acquire: pairs with the Release store of
        // `bump_completed`, which follows the poll's count on the worker, so that this
        // snapshot never shows more tasks finished than polled. Read the other way round, a
        // reader held up between the two loads saw the finishes of polls it had not counted.
        let tasks_executed = self.tasks_completed.load(Acquire);
        let tasks_polled = self.tasks_polled.load(Relaxed);
        WorkerStats {
            jobs_executed: self.jobs_executed.load(Relaxed),
            jobs_stolen: self.jobs_stolen.load(Relaxed),
            steal_attempts: self.steal_attempts.load(Relaxed),
            parks: self.parks.load(Relaxed),
            unparks: self.unparks.load(Relaxed),
            tasks_polled,
            tasks_executed,
            tasks_stolen: self.tasks_stolen.load(Relaxed),
            steal_operations: self.steal_operations.load(Relaxed),
            lifo_hits: self.lifo_hits.load(Relaxed),
            lifo_steals: self.lifo_steals.load(Relaxed),
            watch_looks: self.watch_looks.load(Relaxed),
            inject_pulls: self.inject_pulls.load(Relaxed),
            overflows: self.overflows.load(Relaxed),
            failed_steals: self.failed_steals.load(Relaxed),
            steals_in_group: self.steals_in_group.load(Relaxed),
            steals_across_groups: self.steals_across_groups.load(Relaxed),
            local_schedules: self.local_schedules.load(Relaxed),
            budget_forced_yields: self.budget_forced_yields.load(Relaxed),
            noops: self.noops.load(Relaxed),
            tasks_spawned: self.tasks_spawned.load(Relaxed),
            io_events: self.io_events.load(Relaxed),
            driver_polls_blocking: self.driver_polls_blocking.load(Relaxed),
            driver_polls_nonblocking: self.driver_polls_nonblocking.load(Relaxed),
            driver_handoffs: self.driver_handoffs.load(Relaxed),
            block_in_place_calls: self.block_in_place_calls.load(Relaxed),
            block_in_place_handoffs: self.block_in_place_handoffs.load(Relaxed),
            stalls: self.stalls.load(Relaxed),
            longest_stall_ns: self.longest_stall_ns.load(Relaxed),
            stall_handoffs: self.stall_handoffs.load(Relaxed),
            heavy_barriers: self.heavy_barriers.load(Relaxed),
            steal_heavy_barriers: self.steal_heavy_barriers.load(Relaxed),
            poll_time_histogram: self
                .poll_time_histogram
                .iter()
                .map(|bucket| bucket.load(Relaxed))
                .collect(),
            steal_group: steal_group as u64,
            active,
            compensation,
            thread_id: self.thread_id.load(Relaxed),
            global_queue_interval: self.interval.load(Relaxed),
            mean_task_time_ns: self.mean_task_ns.load(Relaxed),
            local_queue_depth: local_queue_depth as u64,
            mailbox_depth: mailbox_depth as u64,
            busy_time_ns: uptime_ns - idle_time_ns,
            idle_time_ns,
        }
    }

    /// The worker parks (or is switched off) now. `clock` reads the time since the runtime
    /// started; it is read inside the sequence lock, as in [`end_park`](Self::end_park), so
    /// that a snapshot that still finds the worker awake read its clock before this one:
    /// otherwise it would credit the worker with busy time that the next snapshot, finding
    /// the park, takes back.
    /// Returns the time it read.
    pub(crate) fn begin_park(&self, clock: impl FnOnce() -> u64) -> u64 {
        self.write_park(clock, |now| set(&self.parked_since, now + 1))
    }

    /// The park begun by [`begin_park`](Self::begin_park) ends: its length moves from
    /// `parked_since` into `parked_ns` in one step as readers see it. `clock` reads the time
    /// since the runtime started; returns that reading.
    ///
    /// The clock is read *after* the sequence turns odd, and a snapshot reads its clock
    /// *before* it checks the sequence (`read_park`, behind a SeqCst fence that pairs with
    /// the one in `write_park`). So a snapshot that finds this worker still parked read its clock before
    /// this one: the time it credits to the running park is never more than the park turns
    /// out to be, and idle time never goes backwards. (This leans on the monotonic clock
    /// agreeing across threads with the order of the two fences, as `CLOCK_MONOTONIC` does.)
    pub(crate) fn end_park(&self, clock: impl FnOnce() -> u64) -> u64 {
        self.write_park(clock, |now| {
            let since = self.parked_since.load(Relaxed);
            if since != 0 {
                add(&self.parked_ns, now.saturating_sub(since - 1));
            }
            set(&self.parked_since, 0);
        })
    }

    /// Runs the worker's update `write` of the park fields inside the sequence lock, with
    /// the time `clock` reads once the count is odd; returns that time.
    fn write_park(&self, clock: impl FnOnce() -> u64, write: impl FnOnce(u64)) -> u64 {
        // Single writer: the worker. Relaxed load of its own count.
        let seq = self.park_seq.load(Relaxed);
        self.park_seq.store(seq.wrapping_add(1), Relaxed);
        // SeqCst, doing two jobs. As a release fence it orders the odd count before the
        // field writes for a reader that sees any of them (pairs with the fence in
        // `read_park`). As a SeqCst fence it orders the clock reading below after the
        // snapshots that found the old fields (see `end_park`).
        std::sync::atomic::fence(SeqCst);
        let now = clock();
        write(now);
        // Release: pairs with the Acquire load that opens `read_park`: a reader that sees
        // this even count sees the field writes.
        self.park_seq.store(seq.wrapping_add(2), Release);
        now
    }

    /// `(parked_ns, parked_since, now)` as of one moment between the worker's updates, with
    /// `now` read from `clock` after the fields and before the sequence is checked.
    ///
    /// Reading the clock after the fields means an unpark (or park) seen was timed before
    /// `now`, so busy time (`now` less idle time) never goes backwards; reading it before the
    /// check means a park seen still running ends after `now` (see `end_park`), so idle time
    /// never goes backwards either.
    fn read_park(&self, clock: &dyn Fn() -> u64) -> (u64, u64, u64) {
        loop {
            // Acquire: pairs with the Release store that closes `write_park`.
            let before = self.park_seq.load(Acquire);
            let parked_ns = self.parked_ns.load(Relaxed);
            let parked_since = self.parked_since.load(Relaxed);
            let now = clock();
            // SeqCst: pairs with the fence in `write_park`, as a SeqCst fence (see
            // `end_park`) and as an acquire fence: if either field load saw a write of an
            // update in progress, the load below sees its odd count (or later).
            std::sync::atomic::fence(SeqCst);
            let after = self.park_seq.load(Relaxed);
            if before == after && before % 2 == 0 {
                return (parked_ns, parked_since, now);
            }
            // The facade's hint: under shuttle and loom it lets the writer run.
            crate::sync::thread::spin_loop();
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
    /// inline (see [`join`](fn@crate::join)) queues nothing and counts nothing.
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
    /// Task polls begun on this worker (a task that waits and is woken is polled several
    /// times), counted as each begins. Never below
    /// [`tasks_executed`](Self::tasks_executed) in one snapshot (so not after
    /// [`Runtime::wait_idle`](crate::Runtime::wait_idle) either).
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
    /// Looks this worker took at the other workers' LIFO slots while it was parked as the
    /// LIFO watcher, one per millisecond of watching (R7 in the sleep protocol; see
    /// ARCHITECTURE.md): what a pool pays to leave a chain of spawns or a ping-pong on one
    /// worker without stranding a task behind a long poll.
    pub watch_looks: u64,
    /// Batches pulled from the global inject queue.
    pub inject_pulls: u64,
    /// Times the local ring was full and half of it moved to the inject queue.
    pub overflows: u64,
    /// Searches that visited every other worker and found nothing to steal.
    pub failed_steals: u64,
    /// Successful steals (of jobs or tasks) from a worker of this worker's own steal group.
    pub steals_in_group: u64,
    /// Successful steals from a worker of another steal group.
    pub steals_across_groups: u64,
    /// Tasks woken or spawned on this worker and queued on its own LIFO slot or ring
    /// (tokio's `worker_local_schedule_count`).
    pub local_schedules: u64,
    /// Polls that ran out of their cooperative budget and were made to yield (tokio's
    /// `budget_forced_yield_count`, per worker).
    pub budget_forced_yields: u64,
    /// Times this worker woke up and parked again without running anything (tokio's
    /// `worker_noop_count`).
    pub noops: u64,
    /// Tasks spawned by code running on this worker.
    pub tasks_spawned: u64,
    /// Heavy memory barriers this worker issued: `membarrier` system calls, each of which
    /// interrupts every CPU running a thread of the process. Made by steals of fork-join
    /// jobs and by parks, and only in the asymmetric barrier mode (see
    /// [`BarrierMode`](crate::BarrierMode)); updated when the worker parks or at its
    /// periodic maintenance.
    pub heavy_barriers: u64,
    /// The part of [`heavy_barriers`](WorkerStats::heavy_barriers) paid by this worker's
    /// steal passes: one per pass over up to 32 victims' deques, however many jobs the pass
    /// finds. The rest are parks that left another worker running (a park that leaves the
    /// whole pool asleep needs none).
    pub steal_heavy_barriers: u64,
    /// I/O readiness events this worker took from the OS and delivered to a registered
    /// source (in a park in the driver, or a non-blocking turn at maintenance).
    pub io_events: u64,
    /// Parks in the I/O driver (`epoll_wait` with the timeout to the next timer), as the
    /// holder of the driver role.
    pub driver_polls_blocking: u64,
    /// Non-blocking turns of the I/O driver at maintenance, while busy.
    pub driver_polls_nonblocking: u64,
    /// Times this worker gave the driver role up to run work and woke a parked worker to
    /// take it over, so that I/O readiness is waited for while it runs (sleep/README.md).
    pub driver_handoffs: u64,
    /// Calls of [`task::block_in_place`](crate::task::block_in_place) on this worker (nested
    /// ones included).
    pub block_in_place_calls: u64,
    /// Tasks those calls moved from this worker's queues (LIFO slot, ring, mailbox) to the
    /// inject queue, for the other workers to run.
    pub block_in_place_handoffs: u64,
    /// Stalls seen on this worker: a task poll, a job or a submitted closure that ran longer
    /// than [`Builder::stall_threshold`](crate::Builder::stall_threshold) (each counted once,
    /// when the stall monitor first sees it). Always 0 with stall detection off.
    pub stalls: u64,
    /// The longest stall seen on this worker so far, in nanoseconds, as the stall monitor
    /// measures it: from its first sample of the unit of work to its last (so up to a
    /// quarter of the threshold short); a stall still running counts as far as it has got.
    pub longest_stall_ns: u64,
    /// Tasks the stall monitor moved from this worker's queues (LIFO slot, ring, mailbox) to
    /// the inject queue while this worker was stalled, for the other workers to run.
    pub stall_handoffs: u64,
    /// Task polls by duration, in the buckets of [`Stats::poll_time_histogram_bounds_ns`];
    /// all zero unless [`Builder::poll_time_histogram`](crate::Builder::poll_time_histogram)
    /// turned it on.
    pub poll_time_histogram: Vec<u64>,
    /// The steal group this worker belongs to (see
    /// [`Builder::steal_groups`](crate::Builder::steal_groups)).
    pub steal_group: u64,
    /// Whether this worker is active: `false` while
    /// [`Runtime::set_active_workers`](crate::Runtime::set_active_workers) keeps it parked,
    /// and, for a compensation worker, while it is not started.
    pub active: bool,
    /// Whether this is a compensation worker
    /// ([`Builder::max_compensation_workers`](crate::Builder::max_compensation_workers)),
    /// which takes work only while the stall monitor has it started. Compensation workers
    /// come after the ordinary ones in [`Stats::workers`].
    pub compensation: bool,
    /// The worker's OS thread id (Linux `gettid`, as `top -H` and `perf` show it); 0 on other
    /// systems, and until the thread has started.
    pub thread_id: u64,
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
    /// or looking for it. Never decreases from one snapshot to the next.
    pub busy_time_ns: u64,
    /// Nanoseconds since the runtime started that this worker spent parked, or switched off
    /// by [`Runtime::set_active_workers`](crate::Runtime::set_active_workers) (a switched-off
    /// worker is idle: it runs nothing; its time switched off is not counted in
    /// [`parks`](Self::parks)). Never decreases from one snapshot to the next.
    ///
    /// `busy_time_ns + idle_time_ns` is the worker's lifetime as of the moment the snapshot
    /// read it: between the snapshot's [`Stats::uptime_ns`] and the next snapshot's.
    pub idle_time_ns: u64,
}

impl WorkerStats {
    /// Jobs and tasks this worker took from other workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// for w in rt.stats().workers {
    ///     assert_eq!(w.steals(), w.jobs_stolen + w.tasks_stolen);
    /// }
    /// ```
    pub fn steals(&self) -> u64 {
        self.jobs_stolen + self.tasks_stolen
    }

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
/// Everything tokio's `RuntimeMetrics` reports (stable and unstable) has a counterpart here:
///
/// | tokio `RuntimeMetrics` | magpie |
/// |---|---|
/// | `num_workers` | `workers.len()`, [`Stats::active_workers`] |
/// | `num_alive_tasks` | [`Stats::tasks_alive`] |
/// | `global_queue_depth` | [`Stats::inject_queue_depth`] |
/// | `spawned_tasks_count` | [`Stats::tasks_spawned()`](Stats::tasks_spawned) |
/// | `remote_schedule_count` | [`Stats::remote_schedules`] |
/// | `num_blocking_threads`, `num_idle_blocking_threads`, `blocking_queue_depth` | [`Stats::blocking_threads`], [`Stats::blocking_idle_threads`], [`Stats::blocking_queue_depth`] |
/// | `budget_forced_yield_count` | [`WorkerStats::budget_forced_yields`] (summed) |
/// | `worker_total_busy_duration` | [`WorkerStats::busy_time_ns`] |
/// | `worker_park_count`, `worker_park_unpark_count` | [`WorkerStats::parks`], `parks + unparks` |
/// | `worker_noop_count` | [`WorkerStats::noops`] |
/// | `worker_steal_count`, `worker_steal_operations` | [`WorkerStats::tasks_stolen`], [`WorkerStats::steal_operations`] |
/// | `worker_poll_count` | [`WorkerStats::tasks_polled`] |
/// | `worker_local_schedule_count` | [`WorkerStats::local_schedules`] |
/// | `worker_overflow_count` | [`WorkerStats::overflows`] |
/// | `worker_local_queue_depth` | [`WorkerStats::local_queue_depth`] |
/// | `worker_mean_poll_time` | [`WorkerStats::mean_task_time_ns`] |
/// | `worker_thread_id` | [`WorkerStats::thread_id`] (the OS id) |
/// | `poll_time_histogram_*`, `worker_poll_count_histogram_*` | [`WorkerStats::poll_time_histogram`], [`Stats::poll_time_histogram_bounds_ns`], [`Stats::poll_time_histogram_enabled`] |
/// | `io_driver_fd_registered_count` − `io_driver_fd_deregistered_count` | [`Stats::io_sources`] (registered now) |
/// | `io_driver_ready_count` | [`WorkerStats::io_events`] (summed) |
///
/// Beyond tokio: jobs (fork-join) executed and stolen, failed steals, steals inside and across
/// steal groups, LIFO rescues, inject pulls, the adaptive interval, idle time, utilization,
/// the steal rate, and the trace event count.
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
    /// One entry per worker, in worker-index order: the ordinary workers
    /// ([`Runtime::num_workers`](crate::Runtime::num_workers)), then the compensation
    /// workers, if any (see [`WorkerStats::compensation`]).
    pub workers: Vec<WorkerStats>,
    /// Tasks spawned and not yet finished (pending, queued or running). A task whose
    /// `JoinHandle` was dropped counts until its worker has unlinked it, which it does in
    /// batches of up to 64 and always before it goes idle: 0 once
    /// [`Runtime::wait_idle`](crate::Runtime::wait_idle) has returned.
    pub tasks_alive: u64,
    /// Tasks waiting in the global inject queue.
    pub inject_queue_depth: u64,
    /// Timers filed and not yet fired or cancelled.
    pub timers_pending: u64,
    /// I/O sources registered with the runtime's driver now (sockets, `AsyncFd`s).
    pub io_sources: u64,
    /// Threads of the blocking pool alive now.
    pub blocking_threads: u64,
    /// Closures queued on the blocking pool, not yet started.
    pub blocking_queue_depth: u64,
    /// Threads of the blocking pool waiting for work.
    pub blocking_idle_threads: u64,
    /// Ordinary workers taking work now (see
    /// [`Runtime::set_active_workers`](crate::Runtime::set_active_workers)); the other
    /// ordinary workers are parked.
    pub active_workers: u64,
    /// Compensation workers taking work now (see
    /// [`Builder::max_compensation_workers`](crate::Builder::max_compensation_workers)).
    pub compensation_workers_active: u64,
    /// Compensation workers started since the runtime was built.
    pub compensation_workers_started: u64,
    /// The number of steal groups the workers are divided into.
    pub steal_groups: u64,
    /// Tasks spawned from threads outside the pool (spawns on workers are counted per worker,
    /// [`WorkerStats::tasks_spawned`]).
    pub tasks_spawned_remote: u64,
    /// Tasks queued from threads outside the pool: remote spawns and wakes (tokio's
    /// `remote_schedule_count`).
    pub remote_schedules: u64,
    /// Times a thread took the lock of a global inject queue: the job queue's, to push or to
    /// pop, and the task queue's consumer lock, to pop. Task pushes (remote spawns and
    /// wakes, ring overflow) take no lock, and pops skip an empty queue without one.
    pub inject_lock_acquisitions: u64,
    /// Times a thread took the lock of one of the live-task list's shards: once per spawn
    /// (the task joins the list), once per completion of a task whose `JoinHandle` is still
    /// held, once per shard among a batch of up to 64 detached tasks unlinked together, and
    /// once per shard read by [`Runtime::tasks`](crate::Runtime::tasks), the stall monitor
    /// (once per stall) or the shutdown.
    /// Tasks spawned one after another share a shard (runs of 64 ids), so a batch usually
    /// takes one or two.
    pub live_list_lock_acquisitions: u64,
    /// The barrier mode the workers use (see [`Runtime::barrier_mode`](crate::Runtime::barrier_mode)).
    pub barrier_mode: crate::BarrierMode,
    /// Whether the poll-time histogram is being recorded.
    pub poll_time_histogram_enabled: bool,
    /// The lower bound of each histogram bucket in nanoseconds: 0, 256, 512, 1024, …; a
    /// bucket ends where the next begins, the last one never.
    pub poll_time_histogram_bounds_ns: Vec<u64>,
    /// Trace events recorded so far over all workers (0 when tracing is off).
    pub trace_events: u64,
    /// Samples the stall monitor has taken of the workers; 0 with stall detection off.
    /// It samples only while some worker is awake, so the count stands still
    /// while the pool is idle: the monitor costs no CPU then.
    pub monitor_samples: u64,
    /// Nanoseconds since the runtime was built.
    pub uptime_ns: u64,
}

impl Stats {
    /// Jobs run by all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// // The `install` closure and the `join`'s published second half.
    /// assert_eq!(rt.stats().jobs_executed(), 2);
    /// ```
    pub fn jobs_executed(&self) -> u64 {
        self.workers.iter().map(|w| w.jobs_executed).sum()
    }

    /// Jobs stolen by all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let sum: u64 = rt.install(|| (0..10_000u64).into_par_iter().sum());
    /// assert_eq!(sum, 49_995_000);
    /// let stats = rt.stats();
    /// // How many of the pieces the other worker stole depends on timing; never more than ran.
    /// assert!(stats.jobs_stolen() <= stats.jobs_executed());
    /// ```
    pub fn jobs_stolen(&self) -> u64 {
        self.workers.iter().map(|w| w.jobs_stolen).sum()
    }

    /// Times any worker parked.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let stats = rt.stats();
    /// assert_eq!(stats.parks(), stats.workers.iter().map(|w| w.parks).sum::<u64>());
    /// ```
    pub fn parks(&self) -> u64 {
        self.workers.iter().map(|w| w.parks).sum()
    }

    /// Tasks finished on all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// for i in 0..10 {
    ///     drop(rt.submit(move || i + 1));
    /// }
    /// rt.spawn(async {}).join().unwrap();
    /// rt.wait_idle(); // every task has finished, and has been counted
    /// assert_eq!(rt.stats().tasks_executed(), 11);
    /// ```
    pub fn tasks_executed(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_executed).sum()
    }

    /// Task polls on all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.spawn(async {
    ///     magpie::task::yield_now().await; // pending once: polled twice
    /// })
    /// .join()
    /// .unwrap();
    /// rt.wait_idle();
    /// let stats = rt.stats();
    /// assert!(stats.tasks_polled() >= 2);
    /// assert!(stats.tasks_polled() >= stats.tasks_executed());
    /// ```
    pub fn tasks_polled(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_polled).sum()
    }

    /// Tasks stolen by all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handles: Vec<_> = (0..100).map(|i| rt.submit(move || i)).collect();
    /// let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 4950);
    /// rt.wait_idle();
    /// let stats = rt.stats();
    /// // Timing decides how many moved between the two workers; never more than ran.
    /// assert!(stats.tasks_stolen() <= stats.tasks_executed());
    /// ```
    pub fn tasks_stolen(&self) -> u64 {
        self.workers.iter().map(|w| w.tasks_stolen).sum()
    }

    /// Jobs and tasks stolen by all workers.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// let stats = rt.stats();
    /// assert_eq!(stats.steals(), stats.jobs_stolen() + stats.tasks_stolen());
    /// ```
    pub fn steals(&self) -> u64 {
        self.workers.iter().map(WorkerStats::steals).sum()
    }

    /// Tasks spawned, on workers and from outside (tokio's `spawned_tasks_count`).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// // One task spawned from this thread, which spawns two more on its worker.
    /// let outer = rt.spawn(async {
    ///     let a = magpie::spawn(async { 1 });
    ///     let b = magpie::spawn(async { 2 });
    ///     a.await.unwrap() + b.await.unwrap()
    /// });
    /// assert_eq!(outer.join().unwrap(), 3);
    /// let stats = rt.stats();
    /// assert_eq!(stats.tasks_spawned(), 3);
    /// assert_eq!(stats.tasks_spawned_remote, 1);
    /// ```
    pub fn tasks_spawned(&self) -> u64 {
        self.tasks_spawned_remote + self.workers.iter().map(|w| w.tasks_spawned).sum::<u64>()
    }

    /// The poll-time histogram of all workers together: bucket `i` counts the polls that
    /// took from [`poll_time_histogram_bounds_ns`](Self::poll_time_histogram_bounds_ns)`[i]`
    /// up to the next bound. All zero unless
    /// [`Builder::poll_time_histogram`](crate::Builder::poll_time_histogram) turned it on.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .poll_time_histogram(true)
    ///     .build()
    ///     .unwrap();
    /// for i in 0..3 {
    ///     rt.submit(move || i).join().unwrap(); // one poll each
    /// }
    /// rt.install(|| ()); // the one worker is past the last poll's end, where it is counted
    /// let stats = rt.stats();
    /// let histogram = stats.poll_time_histogram();
    /// assert_eq!(histogram.len(), stats.poll_time_histogram_bounds_ns.len());
    /// assert_eq!(histogram.iter().sum::<u64>(), 3);
    /// ```
    pub fn poll_time_histogram(&self) -> Vec<u64> {
        let mut total = vec![0; self.poll_time_histogram_bounds_ns.len()];
        for w in &self.workers {
            for (sum, n) in total.iter_mut().zip(&w.poll_time_histogram) {
                *sum += n;
            }
        }
        total
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
            (self.steals() as f64 / executed as f64).min(1.0)
        }
    }

    /// The mean utilization over all workers (see [`WorkerStats::utilization`]), from 0.0
    /// to 1.0.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// assert!((0.0..=1.0).contains(&rt.stats().utilization()));
    /// ```
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
