//! The runtime: a pool of worker threads and its handle, [`Runtime`].

pub(crate) mod block_in_place;
pub(crate) mod block_on;
mod blocking;
mod builder;
mod compensation;
pub(crate) mod context;
mod control;
pub(crate) mod global;
pub(crate) mod handle;
mod idle_wait;
mod monitor;
pub(crate) mod registry;
mod stall;
pub(crate) mod task_hooks;
mod topology;
pub(crate) mod worker;

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

pub use builder::{BuildError, Builder, MAX_WORKERS, MIN_STACK_SIZE};
pub use control::ActiveWorkersError;
pub use global::try_default_runtime;
pub use stall::StallInfo;
pub use task_hooks::UnhandledPanic;

use crate::queue::{chase_lev, local};
use crate::sync::atomic::*;
use crate::sync::barrier::Barrier;
use crate::sync::thread::{self, JoinHandle as ThreadHandle};
use crate::sync::{lock, wait_until, Condvar, Mutex, StaticAtomicUsize};
use crate::task::closure::Closure;
use crate::task::raw::Origin;
use crate::task::{JoinHandle, TaskInfo};
use blocking::{BlockingPool, DEFAULT_KEEP_ALIVE, DEFAULT_MAX_THREADS};
use registry::Registry;
use std::sync::Arc;
use worker::{WorkerSeed, WorkerThread};

/// A pool of worker threads that runs fork-join jobs, async tasks and submitted closures,
/// plus a pool of blocking threads.
///
/// Dropping a `Runtime` shuts it down: every task still alive is cancelled (its future is
/// dropped exactly once, its `JoinHandle` resolves to a cancelled [`JoinError`]), every
/// timer still filed with it is woken (a [`Sleep`] awaited outside the pool then moves to a
/// runtime that runs), the workers exit and their threads are joined, and so are the
/// blocking threads once their running closures return. [`Runtime::shutdown_timeout`]
/// bounds the wait.
///
/// Dropped on a worker thread (its own or another runtime's, outside
/// [`block_in_place`](crate::task::block_in_place)), a runtime waits for none of its
/// threads: blocking that worker could deadlock, as a blocking closure of the dropped
/// runtime may wait for a task queued behind the dropping one. The threads finish what they
/// run and exit on their own.
///
/// [`JoinError`]: crate::task::JoinError
/// [`Sleep`]: crate::time::Sleep
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let (a, b) = rt.install(|| magpie::join(|| 1 + 1, || 2 + 2));
/// assert_eq!((a, b), (2, 4));
/// ```
pub struct Runtime {
    registry: Arc<Registry>,
    threads: Mutex<Vec<ThreadHandle<()>>>,
    /// Worker threads and the stall monitor still running, signalled when one exits (for
    /// `shutdown_timeout`).
    exits: Arc<ExitCount>,
    /// Set by the first shutdown (`shutdown_timeout`, then `Drop`).
    shut_down: bool,
}

/// Counts the running threads of a runtime (workers and the stall monitor, which runs user
/// code in its `on_stall` hook) so that shutdown can wait for them with a deadline.
#[derive(Debug, Default)]
struct ExitCount {
    running: Mutex<usize>,
    exited: Condvar,
}

impl ExitCount {
    fn exited(&self) {
        let mut running = lock(&self.running);
        *running -= 1;
        self.exited.notify_all();
    }

    /// Waits until at most `own` of the threads run (1 when the caller is one of them), or
    /// `deadline`. Returns whether the others have all exited.
    fn wait(&self, deadline: Option<Instant>, own: usize) -> bool {
        let mut running = lock(&self.running);
        while *running > own {
            if deadline.is_some_and(|d| crate::sync::time::now() >= d) {
                return false;
            }
            running = wait_until(&self.exited, running, deadline);
        }
        true
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.registry.id)
            .field("workers", &self.num_workers())
            .finish_non_exhaustive()
    }
}

/// Numbers runtimes for their debug output.
static NEXT_ID: StaticAtomicUsize = StaticAtomicUsize::new(0);

