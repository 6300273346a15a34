//! The halves of a stream, TCP or Unix: borrowed ([`ReadHalf`], [`WriteHalf`], from
//! `split`) and owned ([`OwnedReadHalf`], [`OwnedWriteHalf`], from `into_split`).
//!
//! They are written once, generic over the stream (`S` is [`TcpStream`] or
//! [`UnixStream`]; the trait that bounds it is sealed). Name them through the aliases, as in
//! tokio: [`tcp::ReadHalf`], [`tcp::OwnedWriteHalf`], [`unix::ReadHalf`] and so on. Each of
//! those modules also has its own `ReuniteError`, a tuple struct (an alias could not be
//! matched as a pattern).
//!
//! A stream's read and write sides have separate waker slots in the driver, so one task may
//! read while another writes; the halves make that split explicit in the types. Two readers
//! of one stream would displace each other's waker (the last one wins); the halves cannot be
//! cloned, so that takes a deliberate `&` to the stream.
//!
//! Dropping an [`OwnedWriteHalf`] shuts the stream's write side down (the peer reads end of
//! stream), unless it was [`forget`](OwnedWriteHalf::forget)-ed or reunited; the descriptor
//! closes when both owned halves are gone.
//!
//! [`TcpStream`]: super::TcpStream
//! [`tcp::ReadHalf`]: super::tcp::ReadHalf
//! [`tcp::OwnedWriteHalf`]: super::tcp::OwnedWriteHalf
//! [`UnixStream`]: super::unix::UnixStream
//! [`unix::ReadHalf`]: super::unix::ReadHalf
//!
//! # Examples
//!
//! ```
//! # magpie::block_on(async {
//! let (a, mut b) = magpie::net::UnixStream::pair()?;
//! let (mut reader, mut writer): (magpie::net::unix::OwnedReadHalf, _) = a.into_split();
//! writer.write_all(b"to b").await?;
//! b.write_all(b"to a").await?;
//! let mut buf = [0u8; 4];
//! reader.read_exact(&mut buf).await?;
//! b.read_exact(&mut buf).await?;
//! # Ok::<(), std::io::Error>(()) }).unwrap();
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

use crate::sync::Arc;

pub(crate) mod sealed {
    use std::io;
    use std::task::{Context, Poll};

    /// What the halves need of a stream: the stream's operations through `&self` (a
    /// stream's sides are independent). Public in a private module: implemented by
    /// `TcpStream` and `UnixStream` only, and callable only inside magpie.
    pub trait Stream {
        /// The stream's socket address type.
        type Addr;
        /// The error of `reunite` with halves of two streams (a tuple struct per kind of
        /// stream, as tokio's, so that patterns like `Err(ReuniteError(read, write))` work).
        type ReuniteError;

        #[doc(hidden)]
        fn reunite_error(
            read: super::OwnedReadHalf<Self>,
            write: super::OwnedWriteHalf<Self>,
        ) -> Self::ReuniteError
        where
            Self: Sized;

        #[doc(hidden)]
        fn poll_read_priv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
        #[doc(hidden)]
        fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
        #[doc(hidden)]
        fn poll_read_ready_priv(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
        #[doc(hidden)]
        fn poll_write_ready_priv(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
        #[doc(hidden)]
        fn try_read_priv(&self, buf: &mut [u8]) -> io::Result<usize>;
        #[doc(hidden)]
        fn try_write_priv(&self, buf: &[u8]) -> io::Result<usize>;
        /// `shutdown(Write)`: the peer reads end of stream once the sent data is read.
        #[doc(hidden)]
        fn shutdown_write_priv(&self) -> io::Result<()>;
        #[doc(hidden)]
        fn local_addr_priv(&self) -> io::Result<Self::Addr>;
        #[doc(hidden)]
        fn peer_addr_priv(&self) -> io::Result<Self::Addr>;
    }
}

use sealed::Stream;

// The operations every stream and half offers, written once.

pub(crate) async fn read<S: Stream>(stream: &S, buf: &mut [u8]) -> io::Result<usize> {
    poll_fn(|cx| stream.poll_read_priv(cx, buf)).await
}

pub(crate) async fn read_exact<S: Stream>(stream: &S, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match read(stream, buf).await? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "end of stream before the buffer was filled",
                ))
            }
            n => buf = &mut buf[n..],
        }
    }
    Ok(())
}

