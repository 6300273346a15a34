//! [`AsyncFd`]: readiness for a file descriptor the user owns (a pipe, an eventfd, a device,
//! a socket from another library), on the same driver as `magpie::net`.
//!
//! The descriptor is registered through [`FdSource`], a mio `Source` that borrows the raw
//! descriptor at each (de)registration, and the readiness protocol is
//! [`PollEvented`]'s. What `AsyncFd` adds is tokio's guard API: waiting returns a guard that
//! remembers the readiness it saw, so that the user's own system call can report
//! `WouldBlock` back to it ([`AsyncFdReadyGuard::clear_ready`], or
//! [`AsyncFdReadyGuard::try_io`], which does it for them).

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::ops::{BitOr, BitOrAssign};
use std::os::unix::io::{AsRawFd, RawFd};
use std::task::{ready, Context, Poll};

use mio::event::Source;
use mio::unix::SourceFd;

use super::poll_evented::PollEvented;
use super::readiness::{Direction, ReadyEvent};

/// The readiness an [`AsyncFd`] is registered for and waits on: readable, writable, or both.
///
/// # Examples
///
/// ```
/// use magpie::io::Interest;
///
/// let both = Interest::READABLE | Interest::WRITABLE;
/// assert!(both.is_readable() && both.is_writable());
/// assert!(!Interest::READABLE.is_writable());
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    /// Interest in reading: the descriptor has data, a connection to accept, or an end of
    /// stream.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(magpie::io::Interest::READABLE.is_readable());
    /// ```
    pub const READABLE: Interest = Interest(1);

    /// Interest in writing: the descriptor has room for more.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(magpie::io::Interest::WRITABLE.is_writable());
    /// ```
    pub const WRITABLE: Interest = Interest(2);

    /// Whether this includes [`Interest::READABLE`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::io::Interest;
    /// assert!(Interest::READABLE.add(Interest::WRITABLE).is_readable());
    /// ```
    pub const fn is_readable(self) -> bool {
        self.0 & Interest::READABLE.0 != 0
    }

    /// Whether this includes [`Interest::WRITABLE`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::io::Interest;
    /// assert!(!Interest::READABLE.is_writable());
    /// ```
    pub const fn is_writable(self) -> bool {
        self.0 & Interest::WRITABLE.0 != 0
    }

    /// Both interests (also spelled `a | b`).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::io::Interest;
    /// assert_eq!(
    ///     Interest::READABLE.add(Interest::WRITABLE),
    ///     Interest::READABLE | Interest::WRITABLE
    /// );
    /// ```
    #[must_use]
    pub const fn add(self, other: Interest) -> Interest {
        Interest(self.0 | other.0)
    }

    fn to_mio(self) -> mio::Interest {
        match (self.is_readable(), self.is_writable()) {
            (true, true) => mio::Interest::READABLE | mio::Interest::WRITABLE,
            (false, true) => mio::Interest::WRITABLE,
            // Never empty: the constants and `add` are the only constructors.
            _ => mio::Interest::READABLE,
        }
    }
}

impl BitOr for Interest {
    type Output = Interest;

    fn bitor(self, other: Interest) -> Interest {
        self.add(other)
    }
}

impl BitOrAssign for Interest {
    fn bitor_assign(&mut self, other: Interest) {
        *self = self.add(other);
    }
}

impl fmt::Debug for Interest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.is_readable(), self.is_writable()) {
            (true, true) => f.write_str("READABLE | WRITABLE"),
            (true, false) => f.write_str("READABLE"),
            _ => f.write_str("WRITABLE"),
        }
    }
}

/// A mio source for any `AsRawFd`: borrows the raw descriptor at each call.
#[derive(Debug)]
pub(crate) struct FdSource<T>(T);

