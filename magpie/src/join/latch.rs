//! Latches: one-shot "this job is done" flags that a waiter can sleep on.
//!
//! * [`SpinLatch`]: waited on by a worker, which keeps running other jobs meanwhile and may
//!   park; the setter wakes it if it did. States:
//!
//!   ```text
//!   UNSET --(waiter: about to park)--> SLEEPING --(waiter: woke)--> UNSET
//!     \                                   |
//!      \------------(setter)--> SET <----/  (setter saw SLEEPING: wake the waiter)
//!   ```
//!
//!   The setter's swap to SET and the waiter's CAS to SLEEPING are RMWs on one word, so
//!   exactly one order happens: either the waiter's CAS fails (it sees SET and never parks) or
//!   the setter sees SLEEPING and hands the waiter a token, which a later park cannot miss.
//! * [`CrossLatch`]: a [`SpinLatch`] set by a worker of *another* runtime (`install` from a
//!   worker of one runtime onto another), which keeps the waiter's registry alive while it
//!   wakes the waiter.
//! * [`LockLatch`]: waited on by a thread outside the pool, with a mutex and condvar.
//! * [`CountLatch`]: a [`SpinLatch`] set when a counter drops to zero (scopes).

use std::sync::Arc;

use crate::runtime::registry::Registry;
use crate::runtime::worker::WorkerThread;
use crate::sync::atomic::*;
use crate::sync::{lock, AtomicUsize, Condvar, Mutex};

/// Something a job sets when it is done.
pub(crate) trait Latch {
    /// Marks the latch set and wakes its waiter.
    ///
    /// # Safety
    ///
    /// `this` may be freed by the waiter as soon as it observes the latch set, so `set` must
    /// not touch `*this` after the store that makes it observable.
    unsafe fn set(this: *const Self);
}

const UNSET: usize = 0;
const SLEEPING: usize = 1;
const SET: usize = 2;

/// A latch waited on by worker `owner` of `registry`.
///
/// Holds the registry as a raw pointer: the latch lives inside a job or scope created on
/// worker `owner`, which keeps its registry alive (through its `Arc`) until it stops waiting,
/// and every setter is a worker of the same registry (a setter from another runtime goes
/// through [`CrossLatch`]).
#[derive(Debug)]
pub(crate) struct SpinLatch {
    state: AtomicUsize,
    owner: usize,
    registry: *const Registry,
}

// SAFETY: `registry` points to a `Sync` registry that outlives the latch (see the type's
// docs); the rest is atomics and plain data.
unsafe impl Send for SpinLatch {}
// SAFETY: as above.
unsafe impl Sync for SpinLatch {}

impl SpinLatch {
    pub(crate) fn new(registry: &Registry, owner: usize) -> SpinLatch {
        SpinLatch {
            state: AtomicUsize::new(UNSET),
            owner,
            registry,
        }
    }

    /// Whether the latch is set. Acquire: pairs with the AcqRel swap in `set`, so the job's
    /// result is visible once this returns true.
    #[inline]
    pub(crate) fn probe(&self) -> bool {
        self.state.load(Acquire) == SET
    }

    /// The owner announces it is about to park. Returns false if the latch is already set.
    pub(crate) fn start_sleeping(&self) -> bool {
        // Acquire on success and failure: on failure we read SET and then the result.
        self.state
            .compare_exchange(UNSET, SLEEPING, Acquire, Acquire)
            .is_ok()
    }

    /// The owner woke: back to UNSET unless the setter got there first.
    pub(crate) fn stop_sleeping(&self) {
        // Relaxed on success: nothing is published by going back to UNSET; a failure means
        // SET, which `probe` will read with Acquire.
        let _ = self
            .state
            .compare_exchange(SLEEPING, UNSET, Relaxed, Relaxed);
    }
}

impl Latch for SpinLatch {
    unsafe fn set(this: *const Self) {
        // Copy what we need before the swap: after it, `*this` may be gone. The registry
        // outlives the call because the setter is one of its workers.
        // SAFETY: `this` is live until the swap (trait contract).
        let (registry, owner) = unsafe { ((*this).registry, (*this).owner) };
        // AcqRel: Release publishes the job's result to the waiter's Acquire `probe`;
        // Acquire pairs with the waiter's `start_sleeping`.
        // SAFETY: as above.
        let old = unsafe { (*this).state.swap(SET, AcqRel) };
        if old == SLEEPING {
            // SAFETY: the registry is kept alive by the running worker (see above).
            unsafe { (*registry).sleep.wake_worker(owner) };
        }
    }
}