pub(crate) async fn write<S: Stream>(stream: &S, buf: &[u8]) -> io::Result<usize> {
    poll_fn(|cx| stream.poll_write_priv(cx, buf)).await
}

pub(crate) async fn write_all<S: Stream>(stream: &S, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match write(stream, buf).await? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the stream accepted no more bytes",
                ))
            }
            n => buf = &buf[n..],
        }
    }
    Ok(())
}

pub(crate) async fn readable<S: Stream>(stream: &S) -> io::Result<()> {
    poll_fn(|cx| stream.poll_read_ready_priv(cx)).await
}

pub(crate) async fn writable<S: Stream>(stream: &S) -> io::Result<()> {
    poll_fn(|cx| stream.poll_write_ready_priv(cx)).await
}

/// The read half of a stream, borrowed (`TcpStream::split`, `UnixStream::split`): reads while
/// the [`WriteHalf`] writes, in the same task (`join`) or, with scoped borrows, two.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// # let (mut server, _) = listener.accept().await?;
/// let (mut reader, mut writer) = server.split();
/// client.write_all(b"ping").await?;
/// let mut buf = [0u8; 4];
/// reader.read_exact(&mut buf).await?;
/// writer.write_all(&buf).await?;
/// client.read_exact(&mut buf).await?;
/// assert_eq!(&buf, b"ping");
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct ReadHalf<'a, S: Stream> {
    stream: &'a S,
}

/// The write half of a stream, borrowed; see [`ReadHalf`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// # let (mut server, _) = listener.accept().await?;
/// let (_reader, mut writer) = server.split();
/// writer.write_all(b"pong").await?;
/// let mut buf = [0u8; 4];
/// client.read_exact(&mut buf).await?;
/// assert_eq!(&buf, b"pong");
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct WriteHalf<'a, S: Stream> {
    stream: &'a S,
}

/// The read half of a stream, owned (`TcpStream::into_split`, `UnixStream::into_split`): it
/// may move to another task than its [`OwnedWriteHalf`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// # let (server, _) = listener.accept().await?;
/// let (mut reader, mut writer) = server.into_split();
/// let echo = magpie::spawn(async move {
///     let mut buf = [0u8; 5];
///     reader.read_exact(&mut buf).await?;
///     writer.write_all(&buf).await
/// });
/// client.write_all(b"hello").await?;
/// let mut buf = [0u8; 5];
/// client.read_exact(&mut buf).await?;
/// assert_eq!(&buf, b"hello");
/// echo.await.unwrap()?;
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct OwnedReadHalf<S: Stream> {
    stream: Arc<S>,
}

/// The write half of a stream, owned; see [`OwnedReadHalf`]. Dropping it shuts the write side
/// down (the peer reads end of stream) unless it was [`forget`](Self::forget)-ed.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// # let (server, _) = listener.accept().await?;
/// let (_reader, mut writer) = server.into_split();
/// writer.write_all(b"bye").await?;
/// drop(writer); // shuts the write side down
/// let mut buf = Vec::new();
/// let mut chunk = [0u8; 8];
/// loop {
///     match client.read(&mut chunk).await? {
///         0 => break, // end of stream, though `_reader` is alive
///         n => buf.extend_from_slice(&chunk[..n]),
///     }
/// }
/// assert_eq!(buf, b"bye");
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub struct OwnedWriteHalf<S: Stream> {
    stream: Arc<S>,
    /// Whether dropping shuts the write side down: cleared by `forget` and `reunite`.
    shutdown_on_drop: bool,
}

pub(crate) fn split<S: Stream>(stream: &S) -> (ReadHalf<'_, S>, WriteHalf<'_, S>) {
    (ReadHalf { stream }, WriteHalf { stream })
}