impl<T: AsRawFd> Source for FdSource<T> {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        SourceFd(&self.0.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        SourceFd(&self.0.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        SourceFd(&self.0.as_raw_fd()).deregister(registry)
    }
}

/// A file descriptor registered with the current runtime's I/O driver, so that tasks can
/// wait until it is readable or writable. The descriptor must be in non-blocking mode; the
/// `AsyncFd` owns `inner`, and deregisters the descriptor when dropped (before `inner`
/// drops and closes it).
///
/// The driver is edge-triggered: readiness, once reported, stays set until a task reports
/// that its system call returned `WouldBlock`, through [`AsyncFdReadyGuard::clear_ready`] or
/// [`AsyncFdReadyGuard::try_io`]. A task that clears readiness without having seen
/// `WouldBlock` may wait for an edge that never comes.
///
/// One task at a time should wait in each direction: a second reader replaces the first
/// one's waker (as with any single-waiter future).
///
/// # Examples
///
/// An eventfd-like use of a socket pair: one end is written synchronously, the other is
/// read once readable.
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::unix::net::UnixStream;
///
/// use magpie::io::AsyncFd;
///
/// magpie::block_on(async {
///     let (mut ours, theirs) = UnixStream::pair()?;
///     theirs.set_nonblocking(true)?;
///     let theirs = AsyncFd::new(theirs)?;
///     ours.write_all(b"ping")?;
///     let mut buf = [0u8; 4];
///     loop {
///         let mut guard = theirs.readable().await?;
///         match guard.try_io(|fd| fd.get_ref().read(&mut buf)) {
///             Ok(result) => {
///                 assert_eq!(result?, 4);
///                 break;
///             }
///             Err(_would_block) => continue,
///         }
///     }
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct AsyncFd<T: AsRawFd> {
    io: PollEvented<FdSource<T>>,
}

impl<T: AsRawFd> AsyncFd<T> {
    /// Registers `inner` for reading and writing with the current runtime's I/O driver (the
    /// worker's runtime, the runtime whose `block_on` runs on this thread, or the global
    /// one).
    ///
    /// # Errors
    ///
    /// The OS's, if the descriptor cannot be registered (for one, a regular file: `EPERM`),
    /// or an error if the runtime has shut down. `inner` is dropped then.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let fd = magpie::block_on(async { magpie::io::AsyncFd::new(a) }).unwrap();
    /// # drop(fd);
    /// ```
    pub fn new(inner: T) -> io::Result<AsyncFd<T>> {
        AsyncFd::with_interest(inner, Interest::READABLE | Interest::WRITABLE)
    }

    /// Registers `inner` for `interest` only. Waiting for the other direction then never
    /// ends.
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::io::{AsyncFd, Interest};
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let fd = AsyncFd::with_interest(a, Interest::WRITABLE)?;
    ///     fd.writable().await?.retain_ready(); // a fresh socket has room
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn with_interest(inner: T, interest: Interest) -> io::Result<AsyncFd<T>> {
        Ok(AsyncFd {
            io: PollEvented::with_interest(FdSource(inner), interest.to_mio())?,
        })
    }

    /// The wrapped value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::io::AsRawFd;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let raw = a.as_raw_fd();
    /// let fd = magpie::block_on(async { magpie::io::AsyncFd::new(a) }).unwrap();
    /// assert_eq!(fd.get_ref().as_raw_fd(), raw);
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.io.get_ref().0
    }

