//! The task state word: one `AtomicUsize` holding seven flags and a reference count.
//!
//! Every decision about a task (who polls it, who drops its future, who drops its output,
//! who reads the `JoinHandle`'s waker, who frees the allocation) is made by a single
//! read-modify-write of this word, so the modification order of one atomic settles every race.
//! [`State`] holds the word, [`Snapshot`] is a `Copy` of it, and each `transition_to_*`
//! method is one RMW (a compare-and-swap loop counts as one) returning a `#[must_use]` answer
//! that tells the caller what it now owns.
//!
//! The design follows tokio's `runtime/task/state.rs` (the flag set, the `JOIN_WAKER`
//! handshake, "notify and let a worker drop it" for aborts) and async-task's `state.rs` (a
//! duplicate wake still writes the word, so it is ordered before the poll that answers it).
//!
//! # Words
//!
//! * The **stage** is the future, then its output (or the cancellation error), then nothing:
//!   a cell in the task allocation (not in this file).
//! * A **`Notified`** is the scheduler's handle to a task in a run queue; running it is
//!   *polling*, and the thread polling holds the `Notified`'s reference for the whole poll
//!   (it is *the poller*).
//! * The **join waker** is the waker the `JoinHandle` leaves in the task for the completer.
//!
//! # Invariants
//!
//! 1. At most one `Notified` exists. One is made only when a transition reports `Submit` or
//!    `OkNotified`, which happens only where `NOTIFIED` goes from clear to set on an idle task
//!    (or stays set while `RUNNING` is cleared), or when a poller finds `NOTIFIED` set as its
//!    poll ends and keeps `RUNNING` ("Woken while running"); while a `Notified` exists,
//!    `NOTIFIED` is set, unless the runtime's shutdown claimed the task
//!    ([`State::transition_to_shutdown`] clears it; the task is never idle again).
//! 2. Only the holder of `RUNNING` touches the stage, with two exceptions for the
//!    `JoinHandle` (while `JOIN_INTEREST` is set): once `COMPLETE` is set it takes the
//!    output, and once `STORED` is set its destructor drops it. `RUNNING` is set by
//!    [`State::transition_to_running`] (the poller) or [`State::transition_to_shutdown`]
//!    (the runtime at shutdown), never both; a poller may pass it on, still set, with a
//!    held `Notified` (see "Woken while running"). The holder of `RUNNING` no longer touches the
//!    stage after its [`State::transition_to_stored`] answered [`TransitionToStored::Stored`].
//! 3. The output is dropped exactly once: the order of the completer's
//!    [`State::transition_to_stored`] and the handle's [`State::unset_join_interested`]
//!    decides who drops it. Stored first: the handle does (reading it, or in its destructor);
//!    interest dropped first: the completer does. (A completer that finds `JOIN_INTEREST`
//!    clear before storing the output drops it without storing it, and skips `STORED`.)
//! 4. While `JOIN_WAKER` is clear the `JoinHandle` owns the join waker slot; while it is set
//!    the slot is read-only, and after `COMPLETE` only the completer reads it, until it
//!    clears `JOIN_WAKER` again with [`State::unset_waker_after_complete`].
//! 5. Every reference is dropped exactly once, and the RMW that takes the count to zero is
//!    the one whose caller frees the task. Transitions that drop a reference say so.
//! 6. `COMPLETE` is never cleared; `CANCELLED` is never set once `COMPLETE` is.
//! 7. The owner's list of live tasks (`OwnedTasks`, which `Runtime::wait_idle` watches)
//!    loses the task after the output was dropped unless the `JoinHandle` was still
//!    interested when the output was stored; and before `COMPLETE` is set, unless the task
//!    was detached when it completed (then no handle waits for `COMPLETE`, and the unlink may
//!    come after it). See "The live list and the output" below.
//!
//! # The live list and the output
//!
//! Two guarantees pull in opposite directions. A caller who awaited every `JoinHandle` must see
//! no task alive, so a task leaves the live list *before* `COMPLETE` (which is what the handle
//! waits for). And `wait_idle` must return only after every output nobody will read was dropped,
//! so a detached task's output is dropped *before* the task leaves the list. The completer
//! (`Harness::complete`) therefore runs, in this order:
//!
//! 1. `load`: if `JOIN_INTEREST` is already clear, the result is its own: it drops it, never
//!    storing it (the common detached case; no RMW).
//! 2. Otherwise it stores the output and sets `STORED` ([`State::transition_to_stored`], one
//!    RMW). If that RMW finds `JOIN_INTEREST` clear (the handle left between steps 1 and 2),
//!    the output is still its own: it drops it now.
//! 3. It removes the task from the live list.
//! 4. It sets `COMPLETE` ([`State::transition_to_complete`], which also drops the list's
//!    reference, and the completer's own when the task is detached) and wakes the join waker.
//!
//! A detached task completing on one of its runtime's workers skips step 3 and keeps the
//! completer's reference through step 4: the worker unlinks it later with others, a shard
//! lock for many tasks, and then drops that reference with the list's
//! (`WorkerThread::defer_unlink`). Nothing waits for such a task's `COMPLETE`, and
//! `wait_idle` waits for the unlink, after which the output is dropped as before.
//!
//! A handle dropped after step 2 (its [`State::unset_join_interested`] finds `STORED`) drops the
//! output in its own destructor, at once, though the task is not complete yet: the completer has
//! let go of the stage (invariant 2), and the RMW pair (`transition_to_stored`'s Release,
//! `unset_join_interested`'s Acquire) orders the store before the drop. So once a handle's
//! `drop` has returned, its task's output is dropped already or will be dropped by the completer
//! before step 3, and a `wait_idle` called after that `drop` (or any thread that sees the task
//! leave the list after it) sees the output's destructor done.
//!
//! Without `STORED` there was a window: a handle dropped between the completer's check and
//! `COMPLETE` left the drop to the completer after step 3, because the handle cannot drop an
//! output it does not know is stored, and the completer cannot move step 3 after `COMPLETE`. A
//! load cannot close it: the completer must learn, in the same modification order as the
//! handle's RMW, whether the handle saw the output stored, and only an RMW (or a CAS) does that.
//! The cost is that one RMW, on a task whose handle is still interested when it completes; a task
//! detached before it completes pays nothing new.
//!
//! A handle dropped *concurrently* with `wait_idle`, its destructor still running, may drop the
//! output after `wait_idle` returned: nothing can promise more, since `wait_idle` could as well
//! have returned before that `drop` began. A handle that outlives the task and is dropped unread
//! later drops the output then, as before.
//!
//! # Woken while running
//!
//! A task woken during its own poll (by `yield_now`, by a spent cooperative budget, or by
//! another thread) could go idle and be claimed again: [`State::transition_to_idle`] clears
//! `RUNNING` and leaves `NOTIFIED` (`OkNotified`), and the next poller's
//! [`State::transition_to_running`] swaps them back, two RMWs for a task that never stopped
//! being runnable. Instead, when the poll returns `Pending`, the poller loads the word
//! ([`State::woken_while_running`]); if `NOTIFIED` is set and `CANCELLED` clear, it keeps
//! `RUNNING` and queues a *held* `Notified`, made of its own reference. Whoever takes that
//! `Notified` from the queue (its worker, or a thief) runs it as any other:
//! [`State::transition_to_running`] finds `RUNNING` and `NOTIFIED` both set, which only a
//! held `Notified` leaves, and clears `NOTIFIED` (so that a wake during the coming poll is
//! seen after it) in the same one RMW, reporting an abort as it would for an idle task. One
//! RMW instead of two, and no word in the header: the state word alone tells a held
//! `Notified` from the others.
//!
//! While it is queued, the task looks as it does during a poll, and every other party acts
//! as it would then: a wake finds `NOTIFIED` set and submits nothing; an abort sets
//! `CANCELLED`, which the resumer sees and answers by dropping the future; the runtime's
//! shutdown ([`State::transition_to_shutdown`]) answers `Busy`, and the queue's drain, which
//! cancels every `Notified` left (`Notified::shutdown`), claims the held one as a poller
//! would and drops its future. Invariant 2 holds as written: the holder of the held
//! `Notified` is the holder of `RUNNING`.
//!
//! What keeps "`RUNNING` and `NOTIFIED` both set" unambiguous for a `Notified`'s holder is
//! the shutdown's claim: it may set `RUNNING` on an idle task whose `Notified` is queued, and
//! it clears `NOTIFIED` as it does. `CANCELLED` is set with it, and a wake of a task that is
//! running and cancelled leaves `NOTIFIED` alone (the poller, seeing `CANCELLED`, drops the
//! future whatever `NOTIFIED` says), so the bit stays clear until `COMPLETE`; that stale
//! `Notified`'s holder then finds `RUNNING` without `NOTIFIED`, or `COMPLETE`, and only drops
//! its reference (`TransitionToRunning::Failed`).
//!
//! A wake that lands after the load and before the poller's next RMW is not lost: the poller
//! then goes idle with [`State::transition_to_idle`], which sees it and answers `OkNotified`.
//!
//! # Cancellation
//!
//! An abort from another thread ([`State::transition_to_cancelled`]) never drops the future
//! in place: it sets `CANCELLED` and, if the task is idle, also `NOTIFIED`, handing a new
//! `Notified` to the caller to submit. A worker then runs it, sees `CANCELLED`, and drops the
//! future instead of polling it. The alternative, claiming `RUNNING` and dropping the future
//! on the aborting thread, would run the future's destructor on whatever thread called
//! `abort` (maybe inside another task's poll, maybe holding the caller's locks, maybe not a
//! worker), and make the aborter a second kind of stage writer. With notify-and-drop, only
//! pollers write the stage (invariant 2). Runtime shutdown is the exception: the runtime's
//! own thread claims idle tasks in place ([`State::transition_to_shutdown`]), because no
//! worker is left to run them.

