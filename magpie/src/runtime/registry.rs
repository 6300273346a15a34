//! The state one runtime's workers share: their queues' steal ends, the inject queues, the
//! idle coordinator, the live-task list, the timers, the blocking pool, the per-worker
//! counters and the shutdown flag.

use std::cell::Cell;
use std::ptr::{self, NonNull};

use crate::join::job::{JobHeader, JobRef, StackJob};
use crate::join::latch::{CrossLatch, Latch, LockLatch};
use crate::queue::chase_lev::Stealer;
use crate::queue::inject::Inject;
use crate::queue::lifo::LifoSlot;
use crate::queue::linked_inject::LinkedInject;
use crate::queue::local;
use crate::sleep::Sleep;
use crate::stats::trace::TraceBuffer;
use crate::stats::{add_always, bump, bump_completed, WorkerCounters};
use crate::sync::atomic::*;
use crate::sync::thread::thread_local;
use crate::sync::{AtomicBool, AtomicUsize, StatAtomicU64 as AtomicU64};
use crate::task::block::{Batch, BlockSpares};
use crate::task::notified::{new_detached_task_in, new_task_in, Notified, Schedule};
use crate::task::owned::OwnedTasks;
use crate::task::raw::{Header, Identity, Origin, RawTask};
use crate::task::{Id, JoinHandle};
use crate::time::driver::{Driver, Rearm};
use crate::util::unwind;
use crate::util::CachePadded;
use std::sync::Arc;
use std::time::Duration;

/// The longest a thread that turns the drivers without holding the role sleeps while
/// sources are registered and nobody holds it (`Registry::driving_timeout`): the
/// latency of readiness then.
const UNHELD_IO_POLL: Duration = Duration::from_millis(1);

/// The shortest such sleep, for a deadline another thread is about to fire.
const UNHELD_MIN_WAIT: Duration = Duration::from_micros(50);

use super::blocking::BlockingPool;
use super::compensation::Compensation;
use super::idle_wait::IdleWait;
use super::task_hooks::TaskHooks;
use super::topology::Groups;
use super::worker::WorkerThread;

/// A task of this runtime, as its queues hold it.
pub(crate) type Task = Notified<Arc<Registry>>;

/// What [`Registry::visible_tasks`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VisibleTasks {
    /// No task queue held a task.
    None,
    /// Only LIFO slots held tasks: each is its owner's next task, filled during a poll that
    /// is still running or has just returned.
    LifoOnly,
    /// A ring, a mailbox or the inject queue held a task.
    Queued,
}

/// The parts of one worker's task queues that other threads reach.
#[derive(Debug)]
pub(crate) struct TaskSlots {
    /// The LIFO slot: the task this worker woke or spawned last, run next. Owner: `swap` to
    /// take (thieves may race it), plain store to fill an empty slot (only the owner fills).
    /// Thieves take a task that sits here while the owner is busy (see `worker/tasks.rs`,
    /// "the stranded LIFO task").
    pub(crate) lifo: LifoSlot<Header>,
    /// The steal end of the worker's ring.
    pub(crate) ring: local::Steal<Header>,
    /// Tasks submitted to this worker by `submit_to`, from any thread. The owner drains it;
    /// thieves may take from it too.
    pub(crate) mailbox: Inject<NonNull<Header>>,
    /// Set while the worker is inside `block_in_place`: `submit_to` it goes to the inject
    /// queue instead of its mailbox. A hint, written and read Relaxed: a submission that
    /// misses it lands in the mailbox, which thieves take from (`worker/block.rs`).
    pub(crate) blocking: AtomicBool,
}

thread_local! {
    /// The task this thread is cancelling as a spawn refused before its hooks ran
    /// (`refuse_quietly`), whose terminate hook must not run either; its address, or 0.
    static REFUSED: Cell<usize> = const { Cell::new(0) };
}

/// Cancels `task`, a spawn refused before its spawn hook ran, without its terminate hook.
/// Only this task's hook is skipped: its future's destructor (user code, run here) may
/// complete other tasks, whose hooks run as usual.
#[cold]
fn refuse_quietly(task: Task) {
    let address = task.raw().as_ptr().as_ptr() as usize;
    // `try_with`: a spawn from another thread-local's destructor finds this one gone; the
    // hook then runs, as for any refused spawn.
    let outer = REFUSED.try_with(|refused| refused.replace(address)).ok();
    task.shutdown();
    if let Some(outer) = outer {
        let _ = REFUSED.try_with(|refused| refused.set(outer));
    }
}

/// Whether `task` is the one `refuse_quietly` is cancelling on this thread.
fn is_refused_quietly(task: RawTask) -> bool {
    let address = task.as_ptr().as_ptr() as usize;
    REFUSED
        .try_with(|refused| refused.get() == address)
        .unwrap_or(false)
}

