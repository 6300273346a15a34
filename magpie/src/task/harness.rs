//! The typed side of a task's life: polling it, cancelling it, completing it, and the
//! `JoinHandle`'s reads of it, each following the answers of `state.rs`'s transitions.
//!
//! A [`Harness`] is a `Cell<F, S>` pointer whose holder has one of the task's references
//! (raw.rs invariant 2). Every method consumes the harness; those that end with the caller's
//! reference dropped may free the task, after which nothing touches it.
//!
//! # Panics
//!
//! User code runs in four places here: the future's `poll`, the future's destructor, the
//! output's destructor, and the join waker (`wake_by_ref`, and its destructor). Each runs
//! under `catch_unwind`, so that a panic never skips a state transition (which would hang the
//! `JoinHandle` or leak the task). What becomes of a payload:
//!
//! * a panic in `poll` is the task's result, `JoinError::Panic`;
//! * a panic while dropping the future, after `poll` returned `Ready` or panicked, is
//!   discarded: the task has a result already (the output, or the first panic);
//! * a panic while dropping the future of a cancelled task replaces `JoinError::Cancelled`
//!   with `JoinError::Panic`, as tokio does: it is the only thing the task did;
//! * panics in the output's destructor and in the join waker are discarded: nobody waits for
//!   them (the handle is gone, or is the one being woken).
//!
//! The future is dropped exactly once, in place, before `transition_to_complete` makes the
//! result visible to the handle (DESIGN.md "Tasks").

use std::future::Future;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

use super::error::JoinError;
use super::notified::{Notified, Schedule};
use super::raw::{drop_payload, Cell, Core, Header, RawTask, Trailer};
use super::state::{
    Snapshot, State, TransitionToIdle, TransitionToRunning, TransitionToShutdown,
    TransitionToStored,
};
use super::waker::waker_ref;
use crate::sync::atomic::Relaxed;
use crate::sync::StatAtomicU64;
use crate::util::unwind::{halt_unwinding, Payload};

/// Who polls a task, and how: what the task's insight counters (raw.rs invariant 6) and the
/// poller's "polling now" word record of the poll.
pub(crate) struct Poller<'a> {
    /// The poller's polling word (task/id.rs, "The current task"), to which [`Harness::poll`]
    /// writes the task's id as the run begins; whoever owns the word clears it after the run
    /// returns. The worker's (`WorkerCounters::polling`: its "inside a task" flag, and what
    /// `Runtime::tasks`, the stall monitor and `task::id` read), or off the workers the run's
    /// own (`Notified::run`, for `task::id`).
    pub(crate) polling: &'a StatAtomicU64,
    /// When the poll starts, in ns on the runtime's clock: the worker's last clock reading
    /// for an untimed poll (no clock is read for it), the poll's start for a timed one.
    pub(crate) start_ns: u64,
    /// For a timed poll, the runtime's clock; the harness reads it once, when `poll`
    /// returns, and leaves the reading in `end_ns` for the worker's histogram and trace.
    pub(crate) clock: Option<&'a dyn Fn() -> u64>,
    pub(crate) end_ns: std::cell::Cell<u64>,
}

impl Poller<'_> {
    /// A poll off the workers, untimed, at time 0 (the blocking pool's tasks are not in any
    /// live-task list, so nobody reads the times), with `polling` as its word.
    pub(crate) fn off_pool(polling: &StatAtomicU64) -> Poller<'_> {
        Poller {
            polling,
            start_ns: 0,
            clock: None,
            end_ns: std::cell::Cell::new(0),
        }
    }
}

/// A typed pointer to a task whose holder has one of its references.
pub(crate) struct Harness<F: Future, S: 'static> {
    cell: NonNull<Cell<F, S>>,
}