impl Runtime {
    /// A [`Builder`] with the defaults: the same as [`Builder::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .thread_name("app")
    ///     .build()?;
    /// assert_eq!(rt.num_workers(), 2);
    /// # Ok::<(), magpie::BuildError>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A runtime with the defaults: `Runtime::builder().build()`.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::new().unwrap();
    /// assert!(rt.num_workers() >= 1);
    /// ```
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    fn start(builder: Builder) -> Result<Runtime, BuildError> {
        let active = builder.resolved_worker_threads();
        if active == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        let ordinary = builder.max_workers.unwrap_or(active);
        if ordinary.max(active) > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers {
                requested: ordinary.max(active),
            });
        }
        if ordinary < active {
            return Err(BuildError::MaxWorkersBelowWorkers {
                workers: active,
                max: ordinary,
            });
        }
        // The compensation slots come after the ordinary workers; every per-worker array
        // has a slot for each (compensation.rs). `ordinary` is at most `MAX_WORKERS` here,
        // so the sum cannot overflow.
        let compensation = builder.max_compensation_workers;
        if compensation > MAX_WORKERS - ordinary {
            return Err(BuildError::TooManyCompensationWorkers {
                workers: ordinary,
                compensation,
            });
        }
        let n = ordinary + compensation;
        // Groups are chosen for the ordinary workers, so that compensation changes neither
        // their groups nor the validation of `steal_groups`; the compensation slots then
        // join the groups in turn.
        let groups = match builder.steal_groups {
            Some(groups) if groups == 0 || groups > ordinary => {
                return Err(BuildError::InvalidStealGroups {
                    groups,
                    workers: ordinary,
                });
            }
            Some(groups) => topology::Groups::even(ordinary, groups),
            None => topology::Groups::from_machine(ordinary),
        }
        .with_extra(compensation);
        let name = builder.thread_name.as_deref().unwrap_or("magpie-worker");
        if name.contains('\0') {
            return Err(BuildError::InvalidThreadName);
        }
        let max_blocking = builder.max_blocking_threads.unwrap_or(DEFAULT_MAX_THREADS);
        if max_blocking == 0 {
            return Err(BuildError::ZeroBlockingThreads);
        }
        // Checked here: a stack too small for a panic's backtrace aborts the process at the
        // first user panic, and `usize::MAX` wraps inside the OS's own size arithmetic.
        let stack_size = builder.checked_stack_size()?;
        // Checked here: rounding `usize::MAX` up to a power of two panics.
        let trace_capacity = builder.checked_trace_capacity()?;
        // Before any worker can run a light barrier (sync/barrier.rs): the registration for
        // `membarrier`, if the asymmetric mode is chosen, happens here.
        let barrier = Barrier::resolve(builder.resolved_barrier()?, n, builder.resolved_cpus());

        let (owners, stealers): (Vec<_>, Vec<_>) =
            (0..n).map(|_| chase_lev::with_barrier(barrier)).unzip();
        let (rings, ring_stealers): (Vec<_>, Vec<_>) = (0..n).map(|_| local::local()).unzip();
        let id = NEXT_ID.fetch_add(1, Relaxed);
        let blocking = BlockingPool::new(
            max_blocking,
            builder.blocking_keep_alive.unwrap_or(DEFAULT_KEEP_ALIVE),
            name.to_owned(),
            stack_size,
        );
        let options = registry::Options {
            active,
            compensation,
            groups,
            trace_capacity: builder
                .resolved_trace()
                .then(|| trace_capacity.unwrap_or(crate::stats::trace::DEFAULT_CAPACITY)),
            poll_time_histogram: builder.poll_time_histogram,
            task_insight: builder.task_insight,
            hooks: Arc::new(task_hooks::TaskHooks::new(
                builder.on_task_spawn.clone(),
                builder.on_task_terminate.clone(),
                builder.unhandled_panic,
            )),
            barrier,
            // None unless asked for (a debugging aid, `Builder::park_safety_net`), and never
            // under loom, where a timed park does not block (see `sync::time`).
            park_safety_net: builder.park_safety_net.filter(|_| !cfg!(loom)),
            cpus: builder.resolved_cpus(),
            split_on_demand: builder.resolved_split_on_demand(),
            offer_every_split: builder.resolved_offer_every_split(),
            #[cfg(test)]
            starving_always: builder.starving_always,
            stall: builder
                .resolved_stall_threshold()?
                .map(|threshold| (threshold, builder.on_stall.clone())),
        };
        #[cfg(not(loom))]
        let io = crate::io::IoDriver::new().map_err(BuildError::Io)?;
        let registry = Arc::new(Registry::new(
            stealers,
            ring_stealers,
            blocking,
            id,
            options,
            #[cfg(not(loom))]
            io,
        ));
        // A source registered while every worker sleeps and the driver role is free (its
        // last holder is busy) gets a worker to wait for it (`Registry::hand_off_driver`).
        #[cfg(not(loom))]
        {
            let weak = Arc::downgrade(&registry);
            registry.io.handle().set_on_register(Box::new(move || {
                if let Some(registry) = weak.upgrade() {
                    // Also to a worker inside `join` or a `block_on` inside
                    // `block_in_place` when no free worker is parked: they poll sources
                    // only while some are registered (D5 in sleep/README.md).
                    registry.hand_off_driver_to_anyone();
                }
            }));
        }
        let exits = Arc::new(ExitCount {
            running: Mutex::new(n + usize::from(registry.monitor.is_some())),
            exited: Condvar::new(),
        });

        let mut threads = Vec::with_capacity(n);
        for (index, (deque, ring)) in owners.into_iter().zip(rings).enumerate() {
            let seed = WorkerSeed {
                index,
                registry: registry.clone(),
                deque,
                ring,
            };
            let mut thread = thread::Builder::new().name(format!("{name}-{index}"));
            if let Some(bytes) = stack_size {
                thread = thread.stack_size(bytes);
            }
            let exits_here = exits.clone();
            match thread.spawn(move || {
                worker::run(seed);
                exits_here.exited();
            }) {
                Ok(handle) => threads.push(handle),
                Err(source) => {
                    // Stop the ones already running before reporting the failure. The
                    // workers that never started count as unparked in the sleep state; that
                    // only makes notifiers skip waking, and nothing is left to notify.
                    registry.terminate();
                    for handle in threads {
                        let _ = handle.join();
                    }
                    return Err(BuildError::Spawn { index, source });
                }
            }
        }
        if registry.monitor.is_some() {
            // Started after the workers: it samples their words from its first tick.
            let for_monitor = registry.clone();
            let exits_here = exits.clone();
            let spawned = thread::Builder::new()
                .name(format!("{name}-monitor"))
                .spawn(move || {
                    monitor::run(for_monitor);
                    exits_here.exited();
                });
            match spawned {
                // Joined with the workers (`shutdown`); it exits when the runtime terminates.
                Ok(handle) => threads.push(handle),
                Err(source) => {
                    registry.terminate();
                    for handle in threads {
                        let _ = handle.join();
                    }
                    return Err(BuildError::Spawn { index: n, source });
                }
            }
        }
        Ok(Runtime {
            registry,
            threads: Mutex::new(threads),
            exits,
            shut_down: false,
        })
    }

    /// The number of worker threads, active or not (see [`Runtime::active_workers`]), as
    /// [`Builder::max_workers`] (else [`Builder::worker_threads`]) set it. Compensation
    /// workers ([`Builder::max_compensation_workers`]) are not counted: they stand in for
    /// stalled workers for a while, and the parallel iterators, which split their work by
    /// this count ([`current_num_workers`]), split the same with or without them.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .max_compensation_workers(2)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(rt.num_workers(), 2);
    /// assert_eq!(rt.stats().workers.len(), 4); // the compensation slots are listed there
    /// ```
    pub fn num_workers(&self) -> usize {
        self.registry.num_workers()
    }

    /// How many more compensation workers could start now (see
    /// [`Builder::max_compensation_workers`]). For the stall monitor and for tests; not a
    /// stable API.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).max_compensation_workers(2).build().unwrap();
    /// assert_eq!(rt.__compensation_available(), 2);
    /// ```
    #[doc(hidden)]
    pub fn __compensation_available(&self) -> usize {
        self.registry.compensation_available()
    }

    /// Switches one compensation worker on, as the stall monitor does when every worker is
    /// stalled; false if none is left or the runtime is shutting down. For tests; not a
    /// stable API.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).max_compensation_workers(1).build().unwrap();
    /// assert!(rt.__start_compensation_worker());
    /// assert!(!rt.__start_compensation_worker()); // none left
    /// assert_eq!(rt.stats().compensation_workers_active, 1);
    /// ```
    #[doc(hidden)]
    pub fn __start_compensation_worker(&self) -> bool {
        self.registry.start_compensation_worker()
    }

    /// Switches every compensation worker off, as the stall monitor does when the stall
    /// ends. For tests; not a stable API.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).max_compensation_workers(1).build().unwrap();
    /// assert!(rt.__start_compensation_worker());
    /// rt.__retire_compensation_workers();
    /// let stats = rt.stats();
    /// assert_eq!((stats.compensation_workers_active, stats.compensation_workers_started), (0, 1));
    /// assert!(!stats.workers[1].active);
    /// ```
    #[doc(hidden)]
    pub fn __retire_compensation_workers(&self) {
        self.registry.retire_compensation_workers();
    }

    /// Runs `op` on one of this runtime's workers and returns its result.
    ///
    /// Inside `op`, [`join`](fn@crate::join) and [`scope`](crate::scope) use this runtime.
    /// Called from one of this runtime's own workers, `op` simply runs in place. Called from
    /// a worker of another runtime, that worker keeps running its own runtime's fork-join
    /// jobs until `op` is done (as while waiting in a `join`), so installs may nest across
    /// runtimes to any depth. Called from any other thread, the thread blocks until `op` is
    /// done.
    ///
    /// # Panics
    ///
    /// A panic in `op` is resumed on the calling thread. Called from outside this runtime
    /// after its workers have exited (a blocking closure still running while the runtime
    /// drops), `install` panics with "the runtime has shut down".
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let on_worker = rt.install(|| magpie::current_worker_index().is_some());
    /// assert!(on_worker);
    /// ```
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.registry.in_worker(|_| op())
    }

    /// Spawns `future` as a task on this runtime and returns its [`JoinHandle`].
    ///
    /// The task starts at once on a worker (it does not wait for the handle to be awaited).
    /// Inside the task, [`spawn`], [`join`](fn@crate::join) and the timers use
    /// this runtime. On a runtime that is shutting down, the future is dropped at once and
    /// the handle resolves to a cancelled [`JoinError`](crate::task::JoinError).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handle = rt.spawn(async {
    ///     // Fork-join code runs inside tasks, on the same workers.
    ///     let (a, b) = magpie::join(|| 20, || 22);
    ///     a + b
    /// });
    /// assert_eq!(rt.block_on(handle).unwrap(), 42);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.registry.spawn(future, Origin::caller())
    }

    /// This runtime's registry, for the spawn functions outside this module.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every live task of this runtime (spawned and not yet finished or cancelled), by id,
    /// with what it is doing and what its polls have cost: see [`TaskInfo`].
    ///
    /// Walks the runtime's list of live tasks, one shard under its lock at a time, so spawns
    /// and completions wait for the walk a moment; a dump is a diagnostic, not something to
    /// call in a loop. Tasks spawned or finished during the walk may or may not be in it.
    /// Each task is listed once, and each worker shows at most one task
    /// [`Running`](crate::task::TaskState::Running) (the one it was polling when the walk
    /// reached it; a task it moved on to later in the walk reads as scheduled).
    /// `spawn_blocking` closures are not listed (they run on the blocking pool, not on the
    /// workers). The counters cost nothing when nobody calls this (ARCHITECTURE.md, "Task
    /// identity and the live-task dump").
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::task::{Builder, TaskState};
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let waiting = Builder::new().name("waiting").spawn_on(std::future::pending::<()>(), &rt);
    /// let running = Builder::new().name("running").submit_on(move || rx.recv().unwrap(), &rt);
    /// let tasks = rt.tasks();
    /// assert!(tasks.iter().any(|t| t.id == waiting.id() && t.name.as_deref() == Some("waiting")));
    /// assert!(tasks.iter().any(|t| t.id == running.id()));
    /// for task in &tasks {
    ///     if let TaskState::Running { worker } = task.state {
    ///         assert!(worker < 2);
    ///     }
    /// }
    /// tx.send(()).unwrap();
    /// let id = running.id();
    /// running.join().unwrap();
    /// assert!(rt.tasks().iter().all(|t| t.id != id)); // finished: gone
    /// ```
    pub fn tasks(&self) -> Vec<TaskInfo> {
        let registry = &*self.registry;
        let now = registry.uptime_ns();
        let mut tasks = Vec::with_capacity(registry.owned.len());
        let mut polling = Vec::new();
        // Workers already shown running a task of an earlier shard: the shards are walked
        // one after the other, and a worker may have moved on to a task of a later one
        // meanwhile. Showing it there too would put two tasks on one worker in one dump
        // (the shuttle scenario `task_dump_under_concurrent_spawns` found it), so it is
        // shown once, with the task it was polling first; its new task reads as scheduled.
        let mut shown = vec![false; registry.counters.len()];
        registry.owned.for_each_shard(|headers| {
            // Which task each worker runs, by id (task/id.rs, "The current task"). Ids are
            // never reused, so a word that holds a task's id is about that task; it may lag
            // (a worker leaves the id in its word until the run has returned), which is why
            // `TaskInfo::read` also asks the task's state for RUNNING.
            polling.clear();
            polling.extend(registry.counters.iter().enumerate().filter_map(|(i, c)| {
                // Only compared with the ids of the tasks linked here. A worker running a
                // job that is no part of the task waiting in its `join` has that task in
                // `suspended` instead: it still polls it. Acquire: pairs with the Release
                // store that clears the word then (`execute_outside_task`); Relaxed for
                // `suspended`, read after it.
                let id = crate::task::id::polled_id(c.polling.load(Acquire))
                    .or_else(|| crate::task::id::polled_id(c.suspended.load(Relaxed)))?;
                (!shown[i]).then_some((id, i))
            }));
            // A complete task may wait in the list a moment for its worker to unlink it
            // with others (`WorkerThread::defer_unlink`): it is not live.
            for header in headers.iter().filter(|h| !h.state.load().is_complete()) {
                let task = TaskInfo::read(header, now, &polling);
                if let crate::task::TaskState::Running { worker } = task.state {
                    shown[worker] = true;
                }
                tasks.push(task);
            }
        });
        tasks.sort_unstable_by_key(|task| task.id);
        tasks
    }

    /// Runs `future` to completion on the calling thread and returns its output. Tasks it
    /// spawns with [`spawn`], and its timers, use this runtime.
    ///
    /// # Panics
    ///
    /// If called on a worker thread of a magpie runtime, outside
    /// [`task::block_in_place`](crate::task::block_in_place): blocking a worker could
    /// deadlock the runtime (await the future instead, call `block_on` from
    /// [`spawn_blocking`](Runtime::spawn_blocking), or inside `block_in_place`, which first
    /// hands the worker's queued tasks to the others). A panic of `future` itself propagates.
    ///
    /// On a runtime built with
    /// [`UnhandledPanic::ShutdownRuntime`], once a
    /// task's unhandled panic has shut the runtime down, `block_on` stops polling `future`
    /// (dropping it) and resumes that panic's payload on the calling thread
    /// ([`std::panic::resume_unwind`]), as tokio does; only one `block_on` gets the payload,
    /// later ones panic with a message.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let sum = rt.block_on(async {
    ///     let a = magpie::spawn(async { 1 });
    ///     let b = magpie::spawn(async { 2 });
    ///     a.await.unwrap() + b.await.unwrap()
    /// });
    /// assert_eq!(sum, 3);
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        block_on::assert_not_on_worker("Runtime::block_on");
        block_on_registry(&self.registry, future, "Runtime::block_on")
    }

    /// Runs the closure `f` as a task on this runtime (the task pool's *submit*) and returns
    /// its [`JoinHandle`]. A panic in `f` is delivered through the handle.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handle = rt.submit(|| (1..=100u64).sum::<u64>());
    /// assert_eq!(handle.join().unwrap(), 5050);
    /// ```
    #[track_caller]
    pub fn submit<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.registry.spawn(Closure::new(f), Origin::caller())
    }

    /// Runs every closure of `fs` as a task on this runtime, as [`submit`](Runtime::submit)
    /// would one by one, and returns their handles in the same order. Each closure goes
    /// onto the global queue as soon as `fs` yields it, before `fs` is asked for the next,
    /// so workers start on a long batch while it is still being consumed, and an iterator
    /// may wait for closures it yielded earlier (a channel they feed) or for
    /// [`wait_idle`](Runtime::wait_idle) on another thread. Unlike a loop of `submit`, the
    /// batch's tasks are not counted as remote schedules in [`Stats`](crate::Stats).
    ///
    /// The batch's tasks are allocated together, up to 64 to a block of about 8 KiB (a
    /// closure larger than 4 KiB gets an allocation of its own), which spares the allocator
    /// most of its work. A block is freed with the last of its tasks, so a handle kept long
    /// after its closure ran keeps that block allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handles = rt.submit_batch((1..=4u64).map(|i| move || i * 10));
    /// let results: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(results, [10, 20, 30, 40]);
    /// ```
    #[track_caller]
    pub fn submit_batch<I, F, T>(&self, fs: I) -> Vec<JoinHandle<T>>
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.registry.spawn_batch(
            fs.into_iter().map(Closure::new),
            std::panic::Location::caller(),
        )
    }

    /// Runs the closure `f` as a task on this runtime, as [`submit`](Runtime::submit) does,
    /// but without a [`JoinHandle`]: nobody joins it, so nothing is kept for its result, and
    /// neither the handle nor its drop costs anything (the task starts as a detached one).
    /// [`wait_idle`](Runtime::wait_idle) waits for it, and the runtime's shutdown drops it
    /// if it has not run. A panic in `f` has nobody to go to: it is an unhandled panic, for
    /// the runtime's [`UnhandledPanic`] policy.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let total = Arc::new(AtomicU64::new(0));
    /// for i in 1..=100u64 {
    ///     let total = total.clone();
    ///     rt.execute(move || {
    ///         total.fetch_add(i, Ordering::Relaxed);
    ///     });
    /// }
    /// rt.wait_idle();
    /// assert_eq!(total.load(Ordering::Relaxed), 5050);
    /// ```
    #[track_caller]
    pub fn execute<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.registry.execute(Closure::new(f), Origin::caller())
    }

    /// Runs every closure of `fs` as a task on this runtime without handles: what
    /// [`submit_batch`](Runtime::submit_batch) does, each closure queued as soon as `fs`
    /// yields it and the cells sharing blocks, but with nothing returned, as
    /// [`execute`](Runtime::execute) for each. For a batch whose handles would be dropped
    /// anyway this spares the handles' `Vec` and a write to every task from this thread
    /// after it was queued. [`wait_idle`](Runtime::wait_idle) waits for the batch; a panic
    /// in a closure is an unhandled panic.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// rt.execute_batch((0..1000).map(|_| {
    ///     let done = done.clone();
    ///     move || {
    ///         done.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }));
    /// rt.wait_idle();
    /// assert_eq!(done.load(Ordering::Relaxed), 1000);
    /// ```
    #[track_caller]
    pub fn execute_batch<I, F>(&self, fs: I)
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        self.registry.execute_batch(
            fs.into_iter().map(Closure::new),
            std::panic::Location::caller(),
        )
    }

    /// Runs the closure `f` as a task queued on the less loaded of two workers picked at
    /// random (the task pool's *submit smart*): a worker's load is its queued tasks, read
    /// without a lock. Two random choices spread work nearly as evenly as asking every
    /// worker, and cost the same at 2 workers as at 200. Idle workers still steal it, as any
    /// queued task.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(4).build().unwrap();
    /// let handles: Vec<_> = (0..100u64).map(|i| rt.submit_balanced(move || i * i)).collect();
    /// let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(total, (0..100u64).map(|i| i * i).sum());
    /// ```
    #[track_caller]
    pub fn submit_balanced<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.registry
            .spawn_balanced(Closure::new(f), Origin::caller())
    }

    /// Blocks the calling thread until the runtime has no live task: every spawned future
    /// and submitted closure, including those spawned while waiting, has completed or been
    /// cancelled. Waits on a condition variable, without polling.
    ///
    /// Work that is not a task is not waited for: an [`install`](Self::install) running for
    /// another thread is that thread's to wait for. A task that never completes (a future
    /// nobody wakes) keeps `wait_idle` waiting.
    ///
    /// Every output is stored (or dropped, if its handle is gone) by the time this returns,
    /// but a task leaves the live count one step before it marks itself complete, so
    /// [`JoinHandle::is_finished`] may still read `false` for that moment; awaiting or
    /// joining the handle returns as soon as the worker has taken that step.
    ///
    /// # Panics
    ///
    /// If called on one of this runtime's workers, which would wait for itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..1000 {
    ///     let done = done.clone();
    ///     drop(rt.submit(move || done.fetch_add(1, Ordering::Relaxed)));
    /// }
    /// rt.wait_idle();
    /// assert_eq!(done.load(Ordering::Relaxed), 1000);
    /// assert_eq!(rt.stats().tasks_alive, 0);
    /// ```
    pub fn wait_idle(&self) {
        // SAFETY: a non-null current worker is live during this call.
        if let Some(worker) = unsafe { WorkerThread::current().as_ref() } {
            assert!(
                !std::ptr::eq(worker.registry(), &*self.registry),
                "Runtime::wait_idle called on one of the runtime's own workers: it would \
                 wait for itself"
            );
        }
        let owned = &self.registry.owned;
        self.registry.idle_wait.wait(|| owned.is_empty_seqcst());
    }

    /// Runs the closure `f` as a task queued on worker `worker` (the task pool's
    /// *submit to worker*). The worker runs it unless an idle worker steals it first, as it
    /// would any queued task.
    ///
    /// # Errors
    ///
    /// [`SubmitError::NoSuchWorker`] if `worker >= self.num_workers()`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handle = rt.submit_to(1, || 7).unwrap();
    /// assert_eq!(handle.join().unwrap(), 7);
    ///
    /// let err = rt.submit_to(2, || 7).unwrap_err();
    /// assert_eq!(err.to_string(), "no worker 2: the runtime has 2 workers");
    /// ```
    #[track_caller]
    pub fn submit_to<F, T>(&self, worker: usize, f: F) -> Result<JoinHandle<T>, SubmitError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let workers = self.num_workers();
        if worker >= workers {
            return Err(SubmitError::NoSuchWorker { worker, workers });
        }
        Ok(self
            .registry
            .spawn_to(worker, Closure::new(f), Origin::caller()))
    }

    /// Runs the closure `f` on the blocking pool: separate threads (at most
    /// [`Builder::max_blocking_threads`], 512 by default; idle ones exit after 10 s) for
    /// work that blocks, such as file I/O or a synchronous library, so it never holds up a
    /// worker. A panic in `f` is delivered through the handle. Inside `f` this runtime is
    /// the current one: `magpie::spawn`, `join` and the timers called from `f` use it, as
    /// they would on its workers.
    ///
    /// # Panics
    ///
    /// If the OS refuses a new thread while no blocking thread is running (as
    /// `std::thread::spawn` panics); `f` is dropped without running. With a thread running,
    /// `f` waits for it instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(3).build().unwrap();
    /// let handle = rt.spawn_blocking(|| {
    ///     assert_eq!(magpie::current_worker_index(), None); // not a worker
    ///     assert_eq!(magpie::current_num_workers(), 3); // but in this runtime
    ///     std::fs::metadata(".").is_ok()
    /// });
    /// assert!(rt.block_on(handle).unwrap());
    /// ```
    #[track_caller]
    pub fn spawn_blocking<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        match self.registry.spawn_blocking(f, Origin::caller()) {
            Ok(handle) => handle,
            Err(err) => blocking_refused(&err),
        }
    }

    /// Shuts the runtime down as dropping it does, but waits at most `timeout` for the
    /// threads: workers still inside a long poll or job, and blocking closures still
    /// running, are left to finish on their own (detached) after that.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let pending = rt.spawn(std::future::pending::<()>());
    /// rt.shutdown_timeout(Duration::from_secs(5));
    /// assert!(pending.join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        // A timeout too long to represent waits without a deadline.
        self.shutdown(crate::sync::time::now().checked_add(timeout));
    }

    /// Shutdown: cancel every task, stop the blocking pool and the workers, wait for the
    /// threads (until `deadline`, if any).
    fn shutdown(&mut self, deadline: Option<Instant>) {
        if std::mem::replace(&mut self.shut_down, true) {
            return;
        }
        let registry = &*self.registry;
        // 1. Every live task is cancelled; spawns are refused from now on. Inside this
        // runtime's context, so that a destructor that spawns reaches this runtime (and is
        // refused) rather than the global one.
        {
            let _enter = context::enter(&self.registry);
            registry.shutdown_tasks();
        }
        // 2. The workers run what is queued (cancelled tasks: no-ops), then exit.
        registry.terminate();
        // The timers close: every waker still filed is woken (outside this runtime's
        // context: they belong to whoever polled the timers), and nothing is filed from now
        // on. A timer awaited outside the pool (another thread's `block_on`, a blocking
        // closure that step 3 waits for) then files itself with a runtime that still runs
        // (time/sleep.rs). Before any wait: nobody would fire it during one.
        registry.timers.close();
        // The I/O driver shuts down too, for the same reason: every task waiting on a
        // socket (in a `block_on` elsewhere, say) gets an error rather than waiting for good,
        // and no source registers from now on (io/readiness.rs, invariant 5).
        #[cfg(not(loom))]
        registry.io.handle().shutdown();
        // SAFETY: a non-null current worker is live during this call.
        let worker = unsafe { WorkerThread::current().as_ref() };
        let threads = std::mem::take(&mut *lock(&self.threads));
        // On our own worker, joining our own thread would deadlock. On another runtime's
        // worker (outside `block_in_place`, where blocking is allowed), waiting would hold
        // that worker, and one of our blocking closures may wait for a task queued behind
        // this very call there. Either way the threads exit on their own, detached.
        if worker.is_some_and(|w| std::ptr::eq(w.registry(), registry) || !w.is_blocking()) {
            let _ = registry.blocking.shutdown(Some(crate::sync::time::now()));
            return;
        }
        // Dropped on the stall monitor's thread (the last handle, dropped in an `on_stall`
        // hook), the shutdown cannot wait for that thread, which is this very call.
        let me = crate::sync::thread::current().id();
        let on_monitor = threads.iter().any(|handle| handle.thread().id() == me);
        let threads_done = self.exits.wait(deadline, usize::from(on_monitor));
        // 3. Blocking closures that have not started are cancelled; running ones finish.
        // Dropped inside one of its own blocking closures, the runtime cannot wait for that
        // closure, which is this very call: the blocking threads are left to finish (and
        // exit) on their own, as the workers are when it is dropped on a worker.
        let blocking_deadline = if registry.blocking.is_current_thread() {
            Some(crate::sync::time::now())
        } else {
            deadline
        };
        let _ = registry.blocking.shutdown(blocking_deadline);
        if threads_done {
            for handle in threads {
                // Our own thread (the monitor's, as above): joining it would fail
                // (EDEADLK), and std panics then. It exits on its own once the hook returns.
                if handle.thread().id() == me {
                    continue;
                }
                // Workers catch every user panic; an `Err` here means magpie itself aborted.
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

/// Why a closure could not be submitted.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// match rt.submit_to(5, || ()) {
///     Err(magpie::SubmitError::NoSuchWorker { worker, workers }) => {
///         assert_eq!((worker, workers), (5, 1));
///     }
///     other => panic!("unexpected: {other:?}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// `submit_to(worker, ..)` named a worker the runtime does not have.
    NoSuchWorker {
        /// The index asked for.
        worker: usize,
        /// The runtime's worker count.
        workers: usize,
    },
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::NoSuchWorker { worker, workers } => {
                write!(f, "no worker {worker}: the runtime has {workers} workers")
            }
        }
    }
}