/// Shared by every worker of a runtime and by its `Runtime` handle.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) stealers: Box<[Stealer<JobHeader>]>,
    /// Jobs from threads outside the pool (`install`, `join` called from outside).
    pub(crate) inject: Inject<JobRef>,
    /// Tasks from threads outside the pool, and overflow from full rings. Pushes take no
    /// lock (`queue/linked_inject.rs`).
    pub(crate) task_inject: LinkedInject<Header>,
    /// Per worker.
    pub(crate) task_slots: Box<[CachePadded<TaskSlots>]>,
    pub(crate) sleep: Sleep,
    /// Every live task, for shutdown.
    pub(crate) owned: OwnedTasks,
    /// Freed blocks of batch cells, kept for the next `submit_batch` (`task/block.rs`).
    block_spares: BlockSpares,
    pub(crate) timers: Driver,
    /// The I/O driver; its holder is the holder of the timers' driver role
    /// (`worker/idle.rs`, ARCHITECTURE.md "I/O on the workers"). Under shuttle, a model of
    /// it (`io/fake_driver.rs`); none under loom.
    #[cfg(not(loom))]
    pub(crate) io: crate::io::IoDriver,
    pub(crate) blocking: BlockingPool,
    /// Each worker's counters; the worker holds a second handle to its own.
    pub(crate) counters: Box<[Arc<CachePadded<WorkerCounters>>]>,
    /// When the runtime was built: the zero of the workers' busy and idle times.
    pub(crate) started: std::time::Instant,
    /// Threads in `Runtime::wait_idle`.
    pub(crate) idle_wait: IdleWait,
    /// Seeds the two random choices of `spawn_balanced` on threads outside the pool.
    balance_seed: AtomicUsize,
    /// The ordinary workers, `0..ordinary` (`Builder::max_workers`, else the worker
    /// threads): what `Runtime::num_workers` counts and the parallel iterators split for.
    /// The compensation slots come after them (`compensation.rs`).
    ordinary: usize,
    /// Ordinary workers `0..active` take work; the others are parked
    /// (`Runtime::set_active_workers`). Read by every ordinary worker once per unit of work,
    /// written rarely: a line of its own.
    active: CachePadded<AtomicUsize>,
    /// The compensation slots `ordinary..` and how many of them are switched on.
    pub(super) compensation: Compensation,
    /// The steal groups.
    pub(crate) groups: Groups,
    /// One event ring per worker when tracing is on.
    pub(crate) traces: Option<Box<[Arc<TraceBuffer>]>>,
    /// Whether workers time each poll for the histogram.
    pub(crate) poll_time_histogram: bool,
    /// Whether every task keeps counters for the live-task dump, and workers time each poll
    /// (`Builder::task_insight`).
    pub(crate) task_insight: bool,
    /// The task hooks and the unhandled-panic response (shared with the blocking tasks'
    /// scheduler, which calls the hooks too).
    pub(crate) hooks: Arc<TaskHooks>,
    /// Whether `hooks` has a spawn or terminate hook: read on every spawn and completion, so
    /// kept here, beside the other flags, rather than behind the `Arc`.
    task_hooks_set: bool,
    /// The longest a worker parks without a wakeup: `None` (no limit) unless
    /// `Builder::park_safety_net` set one, and always `None` under loom, where a timed park
    /// does not block (see `sync::time`).
    pub(crate) park_safety_net: Option<std::time::Duration>,
    /// The threads waiting in `block_on` inside `block_in_place` (`worker/block.rs`).
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) blocked_waiters: super::worker::BlockedWaiters,
    /// Tasks queued from outside the pool (spawns and wakes).
    pub(crate) remote_schedules: AtomicU64,
    /// Tasks spawned from outside the pool.
    pub(crate) tasks_spawned_remote: AtomicU64,
    /// Set once, by `Runtime::drop`; workers exit when they see it and find no work.
    terminating: AtomicBool,
    /// Workers that have not exited yet; the last one out empties the task inject queue.
    workers_alive: AtomicUsize,
    /// Distinguishes runtimes in thread names and debug output.
    pub(crate) id: usize,
    /// The stall monitor's state (`monitor.rs`); `None` with stall detection off.
    pub(crate) monitor: Option<super::monitor::Monitor>,
}

// SAFETY: the raw task pointers in the queues stand for `Notified`s, which are `Send`;
// everything else is `Sync` on its own.
unsafe impl Send for Registry {}
// SAFETY: as above.
unsafe impl Sync for Registry {}

/// The choices of the builder that the registry keeps.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) active: usize,
    /// Compensation slots (`Builder::max_compensation_workers`): the last this many of the
    /// workers.
    pub(crate) compensation: usize,
    pub(crate) groups: Groups,
    /// Events per worker ring, if tracing is on.
    pub(crate) trace_capacity: Option<usize>,
    pub(crate) poll_time_histogram: bool,
    pub(crate) task_insight: bool,
    pub(crate) hooks: Arc<TaskHooks>,
    pub(crate) barrier: crate::sync::barrier::Barrier,
    pub(crate) park_safety_net: Option<std::time::Duration>,
    /// The CPUs the process may use, as the wake rules count them (`Builder::assume_cpus`).
    pub(crate) cpus: usize,
    /// Rule 5 of the parallel iterators' bridge (`Builder::split_on_demand`).
    pub(crate) split_on_demand: bool,
    /// Whether the parallel iterators' bridge offers every split (`Builder::offer_every_split`).
    pub(crate) offer_every_split: bool,
    /// `Builder::starving_always`, a test's.
    #[cfg(test)]
    pub(crate) starving_always: bool,
    /// The stall threshold and the `on_stall` hook, if stall detection is on.
    pub(crate) stall: Option<(std::time::Duration, Option<super::stall::StallHook>)>,
}

impl Registry {
    pub(crate) fn new(
        stealers: Vec<Stealer<JobHeader>>,
        rings: Vec<local::Steal<Header>>,
        blocking: BlockingPool,
        id: usize,
        options: Options,
        #[cfg(not(loom))] io: crate::io::IoDriver,
    ) -> Registry {
        // Every slot, ordinary and compensation: the arrays below are fixed-size.
        let n = stealers.len();
        let ordinary = n - options.compensation;
        #[cfg(not(loom))]
        let driver_unpark: Option<crate::sleep::DriverUnpark> = {
            let handle = io.handle().clone();
            Some(Box::new(move || {
                // A failed wake (mio's eventfd write fails only on a descriptor that is
                // gone) leaves the holder in `epoll_wait` until its next event or timer
                // deadline.
                let _ = handle.unpark();
            }))
        };
        #[cfg(loom)]
        let driver_unpark = None;
        let traced = options.trace_capacity.is_some();
        let monitor = options
            .stall
            .map(|(threshold, hook)| super::monitor::Monitor::new(threshold, hook, traced));
        let mut sleep = Sleep::with_driver(n, driver_unpark, options.barrier);
        sleep.set_cpus(options.cpus);
        sleep.set_split_on_demand(options.split_on_demand);
        sleep.set_offer_every_split(options.offer_every_split);
        #[cfg(test)]
        sleep.set_starving_always(options.starving_always);
        if let Some(monitor) = &monitor {
            sleep.set_bell(monitor.bell.clone());
        }
        Registry {
            stealers: stealers.into_boxed_slice(),
            inject: Inject::new(),
            task_inject: LinkedInject::new(),
            task_slots: rings
                .into_iter()
                .map(|ring| {
                    CachePadded::new(TaskSlots {
                        lifo: LifoSlot::new(),
                        ring,
                        mailbox: Inject::new(),
                        blocking: AtomicBool::new(false),
                    })
                })
                .collect(),
            sleep,
            owned: OwnedTasks::new(n),
            block_spares: BlockSpares::default(),
            timers: Driver::new(),
            #[cfg(not(loom))]
            io,
            blocking,
            counters: (0..n)
                .map(|_| Arc::new(CachePadded::new(WorkerCounters::default())))
                .collect(),
            started: crate::sync::time::now(),
            idle_wait: IdleWait::default(),
            balance_seed: AtomicUsize::new(0),
            ordinary,
            active: CachePadded::new(AtomicUsize::new(options.active)),
            compensation: Compensation::new(ordinary, options.compensation),
            groups: options.groups,
            traces: options.trace_capacity.map(|capacity| {
                (0..n)
                    .map(|_| Arc::new(TraceBuffer::new(capacity)))
                    .collect()
            }),
            poll_time_histogram: options.poll_time_histogram,
            task_insight: options.task_insight,
            task_hooks_set: options.hooks.has_hooks(),
            hooks: options.hooks,
            park_safety_net: options.park_safety_net,
            #[cfg(not(any(loom, shuttle)))]
            blocked_waiters: super::worker::BlockedWaiters::default(),
            remote_schedules: AtomicU64::new(0),
            tasks_spawned_remote: AtomicU64::new(0),
            terminating: AtomicBool::new(false),
            workers_alive: AtomicUsize::new(n),
            id,
            monitor,
        }
    }

