//! Loom models of the task state word driven the way a scheduler will drive it: a poller
//! (`transition_to_running`, then `_idle` or `_complete`), wakers, an aborter and a
//! `JoinHandle`, racing on one task.
//!
//! The task is modelled by [`Task`]: the state word, the stage and the join waker slot as
//! loom `UnsafeCell`s (so loom reports any access to them that the state word's orderings do
//! not order, including any access racing the "free"), and counters of how often the future,
//! the output and the join waker were dropped and the task freed. Every model ends by
//! running whatever `Notified` is still queued (a worker would) and checking that each of
//! those happened exactly once.
//!
//! The run queue is a Relaxed counter, so it adds no happens-before edges of its own: the
//! models check that the state word alone orders every access to the task, even though a
//! real queue would add some. The exception is a *held* `Notified` (state.rs, "Woken while
//! running"): the poller that queues one writes no RMW after its poll, so the queue is what
//! orders that poll before the next, as a real queue orders a new task's allocation before
//! its first poll; such a submit is a Release, and taking from the queue an Acquire.
//! `loom_held_notified_without_the_queues_release_is_caught` is the negative control.
//!
//! A future may also wake itself a given number of times (`yields`), as `yield_now` does:
//! then its poll returns Pending with the task notified, and the poller queues it held.
//!
//! The future is Ready once it sees `event` set. A waker sets `event` (Relaxed) and then
//! wakes, so a poll that answers the wake must see it: a lost wakeup, or a wake not ordered
//! before the poll answering it, leaves the task Pending forever and fails the final check.
//!
//! The owner's list of live tasks is a flag, [`Task::linked`], set by [`Task::bind`] (with
//! the list's reference) and cleared by the completer before `COMPLETE`. A `wait_idle`
//! observer ([`Task::observe_idle`]) that sees it clear asserts the output drop count is
//! final, and a handle that reads the output asserts the flag clear (state.rs invariant 7).
//!
//! Negative control: `RUSTFLAGS="--cfg loom --cfg magpie_loom_broken"` makes the completer
//! decide who drops the output only at `COMPLETE`, after leaving the live list (the protocol
//! before `STORED`), and the two models that watch the list must then fail.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p magpie --lib --release loom_state`.
//! `LOOM_MAX_PREEMPTIONS`, when set, replaces each model's own bound (see
//! `util::loom_support::model`).

use std::mem::ManuallyDrop;

use loom::thread::{self, JoinHandle};

use super::state::*;
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicBool, AtomicUsize, UnsafeCell};
use crate::util::loom_support::model;

/// The bound of the three-thread models; the two-thread ones are exhaustive (a fraction of a
/// second each). At 3 all eight models run in about a second and a half in release; at 5 the
/// three-thread ones take about 20 s together.
const THREE_THREAD_CAP: Option<usize> = Some(3);

/// What the stage cell holds.
#[derive(Debug, PartialEq, Eq)]
enum Stage {
    Future,
    /// The output, or the cancellation error: the models treat them alike.
    Output,
    /// The output was taken or dropped.
    Consumed,
    /// The task was freed: any later access is a use after free.
    Freed,
}

/// One task and the accounting of what happened to it.
struct Task {
    state: State,
    stage: UnsafeCell<Stage>,
    /// The join waker slot: `true` while it holds a waker.
    join_waker: UnsafeCell<bool>,
    /// What the future waits for.
    event: AtomicBool,
    /// `Notified`s submitted and not yet run (at most one, invariant 1).
    queued: AtomicUsize,
    submits: AtomicUsize,
    future_drops: AtomicUsize,
    output_drops: AtomicUsize,
    join_waker_drops: AtomicUsize,
    join_wakes: AtomicUsize,
    frees: AtomicUsize,
    /// Whether the task is in the owner's live list (which then holds a reference).
    linked: AtomicBool,
    /// Whether a completer without a handle to answer leaves the unlink to later, as a
    /// worker does (`WorkerThread::defer_unlink`), keeping its own reference until then.
    defer_unlinks: AtomicBool,
    /// Set by such a completer: the unlink, and its reference, wait for `unlink_deferred`.
    unlink_pending: AtomicBool,
    /// The bug the deferral models must catch: the deferring completer drops its own
    /// reference at `COMPLETE` anyway, and the unlink drops the list's alone.
    defer_drops_own_ref: AtomicBool,
    /// How many more polls wake the task themselves before looking at `event` (a cell of
    /// the future's, so loom checks that each poll is ordered after the one before).
    yields: UnsafeCell<usize>,
    /// The bug the held models must catch: a held `Notified` queued without a Release.
    held_submit_relaxed: AtomicBool,
    /// The bug the deferred-unlink models must catch: the unlink's check that its references
    /// are the last made with a Relaxed load.
    unreachable_load_relaxed: AtomicBool,
    /// The references the word still counts after the free: those the unlink found to be
    /// the last by a load, which leaves the word as it is.
    uncounted_at_free: AtomicUsize,
}

