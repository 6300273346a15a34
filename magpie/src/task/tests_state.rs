//! Tests of the task state word: every transition's outcome from every state it can be
//! called in (tables), then whole lifecycles with their reference and drop accounting.

use super::state::*;

const R: usize = RUNNING;
const N: usize = NOTIFIED;
const C: usize = COMPLETE;
const X: usize = CANCELLED;
const J: usize = JOIN_INTEREST;
const W: usize = JOIN_WAKER;
const S: usize = STORED;

/// `n` references.
const fn refs(n: usize) -> usize {
    n * REF_ONE
}

/// Runs `transition` on a state word holding each row's `before`, and checks its answer and
/// the word afterwards.
fn check_table<T: std::fmt::Debug + PartialEq>(
    name: &str,
    transition: impl Fn(&State) -> T,
    rows: &[(usize, T, usize)],
) {
    for (before, expected, after) in rows {
        let state = State::from_bits(*before);
        let outcome = transition(&state);
        assert_eq!(
            &outcome,
            expected,
            "{name} from {:?}",
            State::from_bits(*before)
        );
        assert_eq!(
            state.load().bits(),
            *after,
            "{name} from {:?}: expected {:?}, got {state:?}",
            State::from_bits(*before),
            State::from_bits(*after)
        );
    }
}

#[test]
fn masks_are_disjoint_and_cover_the_word() {
    let flags = [
        RUNNING,
        NOTIFIED,
        COMPLETE,
        CANCELLED,
        JOIN_INTEREST,
        JOIN_WAKER,
        STORED,
    ];
    let mut seen = 0;
    for flag in flags {
        assert_eq!(flag.count_ones(), 1, "{flag:#x} is not one bit");
        assert_eq!(seen & flag, 0, "{flag:#x} overlaps another flag");
        seen |= flag;
    }
    assert_eq!(
        seen, FLAG_MASK,
        "a flag bit is unused or out of the flag mask"
    );
    assert_eq!(FLAG_MASK & REF_COUNT_MASK, 0);
    assert_eq!(FLAG_MASK | REF_COUNT_MASK, usize::MAX);
    assert_eq!(REF_ONE, 1 << REF_COUNT_SHIFT);
    assert_eq!(
        REF_ONE,
        FLAG_MASK + 1,
        "the count starts right above the flags"
    );
}

#[test]
fn reference_count_cannot_reach_the_flags() {
    // The largest count `ref_inc` accepts keeps the top bit clear, with every flag set.
    let max = State::from_bits((MAX_REFS * REF_ONE) | FLAG_MASK).load();
    assert_eq!(max.ref_count(), MAX_REFS);
    assert!(max.bits() <= isize::MAX as usize);
    // One more reference is where `ref_inc` aborts: the top bit.
    assert_eq!((MAX_REFS + 1) * REF_ONE, 1 << (usize::BITS - 1));
    // Even a wrap (which the abort prevents) carries out of the word, not into the flags.
    let all_refs = REF_COUNT_MASK | FLAG_MASK;
    assert_eq!(all_refs.wrapping_add(REF_ONE), FLAG_MASK);
    assert_eq!(0usize.wrapping_sub(REF_ONE) & FLAG_MASK, 0);
}

#[test]
fn initial_state() {
    let state = State::new().load();
    assert_eq!(state.bits(), INITIAL_STATE);
    assert_eq!(state.ref_count(), 2, "the Notified's and the JoinHandle's");
    assert!(state.is_notified() && state.is_join_interested() && state.is_idle());
    assert!(!state.is_running() && !state.is_complete() && !state.is_cancelled());
    assert!(!state.is_join_waker_set());
}

#[test]
fn detached_state_is_the_initial_state_without_its_handle() {
    let state = State::new_detached().load();
    assert_eq!(state.bits(), DETACHED_STATE);
    assert_eq!(state.ref_count(), 1, "the Notified's alone");
    assert!(state.is_notified() && state.is_idle() && !state.is_join_interested());
    // What a new task's state is once its handle is dropped before the first poll.
    let dropped = State::new();
    assert!(dropped.unset_join_interested(true).is_ok());
    assert_eq!(dropped.load().bits(), DETACHED_STATE);
}

