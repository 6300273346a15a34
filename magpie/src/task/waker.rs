//! The task's `Waker`: a `RawWaker` whose data is the task's header pointer and whose every
//! live copy holds one of the task's references.
//!
//! * `clone` takes a reference ([`State::ref_inc`](super::state::State::ref_inc));
//! * `drop` drops one, freeing the task if it was the last;
//! * `wake` consumes the waker: its reference goes to a new `Notified` if the task was idle
//!   (`TransitionToNotifiedByVal::Submit`), or is dropped;
//! * `wake_by_ref` takes a new reference only for a new `Notified`.
//!
//! Waking a complete task does nothing but drop the waker's reference (state.rs). The poller
//! lends the future a waker that borrows the poller's own reference ([`waker_ref`]), so a
//! poll that never clones the waker touches the count not at all.

use std::mem::ManuallyDrop;
use std::task::{RawWaker, RawWakerVTable, Waker};

use super::raw::RawTask;
use super::state::{TransitionToNotifiedByRef, TransitionToNotifiedByVal};

static WAKER_VTABLE: RawWakerVTable =
    RawWakerVTable::new(clone_waker, wake_by_val, wake_by_ref, drop_waker);

fn raw_waker(task: RawTask) -> RawWaker {
    RawWaker::new(task.waker_data(), &WAKER_VTABLE)
}

/// A waker for `task` that borrows the caller's reference: it must not outlive it, and is
/// never dropped (its clones are ordinary wakers with references of their own).
///
/// # Safety
///
/// The caller holds a reference to `task` for as long as the result is used.
pub(crate) unsafe fn waker_ref(task: RawTask) -> ManuallyDrop<Waker> {
    // SAFETY: the vtable's contract holds: the data is a task header, and the caller's
    // reference stands in for the waker's (it is never dropped, so never released).
    ManuallyDrop::new(unsafe { Waker::from_raw(raw_waker(task)) })
}

/// # Safety
///
/// `data` is the data of a live waker of this vtable (it holds a reference).
unsafe fn clone_waker(data: *const ()) -> RawWaker {
    // SAFETY: the waker's reference keeps the task allocated (state.rs invariant 5).
    let task = unsafe { RawTask::from_waker_data(data) };
    // SAFETY: as above; the new reference belongs to the returned waker.
    unsafe { task.state() }.ref_inc();
    raw_waker(task)
}

/// # Safety
///
/// As [`clone_waker`]; the waker's reference is consumed.
unsafe fn drop_waker(data: *const ()) {
    // SAFETY: as in `clone_waker`; the waker gives its reference up here.
    unsafe { RawTask::from_waker_data(data).drop_reference() }
}

/// # Safety
///
/// As [`drop_waker`].
unsafe fn wake_by_val(data: *const ()) {
    // SAFETY: as in `clone_waker`.
    let task = unsafe { RawTask::from_waker_data(data) };
    // SAFETY: the waker's reference keeps the task alive for this RMW.
    match unsafe { task.state() }.transition_to_notified_by_val() {
        TransitionToNotifiedByVal::DoNothing => {}
        // SAFETY: state.rs invariant 1: the waker's reference now belongs to a new Notified.
        TransitionToNotifiedByVal::Submit => unsafe { task.schedule() },
        // SAFETY: state.rs invariant 5: that RMW dropped the last reference.
        TransitionToNotifiedByVal::Dealloc => unsafe { task.dealloc() },
    }
}

/// # Safety
///
/// As [`clone_waker`]; the waker keeps its reference.
unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: as in `clone_waker`.
    let task = unsafe { RawTask::from_waker_data(data) };
    // SAFETY: the waker's reference keeps the task alive for this RMW.
    match unsafe { task.state() }.transition_to_notified_by_ref() {
        TransitionToNotifiedByRef::DoNothing => {}
        // SAFETY: state.rs invariant 1: the RMW took a new reference for a new Notified.
        TransitionToNotifiedByRef::Submit => unsafe { task.schedule() },
    }
}
