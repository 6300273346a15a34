//! The I/O surface other than plain TCP echo, against adversarial safe programs: `AsyncFd`
//! on descriptors epoll refuses, on dup'ed or doubly wrapped descriptors, on descriptors
//! closed behind its back; guards held across awaits or dropped without `clear_ready`;
//! `try_io` with both interests; `reunite` of mismatched halves; shutdown twice and reads
//! after a reset; slab slots reused by thousands of short-lived sources while readiness is
//! in flight; sockets outliving their runtime; odd `lookup_host` inputs; UDP datagrams of
//! zero and maximal length; Unix sockets with long, abstract and unlinked paths; and the
//! optional tokio/futures-io trait impls on empty buffers.
//!
//! Every wait that could hang is bounded by a `Watchdog` or by a generous
//! `magpie::time::timeout` used only as a hang guard.

// `magpie::net` and `AsyncFd` are not built under loom or shuttle (they model no OS).
#![cfg(all(target_os = "linux", not(any(loom, shuttle))))]

mod common;
mod net_support;

use std::fs::File;
use std::future::Future;
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::io::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Watchdog};
use magpie::io::{AsyncFd, Interest};
use magpie::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use net_support::{io_sources, pattern, poll_once, runtime, NoteWaiting};

/// A hang guard for awaits that must end within milliseconds: not a timing assertion.
const HANG: Duration = Duration::from_secs(30);

/// Awaits `future`, failing the test (with `what`) if it has not finished after [`HANG`].
async fn bounded<F: Future>(what: &str, future: F) -> F::Output {
    match magpie::time::timeout(HANG, future).await {
        Ok(out) => out,
        Err(_) => panic!("hung: {what}"),
    }
}

/// A non-blocking pipe: (read end, write end).
fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", io::Error::last_os_error());
    // SAFETY: `pipe2` succeeded: both descriptors are open and owned by nobody else.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

/// A non-blocking std socket pair.
fn std_pair() -> (
    std::os::unix::net::UnixStream,
    std::os::unix::net::UnixStream,
) {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

/// A connected TCP pair on loopback, registered with the current runtime.
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

// ---------------------------------------------------------------------------------------
// AsyncFd
// ---------------------------------------------------------------------------------------

/// `AsyncFd::try_io` with `READABLE | WRITABLE` must run the operation when the descriptor
/// is ready in *either* direction (as `async_io` with both interests does, and as tokio's
/// `AsyncFd::try_io` does). Here the socket is writable (a `writable()` wait just
/// returned, and the readiness was retained) and has nothing to read: a write through
/// `try_io(READABLE | WRITABLE, ..)` must go through, not report `WouldBlock`.
#[test]
fn async_fd_try_io_with_both_interests_runs_when_only_writable() {
    let rt = runtime(1);
    let (mut ours, theirs) = std_pair();
    let result = rt.block_on(async move {
        let fd = AsyncFd::new(theirs).unwrap();
        bounded("writable", fd.writable())
            .await
            .unwrap()
            .retain_ready();
        // The same readiness answers a write-only try_io...
        let n = fd
            .try_io(Interest::WRITABLE, |s| (&*s).write(b"a"))
            .expect("writable readiness was retained");
        assert_eq!(n, 1);
        // ...and must answer a try_io for either direction.
        fd.try_io(Interest::READABLE | Interest::WRITABLE, |s| {
            (&*s).write(b"b")
        })
    });
    let mut buf = [0u8; 2];
    let got = ours.read(&mut buf).unwrap_or(0);
    assert_eq!(
        result.as_ref().map_err(io::Error::kind).ok(),
        Some(&1),
        "try_io(READABLE | WRITABLE) on a writable descriptor: {result:?} (peer got {:?})",
        &buf[..got]
    );
}

/// Descriptors epoll cannot take: a directory, `/dev/null`, a descriptor number that is
/// not open, `-1`. Each is an `Err` (not a panic), and nothing stays registered.
#[test]
fn async_fd_refuses_descriptors_epoll_refuses() {
    let rt = runtime(1);
    rt.block_on(async {
        let dir = File::open("/").unwrap();
        let err = AsyncFd::new(dir).expect_err("registered a directory");
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");

        let null = File::open("/dev/null").unwrap();
        let err = AsyncFd::with_interest(null, Interest::READABLE).expect_err("/dev/null");
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");

        // A number that names no open descriptor. Not one just opened and closed: the tests
        // of this file run in parallel, and another one's next descriptor took that number
        // in a CI run, so the registration succeeded. The kernel hands out no descriptor at
        // or above `fs.nr_open`, whose ceiling is below `RawFd::MAX`.
        let closed: RawFd = RawFd::MAX;
        let err = AsyncFd::new(closed).expect_err("registered a closed descriptor");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");

        let err = AsyncFd::new(-1 as RawFd).expect_err("registered -1");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    });
    assert_eq!(io_sources(&rt), 0, "a refused registration kept its slot");
    // The driver still works after the refusals.
    rt.block_on(async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        bounded("round trip", a.write_all(b"ok")).await.unwrap();
        let mut buf = [0u8; 2];
        bounded("round trip", b.read_exact(&mut buf)).await.unwrap();
        assert_eq!(&buf, b"ok");
    });
}

