//! The task side of a worker: its LIFO slot and ring, the inject queue and mailbox pulls,
//! polling a task, the per-poll counters and the periodic maintenance (find-work steps 2 and
//! 3 of the module docs of `worker`).

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::time::Instant;

use crate::queue::local::{self, Overflow};
use crate::runtime::registry::{Registry, Task};
use crate::stats::trace::Kind;
use crate::stats::{add, add_always, bump, histogram_bucket, set, WorkerCounters};
use crate::sync::atomic::Relaxed;
use crate::sync::StatAtomicU64;
use crate::task::coop;
use crate::task::harness::Poller;
use crate::task::raw::Header;

use super::WorkerThread;

/// The most tasks a worker polls from its LIFO slot in a row before it takes one from the
/// head of its ring (tokio and the seed: 3), so that two tasks waking each other cannot
/// starve the rest of the ring.
const MAX_LIFO_POLLS: u32 = 3;

/// Bounds of the adaptive maintenance interval, in tasks (the seed's clamp).
const MIN_INTERVAL: u32 = 8;
const MAX_INTERVAL: u32 = 255;
/// The interval a worker starts with, before it has measured any task.
pub(super) const INITIAL_INTERVAL: u32 = 61;
/// How long a task may wait in the inject queue, about: the interval is this divided by the
/// mean task time (the seed's target latency).
const TARGET_LATENCY_NS: f64 = 1_000_000.0;
/// Weight of the newest sample in the mean task time (the seed's EWMA alpha).
const EWMA_ALPHA: f64 = 0.1;
/// The task scheduler's per-worker bookkeeping (single-threaded: plain cells).
#[derive(Debug)]
pub(super) struct TaskState {
    /// Tasks left to run before the next maintenance (inject check, timers, EWMA).
    pub(super) countdown: Cell<u32>,
    /// The current maintenance interval, in tasks: clamp(1 ms / mean task time, 8, 255).
    pub(super) interval: Cell<u32>,
    /// Mean task time in ns (EWMA), 0 before the first sample.
    pub(super) mean_task_ns: Cell<f64>,
    /// When the current batch of tasks started (the last maintenance), if the worker has not
    /// parked since.
    pub(super) batch_start: Cell<Option<Instant>>,
    /// Tasks run since the last maintenance.
    pub(super) batch_tasks: Cell<u32>,
    /// LIFO-slot polls in a row.
    pub(super) lifo_streak: Cell<u32>,
    /// How deep this worker is in `block_in_place` (nested calls count): while non-zero,
    /// tasks it spawns or wakes go to the inject queue, where the other workers take them
    /// (`worker/block.rs`).
    pub(super) blocking: Cell<u32>,
    /// Two per-poll counters, counted here and added to the shared ones by
    /// `flush_counters`: at maintenance, when the local queues run dry, and before parking.
    /// A plain increment on the worker's own stack is the cheapest count there is (a
    /// `yield_many` poll is about 25 ns). The poll count itself goes straight to the shared
    /// `tasks_polled`, which the stall monitor reads as the worker's progress.
    pub(super) local_scheduled: Cell<u64>,
    pub(super) lifo_hits: Cell<u64>,
    /// The worker's last reading of the runtime's clock (ns since it was built), taken at
    /// maintenance, at the end of a park and at each timed poll: the spawn time of the tasks
    /// it spawns and the start of the untimed polls it runs (ARCHITECTURE.md, "Task identity
    /// and the live-task dump"), so that neither reads the clock.
    pub(super) clock_ns: Cell<u64>,
    /// Set when `clock_ns` was read at the end of the last poll and nothing but taking the
    /// next task from the LIFO slot or the ring has happened since: a timed poll then starts
    /// at `clock_ns` instead of reading the clock again (`WorkerThread::chain_polls`; one
    /// reading per poll instead of two, which is most of what the per-task counters cost a
    /// short poll). Cleared by everything else between two polls: a job, maintenance (it
    /// drives timers and I/O), a pull from the mailbox or the inject queue, a search, a
    /// park. What a chained poll's time takes in besides the poll is the pop of the task
    /// (tens of nanoseconds).
    pub(super) chained: Cell<bool>,
    /// The next id of this worker's block of task ids (`task/id.rs`, `Id::next_from`).
    pub(super) ids: Cell<u64>,
    /// Whether the ring or the LIFO slot may hold a task that did not come from the inject
    /// queue: one spawned, woken or yielded here, or stolen from another worker. Cleared
    /// when both are found empty. While it is clear, every task this worker holds was
    /// pulled from the inject queue, so it is older than every task still there (the queue
    /// is FIFO and a pull takes the oldest), and maintenance makes no batch pull
    /// (`WorkerThread::inject_turn`).
    pub(super) holds_local: Cell<bool>,
}

