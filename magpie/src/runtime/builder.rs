//! `Builder` and `BuildError`.

use std::fmt;
use std::io;
use std::time::Duration;

use super::stall::{StallHook, StallInfo};
use super::task_hooks::{TaskHook, UnhandledPanic};
use super::Runtime;
use crate::sync::barrier::BarrierMode;
use crate::task::TaskMeta;

/// The most workers one runtime may have (the sleep protocol counts them in 32-bit fields;
/// this is far beyond any machine's useful thread count).
///
/// # Examples
///
/// ```
/// use magpie::{BuildError, Runtime, MAX_WORKERS};
///
/// let err = Runtime::builder().worker_threads(MAX_WORKERS + 1).build().unwrap_err();
/// assert!(matches!(
///     err,
///     BuildError::TooManyWorkers { requested } if requested == MAX_WORKERS + 1
/// ));
/// ```
pub const MAX_WORKERS: usize = 1 << 16;

/// The smallest stack [`Builder::stack_size`] accepts, in bytes (64 KiB).
///
/// A smaller stack is accepted by the OS (Linux rounds anything up to 16 KiB) but not by the
/// work a thread always does: a debug build printing a panic's backtrace
/// (`RUST_BACKTRACE=1`) on a 16 or 24 KiB worker stack overflowed it and aborted the process,
/// at 32 KiB it did not (measured with `magpie/tests/bad_input.rs`'s stack sizes); 64 KiB is
/// twice that.
///
/// # Examples
///
/// ```
/// use magpie::{BuildError, Runtime, MIN_STACK_SIZE};
///
/// let small = Runtime::builder().worker_threads(1).stack_size(MIN_STACK_SIZE).build()?;
/// assert_eq!(small.install(|| 6 * 7), 42);
///
/// let err = Runtime::builder().stack_size(MIN_STACK_SIZE - 1).build().unwrap_err();
/// assert!(matches!(err, BuildError::InvalidStackSize { .. }));
/// # Ok::<(), BuildError>(())
/// ```
pub const MIN_STACK_SIZE: usize = 64 << 10;

/// The largest stack [`Builder::stack_size`] accepts: `isize::MAX` bytes, the most any Rust
/// allocation may hold. Sizes up to it are handed to the OS, which may still refuse them
/// ([`BuildError::Spawn`]).
const MAX_STACK_SIZE: usize = isize::MAX as usize;

/// The most events [`Builder::trace_capacity`] accepts per worker: 2^24, 256 MiB per worker,
/// 256 times the default. Beyond some size the ring cannot be allocated (an abort), and at
/// `usize::MAX` rounding up to a power of two overflows (a panic).
const MAX_TRACE_CAPACITY: usize = 1 << 24;

/// The most memory the trace rings of all workers together may take: 4 GiB, 2^28 events.
/// That is the default ring (1 MiB) on 4,096 workers, or the largest (256 MiB) on 16. The
/// per-worker cap alone let 65,536 workers ask for 64 GiB up front, which aborted the
/// process where memory was limited (issue 18 item 10).
const MAX_TRACE_BYTES: u64 = 4 << 30;

/// Bytes per event in a trace ring (a slot is two `u64`s: `stats/trace.rs`).
const TRACE_EVENT_BYTES: u64 = 16;

/// Configures and builds a [`Runtime`].
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder()
///     .worker_threads(4)
///     .thread_name("compute")
///     .stack_size(4 << 20)
///     .build()
///     .expect("could not start the runtime");
/// assert_eq!(rt.num_workers(), 4);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    pub(super) worker_threads: Option<usize>,
    pub(super) thread_name: Option<String>,
    pub(super) stack_size: Option<usize>,
    pub(super) max_blocking_threads: Option<usize>,
    pub(super) blocking_keep_alive: Option<Duration>,
    pub(super) max_workers: Option<usize>,
    pub(super) max_compensation_workers: usize,
    pub(super) steal_groups: Option<usize>,
    pub(super) trace: Option<bool>,
    pub(super) trace_capacity: Option<usize>,
    pub(super) poll_time_histogram: bool,
    pub(super) park_safety_net: Option<Duration>,
    pub(super) assumed_cpus: Option<usize>,
    pub(super) split_on_demand: Option<bool>,
    pub(super) offer_every_split: Option<bool>,
    /// A test's pool whose workers all count as starving at every look of rule 5.
    #[cfg(test)]
    pub(super) starving_always: bool,
    pub(super) barrier: Option<BarrierMode>,
    pub(super) task_insight: bool,
    pub(super) on_task_spawn: Option<TaskHook>,
    pub(super) on_task_terminate: Option<TaskHook>,
    pub(super) unhandled_panic: UnhandledPanic,
    /// `None`: not set (the environment, else the default); `Some(None)`: off.
    pub(super) stall_threshold: Option<Option<Duration>>,
    pub(super) on_stall: Option<StallHook>,
}

/// The stall threshold when none is set (by [`Builder::stall_threshold`] or
/// `MAGPIE_STALL_THRESHOLD_MS`): 100 ms, tokio-console's "long poll" default for a warning.
/// Off under loom and shuttle, whose models run no monitor thread, and in the measurement
/// build `--cfg magpie_no_insight` (`scripts/insight_overhead.sh`), which leaves detection out.
const DEFAULT_STALL_THRESHOLD: Option<Duration> = if cfg!(any(loom, shuttle, magpie_no_insight)) {
    None
} else {
    Some(Duration::from_millis(100))
};