/// Two `AsyncFd`s on the same descriptor number (`AsyncFd<RawFd>`, safe): the second is
/// refused (`EEXIST`), the first keeps working, and the refused one did not deregister the
/// first on its way out.
#[test]
fn async_fd_twice_on_one_descriptor() {
    let rt = runtime(1);
    let (read_end, mut write_end) = pipe();
    let raw = read_end.as_raw_fd();
    rt.block_on(async {
        let first = AsyncFd::with_interest(raw, Interest::READABLE).unwrap();
        let err = AsyncFd::with_interest(raw, Interest::READABLE)
            .expect_err("the same descriptor registered twice");
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST), "{err}");
        assert_eq!(io_sources(&rt), 1);
        write_end.write_all(b"x").unwrap();
        let mut buf = [0u8; 1];
        let n = bounded(
            "the first AsyncFd after a refused second one",
            first.async_io(Interest::READABLE, |_| (&read_end).read(&mut buf)),
        )
        .await
        .unwrap();
        assert_eq!(n, 1);
        drop(first);
    });
    assert_eq!(io_sources(&rt), 0);
}

/// Two `AsyncFd`s on dup'ed descriptors of one pipe end (epoll keys on the pair, so both
/// register): both see readiness; one drains, the other's read says `WouldBlock` and its
/// wait then waits; new data wakes both; dropping one leaves the other registered and
/// working.
#[test]
fn async_fd_on_dup_descriptors() {
    let rt = runtime(2);
    let dog = Watchdog::start("async_fd_on_dup_descriptors");
    dog.phase("dup", &rt);
    let (read_end, mut write_end) = pipe();
    let dup = read_end.try_clone().unwrap();
    rt.block_on(async {
        let a = AsyncFd::with_interest(read_end, Interest::READABLE).unwrap();
        let b = AsyncFd::with_interest(dup, Interest::READABLE).unwrap();
        assert_eq!(io_sources(&rt), 2);
        write_end.write_all(b"12345").unwrap();
        let mut buf = [0u8; 16];
        let n = bounded(
            "a reads",
            a.async_io(Interest::READABLE, |f| (&*f).read(&mut buf)),
        )
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"12345");
        // b saw the same edge; its read finds nothing now, and it then waits.
        let mut guard = bounded("b's readiness", b.readable()).await.unwrap();
        assert!(guard.try_io(|f| f.get_ref().read(&mut buf)).is_err());
        let _ = guard;
        let mut wait = Box::pin(b.readable());
        assert!(
            poll_once(wait.as_mut()).is_pending(),
            "b stayed ready after WouldBlock"
        );
        write_end.write_all(b"678").unwrap();
        let guard = bounded("b woken by new data", wait).await.unwrap();
        let _ = guard;
        drop(a);
        assert_eq!(io_sources(&rt), 1);
        let n = bounded(
            "b after a's drop",
            b.async_io(Interest::READABLE, |f| (&*f).read(&mut buf)),
        )
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"678");
        write_end.write_all(b"9").unwrap();
        let n = bounded(
            "b after a's drop, new data",
            b.async_io(Interest::READABLE, |f| (&*f).read(&mut buf)),
        )
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"9");
    });
    assert_eq!(io_sources(&rt), 0);
}

/// An `AsyncFd<RawFd>` whose descriptor was closed behind its back (the `File` owning it
/// dropped): dropping the `AsyncFd` (its deregistration fails) neither panics nor leaks
/// the slot, and its waits end or wait, but never panic.
#[test]
fn async_fd_whose_descriptor_was_closed_behind_its_back() {
    let rt = runtime(1);
    let (read_end, write_end) = pipe();
    let raw = read_end.as_raw_fd();
    rt.block_on(async {
        let fd = AsyncFd::with_interest(raw, Interest::READABLE).unwrap();
        drop(read_end); // closed: epoll drops it from its set
        drop(write_end);
        // Not ready (no event can come any more): try_io says WouldBlock.
        let err = fd.try_io(Interest::READABLE, |_| Ok(())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        drop(fd);
    });
    assert_eq!(
        io_sources(&rt),
        0,
        "a failed deregistration leaked the slot"
    );
    // into_inner on such an AsyncFd also hands the value back.
    let (read_end, _write_end) = pipe();
    let raw = read_end.as_raw_fd();
    let fd = rt.block_on(async { AsyncFd::new(raw) }).unwrap();
    drop(read_end);
    assert_eq!(fd.into_inner(), raw);
    assert_eq!(io_sources(&rt), 0);
}

/// A ready guard held across other awaits, then dropped without `clear_ready`: the
/// readiness stays (the next wait returns at once); a guard whose `clear_ready` comes after
/// a *later* driver turn set readiness again keeps that newer readiness.
#[test]
fn guards_held_across_awaits() {
    let rt = runtime(2);
    let dog = Watchdog::start("guards_held_across_awaits");
    dog.phase("guards", &rt);
    let (read_end, mut write_end) = pipe();
    rt.block_on(async {
        let fd = AsyncFd::with_interest(read_end, Interest::READABLE).unwrap();
        write_end.write_all(b"a").unwrap();
        let guard = bounded("readable", fd.readable()).await.unwrap();
        // Across awaits: a timer, a yield, a round trip on another source.
        magpie::time::sleep(Duration::from_millis(1)).await;
        magpie::task::yield_now().await;
        let (mut x, mut y) = UnixStream::pair().unwrap();
        x.write_all(b"z").await.unwrap();
        let mut z = [0u8; 1];
        bounded("other source", y.read_exact(&mut z)).await.unwrap();
        let _ = guard; // not cleared
        let mut wait = Box::pin(fd.readable());
        let mut stale = match poll_once(wait.as_mut()) {
            std::task::Poll::Ready(guard) => guard.unwrap(),
            std::task::Poll::Pending => panic!("a dropped guard lost the readiness"),
        };
        // Drain with the inner value directly (so the WouldBlock is ours to report).
        let mut buf = [0u8; 8];
        assert_eq!(fd.get_ref().read(&mut buf).unwrap(), 1);
        // New data arrives, and (likely) a later driver turn records it before the stale
        // guard clears: a round trip on a sibling source makes the driver turn at least
        // once more. Whether or not that turn saw the pipe's edge, the outcome below must
        // be the same.
        write_end.write_all(b"b").unwrap();
        let (mut p, mut q) = UnixStream::pair().unwrap();
        p.write_all(b"t").await.unwrap();
        bounded("sibling", q.read_exact(&mut z)).await.unwrap();
        stale.clear_ready();
        drop(wait);
        // Either the clear was refused (newer tick) or it cleared and the data is still
        // reported on the next edge: in both cases the byte must be read without hanging.
        let n = bounded(
            "data written after a stale guard's clear",
            fd.async_io(Interest::READABLE, |f| (&*f).read(&mut buf)),
        )
        .await
        .unwrap();
        assert_eq!(&buf[..n], b"b");
    });
}

/// `async_io` with both interests on a socket that is writable but has nothing to read
/// finishes (the write side is ready); with the peer's data it reads.
#[test]
fn async_io_with_both_interests() {
    let rt = runtime(1);
    let (mut ours, theirs) = std_pair();
    rt.block_on(async move {
        let fd = AsyncFd::new(theirs).unwrap();
        let n = bounded(
            "async_io(both) on a writable socket",
            fd.async_io(Interest::READABLE | Interest::WRITABLE, |s| {
                (&*s).write(b"w")
            }),
        )
        .await
        .unwrap();
        assert_eq!(n, 1);
        let mut one = [0u8; 1];
        ours.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"w");
    });
}

