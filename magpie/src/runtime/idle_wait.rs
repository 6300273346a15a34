//! `Runtime::wait_idle`: threads that wait for the runtime's last live task to finish.
//!
//! The protocol is a Dekker pair over two SeqCst operations on each side:
//!
//! * a finishing task: `OwnedTasks::remove` decrements the live count (SeqCst RMW), then
//!   [`IdleWait::task_finished`] loads `waiters` (SeqCst) and, if someone waits and the count
//!   is 0, notifies under the lock;
//! * a waiter: under the lock, increments `waiters` (SeqCst RMW), then loads the live count
//!   (SeqCst) and sleeps on the condvar while it is not 0, re-checking on every wake.
//!
//! In the single total order of SeqCst operations, either the finisher's load of `waiters`
//! comes after the waiter's increment (it notifies; the waiter holds the lock from before
//! its increment until the condvar releases it, so the notification cannot fall between its
//! check and its sleep) or the waiter's load of the count comes after the decrement (it sees
//! 0 and does not sleep). On x86 both RMWs cost what a Relaxed RMW costs, and a task that
//! finishes while nobody waits pays one plain load.

use crate::sync::atomic::SeqCst;
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
        while !is_idle() {
            guard = wait_until(&self.idle, guard, None);
        }
        self.waiters.fetch_sub(1, SeqCst);
    }
}
