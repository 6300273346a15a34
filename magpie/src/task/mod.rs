//! Tasks: futures (and submitted closures) that the workers poll, and their handles.
//!
//! The public part: [`JoinHandle`], [`JoinError`], [`yield_now`]. The rest is the machinery:
//! the state word (`state`), the one allocation and its type-erased pointer (`raw`), the
//! harness that polls, cancels and completes a task (`harness`), its waker (`waker`), the
//! scheduler's handle `Notified` and the `Schedule` trait (`notified`), the runtime's list of
//! live tasks (`owned`) and the cooperative budget (`coop`).

pub(crate) mod closure;
pub(crate) mod coop;
mod error;
pub(crate) mod harness;
mod join;
pub(crate) mod notified;
pub(crate) mod owned;
pub(crate) mod raw;
pub(crate) mod state;
pub(crate) mod waker;
mod yield_now;

pub use error::JoinError;
pub use join::JoinHandle;
pub use yield_now::{yield_now, YieldNow};

#[cfg(all(test, loom))]
mod loom_state;
#[cfg(all(test, not(loom)))]
mod tests_state;
#[cfg(all(test, not(loom)))]
mod tests_task;
