//! Asymmetric memory barriers: a free [`light`] side for hot paths and an expensive [`heavy`]
//! side for the rare path that must be ordered against them.
//!
//! Two places in magpie have the store-then-load ("Dekker") shape that normally needs a full
//! fence on *both* sides:
//!
//! * the Chase-Lev deque: the owner's `pop` stores `bottom` then loads `top`, a thief loads
//!   `top` then `bottom` (Lê et al., PPoPP 2013, put a `seq_cst` fence in both);
//! * the sleep protocol: a worker publishing a job stores it then loads the idle state, a
//!   worker going to sleep stores the idle state then loads every queue.
//!
//! In both, one side runs on every published `join` (up to millions of times a second) and the other only when
//! a worker steals or parks. On Linux we make the frequent side a compiler-only fence and the
//! rare side a `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` system call, which returns only
//! after every running thread of this process has executed a full memory barrier. So for any
//! pair (light on thread A, heavy on thread B), A's barrier point falls either before or after
//! the heavy call, which gives the same "one of the two loads sees the other's store"
//! guarantee as a pair of `SeqCst` fences. This is the technique of Linux's liburcu, folly's
//! `asymmetricHeavyBarrier` and .NET's `FlushProcessWriteBuffers`; see `membarrier(2)`.
//!
//! Where `membarrier` is unavailable (not Linux, an old kernel, a seccomp filter, loom or
//! shuttle), both sides are `fence(SeqCst)`: the classic symmetric algorithm, which is what
//! the loom models check. (Shuttle runs every thread on one OS thread and treats every
//! atomic as SeqCst; its fences are no-ops in its model, which is sound for this algorithm.)

use super::atomic::*;

#[cfg(all(target_os = "linux", not(loom), not(shuttle)))]
mod imp {
    use super::*;
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

    const UNKNOWN: u8 = 0;
    const ASYMMETRIC: u8 = 1;
    const SYMMETRIC: u8 = 2;

    /// Whether `membarrier` is registered for this process. Read on every light barrier;
    /// Relaxed because it changes once, before any worker exists (see [`init`]), and the
    /// thread spawn that starts each worker orders that change before the worker's reads.
    static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

    // From <linux/membarrier.h>.
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    pub(crate) fn init() {
        if MODE.load(Relaxed) != UNKNOWN {
            return;
        }
        if std::env::var_os("MAGPIE_SYMMETRIC_FENCES").is_some() {
            MODE.store(SYMMETRIC, Relaxed);
            return;
        }
        let supported = membarrier(MEMBARRIER_CMD_QUERY);
        let wanted = MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
        let mode = if supported >= 0
            && supported & wanted == wanted
            && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
        {
            ASYMMETRIC
        } else {
            SYMMETRIC
        };
        // Two runtimes built at once may both get here; both compute the same answer.
        MODE.store(mode, Relaxed);
    }

    #[inline(always)]
    pub(crate) fn light() {
        if MODE.load(Relaxed) == ASYMMETRIC {
            // The heavy side's membarrier supplies the hardware barrier; we only need the
            // compiler to keep program order across this point.
            compiler_fence(SeqCst);
        } else {
            fence(SeqCst);
        }
    }

    pub(crate) fn heavy() {
        // Anything but a settled SYMMETRIC: a thread may still read UNKNOWN here after another
        // thread already read ASYMMETRIC and used a compiler-only light barrier, so only
        // SYMMETRIC lets us skip the call. Before registration the call fails with EPERM,
        // harmlessly: then no light barrier can have been compiler-only.
        if MODE.load(Relaxed) != SYMMETRIC {
            // Returns after every running thread of the process passed a full barrier.
            membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
        }
        fence(SeqCst);
    }
}

#[cfg(any(not(target_os = "linux"), loom, shuttle))]
mod imp {
    use super::*;

    pub(crate) fn init() {}

    #[inline(always)]
    pub(crate) fn light() {
        fence(SeqCst);
    }

    pub(crate) fn heavy() {
        fence(SeqCst);
    }
}

/// Decides, once per process, whether the asymmetric mode is available. Must run before any
/// thread uses [`light`] or [`heavy`]; the runtime builder calls it before spawning workers.
pub(crate) fn init() {
    imp::init()
}

/// The cheap side: orders this thread's earlier stores before its later loads *with respect to
/// any thread that calls [`heavy`]*. A full `SeqCst` fence in symmetric mode.
#[inline(always)]
pub(crate) fn light() {
    imp::light()
}

/// The expensive side: after it returns, every store that any thread made before its last
/// [`light`] is visible to this thread, and this thread's earlier stores are visible to any
/// load that follows a [`light`] that had not yet run.
pub(crate) fn heavy() {
    imp::heavy()
}