/// Runs `f` with a new task in a loom `Arc`. `event` says whether the future is ready on its
/// first poll.
///
/// As in `sleep::loom_sleep`, every handle to the `Arc` is a `ManuallyDrop`, dropped only on
/// the way out of a thread that did not panic: a loom `Arc` dropped while a failed execution
/// unwinds calls back into loom and turns one failed model into an abort of the test binary.
fn with_task(event: bool, f: impl FnOnce(&Arc<Task>)) {
    let task = ManuallyDrop::new(Arc::new(Task {
        state: State::new(),
        stage: UnsafeCell::new(Stage::Future),
        join_waker: UnsafeCell::new(false),
        event: AtomicBool::new(event),
        queued: AtomicUsize::new(0),
        submits: AtomicUsize::new(0),
        future_drops: AtomicUsize::new(0),
        output_drops: AtomicUsize::new(0),
        join_waker_drops: AtomicUsize::new(0),
        join_wakes: AtomicUsize::new(0),
        frees: AtomicUsize::new(0),
        linked: AtomicBool::new(false),
        defer_unlinks: AtomicBool::new(false),
        unlink_pending: AtomicBool::new(false),
        defer_drops_own_ref: AtomicBool::new(false),
        yields: UnsafeCell::new(0),
        held_submit_relaxed: AtomicBool::new(false),
        unreachable_load_relaxed: AtomicBool::new(false),
        uncounted_at_free: AtomicUsize::new(0),
    }));
    f(&task);
    drop(ManuallyDrop::into_inner(task));
}

/// Runs `f` on a new loom thread with its own handle to `task` (see [`with_task`]).
fn spawn<F>(task: &Arc<Task>, f: F) -> JoinHandle<()>
where
    F: FnOnce(&Task) + Send + 'static,
{
    let task = ManuallyDrop::new(task.clone());
    thread::spawn(move || {
        f(&task);
        drop(ManuallyDrop::into_inner(task));
    })
}

// Counters are Relaxed throughout: they are read after joining the threads.
impl Task {
    /// Gives `f` the stage, after checking the task was not freed.
    fn with_stage<R>(&self, f: impl FnOnce(&mut Stage) -> R) -> R {
        self.stage.with_mut(|stage| {
            // SAFETY: callers hold the right to the stage the state word gives them
            // (invariant 2 of `state`); that claim is what loom checks here, reporting any
            // access not ordered after the previous one.
            let stage = unsafe { &mut *stage };
            assert_ne!(*stage, Stage::Freed, "use after free");
            f(stage)
        })
    }

    /// Gives `f` the join waker slot.
    fn with_join_waker<R>(&self, f: impl FnOnce(&mut bool) -> R) -> R {
        self.join_waker.with_mut(|slot| {
            // SAFETY: callers hold the right to the slot that `JOIN_WAKER` gives them
            // (invariant 4 of `state`); loom checks the claim.
            f(unsafe { &mut *slot })
        })
    }

    /// Queues a new `Notified`.
    fn submit(&self) {
        self.submits.fetch_add(1, Relaxed);
        let before = self.queued.fetch_add(1, Relaxed);
        assert_eq!(before, 0, "two Notifieds for one task");
    }

    /// Queues the poller's reference as a held `Notified` (state.rs, "Woken while
    /// running"), with the Release that a real queue's push is.
    fn submit_held(&self) {
        self.submits.fetch_add(1, Relaxed);
        let order = if self.held_submit_relaxed.load(Relaxed) {
            Relaxed
        } else {
            Release
        };
        let before = self.queued.fetch_add(1, order);
        assert_eq!(before, 0, "two Notifieds for one task");
    }

    /// Takes the queued `Notified`, if any. Acquire: pairs with `submit_held` (see the
    /// module docs; a plain submit is Relaxed, and adds nothing).
    fn take_queued(&self) -> bool {
        self.queued.swap(0, Acquire) != 0
    }

