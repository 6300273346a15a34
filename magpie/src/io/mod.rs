//! The I/O driver: readiness per registered source, registrations with generations, and a
//! `mio::Poll` that records and dispatches what the OS reports, turned by the workers
//! themselves (see "On the workers" below).
//!
//! # The pieces
//!
//! * `readiness.rs`: [`Readiness`](readiness::Readiness) bits and
//!   [`ScheduledIo`](readiness::ScheduledIo), one atomic word and two waker slots per source,
//!   with the invariants (generation, tick, no lost wakeup, shutdown) and their arguments.
//! * `slab.rs`: the slots, the token encoding, allocation under a mutex, lock-free lookup by
//!   the dispatcher.
//! * `driver.rs` (not under loom or shuttle, which model no OS): [`Driver`](driver::Driver),
//!   the `mio::Poll` its holder turns; [`Handle`](driver::Handle), shared, which registers,
//!   unparks and shuts down; [`Registration`](driver::Registration), a source's readiness.
//! * `fake_driver.rs` (only under shuttle): a model of the driver with the same surface to
//!   the runtime, and a pretend source the shuttle scenarios fire from any thread, so that
//!   the driver role and its hand-off run under shuttle as in the real build. Loom has no
//!   driver (its models of the driver role, `sleep/loom_sleep.rs`, model epoll themselves).
//!
//! # The readiness word
//!
//! One `AtomicU64` per slot, changed only by compare-and-swap:
//!
//! ```text
//!  63                32 31                 8 7 6  5  4   3   2   1   0
//! +--------------------+--------------------+---+--+---+---+---+---+---+
//! |     tick (32)      |  generation (24)   | 0 |SD|ERR|WCL|RCL| W | R |
//! +--------------------+--------------------+---+--+---+---+---+---+---+
//! ```
//!
//! R readable, W writable, RCL read-closed, WCL write-closed, ERR error (the `Readiness`
//! constants; RCL and WCL are final, the others are cleared by a task that got `WouldBlock`);
//! SD shutdown (final); bits 6 and 7 are zero. The *tick* is the driver's turn counter as of
//! the last turn that set readiness here; the *generation* counts the slot's reuses.
//!
//! # Tokens
//!
//! A mio token is `generation << 24 | index`: 24 bits of slot index (16,777,215 live
//! registrations; index `2^24 - 1` is never allocated, so the driver's waker token,
//! `usize::MAX`, names no slot), and above them the generation: all 24 of its bits on 64-bit
//! targets, 8 on 32-bit ones (`slab::GENERATION_BITS`). Every generation comparison is masked
//! to the token's width.
//!
//! # Why wrap-around is safe
//!
//! *Generation.* A stale event is one the OS reported under a token before the slot was
//! freed: read by a turn that dispatches it after the free, or reported for a source dropped
//! without being deregistered. For it to reach a new owner, the same slot must have been
//! freed and reused exactly a multiple of `2^24` times (2^8 on 32-bit targets) between the
//! turn's `epoll_wait` and its dispatch of that event. Free slots are reused first in, first
//! out, so that is `2^24` full cycles through the free list, each a register and a deregister
//! (two system calls): tens of seconds of a driver stalled in the middle of one batch. And
//! were it to happen, the new owner would see a spurious readiness: it tries the system call,
//! gets `WouldBlock` and clears it. Readiness-based I/O always tolerates that; it is a wasted
//! poll, never a lost or a wrong byte.
//!
//! *Tick.* A clear based on a poll that saw tick `t` wrongly wipes newer readiness only if the
//! driver turned a multiple of `2^32` times between that poll and the clear, and the last turn
//! to set this source's readiness landed on `t` modulo `2^32`. At a million turns a second
//! that is over an hour between a task's poll and its clear, which are one system call apart.
//! The cost of the rare miss would be a lost edge (a task waiting for readiness the OS will
//! not report again), which is why the tick gets the widest field.
//!
//! # The waker slots
//!
//! Two per source, the reader's and the writer's, under a small mutex: one task reads and one
//! writes at a time (a split stream's halves), as in tokio. A poll that finds no readiness
//! stores its waker (replacing another task's: the last poller of a direction wins, as with
//! any single-waiter future); a turn that sets readiness takes the matching wakers out and
//! wakes them after the mutex is released. No waker's `wake` or `drop` (user code) runs under
//! any lock here, and each runs inside a panic boundary.
//!
//! # On the workers
//!
//! The [`Driver`](driver::Driver) is turned by whichever worker holds the *driver role*, the
//! same role that drives the timers (ARCHITECTURE.md, "I/O on the workers"; the rules D1-D4
//! and their argument in `sleep/README.md`, "The driver role"):
//!
//! * a worker that parks while nobody holds the role takes it and parks *in*
//!   [`IoDriver::turn`] with the timeout to the next timer deadline, instead of on its
//!   futex; when it returns it fires due timers, gives the role back, and searches;
//! * waking that worker goes through [`Handle::unpark`](driver::Handle::unpark) (its parker
//!   is marked `in_driver`);
//! * busy workers turn the driver without blocking at maintenance when sources are
//!   registered, so readiness arrives while every worker is busy;
//! * no worker holds the role while it runs a task (tokio#4730): a worker that gives it up
//!   and runs work, a busy worker after its turn, and a new registration wake a parked
//!   worker to take it over (`Registry::hand_off_driver`);
//! * `Runtime` shutdown shuts the driver down where it closes the timers, so every task
//!   waiting on I/O gets `Err` and nothing is stranded;
//! * `magpie::net` and `AsyncFd` build on [`Registration`](driver::Registration): poll,
//!   try the system call, `clear_readiness` on `WouldBlock`, poll again.
//!
//! Under shuttle, `fake_driver.rs` stands in for mio with the same surface, so the workers
//! take the same paths there; under loom there is no driver.

