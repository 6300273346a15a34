//! What a runtime says about its tasks: [`TaskMeta`] (who a task is, for the spawn and
//! terminate hooks) and [`TaskInfo`] (one row of [`Runtime::tasks`], the live-task dump).
//!
//! Both are read from a task's header (`raw.rs`: `Identity` and `Activity`), without
//! knowing its future's type; ARCHITECTURE.md, "Task identity and the live-task dump", says
//! where each field lives and what keeping it costs.
//!
//! [`Runtime::tasks`]: crate::Runtime::tasks

use std::fmt;
use std::panic::Location;
use std::time::Duration;

use super::id::Id;
use super::raw::Header;
use crate::sync::atomic::Relaxed;

/// Who a task is: its id, name and spawn location, as the runtime's task hooks
/// ([`Builder::on_task_spawn`], [`Builder::on_task_terminate`]) see it.
///
/// [`Builder::on_task_spawn`]: crate::Builder::on_task_spawn
/// [`Builder::on_task_terminate`]: crate::Builder::on_task_terminate
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let rt = magpie::Runtime::builder()
///     .worker_threads(1)
///     .on_task_spawn(move |meta| {
///         let name = meta.name().unwrap_or("-").to_owned();
///         log.lock().unwrap().push((meta.id(), name, meta.location().line()));
///     })
///     .build()
///     .unwrap();
/// let handle = magpie::task::Builder::new().name("answer").spawn_on(async { 42 }, &rt);
/// let line = line!() - 1;
/// let id = handle.id();
/// handle.join().unwrap();
/// assert_eq!(*seen.lock().unwrap(), [(id, "answer".to_owned(), line)]);
/// ```
pub struct TaskMeta<'a> {
    header: &'a Header,
}

impl<'a> TaskMeta<'a> {
    /// The task's meta, for a caller holding a reference to it.
    pub(crate) fn new(header: &'a Header) -> TaskMeta<'a> {
        TaskMeta { header }
    }

    /// The task's id (the same as its [`JoinHandle::id`](crate::JoinHandle::id)).
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
    /// let handle = rt.spawn(async {});
    /// let id = handle.id();
    /// handle.join().unwrap();
    /// rt.wait_idle(); // the terminate hook has run
    /// assert_eq!(*ended.lock().unwrap(), [id]);
    /// ```
    pub fn id(&self) -> Id {
        self.header.identity.id
    }

    /// The name given with [`task::Builder::name`](crate::task::Builder::name), if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// let names = Arc::new(Mutex::new(Vec::new()));
    /// let log = names.clone();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .on_task_spawn(move |meta| log.lock().unwrap().push(meta.name().map(str::to_owned)))
    ///     .build()
    ///     .unwrap();
    /// // The spawn hook runs inside the spawn call, so the order is this thread's.
    /// let named = magpie::task::Builder::new().name("cache-warmer").submit_on(|| (), &rt);
    /// let unnamed = rt.submit(|| ());
    /// named.join().unwrap();
    /// unnamed.join().unwrap();
    /// assert_eq!(*names.lock().unwrap(), [Some("cache-warmer".to_owned()), None]);
    /// ```
    pub fn name(&self) -> Option<&'a str> {
        self.header.identity.name()
    }

    /// Where the task was spawned: the caller of `spawn`, `submit`, `spawn_blocking` or
    /// their relatives (they are `#[track_caller]`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// let lines = Arc::new(Mutex::new(Vec::new()));
    /// let log = lines.clone();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .on_task_spawn(move |meta| {
    ///         let location = meta.location();
    ///         log.lock().unwrap().push((location.file().to_owned(), location.line()));
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let handle = rt.spawn(async {}); let line = line!();
    /// handle.join().unwrap();
    /// assert_eq!(*lines.lock().unwrap(), [(file!().to_owned(), line)]);
    /// ```
    pub fn location(&self) -> &'static Location<'static> {
        self.header.identity.location()
    }
}

impl fmt::Debug for TaskMeta<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskMeta")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("location", &self.location())
            .finish()
    }
}