    /// Nanoseconds since the runtime was built.
    pub(crate) fn uptime_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The ordinary workers, active or not: `Runtime::num_workers`, the range of
    /// `set_active_workers` and `submit_to`, and what the parallel iterators split for.
    /// Compensation slots are not counted (see [`Registry::num_slots`]).
    pub(crate) fn num_workers(&self) -> usize {
        self.ordinary
    }

    /// Every worker slot: the ordinary workers, then the compensation slots. The length of
    /// every per-worker array (queues, counters, parkers, trace rings).
    pub(crate) fn num_slots(&self) -> usize {
        self.stealers.len()
    }

    /// Whether `worker` is a compensation slot (`compensation.rs`).
    pub(crate) fn is_compensation(&self, worker: usize) -> bool {
        worker >= self.ordinary
    }

    /// Ordinary workers taking work now: `0..active_workers()`.
    #[inline]
    pub(crate) fn active_workers(&self) -> usize {
        // Relaxed: a worker that reads a stale value retires (or resumes) one unit of work
        // later; `set_active_workers` wakes every worker whose side changed.
        self.active.load(Relaxed)
    }

    /// Whether worker slot `worker` is switched on: an ordinary worker below the active
    /// count, or a compensation slot below the compensation on-count. Each slot reads only
    /// its own kind's word, so ordinary workers pay what they paid before compensation
    /// existed (the compare with `ordinary` aside).
    #[inline]
    pub(crate) fn is_switched_on(&self, worker: usize) -> bool {
        let (word, rank) = self.switch_of(worker);
        // Relaxed: see `active_workers` and `Compensation::on`.
        rank < word.load(Relaxed)
    }

    /// The word that switches slot `worker` on and off, and the slot's rank against it:
    /// the slot is on while its rank is below the word (`is_switched_on`). A worker looks
    /// them up once and reads only the word in its loop.
    pub(crate) fn switch_of(&self, worker: usize) -> (&AtomicUsize, usize) {
        match worker.checked_sub(self.ordinary) {
            None => (&self.active, worker),
            Some(k) => (self.compensation.on_word(), k),
        }
    }

    /// Sets the active worker count (checked by the caller) and wakes every worker whose
    /// side changed: those leaving retire (their queues go to the inject queue), those
    /// joining resume.
    pub(crate) fn set_active_workers(&self, n: usize) {
        // Relaxed: see `active_workers`; the wakes below carry the news.
        let old = self.active.swap(n, Relaxed);
        for worker in n.min(old)..n.max(old) {
            self.sleep.wake_worker(worker);
        }
    }