impl Builder {
    /// A builder with the defaults: one worker per available CPU, or as many as the
    /// environment variable `MAGPIE_WORKER_THREADS` says; threads named
    /// `magpie-worker-{index}`; and the platform's default stack size.
    ///
    /// *Available* CPUs are those [`std::thread::available_parallelism`] counts for the
    /// thread that calls [`Builder::build`]: on Linux, the CPUs of that thread's affinity
    /// mask (as `taskset -c 0` or a container's cpuset restricts it), and no more than the
    /// process's cgroup CPU quota allows (cgroup v2's `cpu.max` or v1's `cpu.cfs_quota_us`,
    /// in whole CPUs rounded down, at least 1). So a program run under `taskset -c 0` gets
    /// one worker, not one per CPU of the machine. Where the count cannot be determined, one
    /// worker.
    ///
    /// `MAGPIE_WORKER_THREADS` is read by [`Builder::build`], and only when no count was set
    /// with [`Builder::worker_threads`]. Spaces around the number are ignored. Then:
    ///
    /// - a whole number from 1 to [`MAX_WORKERS`] is the worker count;
    /// - a number above [`MAX_WORKERS`] (`70000`, or one too large for a `usize`) makes
    ///   [`Builder::build`] fail with [`BuildError::WorkerThreadsEnvTooLarge`], as the same
    ///   count given to [`Builder::worker_threads`] would;
    /// - anything else (unset, empty, `0`, `-1`, `abc`) means one worker per available CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// // Run as `MAGPIE_WORKER_THREADS=100000 my-program`:
    /// # std::env::set_var("MAGPIE_WORKER_THREADS", "100000");
    /// let err = magpie::Runtime::builder().build().unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::WorkerThreadsEnvTooLarge { .. }));
    /// assert!(err.to_string().starts_with("MAGPIE_WORKER_THREADS is 100000"));
    /// // A count set here wins over the environment.
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// assert_eq!(rt.num_workers(), 2);
    /// ```
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Sets the number of worker threads, instead of one per CPU or `MAGPIE_WORKER_THREADS`
    /// (see [`Builder::new`]). 0 or more than [`MAX_WORKERS`] makes [`Builder::build`] fail.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(3).build()?;
    /// assert_eq!(rt.num_workers(), 3);
    ///
    /// let err = magpie::Runtime::builder().worker_threads(0).build().unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::ZeroWorkers));
    /// # Ok::<(), magpie::BuildError>(())
    /// ```
    pub fn worker_threads(mut self, count: usize) -> Builder {
        self.worker_threads = Some(count);
        self
    }

    /// Names the worker threads `{name}-{index}` (by default `magpie-worker-{index}`). The
    /// same name prefixes the blocking pool's threads (`{name}-blocking-{index}`) and the
    /// stall monitor's (`{name}-monitor`). A name with a NUL byte makes [`Builder::build`]
    /// fail with [`BuildError::InvalidThreadName`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .thread_name("crunch")
    ///     .build()?;
    /// let name = rt.install(|| std::thread::current().name().map(str::to_owned));
    /// assert_eq!(name.as_deref(), Some("crunch-0"));
    /// # Ok::<(), magpie::BuildError>(())
    /// ```
    pub fn thread_name(mut self, name: impl Into<String>) -> Builder {
        self.thread_name = Some(name.into());
        self
    }

    /// Sets each worker thread's stack size in bytes, and each blocking thread's. Deeply
    /// recursive `join` code may need more than the platform default.
    ///
    /// A size below [`MIN_STACK_SIZE`] (0 included) or above `isize::MAX` makes
    /// [`Builder::build`] fail with [`BuildError::InvalidStackSize`]; a size in range that
    /// the OS cannot provide makes it fail with [`BuildError::Spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// let err = magpie::Runtime::builder().stack_size(0).build().unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::InvalidStackSize { requested: 0 }));
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Caps the threads of the blocking pool ([`Runtime::spawn_blocking`]); default 512.
    /// Closures beyond the cap wait for a thread. 0 makes [`Builder::build`] fail.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().max_blocking_threads(4).build().unwrap();
    /// assert_eq!(rt.spawn_blocking(|| 1).join().unwrap(), 1);
    /// ```
    pub fn max_blocking_threads(mut self, count: usize) -> Builder {
        self.max_blocking_threads = Some(count);
        self
    }

    /// How long an idle blocking thread waits for work before it exits; default 10 s.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = magpie::Runtime::builder()
    ///     .blocking_keep_alive(Duration::from_millis(100))
    ///     .build()
    ///     .unwrap();
    /// # drop(rt);
    /// ```
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Builder {
        self.blocking_keep_alive = Some(keep_alive);
        self
    }

    /// Sets how many workers the runtime can have, for
    /// [`Runtime::set_active_workers`](crate::Runtime::set_active_workers). All of them are
    /// started; those beyond [`worker_threads`](Builder::worker_threads) stay parked until
    /// activated. Default: the worker thread count. Fewer than the worker threads makes
    /// [`Builder::build`] fail.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).max_workers(4).build().unwrap();
    /// assert_eq!((rt.active_workers(), rt.num_workers()), (2, 4));
    /// rt.set_active_workers(4).unwrap();
    /// assert_eq!(rt.active_workers(), 4);
    /// ```
    pub fn max_workers(mut self, count: usize) -> Builder {
        self.max_workers = Some(count);
        self
    }

