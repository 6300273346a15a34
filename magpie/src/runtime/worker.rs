//! A worker thread: its private state, its main loop, and the find-work order (policy; the
//! queues themselves are mechanism, in `crate::queue`).
//!
//! A worker owns a Chase-Lev deque of *jobs* (fork-join halves, scope spawns) and, for
//! *tasks* (futures, submitted closures), a LIFO slot and a 256-slot ring; it shares a mailbox
//! for `submit_to`. Find-work order in the main loop, cheapest first:
//!
//! 1. the worker's own deque, LIFO: the job it forked last is hot in cache and, in
//!    fork-join code, the smallest piece, which keeps the stack shallow;
//! 2. every `interval` tasks, maintenance: the mean task time (EWMA) sets the interval
//!    (clamp(1 ms / mean, 8, 255), the seed's rule), due timers fire, and the mailbox and the
//!    inject queue are looked at *first*, so tasks from outside wait about 1 ms at most even
//!    while the local queues never run dry;
//! 3. the LIFO slot (at most [`MAX_LIFO_POLLS`] in a row), then the ring, FIFO; then the
//!    mailbox and the inject queue (a batch: this worker's share, into the ring);
//! 4. a steal from a random victim (FastRand + Lemire), trying every other worker once
//!    starting there: the oldest job of its deque, else half of its ring (at most 128), else
//!    its mailbox, else (after a few search rounds) its LIFO slot;
//! 5. the inject queues once more (tasks, then jobs: `install` from outside);
//! 6. spin, then yield, then park through the sleep protocol (`crate::sleep`); the first
//!    worker to park while nobody drives the timers parks with a timeout to the next
//!    deadline and fires the due timers when it wakes.
//!
//! A worker waiting inside `join` for a stolen half follows a shorter order: its deque, the
//! other deques, the job inject queue. It never runs tasks (see `wait_until`).

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::time::{Duration, Instant};

use crate::join::job::{JobHeader, JobRef};
use crate::join::latch::SpinLatch;
use crate::queue::chase_lev::{self, Steal};
use crate::queue::local::{self, Overflow};
use crate::sleep::Wake;
use crate::stats::trace::{Kind, TraceBuffer};
use crate::stats::{add, bump, histogram_bucket, set, WorkerCounters};
use crate::sync::thread::{self, thread_local};
use crate::task::coop;
use crate::task::raw::Header;
use crate::util::rand::FastRand;
use crate::util::unwind::AbortIfPanic;
use crate::util::CachePadded;
use std::sync::Arc;

use super::registry::{Registry, Task, TaskSlots};

/// Rounds of unsuccessful searching spent spinning before yielding, and before parking.
/// Spinning briefly catches the next job of a fork-join computation without a futex round
/// trip (the Blitz seed uses 64 spins, 128 yields); we search every victim once per round,
/// so rounds are longer than the seed's single attempts and we use fewer.
#[cfg(not(any(loom, shuttle)))]
const SPIN_ROUNDS: u32 = 16;
#[cfg(not(any(loom, shuttle)))]
const YIELD_ROUNDS: u32 = 32;
// Under shuttle every spin and yield is a scheduling point of the checker: a few of each
// exercise the spin → yield → park progression without drowning the schedule in them.
#[cfg(shuttle)]
const SPIN_ROUNDS: u32 = 2;
#[cfg(shuttle)]
const YIELD_ROUNDS: u32 = 2;
// Under loom every round is dozens of explored atomic operations: a searcher looks once,
// then parks (the rounds only repeat that look).
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 0;

/// The longest a worker parks without being woken, by default. Only a safety net: the sleep
/// protocol does not lose wakeups (sleep/README.md). One wakeup per second per idle worker
/// costs a few microseconds of CPU, far below the idle budget of rayon#642. The stress tests
/// raise it (`Builder::park_safety_net`) so that a lost wakeup would hang, not just pause.
pub(crate) const PARK_SAFETY_NET: Duration = Duration::from_secs(1);

/// How many stealable jobs a worker keeps offering before `join` stops publishing its second
/// halves (see `WorkerThread::should_publish`). Thieves take the oldest, so the reserve holds
/// the largest pieces; a few are enough, since every steal makes the owner publish again at
/// its next `join`. chili publishes while its queue holds fewer than 3 jobs (and one `join`
/// in 64 otherwise). Measured in magpie-bench `fork-join` (fib, tree_sum); see BENCHMARKS.md.
const STEAL_RESERVE: usize = 3;

/// The most tasks a worker polls from its LIFO slot in a row before it takes one from the
/// head of its ring (tokio and the seed: 3), so that two tasks waking each other cannot
/// starve the rest of the ring.
const MAX_LIFO_POLLS: u32 = 3;