/// An `AsyncFd` (and a UDP socket and a Unix listener) outliving its runtime: every wait
/// and every `try_*` is an error (not a hang, not a panic), also when polled from another
/// runtime or a plain `block_on`, and `into_inner` hands the descriptor back.
#[test]
fn sources_outliving_their_runtime() {
    let rt = runtime(1);
    let dir = std::env::temp_dir().join(format!("magpie-io-adv-{}-outlive", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let (read_end, mut write_end) = pipe();
    let (fd, udp, listener) = rt.block_on(async {
        (
            AsyncFd::with_interest(read_end, Interest::READABLE).unwrap(),
            UdpSocket::bind("127.0.0.1:0").await.unwrap(),
            UnixListener::bind(&dir).unwrap(),
        )
    });
    drop(rt);
    write_end.write_all(b"data").unwrap();
    let other = runtime(1);
    let dog = Watchdog::start("sources_outliving_their_runtime");
    dog.phase("orphans on another runtime", &other);
    other.block_on(async {
        assert!(fd.readable().await.is_err());
        assert!(fd
            .async_io(Interest::READABLE, |f| (&*f).read(&mut [0u8; 4]))
            .await
            .is_err());
        let err = fd.try_io(Interest::READABLE, |_| Ok(())).unwrap_err();
        assert_ne!(err.kind(), ErrorKind::WouldBlock, "{err}");
        assert!(udp.recv_from(&mut [0u8; 4]).await.is_err());
        assert!(udp.send_to(b"x", "127.0.0.1:9").await.is_err());
        assert!(udp.readable().await.is_err());
        assert!(listener.accept().await.is_err());
    });
    drop(dog);
    // And from a plain thread's block_on (the global runtime).
    let fd = std::thread::spawn(move || {
        assert!(magpie::block_on(fd.readable()).is_err());
        fd
    })
    .join()
    .unwrap();
    let mut file = fd.into_inner();
    let mut buf = [0u8; 4];
    file.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"data");
    drop((udp, listener));
    let _ = std::fs::remove_file(&dir);
}

// ---------------------------------------------------------------------------------------
// Halves
// ---------------------------------------------------------------------------------------

/// `reunite` with halves of two different streams is an error that hands both halves
/// back, working: each still reads and writes its own stream, and the right pairs then
/// reunite. For TCP and Unix.
#[test]
fn reunite_mismatched_halves() {
    let rt = runtime(2);
    let dog = Watchdog::start("reunite_mismatched_halves");
    dog.phase("unix", &rt);
    rt.block_on(async {
        let (a, mut a_peer) = UnixStream::pair().unwrap();
        let (b, mut b_peer) = UnixStream::pair().unwrap();
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let magpie::net::unix::ReuniteError(mut a_read, mut b_write) = a_read
            .reunite(b_write)
            .expect_err("reunited halves of two streams");
        let magpie::net::unix::ReuniteError(mut b_read, mut a_write) = a_write
            .reunite(b_read)
            .expect_err("reunited halves of two streams");
        // Still working, each on its own stream, and not shut down by the failed attempt.
        a_write.write_all(b"A").await.unwrap();
        b_write.write_all(b"B").await.unwrap();
        let mut one = [0u8; 1];
        bounded("a_peer", a_peer.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"A");
        bounded("b_peer", b_peer.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"B");
        a_peer.write_all(b"a").await.unwrap();
        b_peer.write_all(b"b").await.unwrap();
        bounded("a_read", a_read.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"a");
        bounded("b_read", b_read.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"b");
        let mut a = a_read.reunite(a_write).expect("the right halves");
        let mut b = b_write.reunite(b_read).expect("the right halves");
        a.write_all(b"1").await.unwrap();
        b.write_all(b"2").await.unwrap();
        bounded("a_peer", a_peer.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"1");
        bounded("b_peer", b_peer.read_exact(&mut one))
            .await
            .unwrap();
        assert_eq!(&one, b"2");
    });
    dog.phase("tcp", &rt);
    rt.block_on(async {
        let (a, mut a_peer) = tcp_pair().await;
        let (b, _b_peer) = tcp_pair().await;
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let magpie::net::tcp::ReuniteError(a_read, b_write) = b_write
            .reunite(a_read)
            .expect_err("reunited halves of two streams");
        // Dropping the error's write half shuts down *b*, not a.
        drop(b_write);
        drop(b_read);
        let (mut a_read, mut a_write) = (a_read, a_write);
        a_write.write_all(b"still").await.unwrap();
        let mut buf = [0u8; 5];
        bounded("a_peer", a_peer.read_exact(&mut buf))
            .await
            .unwrap();
        assert_eq!(&buf, b"still");
        a_peer.write_all(b"back!").await.unwrap();
        bounded("a_read", a_read.read_exact(&mut buf))
            .await
            .unwrap();
        assert_eq!(&buf, b"back!");
        let a = a_read.reunite(a_write).unwrap();
        drop(a);
    });
    assert_eq!(io_sources(&rt), 0);
}

/// Shutting the write side down twice (stream, owned half, borrowed half), then writing:
/// the second shutdown is no error that panics anything, the write after it fails (not
/// waits), and the peer reads end of stream exactly once per stream.
#[test]
fn shutdown_twice_then_write() {
    let rt = runtime(1);
    rt.block_on(async {
        let (mut a, mut a_peer) = UnixStream::pair().unwrap();
        a.shutdown().await.unwrap();
        let again = a.shutdown().await;
        assert!(
            again.is_ok(),
            "a second shutdown of a Unix stream: {again:?}"
        );
        let err = bounded("write after shutdown", a.write(b"x"))
            .await
            .expect_err("wrote after shutdown");
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");
        assert_eq!(
            bounded("peer eof", a_peer.read(&mut [0u8; 4]))
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            bounded("peer eof again", a_peer.read(&mut [0u8; 4]))
                .await
                .unwrap(),
            0
        );

        let (b, mut b_peer) = UnixStream::pair().unwrap();
        let (_b_read, mut b_write) = b.into_split();
        b_write.shutdown().await.unwrap();
        b_write.shutdown().await.unwrap();
        assert!(bounded("write after shutdown", b_write.write_all(b"x"))
            .await
            .is_err());
        drop(b_write); // a third shutdown, in the drop
        assert_eq!(
            bounded("peer eof", b_peer.read(&mut [0u8; 4]))
                .await
                .unwrap(),
            0
        );

        let (mut c, mut c_peer) = tcp_pair().await;
        {
            let (_r, mut w) = c.split();
            w.shutdown().await.unwrap();
            let _ = w.shutdown().await; // may be ENOTCONN on some kernels: only no panic
        }
        assert!(bounded("tcp write after shutdown", c.write(b"x"))
            .await
            .is_err());
        assert_eq!(
            bounded("tcp peer eof", c_peer.read(&mut [0u8; 4]))
                .await
                .unwrap(),
            0
        );
    });
    assert_eq!(io_sources(&rt), 0);
}

/// Reading after the peer reset the connection (closed with unread data: a Unix stream
/// then reports `ECONNRESET`; a TCP one with `SO_LINGER` 0 sends RST): the read fails or
/// ends, and every later read, readiness wait and write returns at once too, never waits.
#[test]
fn operations_after_a_peer_reset_do_not_wait() {
    let rt = runtime(2);
    let dog = Watchdog::start("operations_after_a_peer_reset_do_not_wait");
    dog.phase("unix", &rt);
    rt.block_on(async {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"unread").await.unwrap();
        drop(b);
        for round in 0..3 {
            let r = bounded("read after reset", a.read(&mut [0u8; 8])).await;
            assert!(
                matches!(&r, Ok(0)) || r.is_err(),
                "round {round}: read after the peer reset gave {r:?}"
            );
        }
        bounded("readable after reset", a.readable()).await.unwrap();
        bounded("writable after reset", a.writable()).await.unwrap();
        assert!(bounded("write after reset", a.write_all(b"x"))
            .await
            .is_err());
    });
    dog.phase("tcp", &rt);
    rt.block_on(async {
        let (mut c, s) = tcp_pair().await;
        net_support::reset_on_close(&s);
        drop(s);
        for round in 0..3 {
            let r = bounded("tcp read after reset", c.read(&mut [0u8; 8])).await;
            assert!(
                matches!(&r, Ok(0)) || r.is_err(),
                "round {round}: read after reset gave {r:?}"
            );
        }
        let mut failed = false;
        for _ in 0..4 {
            if bounded("tcp write after reset", c.write(b"x"))
                .await
                .is_err()
            {
                failed = true;
                break;
            }
        }
        assert!(failed, "writes after a reset kept succeeding");
    });
    assert_eq!(io_sources(&rt), 0);
}