    /// Lets the runtime start up to `count` extra *compensation workers* while every worker
    /// is stalled (stuck in one poll or job for longer than the stall threshold), for as
    /// long as the stall lasts; they stop taking work when it ends. Go's scheduler does the
    /// same when a thread blocks in a system call, and .NET's thread pool when its threads
    /// block. Default 0: off.
    ///
    /// The runtime starts a thread for each of them when it is built, switched off (parked,
    /// taking no work), so that none has to be created when a stall is under way.
    /// Compensation workers are not counted by [`Runtime::num_workers`] nor
    /// [`Runtime::active_workers`], and [`Runtime::set_active_workers`] does not reach them;
    /// [`Runtime::stats`] lists them after the ordinary workers, each with
    /// [`WorkerStats::compensation`](crate::WorkerStats::compensation) set, and
    /// [`Stats::compensation_workers_active`](crate::Stats::compensation_workers_active) and
    /// [`Stats::compensation_workers_started`](crate::Stats::compensation_workers_started)
    /// count them. Ordinary workers plus compensation workers beyond [`MAX_WORKERS`] make
    /// [`Builder::build`] fail with [`BuildError::TooManyCompensationWorkers`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .max_compensation_workers(1)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!((rt.num_workers(), rt.active_workers()), (2, 2));
    /// let stats = rt.stats();
    /// assert!(stats.workers[2].compensation && !stats.workers[2].active);
    /// assert_eq!(stats.compensation_workers_active, 0);
    ///
    /// let err = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .max_compensation_workers(magpie::MAX_WORKERS)
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::TooManyCompensationWorkers { .. }));
    /// ```
    pub fn max_compensation_workers(mut self, count: usize) -> Builder {
        self.max_compensation_workers = count;
        self
    }

    /// Divides the workers into `groups` steal groups of consecutive workers: a thief tries
    /// the workers of its own group first, then the others (hierarchical stealing, for
    /// machines where some cores share a cache or a memory node and others do not).
    ///
    /// By default, on Linux, the groups follow the machine: one per NUMA node if there are
    /// several, else one per last-level cache if there are several (read from sysfs), and
    /// then each worker is also kept on its group's CPUs; elsewhere, or on a machine with one
    /// node and one shared cache, there is one group. Groups set here are not tied to CPUs.
    /// `groups` must be between 1 and the number of workers, or [`Builder::build`] fails.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(4).steal_groups(2).build().unwrap();
    /// let groups: Vec<u64> = rt.stats().workers.iter().map(|w| w.steal_group).collect();
    /// assert_eq!(groups, [0, 0, 1, 1]);
    /// ```
    pub fn steal_groups(mut self, groups: usize) -> Builder {
        self.steal_groups = Some(groups);
        self
    }

    /// Records scheduler events (task polls, jobs, waits in `join`, steals, parks, inject
    /// pulls) in one ring buffer per worker, for
    /// [`Runtime::trace_export`](crate::Runtime::trace_export). Off by default, unless the
    /// environment variable `MAGPIE_TRACE` is `1`; when off, nothing is recorded and the cost
    /// is one predictable branch where an event could be.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).trace(true).build().unwrap();
    /// rt.submit(|| ()).join().unwrap();
    /// let path = std::env::temp_dir().join(format!("magpie-doc-{}.json", std::process::id()));
    /// rt.trace_export(&path).unwrap();
    /// assert!(std::fs::read_to_string(&path).unwrap().contains("traceEvents"));
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn trace(mut self, enabled: bool) -> Builder {
        self.trace = Some(enabled);
        self
    }

    /// How many events each worker's trace ring keeps (rounded up to a power of two); the
    /// oldest are overwritten. Default 65,536 (1 MiB per worker, 16 bytes an event). More
    /// than 2^24 events (256 MiB per worker) makes [`Builder::build`] fail with
    /// [`BuildError::InvalidTraceCapacity`].
    ///
    /// The rings are allocated when the runtime is built, one per worker (per
    /// [`max_workers`](Builder::max_workers) worker), so with tracing on [`Builder::build`]
    /// also checks their total: more than 4 GiB (2^28 events) in all, say the default ring on
    /// more than 4,096 workers, makes it fail with [`BuildError::TraceMemoryTooLarge`]
    /// before anything is allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = magpie::Runtime::builder().trace_capacity(usize::MAX).build().unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::InvalidTraceCapacity { .. }));
    ///
    /// // 64 rings of 256 MiB would be 16 GiB.
    /// let err = magpie::Runtime::builder()
    ///     .worker_threads(64)
    ///     .trace(true)
    ///     .trace_capacity(1 << 24)
    ///     .build()
    ///     .unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::TraceMemoryTooLarge { workers: 64, .. }));
    /// ```
    pub fn trace_capacity(mut self, events: usize) -> Builder {
        self.trace_capacity = Some(events);
        self
    }

    /// Records how long each task poll takes, in the buckets of
    /// [`WorkerStats::poll_time_histogram`](crate::WorkerStats::poll_time_histogram). Off by
    /// default (as in tokio): it reads the clock twice per poll.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).poll_time_histogram(true).build().unwrap();
    /// rt.submit(|| ()).join().unwrap();
    /// rt.install(|| ()); // the one worker is past the poll's end, where it is counted
    /// assert_eq!(rt.stats().poll_time_histogram().iter().sum::<u64>(), 1);
    /// ```
    pub fn poll_time_histogram(mut self, enabled: bool) -> Builder {
        self.poll_time_histogram = enabled;
        self
    }

    /// Keeps counters for every task, for [`Runtime::tasks`]: each
    /// [`TaskInfo`](crate::task::TaskInfo) then has [`TaskCounters`](crate::task::TaskCounters)
    /// (polls, total and longest poll time, age, time since the last poll). Off by default,
    /// because it costs: a second allocation per spawn for the counters (a task's own
    /// allocation does not grow, see ARCHITECTURE.md, "Task identity and the live-task
    /// dump"), and two clock reads per poll, which on a `yield_many`-like load (a poll of
    /// about 25 ns) cost more than the poll. Named tasks keep counters on any runtime, but
    /// their polls are timed only where polls are timed anyway (here, or with the poll-time
    /// histogram or the trace).
    ///
    /// Without it, [`Runtime::tasks`] still lists every task with its id, spawn location,
    /// name and state.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
    /// let (started, wait) = std::sync::mpsc::channel();
    /// let task = rt.spawn(async move {
    ///     started.send(()).unwrap();
    ///     std::future::pending::<()>().await
    /// });
    /// wait.recv().unwrap();
    /// rt.install(|| ()); // the one worker is past the poll's end
    /// let info = rt.tasks().into_iter().find(|t| t.id == task.id()).unwrap();
    /// let counters = info.counters.unwrap();
    /// assert_eq!(counters.polls, 1);
    /// assert_eq!(counters.busy_ns, counters.longest_poll_ns); // one poll: longest = total
    /// ```
    pub fn task_insight(mut self, enabled: bool) -> Builder {
        self.task_insight = enabled;
        self
    }

    /// Calls `hook` for every task spawned on the runtime (by `spawn`, `submit`,
    /// `spawn_blocking` and their relatives), on the spawning thread, before the task is
    /// queued.
    ///
    /// A panic in the hook is caught and dropped: the spawn goes on. The hook runs inside
    /// whatever called the spawn, so it should be quick and must not block. A spawn refused
    /// because the runtime is shutting down (its handle resolves as cancelled) runs neither
    /// this hook nor the terminate hook.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let spawned = Arc::new(AtomicUsize::new(0));
    /// let count = spawned.clone();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .on_task_spawn(move |_meta| {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// rt.submit(|| ()).join().unwrap();
    /// assert_eq!(spawned.load(Ordering::Relaxed), 1);
    /// ```
    pub fn on_task_spawn<F>(mut self, hook: F) -> Builder
    where
        F: Fn(&TaskMeta<'_>) + Send + Sync + 'static,
    {
        self.on_task_spawn = Some(TaskHook::new(hook));
        self
    }

    /// Calls `hook` once for every task of the runtime that terminates: completes, panics,
    /// or is cancelled (by `abort` or by the runtime's shutdown). It runs on the thread that
    /// finishes the task (a worker, a blocking thread, or the thread dropping the runtime),
    /// before the task
    /// leaves the runtime's live-task list, so after [`Runtime::wait_idle`] every finished
    /// task's hook has run.
    ///
    /// A panic in the hook is caught and dropped: the task still completes, its handle
    /// still resolves. The hook may spawn (a supervisor restarting what ended): while the
    /// runtime shuts down those spawns are refused, without hooks, so that ends.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// let ended = Arc::new(Mutex::new(Vec::new()));
    /// let log = ended.clone();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .on_task_terminate(move |meta| log.lock().unwrap().push(meta.id()))
    ///     .build()
    ///     .unwrap();
    /// let handle = rt.submit(|| ());
    /// let id = handle.id();
    /// drop(handle);
    /// rt.wait_idle();
    /// assert_eq!(*ended.lock().unwrap(), [id]);
    /// ```
    pub fn on_task_terminate<F>(mut self, hook: F) -> Builder
    where
        F: Fn(&TaskMeta<'_>) + Send + Sync + 'static,
    {
        self.on_task_terminate = Some(TaskHook::new(hook));
        self
    }

    /// What the runtime does when a task panics and nobody holds its `JoinHandle` (see
    /// [`UnhandledPanic`]; the default is [`UnhandledPanic::Ignore`]). A panic is unhandled
    /// when the task finishes with it while its handle is gone: dropped before the task
    /// finished, or during the poll that panicked. (Tokio's unstable option of the same
    /// name also counts panics whose handle is still held; magpie delivers those to the
    /// handle.)
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::UnhandledPanic;
    ///
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .unhandled_panic(UnhandledPanic::ShutdownRuntime)
    ///     .build()
    ///     .unwrap();
    /// // A handle that is held gets the panic; the runtime runs on.
    /// let err = rt.spawn(async { panic!("seen") }).join().unwrap_err();
    /// assert!(err.is_panic());
    /// assert_eq!(rt.block_on(async { 1 }), 1);
    /// ```
    pub fn unhandled_panic(mut self, response: UnhandledPanic) -> Builder {
        self.unhandled_panic = response;
        self
    }

    /// Makes every parked worker wake on its own after `timeout` at the latest and look for
    /// work, as if someone had woken it. A debugging aid, off by default.
    ///
    /// By default a parked worker sleeps until somebody wakes it (new work, a timer it
    /// drives, readiness, shutdown): the sleep protocol loses no wakeup (its proof is in
    /// `sleep/README.md`), so an idle pool costs no CPU. Should a program hang with work
    /// queued and every worker parked, a timeout here that makes the hang a pause points at
    /// a lost wakeup in magpie. There is no reason to set it otherwise, hence its absence from
    /// the documentation. (Until issue 19 a 1 s timeout was the default; a 130-worker pool
    /// spent about 10 ms of CPU per idle second on it.)
    #[doc(hidden)]
    pub fn park_safety_net(mut self, timeout: Duration) -> Builder {
        self.park_safety_net = Some(timeout);
        self
    }

    /// Makes the rules that depend on the machine's size count `cpus` CPUs instead of the
    /// process's available parallelism: the wake rules R1b and R1c in `sleep/README.md` (a
    /// wake beyond the tokio-like rule only while fewer workers are awake than CPUs), and
    /// the choice of [`BarrierMode::Auto`] (symmetric above
    /// [`AUTO_ASYMMETRIC_MAX_CPUS`](crate::AUTO_ASYMMETRIC_MAX_CPUS)). A testing aid, so that
    /// a small machine runs the wakes and fences a large one would (the tests check that no
    /// task is lost or run twice with them); hence its absence from the documentation. 0
    /// counts as 1.
    #[doc(hidden)]
    pub fn assume_cpus(mut self, cpus: usize) -> Builder {
        self.assumed_cpus = Some(cpus);
        self
    }

    /// Whether a long piece of a parallel iterator hands half of its rest to a worker that
    /// runs out of work (rule 5 of `iter/plumbing/bridge.rs`): on unless turned off here or,
    /// without a call here, by the environment variable `MAGPIE_SPLIT_ON_DEMAND=0`. A
    /// measuring aid, for an A/B of the rule in one binary on a machine whose cores this
    /// project lacks; hence its absence from the documentation.
    #[doc(hidden)]
    pub fn split_on_demand(mut self, on: bool) -> Builder {
        self.split_on_demand = Some(on);
        self
    }

    /// Whether every split of a parallel iterator offers its second half to the pool
    /// (`iter/plumbing/README.md`, "Every split is offered"), or only while the worker offers
    /// fewer than three jobs, as `join` does: on unless turned off here or, without a call
    /// here, by the environment variable `MAGPIE_OFFER_EVERY_SPLIT=0`. A measuring aid, for an
    /// A/B in one binary on a machine with the cores where it matters (8 workers or more);
    /// hence its absence from the documentation.
    #[doc(hidden)]
    pub fn offer_every_split(mut self, on: bool) -> Builder {
        self.offer_every_split = Some(on);
        self
    }

    /// [`Builder::offer_every_split`] as set, else `MAGPIE_OFFER_EVERY_SPLIT` (`0` turns it
    /// off), else on.
    pub(super) fn resolved_offer_every_split(&self) -> bool {
        switch_or_env(self.offer_every_split, "MAGPIE_OFFER_EVERY_SPLIT")
    }

    /// Makes every look of rule 5 (`iter/plumbing/bridge.rs`) find a starving worker, so that
    /// a test drives the hand-over of a long piece through every consumer at every chunk,
    /// whatever the timing.
    #[cfg(test)]
    pub(crate) fn starving_always(mut self) -> Builder {
        self.starving_always = true;
        self
    }

    /// [`Builder::split_on_demand`] as set, else `MAGPIE_SPLIT_ON_DEMAND` (`0` turns it off),
    /// else on.
    pub(super) fn resolved_split_on_demand(&self) -> bool {
        switch_or_env(self.split_on_demand, "MAGPIE_SPLIT_ON_DEMAND")
    }

    /// The CPUs the wake rules count: [`Builder::assume_cpus`], or the available parallelism.
    pub(super) fn resolved_cpus(&self) -> usize {
        self.assumed_cpus.unwrap_or_else(available_parallelism)
    }

    /// How the workers order their work-stealing deques and their sleep protocol against
    /// each other (see [`BarrierMode`]). The default, [`BarrierMode::Auto`], picks the
    /// asymmetric mode (a compiler fence on every published `join`, a `membarrier` system
    /// call on every steal and park) on up to
    /// [`AUTO_ASYMMETRIC_MAX_CPUS`](crate::AUTO_ASYMMETRIC_MAX_CPUS) CPUs, where steals are
    /// rare and each `membarrier` interrupts few CPUs, and the symmetric one
    /// (`fence(SeqCst)` on both sides) above. Without a mode set here, the environment
    /// variable `MAGPIE_BARRIER` (`auto`, `asymmetric`, `symmetric`) chooses; another value
    /// makes [`Builder::build`] fail with [`BuildError::InvalidBarrierEnv`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::BarrierMode;
    ///
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .barrier(BarrierMode::Symmetric)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(rt.barrier_mode(), BarrierMode::Symmetric);
    /// assert_eq!(magpie::join(|| 1, || 2), (1, 2));
    /// ```
    pub fn barrier(mut self, mode: BarrierMode) -> Builder {
        self.barrier = Some(mode);
        self
    }

    /// How long one unit of work (a task poll, a job, a submitted closure) may run on a
    /// worker before it counts as a *stall*; `None` (or a zero duration) turns stall
    /// detection off. Without a call here the environment variable
    /// `MAGPIE_STALL_THRESHOLD_MS` decides (a number of milliseconds; `0` or `off` turns it
    /// off; anything else makes [`Builder::build`] fail with
    /// [`BuildError::InvalidStallThresholdEnv`]), else the default, 100 ms.
    ///
    /// With detection on, the runtime runs one more thread, the *stall monitor*, which
    /// samples the workers every quarter threshold while any of them is awake and sleeps
    /// while the pool is idle. A stall is counted ([`WorkerStats::stalls`],
    /// [`WorkerStats::longest_stall_ns`]), drawn in the trace, and reported once to the
    /// [`on_stall`](Builder::on_stall) hook (by default, one line on stderr at most once per
    /// task per second, for a task's stall only: see below); meanwhile the tasks queued on
    /// the stalled worker are moved to the global queue, where the other workers, busy or
    /// not, find them.
    ///
    /// A fork-join computation that one worker runs inline (`join` after `join`, without
    /// waiting for a stolen half) is one unit of work: a long `install` or parallel
    /// iterator is one stall of a job, with no task identity. Since fork-join work runs long
    /// by design, the default reporter prints nothing for a job's stall; it is counted,
    /// traced and given to an `on_stall` hook like any other.
    ///
    /// [`WorkerStats::stalls`]: crate::WorkerStats::stalls
    /// [`WorkerStats::longest_stall_ns`]: crate::WorkerStats::longest_stall_ns
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(|info| eprintln!("{info}"))
    ///     .build()
    ///     .unwrap();
    /// rt.submit(|| std::thread::sleep(Duration::from_millis(60))).join().unwrap();
    /// # let _ = rt.stats().workers.iter().map(|w| w.stalls).sum::<u64>();
    ///
    /// let quiet = magpie::Runtime::builder().stall_threshold(None).build().unwrap();
    /// assert_eq!(quiet.stats().monitor_samples, 0);
    /// ```
    pub fn stall_threshold(mut self, threshold: impl Into<Option<Duration>>) -> Builder {
        self.stall_threshold = Some(threshold.into());
        self
    }

    /// Sets the function called once per stall (see [`Builder::stall_threshold`]), with the
    /// stalled worker, the task's id, name and spawn location (`None`s for a job) and how
    /// long it has run. It runs on the stall monitor's thread while the stall lasts; a panic
    /// in it is caught and dropped, and detection goes on. Replaces the default reporter
    /// (one line on stderr for a task's stall, at most once per task per second, and none
    /// for a job's). The hook hears of both.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let stalls = Arc::new(AtomicU64::new(0));
    /// let seen = stalls.clone();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |_info: &magpie::StallInfo| {
    ///         seen.fetch_add(1, Relaxed);
    ///     })
    ///     .build()
    ///     .unwrap();
    /// // A closure that blocks its worker until the hook has heard of it.
    /// let watched = stalls.clone();
    /// rt.submit(move || {
    ///     while watched.load(Relaxed) == 0 {
    ///         std::thread::yield_now();
    ///     }
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(stalls.load(Relaxed), 1);
    /// ```
    pub fn on_stall<F>(mut self, hook: F) -> Builder
    where
        F: Fn(&StallInfo) + Send + Sync + 'static,
    {
        self.on_stall = Some(StallHook::new(hook));
        self
    }

    /// Starts the workers.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroWorkers`] or [`BuildError::TooManyWorkers`] for a bad worker
    /// count, [`BuildError::TooManyCompensationWorkers`] for too many compensation workers, [`BuildError::WorkerThreadsEnvTooLarge`] for a `MAGPIE_WORKER_THREADS` above
    /// [`MAX_WORKERS`]; [`BuildError::MaxWorkersBelowWorkers`],
    /// [`BuildError::InvalidStealGroups`], [`BuildError::ZeroBlockingThreads`],
    /// [`BuildError::InvalidStackSize`], [`BuildError::InvalidTraceCapacity`] and
    /// [`BuildError::TraceMemoryTooLarge`] for the other settings out of range; [`BuildError::InvalidThreadName`] for a name with a NUL
    /// byte; [`BuildError::Spawn`] if the OS refused a thread, in which case the threads
    /// already started have been stopped and joined. Nothing is started unless every
    /// setting is valid.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = magpie::Runtime::builder().worker_threads(0).build().unwrap_err();
    /// assert!(matches!(err, magpie::BuildError::ZeroWorkers));
    /// ```
    pub fn build(mut self) -> Result<Runtime, BuildError> {
        // Read the environment once, here, so that what it says is checked before anything
        // is started.
        if self.worker_threads.is_none() {
            self.worker_threads = Some(default_worker_threads()?);
        }
        Runtime::start(self)
    }

    /// Builds the global default runtime that the free functions ([`join`](fn@crate::join),
    /// [`scope`](crate::scope)) use outside any worker.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`], and [`BuildError::GlobalAlreadyInitialized`] if the global
    /// runtime exists already (it is created on first use).
    ///
    /// # Examples
    ///
    /// ```
    /// // In `main`, before any parallel work:
    /// let _ = magpie::Runtime::builder().worker_threads(2).build_global();
    /// assert_eq!(magpie::join(|| 1, || 2), (1, 2));
    /// ```
    pub fn build_global(self) -> Result<(), BuildError> {
        super::global::init(self)
    }

    /// The stack size, if one was set, checked against [`MIN_STACK_SIZE`] and
    /// [`MAX_STACK_SIZE`].
    pub(super) fn checked_stack_size(&self) -> Result<Option<usize>, BuildError> {
        match self.stack_size {
            Some(bytes) if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&bytes) => {
                Err(BuildError::InvalidStackSize { requested: bytes })
            }
            other => Ok(other),
        }
    }

    /// The trace ring capacity, if one was set, checked against [`MAX_TRACE_CAPACITY`]; and,
    /// if tracing is on, the rings of all workers together against [`MAX_TRACE_BYTES`]. Run
    /// by [`Runtime::start`] once the worker counts are known to be valid, before anything
    /// is allocated.
    pub(super) fn checked_trace_capacity(&self) -> Result<Option<usize>, BuildError> {
        if let Some(events) = self.trace_capacity {
            if events > MAX_TRACE_CAPACITY {
                return Err(BuildError::InvalidTraceCapacity { requested: events });
            }
        }
        if self.resolved_trace() {
            // A ring per worker, active or not, compensation slots included, rounded as
            // `TraceBuffer::new` rounds it. Run after the worker counts were checked, so
            // the sum does not overflow.
            let workers = self
                .max_workers
                .unwrap_or(0)
                .max(self.resolved_worker_threads())
                + self.max_compensation_workers;
            let events_per_worker = self
                .trace_capacity
                .unwrap_or(crate::stats::trace::DEFAULT_CAPACITY)
                .max(2)
                .next_power_of_two();
            // At most 2^16 workers × 2^24 events × 16 bytes = 2^44: no overflow in a u64.
            let bytes = workers as u64 * events_per_worker as u64 * TRACE_EVENT_BYTES;
            if bytes > MAX_TRACE_BYTES {
                return Err(BuildError::TraceMemoryTooLarge {
                    workers,
                    events_per_worker,
                });
            }
        }
        Ok(self.trace_capacity)
    }

    /// The worker thread count. [`Builder::build`] has set it, from the environment if need
    /// be, before [`Runtime::start`] asks.
    pub(super) fn resolved_worker_threads(&self) -> usize {
        self.worker_threads.unwrap_or_else(available_parallelism)
    }

    /// The barrier mode asked for: as set, else `MAGPIE_BARRIER`, else `Auto`.
    pub(super) fn resolved_barrier(&self) -> Result<BarrierMode, BuildError> {
        if let Some(mode) = self.barrier {
            return Ok(mode);
        }
        match std::env::var("MAGPIE_BARRIER") {
            Ok(value) => BarrierMode::parse(&value).ok_or(BuildError::InvalidBarrierEnv {
                value: value.chars().take(40).collect(),
            }),
            // Set, but not Unicode: as wrong as any other bad value, not a silent default.
            Err(std::env::VarError::NotUnicode(value)) => Err(BuildError::InvalidBarrierEnv {
                value: value.to_string_lossy().chars().take(40).collect(),
            }),
            Err(std::env::VarError::NotPresent) => Ok(BarrierMode::Auto),
        }
    }

    /// The stall threshold: as set, else `MAGPIE_STALL_THRESHOLD_MS`, else the default;
    /// `None` when detection is off.
    pub(super) fn resolved_stall_threshold(&self) -> Result<Option<Duration>, BuildError> {
        let threshold = match self.stall_threshold {
            _ if cfg!(magpie_no_insight) => None,
            Some(threshold) => threshold,
            None => match std::env::var("MAGPIE_STALL_THRESHOLD_MS") {
                Ok(value) => stall_threshold_env(&value)?,
                // Set, but not Unicode: an error, as for any value that is not a number.
                Err(std::env::VarError::NotUnicode(value)) => {
                    return Err(BuildError::InvalidStallThresholdEnv {
                        value: value.to_string_lossy().chars().take(40).collect(),
                    })
                }
                Err(std::env::VarError::NotPresent) => DEFAULT_STALL_THRESHOLD,
            },
        };
        Ok(threshold.filter(|t| !t.is_zero()))
    }

    /// Whether tracing is on: as set, else `MAGPIE_TRACE=1`.
    pub(super) fn resolved_trace(&self) -> bool {
        self.trace
            .unwrap_or_else(|| std::env::var("MAGPIE_TRACE").is_ok_and(|v| v.trim() == "1"))
    }
}