impl<F, S> Harness<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// # Safety
    ///
    /// `cell` is a live task (raw.rs invariant 1) and the caller holds one of its references
    /// until it calls a method that says the reference is consumed (raw.rs invariant 2).
    pub(crate) unsafe fn from_cell(cell: NonNull<Cell<F, S>>) -> Harness<F, S> {
        Harness { cell }
    }

    fn raw(&self) -> RawTask {
        RawTask::from_cell(self.cell)
    }

    fn state(&self) -> &State {
        &self.header().state
    }

    fn header(&self) -> &Header {
        // SAFETY: raw.rs invariant 2: the harness's holder keeps the cell alive.
        unsafe { &self.cell.as_ref().header }
    }

    fn core(&self) -> &Core<F, S> {
        // SAFETY: as in `state`; the core is only ever shared (its stage is an UnsafeCell).
        unsafe { &self.cell.as_ref().core }
    }

    fn trailer(&self) -> &Trailer {
        // SAFETY: as in `core`.
        unsafe { &self.cell.as_ref().trailer }
    }

    /// Frees the task.
    fn dealloc(self) {
        // SAFETY: every caller calls this right after an RMW that answered "last reference"
        // (state.rs invariant 5).
        unsafe { self.raw().dealloc() }
    }

    /// Frees the task if `after`, the state an RMW of ours that dropped our reference left,
    /// counts no reference: that RMW dropped the last one (state.rs invariant 5). Otherwise
    /// nothing, and the task is no longer ours to touch.
    fn dealloc_if_unreferenced(self, after: Snapshot) {
        if after.ref_count() == 0 {
            self.dealloc();
        }
    }

    /// Drops this holder's reference, freeing the task if it was the last.
    fn drop_reference(self) {
        if self.state().ref_dec() {
            self.dealloc();
        }
    }

    /// Runs the task once for the holder of its `Notified`, consuming the `Notified`'s
    /// reference. Returns whether the task completed.
    pub(crate) fn poll(self, poller: &Poller<'_>) -> bool {
        // Relaxed: written by this thread, read by it (`task::id`, the worker's "inside a
        // task" test) or only compared with ids (the dump, the stall monitor): nothing is
        // reached through it. Before the transition: a dump that sees RUNNING and a worker
        // whose word names the task has the right worker.
        poller
            .polling
            .store(self.header().identity.id.as_u64(), Relaxed);
        match self.state().transition_to_running() {
            TransitionToRunning::Success => self.poll_future(poller),
            TransitionToRunning::Cancelled => {
                self.cancel();
                true
            }
            TransitionToRunning::Failed => false,
            TransitionToRunning::Dealloc => {
                self.dealloc();
                false
            }
        }
    }

    /// Polls the future once; this thread holds `RUNNING` and the `Notified`'s reference.
    /// Returns whether the task completed.
    ///
    /// This is the hottest path of the async rows: besides the poll itself it costs one test
    /// of the task's origin word and one more test after the poll (the polling word is
    /// written in `poll` and cleared by the poller's owner). A task with insight counters,
    /// and a timed poll, take the cold functions below (BENCHMARKS.md, "Task identity: what
    /// it costs").
    fn poll_future(self, poller: &Poller<'_>) -> bool {
        let header = self.header();
        // One test before the poll and one after for both kinds of extra work.
        let noted = header.identity.has_insight() | poller.clock.is_some();
        if noted {
            begin_noted_poll(header, poller);
        }
        let polled = {
            // SAFETY: the poller's reference outlives the waker (it is dropped at the end of
            // this block, before any transition below gives that reference up); the waker's
            // clones take references of their own.
            let waker = unsafe { waker_ref(self.raw()) };
            let mut cx = Context::from_waker(&waker);
            halt_unwinding(|| {
                // SAFETY: state.rs invariant 2: `transition_to_running` answered `Success`,
                // so this thread holds RUNNING and the stage holds the future.
                unsafe { self.core().poll(&mut cx) }
            })
        };
        // Before any transition out of RUNNING: after it, another poller may be writing.
        if noted {
            end_noted_poll(header, poller);
        }
        match polled {
            Ok(Poll::Pending) if self.state().woken_while_running() => {
                // Woken while it ran (by itself, as `yield_now` does, or by someone else): it
                // goes to the back of the queue, behind the tasks that waited, still
                // `RUNNING` (state.rs, "Woken while running").
                // SAFETY: state.rs invariant 1: NOTIFIED is set and no Notified exists, so
                // the poller's reference becomes a held one; the scheduler type is `S`.
                let notified = unsafe { Notified::<S>::from_raw(self.raw()) };
                self.core().scheduler.yield_task(notified);
                false
            }
            Ok(Poll::Pending) => match self.state().transition_to_idle() {
                TransitionToIdle::Ok => false,
                TransitionToIdle::OkNotified => {
                    // Woken after `woken_while_running` looked: as above, but the task went
                    // idle, and its next poller claims it as usual.
                    // SAFETY: state.rs invariant 1: the poller's reference now belongs to a
                    // new Notified, with NOTIFIED set; the scheduler type is `S`.
                    let notified = unsafe { Notified::<S>::from_raw(self.raw()) };
                    self.core().scheduler.yield_task(notified);
                    false
                }
                TransitionToIdle::OkDealloc => {
                    self.dealloc();
                    false
                }
                TransitionToIdle::Cancelled => {
                    self.cancel();
                    true
                }
            },
            Ok(Poll::Ready(output)) => {
                // The output is the result; a panic from the future's destructor is not.
                if let Err(payload) = self.drop_future() {
                    drop_payload(payload);
                }
                self.complete(Ok(output));
                true
            }
            Err(payload) => {
                if let Err(second) = self.drop_future() {
                    drop_payload(second);
                }
                self.complete(Err(JoinError::panic(payload)));
                true
            }
        }
    }

    /// Drops the future of an aborted task (this thread holds `RUNNING`) and completes it.
    fn cancel(self) {
        let error = match self.drop_future() {
            Ok(()) => JoinError::cancelled(),
            Err(payload) => JoinError::panic(payload),
        };
        self.complete(Err(error));
    }

    /// Drops the future in place; this thread holds `RUNNING`.
    fn drop_future(&self) -> Result<(), Payload> {
        // SAFETY: state.rs invariant 2: the caller holds RUNNING.
        unsafe { self.core().drop_stage() }
    }

    /// Stores the result (or drops it, if the handle is gone already), leaves the live list,
    /// marks the task complete, wakes the join waker (state.rs invariants 3, 4 and 7, and
    /// "The live list and the output"), and drops the reference this thread held while it
    /// held `RUNNING`.
    fn complete(self, result: Result<F::Output, JoinError>) {
        // Whether the handle is gone: then the completer's reference goes with `COMPLETE`.
        let detached = if self.state().load().is_join_interested() {
            // SAFETY: state.rs invariant 2: this thread still holds RUNNING, and the future is
            // gone (every caller dropped it).
            unsafe { self.core().store_output(result) };
            match self.state().transition_to_stored() {
                // The output is the handle's now: a handle dropped from here on drops it in
                // its destructor, so it never waits for the steps below.
                TransitionToStored::Stored => false,
                TransitionToStored::Detached => {
                    // The handle left after the load above: the result is still ours, and
                    // it goes before the task leaves the live list, as below.
                    // SAFETY: state.rs invariants 2 and 3: we hold RUNNING, and no handle is
                    // left to read the stage.
                    if let Some(result) = unsafe { self.core().take_detached_result() } {
                        self.drop_detached_result(result);
                    }
                    true
                }
            }
        } else {
            // The handle is gone (JOIN_INTEREST is never set again), so the result is ours.
            // No need to store it, nor to set STORED.
            self.drop_detached_result(result);
            true
        };
        // Leave the owner's list of live tasks before the handle can see the task complete,
        // so that a caller who awaited every handle sees none alive. If the list held a
        // reference, it is ours now, dropped with `COMPLETE` below; we still hold our own
        // until then, so the list's is not the last. With no handle left, nobody awaits the
        // task: the scheduler may unlink it later, and then it keeps our reference, which
        // holds the task until then.
        let deferred = detached && self.core().scheduler.release_detached(self.raw());
        let list_ref = !deferred && self.core().scheduler.release(self.raw());
        // A detached task's completer has nothing left to do after `COMPLETE` (the handle
        // cleared JOIN_WAKER with JOIN_INTEREST, and nobody sets it again), so its own
        // reference goes in the same RMW, unless the scheduler took it over.
        let snapshot = self
            .state()
            .transition_to_complete(usize::from(list_ref) + usize::from(detached && !deferred));
        if detached {
            debug_assert!(!snapshot.is_join_waker_set());
            self.dealloc_if_unreferenced(snapshot);
            return;
        }
        // The output is the handle's (state.rs invariant 3). A handle dropped after the
        // store cleared JOIN_WAKER with JOIN_INTEREST.
        debug_assert!(snapshot.is_join_interested() || !snapshot.is_join_waker_set());
        if snapshot.is_join_waker_set() {
            let woken = halt_unwinding(|| {
                // SAFETY: state.rs invariant 4: COMPLETE and JOIN_WAKER are set, so this
                // thread alone reads the slot until `unset_waker_after_complete`.
                unsafe { self.trailer().wake_join() }
            });
            if let Err(payload) = woken {
                drop_payload(payload);
            }
            if !self
                .state()
                .unset_waker_after_complete()
                .is_join_interested()
            {
                // The handle was dropped while we read the waker, leaving it to us.
                self.drop_join_waker();
            }
        }
        self.drop_reference();
    }

    /// Drops the result of a task whose handle is gone, now, before the task leaves the live
    /// list, so that `wait_idle` returns only after a detached task's output destructor has
    /// run (tests/task_combinations.rs). A panic nobody will see (the task's, or the one its
    /// cancelled future's destructor raised) is the scheduler's: an unhandled panic.
    fn drop_detached_result(&self, result: Result<F::Output, JoinError>) {
        match result {
            Err(error) if error.is_panic() => {
                let payload = error.into_panic();
                self.core().scheduler.unhandled_panic(payload);
            }
            result => {
                if let Err(payload) = halt_unwinding(move || drop(result)) {
                    drop_payload(payload);
                }
            }
        }
    }

    /// Empties the join waker slot, catching a panic from the waker's destructor.
    fn drop_join_waker(&self) {
        let dropped = halt_unwinding(|| {
            // SAFETY: state.rs invariant 4: every caller owns the slot (see the call sites).
            unsafe { self.trailer().set_waker(None) }
        });
        if let Err(payload) = dropped {
            drop_payload(payload);
        }
    }

    /// The runtime's shutdown: cancels the task in place if it is idle, then drops the
    /// caller's reference.
    pub(crate) fn shutdown(self) {
        match self.state().transition_to_shutdown() {
            // The caller now holds RUNNING; `complete` drops its reference.
            TransitionToShutdown::Claimed => self.cancel(),
            TransitionToShutdown::Busy => self.drop_reference(),
        }
    }

    /// Cancels the task of a `Notified` that will not run (its queue is drained at shutdown,
    /// or it is dropped), consuming the `Notified`'s reference: claims the task as a poller
    /// would, which a held `Notified` (state.rs, "Woken while running") must do, since it
    /// holds `RUNNING` already, and drops the future.
    pub(crate) fn shutdown_notified(self) {
        match self.state().transition_to_running() {
            TransitionToRunning::Success | TransitionToRunning::Cancelled => self.cancel(),
            TransitionToRunning::Failed => {}
            TransitionToRunning::Dealloc => self.dealloc(),
        }
    }

    /// The `JoinHandle`'s poll: takes the output if the task is complete, and otherwise
    /// leaves `waker` to be woken when it completes.
    pub(crate) fn try_read_output(
        self,
        dst: &mut Poll<Result<F::Output, JoinError>>,
        waker: &Waker,
    ) {
        if self.can_read_output(waker) {
            // SAFETY: state.rs invariant 2's exception: the handle saw COMPLETE (with the
            // Acquire that pairs with `transition_to_complete`) while holding JOIN_INTEREST.
            *dst = Poll::Ready(unsafe { self.core().take_output() });
        }
    }

    /// Whether the task is complete; if not, makes sure the join waker is `waker` (the
    /// `JOIN_WAKER` handshake of state.rs invariant 4).
    fn can_read_output(&self, waker: &Waker) -> bool {
        let snapshot = self.state().load();
        if snapshot.is_complete() {
            return true;
        }
        if snapshot.is_join_waker_set() {
            // SAFETY: state.rs invariant 4: while JOIN_WAKER is set the slot is read-only.
            if unsafe { self.trailer().will_wake(waker) } {
                return false;
            }
            // Take the slot back to store the new waker, unless the task completed meanwhile.
            if self.state().unset_waker().is_err() {
                return true;
            }
        }
        self.set_join_waker(waker.clone())
    }

    /// Stores `waker` in the slot (which the handle owns: `JOIN_WAKER` is clear) and lends it
    /// to the completer. Returns whether the task completed first.
    fn set_join_waker(&self, waker: Waker) -> bool {
        // SAFETY: state.rs invariant 4: JOIN_WAKER is clear, so the handle owns the slot.
        // (Dropping the previous waker here is the handle's own thread, as any drop.)
        unsafe { self.trailer().set_waker(Some(waker)) };
        // Complete before the waker was lent: the slot is still the handle's, and the waker
        // stays there until the handle drops (or re-lends) it.
        self.state().set_join_waker().is_err()
    }

    /// The `JoinHandle` is dropped: drops the output if it was stored first (state.rs
    /// invariant 3; maybe before the task is complete, invariant 7), the join waker if the slot is the handle's (invariant 4), and the
    /// handle's reference.
    pub(crate) fn drop_join_handle(self) {
        // The common case, a handle that never lent a waker (JOIN_WAKER clear): the slot is
        // the handle's until its RMW (state.rs invariant 4; only the handle sets JOIN_WAKER),
        // so it is emptied first, and the reference goes in the same RMW as the interest
        // unless the output is there to drop.
        let lent = self.state().load().is_join_waker_set();
        if !lent {
            self.drop_join_waker();
        }
        let next = match self.state().unset_join_interested(!lent) {
            Ok(next) if !lent => {
                self.dealloc_if_unreferenced(next);
                return;
            }
            Ok(next) => next,
            Err(next) => {
                // SAFETY: state.rs invariants 2 and 3: the output was stored first (STORED,
                // paired with this RMW's Acquire), so the handle drops it (nothing if it was
                // read already); the completer no longer touches the stage.
                if let Err(payload) = unsafe { self.core().drop_stage() } {
                    drop_payload(payload);
                }
                next
            }
        };
        if lent && !next.is_join_waker_set() {
            // State.rs invariant 4: JOIN_WAKER is clear, so the slot is the handle's again.
            self.drop_join_waker();
        }
        self.drop_reference();
    }
}

/// The start of a timed poll, or of a poll of a task with insight counters
/// (`Harness::poll_future`).
#[cold]
#[inline(never)]
fn begin_noted_poll(header: &Header, poller: &Poller<'_>) {
    if let Some(insight) = header.identity.insight() {
        insight.activity.begin_poll(poller.start_ns);
    }
}

/// The end of a timed poll, or of a poll of a task with insight counters: reads the clock
/// for a timed one and leaves the reading in the poller, and records the poll in the counters
/// (`Harness::poll_future`).
#[cold]
#[inline(never)]
fn end_noted_poll(header: &Header, poller: &Poller<'_>) {
    let elapsed = poller.clock.map(|clock| {
        let end = clock();
        poller.end_ns.set(end);
        end.saturating_sub(poller.start_ns)
    });
    if let Some(insight) = header.identity.insight() {
        insight.activity.end_poll(elapsed);
    }
}