/// What a live task is doing, as [`Runtime::tasks`](crate::Runtime::tasks) found it.
///
/// # Examples
///
/// ```
/// use magpie::task::TaskState;
///
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let (started, wait) = std::sync::mpsc::channel();
/// let parked = rt.spawn(async move {
///     started.send(()).unwrap();
///     std::future::pending::<()>().await // a wake that never comes
/// });
/// wait.recv().unwrap(); // its first poll has begun...
/// rt.install(|| ()); // ...and ended: the one worker runs this job after it
/// let info = rt.tasks().into_iter().find(|t| t.id == parked.id()).unwrap();
/// assert_eq!(info.state, TaskState::Idle);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum TaskState {
    /// Waiting for a wake (a timer, a channel, I/O, another task).
    Idle,
    /// Woken, or new, and queued to run.
    Scheduled,
    /// Being polled by worker `worker` (an index below
    /// [`Runtime::num_workers`](crate::Runtime::num_workers), or at or above it for a
    /// compensation worker: the index into [`Stats::workers`](crate::Stats::workers)).
    Running {
        /// The polling worker's index.
        worker: usize,
    },
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskState::Idle => f.write_str("idle"),
            TaskState::Scheduled => f.write_str("scheduled"),
            TaskState::Running { worker } => write!(f, "running on {worker}"),
        }
    }
}

/// One live task of a runtime: a row of [`Runtime::tasks`](crate::Runtime::tasks).
///
/// Every task has an id, a spawn location and a state; its name and [`TaskCounters`] are
/// there when it keeps them: counters on a runtime built with
/// [`Builder::task_insight`](crate::Builder::task_insight), and for every named task.
/// (Keeping them takes an allocation per task, which an unnamed task on a default runtime
/// does without: ARCHITECTURE.md, "Task identity and the live-task dump".)
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let handle = magpie::task::Builder::new()
///     .name("waiter")
///     .spawn_on(std::future::pending::<()>(), &rt);
/// let info = rt.tasks().into_iter().find(|t| t.id == handle.id()).unwrap();
/// assert_eq!(info.name.as_deref(), Some("waiter"));
/// assert_eq!(info.location.file, file!());
/// assert!(info.counters.is_some()); // a named task keeps them
/// println!("{info:?}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TaskInfo {
    /// The task's id.
    pub id: Id,
    /// Its name, if it was given one ([`task::Builder::name`](crate::task::Builder::name)).
    pub name: Option<String>,
    /// Where it was spawned.
    pub location: SpawnLocation,
    /// What it is doing.
    pub state: TaskState,
    /// What its polls did, if it keeps counters (see above).
    pub counters: Option<TaskCounters>,
}

/// What a task's polls did, for the tasks that keep counters (see [`TaskInfo`]).
///
/// Times are nanoseconds, as in [`Stats`](crate::Stats), with `Duration` accessors.
/// `busy_ns` and `longest_poll_ns` are measured on runtimes that time their polls
/// ([`Builder::task_insight`](crate::Builder::task_insight), the poll-time histogram, the
/// trace) and read 0 elsewhere (a named task on a default runtime). Where `task_insight`
/// alone times them, a poll that follows another on the same worker starts at the
/// reading that ended the one before, so its time includes taking it from the queue (tens
/// of nanoseconds): one clock reading per poll instead of two. `age_ns` and
/// `since_last_poll_ns` come from the worker's clock readings, which on a runtime that does
/// not time its polls happen at maintenance (about every millisecond of work) and at parks,
/// so they are precise to about a millisecond there.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
/// let _task = rt.spawn(std::future::pending::<()>());
/// for info in rt.tasks() {
///     let counters = info.counters.unwrap();
///     assert!(counters.longest_poll() <= counters.busy());
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TaskCounters {
    /// How many times it has been polled (including a poll running now).
    pub polls: u64,
    /// Time spent in its `poll`, in total, in ns (0 unless polls are timed).
    pub busy_ns: u64,
    /// Its longest poll so far, in ns (0 unless polls are timed).
    pub longest_poll_ns: u64,
    /// Time since it was spawned, in ns.
    pub age_ns: u64,
    /// Time since its last poll started, in ns (for a running task: how long this poll has
    /// run, about); `None` if it was never polled.
    pub since_last_poll_ns: Option<u64>,
}