/// Bounds of the adaptive maintenance interval, in tasks (the seed's clamp).
const MIN_INTERVAL: u32 = 8;
const MAX_INTERVAL: u32 = 255;
/// The interval a worker starts with, before it has measured any task.
const INITIAL_INTERVAL: u32 = 61;
/// How long a task may wait in the inject queue, about: the interval is this divided by the
/// mean task time (the seed's target latency).
const TARGET_LATENCY_NS: f64 = 1_000_000.0;
/// Weight of the newest sample in the mean task time (the seed's EWMA alpha).
const EWMA_ALPHA: f64 = 0.1;

/// From this search round on, a thief also takes the task in a victim's LIFO slot (see
/// "the stranded LIFO task" in `schedule_local`). Earlier rounds leave it to its owner, which
/// runs it next unless it is stuck in a long poll.
///
/// It must not exceed the rounds a searcher makes before it parks (`SPIN_ROUNDS +
/// YIELD_ROUNDS`), or no searcher ever takes a stranded LIFO task: the worker that finds it
/// in its recheck before parking wakes itself, searches again without reaching this round,
/// and so on for as long as the owner's poll lasts. The loom model
/// `loom_runtime_last_searcher_vs_notification` found exactly that when loom's build cut the
/// rounds; taking the smaller keeps the two constants tied.
const LIFO_STEAL_ROUND: u32 = if SPIN_ROUNDS + YIELD_ROUNDS < 4 {
    SPIN_ROUNDS + YIELD_ROUNDS
} else {
    4
};