#[cfg(not(any(loom, shuttle)))]
#[allow(dead_code)] // Until the worker loop and `magpie::net` use all of it.
pub(crate) mod driver;
#[allow(dead_code)] // Used by `driver.rs`; the rest by `magpie::net` once wired.
pub(crate) mod readiness;
#[allow(dead_code)] // Used by `driver.rs`; `live` by the runtime's statistics once wired.
pub(crate) mod slab;

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests;
#[cfg(all(test, not(any(loom, shuttle))))]
mod tests_runtime;

#[cfg(shuttle)]
pub(crate) mod fake_driver;

/// The shared half of the runtime's I/O driver: registers, unparks, shuts down.
#[cfg(not(any(loom, shuttle)))]
pub(crate) use self::driver::Handle;
#[cfg(not(any(loom, shuttle)))]
#[allow(unused_imports)] // `current_handle`: for `magpie::net`.
pub(crate) use self::runtime_io::{current_handle, IoDriver};

#[cfg(shuttle)]
pub(crate) use self::fake_driver::{Handle, IoDriver};

#[cfg(not(any(loom, shuttle)))]
#[allow(dead_code)] // Until the worker loop and `magpie::net` use all of it.
mod runtime_io {
    use std::io;
    use std::sync::{Mutex, TryLockError};
    use std::time::Duration;

    use super::driver::{Driver, Handle};

    /// A runtime's I/O driver: the [`Driver`] that the holder of the driver role turns, and
    /// the [`Handle`] everyone else registers with.
    #[derive(Debug)]
    pub(crate) struct IoDriver {
        /// Locked only by the holder of the driver role (`time::Driver::try_drive`), which is
        /// one worker at a time: never contended, a `try_lock` that fails means a bug, and
        /// the turn is skipped rather than waited for.
        driver: Mutex<Driver>,
        handle: Handle,
    }

    impl IoDriver {
        pub(crate) fn new() -> io::Result<IoDriver> {
            let (driver, handle) = Driver::new()?;
            Ok(IoDriver {
                driver: Mutex::new(driver),
                handle,
            })
        }

        pub(crate) fn handle(&self) -> &Handle {
            &self.handle
        }

        /// One turn (see [`Driver::turn`]) by the holder of the driver role. Returns the
        /// events delivered; an OS error (a signal, `EINTR`) counts as a turn that delivered
        /// nothing: the caller's loop looks for work and parks again.
        pub(crate) fn turn(&self, timeout: Option<Duration>) -> usize {
            let mut driver = match self.driver.try_lock() {
                Ok(driver) => driver,
                // No user code runs under this lock (wakers run inside `turn`, each
                // contained), so a poisoned lock holds a consistent driver.
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    debug_assert!(false, "two holders of the driver role");
                    return 0;
                }
            };
            driver.turn(timeout).unwrap_or(0)
        }

        /// Registered sources alive now.
        pub(crate) fn live(&self) -> usize {
            self.handle.live()
        }
    }

    /// The I/O driver of the current runtime: the worker's own on a worker thread, the one
    /// whose `block_on` runs on this thread, else the global runtime's
    /// (`runtime/context.rs`).
    pub(crate) fn current_handle() -> Handle {
        crate::runtime::handle::DriverHandle::current().io().clone()
    }
}