impl TaskInfo {
    /// Reads one task's row. `now_ns` is the runtime's clock now; `polling` holds, for each
    /// worker running a task, that task's id and the worker's index.
    pub(crate) fn read(header: &Header, now_ns: u64, polling: &[(Id, usize)]) -> TaskInfo {
        let identity = &header.identity;
        let snapshot = header.state.load();
        // A worker's word names the task from just before its run's transition to RUNNING
        // until after the run (task/id.rs): with RUNNING set, that worker polls it now.
        let worker = polling
            .iter()
            .find(|(polled, _)| *polled == identity.id && snapshot.is_running())
            .map(|&(_, worker)| worker);
        let state = match worker {
            Some(worker) => TaskState::Running { worker },
            // RUNNING without a worker: between `transition_to_running` and the poll's
            // start, or claimed by a shutdown; either way about to be run or dropped.
            None if snapshot.is_notified() || snapshot.is_running() => TaskState::Scheduled,
            None => TaskState::Idle,
        };
        let counters = identity.insight().map(|insight| {
            let activity = &insight.activity;
            // Relaxed: statistics (raw.rs invariant 6).
            let polls = activity.polls.load(Relaxed);
            let last_poll = activity.last_poll_ns.load(Relaxed);
            TaskCounters {
                polls,
                busy_ns: activity.busy_ns.load(Relaxed),
                longest_poll_ns: activity.longest_ns.load(Relaxed),
                age_ns: now_ns.saturating_sub(insight.spawned_ns),
                since_last_poll_ns: (polls > 0).then(|| now_ns.saturating_sub(last_poll)),
            }
        });
        TaskInfo {
            id: identity.id,
            name: identity.name().map(str::to_owned),
            location: SpawnLocation::from(identity.location()),
            state,
            counters,
        }
    }
}

impl TaskCounters {
    /// [`busy_ns`](Self::busy_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
    /// let (started, wait) = std::sync::mpsc::channel();
    /// let _task = rt.spawn(async move {
    ///     started.send(()).unwrap();
    ///     std::future::pending::<()>().await
    /// });
    /// wait.recv().unwrap(); // its first poll has begun...
    /// rt.install(|| ()); // ...and ended: the one worker runs this job after it
    /// let counters = rt.tasks()[0].counters.unwrap();
    /// assert_eq!(counters.polls, 1);
    /// assert_eq!(counters.busy(), std::time::Duration::from_nanos(counters.busy_ns));
    /// ```
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns)
    }

    /// [`longest_poll_ns`](Self::longest_poll_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
    /// let (started, wait) = std::sync::mpsc::channel();
    /// let _task = rt.spawn(async move {
    ///     for _ in 0..3 {
    ///         magpie::task::yield_now().await;
    ///     }
    ///     started.send(()).unwrap();
    ///     std::future::pending::<()>().await
    /// });
    /// wait.recv().unwrap(); // its fourth poll has begun...
    /// rt.install(|| ()); // ...and ended: the one worker runs this job after it
    /// let counters = rt.tasks()[0].counters.unwrap();
    /// assert_eq!(counters.polls, 4);
    /// // No poll is longer than the four together.
    /// assert!(counters.longest_poll() <= counters.busy());
    /// ```
    pub fn longest_poll(&self) -> Duration {
        Duration::from_nanos(self.longest_poll_ns)
    }

    /// [`age_ns`](Self::age_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// let counters = rt.tasks()[0].counters.unwrap();
    /// assert!(counters.age() < std::time::Duration::from_secs(3600));
    /// ```
    pub fn age(&self) -> Duration {
        Duration::from_nanos(self.age_ns)
    }

    /// [`since_last_poll_ns`](Self::since_last_poll_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).task_insight(true).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// let counters = rt.tasks()[0].counters.unwrap();
    /// if let Some(since) = counters.since_last_poll() {
    ///     assert!(since <= counters.age());
    /// }
    /// ```
    pub fn since_last_poll(&self) -> Option<Duration> {
        self.since_last_poll_ns.map(Duration::from_nanos)
    }
}

/// Where a task was spawned: the `file!()`, `line!()` and `column!()` of the call to a spawn
/// function, an owned copy of a [`std::panic::Location`] (so that it can be deserialized).
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let _task = rt.spawn(std::future::pending::<()>()); let line = line!();
/// let info = rt.tasks().pop().unwrap();
/// assert_eq!((info.location.file.as_str(), info.location.line), (file!(), line));
/// assert_eq!(info.location.to_string(), format!("{}:{line}:{}", file!(), info.location.column));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SpawnLocation {
    /// The source file.
    pub file: String,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1.
    pub column: u32,
}

impl From<&Location<'_>> for SpawnLocation {
    fn from(location: &Location<'_>) -> SpawnLocation {
        SpawnLocation {
            file: location.file().to_owned(),
            line: location.line(),
            column: location.column(),
        }
    }
}

impl fmt::Display for SpawnLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}