/// The worker count when none was set: `MAGPIE_WORKER_THREADS`, else the available
/// parallelism (the rules are in [`Builder::new`]'s doc).
fn default_worker_threads() -> Result<usize, BuildError> {
    let from_env = match std::env::var("MAGPIE_WORKER_THREADS") {
        Ok(value) => worker_threads_env(&value)?,
        Err(_) => None,
    };
    Ok(from_env.unwrap_or_else(available_parallelism))
}

/// One worker per CPU this thread may use: `std`'s count honours the affinity mask and (on
/// Linux) the cgroup CPU quota (see [`Builder::new`]); 1 if it cannot tell.
pub(crate) fn available_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a `MAGPIE_WORKER_THREADS` of `value` asks for: `Some(count)`, `None` for the
/// default, or an error for a count above [`MAX_WORKERS`].
fn worker_threads_env(value: &str) -> Result<Option<usize>, BuildError> {
    let value = value.trim();
    let too_large = || BuildError::WorkerThreadsEnvTooLarge {
        value: value.to_owned(),
    };
    match value.parse::<usize>() {
        Ok(0) => Ok(None),
        Ok(count) if count <= MAX_WORKERS => Ok(Some(count)),
        Ok(_) => Err(too_large()),
        Err(err) if *err.kind() == std::num::IntErrorKind::PosOverflow => Err(too_large()),
        Err(_) => Ok(None),
    }
}