    /// Whether any job queue of this runtime holds a job (possibly stale: see the sleep
    /// README for why the sleepers' recheck is still sound).
    pub(crate) fn has_visible_jobs(&self) -> bool {
        !self.inject.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Where tasks are visible in this runtime's task queues (possibly stale, as above):
    /// anywhere but the LIFO slots, only in LIFO slots, or nowhere. A parking worker's
    /// recheck (R5) may leave tasks seen only in LIFO slots to a watcher (R7).
    pub(crate) fn visible_tasks(&self) -> VisibleTasks {
        if !self.task_inject.is_empty() {
            return VisibleTasks::Queued;
        }
        let mut seen = VisibleTasks::None;
        for slots in self.task_slots.iter() {
            if !slots.ring.is_empty() || !slots.mailbox.is_empty() {
                return VisibleTasks::Queued;
            }
            // Relaxed: a hint, like the lengths above; the heavy barrier before the
            // recheck orders it (sleep/README.md, R5).
            if !slots.lifo.is_empty() {
                seen = VisibleTasks::LifoOnly;
            }
        }
        seen
    }

    /// Whether any task queue of this runtime holds a task (possibly stale, as above).
    pub(crate) fn has_visible_tasks(&self) -> bool {
        self.visible_tasks() != VisibleTasks::None
    }

    pub(crate) fn is_terminating(&self) -> bool {
        // Acquire: pairs with the Release store in `terminate`.
        self.terminating.load(Acquire)
    }

    /// Tells every worker to exit once it runs out of work.
    pub(crate) fn terminate(&self) {
        // Release: pairs with the Acquire load in `is_terminating`.
        self.terminating.store(true, Release);
        for worker in 0..self.num_slots() {
            self.sleep.wake_worker(worker);
        }
        // The ring is kept until the monitor takes it, and it rereads the flag then.
        if let Some(monitor) = &self.monitor {
            monitor.bell.ring();
        }
    }

    /// A worker is leaving its main loop for good; this thread is still `worker`'s, so
    /// jobs can run on it. Returns whether it is the last worker out (for `worker_exited`).
    ///
    /// The last one out closes the job inject queue and runs the jobs still in it: work
    /// injected from outside (a blocking closure's `join`, `scope` or `install`) after the
    /// other workers had stopped looking. Its caller waits for it, so it must run; from now
    /// on `inject` refuses jobs, and their callers panic (`refused_after_shutdown`) instead
    /// of waiting forever. Such a job may fork: it runs on this worker, whose deque is empty
    /// and which nobody steals from any more, so everything it pushes comes back to it.
    pub(crate) fn worker_exiting(&self, worker: &WorkerThread) -> bool {
        // AcqRel: the last one out sees every other worker's pushes (each decrements after
        // its last push).
        if self.workers_alive.fetch_sub(1, AcqRel) != 1 {
            return false;
        }
        // The lock inside `close` orders every push before it, and refuses every one after.
        for job in self.inject.close() {
            worker.execute(job);
        }
        true
    }

    /// A worker thread has exited (it no longer runs as a worker). The last one (`last`,
    /// from `worker_exiting`) closes the task inject queue and the mailboxes, and cancels
    /// what is left in them (tasks woken from outside while the workers wound down).
    pub(crate) fn worker_exited(&self, last: bool) {
        if last {
            // `close` takes every push that landed and refuses every later one (they shut
            // their task down themselves: `push_remote`, `inject_tasks`).
            for ptr in self.task_inject.close() {
                // SAFETY: the queue held this Notified (see `push_remote`).
                unsafe { Task::from_header(ptr) }.shutdown();
            }
            for slots in self.task_slots.iter() {
                for ptr in slots.mailbox.close() {
                    // SAFETY: as above (see `spawn_to`).
                    unsafe { Task::from_header(ptr) }.shutdown();
                }
            }
        }
    }

    /// Cancels every live task (shutdown, step 1): each idle task's future is dropped here;
    /// a running one is dropped by its worker when the poll returns, and one queued while
    /// it kept `RUNNING` (task/state.rs, "Woken while running") by whoever takes that
    /// `Notified` from its queue; other queued `Notified`s become no-ops. From now on spawns are refused (they resolve to cancelled).
    pub(crate) fn shutdown_tasks(&self) {
        for task in self.owned.close_and_take_all() {
            // SAFETY: `close_and_take_all` handed us a reference to each task.
            unsafe { task.shutdown() }
        }
    }

    /// Queues a job from outside the pool and wakes a worker for it. Gives the job back if
    /// every worker has exited (the last one closed the queue, see `worker_exiting`): the
    /// caller still owns it, and reports [`refused_after_shutdown`].
    pub(crate) fn inject(&self, job: JobRef) -> Result<(), JobRef> {
        self.inject.push(job)?;
        self.sleep.notify_work_outside();
        Ok(())
    }

    /// Queues the job of a blocking entry from outside the pool (`inject_and_wait`): as
    /// `inject`, but into a parked pool it wakes two workers, the job's runner and a thief
    /// for its first fork (`Sleep::notify_entry_outside` says why).
    fn inject_entry(&self, job: JobRef) -> Result<(), JobRef> {
        self.inject.push(job)?;
        self.sleep.notify_entry_outside();
        Ok(())
    }

    /// Queues a task from a thread that is not one of this runtime's workers.
    pub(crate) fn push_remote(&self, task: Task) {
        if cfg!(not(magpie_no_stats)) {
            // Relaxed: a statistic. A shared RMW, but the push right after makes two more
            // (its count and its CAS).
            self.remote_schedules.fetch_add(1, Relaxed);
        }
        self.push_inject(task);
    }

    /// Queues `task` on the inject queue and notifies (R1), or shuts it down if the queue
    /// is closed.
    fn push_inject(&self, task: Task) {
        // SAFETY: the Notified's reference keeps the task allocated while it is queued, and
        // the task has no other Notified, so it is in no other queue (task state 1); its
        // link is the queue's (`LinkedInject` invariant 1).
        match unsafe { self.task_inject.push(task.into_header()) } {
            // A negative control for the shuttle scenarios (`--cfg magpie_shuttle_broken`):
            // a remote push that wakes nobody, which `shuttle_outside_wake_into_parked_pool`
            // must report as a deadlock.
            Ok(_) if cfg!(magpie_shuttle_broken) => {}
            // The push counted the task with a SeqCst RMW (`LinkedInject::push`), and read
            // how many were queued before it.
            Ok(before) => self.sleep.notify_task_after_seqcst_push(before),
            // SAFETY: the refused pointer is the Notified we just gave up.
            Err(ptr) => unsafe { Task::from_header(ptr) }.shutdown(),
        }
    }

    /// Runs `f` on this runtime's blocking pool, with this runtime as the current one for the
    /// free functions `f` calls (`magpie::spawn`, `join`, timers), as on its workers. Fails
    /// if no blocking thread runs and none can start (`f` is dropped then).
    pub(crate) fn spawn_blocking<F, T>(
        self: &Arc<Registry>,
        f: F,
        origin: Origin,
    ) -> std::io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // Weak: a closure still queued must not keep its runtime alive. If the runtime is
        // gone by the time it runs, the free functions fall back as on any other thread.
        let registry = Arc::downgrade(self);
        // Blocking tasks are not in the dump: no counters, unless named (for the hooks).
        let identity = Identity::new(origin, 0, false);
        // The hooks only when there are some: an `Arc` clone per spawn otherwise for nothing.
        let hooks = self.task_hooks_set.then(|| self.hooks.clone());
        self.blocking.spawn(
            move || {
                let _enter = registry.upgrade().map(|r| super::context::enter(&r));
                f()
            },
            identity,
            hooks,
        )
    }

