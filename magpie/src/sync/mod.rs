//! The one place that imports atomics, locks and `UnsafeCell`.
//!
//! Under `cfg(loom)` everything here comes from [loom], so that the data structures, the
//! protocols and the whole runtime (`runtime/loom_runtime.rs`) can be model-checked; under
//! `cfg(shuttle)` from [shuttle], so that the whole runtime runs under shuttle's randomized
//! schedulers (`tests/shuttle.rs`); otherwise from `std`. No other module imports
//! `std::sync::atomic` or `std::cell::UnsafeCell` directly (STYLE.md rule 9), nor spawns
//! threads, parks, spins or declares thread-locals other than through [`thread`], nor reads
//! the clock other than through [`time`] (virtual under loom).
//!
//! It also holds the two halves of the *asymmetric barrier* (see [`barrier`]), which lets the
//! hot paths (a worker pushing and popping its own jobs) run without a hardware fence.
//!
//! [loom]: https://docs.rs/loom
//! [shuttle]: https://docs.rs/shuttle

#[cfg(all(loom, shuttle))]
compile_error!("`--cfg loom` and `--cfg shuttle` are exclusive: build one at a time");

pub(crate) mod barrier;
mod cell;
pub(crate) mod thread;
pub(crate) mod time;

pub(crate) use cell::UnsafeCell;

// `Arc` here is loom's under loom (its leak and drop checks serve the data-structure
// models). The runtime's own shared blocks (the registry, the blocking pool, `block_on`'s
// waker) use `std::sync::Arc` in every build: they have `self: &Arc<Self>` methods and
// become `Waker`s, which loom's `Arc` cannot do.
#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(shuttle)]
pub(crate) use shuttle::sync::{
    atomic::{AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(not(any(loom, shuttle)))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(not(any(loom, shuttle)))]
pub(crate) use self::AtomicUsize as StaticAtomicUsize;
/// An atomic counter that lives in a `static`. Under shuttle it is `std`'s: a `static`
/// outlives each shuttle execution and is shared by the test threads that run executions in
/// parallel, while shuttle's atomics are cells that only one OS thread may touch (two
/// shuttle tests at once then fail with "RefCell already borrowed"). A process-wide tally
/// needs no schedule exploration. Elsewhere it is the facade's [`AtomicUsize`].
#[cfg(any(loom, shuttle))]
pub(crate) use std::sync::atomic::AtomicUsize as StaticAtomicUsize;

/// A process-wide counter in a `static` that orders nothing (task ids): `std`'s in every
/// build, for the reasons [`StaticAtomicUsize`] gives under shuttle and loom, and because
/// no model needs to explore the interleavings of a number that only has to be unique.
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;

/// A statistics counter or gauge. It is the facade's [`AtomicU64`] except under loom, where
/// it is `std`'s: statistics order nothing (every access is Relaxed and nothing is decided
/// on them), and each access to a loom atomic is one more step whose interleavings loom
/// would explore, which multiplies the cost of the runtime-level models for nothing.
#[cfg(not(loom))]
pub(crate) use self::AtomicU64 as StatAtomicU64;
#[cfg(loom)]
pub(crate) use std::sync::atomic::AtomicU64 as StatAtomicU64;

pub(crate) mod atomic {
    //! Orderings and fences, re-exported by name.
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{fence, Ordering::*};
    #[cfg(shuttle)]
    pub(crate) use shuttle::sync::atomic::{fence, Ordering::*};
    // The checkers' runtimes are always symmetric: the asymmetric mode's compiler fence only
    // has to compile there.
    #[cfg(any(loom, shuttle))]
    pub(crate) use std::sync::atomic::compiler_fence;
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) use std::sync::atomic::{compiler_fence, fence, Ordering::*};
}

/// Blocks on `condvar` until notified (or spuriously woken), or until `deadline` passes if
/// there is one; ignores poisoning, as [`lock`] does.
///
/// Under shuttle, which does not model time, a wait with a deadline never times out (it is
/// a plain wait): a protocol that only a timeout would rescue shows up as a deadlock. Under
/// loom it does not wait at all: it moves the virtual clock ([`time`]) to the deadline and
/// returns, like a wait that timed out; callers recheck their condition and the clock.
/// Callers that must not spin (a parked worker's optional safety net) pass no deadline under
/// loom.
pub(crate) fn wait_until<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    deadline: Option<std::time::Instant>,
) -> MutexGuard<'a, T> {
    match deadline {
        None => match condvar.wait(guard) {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        },
        // loom cannot time a wait out: the virtual clock jumps to the deadline instead.
        #[cfg(loom)]
        Some(deadline) => {
            time::advance_to(deadline);
            guard
        }
        #[cfg(not(loom))]
        Some(deadline) => {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match condvar.wait_timeout(guard, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            }
        }
    }
}

/// A mutex that counts how often it is taken: the inject queues' locks and the live-task
/// list's shards, whose acquisitions `Stats::inject_lock_acquisitions` and
/// `Stats::live_list_lock_acquisitions` report. Poisoning is ignored, as in [`lock`].
#[derive(Debug)]
pub(crate) struct CountedMutex<T> {
    mutex: Mutex<T>,
    /// Written only under the lock.
    locks: StatAtomicU64,
}

impl<T: Default> Default for CountedMutex<T> {
    fn default() -> CountedMutex<T> {
        CountedMutex::new(T::default())
    }
}

impl<T> CountedMutex<T> {
    pub(crate) fn new(value: T) -> CountedMutex<T> {
        CountedMutex {
            mutex: Mutex::new(value),
            locks: StatAtomicU64::new(0),
        }
    }

    /// Takes the lock and counts it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        let guard = lock(&self.mutex);
        if cfg!(not(magpie_no_stats)) {
            // Relaxed load and store: only the lock holder writes it; readers want no ordering.
            self.locks.store(
                self.locks.load(atomic::Relaxed).wrapping_add(1),
                atomic::Relaxed,
            );
        }
        guard
    }

    /// Times the lock was taken so far.
    pub(crate) fn acquisitions(&self) -> u64 {
        // Relaxed: a statistic.
        self.locks.load(atomic::Relaxed)
    }
}

/// Locks `mutex`, ignoring poisoning.
///
/// magpie never panics while holding one of its own locks (user code never runs under them),
/// so a poisoned lock can only come from an abort-in-progress; the data is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