impl std::error::Error for SubmitError {}

/// Spawns `future` as a task on the current runtime: the worker's own runtime on a worker
/// thread, the runtime whose [`block_on`](Runtime::block_on) runs on this thread, or else the
/// global default runtime.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let total = rt.block_on(async {
///     let handles: Vec<_> = (0..10u64).map(|i| magpie::spawn(async move { i * i })).collect();
///     let mut total = 0;
///     for handle in handles {
///         total += handle.await.unwrap();
///     }
///     total
/// });
/// assert_eq!(total, 285);
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // The caller's location, taken here: a closure has none of its own.
    let origin = Origin::caller();
    context::with_current_registry(|registry| registry.spawn(future, origin))
}

/// Runs `future` to completion on the calling thread, on the current runtime (the one whose
/// `block_on` is already running here, or else the global default runtime).
///
/// # Panics
///
/// As [`Runtime::block_on`]: on a worker thread, outside
/// [`task::block_in_place`](crate::task::block_in_place).
///
/// # Examples
///
/// ```
/// let answer = magpie::block_on(async { magpie::spawn(async { 42 }).await.unwrap() });
/// assert_eq!(answer, 42);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    block_on::assert_not_on_worker("magpie::block_on");
    let registry = context::current_registry();
    block_on_registry(&registry, future, "magpie::block_on")
}