use std::fmt;

use crate::sync::atomic::*;
use crate::sync::AtomicUsize;

/// Set while a thread has the exclusive right to touch the stage: a poller between
/// [`State::transition_to_running`] and [`State::transition_to_idle`] or
/// [`State::transition_to_complete`], or the runtime after [`State::transition_to_shutdown`].
/// Never set together with `COMPLETE`, and never set by a thread that did not clear `NOTIFIED`
/// or claim an idle task at shutdown.
pub(crate) const RUNNING: usize = 1 << 0;

/// Set when the task must be polled again. On an idle task it means a `Notified` exists
/// (invariant 1); while `RUNNING` it means "woken during the poll: reschedule when it
/// returns `Pending`". Set by a wake or an abort; cleared only when a poller starts. It may
/// stay set on a complete task, where it means nothing: every transition checks `COMPLETE`
/// first.
pub(crate) const NOTIFIED: usize = 1 << 1;

/// Set once the stage holds the output (or the cancellation error) and the future is gone,
/// and the task has left the live list (invariant 7). Set only by the holder of `RUNNING`,
/// in the same RMW that clears it; never cleared.
pub(crate) const COMPLETE: usize = 1 << 2;

/// Set when the task is aborted (or the runtime shuts down): the next thread to hold
/// `RUNNING` drops the future instead of polling it. Set at any time before `COMPLETE`,
/// never after it; never cleared.
pub(crate) const CANCELLED: usize = 1 << 3;