    /// Spawns `future` as a task of this runtime.
    pub(crate) fn spawn<F>(self: &Arc<Registry>, future: F, origin: Origin) -> JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // One look at the thread-local for both the count and the queue.
        self.with_own_worker(|worker| {
            let (task, handle) = self.new_bound_task(future, worker, origin, None);
            self.queue_new(task, worker);
            handle
        })
    }

    /// [`spawn`](Self::spawn) without a handle (`Runtime::execute`).
    pub(crate) fn execute<F>(self: &Arc<Registry>, future: F, origin: Origin)
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.with_own_worker(|worker| {
            let task = self.new_bound_detached_task(future, worker, origin, None);
            self.queue_new(task, worker);
        })
    }

    /// Queues a new task (if the runtime took it) where a spawn from `worker` goes: that
    /// worker's own queues, or from outside the pool the inject queue.
    #[inline]
    fn queue_new(&self, task: Option<Task>, worker: Option<&WorkerThread>) {
        if let Some(task) = task {
            match worker {
                Some(worker) => worker.schedule_local(task, false),
                None => self.push_remote(task),
            }
        }
    }

    /// Spawns every future of `futures` as a task with the caller's location (`Runtime::
    /// submit_batch`), each queued on the inject queue, with its notification, as soon as it
    /// is built. From a worker of this runtime too: a batch is work for everyone, not for
    /// this worker's ring.
    ///
    /// Why one at a time, not in chunks with one push and one notification each (as this
    /// did until the review of issue 19): the caller's iterator is user code, and a task
    /// built and held back while it runs is live (`wait_idle` waits for it) but queued
    /// nowhere. An iterator that waits for one of the batch's earlier closures (a channel
    /// the closures feed), or for a `wait_idle` on another thread, then waited for good
    /// (tests/wide_pools_and_batches.rs). No chunking can avoid that, since any task held
    /// back is held across a call of the iterator. The pushes cost the submitter about 40 ns
    /// a task more (BENCHMARKS.md, "`submit_batch` one task at a time"); the notifications
    /// are loads while a worker searches or runs.
    pub(crate) fn spawn_batch<F>(
        self: &Arc<Registry>,
        futures: impl IntoIterator<Item = F>,
        location: &'static std::panic::Location<'static>,
    ) -> Vec<JoinHandle<F::Output>>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let futures = futures.into_iter();
        let mut handles = Vec::with_capacity(futures.size_hint().0);
        self.queue_batch(futures, location, |future, worker, origin, batch| {
            let (task, handle) = self.new_bound_task(future, worker, origin, batch);
            handles.push(handle);
            task
        });
        handles
    }

    /// [`spawn_batch`](Self::spawn_batch) without handles (`Runtime::execute_batch`).
    pub(crate) fn execute_batch<F>(
        self: &Arc<Registry>,
        futures: impl IntoIterator<Item = F>,
        location: &'static std::panic::Location<'static>,
    ) where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.queue_batch(
            futures.into_iter(),
            location,
            |future, worker, origin, batch| {
                self.new_bound_detached_task(future, worker, origin, batch)
            },
        );
    }

    /// The loop of a batch: makes a task of each future with `make` (which binds it, or
    /// shuts it down and returns `None` if the runtime is closing), in shared blocks, and
    /// queues it with its notification before asking `futures` for the next.
    fn queue_batch<F>(
        self: &Arc<Registry>,
        mut futures: impl Iterator<Item = F>,
        location: &'static std::panic::Location<'static>,
        mut make: impl FnMut(
            F,
            Option<&WorkerThread>,
            Origin,
            Option<(&mut Batch<'_, F, Arc<Registry>>, usize)>,
        ) -> Option<Task>,
    ) where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.with_own_worker(|worker| {
            // The batch's cells share blocks (`task/block.rs`), one allocation for up to 64
            // of them; the unused rest of the last block is given back when this drops.
            let mut cells = Batch::new(Some(&self.block_spares));
            let mut i = 0;
            while let Some(future) = futures.next() {
                let origin = Origin {
                    location,
                    name: None,
                };
                // This task and the ones the iterator still promises.
                let hint = futures.size_hint().0.saturating_add(1);
                let batch = cells.as_mut().map(|cells| (cells, hint));
                if let Some(task) = make(future, worker, origin, batch) {
                    // Not counted as a remote schedule: a batch's tasks count as spawns
                    // only, from inside the pool or out.
                    self.push_inject(task);
                    // A worker for each of the batch's first tasks, woken now rather than
                    // one after another (`Sleep::notify_batch_task`).
                    self.sleep.notify_batch_task(i);
                }
                i += 1;
            }
        })
    }

    /// Queues a new task on the less loaded of two workers picked at random (the "power of
    /// two choices": nearly as even as asking every worker, at the cost of two). A worker's
    /// load is the length of its ring plus its mailbox plus its LIFO slot, each read without
    /// a lock.
    pub(crate) fn spawn_balanced<F>(
        self: &Arc<Registry>,
        future: F,
        origin: Origin,
    ) -> JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let n = self.active_workers();
        let worker = if n == 1 {
            0
        } else {
            // A Weyl sequence is random enough to pick two workers and needs no state per
            // thread; the odd multiplier visits every residue.
            let x = self
                .balance_seed
                .fetch_add(1, Relaxed)
                .wrapping_mul(0x9e37_79b9);
            let a = (x >> 8) % n;
            let b = (a + 1 + (x >> 20) % (n - 1)) % n;
            if self.task_load(b) < self.task_load(a) {
                b
            } else {
                a
            }
        };
        self.spawn_to(worker, future, origin)
    }

    /// The tasks waiting at `worker`: a gauge, read without locks.
    fn task_load(&self, worker: usize) -> usize {
        let slots = &self.task_slots[worker];
        slots.ring.len() + slots.mailbox.len() + usize::from(!slots.lifo.is_empty())
    }

    /// Spawns `future` onto worker `worker`'s mailbox (`submit_to`).
    pub(crate) fn spawn_to<F>(
        self: &Arc<Registry>,
        worker: usize,
        future: F,
        origin: Origin,
    ) -> JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (task, handle) =
            self.with_own_worker(|spawner| self.new_bound_task(future, spawner, origin, None));
        let Some(task) = task else {
            return handle;
        };
        // Relaxed: `blocking` is a hint (see its docs).
        if worker >= self.active_workers() || self.task_slots[worker].blocking.load(Relaxed) {
            // Parked by `set_active_workers`, or inside `block_in_place`: anyone may run it.
            // (Should the worker retire just after this check, it forwards its mailbox to
            // the inject queue. Should it enter `block_in_place`, its hand-off does, or, if
            // our push lands after that, a thief takes the task from the mailbox: the
            // `notify_task` below wakes one if nobody searches.)
            self.push_remote(task);
            return handle;
        }
        match self.task_slots[worker].mailbox.push(task.into_header()) {
            Ok(_) => {
                // The owner may be asleep, and only it drains its mailbox promptly.
                self.sleep.wake_worker(worker);
                self.sleep.notify_task_outside();
            }
            // SAFETY: the refused pointer is the Notified we just gave up.
            Err(ptr) => unsafe { Task::from_header(ptr) }.shutdown(),
        }
        handle
    }

    /// Makes a task of `future` (in `batch`'s block, if given), calls the spawn hook, and
    /// links the task into the live-task list. The `Notified` is `None` when the runtime is
    /// shutting down: the future has then been dropped here and the handle resolves to
    /// cancelled.
    fn new_bound_task<F>(
        self: &Arc<Registry>,
        future: F,
        spawner: Option<&WorkerThread>,
        origin: Origin,
        batch: Option<(&mut Batch<'_, F, Arc<Registry>>, usize)>,
    ) -> (Option<Task>, JoinHandle<F::Output>)
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (scheduler, identity) = self.new_task_parts(spawner, origin);
        let (task, handle) = new_task_in(future, scheduler, identity, batch);
        (self.bind_new(task), handle)
    }

    /// [`new_bound_task`](Self::new_bound_task) for a task without a `JoinHandle`
    /// (`Runtime::execute`).
    fn new_bound_detached_task<F>(
        self: &Arc<Registry>,
        future: F,
        spawner: Option<&WorkerThread>,
        origin: Origin,
        batch: Option<(&mut Batch<'_, F, Arc<Registry>>, usize)>,
    ) -> Option<Task>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (scheduler, identity) = self.new_task_parts(spawner, origin);
        self.bind_new(new_detached_task_in(future, scheduler, identity, batch))
    }

    /// What a new task carries besides its future: its scheduler (a reference to this
    /// runtime) and its identity. Counts the spawn.
    #[inline]
    fn new_task_parts(
        self: &Arc<Registry>,
        spawner: Option<&WorkerThread>,
        origin: Origin,
    ) -> (Arc<Registry>, Identity) {
        self.count_spawn(spawner);
        // The spawn time, for tasks that keep counters (`Identity::new`): a worker's last
        // clock reading (see ARCHITECTURE.md, "Task identity and the live-task dump"); from
        // elsewhere, a reading.
        // `--cfg magpie_no_insight`: the measurement build without task identity (every
        // id 1, no counters), for `scripts/insight_overhead.sh`.
        let insight = (self.task_insight || origin.name.is_some()) && cfg!(not(magpie_no_insight));
        let spawned_ns = match spawner {
            _ if !insight => 0,
            Some(worker) => worker.clock_ns(),
            None => self.uptime_ns(),
        };
        let id = match spawner {
            _ if cfg!(magpie_no_insight) => Id::MEASUREMENT,
            Some(worker) => worker.next_task_id(),
            None => Id::next(),
        };
        let identity = Identity::with_id(id, origin, spawned_ns, insight);
        // A reference a freed task gave back to the spawning worker if it has one, sparing
        // the shared count a write (`WorkerThread::registry_ref`).
        let scheduler = match spawner {
            Some(worker) => worker.registry_ref(),
            None => self.clone(),
        };
        (scheduler, identity)
    }

    /// Calls the spawn hook for a new task and links it into the live-task list. `None` when
    /// the runtime is shutting down: the task was shut down here (its future dropped, any
    /// handle resolving to cancelled).
    #[inline]
    fn bind_new(&self, task: Task) -> Option<Task> {
        if self.task_hooks_set {
            if self.owned.is_closed() {
                // Refused before any hook ran: the runtime shuts its tasks down. Neither
                // hook runs for such a spawn. A terminate hook that spawns (a supervisor
                // respawning what ends) ran again for its own refused spawn, and again,
                // until the stack overflowed (found in the review of issue 19). A spawn
                // refused after its spawn hook ran (the close came in between) gets its
                // terminate hook once: a spawn from that hook finds the list closed here.
                refuse_quietly(task);
                return None;
            }
            // SAFETY: the Notified holds a reference to the task.
            self.hooks.spawned(unsafe { task.raw().header() });
        }
        // SAFETY: the new task's Notified holds a reference; it was never linked.
        if unsafe { self.owned.bind(task.raw()) } {
            Some(task)
        } else {
            task.shutdown();
            None
        }
    }

    /// Counts a spawn: on the spawning worker (one of ours), or as a remote spawn.
    #[inline]
    fn count_spawn(&self, spawner: Option<&WorkerThread>) {
        match spawner {
            Some(worker) => bump(&self.counters[worker.index()].tasks_spawned),
            None if cfg!(not(magpie_no_stats)) => {
                // Relaxed: a statistic.
                self.tasks_spawned_remote.fetch_add(1, Relaxed);
            }
            None => {}
        }
    }

    /// Calls `f` with the worker running on this thread if it is one of this registry's,
    /// else with `None`.
    #[inline]
    fn with_own_worker<R>(&self, f: impl FnOnce(Option<&WorkerThread>) -> R) -> R {
        // SAFETY: a non-null current worker is live while its thread runs work, which
        // includes this whole call (the borrow does not escape `f`).
        let current = unsafe { WorkerThread::current().as_ref() };
        f(current.filter(|worker| ptr::eq(worker.registry(), self)))
    }

    /// Queues tasks (their `Notified` pointers) on the inject queue in one batch, cancelling
    /// them if it is closed (only after every worker has exited, so not in practice; it keeps
    /// every task accounted for). Wakes nobody: the caller decides.
    pub(crate) fn inject_tasks(&self, items: impl IntoIterator<Item = NonNull<Header>>) {
        // SAFETY: each pointer carries its task's one Notified (the caller's queue held it,
        // and gave it up), as in `push_remote`.
        if let Err(refused) = unsafe { self.task_inject.push_batch(items) } {
            for ptr in refused {
                // SAFETY: each pointer carries its Notified's reference (the caller's queue
                // held it).
                unsafe { Task::from_header(ptr) }.shutdown();
            }
        }
    }

    /// Queues a woken (or new) task: on the current worker's own queues if this thread is
    /// one of this runtime's workers, otherwise on the inject queue.
    #[inline]
    fn schedule_task(&self, task: Task, is_yield: bool) {
        self.with_own_worker(|worker| match worker {
            Some(worker) => worker.schedule_local(task, is_yield),
            None => self.push_remote(task),
        })
    }

    /// I/O sources registered with this runtime's driver (0 where there is none: the loom
    /// build).
    pub(crate) fn io_live(&self) -> usize {
        #[cfg(not(loom))]
        return self.io.live();
        #[cfg(loom)]
        return 0;
    }

    /// Whether something needs a worker to wait in the driver while the others sleep:
    /// a registered I/O source (readiness may come any time) or a filed timer.
    pub(crate) fn driver_needed(&self) -> bool {
        self.io_live() > 0 || self.timers.has_timers()
    }

    /// Called by a worker that does not hold the driver role and is busy, after it held the
    /// role (it woke from a park in the driver and found work; it turned the driver at
    /// maintenance), and after a source registers: if nobody holds the role, something
    /// needs driving and a worker outside `join` is parked (on its futex, then, not in the
    /// driver), wakes one, which takes the role when it parks again. Returns whether it woke
    /// one. This is the driver hand-off of sleep/README.md ("The driver role").
    pub(crate) fn hand_off_driver(&self) -> bool {
        self.role_left_unheld() && self.sleep.has_parked_free() && self.sleep.wake_free_cold()
    }

    /// The first half of every hand-off: whether nobody holds the driver role while
    /// something needs driving (a registered source or a filed timer).
    fn role_left_unheld(&self) -> bool {
        // A negative control for the shuttle scenarios (`--cfg magpie_shuttle_broken`): no
        // hand-off at all, which `shuttle_driver_hand_off_to_parked_worker` must report (the
        // worker that could wait in the driver stays parked on its parker while the other
        // spins in a long poll, and a read waits for good).
        if cfg!(magpie_shuttle_broken) {
            return false;
        }
        // SeqCst: the release of the role (a SeqCst store), or the registration, comes
        // before the loads below and the caller's. Pairs with `register_parked`'s heavy
        // barrier: a parker sets its idle bit, then tries the role; either its `try_drive`
        // finds the role free, or the caller's load of its bit sees it. (D5's sleepers
        // publish themselves before the fence in `Driver::park_timeout` the same way.)
        fence(SeqCst);
        !self.timers.is_driven() && self.driver_needed()
    }

    /// [`Registry::hand_off_driver`] for a worker that enters `block_in_place` (it turns no
    /// drivers at maintenance until it returns) or is switched off, and for a new I/O
    /// source: with no free worker parked to take the role, it wakes one that turns the
    /// drivers without taking the role for its sleep ([`Registry::wake_to_drive`]), which
    /// then polls the sources. Not after a park or a maintenance turn: that would wake a
    /// worker inside `join` for every task the holder runs.
    pub(crate) fn hand_off_driver_to_anyone(&self) -> bool {
        self.role_left_unheld() && self.wake_to_drive()
    }

    /// Wakes someone to turn the drivers while nobody holds the role: a parked worker
    /// outside `join`, which takes the role when it parks again (D1); else a worker parked
    /// inside `join`; else the threads in `block_on` inside `block_in_place`. These last two
    /// never take the role for a sleep, but they sleep no longer than the drivers need and
    /// turn them when they wake ([`Registry::driving_timeout`]). Returns whether it woke
    /// somebody.
    pub(crate) fn wake_to_drive(&self) -> bool {
        if self.sleep.wake_free_cold() || self.sleep.wake_any_cold() {
            return true;
        }
        #[cfg(not(any(loom, shuttle)))]
        return self.blocked_waiters.wake_all();
        #[cfg(any(loom, shuttle))]
        return false;
    }

    /// How long a thread that turns the drivers but does not hold the role for its sleep (a
    /// worker parked inside `join`; a `block_on` inside `block_in_place`) may sleep: until
    /// the next timer's deadline, and, while nobody holds the role and sources are
    /// registered, no longer than [`UNHELD_IO_POLL`], since readiness wakes only the role's
    /// holder. `None` when nothing needs driving. Deadlines count even while somebody holds
    /// the role: the holder may leave it to run work, and then nobody else fires them (a
    /// hand-off wakes only a free worker: waking these for every one would cost a wake per
    /// task the holder runs). Not under loom or shuttle, whose models do not time sleeps.
    pub(crate) fn driving_timeout(&self) -> Option<Duration> {
        if cfg!(any(loom, shuttle)) {
            return None;
        }
        let timer = self
            .timers
            .park_timeout()
            // A deadline that is due but was not fired: another thread holds the role and
            // is about to. Not a spin while it does.
            .map(|t| t.max(UNHELD_MIN_WAIT));
        if self.io_live() > 0 && !self.timers.is_driven() {
            Some(timer.map_or(UNHELD_IO_POLL, |t| t.min(UNHELD_IO_POLL)))
        } else {
            timer
        }
    }

    /// Wakes whoever must see a timer filed earlier than the driver's current deadline.
    ///
    /// With the role held, that is its holder; with the role free, a parked worker outside
    /// `join`, which takes the role when it parks again. Either way also one of the D5
    /// sleepers (a worker parked inside `join`, else the threads in `block_on` inside
    /// `block_in_place`): they went to sleep for a later deadline, or for none, and the
    /// worker that drives may leave the role to run a long poll before this deadline comes,
    /// with no free worker parked to take it over (D4's hand-off wakes only those). Woken,
    /// the sleeper parks again no longer than the new deadline and turns the drivers then if
    /// the role is free (sleep/README.md, D5; until 2026-11-29 nothing woke it, and the timer
    /// waited for the driver's next maintenance, `tests/review_fixes_adversarial.rs`). With
    /// no free worker parked, the sleeper is the one woken to drive, as before. It costs a
    /// wake per filing that lowers the earliest deadline while such a sleeper is parked, not
    /// one per task.
    pub(crate) fn rearm_timers(&self, rearm: Rearm) {
        match rearm {
            Rearm::Nobody => {}
            Rearm::Driver(worker) => {
                self.sleep.wake_worker(worker);
                self.wake_a_driving_sleeper();
            }
            Rearm::Anyone => {
                // Filed by a task polled on one of our workers, that worker hands off when
                // the poll is over, if it does not drive the timers itself then (D5a).
                let owed = self.with_own_worker(|worker| {
                    worker.is_some_and(WorkerThread::owe_driver_hand_off)
                });
                if !owed {
                    let _ = self.sleep.wake_free_cold();
                }
                self.wake_a_driving_sleeper();
            }
        }
    }

    /// Wakes a worker parked inside `join`, else every thread in `block_on` inside
    /// `block_in_place`: the sleepers that turn the drivers when they wake but never hold
    /// the role for a sleep (D5). A plain wake: the worker settles its own accounting, and a
    /// token that arrives after it woke only cuts its next park short. The caller fenced
    /// (SeqCst) after what the sleeper must see: the pair of the fence in
    /// `Driver::park_timeout` that the sleeper runs after publishing itself.
    fn wake_a_driving_sleeper(&self) {
        if let Some(worker) = self.sleep.parked_join_waiter() {
            self.sleep.wake_worker(worker);
        } else {
            #[cfg(not(any(loom, shuttle)))]
            self.blocked_waiters.wake_all();
        }
    }

    /// Runs `op` on a worker of this registry, from a thread that is not one of them, and
    /// blocks until it is done. `op`'s panic is resumed here.
    #[cold]
    pub(crate) fn in_worker_cold<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        self.inject_and_wait(op, LockLatch::new(), LockLatch::wait)
    }

    /// Runs `op` on a worker of this registry from `current`, a worker of another runtime,
    /// and waits until it is done. `op`'s panic is resumed here.
    ///
    /// `current` does not block meanwhile: it waits as in a `join` whose other half was
    /// stolen, running its own pool's jobs, and parks only when there are none; the latch
    /// wakes it. Blocking would deadlock installs that alternate between two runtimes deeper
    /// than a pool has workers (`r2.install(|| r1.install(|| r2.install(..)))`): each
    /// waiting worker would be one its own pool needs for the next level back.
    #[cold]
    fn in_worker_cross<OP, R>(&self, current: &WorkerThread, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        debug_assert!(!ptr::eq(current.registry(), self));
        self.inject_and_wait(op, CrossLatch::new(current), |latch| {
            current.wait_until(latch.as_spin());
        })
    }

    /// Queues `op` as a job with `latch` on this registry's job inject queue, has `wait`
    /// wait until the latch is set (it must not return before), and returns `op`'s value or
    /// resumes its panic. A job refused because every worker has exited is dropped unrun,
    /// and the caller panics (`refused_after_shutdown`).
    fn inject_and_wait<L, OP, R>(&self, op: OP, latch: L, wait: impl FnOnce(&L)) -> R
    where
        L: Latch,
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let job = StackJob::new(
            || {
                let worker = WorkerThread::current();
                // SAFETY: the job runs on a worker thread, whose `WorkerThread` is live and
                // registered for the whole time the worker runs jobs.
                let worker = unsafe { worker.as_ref() }.expect("injected job ran off a worker");
                op(worker)
            },
            latch,
        );
        if self.inject_entry(job.as_job_ref()).is_err() {
            // Refused, so never shared: `op` is dropped here, unrun. Quietly: the panic to
            // see is the refusal.
            unwind::drop_quietly(job);
            refused_after_shutdown();
        }
        wait(&job.latch);
        // SAFETY: `wait` returned only once the latch was set (its contract), so the job ran
        // and will not be touched again; `job` stayed in place on this frame until now.
        unsafe { job.into_result() }
    }

    /// Runs `op` on a worker of this registry: right here if the current thread is one;
    /// from a worker of another runtime, by injecting it and running that worker's own jobs
    /// meanwhile; from any other thread, by injecting it and blocking.
    pub(crate) fn in_worker<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        // SAFETY: a non-null current worker is live while its thread runs work, which
        // includes this whole call.
        match unsafe { WorkerThread::current().as_ref() } {
            Some(worker) if ptr::eq(worker.registry(), self) => op(worker),
            Some(worker) => self.in_worker_cross(worker, op),
            None => self.in_worker_cold(op),
        }
    }
}