/// `block_on` with `registry` entered; on a runtime that shuts down on unhandled panics,
/// watching for one (`task_hooks.rs`, `WatchPanics`).
fn block_on_registry<F: Future>(registry: &Arc<Registry>, future: F, caller: &str) -> F::Output {
    let _enter = context::enter(registry);
    if registry.hooks.watches_panics() {
        let watched = task_hooks::WatchPanics::new(&registry.hooks, future);
        block_on::block_on_thread(watched, caller)
    } else {
        block_on::block_on_thread(future, caller)
    }
}

/// Runs the closure `f` as a task on the current runtime (see [`spawn`]).
///
/// # Examples
///
/// ```
/// let handle = magpie::submit(|| "done");
/// assert_eq!(handle.join().unwrap(), "done");
/// ```
#[track_caller]
pub fn submit<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // The caller's location, taken here: a closure has none of its own.
    let origin = Origin::caller();
    context::with_current_registry(|registry| registry.spawn(Closure::new(f), origin))
}

/// Runs the closure `f` as a task on the current runtime without a handle (see
/// [`Runtime::execute`]): from one of a runtime's tasks, on that runtime.
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
///
/// let (tx, rx) = mpsc::channel();
/// magpie::execute(move || tx.send("done").unwrap());
/// assert_eq!(rx.recv().unwrap(), "done");
/// ```
#[track_caller]
pub fn execute<F>(f: F)
where
    F: FnOnce() + Send + 'static,
{
    let origin = Origin::caller();
    context::with_current_registry(|registry| registry.execute(Closure::new(f), origin))
}