/// Adds one to a worker-local count (see `TaskState::local_scheduled`).
#[inline(always)]
fn count(cell: &Cell<u64>) {
    if cfg!(not(magpie_no_stats)) {
        cell.set(cell.get() + 1);
    }
}

/// Moves a worker-local count into its shared counter.
#[inline(always)]
fn flush(local: &Cell<u64>, shared: &StatAtomicU64) {
    if local.get() != 0 {
        add(shared, local.replace(0));
    }
}

/// Where a full ring sends half of its tasks: the inject queue, counted as an overflow.
pub(super) struct ToInject<'a> {
    registry: &'a Registry,
    counters: &'a WorkerCounters,
}

impl Overflow<Header> for ToInject<'_> {
    fn push_batch(&self, items: impl Iterator<Item = NonNull<Header>>) {
        bump(&self.counters.overflows);
        self.registry.inject_tasks(items);
    }
}

impl WorkerThread {
    /// Whether this worker is polling one of its runtime's tasks right now (inside
    /// `block_in_place` too).
    pub(crate) fn is_polling_task(&self) -> bool {
        // Relaxed: this worker's own word (task/id.rs, "The current task").
        self.counters.polling.load(Relaxed) != 0
    }

    /// The id of the task this worker is polling, if it is polling one.
    #[inline]
    pub(crate) fn polled_id(&self) -> Option<crate::task::Id> {
        // Relaxed: as in `is_polling_task`.
        crate::task::id::polled_id(self.counters.polling.load(Relaxed))
    }

    /// Whether a wake or spawn now comes from inside a task's poll, outside `block_in_place`:
    /// the polling word holds an id without [`POLLING_BLOCKED`](crate::task::id::POLLING_BLOCKED)
    /// (bit 63), so, read as signed, it is positive. One load and one test.
    #[inline(always)]
    pub(super) fn in_task(&self) -> bool {
        // Relaxed: as in `is_polling_task`.
        self.counters.polling.load(Relaxed) as i64 > 0
    }

