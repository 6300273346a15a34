//! Networking on magpie's workers: TCP, UDP and Unix domain sockets whose operations are
//! `async`, for tasks ([`spawn`](crate::spawn)) and [`block_on`](fn@crate::block_on).
//!
//! The names and signatures are tokio's (`tokio::net`), so that code can move between the
//! two by changing imports: [`TcpListener`], [`TcpStream`] and its halves ([`tcp`]),
//! [`UdpSocket`], [`UnixListener`], [`UnixStream`] and its halves ([`unix`]), and
//! [`ToSocketAddrs`] and [`lookup_host`] for addresses. The read and write operations that
//! tokio puts in `AsyncReadExt`/`AsyncWriteExt` (`read`, `read_exact`, `write`, `write_all`,
//! `flush`, `shutdown`) are inherent methods here, so no extension trait is needed; with the
//! `tokio-io` or `futures-io` feature, the streams and halves also implement the ecosystem's
//! `AsyncRead`/`AsyncWrite`, for codecs, TLS and HTTP libraries.
//!
//! # A tour: an echo server
//!
//! ```
//! use magpie::net::{TcpListener, TcpStream};
//!
//! let rt = magpie::Runtime::builder().worker_threads(2).build()?;
//! rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!
//!     // The server: a task per connection, echoing until the client shuts its side down.
//!     let server = magpie::spawn(async move {
//!         for _ in 0..3 {
//!             let (mut socket, _peer) = listener.accept().await?;
//!             magpie::spawn(async move {
//!                 let mut buf = [0u8; 1024];
//!                 loop {
//!                     match socket.read(&mut buf).await {
//!                         Ok(0) | Err(_) => return, // end of stream, or a reset
//!                         Ok(n) => {
//!                             if socket.write_all(&buf[..n]).await.is_err() {
//!                                 return;
//!                             }
//!                         }
//!                     }
//!                 }
//!             });
//!         }
//!         Ok::<(), std::io::Error>(())
//!     });
//!
//!     // Three clients at once.
//!     let clients: Vec<_> = (0..3u8)
//!         .map(|i| {
//!             magpie::spawn(async move {
//!                 let mut stream = TcpStream::connect(addr).await?;
//!                 let message = [b'a' + i; 100];
//!                 stream.write_all(&message).await?;
//!                 stream.shutdown().await?; // the server reads end of stream, after the data
//!                 let mut echoed = Vec::new();
//!                 let mut buf = [0u8; 64];
//!                 loop {
//!                     match stream.read(&mut buf).await? {
//!                         0 => break,
//!                         n => echoed.extend_from_slice(&buf[..n]),
//!                     }
//!                 }
//!                 assert_eq!(echoed, message);
//!                 Ok::<(), std::io::Error>(())
//!             })
//!         })
//!         .collect();
//!     for client in clients {
//!         client.await.unwrap()?;
//!     }
//!     server.await.unwrap()
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How it works
//!
//! Each socket is non-blocking and registered with the I/O driver of the current runtime
//! (the worker's, the one whose `block_on` runs on this thread, or else the global runtime)
//! when it is created, and deregistered when it is dropped. An operation tries the system
//! call when the driver has reported readiness; on `WouldBlock` it tells the driver so and
//! the task waits, its waker stored with the socket, until the driver reports readiness
//! again. The workers turn the driver (`epoll`, `kqueue`) when they run out of tasks and
//! between tasks; the driver wakes the waiting tasks, which run on the workers like any
//! others.
//!
//! * **Cooperative budget.** Every operation that completes spends one unit of the task's
//!   budget (128 per poll, as the other magpie futures), so a task reading a socket that is
//!   always ready still yields to the other tasks of its worker now and then.
//! * **Many waiters.** Any number of tasks may wait on one socket at once, in either
//!   direction: a task may read while another writes (the halves,
//!   [`TcpStream::into_split`]), and several may accept on one listener or receive on one
//!   UDP socket shared in an `Arc`. Readiness wakes every task waiting in its direction;
//!   one gets the data, the others find `WouldBlock` and wait again.
//! * **Cancellation.** `read`, `write`, `accept`, `recv`, `send` and the readiness waits are
//!   cancel safe: dropping the future loses no data. `read_exact` and `write_all` are not.
//! * **Shutdown.** When the runtime that a socket is registered with shuts down, every
//!   operation on the socket returns an error from then on.
//!
//! Sockets are not tied to the task that made them: they may move to another task, even to
//! another runtime's, and keep using the driver they were registered with.

mod addr;
mod io_traits;
pub mod split;
pub mod tcp;
mod udp;
#[cfg(unix)]
pub mod unix;

pub use addr::{lookup_host, ToSocketAddrs};
pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixListener, UnixStream};
