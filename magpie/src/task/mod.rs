//! Tasks: futures (and submitted closures) that the workers poll, and their handles.
//!
//! The public part: [`JoinHandle`], [`JoinError`], [`yield_now`](fn@yield_now),
//! [`block_in_place`] (which lives with the worker, in `runtime/`); task identity ([`Id`],
//! [`id`](fn@id), [`try_id`]), named spawns ([`Builder`]) and what the runtime tells of its
//! tasks ([`TaskInfo`], [`TaskState`], [`TaskCounters`], [`TaskMeta`], [`SpawnLocation`]).
//! The rest is the machinery:
//! the state word (`state`), the one allocation and its type-erased pointer (`raw`), the
//! harness that polls, cancels and completes a task (`harness`), its waker (`waker`), the
//! scheduler's handle `Notified` and the `Schedule` trait (`notified`), the runtime's list of
//! live tasks (`owned`) and the cooperative budget (`coop`).
//!
//! # Examples
//!
//! ```
//! use magpie::task;
//!
//! let rt = magpie::Runtime::builder().worker_threads(2).build()?;
//! let handle = task::Builder::new().name("greeter").spawn_on(
//!     async {
//!         task::yield_now().await; // let the other tasks of this worker run
//!         task::id()
//!     },
//!     &rt,
//! );
//! let id = handle.id();
//! assert_eq!(handle.join()?, id);
//! assert!(task::try_id().is_none()); // not inside a task here
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub(crate) mod block;
mod builder;
pub(crate) mod cell_cache;
pub(crate) mod closure;
pub(crate) mod coop;
mod error;
pub(crate) mod harness;
pub(crate) mod id;
mod info;
mod join;
pub(crate) mod notified;
pub(crate) mod owned;
pub(crate) mod raw;
pub(crate) mod state;
pub(crate) mod waker;
mod yield_now;

pub use crate::runtime::block_in_place::block_in_place;
pub use builder::Builder;
pub use error::JoinError;
pub use id::{id, try_id, Id};
pub use info::{SpawnLocation, TaskCounters, TaskInfo, TaskMeta, TaskState};
pub use join::JoinHandle;
pub use yield_now::{yield_now, YieldNow};

/// How many task allocations are alive in this process, counting every runtime: `Some` in
/// builds with debug assertions, `None` in release builds (where a process-wide counter on
/// every spawn would cost too much).
///
/// A task's allocation lives until its last reference is gone: its runtime's, its wakers' and
/// its `JoinHandle`'s. Once every runtime is dropped and every handle and waker with it, the
/// count is 0; a leak test asserts exactly that.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
/// let handle = rt.spawn(std::future::pending::<()>());
/// drop(rt); // cancels the task; the handle still holds its allocation
/// if let Some(live) = magpie::task::live_tasks() {
///     assert_eq!(live, 1);
/// }
/// assert!(handle.join().unwrap_err().is_cancelled()); // `join` gives the handle up
/// if let Some(live) = magpie::task::live_tasks() {
///     assert_eq!(live, 0);
/// }
/// ```
pub fn live_tasks() -> Option<usize> {
    #[cfg(all(debug_assertions, not(loom)))]
    {
        // Relaxed: a tally read by tests after the threads that changed it were joined.
        Some(raw::LIVE_TASKS.load(crate::sync::atomic::Relaxed))
    }
    #[cfg(not(all(debug_assertions, not(loom))))]
    {
        None
    }
}

#[cfg(all(test, loom))]
mod loom_state;
#[cfg(all(test, not(loom)))]
mod tests_state;
#[cfg(all(test, not(loom)))]
mod tests_task;