/// Set while the `JoinHandle` exists and has not given up on the output. Set at creation;
/// cleared once, by [`State::unset_join_interested`] when the handle is dropped; never set
/// again. The completer drops the output itself if it finds this clear before it stores it,
/// or when `transition_to_stored` finds it clear.
pub(crate) const JOIN_INTEREST: usize = 1 << 4;

/// Set while the join waker slot holds a waker the completer may read (invariant 4). Set by
/// the `JoinHandle` only while `JOIN_INTEREST` is set and `COMPLETE` is not; cleared by the
/// handle before `COMPLETE` or by the completer after it.
pub(crate) const JOIN_WAKER: usize = 1 << 5;

/// Set once the stage holds the output (or the cancellation error) and the holder of
/// `RUNNING` has let go of it: from then on a `JoinHandle` dropped drops the output itself,
/// though `COMPLETE` may not be set yet (invariants 2, 3 and 7). Set only by the holder of
/// `RUNNING`, by [`State::transition_to_stored`], before `COMPLETE`; never cleared. A task
/// whose handle was gone before its output was stored never gets it.
pub(crate) const STORED: usize = 1 << 6;

/// The bits below the reference count.
pub(crate) const FLAG_MASK: usize = (1 << REF_COUNT_SHIFT) - 1;

/// Where the reference count starts: every bit from here up counts references.
pub(crate) const REF_COUNT_SHIFT: usize = 7;

/// One reference.
pub(crate) const REF_ONE: usize = 1 << REF_COUNT_SHIFT;

/// The bits of the reference count.
pub(crate) const REF_COUNT_MASK: usize = !FLAG_MASK;

/// The largest count [`State::ref_inc`] accepts before aborting the process: it keeps the top
/// bit of the word clear, like `Arc`'s `isize::MAX` limit. Reaching it takes leaking about
/// 2^57 wakers on a 64-bit target (2^25 on a 32-bit one); aborting then is the only safe
/// answer, since a wrapped count would free a task that is still referenced. Because the
/// count sits in the high bits, even a wrap could never reach the flags: adding `REF_ONE`
/// carries out of the top of the word, not into bit `REF_COUNT_SHIFT - 1`.
pub(crate) const MAX_REFS: usize = (isize::MAX as usize) >> REF_COUNT_SHIFT;

/// The state of a new task: two references (the `Notified` the spawner submits and the
/// `JoinHandle` it returns), `JOIN_INTEREST` (the handle exists) and `NOTIFIED` (the task is
/// about to be queued, so a wake before its first poll must not queue it twice). Nothing else
/// holds a reference yet: the runtime's live-task list takes a third when it links the task
/// (`OwnedTasks::bind`), and gives it back when the task leaves the list.
pub(crate) const INITIAL_STATE: usize = (2 * REF_ONE) | JOIN_INTEREST | NOTIFIED;

/// The state of a new task that nobody will join (`Runtime::execute`): [`INITIAL_STATE`]
/// without the handle, so one reference (the `Notified`'s) and no `JOIN_INTEREST`, as if its
/// handle had been dropped before the task was queued.
pub(crate) const DETACHED_STATE: usize = REF_ONE | NOTIFIED;

/// A copy of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(usize);

impl Snapshot {
    /// The raw word.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn bits(self) -> usize {
        self.0
    }

    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }

    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }

    /// A wake of a task that is running or already notified: sets `NOTIFIED`, unless the
    /// task is cancelled, which leaves it as it is. A poller that sees `CANCELLED` drops the
    /// future whatever `NOTIFIED` says, and a runtime that claimed the task at shutdown
    /// cleared `NOTIFIED` so that a `Notified` still queued cannot pass for a held one
    /// ("Woken while running"). (For a task idle and notified the bit is set already.)
    #[inline]
    fn note_wake(&mut self) {
        // `CANCELLED` shifted onto `NOTIFIED`'s place masks it out: three instructions and
        // no branch on the waker's path.
        const SHIFT: u32 = CANCELLED.trailing_zeros() - NOTIFIED.trailing_zeros();
        const _: () = assert!(CANCELLED >> SHIFT == NOTIFIED);
        self.0 |= NOTIFIED & !(self.0 >> SHIFT);
    }

    pub(crate) fn is_complete(self) -> bool {
        self.0 & COMPLETE != 0
    }

    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }

    pub(crate) fn is_join_interested(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }

    pub(crate) fn is_join_waker_set(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }

    pub(crate) fn is_stored(self) -> bool {
        self.0 & STORED != 0
    }

    /// Neither running nor complete: the future is in the stage, and nobody is polling it.
    pub(crate) fn is_idle(self) -> bool {
        self.0 & (RUNNING | COMPLETE) == 0
    }

    pub(crate) fn ref_count(self) -> usize {
        (self.0 & REF_COUNT_MASK) >> REF_COUNT_SHIFT
    }

    fn ref_inc(&mut self) {
        debug_assert!(self.ref_count() < MAX_REFS);
        self.0 += REF_ONE;
    }

    fn ref_dec(&mut self) {
        debug_assert!(self.ref_count() > 0, "reference count underflow");
        self.0 -= REF_ONE;
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("running", &self.is_running())
            .field("notified", &self.is_notified())
            .field("complete", &self.is_complete())
            .field("cancelled", &self.is_cancelled())
            .field("join_interested", &self.is_join_interested())
            .field("join_waker", &self.is_join_waker_set())
            .field("stored", &self.is_stored())
            .field("ref_count", &self.ref_count())
            .finish()
    }
}

