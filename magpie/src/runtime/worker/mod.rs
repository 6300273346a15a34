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
//!    while the local queues never run dry (no batch from the inject queue unless the
//!    worker holds a task that did not come from it: `WorkerThread::inject_turn`);
//! 3. the LIFO slot (at most `tasks::MAX_LIFO_POLLS` in a row), then the ring, FIFO; then the
//!    mailbox and the inject queue (a batch: this worker's share, into the ring);
//! 4. a steal from a random victim (FastRand + Lemire), trying every other worker once
//!    starting there: the oldest job of its deque, else half of its ring (at most 128), else
//!    its mailbox, else (after a few search rounds) its LIFO slot;
//! 5. the inject queues once more (tasks, then jobs: `install` from outside);
//! 6. spin, then yield, then park through the sleep protocol (`crate::sleep`); the first
//!    worker to park while nobody drives the timers parks with a timeout to the next
//!    deadline and fires the due timers when it wakes. Every other park has no timeout: a
//!    parked worker runs again only when somebody wakes it (sleep/README.md says who, and
//!    why nobody is forgotten), so an idle pool costs no CPU at all.
//!
//! A worker waiting inside `join` for a stolen half follows a shorter order: its deque, the
//! other deques, the job inject queue. It never runs tasks (see `wait_until`).
//!
//! The files: this one holds the worker's state, its deque, the main loop, `wait_until`,
//! switching off (`retire`) and the thread's body; `tasks.rs` the task queues, polling and
//! maintenance (steps 2 and 3); `search.rs` the find-work order and stealing (steps 1, 4 and
//! 5); `idle.rs` spinning, parking and driving the timers (step 6); `block.rs`
//! `block_in_place`: handing the worker's tasks on while user code blocks it.

use std::cell::{Cell, RefCell};
use std::ptr::{self};

use crate::join::job::{JobHeader, JobRef};
use crate::join::latch::SpinLatch;
use crate::queue::chase_lev::{self};
use crate::queue::local::{self};
use crate::sleep::Sleep;
use crate::stats::trace::{Kind, TraceBuffer};
use crate::stats::{bump, set, WorkerCounters, ACTIVITY_BUSY, ACTIVITY_STEP, ACTIVITY_WAITING};
use crate::sync::atomic::{Relaxed, Release};
use crate::sync::thread::thread_local;
use crate::sync::AtomicUsize;
use crate::task::block::Tally;
use crate::task::cell_cache::CellCache;
use crate::task::notified::Schedule;
use crate::task::raw::{Header, RawTask};
use crate::util::rand::FastRand;
use crate::util::unwind::AbortIfPanic;
use crate::util::CachePadded;
use std::sync::Arc;

use super::registry::{Registry, Task, TaskSlots};

mod block;
mod idle;
#[cfg(not(any(loom, shuttle)))]
pub(crate) use block::BlockedWaiters;
mod search;
mod tasks;

use idle::IdleLoop;
use tasks::{TaskState, INITIAL_INTERVAL};

