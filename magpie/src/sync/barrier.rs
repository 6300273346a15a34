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
//! the loom models check. The choice is made once, before any worker exists. Should the
//! heavy side's call fail after that (`ENOMEM`, a seccomp filter installed later), the
//! process aborts with a message: the light barriers already passed were compiler-only, so
//! no later switch of mode could order them, and an owner and a thief could both take the
//! last job of a deque. (Shuttle runs every thread on one OS thread and treats every
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

    /// The system call: its non-negative result, or the `errno` it failed with.
    fn membarrier(cmd: libc::c_long) -> Result<libc::c_long, std::io::Error> {
        #[cfg(debug_assertions)]
        if let Some(result) = fail_injection::intercept(cmd) {
            return result;
        }
        // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
        let result = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        if result < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(result)
        }
    }

    /// Failure injection, in debug builds only, for `tests/membarrier_failure.rs`: with
    /// `MAGPIE_TEST_FAIL_MEMBARRIER` set in the environment when the first runtime is built,
    /// the process behaves as if registration succeeded (whatever the kernel offers) and
    /// every barrier command then fails with `ENOMEM`, as it can after registration.
    #[cfg(debug_assertions)]
    mod fail_injection {
        use super::*;
        use std::sync::atomic::AtomicBool;

        /// Set by `arm`, in `init`: before any worker exists, like `MODE` (hence Relaxed).
        static ARMED: AtomicBool = AtomicBool::new(false);

        pub(super) fn arm() {
            if std::env::var_os("MAGPIE_TEST_FAIL_MEMBARRIER").is_some() {
                ARMED.store(true, Relaxed);
            }
        }

        /// The injected result of command `cmd`, if failures are injected.
        pub(super) fn intercept(cmd: libc::c_long) -> Option<Result<libc::c_long, std::io::Error>> {
            if !ARMED.load(Relaxed) {
                return None;
            }
            Some(match cmd {
                MEMBARRIER_CMD_QUERY => Ok(
                    MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
                ),
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED => Ok(0),
                _ => Err(std::io::Error::from_raw_os_error(libc::ENOMEM)),
            })
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
        #[cfg(debug_assertions)]
        fail_injection::arm();
        let wanted = MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
        let supported = membarrier(MEMBARRIER_CMD_QUERY).is_ok_and(|cmds| cmds & wanted == wanted);
        let mode = if supported && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED).is_ok() {
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
        // SYMMETRIC lets us skip the call.
        let mode = MODE.load(Relaxed);
        if mode != SYMMETRIC {
            HEAVY_COUNT.with(|count| count.set(count.get() + 1));
            // Returns after every running thread of the process passed a full barrier.
            if let Err(error) = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
                // Read UNKNOWN: registration has not happened (the call fails with EPERM),
                // so no light barrier can have been compiler-only yet, and the fence below
                // is enough. Read ASYMMETRIC: light barriers are compiler-only, and without
                // this call nothing orders them against us.
                if mode == ASYMMETRIC {
                    membarrier_failed(&error);
                }
            }
        }
        fence(SeqCst);
    }

    thread_local! {
        /// `membarrier` calls made by this thread (`heavy_count`).
        static HEAVY_COUNT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    pub(crate) fn heavy_count() -> u64 {
        HEAVY_COUNT.with(std::cell::Cell::get)
    }

    /// The heavy barrier failed after registration (`ENOMEM`, a seccomp filter installed
    /// since): abort. Falling back to the symmetric mode now would not help: light barriers
    /// already passed as compiler fences may be racing this very call, and an owner and a
    /// thief could both take the last job of a deque.
    #[cold]
    #[inline(never)]
    fn membarrier_failed(error: &std::io::Error) -> ! {
        use std::io::Write;
        // Not `eprintln!`, which panics if stderr is closed; we are aborting either way.
        let _ = writeln!(
            std::io::stderr(),
            "magpie: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after the process \
             registered for it ({error}); the work-stealing deque and the sleep protocol \
             rely on it for memory ordering, so continuing could run a job twice or lose a \
             wakeup; aborting (MAGPIE_SYMMETRIC_FENCES=1 runs without membarrier)"
        );
        std::process::abort()
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

    pub(crate) fn heavy_count() -> u64 {
        0
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

/// The `membarrier` calls the calling thread has made so far (0 in the symmetric mode, where
/// the heavy side is a plain fence). Workers copy it into their statistics.
pub(crate) fn heavy_count() -> u64 {
    imp::heavy_count()
}
