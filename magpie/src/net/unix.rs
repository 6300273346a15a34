//! Unix domain sockets: [`UnixListener`], [`UnixStream`], and the names of the stream's
//! halves ([`ReadHalf`], [`WriteHalf`], [`OwnedReadHalf`], [`OwnedWriteHalf`]) and of
//! [`ReuniteError`], as in `tokio::net::unix`. Addresses are the standard library's
//! [`SocketAddr`].
//!
//! (Inside magpie: as `tcp.rs`, over mio's Unix sockets.)
//!
//! # Examples
//!
//! ```
//! use magpie::net::unix::{OwnedReadHalf, OwnedWriteHalf};
//! use magpie::net::UnixStream;
//!
//! magpie::block_on(async {
//!     let (a, _b) = UnixStream::pair()?;
//!     let (reader, writer): (OwnedReadHalf, OwnedWriteHalf) = a.into_split();
//!     # drop((reader, writer));
//!     Ok::<(), std::io::Error>(())
//! })
//! .unwrap();
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::task::{ready, Context, Poll};

use super::split::{self, sealed::Stream};
use crate::io::poll_evented::PollEvented;
use crate::io::readiness::Direction;

/// The read half of a [`UnixStream`], borrowed: [`UnixStream::split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// let (mut a, _b) = magpie::net::UnixStream::pair()?;
/// let (reader, _writer): (magpie::net::unix::ReadHalf<'_>, _) = a.split();
/// # drop(reader);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type ReadHalf<'a> = split::ReadHalf<'a, UnixStream>;

/// The write half of a [`UnixStream`], borrowed: [`UnixStream::split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// let (mut a, _b) = magpie::net::UnixStream::pair()?;
/// let (_reader, writer): (_, magpie::net::unix::WriteHalf<'_>) = a.split();
/// # drop(writer);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type WriteHalf<'a> = split::WriteHalf<'a, UnixStream>;

/// The read half of a [`UnixStream`], owned: [`UnixStream::into_split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// let (a, _b) = magpie::net::UnixStream::pair()?;
/// let (reader, _writer): (magpie::net::unix::OwnedReadHalf, _) = a.into_split();
/// # drop(reader);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type OwnedReadHalf = split::OwnedReadHalf<UnixStream>;

/// The write half of a [`UnixStream`], owned: [`UnixStream::into_split`]. Dropping it shuts
/// the write side down.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// let (a, _b) = magpie::net::UnixStream::pair()?;
/// let (_reader, writer): (_, magpie::net::unix::OwnedWriteHalf) = a.into_split();
/// # drop(writer);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type OwnedWriteHalf = split::OwnedWriteHalf<UnixStream>;

/// The error of [`OwnedReadHalf::reunite`](split::OwnedReadHalf::reunite) with another
/// stream's half: both halves, handed back.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// let (a, b) = magpie::net::UnixStream::pair()?;
/// let (a_read, _) = a.into_split();
/// let (_, b_write) = b.into_split();
/// let magpie::net::unix::ReuniteError(a_read, b_write) = a_read.reunite(b_write).unwrap_err();
/// # drop((a_read, b_write));
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl fmt::Debug for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReuniteError(..)")
    }
}

impl fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves of two different streams")
    }
}

impl std::error::Error for ReuniteError {}

/// A Unix domain socket listening for connections, registered with the current runtime's I/O
/// driver.
///
/// # Examples
///
/// ```
/// use magpie::net::{UnixListener, UnixStream};
///
/// let path = std::env::temp_dir().join(format!("magpie-doc-{}.sock", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// magpie::block_on(async {
///     let listener = UnixListener::bind(&path)?;
///     let mut client = UnixStream::connect(&path).await?;
///     let (mut server, _) = listener.accept().await?;
///     client.write_all(b"hi").await?;
///     let mut buf = [0u8; 2];
///     server.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"hi");
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// std::fs::remove_file(&path).unwrap();
/// ```
pub struct UnixListener {
    io: PollEvented<mio::net::UnixListener>,
}