/// How many stealable jobs a worker keeps offering before `join` stops publishing its second
/// halves (see `WorkerThread::should_publish`). Thieves take the oldest, so the reserve holds
/// the largest pieces; a few are enough, since every steal makes the owner publish again at
/// its next `join`. chili publishes while its queue holds fewer than 3 jobs (and one `join`
/// in 64 otherwise). Measured in magpie-bench `fork-join` (fib, tree_sum); see BENCHMARKS.md.
const STEAL_RESERVE: usize = 3;
thread_local! {
    /// The worker running on this thread, or null.
    static CURRENT: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

/// One unit of work found by the find-work order.
enum Work {
    Job(JobRef),
    Task(Task),
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
    /// Per victim: after this worker lost a race for the oldest job of its deque, how long
    /// that deque's oldest job must stay put before we pay a heavy barrier for it again
    /// (see `steal_job`).
    lost_races: Box<[Cell<Option<search::LostRace>>]>,
    /// The word that switches this worker on and off (`set_active_workers`, or for a
    /// compensation slot the monitor), inside `registry`, and this worker's rank against it
    /// (`Registry::switch_of`): the main loop reads the word without looking up which.
    switch_word: *const AtomicUsize,
    switch_rank: usize,
    /// This worker's event ring, when tracing is on.
    trace: Option<Arc<TraceBuffer>>,
    /// Whether task polls are timed: for the histogram, or for the trace.
    timed_polls: bool,
    /// Whether a timed poll that follows another straight from the local queues may take
    /// the previous poll's end as its start (`TaskState::chained`): when polls are timed
    /// only for the per-task counters. The trace and the histogram keep two readings per
    /// poll, so that their spans do not take in the hand-over between polls.
    chain_polls: bool,
    /// How many `join` waits (`wait_until_cold`) are open on this worker's stack: a worker
    /// waiting for a stolen half runs other jobs, which may wait on joins of their own. It
    /// is a join-waiter for the sleep protocol (R6) until the outermost wait ends; when the
    /// innermost one cleared the mark, the worker looked free while the outer wait went on,
    /// and a wake that must reach a free worker (the timers' hand-off) could land on it and
    /// be lost (found in the review of issue 19).
    join_waits: Cell<u32>,
    /// References to `registry` that freed tasks gave back (`keep_registry_ref`), which the
    /// next tasks this worker spawns take (`registry_ref`): a task's scheduler reference
    /// then costs no write to the registry's reference count, a line that the submitters
    /// and every worker would otherwise write once per task. At most
    /// [`MAX_KEPT_REGISTRY_REFS`]; given back when the thread stops being this worker.
    kept_registry_refs: Cell<usize>,
    /// Tasks without a `JoinHandle` that completed here and are still in the live list,
    /// each with the completer's reference: unlinked together, a lock per shard instead of
    /// one per task (`defer_unlink`, `unlink_completed`). At most [`MAX_DEFERRED_UNLINKS`].
    deferred_unlinks: RefCell<Vec<RawTask>>,
    /// The memory of task cells freed here, for this worker's next spawns
    /// (`task/cell_cache.rs`; `Schedule::reuse_cell` and `keep_cell` of the registry).
    pub(crate) cells: CellCache,
    /// For each victim, its poll count when this worker last found its LIFO slot occupied
    /// and left the task there, and when it first saw that count (`Registry::uptime_ns`;
    /// `search.rs`, `lifo_stranded`): a thief takes a LIFO task only once the victim has
    /// begun no poll for [`LIFO_STRANDED_NS`](search::LIFO_STRANDED_NS), that is, while the
    /// poll that filled the slot has run all that while.
    lifo_seen: Box<[Cell<(u64, u64)>]>,
    /// What the current idle stretch's looks at LIFO slots found (`search.rs`,
    /// `lifo_stranded`): whether a task there may be stranded, not yet for long enough.
    lifo_looks: Cell<search::LifoLooks>,
    /// Set while this worker, idle, wakes the tasks its own turn of the drivers found
    /// (`WorkerThread::wake_quietly`); then `schedule_local` counts each task it queues here
    /// instead of notifying for it.
    quiet: Cell<bool>,
    /// Tasks queued here without a notification while `quiet` was set.
    quieted: Cell<u32>,
    /// A task polled here filed a timer while nobody held the driver role (D5a in
    /// `sleep/README.md`): this worker owes the hand-off that the filing would have made at
    /// once. It makes it before it runs anything else (`IdleLoop::found_work`), or at its
    /// park if it does not take the role itself then.
    owes_driver: Cell<bool>,
}

/// How many completed tasks a worker leaves in the live list at most before it unlinks them
/// (see `WorkerThread::deferred_unlinks`): at 2 workers, 8 shards, about one lock per 8
/// tasks instead of one per task. A bit per task in `OwnedTasks::remove_batch`'s answer.
const MAX_DEFERRED_UNLINKS: usize = 64;

/// How many registry references one worker keeps at most (see
/// `WorkerThread::kept_registry_refs`). A worker that only completes tasks spawned
/// elsewhere (by a thread outside the pool, say) keeps this many and then drops the rest as
/// before; its exit gives them back one by one, a few hundred microseconds at most.
const MAX_KEPT_REGISTRY_REFS: usize = 1 << 14;

impl WorkerThread {
    /// The worker running on this thread, or null off the pool.
    #[inline]
    pub(crate) fn current() -> *const WorkerThread {
        CURRENT.with(Cell::get)
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// A reference to this worker's registry for a task it spawns: one a freed task gave
    /// back if there is one (no write to the shared count), else a new one.
    #[inline]
    pub(crate) fn registry_ref(&self) -> Arc<Registry> {
        match self.kept_registry_refs.get() {
            0 => self.registry.clone(),
            kept => {
                self.kept_registry_refs.set(kept - 1);
                // SAFETY: `keep_registry_ref` leaked one strong reference to this registry
                // (`Arc::into_raw` of an `Arc` to the same allocation, so the same pointer)
                // for each count in `kept_registry_refs`; this takes one of them back.
                unsafe { Arc::from_raw(Arc::as_ptr(&self.registry)) }
            }
        }
    }

    /// Keeps `registry`, a reference to this worker's own registry that a freed task gave
    /// back (`Schedule::recycle`), for the next task this worker spawns; drops it if this
    /// worker keeps enough already.
    #[inline]
    pub(crate) fn keep_registry_ref(&self, registry: Arc<Registry>) {
        debug_assert!(Arc::ptr_eq(&registry, &self.registry));
        let kept = self.kept_registry_refs.get();
        if kept < MAX_KEPT_REGISTRY_REFS {
            // The strong count stays raised: `kept_registry_refs` accounts for it.
            let _ = Arc::into_raw(registry);
            self.kept_registry_refs.set(kept + 1);
        }
    }

    /// Takes on the hand-off a timer filed with the role free asks for, if this thread is
    /// one of the registry's workers polling a task (not inside `block_in_place`): the
    /// filing task's own timer cannot wake it before its poll returns, and when the poll
    /// returns this worker either runs more work, handing off first, or goes idle and
    /// drives the timers itself (D5a in `sleep/README.md`). Returns whether it took it on.
    pub(crate) fn owe_driver_hand_off(&self) -> bool {
        if !self.in_task() || self.is_blocking() {
            return false;
        }
        self.owes_driver.set(true);
        true
    }

    /// Takes over a completed task whose `JoinHandle` is gone, with the completer's
    /// reference, and leaves it in the live list until `unlink_completed`. Not inside
    /// `block_in_place` (the caller checks `is_blocking`): the worker may be gone a long
    /// time.
    ///
    /// Deferring the unlink changes nothing anybody can wait for: no handle awaits the task,
    /// its hooks have run, and its output is dropped; `wait_idle` and the shutdown wait for
    /// the live count, which drops with the unlink, and every path on which this worker
    /// stops running tasks calls `unlink_completed` first (`find_work` coming back empty,
    /// `join`'s wait, `block_in_place`, switching off, exit). The live-task dump leaves
    /// complete tasks out. What shows it is `tasks_alive`, higher by at most
    /// [`MAX_DEFERRED_UNLINKS`] per worker while a worker is busy.
    ///
    /// # Safety
    ///
    /// `task` is this worker's registry's, complete but for its final transition, and the
    /// caller gives up its own reference to this worker (it drops none for it).
    pub(crate) unsafe fn defer_unlink(&self, task: RawTask) {
        debug_assert!(!self.is_blocking());
        // The tasks taken before, not this one: its completer has a transition left.
        if self.deferred_unlinks.borrow().len() >= MAX_DEFERRED_UNLINKS {
            self.unlink_completed();
        }
        self.deferred_unlinks.borrow_mut().push(task);
    }

    /// Unlinks the tasks `defer_unlink` took, a shard lock for all of those in one shard,
    /// and drops their references (the list's and the completer's), freeing them. Runs no
    /// user code: the tasks' futures and outputs are gone.
    pub(crate) fn unlink_completed(&self) {
        let mut tasks = self.deferred_unlinks.borrow_mut();
        if tasks.is_empty() {
            return;
        }
        let registry = &*self.registry;
        // SAFETY: each task holds the reference its completer gave `defer_unlink`.
        let linked = unsafe { registry.owned.remove_batch(&tasks) };
        registry
            .idle_wait
            .task_finished(|| registry.owned.is_empty_seqcst());
        // Neighbouring tasks of one batch give back their block slots together.
        let mut tally = Tally::new(Schedule::block_spares(&self.registry));
        for (i, task) in tasks.drain(..).enumerate() {
            // The completer's reference, and the list's if the task was linked.
            let refs = 1 + usize::from(linked & (1 << i) != 0);
            // SAFETY: this worker holds those references (above), and drops them here; the
            // task is out of the live list, unlinked above (or by whoever took the list's
            // reference).
            unsafe { task.drop_unlinked_references(refs, &mut tally) };
        }
    }

    /// Drops every reference `keep_registry_ref` kept. Called once this thread is no
    /// longer the current worker, so that no freed task can hand it another.
    fn give_back_registry_refs(&self) {
        for _ in 0..self.kept_registry_refs.replace(0) {
            // SAFETY: as in `registry_ref`: each count is one leaked strong reference. The
            // worker's own `registry` keeps the count above zero throughout.
            drop(unsafe { Arc::from_raw(Arc::as_ptr(&self.registry)) });
        }
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

    /// The publication policy of a parallel iterator's split (`join::join_offered`): as
    /// [`should_publish`](Self::should_publish), with a reserve as deep as a computation's
    /// split spine on this pool (5 jobs at 16 workers; never fewer than `STEAL_RESERVE`). The
    /// spine runs down its levels with no work in between, so `join`'s reserve of 3 kept
    /// the deeper levels from every thief; a deque already holding a spine's worth (an inner
    /// iterator under an outer one's offered splits) still runs the rest inline
    /// (`iter/plumbing/README.md`, "Every split is offered").
    #[inline]
    pub(crate) fn should_offer_split(&self) -> bool {
        self.deque.len() < STEAL_RESERVE.max(self.registry.sleep.split_reserve())
    }

    /// Pushes a job onto this worker's deque and wakes a sleeper if nobody is searching
    /// (R1), or, in the symmetric barrier mode, if an older job of the deque is still there,
    /// fewer than about half the workers search and a CPU has no worker awake (R1b;
    /// sleep/README.md).
    #[inline]
    pub(crate) fn push(&self, job: JobRef) {
        // Before the push: whether the searchers, if any, left a job of ours untaken.
        let backlog = !self.deque.is_empty();
        self.deque.push(job.as_ptr());
        self.registry.sleep.notify_job(backlog);
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

    /// Runs a job that is no part of the task this worker may be polling: one stolen or
    /// injected while the task waits in a `join`. The polling word (task/id.rs, "The
    /// current task") is cleared meanwhile, so that neither `task::try_id` nor the stall
    /// monitor puts the job in the task; the task dump still shows the task running here,
    /// from the `suspended` word. What the job leaves on this worker's deque (a scope's
    /// spawns land on the deque of the worker that ran the spawning job, which returns
    /// without waiting for them) is no part of the task either: it runs here too, before the
    /// word comes back. Jobs do not unwind (each catches its own panic), so the word is
    /// restored.
    fn execute_outside_task(&self, job: JobRef) {
        // Relaxed, all but one: this worker's own words.
        let polling = self.counters.polling.load(Relaxed);
        if polling == 0 {
            return self.execute(job);
        }
        let mark = self.deque.mark();
        // `suspended` before the polling word is cleared, Release: pairs with the dump's
        // Acquire load of the polling word, so a dump that reads this 0 reads the task in
        // `suspended` (`Runtime::tasks`). A dump is a snapshot: at the other end, between
        // the two stores below, it may still read the task as scheduled.
        self.counters.suspended.store(polling, Relaxed);
        self.counters.polling.store(0, Release);
        self.execute(job);
        while let Some(ptr) = self.deque.pop_above(mark) {
            // SAFETY: only `JobRef::as_ptr` values are pushed (see `push`).
            self.execute(unsafe { JobRef::from_ptr(ptr) });
        }
        self.counters.polling.store(polling, Relaxed);
        self.counters.suspended.store(0, Relaxed);
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

    /// A unit of work other than a task poll starts (a job taken from a queue), or the unit
    /// that waited goes on (after a park inside `join`, or `block_in_place`): a new value of
    /// the activity word, busy and not waiting, for the stall monitor (`runtime/monitor.rs`).
    /// One Relaxed store to the worker's own counters line. A task poll needs none: it
    /// counts itself in `tasks_polled` and names itself in `polling`, which the monitor
    /// reads too. Not called by `join`'s inline path: a fork-join computation its worker
    /// runs inline is one unit.
    #[inline(always)]
    fn begin_unit(&self) {
        if cfg!(magpie_no_insight) {
            return;
        }
        // Relaxed: only this worker writes the word, and the monitor only compares values
        // (see `WorkerCounters::activity`).
        let word = self.counters.activity.load(Relaxed);
        let next = ((word | ACTIVITY_BUSY) & !ACTIVITY_WAITING).wrapping_add(ACTIVITY_STEP);
        self.counters.activity.store(next, Relaxed);
    }

    /// The worker ran out of work: the activity word says neither busy nor waiting, so
    /// nothing it does now counts toward a stall. On the idle path only.
    #[inline]
    fn end_unit(&self) {
        // Relaxed: as in `begin_unit`.
        let word = self.counters.activity.load(Relaxed);
        if word & (ACTIVITY_BUSY | ACTIVITY_WAITING) != 0 {
            // Relaxed: as in `begin_unit`.
            let idle = word & !(ACTIVITY_BUSY | ACTIVITY_WAITING);
            self.counters.activity.store(idle, Relaxed);
        }
    }

    /// The unit running now waits in a way that is not a stall: it parks inside `join`
    /// until the stolen half is done, or enters `block_in_place`. Until the next
    /// `begin_unit` the monitor counts nothing on this worker, not even the task poll that
    /// may be running around the wait.
    #[inline]
    fn wait_unit(&self) {
        // Relaxed: as in `begin_unit`.
        let word = self.counters.activity.load(Relaxed);
        self.counters
            .activity
            .store(word | ACTIVITY_WAITING, Relaxed);
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
    fn run(&self, work: Work) {
        match work {
            Work::Job(job) => {
                // The job's time is not the next poll's (`TaskState::chained`).
                self.tasks.chained.set(false);
                self.begin_unit();
                self.execute(job);
            }
            // A poll is a unit of its own (`run_task`): no `begin_unit`.
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
        // The wait may be long: leave no completed task in the live list meanwhile.
        self.unlink_completed();
        // Traced as a span that holds what this worker runs and parks meanwhile, so a
        // timeline tells a join waiting for a thief from one doing its own work.
        self.trace_event(Kind::WaitStart, 0);
        let sleep = &self.registry.sleep;
        let depth = self.join_waits.get();
        self.join_waits.set(depth + 1);
        if depth == 0 {
            sleep.set_join_waiting(self.index, true);
        }
        // Tasks this worker queued are better run by someone else than wait for the join.
        if self.has_local_tasks() {
            sleep.notify_task();
        }
        let mut idle = IdleLoop::new(self, true);
        // Inside `block_in_place` nothing here counts toward a stall (see `block.rs`).
        let watched = !self.is_blocking();
        // Counted among the starving waiters (`Sleep::others_starve`) from a round that found
        // nothing to the next job found, the park, or the end of the wait: a parallel
        // iterator's long piece running elsewhere then hands this worker half of its rest.
        let starving = StarvingWaiter::new(sleep);
        while !latch.probe() {
            // This worker's own deque first: what it holds belongs to the frames that wait
            // here (`find_work` empties it before a task's poll starts, and
            // `execute_outside_task` runs what a foreign job leaves on it), so a task's id
            // stays on; jobs from elsewhere run outside the task.
            let found = match self.pop() {
                Some(job) => Some((job, true)),
                None => self.find_other_job().map(|job| (job, false)),
            };
            if let Some((job, own)) = found {
                starving.set(false);
                idle.found_work();
                if watched {
                    self.begin_unit();
                }
                if own {
                    self.execute(job);
                } else {
                    self.execute_outside_task(job);
                }
                continue;
            }
            starving.set(true);
            if !idle.spin() {
                // Sleep on the latch: announce it, so the setter wakes us (latch.rs).
                if latch.start_sleeping() {
                    starving.set(false);
                    // Asleep, this worker is not stalled: it waits for another's work.
                    self.wait_unit();
                    idle.park();
                    latch.stop_sleeping();
                    // The job that called `join` goes on: a new unit for the monitor.
                    if watched {
                        self.begin_unit();
                    }
                }
            }
        }
        drop(starving);
        idle.found_work();
        self.join_waits.set(depth);
        if depth == 0 {
            sleep.set_join_waiting(self.index, false);
        }
        self.trace_event(Kind::WaitEnd, 0);
    }

    /// Switched off by `set_active_workers` (or, for a compensation slot, never switched on
    /// or retired by `retire_compensation_workers`): hands every job and task queued here
    /// on, and parks until this worker is switched on again (returns false) or the runtime
    /// terminates (returns true).
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
        self.unlink_completed();
        self.flush_counters();
        let _ = self.counters.begin_park(|| registry.uptime_ns());
        let terminated = loop {
            if registry.is_switched_on(self.index) {
                // Active again: whatever is queued here is ours to run.
                break false;
            }
            self.hand_on_queues();
            // We may have driven the timers last (we released the role when we woke); an
            // active worker that parked meanwhile parked without a timeout. Make sure one
            // takes the role: one that parks from now on finds it free (`IdleLoop::park`
            // tries after setting its idle bit); one parked already is woken, inside `join`
            // too if no other is parked (D5: it may be the only active worker left).
            registry.hand_off_driver_to_anyone();
            if registry.is_terminating() {
                break true;
            }
            // Woken by `set_active_workers` (or the compensation calls, for a compensation
            // slot), by a `submit_to` that raced our retirement (its
            // task is in our mailbox: the loop hands it on), or by termination, each a plain
            // token set after the change it announces (so the next pass sees the change);
            // no timeout unless `Builder::park_safety_net` set one. Not in the idle bitmap,
            // so no notifier counts on us.
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
        self.hand_on_tasks();
    }

    /// Moves the tasks queued on this worker (its LIFO slot, ring and mailbox, in that
    /// order) to the task inject queue, and wakes a worker for them if nobody searches.
    /// Returns how many moved. Moving a `Notified` pointer between queues neither copies
    /// nor drops its task, so none is lost or run twice.
    fn hand_on_tasks(&self) -> usize {
        let registry = &*self.registry;
        let mut handed: Vec<_> = self.slots().lifo.take().into_iter().collect();
        handed.extend(std::iter::from_fn(|| self.ring.pop()));
        handed.extend(std::iter::from_fn(|| self.slots().mailbox.pop()));
        let moved = handed.len();
        if moved != 0 {
            registry.inject_tasks(handed);
            registry.sleep.notify_task_outside();
        }
        moved
    }

    fn has_local_tasks(&self) -> bool {
        // Relaxed: a hint.
        !self.ring.is_empty() || !self.slots().lifo.is_empty()
    }

    /// Whether this worker is switched on (`Registry::is_switched_on` for this worker).
    #[inline]
    fn is_switched_on(&self) -> bool {
        // SAFETY: `switch_word` points into the registry, which `self.registry` keeps alive.
        let word = unsafe { &*self.switch_word };
        // Relaxed: as in `Registry::is_switched_on`.
        self.switch_rank < word.load(Relaxed)
    }

    /// The main loop: find work, run it, park when there is none, until terminated.
    fn main_loop(&self) {
        let mut idle = IdleLoop::new(self, false);
        loop {
            if !self.is_switched_on() {
                idle.found_work();
                self.end_unit();
                // Switched off, it may sleep: not a hand-over between two polls.
                self.tasks.chained.set(false);
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
            self.unlink_completed();
            self.end_unit();
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
    let (switch_word, switch_rank) = seed.registry.switch_of(seed.index);
    let switch_word: *const AtomicUsize = switch_word;
    let worker = WorkerThread {
        switch_word,
        switch_rank,
        lost_races: (0..seed.registry.stealers.len())
            .map(|_| Cell::new(None))
            .collect(),
        victims_near,
        victims_far,
        timed_polls: seed.registry.poll_time_histogram
            || seed.registry.task_insight
            || (trace.is_some() && cfg!(not(magpie_no_trace))),
        chain_polls: seed.registry.task_insight
            && !seed.registry.poll_time_histogram
            && (trace.is_none() || cfg!(magpie_no_trace)),
        trace,
        join_waits: Cell::new(0),
        kept_registry_refs: Cell::new(0),
        deferred_unlinks: RefCell::new(Vec::with_capacity(MAX_DEFERRED_UNLINKS)),
        cells: CellCache::new(),
        quiet: Cell::new(false),
        quieted: Cell::new(0),
        owes_driver: Cell::new(false),
        lifo_seen: (0..seed.registry.num_slots())
            .map(|_| Cell::new((u64::MAX, 0)))
            .collect(),
        lifo_looks: Cell::new(search::LifoLooks::default()),
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
            blocking: Cell::new(0),
            local_scheduled: Cell::new(0),
            lifo_hits: Cell::new(0),
            clock_ns: Cell::new(0),
            chained: Cell::new(false),
            ids: Cell::new(0),
            holds_local: Cell::new(false),
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
    // Still this thread's worker: the last one out runs the jobs that came in late. A
    // task completed meanwhile (a job may cancel tasks) is unlinked after them, while this
    // thread is still the worker it handed its reference to.
    let last = worker.registry.worker_exiting(&worker);
    worker.unlink_completed();
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
    // From here no completion can hand this worker a task (`release_detached` finds no
    // current worker), and none came since the unlink above.
    debug_assert!(
        worker.deferred_unlinks.borrow().is_empty(),
        "worker exited with completed tasks still linked"
    );
    // No task freed on this thread from now on gives its reference to this worker, or its
    // memory.
    worker.give_back_registry_refs();
    worker.cells.release();
    worker.registry.worker_exited(last);
}

/// How many jobs the calling worker's deque holds; `None` off the pool. For tests of what a
/// computation leaves stealable.
#[cfg(test)]
pub(crate) fn current_deque_len() -> Option<usize> {
    // SAFETY: a non-null current worker is live during this call.
    unsafe { WorkerThread::current().as_ref() }.map(|worker| worker.deque.len())
}

/// For the parallel iterators' bridge (`iter/plumbing/bridge.rs`, rule 5): whether the
/// calling thread is a worker of a pool that cuts long pieces for its starving workers (one
/// of more than one worker, without `Builder::split_on_demand(false)`).
#[inline]
pub(crate) fn splits_on_demand_here() -> bool {
    // SAFETY: a non-null current worker is live during this call.
    unsafe { WorkerThread::current().as_ref() }
        .is_some_and(|worker| worker.registry.sleep.splits_on_demand())
}

/// For the parallel iterators' bridge (`iter/plumbing/bridge.rs`, rule 5): whether the
/// calling thread is a worker whose deque offers no job to take while another worker of its
/// pool is awake with nothing to run, so that a long piece it folds should hand half of its
/// rest to the pool. False off the pool.
#[inline]
pub(crate) fn others_starve() -> bool {
    // SAFETY: a non-null current worker is live during this call.
    match unsafe { WorkerThread::current().as_ref() } {
        // A test's pool that starves always (`Builder::starving_always`) says so whatever
        // the deque holds: every look of every long piece cuts, whichever worker folds it.
        #[cfg(test)]
        Some(worker) if worker.registry.sleep.starves_always() => {
            worker.registry.sleep.others_starve()
        }
        Some(worker) => worker.deque.is_empty() && worker.registry.sleep.others_starve(),
        None => false,
    }
}

/// A waiting worker's place among the starving waiters of its pool
/// ([`Sleep::set_starving_waiter`]): counted while [`set`](StarvingWaiter::set) to `true`,
/// and taken off when dropped, on unwind too, so that the count never keeps a worker that
/// left. In a pool that cuts no piece on demand nobody reads the count: nothing is written.
struct StarvingWaiter<'a> {
    /// `None` where the count has no reader.
    sleep: Option<&'a Sleep>,
    counted: Cell<bool>,
}

impl<'a> StarvingWaiter<'a> {
    fn new(sleep: &'a Sleep) -> StarvingWaiter<'a> {
        StarvingWaiter {
            sleep: Some(sleep).filter(|sleep| sleep.splits_on_demand()),
            counted: Cell::new(false),
        }
    }

    /// Counts the worker (`true`) or not (`false`); a change only, the same value is free.
    #[inline]
    fn set(&self, starving: bool) {
        if let Some(sleep) = self.sleep {
            if self.counted.replace(starving) != starving {
                sleep.set_starving_waiter(starving);
            }
        }
    }
}

impl Drop for StarvingWaiter<'_> {
    fn drop(&mut self) {
        self.set(false);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use crate::task::cell_cache::CellCache;
    use crate::Runtime;

    /// The cells of tasks freed on a worker stay with it (`task/cell_cache.rs`), and its
    /// next spawns of the same layout take them: after a chain of detached spawns the
    /// worker holds some, and after a cache's worth of spawns of the same future type, held
    /// alive, none.
    #[test]
    fn freed_cells_stay_with_the_worker_for_its_next_spawns() {
        enum Step {
            Chain(usize, mpsc::Sender<usize>),
            Hold,
        }
        /// The cells this worker holds, after freeing what it deferred if `unlink`.
        fn cached(unlink: bool) -> usize {
            // SAFETY: called inside a poll on a worker thread: the worker is live.
            let worker = unsafe { super::WorkerThread::current().as_ref() }.unwrap();
            if unlink {
                // Deferred unlinks free their cells when the batch is unlinked.
                worker.unlink_completed();
            }
            worker.cells.len()
        }
        // One async block, so one future type and one cell layout for every step.
        fn spawn_step(step: Step) -> crate::JoinHandle<()> {
            crate::spawn(async move {
                match step {
                    Step::Chain(0, done) => done.send(cached(true)).unwrap(),
                    Step::Chain(left, done) => drop(spawn_step(Step::Chain(left - 1, done))),
                    Step::Hold => {}
                }
            })
        }
        let rt = Runtime::builder()
            .worker_threads(1)
            .stall_threshold(None)
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        drop(rt.spawn(async move { drop(spawn_step(Step::Chain(200, tx))) }));
        let kept = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        if !CellCache::ENABLED {
            assert_eq!(kept, 0);
            return;
        }
        assert!(kept > 0, "the worker kept no freed cell");
        let (before, left) = rt
            .block_on(rt.spawn(async {
                let before = cached(true);
                // Not run before this poll returns (one worker): all alive at once.
                let held: Vec<_> = (0..crate::task::cell_cache::MAX_CELLS)
                    .map(|_| spawn_step(Step::Hold))
                    .collect();
                let left = cached(false);
                drop(held);
                (before, left)
            }))
            .unwrap();
        assert!(before > 0, "the worker kept no freed cell");
        assert_eq!(
            left, 0,
            "spawns left {left} of {before} cached cells unused"
        );
    }

    /// Tasks freed on a worker leave their reference to the registry with it
    /// (`keep_registry_ref`) instead of writing the shared count, the worker's next spawns
    /// take those references (`registry_ref`), and a runtime dropped afterwards still frees
    /// its registry: the worker gives them back when it exits.
    #[test]
    fn freed_tasks_leave_their_registry_reference_with_the_worker() {
        const TASKS: usize = 100;
        let rt = Runtime::builder()
            .worker_threads(1)
            .stall_threshold(None)
            .build()
            .unwrap();
        let registry = Arc::downgrade(rt.registry());
        let base = registry.strong_count();
        // Hold the only worker, so that every closure below is freed there: their handles
        // are dropped before any of them runs, so the worker drops their last reference.
        let (release, held) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let blocker = rt.submit(move || {
            started_tx.send(()).unwrap();
            held.recv_timeout(Duration::from_secs(60)).unwrap();
        });
        started.recv_timeout(Duration::from_secs(60)).unwrap();
        for _ in 0..TASKS {
            drop(rt.submit(|| ()));
        }
        release.send(()).unwrap();
        blocker.join().unwrap();
        rt.wait_idle();
        // A closure run after them on the same worker: by then it has freed all of them.
        rt.submit(|| ()).join().unwrap();
        assert!(
            registry.strong_count() >= base + TASKS,
            "the worker kept {} references, not the {TASKS} its freed tasks gave back",
            registry.strong_count().saturating_sub(base)
        );
        // Spawns on the worker take the kept references rather than new ones.
        let before = registry.strong_count();
        let children = rt.block_on(rt.spawn(async {
            let handles: Vec<_> = (0..TASKS / 2).map(|_| crate::spawn(async {})).collect();
            for handle in handles {
                handle.await.unwrap();
            }
        }));
        children.unwrap();
        assert!(
            registry.strong_count() <= before + 1,
            "spawns on the worker raised the count from {before} to {}",
            registry.strong_count()
        );
        drop(rt);
        assert_eq!(
            registry.strong_count(),
            0,
            "the registry outlived its runtime: a kept reference was never given back"
        );
    }
}