/// A hidden on/off switch of the builder (a measuring aid): as set, else off only when the
/// environment variable `var` is `0` (spaces around it ignored), else on.
fn switch_or_env(set: Option<bool>, var: &str) -> bool {
    set.unwrap_or_else(|| std::env::var(var).map_or(true, |v| v.trim() != "0"))
}

/// What a `MAGPIE_STALL_THRESHOLD_MS` of `value` asks for: a threshold, or `None` (`0`,
/// `off`) for no detection.
fn stall_threshold_env(value: &str) -> Result<Option<Duration>, BuildError> {
    let trimmed = value.trim();
    if trimmed.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match trimmed.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(Duration::from_millis(ms))),
        Err(_) => Err(BuildError::InvalidStallThresholdEnv {
            value: trimmed.chars().take(40).collect(),
        }),
    }
}

/// Why a runtime could not be built.
///
/// Returned by [`Builder::build`] and [`Builder::build_global`]. More variants may come
/// (the enum is `#[non_exhaustive]`), so a `match` needs a wildcard arm.
///
/// # Examples
///
/// ```
/// use magpie::{BuildError, Runtime};
///
/// let err = Runtime::builder().worker_threads(4).max_workers(2).build().unwrap_err();
/// match err {
///     BuildError::MaxWorkersBelowWorkers { workers, max } => assert_eq!((workers, max), (4, 2)),
///     other => panic!("unexpected error: {other}"),
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `worker_threads(0)`: a runtime needs at least one worker.
    ZeroWorkers,
    /// More workers than [`MAX_WORKERS`].
    TooManyWorkers {
        /// The count asked for.
        requested: usize,
    },
    /// No worker count was set and the environment variable `MAGPIE_WORKER_THREADS` asks for
    /// more than [`MAX_WORKERS`] (see [`Builder::new`]).
    WorkerThreadsEnvTooLarge {
        /// The variable's value, without the spaces around it.
        value: String,
    },
    /// The OS refused to start worker `index` (or, with `index` equal to the worker count,
    /// the stall monitor's thread); the threads already started were stopped.
    Spawn {
        /// The worker that failed to start.
        index: usize,
        /// The OS error.
        source: io::Error,
    },
    /// [`Builder::build_global`] was called after the global runtime was created.
    GlobalAlreadyInitialized,
    /// The thread name given to [`Builder::thread_name`] contains a NUL byte, which no OS
    /// accepts in a thread name.
    InvalidThreadName,
    /// `max_blocking_threads(0)`: the blocking pool needs at least one thread.
    ZeroBlockingThreads,
    /// [`Builder::max_workers`] is below the worker thread count.
    MaxWorkersBelowWorkers {
        /// The worker thread count.
        workers: usize,
        /// The maximum asked for.
        max: usize,
    },
    /// [`Builder::max_compensation_workers`] plus the ordinary workers (the maximum, with
    /// [`Builder::max_workers`]) is more than [`MAX_WORKERS`].
    TooManyCompensationWorkers {
        /// The ordinary workers.
        workers: usize,
        /// The compensation workers asked for.
        compensation: usize,
    },
    /// [`Builder::steal_groups`] outside 1 to the number of workers.
    InvalidStealGroups {
        /// The group count asked for.
        groups: usize,
        /// The number of workers (the maximum, with [`Builder::max_workers`]).
        workers: usize,
    },
    /// [`Builder::stack_size`] below [`MIN_STACK_SIZE`] or above `isize::MAX` bytes.
    InvalidStackSize {
        /// The stack size asked for, in bytes.
        requested: usize,
    },
    /// [`Builder::trace_capacity`] above 2^24 events.
    InvalidTraceCapacity {
        /// The capacity asked for, in events.
        requested: usize,
    },
    /// With tracing on, the trace rings of all workers together would take more than 4 GiB
    /// (see [`Builder::trace_capacity`]).
    TraceMemoryTooLarge {
        /// The workers, each with a ring (the maximum, with [`Builder::max_workers`]).
        workers: usize,
        /// The events each ring would hold, rounded up to a power of two.
        events_per_worker: usize,
    },
    /// The OS refused to create the I/O driver (an epoll instance and its wakeup
    /// descriptor): typically the process is out of file descriptors.
    Io(io::Error),
    /// No barrier mode was set and the environment variable `MAGPIE_BARRIER` is not one of
    /// `auto`, `asymmetric`, `symmetric` (see [`Builder::barrier`]).
    InvalidBarrierEnv {
        /// The variable's value (its first 40 characters).
        value: String,
    },
    /// No stall threshold was set and the environment variable `MAGPIE_STALL_THRESHOLD_MS`
    /// is neither a number of milliseconds nor `off` (see [`Builder::stall_threshold`]).
    InvalidStallThresholdEnv {
        /// The variable's value, without the spaces around it (its first 40 characters).
        value: String,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroWorkers => f.write_str("a runtime needs at least one worker thread"),
            BuildError::TooManyWorkers { requested } => {
                write!(
                    f,
                    "{requested} worker threads requested; at most {MAX_WORKERS} are supported"
                )
            }
            BuildError::WorkerThreadsEnvTooLarge { value } => {
                // A number, but perhaps a page of digits.
                let shown: String = value.chars().take(40).collect();
                let cut = if shown.len() < value.len() { "…" } else { "" };
                write!(
                    f,
                    "MAGPIE_WORKER_THREADS is {shown}{cut}; at most {MAX_WORKERS} worker threads \
                     are supported"
                )
            }
            BuildError::Spawn { index, source } => {
                write!(f, "could not start worker thread {index}: {source}")
            }
            BuildError::GlobalAlreadyInitialized => {
                f.write_str("the global runtime has already been initialized")
            }
            BuildError::Io(source) => write!(f, "could not create the I/O driver: {source}"),
            BuildError::InvalidBarrierEnv { value } => write!(
                f,
                "MAGPIE_BARRIER is {value:?}; use auto, asymmetric or symmetric"
            ),
            BuildError::InvalidStallThresholdEnv { value } => write!(
                f,
                "MAGPIE_STALL_THRESHOLD_MS is {value:?}; use a number of milliseconds, or 0 or off"
            ),
            BuildError::InvalidThreadName => f.write_str("thread names may not contain NUL bytes"),
            BuildError::ZeroBlockingThreads => {
                f.write_str("the blocking pool needs at least one thread")
            }
            BuildError::MaxWorkersBelowWorkers { workers, max } => write!(
                f,
                "max_workers({max}) is below the {workers} worker threads"
            ),
            BuildError::TooManyCompensationWorkers {
                workers,
                compensation,
            } => write!(
                f,
                "{workers} workers and {compensation} compensation workers requested; at most \
                 {MAX_WORKERS} in all are supported"
            ),
            BuildError::InvalidStealGroups { groups, workers } => write!(
                f,
                "{groups} steal groups requested for {workers} workers; use 1 to {workers}"
            ),
            BuildError::InvalidStackSize { requested } => write!(
                f,
                "a stack of {requested} bytes requested; use {MIN_STACK_SIZE} to {MAX_STACK_SIZE} bytes"
            ),
            BuildError::InvalidTraceCapacity { requested } => write!(
                f,
                "a trace ring of {requested} events requested; at most {MAX_TRACE_CAPACITY} are supported"
            ),
            BuildError::TraceMemoryTooLarge {
                workers,
                events_per_worker,
            } => {
                let mib = |bytes: u64| bytes >> 20;
                let total = *workers as u64 * *events_per_worker as u64 * TRACE_EVENT_BYTES;
                write!(
                    f,
                    "tracing {workers} workers with rings of {events_per_worker} events would \
                     take {} MiB; at most {} MiB in all are supported (lower trace_capacity or \
                     the worker count)",
                    mib(total),
                    mib(MAX_TRACE_BYTES)
                )
            }
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn { source, .. } | BuildError::Io(source) => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_rings_of_all_workers_together_are_capped() {
        // Issue 18 item 10: 65,536 workers asked for 64 GiB of rings, and aborted on
        // allocation where memory was limited.
        let traced = |workers| Builder::new().worker_threads(workers).trace(true);
        let err = traced(MAX_WORKERS).checked_trace_capacity().unwrap_err();
        assert!(
            matches!(
                err,
                BuildError::TraceMemoryTooLarge {
                    workers: MAX_WORKERS,
                    events_per_worker: 65536
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "tracing 65536 workers with rings of 65536 events would take 65536 MiB; at most \
             4096 MiB in all are supported (lower trace_capacity or the worker count)"
        );
        // The default ring on 4,096 workers is the most; a smaller ring allows more.
        assert_eq!(traced(4096).checked_trace_capacity().unwrap(), None);
        assert!(traced(4097).checked_trace_capacity().is_err());
        assert!(traced(MAX_WORKERS)
            .trace_capacity(4096)
            .checked_trace_capacity()
            .is_ok());
        // Rings are rounded up to a power of two, and every worker up to max_workers has one.
        assert!(traced(16)
            .trace_capacity(1 << 24)
            .checked_trace_capacity()
            .is_ok());
        assert!(traced(16)
            .trace_capacity((1 << 23) + 1)
            .max_workers(17)
            .checked_trace_capacity()
            .is_err());
        // Without tracing, no ring: nothing to cap.
        assert!(Builder::new()
            .worker_threads(MAX_WORKERS)
            .trace(false)
            .checked_trace_capacity()
            .is_ok());
    }

    #[test]
    fn compensation_counts_against_the_maximum_and_the_trace_memory() {
        let err = Runtime::start(
            Builder::new()
                .worker_threads(2)
                .max_workers(3)
                .max_compensation_workers(MAX_WORKERS - 2),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                BuildError::TooManyCompensationWorkers {
                    workers: 3,
                    compensation
                } if compensation == MAX_WORKERS - 2
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "3 workers and 65534 compensation workers requested; at most 65536 in all are \
             supported"
        );
        // No overflow at the extreme.
        assert!(matches!(
            Runtime::start(
                Builder::new()
                    .worker_threads(1)
                    .max_compensation_workers(usize::MAX)
            ),
            Err(BuildError::TooManyCompensationWorkers { .. })
        ));
        // Each compensation slot has a trace ring too: 4,096 default rings are the most.
        let traced = |workers, compensation| {
            Builder::new()
                .worker_threads(workers)
                .max_compensation_workers(compensation)
                .trace(true)
        };
        assert!(traced(4095, 1).checked_trace_capacity().is_ok());
        assert!(matches!(
            traced(4095, 2).checked_trace_capacity(),
            Err(BuildError::TraceMemoryTooLarge { workers: 4097, .. })
        ));
    }

    #[test]
    fn stall_threshold_from_the_environment() {
        let ms = |n| Some(Duration::from_millis(n));
        for (value, expected) in [
            ("250", ms(250)),
            (" 20\n", ms(20)),
            ("0", None),
            ("off", None),
            ("OFF", None),
        ] {
            assert_eq!(stall_threshold_env(value).unwrap(), expected, "{value:?}");
        }
        for value in ["", "-1", "abc", "2.5", "100ms", "99999999999999999999999"] {
            let err = stall_threshold_env(value).unwrap_err();
            assert!(
                matches!(&err, BuildError::InvalidStallThresholdEnv { value: v } if v == value.trim()),
                "{value:?}: {err:?}"
            );
        }
        assert_eq!(
            stall_threshold_env("abc").unwrap_err().to_string(),
            "MAGPIE_STALL_THRESHOLD_MS is \"abc\"; use a number of milliseconds, or 0 or off"
        );
        // Set on the builder, the variable is not read; zero is off.
        let builder = Builder::new().stall_threshold(Duration::ZERO);
        assert_eq!(builder.resolved_stall_threshold().unwrap(), None);
        let builder = Builder::new().stall_threshold(Duration::from_millis(5));
        assert_eq!(builder.resolved_stall_threshold().unwrap(), ms(5));
    }

    #[test]
    fn worker_threads_from_the_environment() {
        for (value, expected) in [
            ("3", Some(3)),
            (" 5\n", Some(5)),
            ("+7", Some(7)),
            ("65536", Some(MAX_WORKERS)),
            // The default: one worker per CPU.
            ("", None),
            ("0", None),
            ("-1", None),
            ("abc", None),
            ("2.5", None),
        ] {
            assert_eq!(worker_threads_env(value).unwrap(), expected, "{value:?}");
        }
        for value in ["65537", "70000", " 99999999999999999999999999 "] {
            let err = worker_threads_env(value).unwrap_err();
            assert!(
                matches!(&err, BuildError::WorkerThreadsEnvTooLarge { value: v } if v == value.trim()),
                "{value:?}: {err:?}"
            );
        }
        let err = worker_threads_env(&"9".repeat(1000)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "MAGPIE_WORKER_THREADS is {}…; at most 65536 worker threads are supported",
                "9".repeat(40)
            )
        );
    }
}