#[test]
fn transition_to_running_table() {
    use TransitionToRunning::*;
    check_table(
        "transition_to_running",
        State::transition_to_running,
        &[
            (INITIAL_STATE, Success, R | J | refs(2)),
            (N | refs(1), Success, R | refs(1)),
            (N | J | W | refs(3), Success, R | J | W | refs(3)),
            // Aborted while queued: claimed, to drop the future.
            (N | X | J | refs(2), Cancelled, R | X | J | refs(2)),
            // A held Notified (woken while running): RUNNING is its own; NOTIFIED goes.
            (R | N | J | refs(2), Success, R | J | refs(2)),
            (R | N | refs(1), Success, R | refs(1)),
            (R | N | X | J | refs(2), Cancelled, R | X | J | refs(2)),
            // Claimed by the runtime at shutdown (which cleared NOTIFIED), running or done:
            // the Notified's reference goes.
            (R | X | J | refs(3), Failed, R | X | J | refs(2)),
            (N | C | X | J | refs(2), Failed, N | C | X | J | refs(1)),
            (C | X | J | refs(2), Failed, C | X | J | refs(1)),
            (N | C | X | refs(1), Dealloc, N | C | X),
        ],
    );
}

#[test]
fn transition_to_idle_table() {
    use TransitionToIdle::*;
    check_table(
        "transition_to_idle",
        State::transition_to_idle,
        &[
            // Not woken: the poller's reference is dropped.
            (R | J | refs(2), Ok, J | refs(1)),
            (R | J | W | refs(3), Ok, J | W | refs(2)),
            (R | refs(1), OkDealloc, 0),
            // Woken during the poll: the poller's reference moves to the new Notified.
            (R | N | J | refs(2), OkNotified, N | J | refs(2)),
            (R | N | refs(1), OkNotified, N | refs(1)),
            // Aborted during the poll: unchanged, the poller cancels.
            (R | X | J | refs(2), Cancelled, R | X | J | refs(2)),
            (R | N | X | refs(1), Cancelled, R | N | X | refs(1)),
        ],
    );
}

#[test]
fn woken_while_running_table() {
    // A load: the word is unchanged in every row.
    check_table(
        "woken_while_running",
        State::woken_while_running,
        &[
            (R | N | J | refs(2), true, R | N | J | refs(2)),
            (R | N | refs(1), true, R | N | refs(1)),
            (R | J | refs(2), false, R | J | refs(2)),
            (R | N | X | J | refs(2), false, R | N | X | J | refs(2)),
            (R | X | refs(1), false, R | X | refs(1)),
        ],
    );
}

#[test]
fn transition_to_complete_table() {
    check_table(
        "transition_to_complete",
        |s: &State| s.transition_to_complete(0).bits(),
        &[
            (R | J | refs(2), C | J | refs(2), C | J | refs(2)),
            (
                R | J | W | refs(2),
                C | J | W | refs(2),
                C | J | W | refs(2),
            ),
            (R | refs(1), C | refs(1), C | refs(1)),
            // NOTIFIED may stay set on a complete task; it means nothing there.
            (
                R | N | X | J | refs(1),
                C | N | X | J | refs(1),
                C | N | X | J | refs(1),
            ),
        ],
    );
}

#[test]
fn transition_to_complete_dropping_references_table() {
    // The live list's reference (1), or that and a detached completer's own (2), dropped
    // with COMPLETE; the flags move exactly as with 0, and no bit borrows from another.
    check_table(
        "transition_to_complete(1)",
        |s: &State| s.transition_to_complete(1).bits(),
        &[
            (R | J | refs(3), C | J | refs(2), C | J | refs(2)),
            (
                R | J | W | S | refs(2),
                C | J | W | S | refs(1),
                C | J | W | S | refs(1),
            ),
            (
                R | N | X | refs(2),
                C | N | X | refs(1),
                C | N | X | refs(1),
            ),
        ],
    );
    check_table(
        "transition_to_complete(2)",
        |s: &State| s.transition_to_complete(2).bits(),
        &[
            // The last two references: the completer frees the task.
            (R | refs(2), C, C),
            (R | S | refs(2), C | S, C | S),
            // A waker still holds one: whoever drops it frees the task.
            (R | N | refs(3), C | N | refs(1), C | N | refs(1)),
            (R | X | refs(1000), C | X | refs(998), C | X | refs(998)),
        ],
    );
}