thread_local! {
    /// The worker running on this thread, or null.
    static CURRENT: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

/// One unit of work found by the find-work order.
enum Work {
    Job(JobRef),
    Task(Task),
}

/// The task scheduler's per-worker bookkeeping (single-threaded: plain cells).
#[derive(Debug)]
struct TaskState {
    /// Tasks left to run before the next maintenance (inject check, timers, EWMA).
    countdown: Cell<u32>,
    /// The current maintenance interval, in tasks: clamp(1 ms / mean task time, 8, 255).
    interval: Cell<u32>,
    /// Mean task time in ns (EWMA), 0 before the first sample.
    mean_task_ns: Cell<f64>,
    /// When the current batch of tasks started (the last maintenance), if the worker has not
    /// parked since.
    batch_start: Cell<Option<Instant>>,
    /// Tasks run since the last maintenance.
    batch_tasks: Cell<u32>,
    /// LIFO-slot polls in a row.
    lifo_streak: Cell<u32>,
    /// Whether a task is being polled on this worker (then its wakes go to the LIFO slot).
    in_task: Cell<bool>,
    /// The per-poll counters, counted here and added to the shared ones by
    /// `flush_counters`: at maintenance, when the local queues run dry, and before parking.
    /// A plain increment on the worker's own stack is the cheapest count there is, and these
    /// are bumped once or twice per poll (a `yield_many` poll is about 25 ns).
    polled: Cell<u64>,
    local_scheduled: Cell<u64>,
    lifo_hits: Cell<u64>,
}

/// Adds one to a worker-local count (see `TaskState::polled`).
#[inline(always)]
fn count(cell: &Cell<u64>) {
    if cfg!(not(magpie_no_stats)) {
        cell.set(cell.get() + 1);
    }
}

/// A worker's private state. Lives on the worker thread's stack for the thread's lifetime;
/// other threads reach only its shared parts, through the registry.
#[derive(Debug)]
pub(crate) struct WorkerThread {
    index: usize,
    registry: Arc<Registry>,
    /// This worker's entry of `registry.counters`, one pointer away.
    counters: Arc<CachePadded<WorkerCounters>>,
    deque: chase_lev::Worker<JobHeader>,
    /// The owner end of this worker's task ring.
    ring: local::Local<Header>,
    rng: Cell<FastRand>,
    tasks: TaskState,
    /// Steal victims of this worker's own group, then of the others (see `topology.rs`).
    victims_near: Box<[usize]>,
    victims_far: Box<[usize]>,
    /// This worker's event ring, when tracing is on.
    trace: Option<Arc<TraceBuffer>>,
    /// Whether task polls are timed: for the histogram, or for the trace.
    timed_polls: bool,
}

/// Where a full ring sends half of its tasks: the inject queue, counted as an overflow.
struct ToInject<'a> {
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
    /// The worker running on this thread, or null off the pool.
    #[inline]
    pub(crate) fn current() -> *const WorkerThread {
        CURRENT.with(Cell::get)
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    pub(crate) fn registry_arc(&self) -> &Arc<Registry> {
        &self.registry
    }

    fn slots(&self) -> &TaskSlots {
        &self.registry.task_slots[self.index]
    }

    /// The publication policy of `join`: whether its second half should be made stealable.
    ///
    /// Yes while this worker offers fewer than [`STEAL_RESERVE`] stealable jobs, so that a
    /// thief always finds the oldest (largest) pieces of this worker's computation, and every
    /// steal makes the owner publish again at its next `join`. Otherwise the second half runs
    /// inline, at the cost of a function call. That is where fork-join overhead goes to almost
    /// nothing (ARCHITECTURE.md, "Why this join design").
    #[inline]
    pub(crate) fn should_publish(&self) -> bool {
        self.deque.len() < STEAL_RESERVE
    }

    /// Pushes a job onto this worker's deque and wakes a sleeper if nobody is searching.
    #[inline]
    pub(crate) fn push(&self, job: JobRef) {
        self.deque.push(job.as_ptr());
        self.registry.sleep.notify_work();
    }

    /// Pops the newest job of this worker's deque.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef> {
        // SAFETY: only `JobRef::as_ptr` values are pushed (see `push`).
        self.deque.pop().map(|ptr| unsafe { JobRef::from_ptr(ptr) })
    }

    /// Runs a job taken from a queue, counting it.
    #[inline]
    pub(crate) fn execute(&self, job: JobRef) {
        self.count_job();
        if let Some(trace) = self.tracer() {
            return self.execute_traced(trace, job);
        }
        // SAFETY: a job taken out of a queue is owned by whoever took it, executed once here;
        // its memory is live until its latch is set (JobRef's contract).
        unsafe { job.execute() }
    }

    #[cold]
    #[inline(never)]
    fn execute_traced(&self, trace: &TraceBuffer, job: JobRef) {
        trace.record(self.registry.uptime_ns(), Kind::JobStart, 0);
        // SAFETY: as in `execute`.
        unsafe { job.execute() }
        trace.record(self.registry.uptime_ns(), Kind::JobEnd, 0);
    }

    /// This worker's event ring, if tracing is on. With `--cfg magpie_no_trace` the checks
    /// compile away entirely (for measuring what they cost; BENCHMARKS.md).
    #[inline(always)]
    fn tracer(&self) -> Option<&TraceBuffer> {
        if cfg!(magpie_no_trace) {
            None
        } else {
            self.trace.as_deref()
        }
    }

    /// Records an event if tracing is on.
    #[inline]
    fn trace_event(&self, kind: Kind, arg: u64) {
        if let Some(trace) = self.tracer() {
            trace.record(self.registry.uptime_ns(), kind, arg);
        }
    }

    /// Counts a forced yield: the running poll ran out of its cooperative budget.
    #[cold]
    pub(crate) fn count_forced_yield(&self) {
        bump(&self.counters.budget_forced_yields);
    }

    /// Counts one job run on this worker.
    #[inline]
    pub(crate) fn count_job(&self) {
        bump(&self.counters.jobs_executed);
    }

    // ---- tasks -------------------------------------------------------------------------

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
    /// an atomic that thieves may empty (after [`LIFO_STEAL_ROUND`] rounds of searching, so
    /// that an owner about to run it is not robbed), and filling it notifies the idle workers
    /// like any other push, so an idle worker is awake to take it.
    pub(crate) fn schedule_local(&self, task: Task, is_yield: bool) {
        count(&self.tasks.local_scheduled);
        let ptr = task.into_header();
        if is_yield || !self.tasks.in_task.get() {
            self.ring.push_back(ptr, &self.to_inject());
        } else {
            if let Some(displaced) = self.slots().lifo.replace(ptr) {
                self.ring.push_back(displaced, &self.to_inject());
            }
        }
        self.registry.sleep.notify_task();
    }

    fn to_inject(&self) -> ToInject<'_> {
        ToInject {
            registry: &self.registry,
            counters: &self.counters,
        }
    }

    /// Takes the task in this worker's own LIFO slot.
    fn take_lifo(&self) -> Option<Task> {
        let ptr = self.slots().lifo.take()?;
        // SAFETY: the slot held this task's Notified (see `schedule_local`).
        Some(unsafe { Task::from_header(ptr) })
    }

    /// Steps 2 and 3 of the find-work order for tasks: maintenance and the inject queue every
    /// `interval` tasks, the LIFO slot (at most [`MAX_LIFO_POLLS`] in a row), the ring, the
    /// mailbox, the inject queue.
    fn next_task(&self) -> Option<Task> {
        let state = &self.tasks;
        if state.countdown.get() == 0 {
            self.maintenance();
            // Fairness: tasks from outside and submitted ones get a turn even while the
            // local queues never run dry.
            if let Some(task) = self.pull_mailbox().or_else(|| self.pull_inject()) {
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
        self.pull_mailbox().or_else(|| self.pull_inject())
    }

    /// Takes a task submitted to this worker.
    fn pull_mailbox(&self) -> Option<Task> {
        let ptr = self.slots().mailbox.pop()?;
        // SAFETY: the mailbox holds Notified pointers (see `Registry::spawn_to`).
        Some(unsafe { Task::from_header(ptr) })
    }

    /// Takes a batch from the inject queue: this worker's share (the queue's length divided
    /// by the workers, plus one), as much as half its free ring allows. Returns the first and
    /// queues the rest on the ring.
    fn pull_inject(&self) -> Option<Task> {
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
                spill: Vec::new(),
            };
            let pulled = inject.pop_batch(batch, &mut into);
            if !into.spill.is_empty() {
                debug_assert!(false, "a batch from the inject queue overflowed the ring");
                self.to_inject().push_batch(into.spill.into_iter());
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

    /// Polls a task once, with a fresh cooperative budget.
    fn run_task(&self, task: Task) {
        let state = &self.tasks;
        state.countdown.set(state.countdown.get().saturating_sub(1));
        state.batch_tasks.set(state.batch_tasks.get() + 1);
        // Counted before the poll, so that a snapshot never shows more tasks finished than
        // polled (`tasks_executed` is counted during the poll).
        count(&state.polled);
        state.in_task.set(true);
        if self.timed_polls {
            self.run_task_timed(task);
        } else {
            // The harness catches every panic of user code.
            // A completed task was counted by `Registry::release`, before it left the live
            // list.
            let _completed = coop::with_budget(|| task.run());
        }
        state.in_task.set(false);
    }

    /// `run_task` with the poll timed, for the histogram and the trace.
    #[cold]
    #[inline(never)]
    fn run_task_timed(&self, task: Task) {
        let id = task.raw().as_ptr().as_ptr() as u64;
        let start = self.registry.uptime_ns();
        if let Some(trace) = self.tracer() {
            trace.record(start, Kind::PollStart, id);
        }
        let _completed = coop::with_budget(|| task.run());
        let end = self.registry.uptime_ns();
        if let Some(trace) = self.tracer() {
            trace.record(end, Kind::PollEnd, id);
        }
        if self.registry.poll_time_histogram {
            bump(&self.counters.poll_time_histogram[histogram_bucket(end - start)]);
        }
    }

    /// Publishes the worker-local poll count. Called when a task completes
    /// (`Registry::release`), before the completion is counted, so that no snapshot shows
    /// more tasks executed than polled. Only this count: a completion is the hot path of
    /// `spawn_many_local`, and the other two may lag.
    #[inline]
    pub(crate) fn flush_polled(&self) {
        let polled = &self.tasks.polled;
        if polled.get() != 0 {
            add(&self.counters.tasks_polled, polled.replace(0));
        }
    }

    /// Adds the worker-local per-poll counts to the shared counters (see
    /// `TaskState::polled`).
    fn flush_counters(&self) {
        let state = &self.tasks;
        let counters = &self.counters;
        for (local, shared) in [
            (&state.polled, &counters.tasks_polled),
            (&state.local_scheduled, &counters.local_schedules),
            (&state.lifo_hits, &counters.lifo_hits),
        ] {
            if local.get() != 0 {
                add(shared, local.replace(0));
            }
        }
    }

    /// Every `interval` tasks: update the mean task time and the interval, flush the
    /// per-poll counters, and fire the timers that are due (busy workers drive the timers
    /// too).
    fn maintenance(&self) {
        self.flush_counters();
        let state = &self.tasks;
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
        state.batch_tasks.set(0);
        state.countdown.set(state.interval.get());
        let timers = &self.registry.timers;
        if timers.is_due(now) && timers.try_drive(self.index) {
            timers.fire_due();
            timers.release();
        }
    }

    // ---- finding work ------------------------------------------------------------------

    /// The find-work order of the main loop (see the module docs).
    fn find_work(&self, search_round: u32) -> Option<Work> {
        if let Some(job) = self.pop() {
            return Some(Work::Job(job));
        }
        if let Some(task) = self.next_task() {
            return Some(Work::Task(task));
        }
        // The local queues ran dry: a snapshot taken from now on sees every poll so far.
        self.flush_counters();
        if let Some(work) = self.steal(search_round >= LIFO_STEAL_ROUND, true) {
            return Some(work);
        }
        if let Some(task) = self.pull_inject() {
            return Some(Work::Task(task));
        }
        self.registry.inject.pop().map(Work::Job)
    }

    /// The find-work order inside `join`: jobs only (see `wait_until`).
    fn find_job(&self) -> Option<JobRef> {
        if let Some(job) = self.pop() {
            return Some(job);
        }
        if let Some(Work::Job(job)) = self.steal(false, false) {
            return Some(job);
        }
        self.registry.inject.pop()
    }

    /// One pass over every other worker: those of this worker's steal group first, then the
    /// others, each part from a random place. From each victim: its deque's oldest job, then
    /// (with `tasks`) half of its ring, its mailbox, and (with `lifo`) its LIFO slot.
    ///
    /// Workers switched off by `set_active_workers` are victims too. One may still be running
    /// the closure it had when it was switched off, with jobs and tasks queued behind it that
    /// it hands on only when that closure returns; a scope waiting for one of those jobs
    /// would wait as long (forever, if the closure waits for the scope). Stealing from it
    /// costs a few empty-queue loads per switched-off worker per search, and keeps what
    /// `Registry::has_visible_jobs`/`has_visible_tasks` count (every queue) equal to what a
    /// searcher may take, which the sleep protocol's recheck relies on (R5).
    fn steal(&self, lifo: bool, tasks: bool) -> Option<Work> {
        for (victims, near) in [(&*self.victims_near, true), (&*self.victims_far, false)] {
            if victims.is_empty() {
                continue;
            }
            let mut rng = self.rng.get();
            let start = rng.below(victims.len() as u32) as usize;
            self.rng.set(rng);
            for offset in 0..victims.len() {
                let victim = victims[(start + offset) % victims.len()];
                if let Some((work, count)) = self.steal_from(victim, lifo, tasks) {
                    let counters = &self.counters;
                    bump(if near {
                        &counters.steals_in_group
                    } else {
                        &counters.steals_across_groups
                    });
                    if let Some(trace) = self.tracer() {
                        let kind = match work {
                            Work::Job(_) => Kind::StealJobs,
                            Work::Task(_) => Kind::StealTasks,
                        };
                        trace.record(
                            self.registry.uptime_ns(),
                            kind,
                            (victim as u64) << 32 | count,
                        );
                    }
                    return Some(work);
                }
            }
        }
        bump(&self.counters.failed_steals);
        None
    }

    /// Tries to take work from one victim; returns it and how many items moved.
    fn steal_from(&self, victim: usize, lifo: bool, tasks: bool) -> Option<(Work, u64)> {
        let registry = &*self.registry;
        let counters = &self.counters;
        loop {
            match registry.stealers[victim].steal() {
                Steal::Success(ptr) => {
                    bump(&counters.steal_attempts);
                    bump(&counters.jobs_stolen);
                    // SAFETY: only `JobRef::as_ptr` values are pushed.
                    return Some((Work::Job(unsafe { JobRef::from_ptr(ptr) }), 1));
                }
                Steal::Empty => break,
                Steal::Retry => bump(&counters.steal_attempts),
            }
        }
        if !tasks {
            return None;
        }
        let slots = &registry.task_slots[victim];
        if !slots.ring.is_empty() {
            let before = self.ring.len();
            if let Some(ptr) = slots.ring.steal_into(&self.ring) {
                let moved = self.ring.len().saturating_sub(before) as u64 + 1;
                bump(&counters.steal_operations);
                add(&counters.tasks_stolen, moved);
                // SAFETY: rings hold Notified pointers.
                return Some((Work::Task(unsafe { Task::from_header(ptr) }), moved));
            }
        }
        if let Some(ptr) = slots.mailbox.pop() {
            bump(&counters.steal_operations);
            bump(&counters.tasks_stolen);
            // SAFETY: mailboxes hold Notified pointers.
            return Some((Work::Task(unsafe { Task::from_header(ptr) }), 1));
        }
        if lifo {
            if let Some(ptr) = slots.lifo.take() {
                bump(&counters.steal_operations);
                bump(&counters.tasks_stolen);
                bump(&counters.lifo_steals);
                // SAFETY: LIFO slots hold Notified pointers.
                return Some((Work::Task(unsafe { Task::from_header(ptr) }), 1));
            }
        }
        None
    }

    fn run(&self, work: Work) {
        match work {
            Work::Job(job) => self.execute(job),
            Work::Task(task) => self.run_task(task),
        }
    }

    /// Waits, without idling while work exists, until `latch` is set: the `join` whose second
    /// half was stolen. Runs jobs (its own, stolen ones, injected ones) meanwhile, and parks
    /// if there are none.
    ///
    /// It runs jobs only, never tasks: the stolen half is what this `join` waits for, and a
    /// task's poll may take arbitrarily long (or block on something that needs this very
    /// `join` to finish), which would delay the `join` for something unrelated to it. Tasks
    /// queued on this worker meanwhile are stolen by the others (R6 in sleep/README.md makes
    /// sure a worker that can run them is woken).
    #[inline]
    pub(crate) fn wait_until(&self, latch: &SpinLatch) {
        if !latch.probe() {
            self.wait_until_cold(latch);
        }
    }

    #[cold]
    fn wait_until_cold(&self, latch: &SpinLatch) {
        let sleep = &self.registry.sleep;
        sleep.set_join_waiting(self.index, true);
        // Tasks this worker queued are better run by someone else than wait for the join.
        if self.has_local_tasks() {
            sleep.notify_task();
        }
        let mut idle = IdleLoop::new(self, true);
        while !latch.probe() {
            if let Some(job) = self.find_job() {
                idle.found_work();
                self.execute(job);
                continue;
            }
            if !idle.spin() {
                // Sleep on the latch: announce it, so the setter wakes us (latch.rs).
                if latch.start_sleeping() {
                    idle.park();
                    latch.stop_sleeping();
                }
            }
        }
        idle.found_work();
        sleep.set_join_waiting(self.index, false);
    }

    /// Switched off by `set_active_workers`: hands every job and task queued here on, and
    /// parks until this worker is active again (returns false) or the runtime terminates
    /// (returns true).
    ///
    /// The deque may hold jobs: a scope's spawns land on the deque of the worker that ran
    /// the spawning job, which returned without waiting for them. They go to the job inject
    /// queue, tasks to the task inject queue. (Until then thieves may take them: `steal`
    /// visits switched-off workers too.)
    ///
    /// Time switched off counts as idle time in the statistics (`WorkerStats::idle_time_ns`),
    /// not as a park: `parks` counts only the sleeps of an active worker without work.
    #[cold]
    fn retire(&self) -> bool {
        let registry = &*self.registry;
        self.flush_counters();
        self.counters.begin_park(|| registry.uptime_ns());
        let terminated = loop {
            if self.index < registry.active_workers() {
                // Active again: whatever is queued here is ours to run.
                break false;
            }
            self.hand_on_queues();
            // We may have driven the timers last (we released the role when we woke); an
            // active worker that parked meanwhile parked without a timeout. Make sure one
            // takes the role: one that parks from now on finds it free (`IdleLoop::park`
            // tries after setting its idle bit); one parked already is woken.
            // SeqCst: pairs with `register_parked`'s heavy barrier, as the other Dekker
            // pairs of the sleep protocol do (the role was released with a SeqCst store).
            crate::sync::atomic::fence(crate::sync::atomic::SeqCst);
            if registry.timers.needs_driver() {
                registry.sleep.wake_free_cold();
            }
            if registry.is_terminating() {
                break true;
            }
            // Woken by `set_active_workers`, by a `submit_to` that raced our retirement (its
            // task is in our mailbox: the loop hands it on), or by termination. Not in the
            // idle bitmap, so no notifier counts on us.
            registry
                .sleep
                .park_retired(self.index, registry.park_safety_net);
        };
        self.counters.end_park(|| registry.uptime_ns());
        terminated
    }

    /// Hands every job and task queued on this worker to the inject queues (see `retire`).
    fn hand_on_queues(&self) {
        let registry = &*self.registry;
        while let Some(job) = self.pop() {
            // Wakes a worker for it. The queue closes only when the last worker exits, and
            // this one has not; should it be closed anyway, the job runs here.
            if let Err(job) = registry.inject(job) {
                self.execute(job);
            }
        }
        let mut handed: Vec<_> = self.slots().lifo.take().into_iter().collect();
        handed.extend(std::iter::from_fn(|| self.ring.pop()));
        handed.extend(std::iter::from_fn(|| self.slots().mailbox.pop()));
        if !handed.is_empty() {
            registry.inject_tasks(handed);
            registry.sleep.notify_task();
        }
    }

    fn has_local_tasks(&self) -> bool {
        // Relaxed: a hint.
        !self.ring.is_empty() || !self.slots().lifo.is_empty()
    }

    /// The main loop: find work, run it, park when there is none, until terminated.
    fn main_loop(&self) {
        let mut idle = IdleLoop::new(self, false);
        loop {
            if self.index >= self.registry.active_workers() {
                idle.found_work();
                if self.retire() {
                    break;
                }
                continue;
            }
            if let Some(work) = self.find_work(idle.rounds) {
                idle.found_work();
                self.run(work);
                continue;
            }
            if self.registry.is_terminating() {
                break;
            }
            if !idle.spin() {
                idle.park();
            }
        }
        idle.found_work();
    }
}

/// Lets `Inject::pop_batch` move tasks straight into the ring.
///
/// `pop_batch` calls `extend` with the inject queue's lock held, so nothing here may push to
/// the inject queue: a ring overflow would, and would deadlock on that lock. The batch is
/// sized by `remaining_slots`, which counts slots a thief is still copying out as taken, and
/// only this worker pushes, so the ring cannot overflow. Should that reasoning ever break,
/// what does not fit waits in `spill` and goes to the inject queue after the lock is
/// released (`Vec::new` does not allocate, so the normal case costs nothing).
struct IntoRing<'w> {
    worker: &'w WorkerThread,
    spill: Vec<NonNull<Header>>,
}

/// Keeps overflowing tasks for later (see [`IntoRing`]).
struct Spill<'a>(std::cell::RefCell<&'a mut Vec<NonNull<Header>>>);