pub(crate) fn into_split<S: Stream>(stream: S) -> (OwnedReadHalf<S>, OwnedWriteHalf<S>) {
    let stream = Arc::new(stream);
    (
        OwnedReadHalf {
            stream: stream.clone(),
        },
        OwnedWriteHalf {
            stream,
            shutdown_on_drop: true,
        },
    )
}

fn reunite<S: Stream>(
    read: OwnedReadHalf<S>,
    mut write: OwnedWriteHalf<S>,
) -> Result<S, S::ReuniteError> {
    if !Arc::ptr_eq(&read.stream, &write.stream) {
        return Err(S::reunite_error(read, write));
    }
    write.shutdown_on_drop = false;
    drop(write);
    // The two halves held the only references, and the write half's is gone.
    Ok(Arc::try_unwrap(read.stream)
        .unwrap_or_else(|_| unreachable!("a half of this stream is still alive")))
}

impl<S: Stream> ReadHalf<'_, S> {
    /// Reads into `buf`, waiting until at least one byte is there; `Ok(0)` at end of stream
    /// (or for an empty `buf`). Cancel safe. As `TcpStream::read`.
    ///
    /// # Errors
    ///
    /// The OS's (a reset connection), or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (mut reader, _) = server.split();
    /// let mut buf = [0u8; 8];
    /// assert_eq!(reader.read(&mut buf).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read(self.stream, buf).await
    }

    /// Reads exactly `buf.len()` bytes. Not cancel safe: bytes read before a cancellation
    /// are lost.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` if the stream ends first, or as [`ReadHalf::read`].
    ///
    /// # Examples
    ///
    /// See [`ReadHalf`].
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// client.write_all(b"abc").await?;
    /// let (mut reader, _) = server.split();
    /// let mut buf = [0u8; 3];
    /// reader.read_exact(&mut buf).await?;
    /// assert_eq!(&buf, b"abc");
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        read_exact(self.stream, buf).await
    }

    /// Waits until the stream is readable (or at end of stream, or has an error). Cancel
    /// safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (reader, _) = server.split();
    /// reader.readable().await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        readable(self.stream).await
    }

    /// Reads what is there now, without waiting: `WouldBlock` if nothing is.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`ReadHalf::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// let (reader, _) = server.split();
    /// let mut buf = [0u8; 8];
    /// let err = reader.try_read(&mut buf).unwrap_err(); // nothing sent yet
    /// assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.try_read_priv(buf)
    }

    /// Polls a read into `buf`: the building block of [`ReadHalf::read`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (reader, _) = server.split();
    /// let mut buf = [0u8; 8];
    /// assert_eq!(poll_fn(|cx| reader.poll_read(cx, &mut buf)).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_read_priv(cx, buf)
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (reader, _) = client.split();
    /// assert_eq!(reader.peer_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<S::Addr> {
        self.stream.peer_addr_priv()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (mut server, _) = listener.accept().await?;
    /// let (reader, _) = server.split();
    /// assert_eq!(reader.local_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<S::Addr> {
        self.stream.local_addr_priv()
    }
}

