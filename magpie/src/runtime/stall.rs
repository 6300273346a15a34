//! What a stall report says ([`StallInfo`]), who hears it (the `on_stall` hook, or the default
//! reporter), and the default reporter's rate limit.
//!
//! The stall monitor that finds stalls is `monitor.rs`; ARCHITECTURE.md, "Stall detection:
//! the monitor", says how it works and what it costs.
//!
//! # Where the hook runs, and what guards it
//!
//! On the monitor thread, once per stall, while the stall lasts (the stalled worker is still
//! in the unit of work). A panic in the hook is caught there and its payload dropped with
//! `drop_payload`, as for the task hooks (`task_hooks.rs`): the monitor goes on, and the next
//! stall is reported. A hook that blocks holds up detection (and the hand-off of the stalled
//! worker's queue) for as long as it blocks: it should log, count or send, and return.

use std::collections::HashMap;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::task::{Id, SpawnLocation};
use crate::util::unwind::{drop_payload, halt_unwinding};

/// One stall: a task poll, a job or a submitted closure that has run on one worker for longer
/// than [`Builder::stall_threshold`](crate::Builder::stall_threshold). Handed to the
/// [`Builder::on_stall`](crate::Builder::on_stall) hook once per stall, while it lasts.
///
/// A *job* (a `join` half, a `scope` spawn, an `install` closure, a parallel iterator's
/// piece) has no identity: its [`task`](Self::task), [`name`](Self::name) and
/// [`location`](Self::location) are `None`. A fork-join computation counts as one unit of
/// work for as long as its worker runs its `join`s inline, so one long `install` is one
/// stall, however many `join`s it makes. (The hook hears of it; the default reporter, used
/// when no hook is set, prints only tasks' stalls.)
///
/// # Examples
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let (tx, rx) = mpsc::channel();
/// let rt = magpie::Runtime::builder()
///     .worker_threads(2)
///     .stall_threshold(Duration::from_millis(20))
///     .on_stall(move |info: &magpie::StallInfo| {
///         let _ = tx.send((info.task(), info.name().map(str::to_owned), info.worker()));
///     })
///     .build()
///     .unwrap();
/// let (release, wait) = mpsc::channel::<()>();
/// let blocker = magpie::task::Builder::new()
///     .name("blocker")
///     .submit_on(move || wait.recv().unwrap(), &rt);
/// let (task, name, worker) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
/// assert_eq!(task, Some(blocker.id()));
/// assert_eq!(name.as_deref(), Some("blocker"));
/// assert!(worker < 2);
/// release.send(()).unwrap();
/// blocker.join().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct StallInfo {
    worker: usize,
    task: Option<Id>,
    name: Option<String>,
    location: Option<SpawnLocation>,
    elapsed: Duration,
}

impl StallInfo {
    pub(crate) fn new(
        worker: usize,
        task: Option<(Id, Option<String>, &'static Location<'static>)>,
        elapsed: Duration,
    ) -> StallInfo {
        let (task, name, location) = match task {
            Some((id, name, location)) => (Some(id), name, Some(SpawnLocation::from(location))),
            None => (None, None, None),
        };
        StallInfo {
            worker,
            task,
            name,
            location,
            elapsed,
        }
    }