impl Overflow<Header> for Spill<'_> {
    fn push_batch(&self, items: impl Iterator<Item = NonNull<Header>>) {
        self.0.borrow_mut().extend(items);
    }
}

impl Extend<NonNull<Header>> for IntoRing<'_> {
    fn extend<I: IntoIterator<Item = NonNull<Header>>>(&mut self, items: I) {
        let spill = Spill(std::cell::RefCell::new(&mut self.spill));
        for ptr in items {
            self.worker.ring.push_back(ptr, &spill);
        }
    }
}

/// The spin → yield → park progression of one idle stretch, and the searching bookkeeping
/// of the sleep protocol (R3, R4).
struct IdleLoop<'w> {
    worker: &'w WorkerThread,
    rounds: u32,
    searching: bool,
    /// Waiting inside `join`: never counts as a searcher and never drives the timers (R6).
    join_wait: bool,
    /// Whether this stretch began with a wakeup, and whether work was found since (for the
    /// `noops` count).
    woken: bool,
    worked: bool,
}

impl<'w> IdleLoop<'w> {
    fn new(worker: &'w WorkerThread, join_wait: bool) -> IdleLoop<'w> {
        IdleLoop {
            worker,
            rounds: 0,
            searching: false,
            join_wait,
            woken: false,
            worked: false,
        }
    }

    /// Work was found: stop searching, and if we were the last searcher, wake another
    /// worker, since where there was one job there may be more (R3).
    fn found_work(&mut self) {
        self.rounds = 0;
        self.worked = true;
        if self.searching {
            self.searching = false;
            if self.worker.registry.sleep.stop_searching() {
                self.worker.registry.sleep.notify_work();
            }
        }
    }

    /// One unsuccessful round: spin or yield. Returns false when it is time to park.
    fn spin(&mut self) -> bool {
        if !self.searching && !self.join_wait {
            // R4: join the searchers if fewer than about half the workers search.
            self.searching = self.worker.registry.sleep.try_start_searching();
        }
        self.rounds += 1;
        if self.rounds <= SPIN_ROUNDS {
            for _ in 0..(1 << self.rounds.min(6)) {
                thread::spin_loop();
            }
            true
        } else if self.rounds <= SPIN_ROUNDS + YIELD_ROUNDS {
            thread::yield_now();
            true
        } else {
            false
        }
    }

    /// Parks through the sleep protocol (R2, R5) until woken, then resumes as the wake says.
    /// The first worker to park while nobody drives the timers drives them: it parks no
    /// longer than the next deadline and fires what is due when it wakes.
    fn park(&mut self) {
        let worker = self.worker;
        let registry = &*worker.registry;
        let counters = &worker.counters;
        let _ = registry.sleep.register_parked(worker.index, self.searching);
        self.searching = false;
        // After `register_parked`, not before: a worker giving the driver role up without
        // parking (one switched off, see `retire`) wakes a parked worker to take it over, and
        // either it finds our bit in the idle state or we find the role free here (both
        // sides are SeqCst read-modify-writes or behind SeqCst fences).
        let driving = !self.join_wait && registry.timers.try_drive(worker.index);
        // R5: recheck every queue after the heavy barrier in `register_parked`. If work is
        // visible, make sure someone who can run it is woken (possibly us: our bit is set).
        // Tasks wake only workers outside `join` (R6). With `--cfg magpie_loom_broken` the
        // task recheck is gone: a negative control that the runtime-level loom models must
        // catch (the lost wakeup of tokio#4383).
        if registry.has_visible_jobs() {
            registry.sleep.wake_any_cold();
        }
        if !cfg!(magpie_loom_broken) && registry.has_visible_tasks() {
            registry.sleep.wake_free_cold();
        }
        let timer = if driving {
            registry.timers.park_timeout()
        } else {
            None
        };
        let timeout = match (timer, registry.park_safety_net) {
            (Some(timer), Some(net)) => Some(timer.min(net)),
            (timer, net) => timer.or(net),
        };
        worker.flush_counters();
        bump(&counters.parks);
        if self.woken && !self.worked {
            // Woken last time, and found nothing to do since.
            bump(&counters.noops);
        }
        // Parks are rare next to tasks and jobs: two clock reads each are affordable.
        counters.begin_park(|| registry.uptime_ns());
        worker.trace_event(Kind::Park, 0);
        let wake = registry.sleep.park(worker.index, timeout);
        counters.end_park(|| registry.uptime_ns());
        worker.trace_event(Kind::Unpark, 0);
        bump(&counters.unparks);
        self.woken = true;
        self.worked = false;
        if driving {
            registry.timers.fire_due();
            registry.timers.release();
        }
        match wake {
            Wake::Searching if self.join_wait => self.shed_searching(),
            Wake::Searching => self.searching = true,
            Wake::Plain => {}
        }
        self.rounds = 0;
        // Time parked is not task time.
        worker.tasks.batch_start.set(None);
    }

    /// A worker waiting inside `join` was woken as a searcher. It never counts as one (R6),
    /// so it gives the count back at once, and if it was the last searcher, it hands any
    /// visible work on, as a searcher that parks would (R5): a publisher may have skipped
    /// waking anyone because of our count.
    fn shed_searching(&mut self) {
        let registry = &*self.worker.registry;
        if registry.sleep.stop_searching() {
            crate::sync::barrier::heavy();
            if registry.has_visible_jobs() {
                registry.sleep.notify_work();
            }
            if registry.has_visible_tasks() {
                registry.sleep.notify_task();
            }
        }
    }
}

/// Everything a new worker thread needs.
pub(crate) struct WorkerSeed {
    pub(crate) index: usize,
    pub(crate) registry: Arc<Registry>,
    pub(crate) deque: chase_lev::Worker<JobHeader>,
    pub(crate) ring: local::Local<Header>,
}

/// The body of a worker thread.
pub(crate) fn run(seed: WorkerSeed) {
    seed.registry.groups.pin_current_thread(seed.index);
    let (victims_near, victims_far) = seed.registry.groups.victims(seed.index);
    let trace = seed
        .registry
        .traces
        .as_ref()
        .map(|traces| traces[seed.index].clone());
    let worker = WorkerThread {
        victims_near,
        victims_far,
        timed_polls: seed.registry.poll_time_histogram
            || (trace.is_some() && cfg!(not(magpie_no_trace))),
        trace,
        index: seed.index,
        counters: seed.registry.counters[seed.index].clone(),
        rng: Cell::new(FastRand::for_worker(seed.index)),
        registry: seed.registry,
        deque: seed.deque,
        ring: seed.ring,
        tasks: TaskState {
            countdown: Cell::new(INITIAL_INTERVAL),
            interval: Cell::new(INITIAL_INTERVAL),
            mean_task_ns: Cell::new(0.0),
            batch_start: Cell::new(None),
            batch_tasks: Cell::new(0),
            lifo_streak: Cell::new(0),
            in_task: Cell::new(false),
            polled: Cell::new(0),
            local_scheduled: Cell::new(0),
            lifo_hits: Cell::new(0),
        },
    };
    set(&worker.counters.interval, u64::from(INITIAL_INTERVAL));
    set(
        &worker.counters.thread_id,
        super::topology::current_thread_id(),
    );
    CURRENT.with(|c| c.set(&worker));
    // Jobs and tasks catch their users' panics; a panic escaping here is a bug in magpie.
    let guard = AbortIfPanic;
    worker.main_loop();
    // Still this thread's worker: the last one out runs the jobs that came in late.
    let last = worker.registry.worker_exiting(&worker);
    worker.flush_counters();
    std::mem::forget(guard);
    debug_assert!(
        worker.deque.is_empty(),
        "worker exited with jobs in its deque"
    );
    debug_assert!(
        !worker.has_local_tasks(),
        "worker exited with tasks in its queues"
    );
    CURRENT.with(|c| c.set(ptr::null()));
    worker.registry.worker_exited(last);
}