    /// Queues a task woken or spawned on this worker.
    ///
    /// Woken by the task being polled here (not a yield), it goes to the LIFO slot and runs
    /// next: a task that sends a message and the task that receives it then run back to back,
    /// with the message hot in cache. The task it displaces, and every yield or wake from
    /// outside a poll, goes to the back of the ring.
    ///
    /// **The stranded LIFO task** (tokio#4941). If the task that filled the slot keeps
    /// running for a long time, the slot's task waits for it, while other workers may be
    /// idle; tokio's slot cannot be stolen and the task waits indefinitely. Here the slot is
    /// an atomic that thieves may empty (after
    /// [`LIFO_STEAL_ROUND`](super::idle::LIFO_STEAL_ROUND) rounds of searching, and only once
    /// the owner has begun no poll for a while, so that an owner about to run it is not
    /// robbed). Filling an empty slot notifies through `notify_lifo`: it wakes a
    /// worker as any push does, unless a parked worker watches the slots (R7 in
    /// `sleep/README.md`), which then takes a stranded task at its next look.
    ///
    /// Inside `block_in_place` (`in_task` is false then, so only this branch pays for the
    /// check) the task goes to the inject queue instead: this worker runs none until the
    /// blocking closure returns, and busy workers look at the inject queue at maintenance,
    /// not at this worker's ring (`worker/block.rs`).
    pub(crate) fn schedule_local(&self, task: Task, is_yield: bool) {
        // Set for the inject queue's branch too: harmless (a fairness pull at the next
        // maintenance), and one store on this path instead of a branch in each other one.
        self.tasks.holds_local.set(true);
        if is_yield {
            // A task that woke itself in its poll, rescheduled when the poll returned: any
            // `block_in_place` it called has returned by then.
            debug_assert_eq!(self.tasks.blocking.get(), 0);
            count(&self.tasks.local_scheduled);
            self.ring.push_back(task.into_header(), &self.to_inject());
        } else if !self.in_task() {
            if self.tasks.blocking.get() != 0 {
                return self.registry.push_remote(task);
            }
            count(&self.tasks.local_scheduled);
            self.ring.push_back(task.into_header(), &self.to_inject());
        } else {
            count(&self.tasks.local_scheduled);
            let ptr = task.into_header();
            match self.slots().lifo.replace(ptr) {
                Some(displaced) => self.ring.push_back(displaced, &self.to_inject()),
                None => return self.registry.sleep.notify_lifo(),
            }
        }
        if self.quiet.get() {
            self.quieted.set(self.quieted.get().saturating_add(1));
        } else {
            self.registry.sleep.notify_task();
        }
    }