    /// Runs the queued `Notified`, if any. Returns whether there was one.
    fn run_queued(&self) -> bool {
        if !self.take_queued() {
            return false;
        }
        self.run();
        true
    }

    /// Cancels the task of the queued `Notified`, if any, as a queue's drain at shutdown
    /// does (`Harness::shutdown_notified`): claims it as a poller would, then drops the
    /// future.
    fn shut_down_queued(&self) {
        if !self.take_queued() {
            return;
        }
        match self.state.transition_to_running() {
            TransitionToRunning::Success | TransitionToRunning::Cancelled => self.cancel(),
            TransitionToRunning::Failed => {}
            TransitionToRunning::Dealloc => self.free(),
        }
    }

    /// The runtime shuts the task down with its own reference (the live list's), as
    /// `Registry::shutdown_tasks` does: drops the future in place if it claims the task.
    fn shut_down_by_the_runtime(&self) {
        match self.state.transition_to_shutdown() {
            TransitionToShutdown::Claimed => self.cancel(),
            TransitionToShutdown::Busy => self.drop_ref(),
        }
    }

    /// Runs a `Notified`, as a worker does.
    fn run(&self) {
        match self.state.transition_to_running() {
            TransitionToRunning::Success => {
                if self.poll() {
                    self.complete();
                    return;
                }
                if self.state.woken_while_running() {
                    self.submit_held();
                    return;
                }
                match self.state.transition_to_idle() {
                    TransitionToIdle::Ok => {}
                    TransitionToIdle::OkNotified => self.submit(),
                    TransitionToIdle::OkDealloc => self.free(),
                    TransitionToIdle::Cancelled => self.cancel(),
                }
            }
            TransitionToRunning::Cancelled => self.cancel(),
            TransitionToRunning::Failed => {}
            TransitionToRunning::Dealloc => self.free(),
        }
    }

    /// Polls the future; on Ready it is dropped and the output stored. A future with
    /// `yields` left wakes itself by reference and returns Pending instead, counting the
    /// yield after the wake (a future may write after waking itself, which the wake's RMW
    /// does not order).
    fn poll(&self) -> bool {
        // SAFETY (both accesses): the poller holds RUNNING (invariant 2 of `state`); loom
        // checks it.
        if self.yields.with(|yields| unsafe { *yields }) > 0 {
            assert_eq!(
                self.state.transition_to_notified_by_ref(),
                TransitionToNotifiedByRef::DoNothing,
                "a running task's own wake submitted it"
            );
            // SAFETY: as above: the poller holds RUNNING.
            self.yields.with_mut(|yields| unsafe { *yields -= 1 });
            return false;
        }
        // Relaxed: ordered by the state word (the wake's Release, this poll's Acquire).
        let ready = self.event.load(Relaxed);
        self.with_stage(|stage| {
            assert_eq!(*stage, Stage::Future, "polled after completion");
            if ready {
                self.future_drops.fetch_add(1, Relaxed);
                *stage = Stage::Output;
            }
        });
        ready
    }

    /// Drops the future of a cancelled task and stores the cancellation error.
    fn cancel(&self) {
        self.with_stage(|stage| {
            assert_eq!(*stage, Stage::Future, "cancelled after completion");
            self.future_drops.fetch_add(1, Relaxed);
            *stage = Stage::Output;
        });
        self.complete();
    }

    /// Links the task into the live list, with a reference of the list's own.
    fn bind(&self) {
        self.state.ref_inc();
        // SeqCst: as `OwnedTasks` (and `wait_idle`'s Dekker pair) use it.
        self.linked.store(true, SeqCst);
    }

    /// The completer leaves the live list (`Schedule::release`). Returns whether the task
    /// was linked, in which case the list's reference is now the completer's to drop.
    fn release(&self) -> bool {
        // SeqCst: `OwnedTasks::remove`'s decrement, which `wait_idle` reads.
        self.linked.swap(false, SeqCst)
    }

    /// `wait_idle`, called after this thread dropped (or read) its handle: if it sees the
    /// task gone from the live list, the output's destructor has run.
    fn observe_idle(&self) {
        // SeqCst: pairs with the swap in `release`.
        if !self.linked.load(SeqCst) {
            assert_eq!(
                self.output_drops.load(Relaxed),
                1,
                "wait_idle saw the task gone before its output was dropped"
            );
        }
    }