    /// The wrapped value, mutably. Do not close or replace its descriptor while registered.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let mut fd = magpie::block_on(async { magpie::io::AsyncFd::new(a) }).unwrap();
    /// fd.get_mut().write_all(b"x").unwrap();
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.io.get_mut().0
    }

    /// Deregisters the descriptor and returns the wrapped value, still open.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let fd = magpie::block_on(async { magpie::io::AsyncFd::new(a) }).unwrap();
    /// let a = fd.into_inner();
    /// a.set_nonblocking(false).unwrap();
    /// ```
    pub fn into_inner(self) -> T {
        // A refused deregistration (the user closed the descriptor behind our back) leaves
        // nothing to undo: the slot is freed regardless.
        let (FdSource(inner), _result) = self.io.into_inner();
        inner
    }

    /// Polls for read readiness; the guard is [`AsyncFd::readable`]'s.
    ///
    /// # Errors
    ///
    /// Once the runtime whose driver this is registered with has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::io::Write;
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let b = magpie::io::AsyncFd::new(b)?;
    ///     a.write_all(b"x")?;
    ///     let guard = poll_fn(|cx| b.poll_read_ready(cx)).await?;
    ///     drop(guard); // readiness stays set
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_read_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let event = ready!(self.io.poll_ready(Direction::Read, cx))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            async_fd: self,
            event: Some(event),
        }))
    }

    /// Polls for write readiness; the guard is [`AsyncFd::writable`]'s.
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     poll_fn(|cx| a.poll_write_ready(cx)).await?.retain_ready();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_write_ready<'a>(
        &'a self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<AsyncFdReadyGuard<'a, T>>> {
        let event = ready!(self.io.poll_ready(Direction::Write, cx))?;
        Poll::Ready(Ok(AsyncFdReadyGuard {
            async_fd: self,
            event: Some(event),
        }))
    }

    /// Waits until the descriptor is readable (or at end of stream, or has an error), and
    /// returns a guard holding that readiness. If the read then returns `WouldBlock`, tell
    /// the guard ([`AsyncFdReadyGuard::clear_ready`], or use
    /// [`AsyncFdReadyGuard::try_io`]) and wait again.
    ///
    /// Cancel safe: dropping the future before it completes loses nothing.
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// See [`AsyncFd`].
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let b = magpie::io::AsyncFd::new(b)?;
    ///     a.write_all(b"x")?;
    ///     let mut guard = b.readable().await?;
    ///     let mut byte = [0u8];
    ///     let n = guard.try_io(|b| b.get_ref().read(&mut byte)).expect("was readable")?;
    ///     assert_eq!(n, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        poll_fn(|cx| self.poll_read_ready(cx)).await
    }

    /// [`AsyncFd::readable`], with a guard that lends the `AsyncFd` mutably.
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut b = magpie::io::AsyncFd::new(b)?;
    ///     a.write_all(b"x")?;
    ///     let mut guard = b.readable_mut().await?;
    ///     let mut byte = [0u8];
    ///     let n = guard.try_io(|b| b.get_mut().read(&mut byte)).expect("was readable")?;
    ///     assert_eq!(n, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn readable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        let event = poll_fn(|cx| self.io.poll_ready(Direction::Read, cx)).await?;
        Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            event: Some(event),
        })
    }

    /// Waits until the descriptor is writable (or its write side closed, or it has an
    /// error), and returns a guard holding that readiness; as [`AsyncFd::readable`].
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     let mut guard = a.writable().await?;
    ///     let n = guard.try_io(|a| a.get_ref().write(b"x")).expect("was writable")?;
    ///     assert_eq!(n, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<AsyncFdReadyGuard<'_, T>> {
        poll_fn(|cx| self.poll_write_ready(cx)).await
    }

    /// [`AsyncFd::writable`], with a guard that lends the `AsyncFd` mutably.
    ///
    /// # Errors
    ///
    /// As [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     let mut guard = a.writable_mut().await?;
    ///     let n = guard.try_io(|a| a.get_mut().write(b"x")).expect("was writable")?;
    ///     assert_eq!(n, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn writable_mut(&mut self) -> io::Result<AsyncFdReadyMutGuard<'_, T>> {
        let event = poll_fn(|cx| self.io.poll_ready(Direction::Write, cx)).await?;
        Ok(AsyncFdReadyMutGuard {
            async_fd: self,
            event: Some(event),
        })
    }

    /// Runs `op` on the wrapped value whenever the descriptor is ready for `interest` (either
    /// direction, for both), until it returns something other than `WouldBlock`; clears the
    /// readiness after each `WouldBlock`. The loop every user of the guards writes, written
    /// once.
    ///
    /// # Errors
    ///
    /// What `op` returns, or as [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    ///
    /// use magpie::io::{AsyncFd, Interest};
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let b = AsyncFd::new(b)?;
    ///     a.write_all(b"hello")?;
    ///     let mut buf = [0u8; 5];
    ///     let n = b.async_io(Interest::READABLE, |mut b| b.read(&mut buf)).await?;
    ///     assert_eq!(&buf[..n], b"hello");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn async_io<R>(
        &self,
        interest: Interest,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        loop {
            let event = poll_fn(|cx| self.poll_interest(interest, cx)).await?;
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.io.clear_readiness(event);
                }
                result => return result,
            }
        }
    }

    /// Runs `op` on the wrapped value if the descriptor is ready for `interest` now, without
    /// waiting: `WouldBlock` if it is not, or if `op` returns it (then clearing the
    /// readiness). With both interests, readiness in either direction will do (reading
    /// first), and a `WouldBlock` clears the one that was used.
    ///
    /// # Errors
    ///
    /// `WouldBlock` as above, what `op` returns, or as [`AsyncFd::poll_read_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Read;
    ///
    /// use magpie::io::{AsyncFd, Interest};
    ///
    /// let (_a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let b = AsyncFd::new(b)?;
    ///     let mut buf = [0u8; 5];
    ///     let err = b.try_io(Interest::READABLE, |mut b| b.read(&mut buf)).unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock); // nothing was written
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_io<R>(
        &self,
        interest: Interest,
        op: impl FnOnce(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        match (interest.is_readable(), interest.is_writable()) {
            (true, true) => self.io.try_io_either(|source| op(&source.0)),
            (false, true) => self.io.try_io(Direction::Write, |source| op(&source.0)),
            _ => self.io.try_io(Direction::Read, |source| op(&source.0)),
        }
    }

    fn poll_interest(
        &self,
        interest: Interest,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<ReadyEvent>> {
        match (interest.is_readable(), interest.is_writable()) {
            (true, true) => self.io.poll_ready_either(cx),
            (false, true) => self.io.poll_ready(Direction::Write, cx),
            _ => self.io.poll_ready(Direction::Read, cx),
        }
    }
}

impl<T: AsRawFd> AsRawFd for AsyncFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFd")
            .field("inner", self.get_ref())
            .finish()
    }
}

