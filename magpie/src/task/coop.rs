//! The cooperative budget: how many times a task may make progress through magpie's own
//! futures (a `JoinHandle` that is ready, a timer that fired) in one poll before they start
//! answering `Pending`, so that a task which is always ready still lets the others run.
//!
//! Each worker grants [`BUDGET`] units to every task it polls (and `block_on` to every poll of
//! its future). The budget lives in a thread-local: it is the poll's, not the task's. Off the
//! pool, outside `block_on`, there is no budget and nothing is ever refused.

use std::cell::Cell;
use std::task::{Context, Poll};

use crate::sync::thread::thread_local;

/// Units per poll (tokio and the blitz-io seed both use 128).
pub(crate) const BUDGET: u8 = 128;

thread_local! {
    /// The units left to the poll running on this thread, or `None` when unconstrained.
    static LEFT: Cell<Option<u8>> = const { Cell::new(None) };
}

/// Runs `f` (one poll) with a fresh budget, restoring the previous one afterwards (polls may
/// nest: `block_on` inside a blocking task, a job inside a task's poll).
#[inline]
pub(crate) fn with_budget<R>(f: impl FnOnce() -> R) -> R {
    with_left(Some(BUDGET), f)
}

/// Runs `f` with `left` as the poll's budget, and the previous one back afterwards: one
/// look-up of the thread-local for both, and an unwinding `f` restores too.
#[inline]
fn with_left<R>(left: Option<u8>, f: impl FnOnce() -> R) -> R {
    struct Restore<'a>(&'a Cell<Option<u8>>, Option<u8>);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }
    LEFT.with(|cell| {
        let _restore = Restore(cell, cell.replace(left));
        f()
    })
}

/// One unit of progress, granted or refused. Dropped without [`Coop::made_progress`], the
/// unit is given back.
#[derive(Debug)]
#[must_use = "call `made_progress` if the operation completed"]
pub(crate) struct Coop {
    spent: bool,
}

impl Coop {
    /// The operation completed: the unit stays spent.
    pub(crate) fn made_progress(mut self) {
        self.spent = false;
    }
}

impl Drop for Coop {
    fn drop(&mut self) {
        if self.spent {
            LEFT.with(|left| {
                if let Some(n) = left.get() {
                    left.set(Some(n.saturating_add(1)));
                }
            });
        }
    }
}

/// Asks for one unit. If the budget is spent, wakes the task (it will be polled again, after
/// the others) and answers `Pending`.
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<Coop> {
    LEFT.with(|left| match left.get() {
        None => Poll::Ready(Coop { spent: false }),
        Some(0) => {
            count_forced_yield();
            cx.waker().wake_by_ref();
            Poll::Pending
        }
        Some(n) => {
            left.set(Some(n - 1));
            Poll::Ready(Coop { spent: true })
        }
    })
}

/// Counts a poll made to yield on the current worker's statistics.
#[cold]
fn count_forced_yield() {
    let worker = crate::runtime::worker::WorkerThread::current();
    // SAFETY: a non-null current worker is live for the duration of this call, which runs
    // on its thread.
    if let Some(worker) = unsafe { worker.as_ref() } {
        worker.count_forced_yield();
    }
}

/// Whether the running poll still has budget (`Timeout`, tests, statistics).
pub(crate) fn has_budget_remaining() -> bool {
    LEFT.with(|left| left.get() != Some(0))
}

/// Runs `f` with no budget (nothing refused), restoring the poll's budget afterwards, also
/// if `f` unwinds: for a check that must not wait behind the budget (`Timeout`'s deadline).
pub(crate) fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    with_left(None, f)
}

// Not under shuttle: `futures` (for its no-op waker) is not built there (Cargo.toml).
#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::*;

    #[test]
    fn unconstrained_outside_a_poll() {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        for _ in 0..1000 {
            match poll_proceed(&mut cx) {
                Poll::Ready(coop) => coop.made_progress(),
                Poll::Pending => panic!("refused without a budget"),
            }
        }
    }

    #[test]
    fn a_poll_gets_exactly_the_budget() {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        let granted = with_budget(|| {
            let mut granted = 0;
            while let Poll::Ready(coop) = poll_proceed(&mut cx) {
                coop.made_progress();
                granted += 1;
            }
            granted
        });
        assert_eq!(granted, BUDGET as usize);
        assert!(has_budget_remaining(), "the budget leaked out of the poll");
    }

    #[test]
    fn unused_units_are_given_back() {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        with_budget(|| {
            for _ in 0..1000 {
                match poll_proceed(&mut cx) {
                    Poll::Ready(coop) => drop(coop),
                    Poll::Pending => panic!("a refunded unit was lost"),
                }
            }
        });
    }

    #[test]
    fn nested_polls_restore_the_outer_budget() {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        with_budget(|| {
            let Poll::Ready(coop) = poll_proceed(&mut cx) else {
                panic!("refused");
            };
            coop.made_progress();
            with_budget(|| {
                while let Poll::Ready(coop) = poll_proceed(&mut cx) {
                    coop.made_progress();
                }
            });
            // The outer poll spent one unit: BUDGET - 1 are left.
            let mut left = 0;
            while let Poll::Ready(coop) = poll_proceed(&mut cx) {
                coop.made_progress();
                left += 1;
            }
            assert_eq!(left, BUDGET as usize - 1);
        });
    }
}
