//! Asynchronous I/O on magpie's workers: the runtime's I/O driver, and [`AsyncFd`] for
//! waiting on file descriptors of your own.
//!
//! Every runtime owns an I/O driver (`epoll` on Linux, `kqueue` on the BSDs and macOS,
//! through mio); there is no reactor thread: the workers turn the driver when they park and
//! between tasks, and the tasks it wakes run on the workers like any others. Sockets
//! ([`magpie::net`](crate::net)) and [`AsyncFd`]s register with the driver of the current
//! runtime (the worker's, the one whose `block_on` runs on this thread, or else the global
//! runtime) when they are created.
//!
//! [`AsyncFd`] (Unix) is for a descriptor that magpie has no type for: a pipe, an eventfd,
//! a device, a socket made by another library. It waits for readiness; the system calls are
//! yours. The names are tokio's (`tokio::io::unix::AsyncFd`, also at [`unix`] here).
//!
//! # Examples
//!
//! A pipe: one task waits until it can read, another thread writes.
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use std::fs::File;
//! use std::io::{Read, Write};
//! use std::os::unix::io::FromRawFd;
//!
//! use magpie::io::{AsyncFd, Interest};
//!
//! let mut fds = [0; 2];
//! // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
//! assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
//! // SAFETY: both are open, and nobody else owns them.
//! let (read_end, mut write_end) =
//!     unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
//!
//! let rt = magpie::Runtime::builder().worker_threads(2).build()?;
//! let reader = rt.spawn(async move {
//!     let read_end = AsyncFd::with_interest(read_end, Interest::READABLE)?;
//!     let mut buf = [0u8; 5];
//!     // Wait, read, and on `WouldBlock` clear the readiness and wait again.
//!     let n = read_end
//!         .async_io(Interest::READABLE, |mut file| file.read(&mut buf))
//!         .await?;
//!     Ok::<_, std::io::Error>(buf[..n].to_vec())
//! });
//! write_end.write_all(b"hello")?;
//! assert_eq!(reader.join().unwrap()?, b"hello");
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The design of the driver (the readiness word, tokens and generations, the waker slots,
//! why wrap-around is safe, the wiring into the workers) is in `src/io/README.md` in the
//! repository.

#[cfg(all(unix, not(any(loom, shuttle))))]
mod async_fd;
#[cfg(not(any(loom, shuttle)))]
#[allow(dead_code)] // `Driver::stale_events`: for a statistic not exported yet.
pub(crate) mod driver;
#[cfg(not(any(loom, shuttle)))]
pub(crate) mod poll_evented;
#[allow(dead_code)] // A few `Readiness` helpers only the tests and loom models use.
pub(crate) mod readiness;
// Most of it serves `driver.rs`, which loom and shuttle builds leave out.
#[cfg_attr(any(loom, shuttle), allow(dead_code))]
pub(crate) mod slab;

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests;
#[cfg(all(test, not(any(loom, shuttle))))]
mod tests_runtime;

#[cfg(shuttle)]
pub(crate) mod fake_driver;

#[cfg(all(unix, not(any(loom, shuttle))))]
pub use async_fd::{AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, Interest, TryIoError};

/// The Unix-only part of this module, under tokio's path (`tokio::io::unix`), so that code
/// written against tokio's [`AsyncFd`] moves over by changing the crate name.
///
/// # Examples
///
/// ```
/// use magpie::io::unix::AsyncFd;
///
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// let fd = magpie::block_on(async { AsyncFd::new(a) }).unwrap();
/// # drop(fd);
/// ```
#[cfg(all(unix, not(any(loom, shuttle))))]
pub mod unix {
    pub use super::async_fd::{AsyncFd, AsyncFdReadyGuard, AsyncFdReadyMutGuard, TryIoError};
}

/// What a worker wakes after it turned the I/O driver.
pub(crate) use self::readiness::WakeList;

/// The shared half of the runtime's I/O driver: registers, unparks, shuts down.
#[cfg(not(any(loom, shuttle)))]
pub(crate) use self::driver::Handle;
#[cfg(not(any(loom, shuttle)))]
pub(crate) use self::runtime_io::{current_handle, IoDriver};

#[cfg(shuttle)]
pub(crate) use self::fake_driver::{Handle, IoDriver};

#[cfg(not(any(loom, shuttle)))]
mod runtime_io {
    use std::io;
    use std::sync::{Mutex, TryLockError};
    use std::time::Duration;

    use super::driver::{Driver, Handle};
    use super::readiness::WakeList;

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

        /// One turn (see [`Driver::turn`]) by the holder of the driver role, which wakes
        /// `wakers` after it (see [`WakeList`]). Returns the events delivered; an OS error
        /// (a signal, `EINTR`) counts as a turn that delivered nothing: the caller's loop
        /// looks for work and parks again.
        pub(crate) fn turn(&self, timeout: Option<Duration>, wakers: &mut WakeList) -> usize {
            let mut driver = match self.driver.try_lock() {
                Ok(driver) => driver,
                // No user code runs under this lock (the wakers run after the turn), and a
                // turn leaves the driver consistent at every step: a poisoned lock is usable.
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    debug_assert!(false, "two holders of the driver role");
                    return 0;
                }
            };
            driver.turn(timeout, wakers).unwrap_or(0)
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