/// Zero-length operations on every kind of half and on the try_ forms: they return at once
/// (`Ok(0)` or `WouldBlock` for try_), and never swallow the peer's data.
#[test]
fn zero_length_operations_on_halves() {
    let rt = runtime(1);
    rt.block_on(async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        {
            let (mut r, mut w) = a.split();
            assert_eq!(bounded("empty read", r.read(&mut [])).await.unwrap(), 0);
            assert_eq!(bounded("empty write", w.write(&[])).await.unwrap(), 0);
            bounded("empty write_all", w.write_all(&[])).await.unwrap();
            bounded("empty read_exact", r.read_exact(&mut []))
                .await
                .unwrap();
        }
        b.write_all(b"data").await.unwrap();
        bounded("readable", a.readable()).await.unwrap();
        // An empty try_read while data waits must not consume it.
        let _ = a.try_read(&mut []);
        let (mut r, w) = a.into_split();
        assert!(matches!(w.try_write(&[]), Ok(0) | Err(_)));
        let mut buf = [0u8; 4];
        bounded("data after empty reads", r.read_exact(&mut buf))
            .await
            .unwrap();
        assert_eq!(&buf, b"data");
        drop((r, w));
    });
}

// ---------------------------------------------------------------------------------------
// Slab reuse
// ---------------------------------------------------------------------------------------

