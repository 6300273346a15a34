//! TCP: [`TcpListener`], [`TcpStream`], and the names of the stream's halves
//! ([`ReadHalf`], [`WriteHalf`], [`OwnedReadHalf`], [`OwnedWriteHalf`]) and of
//! [`ReuniteError`], as in `tokio::net::tcp`.
//!
//! (Inside magpie: both types wrap one mio socket registered with the current runtime's
//! I/O driver, `io/poll_evented.rs`; every operation is that file's readiness loop around a
//! different system call.)
//!
//! # Examples
//!
//! ```
//! use magpie::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
//! use magpie::net::{TcpListener, TcpStream};
//!
//! magpie::block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let client = TcpStream::connect(listener.local_addr()?).await?;
//!     let (reader, writer): (OwnedReadHalf, OwnedWriteHalf) = client.into_split();
//!     # drop((reader, writer));
//!     Ok::<(), std::io::Error>(())
//! })
//! .unwrap();
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::task::{ready, Context, Poll};

use super::addr::{self, ToSocketAddrs};
use super::split::{self, sealed::Stream};
use crate::io::poll_evented::PollEvented;
use crate::io::readiness::Direction;

/// The read half of a [`TcpStream`], borrowed: [`TcpStream::split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// let (reader, _writer): (magpie::net::tcp::ReadHalf<'_>, _) = client.split();
/// # drop(reader);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type ReadHalf<'a> = split::ReadHalf<'a, TcpStream>;

/// The write half of a [`TcpStream`], borrowed: [`TcpStream::split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// let (_reader, writer): (_, magpie::net::tcp::WriteHalf<'_>) = client.split();
/// # drop(writer);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type WriteHalf<'a> = split::WriteHalf<'a, TcpStream>;

/// The read half of a [`TcpStream`], owned: [`TcpStream::into_split`].
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// let (reader, _writer): (magpie::net::tcp::OwnedReadHalf, _) = client.into_split();
/// # drop(reader);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type OwnedReadHalf = split::OwnedReadHalf<TcpStream>;

/// The write half of a [`TcpStream`], owned: [`TcpStream::into_split`]. Dropping it shuts
/// the write side down.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// let (_reader, writer): (_, magpie::net::tcp::OwnedWriteHalf) = client.into_split();
/// # drop(writer);
/// # Ok::<(), std::io::Error>(()) }).unwrap();
/// ```
pub type OwnedWriteHalf = split::OwnedWriteHalf<TcpStream>;

/// The error of [`OwnedReadHalf::reunite`](split::OwnedReadHalf::reunite) with another
/// stream's half: both halves, handed back.
///
/// # Examples
///
/// ```
/// # magpie::block_on(async {
/// # let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let a = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// # let b = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
/// let (a_read, _) = a.into_split();
/// let (_, b_write) = b.into_split();
/// let magpie::net::tcp::ReuniteError(a_read, b_write) = a_read.reunite(b_write).unwrap_err();
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