/// Fork-join work reached a runtime whose workers have all exited (a blocking closure that
/// runs while the runtime drops, calling `join`, `scope` or `install` on it): nobody can run
/// it, and waiting would hang the caller and the runtime's drop.
#[cold]
#[inline(never)]
pub(crate) fn refused_after_shutdown() -> ! {
    panic!(
        "magpie: the runtime has shut down: its workers have exited, so it cannot run this \
         `join`, `scope` or `install`"
    )
}

impl Registry {
    /// Counts a completed task on the worker that completed it. Before the task leaves the
    /// live list, so that whoever sees the list empty (`wait_idle`, through the SeqCst
    /// decrement of the unlink) sees the count too. The poll that completes the task was
    /// counted before it, in the shared count.
    #[inline]
    fn count_completion(&self, worker: Option<&WorkerThread>, task: RawTask) {
        if let Some(worker) = worker {
            let counters = &self.counters[worker.index()];
            // A task that finishes here without being polled here (one that a shutdown by an
            // unhandled panic cancels inline, in another task's poll) counts as a poll too:
            // a snapshot never shows more tasks finished than polled.
            // SAFETY: the completer holds a reference to `task`.
            if worker.polled_id() != Some(unsafe { task.header() }.identity.id) {
                add_always(&counters.tasks_polled, 1);
            }
            bump_completed(&counters.tasks_completed);
        }
    }

