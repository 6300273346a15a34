//! Task identity: [`Id`], how ids are handed out, and which task this thread is polling
//! ([`id`], [`try_id`]).
//!
//! # How ids are made
//!
//! Ids come from one process-wide counter, so they are unique across runtimes and never
//! reused; the first is 1. A spawn does not touch that counter: each thread takes a block of
//! [`BLOCK`] ids from it at once and hands them out from a thread-local, so that workers
//! spawning at full speed never contend for one cache line (the reason `live_tasks` is not
//! counted in release builds). Ids are therefore unique but not in spawn order across
//! threads; on one thread they increase.
//!
//! # The current task
//!
//! On a worker, [`id`] follows the worker's "polling now" word (`WorkerCounters::polling`,
//! which the harness sets to the task's header for the length of the `poll` call, for
//! `Runtime::tasks`) to the task's header: the poll path pays nothing more for `id`. Off the
//! workers (the blocking pool, the unit tests' schedulers) the harness sets a thread-local
//! for the same span instead, restoring the previous value after. Either way the span is
//! `poll` itself: the future's destructor and the terminate hook run outside it (a hook has
//! [`TaskMeta::id`](super::TaskMeta::id)).

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;

use crate::sync::atomic::Relaxed;
use crate::sync::thread::thread_local;
use crate::sync::StaticAtomicU64;

/// An opaque identifier of a task, unique among all tasks of the process (across runtimes)
/// and never reused.
///
/// Ids order and hash like numbers, print as a number (`Display`), and serialize as one with
/// the `serde` feature. Ids of tasks spawned on one thread increase in spawn order; across
/// threads the order says nothing.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let a = rt.spawn(async { magpie::task::id() });
/// let b = rt.spawn(async {});
/// assert_ne!(a.id(), b.id());
/// let id = a.id();
/// assert_eq!(rt.block_on(a).unwrap(), id);
/// println!("task {id} finished"); // Display: the number
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Id(NonZeroU64);

impl Id {
    /// The id as a number (at least 1), for logs and metrics labels.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = rt.spawn(async {});
    /// assert!(handle.id().as_u64() >= 1);
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    /// The next id of the block in `next` (a worker's: `(next, end)`), taking a new block
    /// when it runs out.
    #[inline]
    pub(crate) fn next_from(next: &Cell<(u64, u64)>) -> Id {
        let (id, end) = next.get();
        if id < end {
            next.set((id + 1, end));
            Id::from_raw(id)
        } else {
            Id::next_block_cold(next)
        }
    }

    /// The next id of this thread's block, taking a new block when it runs out.
    #[inline]
    pub(crate) fn next() -> Id {
        // `try_with`: a task spawned from a thread-local destructor after this one is gone
        // still gets an id, straight from the counter.
        NEXT.try_with(Id::next_from)
            .unwrap_or_else(|_| Id::from_raw(COUNTER.fetch_add(1, Relaxed)))
    }

    #[cold]
    fn next_block_cold(next: &Cell<(u64, u64)>) -> Id {
        // Relaxed: uniqueness needs only the RMW's atomicity, not any order.
        let start = COUNTER.fetch_add(BLOCK, Relaxed);
        next.set((start + 1, start + BLOCK));
        Id::from_raw(start)
    }

    fn from_raw(id: u64) -> Id {
        Id(NonZeroU64::new(id).expect("magpie: task ids ran out (2^64 spawns)"))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self.0)
    }
}

/// Ids a thread takes from [`COUNTER`] at once. At a spawn every 50 ns a worker goes back
/// for more every 50 µs: the shared line is touched that rarely.
const BLOCK: u64 = 1024;

/// The next id block's start; 0 is never an id.
static COUNTER: StaticAtomicU64 = StaticAtomicU64::new(1);

thread_local! {
    /// This thread's block of ids: the next one and the end (exclusive). Empty at first.
    static NEXT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

// A second block: loom's `thread_local!` takes one static per invocation.
thread_local! {
    /// The task being polled on this thread, off the workers (module docs).
    static CURRENT: Cell<Option<Id>> = const { Cell::new(None) };
}

/// The id of the task running on this thread.
///
/// Inside a task's `poll` (a spawned future's, a submitted or `spawn_blocking` closure's
/// body) it is that task's id, the same as its [`JoinHandle::id`](crate::JoinHandle::id).
/// The future's destructor runs outside it. Fork-join work
/// started from the task (`join`, `scope`, parallel iterators) runs on other workers too;
/// there the id is the task's only where that part runs on the task's own thread.
///
/// # Panics
///
/// If called outside a task, as [`tokio::task::id`]. [`try_id`] returns `None` instead.
///
/// [`tokio::task::id`]: https://docs.rs/tokio/latest/tokio/task/fn.id.html
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let handle = rt.spawn(async { magpie::task::id() });
/// let id = handle.id();
/// assert_eq!(handle.join().unwrap(), id);
/// ```
#[track_caller]
pub fn id() -> Id {
    try_id().expect("magpie::task::id() called outside a task")
}

/// The id of the task running on this thread, or `None` outside a task (see [`id`]).
///
/// # Examples
///
/// ```
/// assert_eq!(magpie::task::try_id(), None);
/// let id = magpie::submit(|| magpie::task::try_id()).join().unwrap();
/// assert!(id.is_some());
/// ```
pub fn try_id() -> Option<Id> {
    // SAFETY: a non-null current worker is live for the duration of this call.
    if let Some(worker) = unsafe { crate::runtime::worker::WorkerThread::current().as_ref() } {
        if let Some(header) = worker.polling_task() {
            return Some(header.identity.id);
        }
    }
    CURRENT.try_with(Cell::get).ok().flatten()
}

/// Makes `id` the current task of this thread until the guard drops (the harness, around a
/// poll). Restores the previous one, so polls that nest (a task's poll that runs another
/// task's, as a test scheduler may) leave the outer id in place.
#[inline]
pub(crate) fn enter(id: Id) -> CurrentGuard {
    CurrentGuard(CURRENT.try_with(|c| c.replace(Some(id))).ok().flatten())
}

/// Restores the previous current task (see [`enter`]).
pub(crate) struct CurrentGuard(Option<Id>);

impl Drop for CurrentGuard {
    #[inline]
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.0));
    }
}