/// A TCP socket listening for connections, registered with the current runtime's I/O driver.
///
/// # Examples
///
/// ```
/// use magpie::net::{TcpListener, TcpStream};
///
/// magpie::block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let client = TcpStream::connect(listener.local_addr()?).await?;
///     let (server, peer) = listener.accept().await?;
///     assert_eq!(peer, client.local_addr()?);
///     assert_eq!(server.peer_addr()?, client.local_addr()?);
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct TcpListener {
    io: PollEvented<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds to `addr` and listens (backlog 1024, `SO_REUSEADDR` on Unix, as mio). Tries each
    /// address `addr` resolves to in turn, and returns the first listener or the last error.
    ///
    /// Registers with the current runtime's I/O driver: the worker's runtime, the runtime
    /// whose `block_on` runs on this thread, or else the global one.
    ///
    /// # Errors
    ///
    /// The OS's (the address is in use, or not local), the resolver's, or an error once the
    /// runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     assert_ne!(listener.local_addr()?.port(), 0);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        addr::try_each(&addr, |addr| async move {
            TcpListener::new(mio::net::TcpListener::bind(addr)?)
        })
        .await
    }

    fn new(listener: mio::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            io: PollEvented::with_interest(listener, mio::Interest::READABLE)?,
        })
    }

    /// Waits for a connection and accepts it: the connected stream and the peer's address.
    /// Cancel safe: a connection is never accepted and then lost.
    ///
    /// # Errors
    ///
    /// The OS's. Some are about this one connection (`ECONNABORTED`) and some are passing
    /// (`EMFILE`, `ENFILE`: the process or the system is out of file descriptors); the
    /// connection stays in the backlog and the next `accept` tries it again at once. A loop
    /// that accepts should therefore pause a little after such an error rather than retry
    /// at once (until descriptors are freed, every retry fails the same way).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let addr = listener.local_addr()?;
    ///     let client = magpie::spawn(async move { magpie::net::TcpStream::connect(addr).await });
    ///     let (_server, peer) = listener.accept().await?;
    ///     assert_eq!(peer, client.await.unwrap()?.local_addr()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection: the building block of [`TcpListener::accept`].
    ///
    /// # Errors
    ///
    /// As [`TcpListener::accept`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let _client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (_server, _peer) = poll_fn(|cx| listener.poll_accept(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (stream, peer) =
            ready!(self
                .io
                .poll_io(Direction::Read, cx, mio::net::TcpListener::accept))?;
        // A failed registration drops (closes) the accepted stream: the peer sees a reset.
        Poll::Ready(TcpStream::new(stream).map(|stream| (stream, peer)))
    }

    /// The address this listener is bound to.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     assert!(listener.local_addr()?.ip().is_loopback());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Wraps a listener bound with the standard library (or `socket2`, for options magpie
    /// does not offer), putting it in non-blocking mode, and registers it with the current
    /// runtime's I/O driver.
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = std_listener.local_addr().unwrap();
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::from_std(std_listener)?;
    ///     assert_eq!(listener.local_addr()?, addr);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        TcpListener::new(mio::net::TcpListener::from_std(listener))
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
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let std_listener = listener.into_std()?;
    ///     std_listener.set_nonblocking(false)?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let (listener, result) = self.io.into_inner();
        result?;
        Ok(listener.into())
    }

    /// Sets the `IP_TTL` option: the time-to-live of the packets of accepted connections.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     listener.set_ttl(42)?;
    ///     assert_eq!(listener.ttl()?, 42);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The `IP_TTL` option; see [`TcpListener::set_ttl`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     assert!(listener.ttl()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.get_ref().fmt(f)
    }
}