#[test]
fn transition_to_notified_by_val_table() {
    use TransitionToNotifiedByVal::*;
    check_table(
        "transition_to_notified_by_val",
        State::transition_to_notified_by_val,
        &[
            // Running: note the wake for the poller, drop the waker's reference.
            (R | J | refs(3), DoNothing, R | N | J | refs(2)),
            (R | N | J | refs(3), DoNothing, R | N | J | refs(2)),
            // Running cancelled (the poller drops the future; a shutdown's claim cleared
            // NOTIFIED for good): NOTIFIED is left alone.
            (R | X | J | refs(3), DoNothing, R | X | J | refs(2)),
            (R | N | X | J | refs(3), DoNothing, R | N | X | J | refs(2)),
            // Idle: the waker's reference becomes the Notified's.
            (J | refs(2), Submit, N | J | refs(2)),
            (refs(1), Submit, N | refs(1)),
            // Already queued.
            (N | J | refs(3), DoNothing, N | J | refs(2)),
            (N | X | J | refs(3), DoNothing, N | X | J | refs(2)),
            // Complete: a no-op but for the reference.
            (C | J | refs(2), DoNothing, C | J | refs(1)),
            (C | refs(1), Dealloc, C),
            (C | X | refs(1), Dealloc, C | X),
            (C | N | refs(1), Dealloc, C | N),
        ],
    );
}

#[test]
fn transition_to_notified_by_ref_table() {
    use TransitionToNotifiedByRef::*;
    check_table(
        "transition_to_notified_by_ref",
        State::transition_to_notified_by_ref,
        &[
            (R | J | refs(2), DoNothing, R | N | J | refs(2)),
            (R | N | J | refs(2), DoNothing, R | N | J | refs(2)),
            // Running cancelled: as in `transition_to_notified_by_val_table`.
            (R | X | J | refs(2), DoNothing, R | X | J | refs(2)),
            // Idle: a new reference for the Notified; the waker keeps its own.
            (J | refs(2), Submit, N | J | refs(3)),
            (refs(1), Submit, N | refs(2)),
            (N | J | refs(2), DoNothing, N | J | refs(2)),
            (C | J | refs(2), DoNothing, C | J | refs(2)),
            (C | refs(1), DoNothing, C | refs(1)),
        ],
    );
}

#[test]
fn transition_to_cancelled_table() {
    use TransitionToCancelled::*;
    check_table(
        "transition_to_cancelled",
        State::transition_to_cancelled,
        &[
            // Idle: notify, with a new reference, so that a worker drops the future.
            (J | refs(1), Submit, N | X | J | refs(2)),
            (J | W | refs(2), Submit, N | X | J | W | refs(3)),
            // Queued: the queued Notified will see CANCELLED.
            (N | J | refs(2), DoNothing, N | X | J | refs(2)),
            // Running: the poller will see CANCELLED.
            (R | J | refs(2), DoNothing, R | X | J | refs(2)),
            (R | N | J | refs(2), DoNothing, R | N | X | J | refs(2)),
            // Already cancelled or complete.
            (N | X | J | refs(2), DoNothing, N | X | J | refs(2)),
            (R | X | J | refs(2), DoNothing, R | X | J | refs(2)),
            (C | J | refs(1), DoNothing, C | J | refs(1)),
        ],
    );
}

#[test]
fn transition_to_shutdown_table() {
    use TransitionToShutdown::*;
    check_table(
        "transition_to_shutdown",
        State::transition_to_shutdown,
        &[
            (J | refs(2), Claimed, R | X | J | refs(2)),
            // A Notified is queued: it will fail in `transition_to_running`, which the
            // claim's clearing NOTIFIED tells it.
            (N | J | refs(3), Claimed, R | X | J | refs(3)),
            (N | X | refs(2), Claimed, R | X | refs(2)),
            (R | J | refs(2), Busy, R | X | J | refs(2)),
            // A held Notified is queued: its holder drops the future.
            (R | N | J | refs(2), Busy, R | N | X | J | refs(2)),
            (C | J | refs(2), Busy, C | J | refs(2)),
        ],
    );
}

#[test]
fn transition_to_stored_table() {
    use TransitionToStored::*;
    check_table(
        "transition_to_stored",
        State::transition_to_stored,
        &[
            // The handle is interested: the output is its own now; RUNNING stays.
            (R | J | refs(2), Stored, R | S | J | refs(2)),
            (
                R | N | X | J | W | refs(3),
                Stored,
                R | N | X | S | J | W | refs(3),
            ),
            // The handle left since the completer's check: the output stays the completer's.
            (R | refs(1), Detached, R | S | refs(1)),
        ],
    );
}