    /// The index of the stalled worker.
    ///
    /// # Examples
    ///
    /// A submitted closure that waits for the report of its own stall:
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |info| { let _ = tx.send(info.worker()); })
    ///     .build()
    ///     .unwrap();
    /// let (stalled, ran_on) = rt
    ///     .submit(move || {
    ///         let stalled = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    ///         (stalled, magpie::current_worker_index().unwrap())
    ///     })
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(stalled, ran_on);
    /// ```
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The stalled task's id; `None` for a job.
    ///
    /// # Examples
    ///
    /// An [`install`](crate::Runtime::install) closure is a job, so its stall names no task:
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |info| { let _ = tx.send(info.task()); })
    ///     .build()
    ///     .unwrap();
    /// let task = rt.install(move || rx.recv_timeout(Duration::from_secs(30)).unwrap());
    /// assert_eq!(task, None);
    /// ```
    pub fn task(&self) -> Option<Id> {
        self.task
    }

    /// The stalled task's name, if it was given one
    /// ([`task::Builder::name`](crate::task::Builder::name)); `None` for a job.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |info| { let _ = tx.send(info.name().map(str::to_owned)); })
    ///     .build()
    ///     .unwrap();
    /// let name = magpie::task::Builder::new()
    ///     .name("slow-query")
    ///     .submit_on(move || rx.recv_timeout(Duration::from_secs(30)).unwrap(), &rt)
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(name.as_deref(), Some("slow-query"));
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Where the stalled task was spawned; `None` for a job.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |info| { let _ = tx.send(info.location().cloned()); })
    ///     .build()
    ///     .unwrap();
    /// let (release, wait) = std::sync::mpsc::channel::<()>();
    /// let task = rt.submit(move || wait.recv().unwrap()); let line = line!();
    /// let location = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    /// assert_eq!((location.file.as_str(), location.line), (file!(), line));
    /// release.send(()).unwrap();
    /// task.join().unwrap();
    /// ```
    pub fn location(&self) -> Option<&SpawnLocation> {
        self.location.as_ref()
    }

    /// How long the unit of work had run when the stall was reported, as the monitor
    /// measures it: from its first sample that saw the unit to the report, so up to one sample
    /// period (a quarter of the threshold) short of the truth.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(20))
    ///     .on_stall(move |info| { let _ = tx.send(info.elapsed()); })
    ///     .build()
    ///     .unwrap();
    /// let (release, wait) = std::sync::mpsc::channel::<()>();
    /// let task = rt.submit(move || wait.recv().unwrap());
    /// let elapsed = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    /// assert!(elapsed >= Duration::from_millis(20));
    /// release.send(()).unwrap();
    /// task.join().unwrap();
    /// ```
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
}

impl fmt::Display for StallInfo {
    /// One line: `worker 1 stalled for 102 ms in task 7 "blocker" spawned at src/main.rs:9:5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worker {} stalled for {} ms in ",
            self.worker,
            self.elapsed.as_millis()
        )?;
        match self.task {
            Some(id) => {
                write!(f, "task {id}")?;
                if let Some(name) = &self.name {
                    write!(f, " {name:?}")?;
                }
                if let Some(location) = &self.location {
                    write!(f, " spawned at {location}")?;
                }
                Ok(())
            }
            None => f.write_str("a job (join, scope or install; no task identity)"),
        }
    }
}

/// The `on_stall` hook.
#[derive(Clone)]
pub(crate) struct StallHook(Arc<dyn Fn(&StallInfo) + Send + Sync>);

impl StallHook {
    pub(crate) fn new(f: impl Fn(&StallInfo) + Send + Sync + 'static) -> StallHook {
        StallHook(Arc::new(f))
    }

    /// Calls the hook, catching its panic (module docs).
    pub(crate) fn call(&self, info: &StallInfo) {
        if let Err(payload) = halt_unwinding(|| (self.0)(info)) {
            drop_payload(payload);
        }
    }
}

impl fmt::Debug for StallHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StallHook")
    }
}

/// The reporter used when no `on_stall` hook is set: one line to stderr per stall of a
/// *task*, at most once per task per [`RATE_LIMIT`], so that a task that stalls on every poll
/// does not flood the log.
///
/// A stall of a *job* prints nothing. A job is fork-join work (a `join` half, a `scope`
/// spawn, an `install` body, a parallel iterator's piece), and fork-join work runs long by
/// design: a `par_sort` of 40 million numbers is one job on its first worker for most of a
/// second, and printed a warning a second on the default runtime. A stalled job is still
/// counted, drawn in the trace, handed to an `on_stall` hook and has the tasks queued behind
/// it moved (the same as a task); only this default line, meant for the async code that
/// blocks a worker, leaves it out.
#[derive(Debug, Default)]
pub(crate) struct DefaultReporter {
    limiter: RateLimiter,
}