/// Thousands of sources registered and dropped quickly on two workers while their
/// readiness is in flight (the writer end is dropped right after writing: the reader gets
/// data and a hangup in events the driver may dispatch after the slot was freed and
/// reused). Every reader must read exactly its own tag (a stale event neither wakes a new
/// owner wrongly into wrong data nor loses its wake), and a long-lived waiter registered at
/// the start is woken exactly when its data comes at the end. No registration is left.
#[test]
fn slab_slots_reused_under_in_flight_readiness() {
    const TASKS: u64 = 16;
    const ROUNDS: u64 = 300;
    let rt = runtime(2);
    let dog = Watchdog::start("slab_slots_reused_under_in_flight_readiness");
    dog.phase("churn", &rt);
    let progress = dog.progress();
    let (watch_read, mut watch_write) = pipe();
    let watcher_waits = Arc::new(AtomicBool::new(false));
    let watcher = rt.spawn(NoteWaiting::new(
        async move {
            let fd = AsyncFd::with_interest(watch_read, Interest::READABLE).unwrap();
            let mut buf = [0u8; 8];
            let n = fd
                .async_io(Interest::READABLE, |f| (&*f).read(&mut buf))
                .await
                .unwrap();
            buf[..n].to_vec()
        },
        &watcher_waits,
    ));
    eventually("the watcher waits", || watcher_waits.load(SeqCst));
    let handles: Vec<_> = (0..TASKS)
        .map(|t| {
            let progress = progress.clone();
            rt.spawn(async move {
                for round in 0..ROUNDS {
                    let tag = pattern(t * ROUNDS + round, 1 + (round % 7) as usize);
                    match round % 3 {
                        0 => {
                            let (mut a, mut b) = UnixStream::pair().unwrap();
                            let tag2 = tag.clone();
                            let writer = magpie::spawn(async move {
                                a.write_all(&tag2).await.unwrap();
                                drop(a);
                            });
                            let mut got = Vec::new();
                            let mut buf = [0u8; 16];
                            loop {
                                match b.read(&mut buf).await.unwrap() {
                                    0 => break,
                                    n => got.extend_from_slice(&buf[..n]),
                                }
                            }
                            assert_eq!(got, tag, "task {t} round {round}: wrong data");
                            writer.await.unwrap();
                        }
                        1 => {
                            let (r, mut w) = pipe();
                            let fd = AsyncFd::with_interest(r, Interest::READABLE).unwrap();
                            w.write_all(&tag).unwrap();
                            drop(w);
                            let mut got = Vec::new();
                            let mut buf = [0u8; 16];
                            loop {
                                let n = fd
                                    .async_io(Interest::READABLE, |f| (&*f).read(&mut buf))
                                    .await
                                    .unwrap();
                                if n == 0 {
                                    break;
                                }
                                got.extend_from_slice(&buf[..n]);
                            }
                            assert_eq!(got, tag, "task {t} round {round}: wrong data");
                        }
                        _ => {
                            let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                            let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                            a.send_to(&tag, b.local_addr().unwrap()).await.unwrap();
                            drop(a);
                            let mut buf = [0u8; 16];
                            let (n, _) = b.recv_from(&mut buf).await.unwrap();
                            assert_eq!(&buf[..n], &tag[..], "task {t} round {round}");
                        }
                    }
                    progress.fetch_add(1, Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    dog.phase("watcher", &rt);
    watch_write.write_all(b"end").unwrap();
    assert_eq!(watcher.join().unwrap(), b"end");
    drop(dog);
    assert_eq!(io_sources(&rt), 0, "registrations left after the churn");
}

/// Slot reuse with a *dropped waiting future*: a task waits on a source, its future is
/// dropped (its waker stays listed), the source is dropped, and the slot goes to a new
/// source that another task waits on. The old waker must not stand in for the new waiter
/// (the new waiter is woken by its own data), thousands of times.
#[test]
fn stale_wakers_of_a_freed_slot_do_not_stand_in_for_the_new_owner() {
    const ROUNDS: usize = 2000;
    let rt = runtime(2);
    let dog = Watchdog::start("stale_wakers_of_a_freed_slot_do_not_stand_in_for_the_new_owner");
    dog.phase("rounds", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        for round in 0..ROUNDS {
            // Old owner: a waiting read, cancelled.
            let (mut old, old_peer) = UnixStream::pair().unwrap();
            let mut old_buf = [0u8; 1];
            {
                let mut fut = Box::pin(old.read(&mut old_buf));
                assert!(poll_once(fut.as_mut()).is_pending());
            }
            drop(old);
            drop(old_peer);
            // New owners reuse those slots; one waits in a task, woken by a thread.
            let (mut new, new_peer) = UnixStream::pair().unwrap();
            let waiting = Arc::new(AtomicBool::new(false));
            let reader = magpie::spawn(NoteWaiting::new(
                async move {
                    let mut b = [0u8; 1];
                    new.read_exact(&mut b).await.map(|()| b[0])
                },
                &waiting,
            ));
            let mut std_peer = new_peer.into_std().unwrap();
            std_peer.set_nonblocking(false).unwrap();
            while !waiting.load(SeqCst) {
                magpie::task::yield_now().await;
            }
            std_peer.write_all(&[round as u8]).unwrap();
            let got = bounded("the new owner's read", reader)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(got, round as u8);
            progress.fetch_add(1, Relaxed);
        }
    });
    drop(dog);
    assert_eq!(io_sources(&rt), 0);
}

// ---------------------------------------------------------------------------------------
// lookup_host
// ---------------------------------------------------------------------------------------

/// Odd inputs to `lookup_host` and to the other `ToSocketAddrs` users: each is an `Err`
/// (or, where it is a valid literal, the literal), never a panic or a hang. None of these
/// reach a DNS server: they fail before the lookup (port, NUL) or are too long to send.
#[test]
fn lookup_host_with_odd_input() {
    let rt = runtime(1);
    let long = "a".repeat(10 * 1024);
    let long_with_port = format!("{long}:80");
    rt.block_on(async {
        for input in [
            "",
            ":",
            "::",
            "host:99999",
            "127.0.0.1:99999",
            "127.0.0.1:-1",
            "[::1]:99999",
            "a\0b:80",
            "\0:0",
            long.as_str(),
            long_with_port.as_str(),
        ] {
            let shown: String = input.chars().take(40).collect();
            let r = bounded(
                &format!("lookup_host({shown:?})"),
                magpie::net::lookup_host(input),
            )
            .await;
            assert!(
                r.is_err(),
                "lookup_host({shown:?}) resolved: {:?}",
                r.map(Iterator::collect::<Vec<_>>)
            );
        }
        let r = bounded("pair with NUL", magpie::net::lookup_host(("a\0b", 80))).await;
        assert!(r.is_err());
        // Literals resolve in place.
        let v: Vec<_> = magpie::net::lookup_host("[::1]:65535")
            .await
            .unwrap()
            .collect();
        assert_eq!(v, vec!["[::1]:65535".parse().unwrap()]);
        let v: Vec<_> = magpie::net::lookup_host(("::1", 0))
            .await
            .unwrap()
            .collect();
        assert_eq!(v, vec!["[::1]:0".parse().unwrap()]);
        // Empty slices: nothing to bind to or send to.
        let none: &[std::net::SocketAddr] = &[];
        assert!(UdpSocket::bind(none).await.is_err());
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let err = udp.send_to(b"x", none).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(TcpStream::connect("a\0b:80").await.is_err());
        assert!(udp.connect(long_with_port.as_str()).await.is_err());
    });
    assert_eq!(io_sources(&rt), 0);
}

// ---------------------------------------------------------------------------------------
// UDP
// ---------------------------------------------------------------------------------------

/// Zero-length and maximal datagrams: an empty datagram is sent and received as one
/// (length 0, right sender); the largest IPv4 UDP payload (65507) round-trips intact; one
/// byte more is an error, not a wait; a small buffer truncates; the socket keeps working.
#[test]
fn udp_zero_length_and_maximal_datagrams() {
    const MAX: usize = 65_507;
    let rt = runtime(2);
    let dog = Watchdog::start("udp_zero_length_and_maximal_datagrams");
    dog.phase("udp", &rt);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b_addr = b.local_addr().unwrap();
        assert_eq!(a.send_to(&[], b_addr).await.unwrap(), 0);
        let mut buf = vec![0u8; MAX + 16];
        let (n, from) = bounded("empty datagram", b.recv_from(&mut buf))
            .await
            .unwrap();
        assert_eq!((n, from), (0, a.local_addr().unwrap()));

        let big = pattern(7, MAX);
        assert_eq!(
            bounded("max send", a.send_to(&big, b_addr)).await.unwrap(),
            MAX
        );
        let (n, _) = bounded("max recv", b.recv_from(&mut buf)).await.unwrap();
        assert_eq!(n, MAX);
        assert!(
            buf[..n] == big[..],
            "the maximal datagram came back changed"
        );

        let too_big = vec![1u8; MAX + 1];
        let err = bounded("oversized send", a.send_to(&too_big, b_addr))
            .await
            .expect_err("sent a datagram over the IPv4 limit");
        assert_ne!(err.kind(), ErrorKind::WouldBlock);
        let err = a
            .try_send_to(&too_big, b_addr)
            .expect_err("try_send_to oversized");
        assert_ne!(err.kind(), ErrorKind::WouldBlock);

        // Truncation to a small buffer, then a zero-length buffer (which discards one).
        a.send_to(b"truncate me", b_addr).await.unwrap();
        let mut small = [0u8; 4];
        let (n, _) = bounded("truncating recv", b.recv_from(&mut small))
            .await
            .unwrap();
        assert_eq!(&small[..n], b"trun");
        a.send_to(b"gone", b_addr).await.unwrap();
        let (n, _) = bounded("zero-length recv", b.recv_from(&mut []))
            .await
            .unwrap();
        assert_eq!(n, 0);
        a.send_to(b"next", b_addr).await.unwrap();
        let (n, _) = bounded("after zero-length recv", b.recv_from(&mut buf))
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"next");

        // Connected: an empty send/recv pair too.
        a.connect(b_addr).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        assert_eq!(a.send(&[]).await.unwrap(), 0);
        assert_eq!(
            bounded("connected empty", b.recv(&mut buf)).await.unwrap(),
            0
        );
    });
    assert_eq!(io_sources(&rt), 0);
}

/// A connected UDP socket whose peer port is closed gets an ICMP error: the `recv` waiting
/// for it (or the next one) reports `ConnectionRefused` and the socket then goes on
/// working; neither direction is left waiting for good.
#[test]
fn udp_connection_refused_does_not_wedge_the_socket() {
    let rt = runtime(2);
    let dog = Watchdog::start("udp_connection_refused_does_not_wedge_the_socket");
    dog.phase("udp", &rt);
    rt.block_on(async {
        let closed = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let closed_addr = closed.local_addr().unwrap();
        drop(closed);
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(closed_addr).await.unwrap();
        a.send(b"ping").await.unwrap();
        let r = bounded("recv after ICMP unreachable", a.recv(&mut [0u8; 8])).await;
        assert_eq!(r.map_err(|e| e.kind()), Err(ErrorKind::ConnectionRefused));
        // Reconnect to a live peer: it works both ways.
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        bounded("send", a.send(b"hi")).await.unwrap();
        let mut buf = [0u8; 8];
        let n = bounded("recv", b.recv(&mut buf)).await.unwrap();
        assert_eq!(&buf[..n], b"hi");
        bounded("send back", b.send(b"yo")).await.unwrap();
        let n = bounded("recv back after the error", a.recv(&mut buf))
            .await
            .unwrap();
        assert_eq!(&buf[..n], b"yo");
    });
    assert_eq!(io_sources(&rt), 0);
}

// ---------------------------------------------------------------------------------------
// Unix sockets: paths
// ---------------------------------------------------------------------------------------

/// Paths too long for `sockaddr_un`, an empty path, a path with a NUL, a path in a missing
/// directory: every `bind` and `connect` is an `Err`, and nothing stays registered.
#[test]
fn unix_paths_too_long_or_invalid() {
    let rt = runtime(1);
    let long = std::env::temp_dir().join("x".repeat(200));
    let very_long = std::path::PathBuf::from(format!("/tmp/{}", "y".repeat(10_000)));
    rt.block_on(async {
        for path in [
            long.as_path(),
            very_long.as_path(),
            std::path::Path::new("/tmp/a\0b"),
            std::path::Path::new("/nonexistent-dir-magpie/sock"),
        ] {
            let shown: String = path.to_string_lossy().chars().take(40).collect();
            assert!(UnixListener::bind(path).is_err(), "bound {shown:?}");
            let r = bounded("connect", UnixStream::connect(path)).await;
            assert!(r.is_err(), "connected to {shown:?}");
        }
        // A path with a leading NUL (what an abstract name looks like as bytes), and the
        // empty path (Linux autobinds it to an abstract name): an error, or a usable
        // listener. Connecting by such a path must not hang either way.
        let empty = std::path::Path::new("");
        if let Ok(listener) = UnixListener::bind(empty) {
            let _ = bounded("connect to the empty path", UnixStream::connect(empty)).await;
            let mut pending = Box::pin(listener.accept());
            let _ = poll_once(pending.as_mut());
        }
        let abstract_like = std::path::Path::new("\0magpie-io-adversarial");
        if let Ok(listener) = UnixListener::bind(abstract_like) {
            let mut c = bounded("connect abstract-like", UnixStream::connect(abstract_like))
                .await
                .unwrap();
            let (mut s, _) = bounded("accept", listener.accept()).await.unwrap();
            c.write_all(b"x").await.unwrap();
            let mut one = [0u8; 1];
            bounded("read", s.read_exact(&mut one)).await.unwrap();
        }
    });
    assert_eq!(io_sources(&rt), 0);
}

/// An abstract-namespace listener made with std (`bind_addr`) and handed to magpie, a
/// client connected the same way: they talk, and the accepted peer's address is unnamed.
#[test]
fn unix_abstract_names_through_std() {
    use std::os::linux::net::SocketAddrExt;
    let rt = runtime(1);
    let name = format!("magpie-io-adversarial-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let std_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    rt.block_on(async {
        let listener = UnixListener::from_std(std_listener).unwrap();
        let local = listener.local_addr().unwrap();
        assert_eq!(local.as_abstract_name(), Some(name.as_bytes()));
        let std_client = std::os::unix::net::UnixStream::connect_addr(&addr).unwrap();
        let mut client = UnixStream::from_std(std_client).unwrap();
        let (mut server, peer) = bounded("accept", listener.accept()).await.unwrap();
        assert!(peer.is_unnamed());
        client.write_all(b"abstract").await.unwrap();
        let mut buf = [0u8; 8];
        bounded("read", server.read_exact(&mut buf)).await.unwrap();
        assert_eq!(&buf, b"abstract");
    });
    assert_eq!(io_sources(&rt), 0);
}

/// A listener whose path was unlinked: new connections by path fail (`NotFound`), a
/// connection made before the unlink is still accepted and works, a second listener can
/// bind the path and is the one reached, and an accept left waiting on the first is
/// dropped cleanly: nothing hangs, nothing stays registered.
#[test]
fn unix_listener_with_its_path_unlinked() {
    let rt = runtime(2);
    let dog = Watchdog::start("unix_listener_with_its_path_unlinked");
    dog.phase("unlinked", &rt);
    let path = std::env::temp_dir().join(format!("magpie-io-adv-{}-unlinked", std::process::id()));
    let _ = std::fs::remove_file(&path);
    rt.block_on(async {
        let listener = UnixListener::bind(&path).unwrap();
        let mut early = bounded("connect", UnixStream::connect(&path))
            .await
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let err = bounded("connect after unlink", UnixStream::connect(&path))
            .await
            .expect_err("connected through an unlinked path");
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
        let (mut s, _) = bounded("accept the early one", listener.accept())
            .await
            .unwrap();
        early.write_all(b"e").await.unwrap();
        let mut one = [0u8; 1];
        bounded("read", s.read_exact(&mut one)).await.unwrap();
        assert_eq!(&one, b"e");
        // A second listener may bind the same path now, and it is the one reached.
        let second = UnixListener::bind(&path).unwrap();
        let _c = bounded("connect to the second", UnixStream::connect(&path))
            .await
            .unwrap();
        let _ = bounded("accept on the second", second.accept())
            .await
            .unwrap();
        let mut pending = Box::pin(listener.accept());
        assert!(poll_once(pending.as_mut()).is_pending());
    });
    let _ = std::fs::remove_file(&path);
    assert_eq!(io_sources(&rt), 0);
}

// ---------------------------------------------------------------------------------------
// Trait impls (features)
// ---------------------------------------------------------------------------------------

/// tokio's traits on empty buffers: a `ReadBuf` with no room returns at once without
/// consuming; vectored writes of nothing or of empty slices write nothing and a later
/// vectored write with data writes its first non-empty slice; `poll_shutdown` twice; a
/// read after the peer's shutdown is end of stream.
#[cfg(feature = "tokio-io")]
#[test]
fn tokio_traits_on_empty_buffers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = runtime(1);
    rt.block_on(async {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (mut r, mut w) = a.into_split();
        b.write_all(b"xyz").await.unwrap();
        let mut empty: [u8; 0] = [];
        assert_eq!(
            bounded("empty tokio read", AsyncReadExt::read(&mut r, &mut empty))
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            bounded(
                "vectored nothing",
                AsyncWriteExt::write_vectored(&mut w, &[])
            )
            .await
            .unwrap(),
            0
        );
        let slices = [
            io::IoSlice::new(&[]),
            io::IoSlice::new(b"ab"),
            io::IoSlice::new(b"c"),
        ];
        let n = bounded("vectored", AsyncWriteExt::write_vectored(&mut w, &slices))
            .await
            .unwrap();
        assert!((1..=3).contains(&n), "{n}");
        let mut buf = [0u8; 3];
        AsyncReadExt::read_exact(&mut r, &mut buf).await.unwrap();
        assert_eq!(&buf, b"xyz");
        AsyncWriteExt::shutdown(&mut w).await.unwrap();
        AsyncWriteExt::shutdown(&mut w).await.unwrap();
        let mut got = Vec::new();
        bounded("peer reads to end", b.read_to_end_compat(&mut got)).await;
        assert_eq!(&got[..], &b"abc"[..n]);
        drop(b);
        let mut rest = Vec::new();
        let m = bounded(
            "read_to_end after peer drop",
            AsyncReadExt::read_to_end(&mut r, &mut rest),
        )
        .await
        .unwrap();
        assert_eq!(m, 0);
    });
}