/// What the holder of a `Notified` does after [`State::transition_to_running`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToRunning {
    /// It holds `RUNNING` (claimed now, or passed on with a held `Notified`): poll the
    /// future.
    Success,
    /// It holds `RUNNING`, but the task was aborted: drop the future, store the cancellation
    /// error, and complete.
    Cancelled,
    /// The runtime claimed the task at shutdown (it is running without `NOTIFIED`, or
    /// complete): the `Notified`'s reference was dropped; do nothing more.
    Failed,
    /// As `Failed`, and that was the last reference: free the task.
    Dealloc,
}

/// What the poller does after a `Pending` poll and [`State::transition_to_idle`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToIdle {
    /// Idle; the poller's reference was dropped. Do nothing more.
    Ok,
    /// Woken during the poll: idle and notified, and the poller's reference now belongs to a
    /// new `Notified`, which the poller must submit.
    OkNotified,
    /// Idle, and the poller's reference was the last one (no handle, no waker): free the task,
    /// which drops the future.
    OkDealloc,
    /// Aborted during the poll: nothing changed, the poller still holds `RUNNING` and its
    /// reference. Drop the future, store the cancellation error, and complete.
    Cancelled,
}

/// What the holder of `RUNNING`, having stored the output, does after
/// [`State::transition_to_stored`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToStored {
    /// The `JoinHandle` was still interested: the output is the handle's now (it reads it
    /// after `COMPLETE`, or drops it when dropped). Do not touch the stage again.
    Stored,
    /// The handle was dropped before the output was stored: the output is still the
    /// caller's. Drop it before the task leaves the live list (invariant 7).
    Detached,
}

/// What a waker consumed by `wake` does after [`State::transition_to_notified_by_val`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToNotifiedByVal {
    /// Nothing: the task is running (it will be rescheduled), already notified, or complete.
    /// The waker's reference was dropped.
    DoNothing,
    /// The waker's reference now belongs to a new `Notified`: submit it.
    Submit,
    /// The task is complete and the waker's reference was the last one: free the task.
    Dealloc,
}

/// What a waker woken by reference does after [`State::transition_to_notified_by_ref`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToNotifiedByRef {
    /// Nothing: the task is running, already notified, or complete.
    DoNothing,
    /// A new reference was taken for a new `Notified`: submit it.
    Submit,
}

/// What an aborting thread does after [`State::transition_to_cancelled`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToCancelled {
    /// Nothing: already complete or cancelled, or the poller or a queued `Notified` will act
    /// on `CANCELLED`.
    DoNothing,
    /// The task was idle: a new reference was taken for a new `Notified`; submit it so that a
    /// worker drops the future.
    Submit,
}

/// What the runtime does with a task after [`State::transition_to_shutdown`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToShutdown {
    /// The task was idle and the caller now holds `RUNNING`: drop the future, store the
    /// cancellation error and complete, on this thread.
    Claimed,
    /// The task is running (its poller will see `CANCELLED`) or complete: nothing to do.
    Busy,
}

/// The state word of one task.
pub(crate) struct State {
    val: AtomicUsize,
}

impl State {
    /// The state of a new task (see [`INITIAL_STATE`]): two references, notified, with a
    /// `JoinHandle`.
    #[inline]
    pub(crate) fn new() -> State {
        State {
            val: AtomicUsize::new(INITIAL_STATE),
        }
    }

    /// The state of a new task without a `JoinHandle` (see [`DETACHED_STATE`]).
    #[inline]
    pub(crate) fn new_detached() -> State {
        State {
            val: AtomicUsize::new(DETACHED_STATE),
        }
    }

