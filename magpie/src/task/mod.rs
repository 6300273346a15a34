//! Tasks: heap-allocated, reference-counted futures (and submitted closures) that the
//! workers poll.
//!
//! So far this holds only the state word ([`state`]): the flags and reference count that
//! every thread touching a task agrees through. Still to come with the async-task issue,
//! each in its own file: the allocation (header, stage cell, join waker slot, vtable) and its
//! type-erased pointer; the typed handles `Notified`, `JoinHandle` and the waker; the harness
//! that polls a task under a cooperative budget and follows the outcomes of the state
//! transitions.

#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod state;

#[cfg(all(test, loom))]
mod loom_state;
#[cfg(all(test, not(loom)))]
mod tests_state;