/// A TCP connection, registered with the current runtime's I/O driver.
///
/// Reading and writing are independent: one task may read while another writes (through
/// [`TcpStream::split`] or [`TcpStream::into_split`]), each side waking only its own task.
/// Dropping the stream closes the connection; pending operations of other tasks on it cannot
/// exist (they borrow it).
///
/// With the `tokio-io` feature, `TcpStream` implements `tokio::io::AsyncRead` and
/// `AsyncWrite`; with `futures-io`, the `futures-io` traits.
///
/// # Examples
///
/// ```
/// use magpie::net::{TcpListener, TcpStream};
///
/// magpie::block_on(async {
///     let listener = TcpListener::bind("127.0.0.1:0").await?;
///     let mut client = TcpStream::connect(listener.local_addr()?).await?;
///     let (mut server, _) = listener.accept().await?;
///     client.write_all(b"ping").await?;
///     let mut buf = [0u8; 4];
///     server.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ping");
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct TcpStream {
    io: PollEvented<mio::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr`: tries each address it resolves to in turn, and returns the first
    /// connection or the last error. Each attempt is a non-blocking `connect`; the task waits
    /// until the socket is writable and then reads the attempt's real outcome.
    ///
    /// # Errors
    ///
    /// The OS's (`ConnectionRefused`, a timeout of the OS's own), the resolver's, or an error
    /// once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     assert_eq!(stream.peer_addr()?, listener.local_addr()?);
    ///     // Nobody listens on the port once the listener is gone.
    ///     let addr = listener.local_addr()?;
    ///     drop(listener);
    ///     let refused = magpie::net::TcpStream::connect(addr).await.unwrap_err();
    ///     assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        addr::try_each(&addr, TcpStream::connect_addr).await
    }

    async fn connect_addr(addr: SocketAddr) -> io::Result<TcpStream> {
        let stream = TcpStream::new(mio::net::TcpStream::connect(addr)?)?;
        poll_fn(|cx| stream.poll_connected(cx)).await?;
        Ok(stream)
    }

    /// Waits for a non-blocking `connect` to finish (mio's recipe: writable, then
    /// `take_error`, then `peer_addr`).
    fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let event = ready!(self.io.poll_ready(Direction::Write, cx))?;
            let stream = self.io.get_ref();
            if let Some(e) = stream.take_error()? {
                return Poll::Ready(Err(e));
            }
            match stream.peer_addr() {
                Ok(_) => return Poll::Ready(Ok(())),
                // Still connecting: a spurious wakeup. Closed bits are final, though: waiting
                // on them would spin, so a closed, unconnected socket is the error.
                Err(e)
                    if e.kind() == io::ErrorKind::NotConnected
                        && !event.ready.is_write_closed() =>
                {
                    self.io.clear_readiness(event);
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn new(stream: mio::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
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
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let std_stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    /// magpie::block_on(async {
    ///     let stream = magpie::net::TcpStream::from_std(std_stream)?;
    ///     assert_eq!(stream.peer_addr()?, listener.local_addr()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        TcpStream::new(mio::net::TcpStream::from_std(stream))
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
    /// use std::io::Write;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let stream = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let mut std_stream = stream.into_std()?;
    ///     std_stream.set_nonblocking(false)?;
    ///     std_stream.write_all(b"blocking now")?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let (stream, result) = self.io.into_inner();
        result?;
        Ok(stream.into())
    }

    /// The local address of the connection.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     assert_eq!(client.local_addr()?, server.peer_addr()?);
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
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     assert_eq!(client.peer_addr()?, listener.local_addr()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `TCP_NODELAY`: with it, small writes go out at once instead of waiting to be
    /// coalesced (Nagle's algorithm).
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     client.set_nodelay(true)?;
    ///     assert!(client.nodelay()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(nodelay)
    }

    /// The `TCP_NODELAY` option; see [`TcpStream::set_nodelay`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     assert!(!client.nodelay()?); // off by default
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Sets the `IP_TTL` option: the time-to-live of this connection's packets.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     client.set_ttl(42)?;
    ///     assert_eq!(client.ttl()?, 42);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The `IP_TTL` option; see [`TcpStream::set_ttl`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     assert!(client.ttl()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Reads into `buf`, waiting until at least one byte is there, and returns how many were
    /// read: `Ok(0)` at end of stream (the peer shut its write side down or closed), or for
    /// an empty `buf`. Cancel safe: if the future is dropped before it completes, no byte was
    /// read.
    ///
    /// # Errors
    ///
    /// The OS's (`ConnectionReset`), or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     client.write_all(b"hello").await?;
    ///     drop(client);
    ///     let mut received = Vec::new();
    ///     let mut buf = [0u8; 2];
    ///     loop {
    ///         match server.read(&mut buf).await? {
    ///             0 => break,
    ///             n => received.extend_from_slice(&buf[..n]),
    ///         }
    ///     }
    ///     assert_eq!(received, b"hello");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        split::read(&*self, buf).await
    }

    /// Reads exactly `buf.len()` bytes. Not cancel safe: bytes read before a cancellation
    /// are lost.
    ///
    /// # Errors
    ///
    /// `UnexpectedEof` if the stream ends first, or as [`TcpStream::read`].
    ///
    /// # Examples
    ///
    /// See [`TcpStream`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     client.write_all(b"ab").await?;
    ///     drop(client);
    ///     let err = server.read_exact(&mut [0u8; 3]).await.unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        split::read_exact(&*self, buf).await
    }

    /// Reads into `buf` without taking the bytes off the stream: the next read sees them
    /// again. Waits until at least one byte is there; `Ok(0)` at end of stream.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     client.write_all(b"x").await?;
    ///     let mut buf = [0u8; 1];
    ///     assert_eq!(server.peek(&mut buf).await?, 1);
    ///     assert_eq!(server.read(&mut buf).await?, 1); // still there
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        poll_fn(|cx| self.io.poll_io(Direction::Read, cx, |s| s.peek(buf))).await
    }

    /// Writes some of `buf`, waiting until the stream takes at least one byte, and returns
    /// how many it took. Cancel safe: if the future is dropped before it completes, no byte
    /// was written.
    ///
    /// # Errors
    ///
    /// The OS's (`ConnectionReset`, `BrokenPipe` after a shutdown), or an error once the
    /// runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let n = client.write(b"hello").await?;
    ///     assert!(n > 0 && n <= 5);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        split::write(&*self, buf).await
    }

    /// Writes all of `buf`. Not cancel safe: how much was written before a cancellation is
    /// unknown.
    ///
    /// # Errors
    ///
    /// As [`TcpStream::write`].
    ///
    /// # Examples
    ///
    /// See [`TcpStream`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     client.write_all(&[7u8; 10_000]).await?;
    ///     let mut buf = vec![0u8; 10_000];
    ///     server.read_exact(&mut buf).await?;
    ///     assert!(buf.iter().all(|&b| b == 7));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        split::write_all(&*self, buf).await
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
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     client.write_all(b"x").await?;
    ///     client.flush().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Shuts the write side down (`shutdown(Write)`): the peer reads end of stream after the
    /// data already sent; this side can still read. As tokio's `AsyncWriteExt::shutdown`.
    ///
    /// # Errors
    ///
    /// The OS's (`NotConnected` if the peer is already gone).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     client.write_all(b"last words").await?;
    ///     client.shutdown().await?;
    ///     let mut buf = [0u8; 10];
    ///     server.read_exact(&mut buf).await?;
    ///     assert_eq!(server.read(&mut buf).await?, 0); // end of stream
    ///     server.write_all(b"reply").await?; // the other direction is still open
    ///     client.read_exact(&mut [0u8; 5]).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.shutdown_write_priv()
    }

    /// Waits until the stream is readable (data, end of stream, or an error is there). Cancel
    /// safe. Pair it with [`TcpStream::try_read`], which says `WouldBlock` if the readiness
    /// was spurious.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"hello").await?;
    ///     let mut buf = [0u8; 5];
    ///     let mut got = 0;
    ///     while got < 5 {
    ///         server.readable().await?;
    ///         match server.try_read(&mut buf[got..]) {
    ///             Ok(n) => got += n,
    ///             Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///             Err(e) => return Err(e),
    ///         }
    ///     }
    ///     assert_eq!(&buf, b"hello");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        split::readable(self).await
    }

    /// Waits until the stream is writable (or its write side closed, or it has an error).
    /// Cancel safe. Pair it with [`TcpStream::try_write`].
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     client.writable().await?;
    ///     assert_eq!(client.try_write(b"x")?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        split::writable(self).await
    }

    /// Polls for read readiness: the building block of [`TcpStream::readable`].
    ///
    /// # Errors
    ///
    /// As [`TcpStream::readable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"x").await?;
    ///     poll_fn(|cx| server.poll_read_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready_priv(cx)
    }

    /// Polls for write readiness: the building block of [`TcpStream::writable`].
    ///
    /// # Errors
    ///
    /// As [`TcpStream::writable`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     poll_fn(|cx| client.poll_write_ready(cx)).await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_ready_priv(cx)
    }

    /// Reads what is there now, without waiting: `WouldBlock` if nothing is (or the driver
    /// has not reported readiness yet). `Ok(0)` at end of stream.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`TcpStream::read`].
    ///
    /// # Examples
    ///
    /// See [`TcpStream::readable`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let _client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     let err = server.try_read(&mut [0u8; 8]).unwrap_err(); // nothing was sent
    ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_read_priv(buf)
    }

    /// Writes what the stream takes now, without waiting: `WouldBlock` if it takes nothing
    /// (or the driver has not reported readiness yet).
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`TcpStream::write`].
    ///
    /// # Examples
    ///
    /// See [`TcpStream::writable`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     client.writable().await?;
    ///     assert_eq!(client.try_write(b"hello")?, 5);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_write_priv(buf)
    }

    /// Polls a read into `buf`: the building block of [`TcpStream::read`] (and of the
    /// `AsyncRead` implementations of the I/O features).
    ///
    /// # Errors
    ///
    /// As [`TcpStream::read`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (server, _) = listener.accept().await?;
    ///     client.write_all(b"x").await?;
    ///     let mut buf = [0u8; 8];
    ///     assert_eq!(poll_fn(|cx| server.poll_read(cx, &mut buf)).await?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.poll_read_priv(cx, buf)
    }

    /// Polls a write of `buf`: the building block of [`TcpStream::write`].
    ///
    /// # Errors
    ///
    /// As [`TcpStream::write`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    ///
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     assert_eq!(poll_fn(|cx| client.poll_write(cx, b"x")).await?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    /// Splits the stream into a read half and a write half that borrow it, so one task can
    /// read and write at once (in a `join` of the two directions, say). No allocation.
    ///
    /// With `futures::io::AsyncReadExt` in scope (feature `futures-io`), `stream.split()`
    /// means that trait's `split`, which takes the stream by value; write
    /// `TcpStream::split(&mut stream)` for this one.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let mut client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     let (mut reader, mut writer) = client.split();
    ///     writer.write_all(b"x").await?;
    ///     server.write_all(b"y").await?;
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

    /// Splits the stream into owned halves that may move to different tasks; see
    /// [`OwnedReadHalf`] and [`OwnedWriteHalf`] (dropping which shuts the write side down).
    /// One allocation (an `Arc`).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let listener = magpie::net::TcpListener::bind("127.0.0.1:0").await?;
    ///     let client = magpie::net::TcpStream::connect(listener.local_addr()?).await?;
    ///     let (mut server, _) = listener.accept().await?;
    ///     let (mut reader, mut writer) = client.into_split();
    ///     let writing = magpie::spawn(async move { writer.write_all(b"hi").await });
    ///     server.write_all(b"yo").await?;
    ///     let mut buf = [0u8; 2];
    ///     reader.read_exact(&mut buf).await?;
    ///     assert_eq!(&buf, b"yo");
    ///     writing.await.unwrap()?;
    ///     server.read_exact(&mut buf).await?;
    ///     assert_eq!(&buf, b"hi");
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split::into_split(self)
    }
}

impl Stream for TcpStream {
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

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.get_ref().fmt(f)
    }
}

#[cfg(unix)]
mod fd {
    use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};

    use super::{TcpListener, TcpStream};

    impl AsRawFd for TcpListener {
        fn as_raw_fd(&self) -> RawFd {
            self.io.get_ref().as_raw_fd()
        }
    }

    impl AsFd for TcpListener {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.io.get_ref().as_fd()
        }
    }

    impl AsRawFd for TcpStream {
        fn as_raw_fd(&self) -> RawFd {
            self.io.get_ref().as_raw_fd()
        }
    }

    impl AsFd for TcpStream {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.io.get_ref().as_fd()
        }
    }
}