    /// The terminate hook, if one is set. Before the task leaves the live list, so that
    /// `wait_idle` returns only after the hook of every task it waited for.
    #[inline]
    fn run_terminate_hook(&self, task: RawTask) {
        if self.task_hooks_set && !is_refused_quietly(task) {
            // SAFETY: the completer holds a reference to `task`.
            self.hooks.terminated(unsafe { task.header() });
        }
    }
}

impl Schedule for Arc<Registry> {
    #[inline]
    fn schedule(&self, task: Task) {
        self.schedule_task(task, false);
    }

    #[inline]
    fn yield_task(&self, task: Task) {
        self.schedule_task(task, true);
    }

    fn unhandled_panic(&self, payload: crate::util::unwind::Payload) {
        // The first unhandled panic under `ShutdownRuntime` cancels every live task, here on
        // the completing thread, as `Runtime::shutdown` does from the dropping one
        // (runtime/task_hooks.rs). The completing task itself is among them: it is RUNNING,
        // so its shutdown only drops the reference `close_and_take_all` took, and its
        // `release`, right after, unlinks it as any completion does.
        if self.hooks.unhandled(payload) {
            self.shutdown_tasks();
        }
    }

    fn block_spares(&self) -> Option<&BlockSpares> {
        Some(&self.block_spares)
    }

