//! UDP: [`UdpSocket`], a mio socket registered with the current runtime's I/O driver.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;

use super::addr::{self, ToSocketAddrs};
use crate::io::poll_evented::PollEvented;
use crate::io::readiness::Direction;

/// A UDP socket, registered with the current runtime's I/O driver.
///
/// Every method takes `&self`: share the socket (in an `Arc`) between tasks that receive
/// and tasks that send; several may wait in each direction at once.
///
/// # Examples
///
/// ```
/// use magpie::net::UdpSocket;
///
/// magpie::block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await?;
///     let b = UdpSocket::bind("127.0.0.1:0").await?;
///     a.send_to(b"ping", b.local_addr()?).await?;
///     let mut buf = [0u8; 16];
///     let (n, from) = b.recv_from(&mut buf).await?;
///     assert_eq!((&buf[..n], from), (&b"ping"[..], a.local_addr()?));
///     Ok::<(), std::io::Error>(())
/// })
/// .unwrap();
/// ```
pub struct UdpSocket {
    io: PollEvented<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds a socket to `addr`: tries each address it resolves to in turn, and returns the
    /// first socket or the last error.
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
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert_ne!(socket.local_addr()?.port(), 0);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        addr::try_each(&addr, |addr| async move {
            UdpSocket::new(mio::net::UdpSocket::bind(addr)?)
        })
        .await
    }

    fn new(socket: mio::net::UdpSocket) -> io::Result<UdpSocket> {
        Ok(UdpSocket {
            io: PollEvented::new(socket)?,
        })
    }

    /// Wraps a socket of the standard library, putting it in non-blocking mode, and registers
    /// it with the current runtime's I/O driver.
    ///
    /// # Errors
    ///
    /// The OS's, or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let addr = std_socket.local_addr().unwrap();
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::from_std(std_socket)?;
    ///     assert_eq!(socket.local_addr()?, addr);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        UdpSocket::new(mio::net::UdpSocket::from_std(socket))
    }

    /// Deregisters the socket and returns it as the standard library's, still in
    /// non-blocking mode.
    ///
    /// # Errors
    ///
    /// The OS's, if it refuses the deregistration (the socket is closed then).
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let std_socket = socket.into_std()?;
    ///     std_socket.set_nonblocking(false)?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        let (socket, result) = self.io.into_inner();
        result?;
        Ok(socket.into())
    }

    /// Connects the socket to `addr`: [`UdpSocket::send`] goes there, and
    /// [`UdpSocket::recv`] takes datagrams from there only. Tries each address `addr`
    /// resolves to in turn.
    ///
    /// # Errors
    ///
    /// The OS's, or the resolver's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.connect(b.local_addr()?).await?;
    ///     assert_eq!(a.peer_addr()?, b.local_addr()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let socket = self.io.get_ref();
        addr::try_each(&addr, |addr| async move { socket.connect(addr) }).await
    }

    /// Sends `buf` as one datagram to the connected peer ([`UdpSocket::connect`]), waiting
    /// until the socket has room. Returns the bytes sent. Cancel safe.
    ///
    /// # Errors
    ///
    /// The OS's (not connected; `ConnectionRefused` after an ICMP error for an earlier
    /// datagram), or an error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.connect(b.local_addr()?).await?;
    ///     assert_eq!(a.send(b"hello").await?, 5);
    ///     let mut buf = [0u8; 16];
    ///     assert_eq!(b.recv(&mut buf).await?, 5);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.io.poll_io(Direction::Write, cx, |s| s.send(buf))).await
    }

    /// Receives one datagram from the connected peer into `buf`, waiting for one; returns
    /// its length. A datagram longer than `buf` is truncated. Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`UdpSocket::send`].
    ///
    /// # Examples
    ///
    /// See [`UdpSocket::send`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     b.connect(a.local_addr()?).await?;
    ///     a.send_to(b"0123456789", b.local_addr()?).await?;
    ///     let mut buf = [0u8; 4];
    ///     assert_eq!(b.recv(&mut buf).await?, 4); // the rest is gone
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.io.poll_io(Direction::Read, cx, |s| s.recv(buf))).await
    }

    /// Sends `buf` as one datagram to `target` (its first resolved address), waiting until
    /// the socket has room. Returns the bytes sent. Cancel safe once the address resolved.
    ///
    /// # Errors
    ///
    /// The OS's, the resolver's (`InvalidInput` if `target` resolves to nothing), or an
    /// error once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UdpSocket`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert_eq!(a.send_to(b"hi", b.local_addr()?).await?, 2);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let target = addr::resolve(&target)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to")
            })?;
        poll_fn(|cx| {
            self.io
                .poll_io(Direction::Write, cx, |s| s.send_to(buf, target))
        })
        .await
    }

    /// Receives one datagram into `buf`, waiting for one; returns its length and sender. A
    /// datagram longer than `buf` is truncated. Cancel safe.
    ///
    /// # Errors
    ///
    /// As [`UdpSocket::send`].
    ///
    /// # Examples
    ///
    /// See [`UdpSocket`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.send_to(b"hi", b.local_addr()?).await?;
    ///     let (n, from) = b.recv_from(&mut [0u8; 8]).await?;
    ///     assert_eq!((n, from), (2, a.local_addr()?));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.io.poll_io(Direction::Read, cx, |s| s.recv_from(buf))).await
    }

    /// Sends to the connected peer now, without waiting: `WouldBlock` if the socket has no
    /// room (or the driver has not reported it writable yet).
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UdpSocket::send`].
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.connect(b.local_addr()?).await?;
    ///     a.writable().await?;
    ///     assert_eq!(a.try_send(b"x")?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Write, |s| s.send(buf))
    }

    /// Receives from the connected peer now, without waiting: `WouldBlock` if no datagram
    /// is there.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UdpSocket::recv`].
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let err = a.try_recv(&mut [0u8; 8]).unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.try_io(Direction::Read, |s| s.recv(buf))
    }

    /// Sends to `target` now, without waiting: `WouldBlock` if the socket has no room.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UdpSocket::send_to`].
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.writable().await?;
    ///     assert_eq!(a.try_send_to(b"x", b.local_addr()?)?, 1);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.io.try_io(Direction::Write, |s| s.send_to(buf, target))
    }

    /// Receives a datagram now, without waiting: `WouldBlock` if none is there.
    ///
    /// # Errors
    ///
    /// `WouldBlock`, or as [`UdpSocket::recv_from`].
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     let b = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.send_to(b"x", b.local_addr()?).await?;
    ///     b.readable().await?;
    ///     let (n, from) = b.try_recv_from(&mut [0u8; 8])?;
    ///     assert_eq!((n, from), (1, a.local_addr()?));
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io.try_io(Direction::Read, |s| s.recv_from(buf))
    }

    /// Waits until a datagram (or an error) is there. Cancel safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UdpSocket::try_recv_from`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.send_to(b"self", a.local_addr()?).await?;
    ///     a.readable().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| self.io.poll_ready(Direction::Read, cx).map_ok(drop)).await
    }

    /// Waits until the socket has room for a datagram. Cancel safe.
    ///
    /// # Errors
    ///
    /// Once the runtime has shut down.
    ///
    /// # Examples
    ///
    /// See [`UdpSocket::try_send`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let a = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     a.writable().await?;
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| self.io.poll_ready(Direction::Write, cx).map_ok(drop)).await
    }

    /// The address this socket is bound to.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert!(socket.local_addr()?.ip().is_loopback());
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The connected peer's address.
    ///
    /// # Errors
    ///
    /// `NotConnected` if the socket is not connected, or the OS's.
    ///
    /// # Examples
    ///
    /// See [`UdpSocket::connect`].
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert!(socket.peer_addr().is_err()); // not connected
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets `SO_BROADCAST`: whether datagrams may go to a broadcast address.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     socket.set_broadcast(true)?;
    ///     assert!(socket.broadcast()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// The `SO_BROADCAST` option; see [`UdpSocket::set_broadcast`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert!(!socket.broadcast()?);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets the `IP_TTL` option: the time-to-live of this socket's packets.
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     socket.set_ttl(42)?;
    ///     assert_eq!(socket.ttl()?, 42);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The `IP_TTL` option; see [`UdpSocket::set_ttl`].
    ///
    /// # Errors
    ///
    /// The OS's.
    ///
    /// # Examples
    ///
    /// ```
    /// magpie::block_on(async {
    ///     let socket = magpie::net::UdpSocket::bind("127.0.0.1:0").await?;
    ///     assert!(socket.ttl()? > 0);
    ///     Ok::<(), std::io::Error>(())
    /// })
    /// .unwrap();
    /// ```
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.io.get_ref().fmt(f)
    }
}

#[cfg(unix)]
mod fd {
    use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};

    use super::UdpSocket;

    impl AsRawFd for UdpSocket {
        fn as_raw_fd(&self) -> RawFd {
            self.io.get_ref().as_raw_fd()
        }
    }

    impl AsFd for UdpSocket {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.io.get_ref().as_fd()
        }
    }
}