/// Runs the closure `f` on the current runtime's blocking pool (see
/// [`Runtime::spawn_blocking`]).
///
/// # Panics
///
/// As [`Runtime::spawn_blocking`].
///
/// # Examples
///
/// ```
/// let handle = magpie::spawn_blocking(|| std::thread::current().name().map(str::to_owned));
/// let name = handle.join().unwrap().unwrap();
/// assert!(name.contains("blocking"));
/// ```
#[track_caller]
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match context::current_registry().spawn_blocking(f, Origin::caller()) {
        Ok(handle) => handle,
        Err(err) => blocking_refused(&err),
    }
}

/// `spawn_blocking`'s panic when the OS refuses a thread and none is running.
#[cold]
#[track_caller]
fn blocking_refused(err: &std::io::Error) -> ! {
    panic!("magpie: `spawn_blocking` cannot start a thread, and none is running: {err}")
}

/// The global default runtime, which the free functions ([`join`](fn@crate::join),
/// [`scope`](crate::scope)) use on threads outside any worker. Created on first use with the
/// defaults of [`Builder::new`], unless [`Builder::build_global`] configured it first.
///
/// # Panics
///
/// If the runtime cannot be built (`MAGPIE_WORKER_THREADS` too large, the OS refusing a
/// thread). [`try_default_runtime`] returns the error instead.
///
/// # Examples
///
/// ```
/// let rt = magpie::default_runtime();
/// assert_eq!(rt.num_workers(), magpie::current_num_workers());
/// let jobs_so_far = rt.stats().jobs_executed();
/// # let _ = jobs_so_far;
/// ```
pub fn default_runtime() -> &'static Runtime {
    global::runtime()
}