impl<S: Stream> WriteHalf<'_, S> {
    /// Writes some of `buf`, waiting until the stream takes at least one byte; returns how
    /// many it took. Cancel safe. As `TcpStream::write`.
    ///
    /// # Errors
    ///
    /// The OS's (a reset connection, a write side shut down), or an error once the runtime
    /// has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, mut writer) = client.split();
    /// assert!(writer.write(b"hello").await? > 0);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write(self.stream, buf).await
    }

    /// Writes all of `buf`. Not cancel safe: how much was written before a cancellation is
    /// unknown.
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// See [`WriteHalf`].
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, mut writer) = client.split();
    /// writer.write_all(b"hello").await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        write_all(self.stream, buf).await
    }

    /// Does nothing: a socket has no user-space buffer to flush. For code written against
    /// buffered writers.
    ///
    /// # Errors
    ///
    /// Never.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, mut writer) = client.split();
    /// writer.write_all(b"hello").await?;
    /// writer.flush().await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Shuts the stream's write side down: the peer reads end of stream after the data
    /// already sent. Reading goes on.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// let (_, mut writer) = client.split();
    /// writer.shutdown().await?;
    /// assert_eq!(server.read(&mut [0u8; 8]).await?, 0); // end of stream
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown_write_priv()
    }

    /// Waits until the stream is writable (or its write side closed, or it has an error).
    /// Cancel safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, writer) = client.split();
    /// writer.writable().await?; // a fresh connection has room
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        writable(self.stream).await
    }

    /// Writes what the stream takes now, without waiting: `WouldBlock` if it takes nothing.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, writer) = client.split();
    /// writer.writable().await?;
    /// assert_eq!(writer.try_write(b"x")?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.stream.try_write_priv(buf)
    }

    /// Polls a write of `buf`: the building block of [`WriteHalf::write`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, writer) = client.split();
    /// assert_eq!(poll_fn(|cx| writer.poll_write(cx, b"x")).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_write_priv(cx, buf)
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_, writer) = client.split();
    /// assert_eq!(writer.peer_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<S::Addr> {
        self.stream.peer_addr_priv()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let local = client.local_addr()?;
    /// let (_, writer) = client.split();
    /// assert_eq!(writer.local_addr()?, local);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<S::Addr> {
        self.stream.local_addr_priv()
    }
}

impl<S: Stream> OwnedReadHalf<S> {
    /// Puts the stream back together with its write half.
    ///
    /// # Errors
    ///
    /// The stream's `ReuniteError` (`magpie::net::tcp::ReuniteError`, ...), with both
    /// halves, if `other` is another stream's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (reader, writer) = client.into_split();
    /// let client: magpie::net::TcpStream = reader.reunite(writer).expect("the same stream");
    /// # drop(client);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn reunite(self, other: OwnedWriteHalf<S>) -> Result<S, S::ReuniteError> {
        reunite(self, other)
    }

    /// As [`ReadHalf::read`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (mut reader, _writer) = server.into_split();
    /// assert_eq!(reader.read(&mut [0u8; 8]).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read(&*self.stream, buf).await
    }

    /// As [`ReadHalf::read_exact`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::read_exact`].
    ///
    /// # Examples
    ///
    /// See [`OwnedReadHalf`].
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (server, _) = listener.accept().await?;
    /// client.write_all(b"abc").await?;
    /// let (mut reader, _writer) = server.into_split();
    /// let mut buf = [0u8; 3];
    /// reader.read_exact(&mut buf).await?;
    /// assert_eq!(&buf, b"abc");
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        read_exact(&*self.stream, buf).await
    }

    /// As [`ReadHalf::readable`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::readable`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (reader, _writer) = server.into_split();
    /// reader.readable().await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        readable(&*self.stream).await
    }

    /// As [`ReadHalf::try_read`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::try_read`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (server, _) = listener.accept().await?;
    /// let (reader, _writer) = server.into_split();
    /// let err = reader.try_read(&mut [0u8; 8]).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.try_read_priv(buf)
    }

    /// As [`ReadHalf::poll_read`].
    ///
    /// # Errors
    ///
    /// As [`ReadHalf::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (server, _) = listener.accept().await?;
    /// client.write_all(b"x").await?;
    /// let (reader, _writer) = server.into_split();
    /// let mut buf = [0u8; 8];
    /// assert_eq!(poll_fn(|cx| reader.poll_read(cx, &mut buf)).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_read_priv(cx, buf)
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (reader, _writer) = client.into_split();
    /// assert_eq!(reader.peer_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<S::Addr> {
        self.stream.peer_addr_priv()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let local = client.local_addr()?;
    /// let (reader, _writer) = client.into_split();
    /// assert_eq!(reader.local_addr()?, local);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<S::Addr> {
        self.stream.local_addr_priv()
    }
}

