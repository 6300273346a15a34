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
//! Each poller has a *polling word*: a worker's `WorkerCounters::polling`, or off the workers
//! (the blocking pool, the unit tests' schedulers) a word of the run's own, to which a
//! thread-local points for as long as the run lasts (restoring the previous one after, so
//! runs may nest). It holds the id of the task the poller runs, 0 when none; bit
//! [`POLLING_BLOCKED`] is set on top while that run is inside `block_in_place`. The
//! harness stores the id when a run of the task begins (`Harness::poll`, before the
//! transition to running), and the worker clears it when the run has returned
//! (`WorkerThread::run_task`), so the span covers the poll, the reschedule of a yield and
//! the completion: the future's and the output's destructors and the join waker run inside
//! it; the terminate hook has [`TaskMeta::id`](super::TaskMeta::id) of its own.
//!
//! The word is also the worker's "inside a task" flag, which the scheduler needs anyway (a
//! wake from inside a poll goes to the LIFO slot, `WorkerThread::schedule_local`), so
//! identity costs a poll nothing beyond loading the id: one store of the word at the start
//! and one at the end, the same two that a plain flag would cost. Being an id and not an
//! address, it names nothing that could be freed: [`id`] reads it without touching the task,
//! and a word that lags behind (a worker that ran a task and has not cleared its word yet)
//! can never be taken for another task, since ids are never reused.

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;

use crate::sync::atomic::Relaxed;
use crate::sync::thread::thread_local;
use crate::sync::{StatAtomicU64, StaticAtomicU64};

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
    /// Every task's id in the measurement build without task identity (`--cfg
    /// magpie_no_insight`, `scripts/insight_overhead.sh`), which hands out no ids.
    pub(crate) const MEASUREMENT: Id = Id(NonZeroU64::MIN);

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

    /// The next id of the block in `next` (a worker's), taking a new block when it runs
    /// out. `next` holds the id to hand out next; blocks are aligned to [`BLOCK`], so one
    /// that is a multiple of it is the end of a block (or 0: none yet), and one word and one
    /// test suffice.
    #[inline]
    pub(crate) fn next_from(next: &Cell<u64>) -> Id {
        let id = next.get();
        if id % BLOCK != 0 {
            next.set(id + 1);
            Id::from_raw(id)
        } else {
            Id::next_block_cold(next)
        }
    }

    /// The next id of this thread's block, taking a new block when it runs out.
    #[inline]
    pub(crate) fn next() -> Id {
        // `try_with`: a task spawned from a thread-local destructor after this one is gone
        // still gets an id: the first of a block of its own.
        NEXT.try_with(Id::next_from)
            .unwrap_or_else(|_| Id::from_raw(Id::block_start()))
    }

    #[cold]
    fn next_block_cold(next: &Cell<u64>) -> Id {
        let start = Id::block_start();
        next.set(start + 1);
        Id::from_raw(start)
    }

    /// The first id of a new block: `BLOCK` times the block's number, or 1 for block 0
    /// (0 is never an id).
    fn block_start() -> u64 {
        // Relaxed: uniqueness needs only the RMW's atomicity, not any order.
        let block = COUNTER.fetch_add(1, Relaxed);
        block
            .checked_mul(BLOCK)
            // Below bit 63: the polling word keeps that bit for `block_in_place`.
            .filter(|start| start & POLLING_BLOCKED == 0)
            .expect("magpie: task ids ran out (2^63 spawns)")
            .max(1)
    }

    fn from_raw(id: u64) -> Id {
        Id(NonZeroU64::new(id).expect("magpie: task ids ran out (2^63 spawns)"))
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

/// The number of the next id block: block `k` holds the ids `k * BLOCK .. (k + 1) * BLOCK`
/// (block 0 from 1).
static COUNTER: StaticAtomicU64 = StaticAtomicU64::new(0);

thread_local! {
    /// The next id of this thread's block (`Id::next_from`); 0 at first: no block yet.
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

// A second block: loom's `thread_local!` takes one static per invocation.
thread_local! {
    /// The polling word of the run off the workers going on on this thread, if any (module
    /// docs); null otherwise.
    static CURRENT: Cell<*const StatAtomicU64> = const { Cell::new(std::ptr::null()) };
}

/// The id of the task running on this thread.
///
/// Inside a task's `poll` (a spawned future's, a submitted or `spawn_blocking` closure's
/// body) it is that task's id, the same as its [`JoinHandle::id`](crate::JoinHandle::id).
/// So it is in what the task's run does after the poll: the future's and the output's
/// destructors and the waker of whoever awaits the handle, when they run there (a runtime
/// that shuts down drops the futures of unfinished tasks outside any run). Fork-join work
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
    // The innermost first: a run off the workers (which a task on a worker may start).
    let word = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
    // SAFETY: non-null only inside `with_off_pool_word`, whose word outlives the call.
    if let Some(word) = unsafe { word.as_ref() } {
        // Relaxed: the word is written by this thread only (module docs).
        if let Some(id) = polled_id(word.load(Relaxed)) {
            return Some(id);
        }
    }
    // SAFETY: a non-null current worker is live for the duration of this call.
    let worker = unsafe { crate::runtime::worker::WorkerThread::current().as_ref() }?;
    worker.polled_id()
}

/// Bit 63 of a polling word: the run it names is inside `block_in_place` (module docs).
/// Ids stay below it (`Id::block_start`).
pub(crate) const POLLING_BLOCKED: u64 = 1 << 63;

/// The task a polling word's value names, if any (module docs).
#[inline]
pub(crate) fn polled_id(word: u64) -> Option<Id> {
    NonZeroU64::new(word & !POLLING_BLOCKED).map(Id)
}

/// Runs `f` (a run of a task off the workers, `Notified::run`) with [`try_id`] on this
/// thread following `word`, which the harness sets around the poll as it sets a worker's.
/// The previous word comes back after, also if `f` unwinds, so runs may nest (a task's poll
/// that runs another's, as a test scheduler may).
#[inline]
pub(crate) fn with_off_pool_word<R>(word: &StatAtomicU64, f: impl FnOnce() -> R) -> R {
    struct Restore(*const StatAtomicU64);
    impl Drop for Restore {
        #[inline]
        fn drop(&mut self) {
            let _ = CURRENT.try_with(|current| current.set(self.0));
        }
    }
    let previous = CURRENT
        .try_with(|current| current.replace(word))
        .unwrap_or(std::ptr::null());
    // `word` outlives this guard, which ends before we return: `try_id` never sees the
    // pointer once `word` may be gone.
    let _restore = Restore(previous);
    f()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Two cells take blocks in turn: every id is handed out once, each cell's ids increase
    /// by one inside a block, and a cell moves to a new block exactly at a block's end.
    #[test]
    fn blocks_hand_out_each_id_once() {
        let cells = [Cell::new(0), Cell::new(0)];
        let mut seen = std::collections::HashSet::new();
        let mut last = [0u64; 2];
        for round in 0..3 * BLOCK as usize {
            let which = round % 2;
            let id = Id::next_from(&cells[which]).as_u64();
            assert!(seen.insert(id), "id {id} handed out twice");
            if last[which] != 0 && last[which] % BLOCK != BLOCK - 1 {
                assert_eq!(id, last[which] + 1, "a block was left early");
            } else {
                assert_eq!(id % BLOCK, (id == 1) as u64, "a new block did not start");
            }
            last[which] = id;
        }
    }
}
