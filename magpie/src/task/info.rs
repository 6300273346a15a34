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
    /// See [`TaskMeta`].
    pub fn id(&self) -> Id {
        self.header.identity.id
    }

    /// The name given with [`task::Builder::name`](crate::task::Builder::name), if any.
    ///
    /// # Examples
    ///
    /// See [`TaskMeta`].
    pub fn name(&self) -> Option<&'a str> {
        self.header.identity.name.as_deref().map(String::as_str)
    }

    /// Where the task was spawned: the caller of `spawn`, `submit`, `spawn_blocking` or
    /// their relatives (they are `#[track_caller]`).
    ///
    /// # Examples
    ///
    /// See [`TaskMeta`].
    pub fn location(&self) -> &'static Location<'static> {
        self.header.identity.location
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
/// assert_eq!(info.polls, 1);
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
    /// [`Runtime::num_workers`](crate::Runtime::num_workers)).
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
/// Times are nanoseconds, as in [`Stats`](crate::Stats), with `Duration` accessors.
/// `polls` and the state are exact as of the moment the dump read them. The poll times
/// `busy_ns` and `longest_poll_ns` are measured only on runtimes that time their polls
/// ([`Builder::task_poll_times`](crate::Builder::task_poll_times), or the poll-time
/// histogram or the trace, which time them anyway) and read 0 elsewhere. `age_ns` and
/// `since_last_poll_ns` come from the worker's clock readings (one per maintenance, about
/// every millisecond of work, and one per park), not from a clock read per spawn or poll,
/// so on a runtime that does not time its polls they are precise to about a millisecond,
/// or to the longest recent poll where polls are long.
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
    /// How many times it has been polled (including a poll running now).
    pub polls: u64,
    /// Time spent in its `poll`, in total, in ns (0 unless polls are timed: see above).
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
    /// Reads one task's row; `now_ns` is the runtime's clock now.
    pub(crate) fn read(header: &Header, now_ns: u64) -> TaskInfo {
        let identity = &header.identity;
        let (polls, worker) = header.activity.polls_and_worker();
        let snapshot = header.state.load();
        let state = match worker {
            Some(worker) => TaskState::Running { worker },
            // RUNNING without a worker: between `transition_to_running` and the poll's
            // start, or claimed by a shutdown; either way about to be run or dropped.
            None if snapshot.is_notified() || snapshot.is_running() => TaskState::Scheduled,
            None => TaskState::Idle,
        };
        // Relaxed: statistics (raw.rs invariant 6).
        let last_poll = header
            .activity
            .last_poll_ns
            .load(crate::sync::atomic::Relaxed);
        TaskInfo {
            id: identity.id,
            name: identity.name.as_deref().cloned(),
            location: SpawnLocation::from(identity.location),
            state,
            polls,
            busy_ns: header.activity.busy_ns.load(crate::sync::atomic::Relaxed),
            longest_poll_ns: header
                .activity
                .longest_ns
                .load(crate::sync::atomic::Relaxed),
            age_ns: now_ns.saturating_sub(identity.spawned_ns),
            since_last_poll_ns: (polls > 0).then(|| now_ns.saturating_sub(last_poll)),
        }
    }

    /// [`busy_ns`](Self::busy_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// for info in rt.tasks() {
    ///     assert_eq!(info.busy().as_nanos(), u128::from(info.busy_ns));
    /// }
    /// ```
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns)
    }

    /// [`longest_poll_ns`](Self::longest_poll_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// for info in rt.tasks() {
    ///     assert!(info.longest_poll() <= info.busy());
    /// }
    /// ```
    pub fn longest_poll(&self) -> Duration {
        Duration::from_nanos(self.longest_poll_ns)
    }

    /// [`age_ns`](Self::age_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// for info in rt.tasks() {
    ///     assert!(info.age() < std::time::Duration::from_secs(3600));
    /// }
    /// ```
    pub fn age(&self) -> Duration {
        Duration::from_nanos(self.age_ns)
    }

    /// [`since_last_poll_ns`](Self::since_last_poll_ns) as a `Duration`.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let _task = rt.spawn(std::future::pending::<()>());
    /// for info in rt.tasks() {
    ///     if let Some(since) = info.since_last_poll() {
    ///         assert!(since <= info.age());
    ///     }
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
