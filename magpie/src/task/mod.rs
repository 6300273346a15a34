//! Tasks: heap-allocated, reference-counted futures (and submitted closures) that the
//! workers poll.
//!
//! What exists so far, tested but not yet used by the runtime: the state word
//! ([`state`]), the one allocation and its type-erased pointer (`raw`), the harness that
//! polls, cancels and completes a task (`harness`), its waker (`waker`), the scheduler's
//! handle `Notified` and the `Schedule` trait (`notified`), and `JoinHandle` / `JoinError`.
//! Still to come with the async-task issue: the cooperative budget, the blocking
//! `JoinHandle::join`, and the wiring into the workers.

#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod error;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod harness;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod join;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod notified;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod raw;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod state;
#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod waker;

#[cfg(all(test, loom))]
mod loom_state;
#[cfg(all(test, not(loom)))]
mod tests_state;
#[cfg(all(test, not(loom)))]
mod tests_task;