    /// A snapshot of the word.
    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release in `transition_to_complete`, so a `JoinHandle` that
        // sees `COMPLETE` here may read the output.
        Snapshot(self.val.load(Acquire))
    }

    /// Runs one compare-and-swap loop: `f` decides, from the current value, an outcome and
    /// optionally a new value, which is then written; `f` runs again if the word changed
    /// meanwhile. Returns the outcome and the value written (or, if none, the value `f`
    /// decided on). Each caller states which halves of the orderings it needs and why.
    fn fetch_update<T>(
        &self,
        mut f: impl FnMut(Snapshot) -> (T, Option<Snapshot>),
    ) -> (T, Snapshot) {
        // Acquire, on this load and on a failed CAS: an outcome decided without writing (a
        // wake or an abort that finds the task complete, a handle that finds the output
        // ready) may be followed by reads of what the writer of that value published; pairs
        // with the Release half of the transition that wrote it (`transition_to_complete`).
        let mut current = Snapshot(self.val.load(Acquire));
        loop {
            let (outcome, next) = f(current);
            let Some(next) = next else {
                return (outcome, current);
            };
            // AcqRel on success: see each caller. (One ordering for all keeps the facade
            // free of the `Ordering` type; on x86 every RMW is AcqRel anyway.)
            match self
                .val
                .compare_exchange_weak(current.0, next.0, AcqRel, Acquire)
            {
                Ok(_) => return (outcome, next),
                Err(actual) => current = Snapshot(actual),
            }
        }
    }

    /// The holder of a `Notified` claims the task to poll it: clears `NOTIFIED` and sets
    /// `RUNNING` (for a held `Notified`, already set: "Woken while running"). If the task was
    /// aborted, reports [`TransitionToRunning::Cancelled`] (still claimed) so that the future
    /// is dropped rather than polled. If the runtime claimed it at shutdown, drops the
    /// `Notified`'s reference instead.
    #[inline]
    pub(crate) fn transition_to_running(&self) -> TransitionToRunning {
        // AcqRel: Acquire pairs with the Release of `transition_to_idle` (the previous poll's
        // writes to the future) and of the wakes and aborts that wrote the word since (what a
        // waker wrote first); Release matters for `Failed`, which drops a reference (pairs
        // with the Acquire of whichever RMW drops the last one). A held `Notified`'s previous
        // poll wrote no RMW after it: the queue that carried the `Notified` orders it, as it
        // orders a new task's allocation before its first poll.
        self.fetch_update(|mut s| {
            debug_assert!(
                s.is_notified() || s.is_running() || s.is_complete(),
                "a Notified exists only while NOTIFIED is set, or after a shutdown's claim"
            );
            let held = s.is_running() && s.is_notified();
            if !s.is_idle() && !held {
                s.ref_dec();
                let outcome = if s.ref_count() == 0 {
                    TransitionToRunning::Dealloc
                } else {
                    TransitionToRunning::Failed
                };
                return (outcome, Some(s));
            }
            let outcome = if s.is_cancelled() {
                TransitionToRunning::Cancelled
            } else {
                TransitionToRunning::Success
            };
            s.0 = (s.0 & !NOTIFIED) | RUNNING;
            (outcome, Some(s))
        })
        .0
    }

    /// The poller, after a `Pending` poll, asks whether to keep `RUNNING` and queue the task
    /// as a held `Notified` ("Woken while running" in the module docs): true if the task was
    /// woken during the poll and not aborted. A load; nothing changes.
    #[inline]
    pub(crate) fn woken_while_running(&self) -> bool {
        // Relaxed: only the decision is read here. `NOTIFIED`, once seen, stays set until a
        // `Notified`'s holder clears it, and none exists while we hold `RUNNING` from a poll;
        // `CANCELLED` is never cleared. A flag set after this load is seen by the next RMW,
        // ours (`transition_to_idle`) or the resumer's (`transition_to_running`), which also
        // carries the wake's happens-before (its Acquire).
        let s = Snapshot(self.val.load(Relaxed));
        debug_assert!(s.is_running() && !s.is_complete());
        s.is_notified() && !s.is_cancelled()
    }

    /// The poller gives the task up after a `Pending` poll: clears `RUNNING`, and hands its
    /// reference to a new `Notified` if the task was woken meanwhile, or drops it otherwise.
    /// If the task was aborted during the poll, changes nothing and reports
    /// [`TransitionToIdle::Cancelled`].
    #[inline]
    pub(crate) fn transition_to_idle(&self) -> TransitionToIdle {
        // AcqRel: Release publishes this poll's writes to the future to the next
        // `transition_to_running` (or to the thread that frees the task); Acquire pairs with
        // the Release of the wake that set `NOTIFIED` and, for `OkDealloc`, of every other
        // reference drop.
        self.fetch_update(|mut s| {
            debug_assert!(s.is_running() && !s.is_complete());
            if s.is_cancelled() {
                return (TransitionToIdle::Cancelled, None);
            }
            s.0 &= !RUNNING;
            if s.is_notified() {
                // The poller's reference moves to the new Notified: the count is unchanged.
                return (TransitionToIdle::OkNotified, Some(s));
            }
            s.ref_dec();
            let outcome = if s.ref_count() == 0 {
                TransitionToIdle::OkDealloc
            } else {
                TransitionToIdle::Ok
            };
            (outcome, Some(s))
        })
        .0
    }

    /// The holder of `RUNNING`, having stored the output (or the cancellation error) while
    /// `JOIN_INTEREST` was set, hands it over to the `JoinHandle`: sets `STORED`. If the
    /// handle was dropped meanwhile, reports [`TransitionToStored::Detached`]: the output is
    /// still the caller's to drop (invariant 3). `RUNNING` stays set: the caller then takes
    /// the task off the live list and calls [`State::transition_to_complete`]. See "The live
    /// list and the output" in the module docs.
    #[inline]
    pub(crate) fn transition_to_stored(&self) -> TransitionToStored {
        // AcqRel: Release publishes the stored output to a handle whose destructor finds
        // `STORED` and drops it before `COMPLETE` (pairs with the Acquire in
        // `unset_join_interested`). Acquire is not needed by the decision (only this word's
        // modification order is), nor for `Detached`: the handle never touched the stage.
        // A fetch_or, not a CAS: setting `STORED` on a detached task is harmless, since no
        // handle is left to read it.
        let prev = Snapshot(self.val.fetch_or(STORED, AcqRel));
        debug_assert!(prev.is_running() && !prev.is_complete() && !prev.is_stored());
        if prev.is_join_interested() {
            TransitionToStored::Stored
        } else {
            TransitionToStored::Detached
        }
    }

    /// The holder of `RUNNING`, having stored the output (or the cancellation error) and
    /// dealt with it ([`State::transition_to_stored`], or a drop without storing if
    /// `JOIN_INTEREST` was already clear), marks the task complete: clears `RUNNING`, sets
    /// `COMPLETE`, and drops `refs` references in the same RMW. Returns the new state: with
    /// `JOIN_WAKER` the caller must wake the join waker and then call
    /// [`State::unset_waker_after_complete`]. It never drops the output here: it did already,
    /// or the handle owns it.
    ///
    /// `refs` is 0, 1 or 2: the live list's reference, if the completer took it over in
    /// `Schedule::release`, and the completer's own, only if the task is detached (the
    /// completer saw `JOIN_INTEREST` clear: then `JOIN_WAKER` is clear and stays clear, and
    /// there is nothing left for the completer to do). A completer that drops its own
    /// reference here touches the task afterwards only to free it, when the returned count is
    /// 0 (invariant 5); one that keeps it drops it with [`State::ref_dec`] once done. Folding
    /// the drops in saves a detached task's completion two of its locked instructions.
    #[must_use]
    pub(crate) fn transition_to_complete(&self, refs: usize) -> Snapshot {
        debug_assert!(refs <= 2);
        // One addition: RUNNING is set and COMPLETE clear (the caller holds RUNNING, and
        // invariant 6), and the count is at least `refs` (the caller holds those references),
        // so subtracting RUNNING, adding COMPLETE and subtracting the references each change
        // only their own bits, with no borrow or carry across them.
        let delta = COMPLETE.wrapping_sub(RUNNING).wrapping_sub(refs * REF_ONE);
        // AcqRel: Release publishes the output written before completion to the `JoinHandle`
        // (pairs with the Acquire in `load`, `set_join_waker`, `unset_waker`), and orders
        // the completer's accesses to the task before it is freed (as `ref_dec`'s Release);
        // Acquire pairs with the Release in `set_join_waker`, so the caller may read the join
        // waker, and with every other reference drop, for a caller whose drop is the last
        // (as `ref_dec`'s fence).
        let prev = Snapshot(self.val.fetch_add(delta, AcqRel));
        debug_assert!(prev.is_running() && !prev.is_complete());
        debug_assert!(prev.ref_count() >= refs, "reference count underflow");
        Snapshot(prev.0.wrapping_add(delta))
    }

    /// A waker consumed by `wake`: sets `NOTIFIED` and hands its reference to a new `Notified`
    /// if the task is idle and not notified; otherwise just drops its reference (setting
    /// `NOTIFIED` first if the task is running, so the poller reschedules it). Waking a
    /// complete task does nothing but drop the reference.
    #[inline]
    pub(crate) fn transition_to_notified_by_val(&self) -> TransitionToNotifiedByVal {
        // AcqRel: Release makes what the waker wrote before waking visible to the poll that
        // answers the wake (pairs with the Acquire in `transition_to_running` and
        // `transition_to_idle`), and orders its accesses before the task is freed; Acquire
        // pairs with every other reference drop, for `Dealloc`.
        self.fetch_update(|mut s| {
            if s.is_running() {
                // The poller holds a reference, so this cannot be the last one.
                s.note_wake();
                s.ref_dec();
                debug_assert!(s.ref_count() > 0);
                (TransitionToNotifiedByVal::DoNothing, Some(s))
            } else if s.is_complete() || s.is_notified() {
                s.ref_dec();
                let outcome = if s.ref_count() == 0 {
                    TransitionToNotifiedByVal::Dealloc
                } else {
                    TransitionToNotifiedByVal::DoNothing
                };
                (outcome, Some(s))
            } else {
                // Idle: the waker's reference moves to the new Notified.
                s.0 |= NOTIFIED;
                (TransitionToNotifiedByVal::Submit, Some(s))
            }
        })
        .0
    }

    /// A waker woken by reference: as [`State::transition_to_notified_by_val`], but the waker
    /// keeps its reference, so `Submit` takes a new one for the `Notified`.
    #[inline]
    pub(crate) fn transition_to_notified_by_ref(&self) -> TransitionToNotifiedByRef {
        // AcqRel (the Release half is the one needed): as in `transition_to_notified_by_val`,
        // what the waker wrote before waking is visible to the poll that answers it. A
        // duplicate wake (already notified, or running) still writes the word, unchanged, so
        // that it joins the release sequence read by that poll's `transition_to_running` or
        // `transition_to_idle` (async-task does the same).
        self.fetch_update(|mut s| {
            if s.is_complete() {
                (TransitionToNotifiedByRef::DoNothing, None)
            } else if s.is_running() || s.is_notified() {
                s.note_wake();
                (TransitionToNotifiedByRef::DoNothing, Some(s))
            } else {
                s.0 |= NOTIFIED;
                s.ref_inc();
                (TransitionToNotifiedByRef::Submit, Some(s))
            }
        })
        .0
    }

    /// Aborts the task (a `JoinHandle` or abort handle, which holds a reference): sets
    /// `CANCELLED`, and if the task is idle and not notified also sets `NOTIFIED` and takes a
    /// reference for a new `Notified`, which the caller submits so that a worker drops the
    /// future (see "Cancellation" in the module docs). Aborting a complete or already
    /// cancelled task does nothing.
    #[inline]
    pub(crate) fn transition_to_cancelled(&self) -> TransitionToCancelled {
        // AcqRel (the Release half is the one needed): the decisions need only this word's
        // modification order; Release makes an abort behave like a wake, so what the aborter
        // wrote before aborting is visible to the thread that drops the future (pairs with
        // the Acquire in `transition_to_running` / `transition_to_idle`).
        self.fetch_update(|mut s| {
            if s.is_complete() || s.is_cancelled() {
                return (TransitionToCancelled::DoNothing, None);
            }
            s.0 |= CANCELLED;
            if s.is_running() || s.is_notified() {
                // The poller sees CANCELLED in `transition_to_idle`, or the queued Notified in
                // `transition_to_running`.
                return (TransitionToCancelled::DoNothing, Some(s));
            }
            s.0 |= NOTIFIED;
            s.ref_inc();
            (TransitionToCancelled::Submit, Some(s))
        })
        .0
    }

    /// The runtime, shutting down, cancels a task it holds a reference to: sets `CANCELLED`
    /// and, if the task is idle, claims `RUNNING` so that the caller drops the future in place
    /// (no worker is left to run a `Notified`), clearing `NOTIFIED`: a `Notified` still
    /// queued then fails in [`State::transition_to_running`], which would take `RUNNING` with
    /// `NOTIFIED` for a held one ("Woken while running"). A running task (a held `Notified`'s
    /// included) is left to its poller, and a complete one alone.
    #[inline]
    pub(crate) fn transition_to_shutdown(&self) -> TransitionToShutdown {
        // AcqRel: Acquire pairs with the Release of `transition_to_idle`, so the caller sees
        // the last poll's writes to the future it drops; Release as in
        // `transition_to_cancelled`.
        self.fetch_update(|mut s| {
            if s.is_complete() {
                return (TransitionToShutdown::Busy, None);
            }
            s.0 |= CANCELLED;
            if s.is_running() {
                return (TransitionToShutdown::Busy, Some(s));
            }
            s.0 = (s.0 & !NOTIFIED) | RUNNING;
            (TransitionToShutdown::Claimed, Some(s))
        })
        .0
    }

    /// The `JoinHandle` is dropped: clears `JOIN_INTEREST`, and also `JOIN_WAKER` if the task
    /// is not complete. Returns `Err` if the output is stored (`STORED`, or `COMPLETE`: a
    /// task completes only after `transition_to_stored` while the handle is interested), in
    /// which case the handle must drop the output itself, even before `COMPLETE` (invariants
    /// 3 and 7); `Ok` if the completer will. In both cases the
    /// returned new state says who drops the join waker: the handle if `JOIN_WAKER` is clear
    /// (it owns the slot again), the completer otherwise (it is reading it now).
    ///
    /// With `release`, the handle, which has emptied the slot already (it owned it:
    /// `JOIN_WAKER` was clear), drops its reference in the same RMW when the answer is `Ok`,
    /// and touches the task afterwards only to free it, when the returned count is 0. In
    /// every other case the handle drops its reference with [`State::ref_dec`] once done.
    #[inline]
    pub(crate) fn unset_join_interested(&self, release: bool) -> Result<Snapshot, Snapshot> {
        // AcqRel: Acquire pairs with the Release in `transition_to_stored` (and
        // `transition_to_complete`), so an `Err` handle may drop the output, and with every
        // other reference drop, for an `Ok` handle whose released reference is the last;
        // Release orders the handle's last reads of the join waker before the completer
        // drops it (pairs with the Acquire in `unset_waker_after_complete`), and, with
        // `release`, the handle's accesses before the task is freed (as `ref_dec`'s).
        let (stored, next) = self.fetch_update(|mut s| {
            debug_assert!(s.is_join_interested());
            debug_assert!(!release || !s.is_join_waker_set());
            s.0 &= !JOIN_INTEREST;
            if !s.is_complete() {
                s.0 &= !JOIN_WAKER;
            }
            let stored = s.is_stored() || s.is_complete();
            if release && !stored {
                s.ref_dec();
            }
            (stored, Some(s))
        });
        if stored {
            Err(next)
        } else {
            Ok(next)
        }
    }

    /// The `JoinHandle`, having written a waker into the empty join waker slot, lends it to
    /// the completer: sets `JOIN_WAKER`. Fails with the current state, leaving it unchanged
    /// and the slot the handle's, if the task is already complete: the handle then reads the
    /// output instead of waiting.
    #[inline]
    pub(crate) fn set_join_waker(&self) -> Result<Snapshot, Snapshot> {
        // AcqRel: Release publishes the waker written into the slot to the completer (pairs
        // with the Acquire in `transition_to_complete`). On failure, the Acquire of the load
        // in `fetch_update` pairs with `transition_to_complete`'s Release for the output.
        let (ok, next) = self.fetch_update(|mut s| {
            debug_assert!(s.is_join_interested() && !s.is_join_waker_set());
            if s.is_complete() {
                return (false, None);
            }
            s.0 |= JOIN_WAKER;
            (true, Some(s))
        });
        if ok {
            Ok(next)
        } else {
            Err(next)
        }
    }

    /// The `JoinHandle` takes the join waker slot back to store a different waker: clears
    /// `JOIN_WAKER`. Fails with the current state, leaving it unchanged, if the task is
    /// complete: the completer may be reading the waker, and the handle reads the output.
    #[inline]
    pub(crate) fn unset_waker(&self) -> Result<Snapshot, Snapshot> {
        // AcqRel, though neither half is needed on success: the completer reads the slot only
        // after a `COMPLETE` that follows this RMW, and then sees `JOIN_WAKER` clear or set
        // again by `set_join_waker`, whose Release publishes the new waker; nobody reads the
        // old waker after this. On failure, the Acquire load in `fetch_update` pairs with
        // `transition_to_complete`'s Release for the output.
        let (ok, next) = self.fetch_update(|mut s| {
            debug_assert!(s.is_join_interested() && s.is_join_waker_set());
            if s.is_complete() {
                return (false, None);
            }
            s.0 &= !JOIN_WAKER;
            (true, Some(s))
        });
        if ok {
            Ok(next)
        } else {
            Err(next)
        }
    }

    /// The completer has woken the join waker: clears `JOIN_WAKER`, giving the slot back.
    /// Returns the new state: without `JOIN_INTEREST` (the handle was dropped meanwhile) the
    /// completer must drop the waker itself.
    #[must_use]
    pub(crate) fn unset_waker_after_complete(&self) -> Snapshot {
        // AcqRel: Release orders the completer's read of the waker before the handle reuses
        // or drops the slot (pairs with the Acquire in `load` and `unset_join_interested`);
        // Acquire pairs with the Release in `unset_join_interested`, for dropping the waker.
        let prev = Snapshot(self.val.fetch_and(!JOIN_WAKER, AcqRel));
        debug_assert!(prev.is_complete() && prev.is_join_waker_set());
        Snapshot(prev.0 & !JOIN_WAKER)
    }

    /// Takes one more reference (a waker is cloned). The caller holds one already.
    ///
    /// Aborts the process if the count reaches [`MAX_REFS`], as `Arc::clone` does: only a
    /// program leaking references by the billions gets there.
    #[inline]
    pub(crate) fn ref_inc(&self) {
        // Relaxed: a reference is made from one the caller holds, so the task is alive and
        // nothing needs publishing (as in `Arc::clone`).
        let prev = Snapshot(self.val.fetch_add(REF_ONE, Relaxed));
        if prev.ref_count() >= MAX_REFS {
            std::process::abort();
        }
    }

    /// Takes one more reference to a task that no other thread can reach yet (never queued,
    /// no waker made, its `JoinHandle` still on this thread): a load and a store, where
    /// [`State::ref_inc`] needs a locked RMW, since nothing can write the word in between.
    ///
    /// # Safety
    ///
    /// No other thread accesses the state word until the caller publishes the task, and the
    /// publication (a lock's release, a queue's Release push) orders this store before every
    /// access of theirs.
    #[inline]
    pub(crate) unsafe fn ref_inc_unpublished(&self) {
        // Relaxed: no other thread reads or writes the word before the publication that
        // carries this store (the caller's contract).
        let prev = Snapshot(self.val.load(Relaxed));
        // A task nobody else can reach holds only its creator's few references.
        debug_assert!(prev.ref_count() < MAX_REFS);
        self.val.store(prev.0 + REF_ONE, Relaxed);
    }

    /// Drops `n` references (one or two) in one RMW. Returns whether they were the last, in
    /// which case the caller must free the task.
    #[must_use]
    pub(crate) fn ref_dec_by(&self, n: usize) -> bool {
        debug_assert!((1..=2).contains(&n));
        // Release and the Acquire fence: as in `ref_dec`.
        let prev = Snapshot(self.val.fetch_sub(n * REF_ONE, Release));
        debug_assert!(prev.ref_count() >= n, "reference count underflow");
        if prev.ref_count() != n {
            return false;
        }
        // Acquire: as in `ref_dec`.
        fence(Acquire);
        true
    }

    /// Drops `n` references (one or two) of a task out of reach: one that nobody can take a
    /// new reference to without holding one already. When a load shows the count at `n`,
    /// they are the last, and the caller frees the task without writing the word (no locked
    /// instruction); otherwise as [`State::ref_dec_by`]. Returns whether the caller must
    /// free the task.
    ///
    /// # Safety
    ///
    /// The caller holds `n` references, and every other reference to the task is made from
    /// one already held: the task is out of the live list, the only place that makes
    /// references of its own (`OwnedTasks::close_and_take_all`, under the shard lock).
    #[must_use]
    pub(crate) unsafe fn ref_dec_by_unreachable(&self, n: usize) -> bool {
        // Acquire: pairs with the Release of every other holder's drop. Every write to the
        // word since the task was published is an RMW, so the value read heads or continues
        // the release sequence of each earlier drop, and all of them happen before the free
        // (what the Acquire fence in `ref_dec` gives after its RMW). A count of `n` is not
        // stale: a holder yet to drop would be counted in it unless its reference was made
        // after the value read, which takes a reference held then (the caller's contract),
        // which again would be counted; and the only references made from none were the
        // list's, under the shard lock that the caller's unlink took after them.
        if Snapshot(self.val.load(Acquire)).ref_count() == n {
            return true;
        }
        self.ref_dec_by(n)
    }

    /// Drops one reference. Returns whether it was the last, in which case the caller must
    /// free the task.
    #[must_use]
    pub(crate) fn ref_dec(&self) -> bool {
        // Release: orders this holder's accesses to the task before it is freed (pairs with
        // the Acquire fence below, run by whichever drop is the last).
        let prev = Snapshot(self.val.fetch_sub(REF_ONE, Release));
        debug_assert!(prev.ref_count() > 0, "reference count underflow");
        if prev.ref_count() != 1 {
            return false;
        }
        // Acquire: pairs with the Release of every other reference drop, so freeing the task
        // happens after all their accesses (as in `Arc::drop`).
        fence(Acquire);
        true
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Relaxed: a diagnostic read, ordered with nothing.
        f.debug_tuple("State")
            .field(&Snapshot(self.val.load(Relaxed)))
            .finish()
    }
}

#[cfg(test)]
impl State {
    /// A state word holding `bits`, for tests that start from an arbitrary state.
    #[inline]
    pub(crate) fn from_bits(bits: usize) -> State {
        State {
            val: AtomicUsize::new(bits),
        }
    }

    /// A Relaxed snapshot, for the loom model that shows `ref_dec_by_unreachable` needs its
    /// Acquire.
    #[cfg(loom)]
    pub(crate) fn load_relaxed(&self) -> Snapshot {
        Snapshot(self.val.load(Relaxed))
    }
}