impl UnixListener {
    /// Creates a socket file at `path`, binds to it and listens, registered with the current
    /// runtime's I/O driver (so call it inside a runtime: in a task or a `block_on`, or the
    /// global runtime is used). Removing the file afterwards is up to the caller.
    ///
    /// # Errors
    ///
    /// The OS's (the path exists: `AddrInUse`), or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UnixListener`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-bind-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::bind(&path)?;
    ///     assert_eq!(listener.local_addr()?.as_pathname(), Some(path.as_path()));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::new(mio::net::UnixListener::bind(path)?)
    }

    fn new(listener: mio::net::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener {
            io: PollEvented::with_interest(listener, mio::Interest::READABLE)?,
        })
    }

    /// Wraps a listener of the standard library, putting it in non-blocking mode, and
    /// registers it with the current runtime's I/O driver.
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-from-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// let std_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::from_std(std_listener)?;
    ///     let _client = magpie::net::UnixStream::connect(&path).await?;
    ///     let (_server, _) = listener.accept().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        UnixListener::new(mio::net::UnixListener::from_std(listener))
    }

    /// Deregisters the listener and returns it as the standard library's, still in
    /// non-blocking mode.
    ///
    /// # Errors
    ///
    /// The OS's, if it refuses the deregistration (the listener is closed then).
    ///
    /// # Examples
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-into-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::bind(&path)?;
    ///     let std_listener = listener.into_std()?;
    ///     std_listener.set_nonblocking(false)?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        let (listener, result) = self.io.into_inner();
        result?;
        Ok(listener.into())
    }

    /// Waits for a connection and accepts it: the connected stream and the peer's address
    /// (usually unnamed). Cancel safe. Errors are as [`TcpListener::accept`]'s, and so is
    /// the advice to pause after `EMFILE`.
    ///
    /// [`TcpListener::accept`]: crate::net::TcpListener::accept
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UnixListener`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-acc-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::bind(&path)?;
    ///     let _client = magpie::net::UnixStream::connect(&path).await?;
    ///     let (_server, peer) = listener.accept().await?;
    ///     assert!(peer.is_unnamed());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection: the building block of [`UnixListener::accept`].
    ///
    /// # Errors
    ///
    /// As [`UnixListener::accept`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// let path = std::env::temp_dir().join(format!("magpie-pacc-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::bind(&path)?;
    ///     let _client = magpie::net::UnixStream::connect(&path).await?;
    ///     let (_server, _) = poll_fn(|cx| listener.poll_accept(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (stream, peer) =
            ready!(self
                .io
                .poll_io(Direction::Read, cx, mio::net::UnixListener::accept))?;
        Poll::Ready(UnixStream::new(stream).map(|stream| (stream, peer)))
    }

    /// The address this listener is bound to.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// See [`UnixListener::bind`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-addr-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let listener = magpie::net::UnixListener::bind(&path)?;
    ///     assert!(listener.local_addr()?.as_pathname().is_some());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.get_ref().fmt(f)
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// A Unix domain stream socket, registered with the current runtime's I/O driver. As
/// [`TcpStream`](crate::net::TcpStream): independent read and write sides, halves, cancel
/// safe `read` and `write`, and the I/O features' traits.
///
/// # Examples
///
/// ```
/// magpie::block_on(async {
///     let (mut a, mut b) = magpie::net::UnixStream::pair()?;
///     a.write_all(b"ping").await?;
///     let mut buf = [0u8; 4];
///     b.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct UnixStream {
    io: PollEvented<mio::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`, waiting until the connection is established.
    ///
    /// # Errors
    ///
    /// The OS's (nobody listens there: `ConnectionRefused` or `NotFound`; the listener's
    /// backlog is full: `WouldBlock`, as in tokio, since a Unix domain `connect` does not
    /// wait in the kernel), or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UnixListener`].
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("magpie-conn-{}.sock", std::process::id()));
    /// # let _ = std::fs::remove_file(&path);
    /// magpie::block_on(async {
    ///     let missing = magpie::net::UnixStream::connect(&path).await.unwrap_err();
    ///     assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    ///     let _listener = magpie::net::UnixListener::bind(&path)?;
    ///     let client = magpie::net::UnixStream::connect(&path).await?;
    ///     assert_eq!(client.peer_addr()?.as_pathname(), Some(path.as_path()));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let stream = UnixStream::new(mio::net::UnixStream::connect(path)?)?;
        // A Unix domain connect has finished (or failed) when `connect` returns; wait for the
        // first writable report anyway and read `take_error`, as tokio does, in case a
        // platform finishes it asynchronously.
        let _writable = poll_fn(|cx| stream.io.poll_ready(Direction::Write, cx)).await?;
        match stream.io.get_ref().take_error()? {
            Some(e) => Err(e),
            None => Ok(stream),
        }
    }

    /// A connected pair of streams (`socketpair`), both registered with the current
    /// runtime's I/O driver.
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UnixStream`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, mut b) = magpie::net::UnixStream::pair()?;
    ///     b.write_all(b"pong").await?;
    ///     let mut buf = [0u8; 4];
    ///     a.read_exact(&mut buf).await?;
    ///     assert_eq!(&buf, b"pong");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((UnixStream::new(a)?, UnixStream::new(b)?))
    }

    fn new(stream: mio::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            io: PollEvented::new(stream)?,
        })
    }

    /// Wraps a connected stream of the standard library, putting it in non-blocking mode,
    /// and registers it with the current runtime's I/O driver.
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.write_all(b"x").unwrap();
    /// magpie::block_on(async {
    ///     let mut b = magpie::net::UnixStream::from_std(b)?;
    ///     let mut buf = [0u8; 1];
    ///     b.read_exact(&mut buf).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        UnixStream::new(mio::net::UnixStream::from_std(stream))
    }

    /// Deregisters the stream and returns it as the standard library's, still in
    /// non-blocking mode.
    ///
    /// # Errors
    ///
    /// The OS's, if it refuses the deregistration (the stream is closed then).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     let a = a.into_std()?;
    ///     a.set_nonblocking(false)?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        let (stream, result) = self.io.into_inner();
        result?;
        Ok(stream.into())
    }

    /// The local address (unnamed for a connecting socket or a pair).
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     assert!(a.local_addr()?.is_unnamed());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// See [`UnixStream::connect`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     assert!(a.peer_addr()?.is_unnamed());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Reads into `buf`, waiting until at least one byte is there; `Ok(0)` at end of
    /// stream. Cancel safe. As [`TcpStream::read`](crate::net::TcpStream::read).
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, b) = magpie::net::UnixStream::pair()?;
    ///     drop(b);
    ///     assert_eq!(a.read(&mut [0u8; 8]).await?, 0); // end of stream
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        split::read(&*self, buf).await
    }

    /// Reads exactly `buf.len()` bytes. Not cancel safe.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` if the stream ends first, or as [`UnixStream::read`].
    ///
    /// # Examples
    ///
    /// See [`UnixStream`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, mut b) = magpie::net::UnixStream::pair()?;
    ///     b.write_all(b"abc").await?;
    ///     let mut buf = [0u8; 3];
    ///     a.read_exact(&mut buf).await?;
    ///     assert_eq!(&buf, b"abc");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        split::read_exact(&*self, buf).await
    }

    /// Writes some of `buf`, waiting until the stream takes at least one byte. Cancel safe.
    ///
    /// # Errors
    ///
    /// The OS's (`BrokenPipe` once the peer is gone), or an error once the runtime has shut
    /// down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, _b) = magpie::net::UnixStream::pair()?;
    ///     assert_eq!(a.write(b"hello").await?, 5);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        split::write(&*self, buf).await
    }

    /// Writes all of `buf`. Not cancel safe.
    ///
    /// # Errors
    ///
    /// As [`UnixStream::write`].
    ///
    /// # Examples
    ///
    /// See [`UnixStream`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, _b) = magpie::net::UnixStream::pair()?;
    ///     a.write_all(b"hello").await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        split::write_all(&*self, buf).await
    }

    /// Does nothing: a socket has no user-space buffer to flush.
    ///
    /// # Errors
    ///
    /// Never.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, _b) = magpie::net::UnixStream::pair()?;
    ///     a.flush().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Shuts the write side down: the peer reads end of stream after the data already sent;
    /// this side can still read.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, mut b) = magpie::net::UnixStream::pair()?;
    ///     a.shutdown().await?;
    ///     assert_eq!(b.read(&mut [0u8; 8]).await?, 0);
    ///     b.write_all(b"still open").await?;
    ///     a.read_exact(&mut [0u8; 10]).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.shutdown_write_priv()
    }

    /// Waits until the stream is readable. Cancel safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, mut b) = magpie::net::UnixStream::pair()?;
    ///     b.write_all(b"x").await?;
    ///     a.readable().await?;
    ///     assert_eq!(a.try_read(&mut [0u8; 8])?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        split::readable(self).await
    }

    /// Waits until the stream is writable. Cancel safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     a.writable().await?;
    ///     assert_eq!(a.try_write(b"x")?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        split::writable(self).await
    }

    /// Polls for read readiness: the building block of [`UnixStream::readable`].
    ///
    /// # Errors
    ///
    /// As [`UnixStream::readable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let (a, mut b) = magpie::net::UnixStream::pair()?;
    ///     b.write_all(b"x").await?;
    ///     poll_fn(|cx| a.poll_read_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready_priv(cx)
    }

    /// Polls for write readiness: the building block of [`UnixStream::writable`].
    ///
    /// # Errors
    ///
    /// As [`UnixStream::writable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     poll_fn(|cx| a.poll_write_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_ready_priv(cx)
    }

    /// Reads what is there now, without waiting: `WouldBlock` if nothing is.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UnixStream::read`].
    ///
    /// # Examples
    ///
    /// See [`UnixStream::readable`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     let err = a.try_read(&mut [0u8; 8]).unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read_priv(buf)
    }

    /// Writes what the stream takes now, without waiting: `WouldBlock` if it takes nothing.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UnixStream::write`].
    ///
    /// # Examples
    ///
    /// See [`UnixStream::writable`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     a.writable().await?;
    ///     assert_eq!(a.try_write(b"hi")?, 2);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write_priv(buf)
    }

    /// Polls a read into `buf`: the building block of [`UnixStream::read`].
    ///
    /// # Errors
    ///
    /// As [`UnixStream::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let (a, mut b) = magpie::net::UnixStream::pair()?;
    ///     b.write_all(b"x").await?;
    ///     let mut buf = [0u8; 8];
    ///     assert_eq!(poll_fn(|cx| a.poll_read(cx, &mut buf)).await?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.poll_read_priv(cx, buf)
    }

    /// Polls a write of `buf`: the building block of [`UnixStream::write`].
    ///
    /// # Errors
    ///
    /// As [`UnixStream::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let (a, _b) = magpie::net::UnixStream::pair()?;
    ///     assert_eq!(poll_fn(|cx| a.poll_write(cx, b"x")).await?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    /// Splits the stream into a read half and a write half that borrow it; as
    /// [`TcpStream::split`](crate::net::TcpStream::split).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (mut a, mut b) = magpie::net::UnixStream::pair()?;
    ///     let (mut reader, mut writer) = a.split();
    ///     writer.write_all(b"x").await?;
    ///     b.write_all(b"y").await?;
    ///     let mut buf = [0u8; 1];
    ///     reader.read_exact(&mut buf).await?;
    ///     assert_eq!(&buf, b"y");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        split::split(&*self)
    }

    /// Splits the stream into owned halves that may move to different tasks; as
    /// [`TcpStream::into_split`](crate::net::TcpStream::into_split).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let (a, mut b) = magpie::net::UnixStream::pair()?;
    ///     let (mut reader, writer) = a.into_split();
    ///     drop(writer); // shuts a's write side down
    ///     assert_eq!(b.read(&mut [0u8; 8]).await?, 0);
    ///     b.write_all(b"z").await?;
    ///     reader.read_exact(&mut [0u8; 1]).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split::into_split(self)
    }
}

