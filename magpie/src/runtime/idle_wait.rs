//! `Runtime::wait_idle`: threads that wait for the runtime's last live task to finish.
//!
//! The protocol is a Dekker pair over two SeqCst operations on each side:
//!
//! * a finishing task: `OwnedTasks::remove` decrements its shard's live count (SeqCst RMW),
//!   then [`IdleWait::task_finished`] loads `waiters` (SeqCst) and, if someone waits and
//!   every shard's count is 0, notifies under the lock;
//! * a waiter: under the lock, increments `waiters` (SeqCst RMW), then loads the shards'
//!   counts (SeqCst) and sleeps on the condvar while one is not 0, re-checking on every
//!   wake.
//!
//! In the single total order of SeqCst operations, either the finisher's load of `waiters`
//! comes after the waiter's increment (it checks the counts and, if all are 0, notifies; the
//! waiter holds the lock from before its increment until the condvar releases it, so the
//! notification cannot fall between its check and its sleep) or the waiter's load of that
//! shard's count comes after the decrement (it sees it). With several shards, the finisher
//! whose decrement is last in that order sees every count at 0, and a scan that reads the
//! shards one after the other must also not miss a task spawned into a shard it has
//! already read (`task::owned::all_idle` spells both out). On x86 both RMWs cost what a
//! Relaxed RMW costs, and a task that finishes while nobody waits pays one plain load.

use crate::sync::atomic::{fence, SeqCst};
use crate::sync::{lock, wait_until, AtomicUsize, Condvar, Mutex};

#[derive(Debug, Default)]
pub(crate) struct IdleWait {
    /// Threads inside [`wait`](Self::wait).
    waiters: AtomicUsize,
    lock: Mutex<()>,
    idle: Condvar,
}

impl IdleWait {
    /// Called after a task left the live list; `is_idle` reads the live count (SeqCst).
    #[inline]
    pub(crate) fn task_finished(&self, is_idle: impl FnOnce() -> bool) {
        // loom models SeqCst loads and RMWs as AcqRel (loom#180), which would make it report
        // the lost wake-ups this pairing rules out; its SeqCst fences are exact. Left out
        // under `magpie_loom_broken`, the negative control of `loom_idle_wait_two_shards`,
        // which must then find a lost wake-up.
        if cfg!(all(loom, not(magpie_loom_broken))) {
            fence(SeqCst);
        }
        // SeqCst: pairs with the increment in `wait` (see the module docs).
        if self.waiters.load(SeqCst) != 0 && is_idle() {
            self.notify();
        }
    }

    #[cold]
    fn notify(&self) {
        let _guard = lock(&self.lock);
        self.idle.notify_all();
    }

    /// Blocks until `is_idle` (a SeqCst read of the live count) holds.
    pub(crate) fn wait(&self, is_idle: impl Fn() -> bool) {
        let mut guard = lock(&self.lock);
        // SeqCst: pairs with the load in `task_finished` (see the module docs).
        self.waiters.fetch_add(1, SeqCst);
        // As in `task_finished`.
        if cfg!(loom) {
            fence(SeqCst);
        }
        while !is_idle() {
            guard = wait_until(&self.idle, guard, None);
        }
        self.waiters.fetch_sub(1, SeqCst);
    }
}

#[cfg(all(test, loom))]
mod loom_idle_wait {
    use super::IdleWait;
    use crate::sync::atomic::SeqCst;
    use crate::sync::{Arc, AtomicBool};
    use crate::task::owned::{all_idle, ShardCount};
    use crate::util::loom_support::model;

    /// `n` shards with one live task each.
    fn shards_with_one_task(n: usize) -> Arc<Vec<ShardCount>> {
        let counts: Vec<ShardCount> = (0..n).map(|_| ShardCount::default()).collect();
        for count in &counts {
            count.link();
        }
        Arc::new(counts)
    }

    /// Two shards, one live task each, finishing on two threads while a third waits: the
    /// waiter returns (a lost notification leaves it asleep for good, which loom reports as
    /// a deadlock), and only once both counts are 0. This is `OwnedTasks`' use: a count per
    /// shard, decremented under the shard's lock with a SeqCst RMW, and every count read by
    /// `all_idle`. (Each shard has one writer here, which stands in for its lock.)
    ///
    /// The negative control: with `--cfg magpie_loom_broken` the finishers' side of the
    /// pair is left out (the fence that stands in for it under loom, see `task_finished`),
    /// and this model must find the lost wake-up.
    #[test]
    #[cfg_attr(magpie_loom_broken, should_panic)]
    fn loom_idle_wait_two_shards() {
        model(None, || {
            let wait = Arc::new(IdleWait::default());
            let counts = shards_with_one_task(2);
            let finishers: Vec<_> = (0..2)
                .map(|shard| {
                    let wait = wait.clone();
                    let counts = counts.clone();
                    loom::thread::spawn(move || {
                        counts[shard].unlink(1);
                        wait.task_finished(|| all_idle(counts.iter()));
                    })
                })
                .collect();
            wait.wait(|| all_idle(counts.iter()));
            assert!(counts.iter().all(|c| c.live() == 0));
            for finisher in finishers {
                finisher.join().unwrap();
            }
        });
    }

    /// A task in shard 1 spawns a child that lands in shard 0, then finishes; the child
    /// finishes later. A scan that answers "idle" must come after the child finished: one
    /// pass over the shards could read shard 0 before the child's link and shard 1 after
    /// the parent's unlink (what shuttle's `wait_idle` scenario found in a one-pass scan).
    /// The scan is called once, not through `IdleWait`, so that only its answer is checked.
    ///
    /// The negative control: with `--cfg magpie_loom_broken` the scan makes one pass, and
    /// this model must find the early answer.
    #[test]
    #[cfg_attr(
        magpie_loom_broken,
        should_panic(expected = "idle while a spawned child lived")
    )]
    fn loom_idle_wait_scan_sees_a_child_spawned_across_shards() {
        model(None, || {
            let counts: Arc<Vec<ShardCount>> =
                Arc::new((0..2).map(|_| ShardCount::default()).collect());
            counts[1].link();
            let child_done = Arc::new(AtomicBool::new(false));
            let parent = {
                let counts = counts.clone();
                let child_done = child_done.clone();
                loom::thread::spawn(move || {
                    counts[0].link(); // the spawn
                    counts[1].unlink(1); // the parent completes
                    child_done.store(true, SeqCst); // the child runs...
                    counts[0].unlink(1); // ...and completes
                })
            };
            if all_idle(counts.iter()) {
                assert!(child_done.load(SeqCst), "idle while a spawned child lived");
            }
            parent.join().unwrap();
        });
    }
}