/// The index of the worker running the calling thread, or `None` off the pool. Below
/// [`Runtime::num_workers`], except on a compensation worker
/// ([`Builder::max_compensation_workers`]), whose index comes after the ordinary workers'
/// (its entry in [`Stats::workers`](crate::Stats::workers)).
///
/// # Examples
///
/// ```
/// assert_eq!(magpie::current_worker_index(), None);
/// let rt = magpie::Runtime::builder().worker_threads(3).build().unwrap();
/// let index = rt.install(|| magpie::current_worker_index()).unwrap();
/// assert!(index < 3);
/// ```
pub fn current_worker_index() -> Option<usize> {
    // SAFETY: a non-null current worker is live during this call.
    unsafe { WorkerThread::current().as_ref() }.map(WorkerThread::index)
}

/// The number of workers of the runtime that [`join`](fn@crate::join) would use from here: the
/// current worker's runtime, else the runtime whose `block_on` runs on this thread, else the
/// global one. As [`Runtime::num_workers`], compensation workers are not counted, so the
/// parallel iterators, which split their work by this count, split the same whether the
/// stall monitor has started any or not.
///
/// # Examples
///
/// ```
/// assert!(magpie::current_num_workers() >= 1);
/// ```
pub fn current_num_workers() -> usize {
    // SAFETY: a non-null current worker is live during this call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => worker.registry().num_workers(),
        None => context::current_registry().num_workers(),
    }
}

#[cfg(all(test, loom))]
mod loom_runtime;