#[test]
fn unset_join_interested_table() {
    let bits = |r: Result<Snapshot, Snapshot>| r.map(Snapshot::bits).map_err(Snapshot::bits);
    check_table(
        "unset_join_interested",
        |s: &State| bits(s.unset_join_interested(false)),
        &[
            // Not complete: the completer will drop the output; the handle takes the slot
            // back (JOIN_WAKER cleared) and drops its waker.
            (N | J | refs(2), Ok(N | refs(2)), N | refs(2)),
            (J | W | refs(2), Ok(refs(2)), refs(2)),
            (R | J | W | refs(2), Ok(R | refs(2)), R | refs(2)),
            // Stored but not complete (state.rs invariant 7): the handle drops the output
            // now, and takes the waker slot back as above.
            (
                R | S | J | W | refs(2),
                Err(R | S | refs(2)),
                R | S | refs(2),
            ),
            (
                R | S | X | J | refs(2),
                Err(R | S | X | refs(2)),
                R | S | X | refs(2),
            ),
            // Complete: the handle drops the output. With JOIN_WAKER still set the completer
            // is reading the waker and will drop it.
            (C | J | refs(1), Err(C | refs(1)), C | refs(1)),
            (C | J | W | refs(2), Err(C | W | refs(2)), C | W | refs(2)),
        ],
    );
}

#[test]
fn unset_join_interested_releasing_the_reference_table() {
    // A handle that never lent a waker (JOIN_WAKER clear) drops its reference with its
    // interest when the completer will drop the output; when the output is stored it keeps
    // the reference, to drop the output first.
    let bits = |r: Result<Snapshot, Snapshot>| r.map(Snapshot::bits).map_err(Snapshot::bits);
    check_table(
        "unset_join_interested(true)",
        |s: &State| bits(s.unset_join_interested(true)),
        &[
            (N | J | refs(2), Ok(N | refs(1)), N | refs(1)),
            (R | J | refs(3), Ok(R | refs(2)), R | refs(2)),
            (J | refs(1), Ok(0), 0),
            (R | S | J | refs(2), Err(R | S | refs(2)), R | S | refs(2)),
            (C | J | refs(1), Err(C | refs(1)), C | refs(1)),
        ],
    );
}

#[test]
fn join_waker_handshake_table() {
    let bits = |r: Result<Snapshot, Snapshot>| r.map(Snapshot::bits).map_err(Snapshot::bits);
    check_table(
        "set_join_waker",
        |s: &State| bits(s.set_join_waker()),
        &[
            (J | refs(2), Ok(J | W | refs(2)), J | W | refs(2)),
            (
                R | N | J | refs(2),
                Ok(R | N | J | W | refs(2)),
                R | N | J | W | refs(2),
            ),
            // Complete: refused, unchanged; the handle reads the output instead.
            (C | J | refs(1), Err(C | J | refs(1)), C | J | refs(1)),
        ],
    );
    check_table(
        "unset_waker",
        |s: &State| bits(s.unset_waker()),
        &[
            (J | W | refs(2), Ok(J | refs(2)), J | refs(2)),
            (R | J | W | refs(2), Ok(R | J | refs(2)), R | J | refs(2)),
            (
                C | J | W | refs(1),
                Err(C | J | W | refs(1)),
                C | J | W | refs(1),
            ),
        ],
    );
    check_table(
        "unset_waker_after_complete",
        |s: &State| s.unset_waker_after_complete().bits(),
        &[
            // The handle is still there and owns the slot again.
            (C | J | W | refs(2), C | J | refs(2), C | J | refs(2)),
            // The handle is gone: the completer drops the waker.
            (C | W | refs(1), C | refs(1), C | refs(1)),
        ],
    );
}

#[test]
fn reference_counting() {
    let state = State::new();
    state.ref_inc();
    state.ref_inc();
    assert_eq!(state.load().ref_count(), 4);
    assert!(!state.ref_dec());
    assert!(!state.ref_dec());
    assert!(!state.ref_dec());
    assert_eq!(state.load().bits(), INITIAL_STATE - refs(1));
    assert!(state.ref_dec(), "the last reference frees the task");
    assert_eq!(state.load().bits(), J | N, "the flags are untouched");
}

/// What happened to one modelled task, for the lifecycle tests.
#[derive(Debug, Default, PartialEq, Eq)]
struct Drops {
    future: usize,
    output: usize,
    freed: usize,
}