    /// Completes, after the output is stored, as `Harness::complete` does: deals with the
    /// output, leaves the live list, sets `COMPLETE` dropping the list's reference, and the
    /// poller's own with it when the task is detached, or after the join waker otherwise.
    #[cfg(not(magpie_loom_broken))]
    fn complete(&self) {
        let detached = if !self.state.load().is_join_interested() {
            // Detached before completion: dropped without storing (the model's poll stored
            // it already; that makes no difference to the ordering checked).
            self.drop_output();
            true
        } else {
            match self.state.transition_to_stored() {
                TransitionToStored::Stored => false,
                TransitionToStored::Detached => {
                    self.drop_output();
                    true
                }
            }
        };
        // Relaxed, both flags: this thread's own.
        let deferred = detached && self.defer_unlinks.load(Relaxed);
        let own_ref = detached && (!deferred || self.defer_drops_own_ref.load(Relaxed));
        let list_ref = !deferred && self.release();
        let done = self
            .state
            .transition_to_complete(usize::from(list_ref) + usize::from(own_ref));
        if deferred {
            assert!(!done.is_join_waker_set(), "JOIN_WAKER on a detached task");
            self.unlink_pending.store(true, Relaxed);
            return;
        }
        if detached {
            assert!(!done.is_join_waker_set(), "JOIN_WAKER on a detached task");
            if done.ref_count() == 0 {
                self.free();
            }
            return;
        }
        self.after_complete(done);
    }

    /// The worker unlinks a task whose completion it deferred (`unlink_completed`): leaves
    /// the live list, then drops the completer's reference and the list's, by a load when
    /// they are the last and else in one RMW (`State::ref_dec_by_unreachable`; with
    /// `defer_drops_own_ref`, the list's alone).
    fn unlink_deferred(&self) {
        if !self.unlink_pending.swap(false, Relaxed) {
            return;
        }
        // The unlink reads the task's links, in its header: modelled by the stage's cell,
        // which loom checks for an access racing (or following) the free.
        self.with_stage(|stage| assert_eq!(*stage, Stage::Consumed));
        let list_ref = self.release();
        let own_ref = !self.defer_drops_own_ref.load(Relaxed);
        let refs = usize::from(own_ref) + usize::from(list_ref);
        if refs == 0 {
            return;
        }
        let last = if self.unreachable_load_relaxed.load(Relaxed) {
            self.state.load_relaxed().ref_count() == refs || self.state.ref_dec_by(refs)
        } else {
            // SAFETY: the task is out of the list, and the model's other references (the
            // handle's, the waker's) are made from held ones.
            unsafe { self.state.ref_dec_by_unreachable(refs) }
        };
        if last {
            self.free();
            // The word is the model's to read after the free (a real task's is gone); a
            // Relaxed load, after the free, so as not to order it after anything.
            self.uncounted_at_free
                .store(self.state.load_relaxed().ref_count(), Relaxed);
        }
    }

    /// The protocol before `STORED` (negative control): the handle's drop racing between the
    /// completer's check and `COMPLETE` leaves the output to be dropped after the task left
    /// the live list.
    #[cfg(magpie_loom_broken)]
    fn complete(&self) {
        let early = !self.state.load().is_join_interested();
        if early {
            self.drop_output();
        }
        let list_ref = self.release();
        let done = self.state.transition_to_complete(usize::from(list_ref));
        if !early && !done.is_join_interested() {
            self.drop_output();
        }
        self.after_complete(done);
    }

    /// Wakes the join waker if it is set, and drops the poller's reference.
    fn after_complete(&self, done: Snapshot) {
        if done.is_join_waker_set() {
            self.join_waker.with(|slot| {
                // SAFETY: JOIN_WAKER is set on a complete task: the completer may read the
                // slot (invariant 4).
                assert!(unsafe { *slot }, "JOIN_WAKER set over an empty slot");
            });
            self.join_wakes.fetch_add(1, Relaxed);
            if !self.state.unset_waker_after_complete().is_join_interested() {
                self.drop_join_waker();
            }
        }
        self.drop_ref();
    }

    fn drop_output(&self) {
        self.with_stage(|stage| {
            assert_eq!(
                *stage,
                Stage::Output,
                "output dropped twice or never stored"
            );
            *stage = Stage::Consumed;
        });
        self.output_drops.fetch_add(1, Relaxed);
    }

    fn drop_join_waker(&self) {
        if self.with_join_waker(std::mem::take) {
            self.join_waker_drops.fetch_add(1, Relaxed);
        }
    }

    fn drop_ref(&self) {
        if self.state.ref_dec() {
            self.free();
        }
    }