impl Stream for UnixStream {
    type Addr = SocketAddr;
    type ReuniteError = ReuniteError;

    fn reunite_error(read: OwnedReadHalf, write: OwnedWriteHalf) -> ReuniteError {
        ReuniteError(read, write)
    }

    fn poll_read_priv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.io
            .poll_io(Direction::Read, cx, |mut stream| stream.read(buf))
    }

    fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.io
            .poll_io(Direction::Write, cx, |mut stream| stream.write(buf))
    }

    fn poll_read_ready_priv(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_ready(Direction::Read, cx).map_ok(drop)
    }

    fn poll_write_ready_priv(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io.poll_ready(Direction::Write, cx).map_ok(drop)
    }

    fn try_read_priv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .try_io(Direction::Read, |mut stream| stream.read(buf))
    }

    fn try_write_priv(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .try_io(Direction::Write, |mut stream| stream.write(buf))
    }

    fn shutdown_write_priv(&self) -> io::Result<()> {
        self.io.get_ref().shutdown(Shutdown::Write)
    }

    fn local_addr_priv(&self) -> io::Result<SocketAddr> {
        self.local_addr()
    }

    fn peer_addr_priv(&self) -> io::Result<SocketAddr> {
        self.peer_addr()
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.get_ref().fmt(f)
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}