/// A latch waited on by a worker of one runtime and set by a worker of another: the job is an
/// `install` on the other runtime, and the waiter keeps running its own pool's jobs
/// meanwhile (`WorkerThread::wait_until`), as in a `join`.
///
/// [`SpinLatch::set`] wakes the waiter through its registry after the swap, trusting that the
/// setter, a worker of that registry, keeps it alive. Here the setter belongs to another
/// runtime: once the waiter sees the latch set it may return, its runtime may be dropped, and
/// its worker exit, all before the setter's wake. So the latch holds a handle to the waiter's
/// registry, and the setter takes its own before the swap.
#[derive(Debug)]
pub(crate) struct CrossLatch {
    latch: SpinLatch,
    registry: Arc<Registry>,
}

impl CrossLatch {
    /// A latch that `waiter` will wait on.
    pub(crate) fn new(waiter: &WorkerThread) -> CrossLatch {
        CrossLatch {
            latch: SpinLatch::new(waiter.registry(), waiter.index()),
            registry: waiter.registry_arc().clone(),
        }
    }

    pub(crate) fn as_spin(&self) -> &SpinLatch {
        &self.latch
    }
}

impl Latch for CrossLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: `this` is live until the swap inside `SpinLatch::set` (trait contract).
        let registry = unsafe { Arc::clone(&(*this).registry) };
        // SAFETY: as above, `SpinLatch::set` does not touch the latch after its swap; the
        // registry it wakes the waiter through afterwards lives as long as `registry`.
        unsafe { SpinLatch::set(std::ptr::addr_of!((*this).latch)) };
        drop(registry);
    }
}

/// A latch for a thread outside the pool.
#[derive(Debug, Default)]
pub(crate) struct LockLatch {
    set: Mutex<bool>,
    condvar: Condvar,
}

impl LockLatch {
    pub(crate) fn new() -> LockLatch {
        LockLatch::default()
    }

    /// Blocks until the latch is set.
    pub(crate) fn wait(&self) {
        let mut set = lock(&self.set);
        while !*set {
            set = match self.condvar.wait(set) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }
}

impl Latch for LockLatch {
    unsafe fn set(this: *const Self) {
        // SAFETY: `this` is live until the waiter sees `true`, which needs the lock we hold
        // until the end of this block; notifying under the lock keeps the condvar alive.
        unsafe {
            let mut set = lock(&(*this).set);
            *set = true;
            (*this).condvar.notify_all();
        }
    }
}

/// A counter that sets its inner latch when it drops to zero.
#[derive(Debug)]
pub(crate) struct CountLatch {
    count: AtomicUsize,
    latch: SpinLatch,
}

impl CountLatch {
    /// A latch that is set after `count` calls to `decrement`.
    pub(crate) fn new(count: usize, registry: &Registry, owner: usize) -> CountLatch {
        CountLatch {
            count: AtomicUsize::new(count),
            latch: SpinLatch::new(registry, owner),
        }
    }

    pub(crate) fn increment(&self) {
        // Relaxed: the caller already holds a count, so the latch cannot reach zero meanwhile.
        self.count.fetch_add(1, Relaxed);
    }

    /// Drops one count; the last one sets the latch.
    ///
    /// # Safety
    ///
    /// As [`Latch::set`]: `this` may be freed once the count reaches zero.
    pub(crate) unsafe fn decrement(this: *const Self) {
        // AcqRel: Release publishes this job's effects, Acquire (for the last one) collects
        // every other job's, before the latch publishes them all to the waiter.
        // SAFETY: `this` is live while we hold a count.
        if unsafe { (*this).count.fetch_sub(1, AcqRel) } == 1 {
            // SAFETY: we held the last count; `set` does not touch the latch after the swap.
            unsafe { SpinLatch::set(&(*this).latch) };
        }
    }

    pub(crate) fn as_spin(&self) -> &SpinLatch {
        &self.latch
    }
}