    /// Frees the task, which drops the future if it is still there.
    fn free(&self) {
        self.frees.fetch_add(1, Relaxed);
        self.with_stage(|stage| {
            assert_ne!(*stage, Stage::Output, "output leaked");
            if *stage == Stage::Future {
                self.future_drops.fetch_add(1, Relaxed);
            }
            *stage = Stage::Freed;
        });
        assert!(!self.with_join_waker(|slot| *slot), "join waker leaked");
    }

    /// A waker fires, consuming its reference.
    fn wake_by_val(&self) {
        self.event.store(true, Relaxed);
        match self.state.transition_to_notified_by_val() {
            TransitionToNotifiedByVal::DoNothing => {}
            TransitionToNotifiedByVal::Submit => self.submit(),
            TransitionToNotifiedByVal::Dealloc => self.free(),
        }
    }

    /// A waker fires by reference, then is dropped.
    fn wake_by_ref_then_drop(&self) {
        self.event.store(true, Relaxed);
        match self.state.transition_to_notified_by_ref() {
            TransitionToNotifiedByRef::DoNothing => {}
            TransitionToNotifiedByRef::Submit => self.submit(),
        }
        self.drop_ref();
    }

    /// The `JoinHandle` stores a waker in its (empty) slot and lends it to the completer.
    fn register_join_waker(&self) {
        self.with_join_waker(|slot| *slot = true);
        // Err: already complete; the slot stays the handle's, dropped with the handle.
        let _ = self.state.set_join_waker();
    }

    /// The `JoinHandle` aborts the task.
    fn abort(&self) {
        match self.state.transition_to_cancelled() {
            TransitionToCancelled::DoNothing => {}
            TransitionToCancelled::Submit => self.submit(),
        }
    }

    /// The `JoinHandle` polls: if the task is complete, it takes the output, which must
    /// have left the live list first (invariant 7).
    fn try_read_output(&self) {
        if !self.state.load().is_complete() {
            return;
        }
        // SeqCst: as in `observe_idle`; the Acquire of `load` already orders the swap.
        assert!(
            !self.linked.load(SeqCst),
            "the handle saw the task complete while it was in the live list"
        );
        self.drop_output();
    }

    /// The `JoinHandle` is dropped, as `Harness::drop_join_handle` does: a handle that never
    /// lent its waker empties the slot first and drops its reference with its interest
    /// unless the output is there to drop.
    fn drop_join_handle(&self) {
        let lent = self.state.load().is_join_waker_set();
        if !lent {
            self.drop_join_waker();
        }
        match self.state.unset_join_interested(!lent) {
            Err(now) => {
                // Stored first: the output is ours to drop (invariant 3), unless we read it.
                let unread = self.with_stage(|stage| *stage == Stage::Output);
                if unread {
                    self.drop_output();
                }
                if lent && !now.is_join_waker_set() {
                    self.drop_join_waker();
                }
            }
            Ok(now) => {
                assert!(!now.is_join_waker_set());
                if !lent {
                    // The reference went with the interest.
                    if now.ref_count() == 0 {
                        self.free();
                    }
                    return;
                }
                self.drop_join_waker();
            }
        }
        self.drop_ref();
    }

    /// Runs what is left in the queue, then checks the accounting: the task completed, and
    /// its future, its output, its join waker (if `join_waker`) and the task itself were each
    /// dropped exactly once.
    fn finish(&self, join_waker: bool) {
        while self.run_queued() {}
        assert!(!self.state.load().is_running(), "left RUNNING");
        assert_eq!(
            self.frees.load(Relaxed),
            1,
            "freed {} times",
            self.frees.load(Relaxed)
        );
        assert_eq!(self.future_drops.load(Relaxed), 1, "future drops");
        assert_eq!(
            self.output_drops.load(Relaxed),
            1,
            "output drops: lost wakeup?"
        );
        assert_eq!(
            self.join_waker_drops.load(Relaxed),
            usize::from(join_waker),
            "join waker drops"
        );
        assert!(self.join_wakes.load(Relaxed) <= 1);
        assert!(!self.linked.load(Relaxed), "still in the live list");
        assert_eq!(
            self.state.load().ref_count(),
            self.uncounted_at_free.load(Relaxed)
        );
    }
}