/// Reads `stream` to its end (the inherent `read`, for the tests that need no trait).
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
trait ReadToEndCompat {
    fn read_to_end_compat<'a>(
        &'a mut self,
        out: &'a mut Vec<u8>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + 'a>>;
}

#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
impl ReadToEndCompat for UnixStream {
    fn read_to_end_compat<'a>(
        &'a mut self,
        out: &'a mut Vec<u8>,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + 'a>> {
        Box::pin(async move {
            let mut buf = [0u8; 64];
            loop {
                match self.read(&mut buf).await.unwrap() {
                    0 => return,
                    n => out.extend_from_slice(&buf[..n]),
                }
            }
        })
    }
}

/// futures-io's traits: an empty read, `poll_close` twice, and end of stream.
#[cfg(feature = "futures-io")]
#[test]
fn futures_traits_on_empty_buffers() {
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    let rt = runtime(1);
    rt.block_on(async {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (mut r, mut w) = a.into_split();
        assert_eq!(
            bounded("empty read", AsyncReadExt::read(&mut r, &mut []))
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            bounded("empty write", AsyncWriteExt::write(&mut w, &[]))
                .await
                .unwrap(),
            0
        );
        AsyncWriteExt::write_all(&mut w, b"q").await.unwrap();
        AsyncWriteExt::close(&mut w).await.unwrap();
        AsyncWriteExt::close(&mut w).await.unwrap();
        let mut got = Vec::new();
        bounded("peer to end", b.read_to_end_compat(&mut got)).await;
        assert_eq!(got, b"q");
        drop(b);
        let mut rest = Vec::new();
        assert_eq!(
            bounded("to end", AsyncReadExt::read_to_end(&mut r, &mut rest))
                .await
                .unwrap(),
            0
        );
    });
}