    #[inline]
    fn reuse_cell(&self, layout: std::alloc::Layout) -> Option<NonNull<u8>> {
        // Only on this registry's own workers, which keep the cells their frees give back.
        self.with_own_worker(|worker| worker.and_then(|worker| worker.cells.take(layout)))
    }

    #[inline]
    unsafe fn keep_cell(&self, memory: NonNull<u8>, layout: std::alloc::Layout) -> bool {
        self.with_own_worker(|worker| {
            // SAFETY: the caller's contract is the cache's.
            worker.is_some_and(|worker| unsafe { worker.cells.keep(memory, layout) })
        })
    }

    #[inline]
    fn recycle(self) {
        // A task freed on one of this registry's workers leaves its reference with that
        // worker for the next spawn there; elsewhere (a `JoinHandle` dropped last on an
        // outside thread, another runtime's worker) it is dropped.
        // SAFETY: a non-null current worker is live while its thread runs work, which
        // includes this call.
        match unsafe { WorkerThread::current().as_ref() } {
            Some(worker) if ptr::eq(worker.registry(), &*self) => worker.keep_registry_ref(self),
            _ => drop(self),
        }
    }

    fn release_detached(&self, task: RawTask) -> bool {
        // Only on this registry's own workers, which unlink what they deferred before they
        // stop running tasks (`WorkerThread::defer_unlink`).
        self.with_own_worker(|worker| {
            let Some(worker) = worker.filter(|worker| !worker.is_blocking()) else {
                return false;
            };
            self.count_completion(Some(worker), task);
            self.run_terminate_hook(task);
            // SAFETY: the task is this registry's and complete but for its last transition,
            // and the completer gives its reference up to the worker (the trait's contract).
            unsafe { worker.defer_unlink(task) };
            true
        })
    }

    fn release(&self, task: RawTask) -> bool {
        self.with_own_worker(|worker| self.count_completion(worker, task));
        self.run_terminate_hook(task);
        // SAFETY: the completer holds a reference to `task`.
        let removed = unsafe { self.owned.remove(task) };
        self.idle_wait
            .task_finished(|| self.owned.is_empty_seqcst());
        removed
    }
}