/// The error of a guard's `try_io` whose operation returned `WouldBlock`: the readiness was
/// cleared, and the caller should wait for it again.
///
/// # Examples
///
/// ```
/// use magpie::io::{AsyncFd, TryIoError};
///
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// magpie::block_on(async {
///     let a = AsyncFd::new(a)?;
///     let mut guard = a.writable().await?;
///     let result: Result<std::io::Result<()>, TryIoError> =
///         guard.try_io(|_| Err(std::io::ErrorKind::WouldBlock.into()));
///     assert!(result.is_err()); // and the readiness was cleared
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
#[derive(Debug)]
pub struct TryIoError(());

impl fmt::Display for TryIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the operation would block; readiness was cleared")
    }
}

impl std::error::Error for TryIoError {}

/// Readiness that an [`AsyncFd`] saw, from [`AsyncFd::readable`] or [`AsyncFd::writable`].
/// Dropping it keeps the readiness set; [`clear_ready`](Self::clear_ready) or
/// [`try_io`](Self::try_io) clear it after a `WouldBlock`.
///
/// # Examples
///
/// See [`AsyncFd`].
///
/// ```
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// magpie::block_on(async {
///     let a = magpie::io::AsyncFd::new(a)?;
///     let guard: magpie::io::AsyncFdReadyGuard<'_, _> = a.writable().await?;
///     assert!(std::ptr::eq(guard.get_ref(), &a));
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    async_fd: &'a AsyncFd<T>,
    /// `None` once cleared or retained.
    event: Option<ReadyEvent>,
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    /// Reports that the operation returned `WouldBlock`: clears the readiness this guard saw
    /// (not readiness the driver reported since), so the next wait waits for a new edge.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// b.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let b = magpie::io::AsyncFd::new(b)?;
    ///     let mut guard = b.writable().await?;
    ///     // Suppose a write said `WouldBlock`:
    ///     guard.clear_ready();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn clear_ready(&mut self) {
        if let Some(event) = self.event.take() {
            self.async_fd.io.clear_readiness(event);
        }
    }

    /// Keeps the readiness set (what dropping the guard does too): the next wait returns at
    /// once.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     a.writable().await?.retain_ready();
    ///     a.writable().await?.retain_ready(); // still ready
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn retain_ready(&mut self) {
        self.event = None;
    }

    /// Runs `op`; if it returns `WouldBlock`, clears the readiness and returns
    /// `Err(TryIoError)`, else `Ok` with what it returned.
    ///
    /// # Errors
    ///
    /// [`TryIoError`] as above.
    ///
    /// # Examples
    ///
    /// See [`AsyncFd::readable`].
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     let written = a.writable().await?.try_io(|a| a.get_ref().write(b"hi"));
    ///     assert_eq!(written.expect("was writable")?, 2);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_io<R>(
        &mut self,
        op: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        match op(self.async_fd) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.clear_ready();
                Err(TryIoError(()))
            }
            result => Ok(result),
        }
    }

    /// The `AsyncFd` this guard belongs to.
    ///
    /// # Examples
    ///
    /// See [`AsyncFdReadyGuard`].
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     let guard = a.writable().await?;
    ///     assert!(std::ptr::eq(guard.get_ref(), &a));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.async_fd
    }

    /// The value the `AsyncFd` wraps.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::io::AsRawFd;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let raw = a.as_raw_fd();
    /// magpie::block_on(async {
    ///     let a = magpie::io::AsyncFd::new(a)?;
    ///     assert_eq!(a.writable().await?.get_inner().as_raw_fd(), raw);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_inner(&self) -> &'a T {
        self.async_fd.get_ref()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("async_fd", self.async_fd)
            .field("ready", &self.event.map(|event| event.ready))
            .finish()
    }
}

