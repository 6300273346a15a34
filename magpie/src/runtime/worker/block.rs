//! `block_in_place` on a worker: hand the worker's queued tasks to the others, then run the
//! blocking closure right here, on this thread, as this worker.
//!
//! tokio's `block_in_place` gives the worker's *core* (its queues, its driver) to a new
//! thread and lets the caller's thread go on blocking outside the pool. That cannot work in
//! magpie: a `join` half or a `scope` body runs on the worker's stack with borrowed data and
//! a latch naming this worker, so neither the frame nor the worker's identity may move to
//! another thread. And it is not needed: what tokio's core hand-over rescues is the work
//! queued behind the blocked thread, and here every queue of a worker is reachable by the
//! others already. So the worker stays what it is, and only its *tasks* move:
//!
//! 1. **Hand-off.** The LIFO slot, the ring and the mailbox are moved to the task inject
//!    queue, and a parked worker is woken if nobody searches (`hand_on_tasks`). The inject
//!    queue rather than leaving them stealable: thieves look at other workers' queues only
//!    when they run out of work of their own, take the LIFO slot only from their 4th search
//!    round and a ring half at a time, but every worker, busy or not, pulls from the inject
//!    queue at maintenance (about every millisecond of tasks). The cost is one lock-free
//!    batch push, paid only on entry.
//! 2. **Jobs stay.** Jobs on this worker's deque are the second halves of the `join`s (and
//!    the spawns of the `scope`s) that the blocking closure runs inside. They are stealable
//!    as they are, and leaving them lets a `join` take its own half back when nobody did,
//!    without waiting on a latch; a worker is woken for them (R1) if nobody searches.
//! 3. **While blocked.** Tasks this thread spawns or wakes go to the inject queue too, not to
//!    the LIFO slot or ring where nobody would look soon (`schedule_local`), and `submit_to`
//!    this worker is sent there as well (`TaskSlots::blocking`, a hint: a submission that
//!    races the start lands in the mailbox, which thieves take from at any round, and its
//!    submitter notified). `block_on` and `JoinHandle::join` are allowed: the future is
//!    polled on this thread, outside any task. `join` and `scope` in the closure run on
//!    this worker as anywhere else (a `join` waiting for a stolen half runs jobs meanwhile).
//! 4. **The driver.** No worker holds the driver role while it runs a task or a job (D4 in
//!    sleep/README.md): it gives the role up first, so a task, a `join` half or a scope
//!    spawn that calls `block_in_place` does not hold it, and the other workers take it when
//!    they park; nothing to hand over. The one exception is user code the driver itself
//!    runs: a waker it fires (a timer's, or an I/O source's, possibly another executor's).
//!    A waker that blocks, with or without `block_in_place`, holds the role up until it
//!    returns, as it holds up the rest of that turn; wakers are expected not to block, and
//!    we neither panic there nor try to give the role up from under the turn. A
//!    `block_on` in the closure turns the drivers itself while it waits
//!    ([`WorkerThread::wait_blocked_on`]): the other workers may all be blocked too.
//!
//! With one worker (or when every other worker is busy or blocked), nobody runs the handed
//! tasks until the closure returns: they wait, as they would have in the worker's own
//! queues. tokio panics there (`block_in_place` on a current-thread runtime); we run the
//! closure anyway, since the hand-off loses nothing and a closure that does not wait for
//! the pool's tasks is fine. One that waits for them deadlocks, as it would anywhere with
//! no worker free to run them.

use crate::sync::atomic::*;
#[cfg(not(any(loom, shuttle)))]
use crate::sync::{lock, AtomicUsize, Mutex};
use crate::task::id::POLLING_BLOCKED;

use super::WorkerThread;

impl WorkerThread {
    /// Runs `f` on this worker after handing its queued tasks to the others (see the module
    /// docs). Nested calls hand off again (nothing is queued here by then but what raced in)
    /// and restore the state of the enclosing call when they return or unwind.
    pub(crate) fn block_in_place<R>(&self, f: impl FnOnce() -> R) -> R {
        let _blocking = Blocking::enter(self);
        f()
    }

    /// Whether this worker is inside `block_in_place`.
    #[inline]
    pub(crate) fn is_blocking(&self) -> bool {
        self.tasks.blocking.get() != 0
    }

    /// One wait of a `block_on` that runs inside `block_in_place` on this worker, between
    /// two polls of its future; returns when the future may have been woken, or when the
    /// drivers need another turn. The caller loops until its waker fired.
    ///
    /// What the `block_on` waits for may be a timer or a socket of this runtime, and every
    /// other worker may be inside `block_in_place` too (or the pool has one worker): then
    /// nobody fires the timers or takes readiness (parked workers drive, busy ones turn the
    /// drivers at maintenance, blocked ones do neither), and the wait would last for good.
    /// So this thread, blocked anyway, turns them itself without blocking when nobody holds
    /// the driver role (`poll_drivers`), then sleeps until the next deadline, or at most
    /// `UNHELD_IO_POLL` while sources are registered: readiness wakes the holder of the
    /// role through the poller, and this thread does not hold it while it sleeps
    /// (`Registry::driving_timeout`). With no timer and no source it sleeps until its
    /// waker unparks it, or until a timer filed meanwhile that no worker can take unparks
    /// it ([`BlockedWaiters`]).
    pub(crate) fn wait_blocked_on(&self) {
        #[cfg(any(loom, shuttle))]
        crate::sync::thread::park();
        #[cfg(not(any(loom, shuttle)))]
        {
            let registry = &*self.registry;
            // Listed before the timeout is read: a timer filed after that read, when no
            // worker can take it, finds this thread in the list (`Registry::wake_to_drive`).
            let _listed = registry.blocked_waiters.enter();
            self.poll_drivers(crate::sync::time::now());
            match registry.driving_timeout() {
                Some(timeout) => std::thread::park_timeout(timeout),
                None => std::thread::park(),
            }
        }
    }
}