#[test]
fn loom_wake_by_val_races_poll() {
    // A waker (its own reference) fires while the task is polled for the first time: before
    // the poll (the initial NOTIFIED absorbs it, and the poll sees the event), during it
    // (the poller reschedules), or after it went idle (the waker submits).
    model(None, || {
        with_task(false, |task| {
            task.state.ref_inc();
            let waker = spawn(task, |task| task.wake_by_val());
            task.run();
            while task.run_queued() {}
            waker.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_duplicate_wake_by_ref_is_ordered_before_the_poll() {
    // As above, by reference: a wake that finds the task already notified still writes the
    // state word, so the event it set is visible to the poll the queued Notified makes.
    model(None, || {
        with_task(false, |task| {
            task.state.ref_inc();
            let waker = spawn(task, |task| task.wake_by_ref_then_drop());
            task.run();
            while task.run_queued() {}
            waker.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_wake_races_complete_and_handle_drop() {
    // The task completes on its first poll while a waker fires and the JoinHandle is dropped:
    // a wake never reschedules a task that completed, and whichever of the three drops the
    // last reference frees the task, once.
    model(THREE_THREAD_CAP, || {
        with_task(true, |task| {
            task.state.ref_inc();
            let waker = spawn(task, |task| task.wake_by_val());
            let poller = spawn(task, |task| task.run());
            task.drop_join_handle();
            waker.join().unwrap();
            poller.join().unwrap();
            assert_eq!(
                task.submits.load(Relaxed),
                0,
                "rescheduled a completed task"
            );
            task.finish(false);
        });
    });
}

#[test]
fn loom_abort_races_poll() {
    // The JoinHandle aborts and drops itself while the task is polled (and stays Pending):
    // the future is dropped exactly once, by the poller if the abort lands during the poll,
    // else by the worker running the Notified the abort submitted.
    model(None, || {
        with_task(false, |task| {
            let handle = spawn(task, |task| {
                task.abort();
                task.drop_join_handle();
            });
            task.run();
            handle.join().unwrap();
            task.finish(false);
        });
    });
}

#[test]
fn loom_join_handle_drop_races_complete() {
    // The JoinHandle lends a waker to the completer, then is dropped, while the task
    // completes: the output is dropped once (by the handle if the task completed first, else
    // by the completer) and so is the waker (by the handle unless the completer was reading
    // it when the handle left).
    model(None, || {
        with_task(true, |task| {
            let handle = spawn(task, |task| {
                task.register_join_waker();
                task.drop_join_handle();
            });
            task.run();
            handle.join().unwrap();
            task.finish(true);
        });
    });
}

#[test]
fn loom_waker_clone_and_drop_race_complete() {
    // A waker is cloned and both copies dropped while the task completes and its JoinHandle
    // is dropped: three threads race for the last reference.
    model(THREE_THREAD_CAP, || {
        with_task(true, |task| {
            task.state.ref_inc();
            let waker = spawn(task, |task| {
                task.state.ref_inc();
                task.drop_ref();
                task.drop_ref();
            });
            let poller = spawn(task, |task| task.run());
            task.drop_join_handle();
            waker.join().unwrap();
            poller.join().unwrap();
            task.finish(false);
        });
    });
}

#[test]
fn loom_abort_races_wake_and_poll() {
    // Abort, wake and poll at once: the task either completes normally or is cancelled, and
    // its future and output are dropped once either way.
    model(THREE_THREAD_CAP, || {
        with_task(false, |task| {
            task.state.ref_inc();
            let waker = spawn(task, |task| task.wake_by_val());
            let aborter = spawn(task, |task| task.abort());
            task.run();
            waker.join().unwrap();
            aborter.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_shutdown_races_queued_notified() {
    // The runtime shuts down (with its own reference) while a worker runs the task's queued
    // Notified: exactly one of them drops the future, and the task is freed once.
    model(None, || {
        with_task(false, |task| {
            task.state.ref_inc();
            let runtime = spawn(task, |task| task.shut_down_by_the_runtime());
            task.run();
            runtime.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_abort_races_shutdown() {
    // The JoinHandle aborts (then is dropped) while the runtime shuts down with its own
    // reference and a worker runs the task's queued Notified: the future is dropped exactly
    // once, by whichever of the three claims it, and the task is freed once.
    model(THREE_THREAD_CAP, || {
        with_task(false, |task| {
            task.state.ref_inc();
            let aborter = spawn(task, |task| {
                task.abort();
                task.drop_join_handle();
            });
            let runtime = spawn(task, |task| task.shut_down_by_the_runtime());
            task.run();
            aborter.join().unwrap();
            runtime.join().unwrap();
            task.finish(false);
        });
    });
}

#[test]
#[cfg_attr(
    magpie_loom_broken,
    should_panic(expected = "wait_idle saw the task gone")
)]
fn loom_wait_idle_after_handle_drop_sees_the_output_dropped() {
    // The task (in the live list) completes while its JoinHandle is dropped, and the
    // handle's thread then calls `wait_idle`: if it sees the task gone, the output was
    // dropped, whoever dropped it (the completer before leaving the list, or the handle's
    // own destructor once the output was stored).
    model(None, || {
        with_task(true, |task| {
            task.bind();
            let handle = spawn(task, |task| {
                task.drop_join_handle();
                task.observe_idle();
            });
            task.run();
            handle.join().unwrap();
            task.observe_idle();
            task.finish(false);
        });
    });
}

#[test]
#[cfg_attr(
    magpie_loom_broken,
    should_panic(expected = "wait_idle saw the task gone")
)]
fn loom_handle_reads_or_drops_while_the_task_leaves_the_list() {
    // The JoinHandle lends a waker, tries to read the output, and is dropped, while the task
    // (in the live list) completes: a handle that sees it complete sees it gone from the
    // list; a `wait_idle` after the handle's drop sees the output dropped either way.
    model(None, || {
        with_task(true, |task| {
            task.bind();
            let handle = spawn(task, |task| {
                task.register_join_waker();
                task.try_read_output();
                task.drop_join_handle();
                task.observe_idle();
            });
            task.run();
            handle.join().unwrap();
            task.finish(true);
        });
    });
}

/// The task completes on a worker that defers the unlink (and does it a moment later),
/// while its handle is dropped (and that thread then calls `wait_idle`) and a waker fires
/// and is dropped. `bound`: the task is in the live list (a task the closing list refused
/// is not, and then nothing but the completer's reference keeps it). `lend`: the handle
/// lends a join waker before it is dropped, so that it writes the task (the waker slot)
/// before its reference goes. With `broken`, the completer drops its own reference at
/// `COMPLETE` anyway.
fn deferred_unlink_races_a_waker_and_the_handle(bound: bool, lend: bool, broken: bool) {
    model(THREE_THREAD_CAP, move || {
        with_task(true, |task| {
            if bound {
                task.bind();
            }
            task.defer_unlinks.store(true, Relaxed);
            task.defer_drops_own_ref.store(broken, Relaxed);
            task.state.ref_inc();
            let waker = spawn(task, |task| task.wake_by_ref_then_drop());
            let handle = spawn(task, move |task| {
                if lend {
                    task.register_join_waker();
                }
                task.drop_join_handle();
                // `wait_idle` does not wait for a task outside the list.
                if bound {
                    task.observe_idle();
                }
            });
            task.run();
            task.unlink_deferred();
            waker.join().unwrap();
            handle.join().unwrap();
            task.finish(lend);
        });
    });
}

#[test]
fn loom_deferred_unlink_races_a_waker_and_the_handle() {
    // Freed once, by whoever drops the last reference, never before the worker's unlink;
    // a `wait_idle` that sees the task unlinked sees its output dropped. The handle's drop
    // of its lent waker happens before the free, whoever frees.
    deferred_unlink_races_a_waker_and_the_handle(true, true, false);
}

#[test]
fn loom_deferred_unlink_of_a_task_never_linked() {
    // As above, for a task outside the list: the completer's reference alone keeps it.
    deferred_unlink_races_a_waker_and_the_handle(false, false, false);
}

#[test]
#[should_panic]
fn loom_deferred_unlink_without_the_completers_reference_is_caught() {
    // The negative control of the model above: without the completer's reference, the
    // waker's drop can free the task before the worker reaches it, and loom finds the
    // worker's access after the free (a use after free, or an access unordered with the
    // free, whichever the interleaving gives).
    deferred_unlink_races_a_waker_and_the_handle(false, false, true);
}

/// The task completes on a worker that defers the unlink, while its handle lends a join
/// waker and is dropped: the handle writes the waker slot (dropping its waker) just before its
/// reference goes, and the worker's free reads the slot. With `relaxed`, the worker checks
/// for its last references by a Relaxed load (a planted bug).
fn deferred_unlink_races_a_lent_waker(relaxed: bool) {
    model(None, move || {
        with_task(true, |task| {
            task.bind();
            task.defer_unlinks.store(true, Relaxed);
            task.unreachable_load_relaxed.store(relaxed, Relaxed);
            let handle = spawn(task, |task| {
                task.register_join_waker();
                task.drop_join_handle();
            });
            task.run();
            task.unlink_deferred();
            handle.join().unwrap();
            task.finish(true);
        });
    });
}

#[test]
fn loom_deferred_unlink_frees_after_a_lent_wakers_drop() {
    // A worker that finds its references the last by a load (`ref_dec_by_unreachable`)
    // frees the task after the handle's last write, which the load's Acquire orders.
    deferred_unlink_races_a_lent_waker(false);
}

#[test]
#[should_panic]
fn loom_deferred_unlink_whose_last_reference_check_is_relaxed_is_caught() {
    // The negative control of the model above: by a Relaxed load, the free is unordered with
    // the handle's drop of its waker, and loom reports the two accesses to the slot.
    deferred_unlink_races_a_lent_waker(true);
}

/// Sets how many of the task's polls wake it themselves (`Task::yields`) before any other
/// thread exists.
fn set_yields(task: &Task, n: usize) {
    // SAFETY: called before the model spawns threads: nothing else touches the cell.
    task.yields.with_mut(|yields| unsafe { *yields = n });
}

#[test]
fn loom_held_notified_races_a_wake_and_an_abort() {
    // The first poll yields: the poller queues the task held, still RUNNING. A waker fires
    // and the handle aborts while a thief takes the held Notified: the wake submits nothing
    // (the task is running), the abort is seen by whoever claims the task next, and the
    // future is dropped once.
    model(THREE_THREAD_CAP, || {
        with_task(false, |task| {
            set_yields(task, 1);
            task.state.ref_inc();
            task.run();
            assert_eq!(task.submits.load(Relaxed), 1, "queued held");
            let waker = spawn(task, |task| task.wake_by_val());
            let aborter = spawn(task, |task| task.abort());
            let thief = spawn(task, |task| {
                task.run_queued();
            });
            waker.join().unwrap();
            aborter.join().unwrap();
            thief.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_held_notified_races_shutdown() {
    // A held Notified is queued while the runtime shuts down with its own reference (the
    // live list's) and a thief runs the Notified: the shutdown finds the task running and
    // leaves the future to the Notified's holder, or claims it if the thief's poll left it
    // idle first; either way the future is dropped once and the task freed once.
    model(None, || {
        with_task(false, |task| {
            set_yields(task, 1);
            task.state.ref_inc();
            task.run();
            let runtime = spawn(task, |task| task.shut_down_by_the_runtime());
            task.run_queued();
            runtime.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_queue_drain_races_shutdown_and_a_wake() {
    // The first poll yields, so a held Notified is queued; the runtime shuts the task down
    // and a waker fires while the queue's drain cancels the Notified it finds. The drain
    // claims the task (the shutdown found it running), the future is dropped once, and no
    // Notified is left.
    model(THREE_THREAD_CAP, || {
        with_task(false, |task| {
            set_yields(task, 1);
            task.state.ref_inc();
            task.state.ref_inc();
            task.run();
            let runtime = spawn(task, |task| task.shut_down_by_the_runtime());
            let waker = spawn(task, |task| task.wake_by_val());
            task.shut_down_queued();
            runtime.join().unwrap();
            waker.join().unwrap();
            task.shut_down_queued();
            task.drop_join_handle();
            assert_eq!(task.queued.load(Relaxed), 0, "a Notified left queued");
            task.finish(false);
        });
    });
}

/// The task's first poll, on another thread, yields, and this thread takes the held
/// Notified from the queue and completes the task. With `relaxed`, the poller queues it
/// without a Release.
fn held_notified_stolen(relaxed: bool) {
    model(None, move || {
        with_task(true, |task| {
            set_yields(task, 1);
            task.held_submit_relaxed.store(relaxed, Relaxed);
            let poller = spawn(task, |task| task.run());
            while !task.run_queued() {
                thread::yield_now();
            }
            poller.join().unwrap();
            task.drop_join_handle();
            task.finish(false);
        });
    });
}

#[test]
fn loom_held_notified_stolen_by_another_worker() {
    // The thief's poll is ordered after the poller's by the queue alone, and sees the
    // future as the poller left it.
    held_notified_stolen(false);
}

#[test]
#[should_panic]
fn loom_held_notified_without_the_queues_release_is_caught() {
    // The negative control of the model above: queued without a Release, the thief's poll
    // is not ordered after the poller's, and loom reports their accesses to the future's
    // cell as a race.
    held_notified_stolen(true);
}