    /// Runs `wake`, which wakes the tasks that this worker's own turn of the drivers found
    /// (readiness, due timers), while the worker is idle: back from a park in the driver, or
    /// between its yield rounds (D3'). Each task it wakes lands in this worker's ring, and
    /// this worker looks there next, so the first needs no notification: R1 would wake a
    /// parked worker only for it to search, find the task gone and park again, behind a
    /// `membarrier` in the asymmetric mode (a periodic timer on an idle 2-worker pool cost
    /// two unparks and one heavy barrier per tick). A second task is work for another
    /// worker: if `wake` queued more than one, this notifies once, as R1 would have for
    /// the second. A panicking waker (a timer's waker may be anyone's) still ends the quiet
    /// stretch, and its notification, on the way out.
    pub(super) fn wake_quietly(&self, wake: impl FnOnce()) {
        struct Loud<'a>(&'a WorkerThread);
        impl Drop for Loud<'_> {
            fn drop(&mut self) {
                let worker = self.0;
                worker.quiet.set(false);
                if worker.quieted.replace(0) > 1 {
                    worker.registry.sleep.notify_task();
                }
            }
        }
        debug_assert!(!self.quiet.get(), "nested quiet wakes");
        debug_assert!(!self.in_task(), "quiet wakes inside a poll");
        self.quiet.set(true);
        let _loud = Loud(self);
        wake();
    }

    pub(super) fn to_inject(&self) -> ToInject<'_> {
        ToInject {
            registry: &self.registry,
            counters: &self.counters,
        }
    }

    /// Takes the task in this worker's own LIFO slot.
    pub(super) fn take_lifo(&self) -> Option<Task> {
        let ptr = self.slots().lifo.take()?;
        // SAFETY: the slot held this task's Notified (see `schedule_local`).
        Some(unsafe { Task::from_header(ptr) })
    }

    /// Steps 2 and 3 of the find-work order for tasks: maintenance and the inject queue every
    /// `interval` tasks, the LIFO slot (at most [`MAX_LIFO_POLLS`] in a row), the ring, the
    /// mailbox, the inject queue.
    pub(super) fn next_task(&self) -> Option<Task> {
        let state = &self.tasks;
        if state.countdown.get() == 0 {
            self.maintenance();
            // Fairness: tasks from outside and submitted ones get a turn even while the
            // local queues never run dry.
            if let Some(task) = self.pull_mailbox().or_else(|| self.inject_turn()) {
                return Some(task);
            }
        }
        if state.lifo_streak.get() < MAX_LIFO_POLLS {
            if let Some(task) = self.take_lifo() {
                state.lifo_streak.set(state.lifo_streak.get() + 1);
                count(&state.lifo_hits);
                return Some(task);
            }
        }
        state.lifo_streak.set(0);
        if let Some(ptr) = self.ring.pop() {
            // SAFETY: the ring holds Notified pointers (see `schedule_local`).
            return Some(unsafe { Task::from_header(ptr) });
        }
        if let Some(task) = self.take_lifo() {
            state.lifo_streak.set(1);
            count(&state.lifo_hits);
            return Some(task);
        }
        // The local queues ran dry: what comes next is not a hand-over between two polls,
        // and this worker holds no task of its own.
        state.chained.set(false);
        state.holds_local.set(false);
        // The tasks this worker completed stay deferred (`defer_unlink`) until it finds no
        // work at all (the main loop unlinks them then, before it goes idle) or has 64. Not
        // here: a worker that steals tasks one at a time from a spawning worker runs dry
        // after each, and unlinking each one took the shard lock the spawner binds its next
        // tasks under, a lock passed back and forth twice a task (BENCHMARKS.md,
        // "2026-12-03, eighth").
        self.pull_mailbox().or_else(|| self.pull_inject())
    }

    /// Takes a task submitted to this worker.
    pub(super) fn pull_mailbox(&self) -> Option<Task> {
        let ptr = self.slots().mailbox.pop()?;
        // SAFETY: the mailbox holds Notified pointers (see `Registry::spawn_to`).
        Some(unsafe { Task::from_header(ptr) })
    }

    /// Takes a batch from the inject queue: this worker's share (the queue's length divided
    /// by the workers, plus one), as much as half its free ring allows. Returns the first and
    /// queues the rest on the ring.
    pub(super) fn pull_inject(&self) -> Option<Task> {
        let inject = &self.registry.task_inject;
        if inject.is_empty() {
            return None;
        }
        let share = inject.len() / self.registry.active_workers() + 1;
        let room = self.ring.remaining_slots() / 2;
        let batch = share.min(room).min(local::CAPACITY / 2);
        let (ptr, pulled) = if batch <= 1 {
            (inject.pop()?, 1)
        } else {
            // One lock for the whole batch; the oldest comes back out of the ring first.
            let mut into = IntoRing {
                worker: self,
                spill: RefCell::new(Vec::new()),
            };
            let pulled = inject.pop_batch(batch, &mut into);
            let spill = into.spill.into_inner();
            if !spill.is_empty() {
                debug_assert!(false, "a batch from the inject queue overflowed the ring");
                self.to_inject().push_batch(spill.into_iter());
            }
            if pulled == 0 {
                return None;
            }
            (self.ring.pop()?, pulled)
        };
        bump(&self.counters.inject_pulls);
        self.trace_event(Kind::InjectPull, pulled as u64);
        // SAFETY: the inject queue holds Notified pointers (see `Registry::push_remote`).
        Some(unsafe { Task::from_header(ptr) })
    }

    /// The inject queue's turn at maintenance (step 2 of the find-work order).
    ///
    /// While this worker holds a task that did not come from the inject queue
    /// (`holds_local`), a pull as when the ring runs dry. Otherwise every task it holds was
    /// pulled from there and is older than every task still queued, and a batch pull would
    /// only move newer tasks behind them: it pulls only from a queue shorter than one task
    /// a worker, where a pull's share is one task, run now (a lone arrival while every
    /// worker is busy still waits about one interval); a longer queue waits for the ring to
    /// run dry. A task pool's workers otherwise pulled every 8 tasks with a nearly
    /// full ring, a few tasks each time: 200 pulls a worker for 4,000 closures on 2
    /// workers, against about 20, each a trip through the consumers' lock and the queue's
    /// shared lines (BENCHMARKS.md, "2026-12-05, sixteenth").
    fn inject_turn(&self) -> Option<Task> {
        if !self.tasks.holds_local.get()
            && self.registry.task_inject.len() >= self.registry.active_workers()
        {
            return None;
        }
        self.pull_inject()
    }

    /// Polls a task once, with a fresh cooperative budget.
    pub(super) fn run_task(&self, task: Task) {
        let state = &self.tasks;
        state.countdown.set(state.countdown.get().saturating_sub(1));
        state.batch_tasks.set(state.batch_tasks.get() + 1);
        // Counted before the poll, so that a snapshot never shows more tasks finished than
        // polled (`tasks_executed` is counted during the poll), and so that the stall
        // monitor sees a new poll begin (`runtime/monitor.rs`): never compiled out.
        add_always(&self.counters.tasks_polled, 1);
        // The harness writes the task's id to the polling word as the run begins (and this
        // worker is "inside a task" from then on: `in_task`).
        if self.timed_polls {
            self.run_task_timed(task);
        } else {
            let poller = Poller {
                polling: &self.counters.polling,
                start_ns: state.clock_ns.get(),
                clock: None,
                end_ns: Cell::new(0),
            };
            // The harness catches every panic of user code.
            // A completed task was counted by `Registry::release`, before it left the live
            // list.
            let _completed = coop::with_budget(|| task.run_on(&poller));
        }
        // Relaxed: as in `is_polling_task`. The run is over (task/id.rs).
        self.counters.polling.store(0, Relaxed);
    }

    /// A new task id, from this worker's block (`task/id.rs`).
    #[inline]
    pub(crate) fn next_task_id(&self) -> crate::task::Id {
        crate::task::Id::next_from(&self.tasks.ids)
    }

    /// The worker's last clock reading (see `TaskState::clock_ns`).
    #[inline]
    pub(crate) fn clock_ns(&self) -> u64 {
        self.tasks.clock_ns.get()
    }

    /// `run_task` with the poll timed, for the histogram and the trace.
    #[cold]
    #[inline(never)]
    pub(super) fn run_task_timed(&self, task: Task) {
        let id = task.raw().as_ptr().as_ptr() as u64;
        let start = if self.tasks.chained.get() {
            // The end of the poll before, taken just now (see `TaskState::chained`).
            self.tasks.clock_ns.get()
        } else {
            self.registry.uptime_ns()
        };
        if let Some(trace) = self.tracer() {
            trace.record(start, Kind::PollStart, id);
        }
        // The harness reads the clock when `poll` returns (before the task can move on to
        // another poller), records the poll's time in the task, and leaves the reading here.
        let registry = &*self.registry;
        let clock = || registry.uptime_ns();
        let poller = Poller {
            polling: &self.counters.polling,
            start_ns: start,
            clock: Some(&clock),
            end_ns: Cell::new(start),
        };
        let _completed = coop::with_budget(|| task.run_on(&poller));
        // A task cancelled before its poll was not timed: the end is the start, or later.
        let end = poller.end_ns.get().max(start);
        self.tasks.clock_ns.set(end);
        self.tasks.chained.set(self.chain_polls);
        if let Some(trace) = self.tracer() {
            trace.record(end, Kind::PollEnd, id);
        }
        if self.registry.poll_time_histogram {
            bump(&self.counters.poll_time_histogram[histogram_bucket(end - start)]);
        }
    }

    /// Adds the worker-local per-poll counts to the shared counters (see
    /// `TaskState::local_scheduled`).
    pub(super) fn flush_counters(&self) {
        let state = &self.tasks;
        let counters = &self.counters;
        for (local, shared) in [
            (&state.local_scheduled, &counters.local_schedules),
            (&state.lifo_hits, &counters.lifo_hits),
        ] {
            flush(local, shared);
        }
        crate::stats::set(
            &counters.heavy_barriers,
            crate::sync::barrier::heavy_count(),
        );
    }

    /// Every `interval` tasks: update the mean task time and the interval, flush the
    /// per-poll counters, and fire the timers that are due (busy workers drive the timers
    /// too).
    pub(super) fn maintenance(&self) {
        self.flush_counters();
        let state = &self.tasks;
        // Driving timers and I/O is not the next poll's time.
        state.chained.set(false);
        let now = crate::sync::time::now();
        if let Some(start) = state.batch_start.get() {
            let tasks = state.batch_tasks.get().max(1);
            let sample = now.duration_since(start).as_nanos() as f64 / f64::from(tasks);
            let old = state.mean_task_ns.get();
            let mean = if old > 0.0 {
                old + EWMA_ALPHA * (sample - old)
            } else {
                sample
            };
            state.mean_task_ns.set(mean);
            let interval = (TARGET_LATENCY_NS / mean.max(1.0))
                .clamp(f64::from(MIN_INTERVAL), f64::from(MAX_INTERVAL));
            state.interval.set(interval as u32);
            set(&self.counters.interval, u64::from(state.interval.get()));
            set(&self.counters.mean_task_ns, mean as u64);
        }
        state.batch_start.set(Some(now));
        state.clock_ns.set(
            u64::try_from(
                now.saturating_duration_since(self.registry.started)
                    .as_nanos(),
            )
            .unwrap_or(u64::MAX),
        );
        state.batch_tasks.set(0);
        state.countdown.set(state.interval.get());
        self.poll_drivers(now);
    }

    /// A turn of the drivers by a worker that is not parked: a busy one at maintenance, or
    /// an idle one between its yields (`IdleLoop::spin`). Fires due timers and takes the
    /// I/O readiness the OS has, without blocking, if nobody holds the driver role (a parked
    /// holder delivers readiness itself). The role is given back before any task runs: no
    /// busy worker holds the driver (sleep/README.md, "The driver role").
    pub(super) fn poll_drivers(&self, now: std::time::Instant) {
        let registry = &*self.registry;
        let timers = &registry.timers;
        let io_live = registry.io_live() > 0;
        if !(io_live || timers.is_due(now)) || !timers.try_drive(self.index) {
            return;
        }
        #[cfg(not(loom))]
        if io_live {
            bump(&self.counters.driver_polls_nonblocking);
            let mut wakers = crate::io::WakeList::default();
            let delivered = registry
                .io
                .turn(Some(std::time::Duration::ZERO), &mut wakers);
            add(&self.counters.io_events, delivered as u64);
            // Outside the driver's lock, which the turn released (`io::WakeList`).
            wakers.wake_all();
        }
        timers.fire_due();
        timers.release();
        // A worker that parked while we held the role parked on its futex, not in the
        // driver: wake one to take the role (`Registry::hand_off_driver`).
        if registry.hand_off_driver() {
            bump(&self.counters.driver_handoffs);
        }
    }
}

/// Lets `LinkedInject::pop_batch` move tasks straight into the ring, a run at a time
/// (`Local::push_back_batch`).
///
/// `pop_batch` calls `extend` with the inject queue's lock held, so nothing here may push to
/// the inject queue: a ring overflow would, and would deadlock on that lock. The batch is
/// sized by `remaining_slots`, which counts slots a thief is still copying out as taken, and
/// only this worker pushes, so the ring cannot overflow. Should that reasoning ever break,
/// what does not fit waits in `spill` and goes to the inject queue after the lock is
/// released (`Vec::new` does not allocate, so the normal case costs nothing).
struct IntoRing<'w> {
    worker: &'w WorkerThread,
    spill: RefCell<Vec<NonNull<Header>>>,
}

/// What a full ring would send to the inject queue waits in `spill` (see [`IntoRing`]).
impl Overflow<Header> for IntoRing<'_> {
    fn push_batch(&self, items: impl Iterator<Item = NonNull<Header>>) {
        self.spill.borrow_mut().extend(items);
    }
}

impl Extend<NonNull<Header>> for IntoRing<'_> {
    fn extend<I: IntoIterator<Item = NonNull<Header>>>(&mut self, items: I) {
        self.worker.ring.push_back_batch(items, &*self);
    }
}