/// The threads of one runtime waiting in `block_on` inside `block_in_place`
/// ([`WorkerThread::wait_blocked_on`]). They are not parked through the sleep protocol, so
/// no idle bit finds them: a timer filed while they sleep, when no worker can take it,
/// unparks them all (`Registry::wake_to_drive`). There are at most as many as workers.
#[cfg(not(any(loom, shuttle)))]
#[derive(Debug, Default)]
pub(crate) struct BlockedWaiters {
    /// How many are listed: the waker's check, without the lock.
    count: AtomicUsize,
    threads: Mutex<Vec<std::thread::Thread>>,
}

#[cfg(not(any(loom, shuttle)))]
impl BlockedWaiters {
    /// Lists the calling thread until the guard drops.
    fn enter(&self) -> Listed<'_> {
        lock(&self.threads).push(std::thread::current());
        // SeqCst: the Dekker pair with a timer's filing. We count ourselves, then read the
        // next deadline after a SeqCst fence (`Driver::park_timeout`); the filer lowers the
        // deadline, fences, then (finding nobody else to wake) loads the count in
        // `wake_all`. Either we see its deadline or it sees us.
        self.count.fetch_add(1, SeqCst);
        Listed(self)
    }

    /// Unparks every listed thread. Returns whether there was one.
    pub(crate) fn wake_all(&self) -> bool {
        // SeqCst: see `enter`.
        if self.count.load(SeqCst) == 0 {
            return false;
        }
        let threads = lock(&self.threads);
        for thread in threads.iter() {
            thread.unpark();
        }
        !threads.is_empty()
    }
}

/// A thread's place in [`BlockedWaiters`], removed on drop.
#[cfg(not(any(loom, shuttle)))]
struct Listed<'a>(&'a BlockedWaiters);

#[cfg(not(any(loom, shuttle)))]
impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let me = std::thread::current().id();
        let mut threads = lock(&self.0.threads);
        if let Some(at) = threads.iter().position(|thread| thread.id() == me) {
            threads.swap_remove(at);
        }
        // Relaxed: a stale count only costs a waker the lock.
        self.0.count.fetch_sub(1, Relaxed);
    }
}

/// One `block_in_place` on a worker: set up by `enter`, undone by `drop`, also on unwind, so
/// that a panic in the closure leaves the worker as it was.
struct Blocking<'w> {
    worker: &'w WorkerThread,
    /// The polling word before this call (task/id.rs, "The current task").
    polling: u64,
}

impl<'w> Blocking<'w> {
    #[cold]
    fn enter(worker: &'w WorkerThread) -> Blocking<'w> {
        let state = &worker.tasks;
        // Relaxed, both: the worker's own word. Called from a poll, the word keeps naming
        // the task (for `task::id`), with `POLLING_BLOCKED` set: no longer "inside a task"
        // for the wakes, which must take the ring's path (`schedule_local`).
        let polling = worker.counters.polling.load(Relaxed);
        if polling != 0 {
            worker
                .counters
                .polling
                .store(polling | POLLING_BLOCKED, Relaxed);
        }
        state.blocking.set(state.blocking.get() + 1);
        // Blocking here is announced, and nothing waits behind it (the hand-off below): not
        // a stall (`runtime/monitor.rs`).
        worker.wait_unit();
        // Relaxed: a hint for `spawn_to` (see the module docs); a submission that misses
        // it lands in the mailbox, which the hand-off below or a thief empties.
        worker.slots().blocking.store(true, Relaxed);
        // Whatever the statistics say about this worker's polls so far, they say it now:
        // it may be gone a long time.
        worker.flush_counters();
        // Nor does it leave completed tasks in the live list meanwhile.
        worker.unlink_completed();
        // Blocked, this worker turns no drivers at maintenance: if nobody holds the role,
        // wake someone who will (`Registry::hand_off_driver_to_anyone`).
        worker.registry.hand_off_driver_to_anyone();
        let moved = worker.hand_on_tasks();
        crate::stats::add(&worker.counters.block_in_place_handoffs, moved as u64);
        crate::stats::bump(&worker.counters.block_in_place_calls);
        if !worker.deque.is_empty() {
            worker.registry.sleep.notify_work();
        }
        Blocking { worker, polling }
    }
}

impl Drop for Blocking<'_> {
    fn drop(&mut self) {
        let state = &self.worker.tasks;
        let depth = state.blocking.get() - 1;
        state.blocking.set(depth);
        // Relaxed: as in `enter`.
        self.worker.counters.polling.store(self.polling, Relaxed);
        if depth == 0 {
            // Relaxed: a hint, as in `enter`.
            self.worker.slots().blocking.store(false, Relaxed);
            // Back in the poll or job that called `block_in_place`: a new unit for the
            // stall monitor.
            self.worker.begin_unit();
        }
    }
}