#[test]
fn lifecycle_pending_wake_ready_join() {
    let state = State::new();
    let mut drops = Drops::default();
    // Polled once: Pending, having cloned a waker.
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    state.ref_inc();
    assert_eq!(state.transition_to_idle(), TransitionToIdle::Ok);
    assert_eq!(state.load().ref_count(), 2, "the handle's and the waker's");
    // The waker fires: its reference becomes the Notified's.
    assert_eq!(
        state.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::Submit
    );
    // Polled again: Ready.
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    drops.future += 1;
    let done = state.transition_to_complete(0);
    assert!(done.is_join_interested() && !done.is_join_waker_set());
    // The handle takes the output, then is dropped; the poller drops its reference last.
    assert!(state.load().is_complete());
    drops.output += 1;
    assert!(state.unset_join_interested(false).is_err());
    assert!(!state.ref_dec());
    if state.ref_dec() {
        drops.freed += 1;
    }
    assert_eq!(
        drops,
        Drops {
            future: 1,
            output: 1,
            freed: 1
        }
    );
}

#[test]
fn lifecycle_detached_then_completed_folds_the_reference_drops() {
    // `submit` and drop the handle at once (the task pool's usual use), with the live list's
    // reference: the handle's drop and the completion each end with one RMW.
    let state = State::new();
    state.ref_inc(); // The live list's.
    assert_eq!(
        state.unset_join_interested(true).map(|s| s.ref_count()),
        Ok(2)
    );
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    let done = state.transition_to_complete(2);
    assert!(done.is_complete() && !done.is_running() && !done.is_join_waker_set());
    assert_eq!(done.ref_count(), 0, "the completer frees the task");
    assert_eq!(state.load().bits(), C);
}

#[test]
fn a_reference_taken_before_publication_counts_as_any_other() {
    let state = State::new();
    // SAFETY: this thread alone reaches the word.
    unsafe { state.ref_inc_unpublished() };
    assert_eq!(state.load().bits(), INITIAL_STATE + REF_ONE);
    assert!(!state.ref_dec());
    assert!(!state.ref_dec());
    assert!(state.ref_dec());
}

#[test]
fn waking_a_completed_task_is_a_no_op() {
    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    state.ref_inc(); // A waker, woken only after completion.
    let _ = state.transition_to_complete(0);
    assert!(!state.ref_dec(), "the poller's reference");
    let before = state.load();
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    assert_eq!(state.load(), before);
    assert_eq!(
        state.transition_to_cancelled(),
        TransitionToCancelled::DoNothing
    );
    assert_eq!(state.load(), before);
    assert_eq!(
        state.transition_to_notified_by_val(),
        TransitionToNotifiedByVal::DoNothing
    );
    assert_eq!(state.load().bits(), before.bits() - REF_ONE);
    // The handle is last: it drops the output and frees the task.
    assert!(state.unset_join_interested(false).is_err());
    assert!(state.ref_dec());
}

#[test]
fn join_handle_dropped_after_complete_drops_the_output_itself() {
    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    let done = state.transition_to_complete(0);
    assert!(
        done.is_join_interested(),
        "the completer leaves the output to the handle"
    );
    let dropped = state.unset_join_interested(false);
    assert!(
        matches!(dropped, Err(s) if !s.is_join_interested() && !s.is_join_waker_set()),
        "complete first: the handle drops the output (and owns the waker slot): {dropped:?}"
    );
    assert!(!state.ref_dec());
    assert!(state.ref_dec());
}

#[test]
fn join_handle_dropped_before_complete_leaves_the_output_to_the_completer() {
    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(
        state.set_join_waker().map(Snapshot::bits),
        Ok(R | J | W | refs(2))
    );
    let dropped = state.unset_join_interested(false);
    assert!(
        matches!(dropped, Ok(s) if !s.is_join_waker_set()),
        "the handle takes its waker back: {dropped:?}"
    );
    assert!(!state.ref_dec());
    let done = state.transition_to_complete(0);
    assert!(!done.is_join_interested() && !done.is_join_waker_set());
    assert!(
        state.ref_dec(),
        "the completer drops the output and frees the task"
    );
}