// ---------------------------------------------------------------------------------------
// Sockets awaited away from their runtime's workers
// ---------------------------------------------------------------------------------------

/// A socket registered with a one-worker runtime, awaited by `magpie::block_on` inside
/// `block_in_place` on that very worker (which the docs allow), while a plain thread
/// writes to its peer. Nobody else is there to turn the runtime's I/O driver: the read must
/// still complete (the waiting `block_on` or the worker must see the readiness), or fail,
/// but not wait for good. Bounded: the result comes through a channel with a timeout, and a
/// stuck runtime is leaked rather than dropped.
#[test]
fn socket_awaited_in_block_in_place_on_the_only_worker() {
    let rt = common::runtime(1);
    let (mut ours, theirs) = rt.block_on(async { UnixStream::pair() }).unwrap();
    let mut theirs = theirs.into_std().unwrap();
    theirs.set_nonblocking(false).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = Arc::new(AtomicBool::new(false));
    let _task = rt.spawn({
        let waiting = waiting.clone();
        async move {
            let got = magpie::task::block_in_place(|| {
                magpie::block_on(NoteWaiting::new(
                    async {
                        let mut buf = [0u8; 5];
                        ours.read_exact(&mut buf).await.map(|()| buf)
                    },
                    &waiting,
                ))
            });
            let _ = tx.send(got);
        }
    });
    eventually("the read waits", || waiting.load(SeqCst));
    theirs.write_all(b"hello").unwrap();
    match rx.recv_timeout(HANG) {
        Ok(got) => assert_eq!(&got.unwrap(), b"hello"),
        Err(_) => {
            std::mem::forget(rt);
            panic!(
                "a read awaited in block_in_place on the only worker of the socket's runtime \
                 never completed: nobody turns that runtime's I/O driver"
            );
        }
    }
}