impl<S: Stream> OwnedWriteHalf<S> {
    /// Puts the stream back together with its read half; see [`OwnedReadHalf::reunite`].
    ///
    /// # Errors
    ///
    /// The stream's `ReuniteError` (`magpie::net::tcp::ReuniteError`, ...), with both
    /// halves, if `other` is another stream's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (reader, writer) = client.into_split();
    /// let client = writer.reunite(reader).expect("the same stream");
    /// # drop(client);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn reunite(self, other: OwnedReadHalf<S>) -> Result<S, S::ReuniteError> {
        reunite(other, self)
    }

    /// Drops this half without shutting the write side down: the descriptor stays open (for
    /// writing too) until the read half is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// let (_reader, writer) = client.into_split();
    /// writer.forget();
    /// assert!(server.try_read(&mut [0u8; 8]).is_err()); // no end of stream: WouldBlock
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn forget(mut self) {
        self.shutdown_on_drop = false;
    }

    /// As [`WriteHalf::write`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, mut writer) = client.into_split();
    /// assert!(writer.write(b"hello").await? > 0);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write(&*self.stream, buf).await
    }

    /// As [`WriteHalf::write_all`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// See [`OwnedWriteHalf`].
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, mut writer) = client.into_split();
    /// writer.write_all(b"hello").await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        write_all(&*self.stream, buf).await
    }

    /// Does nothing, as [`WriteHalf::flush`].
    ///
    /// # Errors
    ///
    /// Never.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, mut writer) = client.into_split();
    /// writer.flush().await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// As [`WriteHalf::shutdown`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// # let (mut server, _) = listener.accept().await?;
    /// let (_reader, mut writer) = client.into_split();
    /// writer.shutdown().await?;
    /// assert_eq!(server.read(&mut [0u8; 8]).await?, 0);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown_write_priv()
    }

    /// As [`WriteHalf::writable`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::writable`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, writer) = client.into_split();
    /// writer.writable().await?;
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        writable(&*self.stream).await
    }

    /// As [`WriteHalf::try_write`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::try_write`].
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, writer) = client.into_split();
    /// writer.writable().await?;
    /// assert_eq!(writer.try_write(b"x")?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.stream.try_write_priv(buf)
    }

    /// As [`WriteHalf::poll_write`].
    ///
    /// # Errors
    ///
    /// As [`WriteHalf::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, writer) = client.into_split();
    /// assert_eq!(poll_fn(|cx| writer.poll_write(cx, b"x")).await?, 1);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_write_priv(cx, buf)
    }

    /// The peer's address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let (_reader, writer) = client.into_split();
    /// assert_eq!(writer.peer_addr()?, listener.local_addr()?);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<S::Addr> {
        self.stream.peer_addr_priv()
    }

    /// The local address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// # magpie::block_on(async {
    /// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    /// let local = client.local_addr()?;
    /// let (_reader, writer) = client.into_split();
    /// assert_eq!(writer.local_addr()?, local);
    /// # Ok::<(), std::io::Error>(()) }).unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<S::Addr> {
        self.stream.local_addr_priv()
    }
}

impl<S: Stream> Drop for OwnedWriteHalf<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // The peer may be gone (a reset connection): nothing to report to.
            let _ = self.stream.shutdown_write_priv();
        }
    }
}

impl<S: Stream> AsRef<S> for ReadHalf<'_, S> {
    fn as_ref(&self) -> &S {
        self.stream
    }
}

impl<S: Stream> AsRef<S> for WriteHalf<'_, S> {
    fn as_ref(&self) -> &S {
        self.stream
    }
}

impl<S: Stream> AsRef<S> for OwnedReadHalf<S> {
    fn as_ref(&self) -> &S {
        &self.stream
    }
}

impl<S: Stream> AsRef<S> for OwnedWriteHalf<S> {
    fn as_ref(&self) -> &S {
        &self.stream
    }
}

impl<S: Stream + fmt::Debug> fmt::Debug for ReadHalf<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReadHalf").field(self.stream).finish()
    }
}

impl<S: Stream + fmt::Debug> fmt::Debug for WriteHalf<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WriteHalf").field(self.stream).finish()
    }
}

impl<S: Stream + fmt::Debug> fmt::Debug for OwnedReadHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnedReadHalf").field(&self.stream).finish()
    }
}

impl<S: Stream + fmt::Debug> fmt::Debug for OwnedWriteHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OwnedWriteHalf").field(&self.stream).finish()
    }
}