/// [`AsyncFdReadyGuard`], lending the [`AsyncFd`] mutably: from [`AsyncFd::readable_mut`] and
/// [`AsyncFd::writable_mut`].
///
/// # Examples
///
/// ```
/// use std::io::Write;
///
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// magpie::block_on(async {
///     let mut a = magpie::io::AsyncFd::new(a)?;
///     let mut guard: magpie::io::AsyncFdReadyMutGuard<'_, _> = a.writable_mut().await?;
///     guard.get_inner_mut().write_all(b"x")?;
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    async_fd: &'a mut AsyncFd<T>,
    /// `None` once cleared or retained.
    event: Option<ReadyEvent>,
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    /// As [`AsyncFdReadyGuard::clear_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     a.writable_mut().await?.clear_ready(); // as if a write said `WouldBlock`
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn clear_ready(&mut self) {
        if let Some(event) = self.event.take() {
            self.async_fd.io.clear_readiness(event);
        }
    }

    /// As [`AsyncFdReadyGuard::retain_ready`].
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     a.writable_mut().await?.retain_ready();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn retain_ready(&mut self) {
        self.event = None;
    }

    /// As [`AsyncFdReadyGuard::try_io`], lending the `AsyncFd` mutably.
    ///
    /// # Errors
    ///
    /// [`TryIoError`] if `op` returned `WouldBlock`.
    ///
    /// # Examples
    ///
    /// See [`AsyncFd::readable_mut`].
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     let mut guard = a.writable_mut().await?;
    ///     let n = guard.try_io(|a| a.get_mut().write(b"x")).expect("was writable")?;
    ///     assert_eq!(n, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_io<R>(
        &mut self,
        op: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        match op(self.async_fd) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.clear_ready();
                Err(TryIoError(()))
            }
            result => Ok(result),
        }
    }

    /// The `AsyncFd` this guard belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     let guard = a.writable_mut().await?;
    ///     let _fd: &magpie::io::AsyncFd<_> = guard.get_ref();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.async_fd
    }

    /// The `AsyncFd` this guard belongs to, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     let mut guard = a.writable_mut().await?;
    ///     let _fd: &mut magpie::io::AsyncFd<_> = guard.get_mut();
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.async_fd
    }

    /// The value the `AsyncFd` wraps.
    ///
    /// # Examples
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     let guard = a.writable_mut().await?;
    ///     assert!(guard.get_inner().peer_addr().is_ok());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_inner(&self) -> &T {
        self.async_fd.get_ref()
    }

    /// The value the `AsyncFd` wraps, mutably.
    ///
    /// # Examples
    ///
    /// See [`AsyncFdReadyMutGuard`].
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// magpie::block_on(async {
    ///     let mut a = magpie::io::AsyncFd::new(a)?;
    ///     a.writable_mut().await?.get_inner_mut().write_all(b"x")?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn get_inner_mut(&mut self) -> &mut T {
        self.async_fd.get_mut()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard")
            .field("async_fd", self.async_fd)
            .field("ready", &self.event.map(|event| event.ready))
            .finish()
    }
}