#[test]
fn join_waker_woken_by_the_completer_then_handed_back() {
    let state = State::new();
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert!(state.set_join_waker().is_ok());
    // The handle replaces its waker while the task runs.
    assert!(state.unset_waker().is_ok());
    assert!(state.set_join_waker().is_ok());
    let done = state.transition_to_complete(0);
    assert!(done.is_join_interested() && done.is_join_waker_set());
    let after = state.unset_waker_after_complete();
    assert!(
        after.is_join_interested(),
        "the handle still owns the waker"
    );
    // A late attempt to swap the waker sees the task complete.
    assert!(state.set_join_waker().is_err());
    assert!(!state.ref_dec());
    assert!(state.unset_join_interested(false).is_err());
    assert!(state.ref_dec());
}

#[test]
fn abort_idle_task_lets_a_worker_drop_the_future() {
    let state = State::new();
    // First poll: Pending, no waker kept.
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(state.transition_to_idle(), TransitionToIdle::Ok);
    // The JoinHandle aborts: a Notified is made.
    assert_eq!(
        state.transition_to_cancelled(),
        TransitionToCancelled::Submit
    );
    assert_eq!(state.load().ref_count(), 2);
    // A wake now does not queue the task twice.
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    assert_eq!(
        state.transition_to_running(),
        TransitionToRunning::Cancelled
    );
    let done = state.transition_to_complete(0);
    assert!(done.is_cancelled() && done.is_join_interested());
    assert!(!state.ref_dec());
    assert!(state.unset_join_interested(false).is_err());
    assert!(state.ref_dec());
}

/// Runs a new task's first poll up to the moment it wakes itself (`yield_now`): the
/// poller still holds RUNNING, NOTIFIED is set, and the state says so.
fn run_and_wake_itself(state: &State) {
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    assert!(state.woken_while_running());
}

#[test]
fn lifecycle_woken_while_running_keeps_running_until_the_next_poll() {
    let state = State::new();
    // The poll wakes its own task (`yield_now`) and returns Pending: the poller keeps
    // RUNNING and its reference becomes the held Notified's, with no RMW.
    run_and_wake_itself(&state);
    // Queued: a wake submits nothing, a shutdown leaves the future to the holder.
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    let before = state.load();
    assert!(before.is_running() && before.is_notified() && before.ref_count() == 2);
    // Taken from the queue: the same transition as any Notified's, one RMW, which leaves
    // NOTIFIED clear so that a wake during this poll is seen after it.
    assert_eq!(state.transition_to_running(), TransitionToRunning::Success);
    let now = state.load();
    assert!(now.is_running() && !now.is_notified() && now.ref_count() == 2);
    assert!(!state.woken_while_running());
    assert_eq!(state.transition_to_idle(), TransitionToIdle::Ok);
    assert_eq!(state.load().ref_count(), 1, "the handle's");
}

#[test]
fn a_held_notified_cancelled_at_shutdown_drops_the_future_once() {
    let state = State::new();
    state.ref_inc(); // The runtime's list.
    run_and_wake_itself(&state);
    // The runtime shuts the task down while its held Notified is queued: busy.
    assert_eq!(state.transition_to_shutdown(), TransitionToShutdown::Busy);
    assert!(!state.ref_dec(), "the list's");
    // A wake now (the task is running, cancelled) leaves NOTIFIED as it was.
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    // The held Notified's holder claims it, cancelled: it drops the future and completes.
    assert_eq!(
        state.transition_to_running(),
        TransitionToRunning::Cancelled
    );
    let done = state.transition_to_complete(0);
    assert!(done.is_complete() && done.is_cancelled());
}

#[test]
fn shutdown_claims_an_idle_task_and_its_queued_notified_fails() {
    let state = State::new();
    // The runtime's own reference (a future owned-task list).
    state.ref_inc();
    assert_eq!(
        state.transition_to_shutdown(),
        TransitionToShutdown::Claimed
    );
    // A wake while the runtime drops the future: NOTIFIED stays clear, so the queued
    // Notified cannot be taken for a held one.
    assert_eq!(
        state.transition_to_notified_by_ref(),
        TransitionToNotifiedByRef::DoNothing
    );
    assert!(!state.load().is_notified());
    let _ = state.transition_to_complete(0);
    assert!(!state.ref_dec(), "the runtime's");
    assert!(state.unset_join_interested(false).is_err());
    assert!(!state.ref_dec(), "the handle's");
    assert_eq!(
        state.transition_to_running(),
        TransitionToRunning::Dealloc,
        "the queued Notified, run last, frees the task"
    );
}