/// How often the default reporter may name the same task.
pub(crate) const RATE_LIMIT: Duration = Duration::from_secs(1);

impl DefaultReporter {
    pub(crate) fn report(&mut self, info: &StallInfo) {
        if let Some(line) = self.line(info, Instant::now()) {
            // Not `eprintln!`, which panics when stderr cannot be written (a closed pipe, a
            // full disk): that ended the monitor thread, and with it stall detection and the
            // hand-off for good (found in the review of issue 19). A lost line is all it
            // costs now.
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    /// The line to print for `info` at `now`, if any (see the type's docs).
    fn line(&mut self, info: &StallInfo, now: Instant) -> Option<String> {
        let task = info.task?;
        self.limiter
            .allow(task, now)
            .then(|| format!("magpie: {info}"))
    }
}

/// At most one report per task per [`RATE_LIMIT`]. The clock is the caller's (`now`), so the
/// tests can drive it. Entries older than the limit are dropped whenever the map doubles, so
/// it holds about the tasks of the last second.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    last: HashMap<Id, Instant>,
    /// The size at which the map is next pruned.
    prune_at: usize,
}

impl RateLimiter {
    /// Whether a report for `key` at `now` may go out; if so, it counts as sent.
    pub(crate) fn allow(&mut self, key: Id, now: Instant) -> bool {
        if let Some(last) = self.last.get(&key) {
            if now.saturating_duration_since(*last) < RATE_LIMIT {
                return false;
            }
        }
        self.last.insert(key, now);
        if self.last.len() >= self.prune_at {
            self.last
                .retain(|_, last| now.saturating_duration_since(*last) < RATE_LIMIT);
            self.prune_at = (2 * self.last.len()).max(64);
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_default_reporter_names_a_task_at_most_once_a_second() {
        let mut limiter = RateLimiter::default();
        let t0 = Instant::now();
        let a = Id::next();
        let b = Id::next();
        let ms = Duration::from_millis;
        assert!(limiter.allow(a, t0));
        assert!(!limiter.allow(a, t0 + ms(10)));
        assert!(!limiter.allow(a, t0 + ms(999)));
        // Another task has its own budget.
        assert!(limiter.allow(b, t0 + ms(500)));
        // A second after the last report that went out, not the last refused one.
        assert!(limiter.allow(a, t0 + ms(1000)));
        assert!(!limiter.allow(a, t0 + ms(1500)));
        assert!(!limiter.allow(b, t0 + ms(1499)));
        assert!(limiter.allow(b, t0 + ms(1500)));
        // Old entries are pruned: thousands of tasks, one report each, a second apart in
        // bursts, leave a bounded map.
        for burst in 0..4u64 {
            let now = t0 + Duration::from_secs(10 + burst);
            for _ in 0..1000 {
                assert!(limiter.allow(Id::next(), now));
            }
        }
        assert!(
            limiter.last.len() <= 2 * 1000 + 64,
            "{}",
            limiter.last.len()
        );
    }

    /// The default line names a task's stall, once a second, and leaves a job's out.
    #[test]
    fn the_default_reporter_prints_task_stalls_and_not_job_stalls() {
        let mut reporter = DefaultReporter::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let job = StallInfo::new(0, None, ms(150));
        assert_eq!(reporter.line(&job, t0), None);
        assert_eq!(reporter.line(&job, t0 + ms(2000)), None);
        let id = Id::next();
        let task = StallInfo::new(
            1,
            Some((id, Some("fetch".into()), Location::caller())),
            ms(150),
        );
        let line = reporter.line(&task, t0).expect("a task stall is printed");
        assert!(line.starts_with("magpie: worker 1 stalled"), "{line}");
        assert!(
            line.contains(&format!("task {id}")) && line.contains("\"fetch\""),
            "{line}"
        );
        assert_eq!(reporter.line(&task, t0 + ms(500)), None);
        assert!(reporter.line(&task, t0 + ms(1000)).is_some());
    }
}
