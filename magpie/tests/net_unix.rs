//! Unix domain sockets (`UnixListener`, `UnixStream`) and `magpie::io::AsyncFd` on
//! descriptors the user owns: a pipe (both ends waiting in turn), an eventfd, a regular
//! file (refused), and the guard's readiness rules.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(all(unix, not(any(loom, shuttle))))]

mod common;
mod net_support;

use std::fs::File;
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::io::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

use common::Watchdog;
use magpie::io::{AsyncFd, Interest};
use magpie::net::{UnixListener, UnixStream};
use net_support::{io_sources, pattern, poll_once, runtime};

/// A socket path unique to this process and test, removed on drop.
struct SocketPath(PathBuf);

impl SocketPath {
    fn new(test: &str) -> SocketPath {
        let path = std::env::temp_dir().join(format!("magpie-{test}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        SocketPath(path)
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn pair_round_trip_and_owned_halves() {
    let rt = runtime(2);
    let dog = Watchdog::start("pair_round_trip_and_owned_halves");
    dog.phase("pair", &rt);
    rt.block_on(async {
        let (a, mut b) = UnixStream::pair().unwrap();
        let (mut reader, mut writer) = a.into_split();
        // 1 MiB each way at once, from two tasks: more than the socket buffers hold.
        let data = pattern(3, 1 << 20);
        let sending = magpie::spawn({
            let data = data.clone();
            async move {
                writer.write_all(&data).await?;
                writer.shutdown().await?;
                Ok::<_, io::Error>(writer)
            }
        });
        let echoing = magpie::spawn(async move {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match b.read(&mut buf).await? {
                    0 => return Ok::<_, io::Error>(()),
                    n => b.write_all(&buf[..n]).await?,
                }
            }
        });
        let mut received = vec![0u8; data.len()];
        reader.read_exact(&mut received).await.unwrap();
        assert!(received == data, "the echo differs");
        echoing.await.unwrap().unwrap();
        assert_eq!(reader.read(&mut [0u8; 1]).await.unwrap(), 0);
        let writer = sending.await.unwrap().unwrap();
        let stream = reader.reunite(writer).expect("one stream's halves");
        drop(stream);
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn listener_serves_many_connections() {
    const CONNECTIONS: usize = 32;
    let rt = runtime(2);
    let dog = Watchdog::start("listener_serves_many_connections");
    dog.phase("echo", &rt);
    let progress = dog.progress();
    let path = SocketPath::new("listener");
    rt.block_on(async {
        let listener = UnixListener::bind(&path.0).unwrap();
        assert_eq!(
            listener.local_addr().unwrap().as_pathname(),
            Some(path.0.as_path())
        );
        let server = magpie::spawn(async move {
            let mut echoes = Vec::new();
            for _ in 0..CONNECTIONS {
                let (mut stream, _) = listener.accept().await?;
                echoes.push(magpie::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match stream.read(&mut buf).await? {
                            0 => return Ok::<_, io::Error>(()),
                            n => stream.write_all(&buf[..n]).await?,
                        }
                    }
                }));
            }
            for echo in echoes {
                echo.await.unwrap()?;
            }
            Ok::<_, io::Error>(())
        });
        let clients: Vec<_> = (0..CONNECTIONS as u64)
            .map(|id| {
                let path = path.0.clone();
                let progress = progress.clone();
                magpie::spawn(async move {
                    let mut stream = UnixStream::connect(&path).await?;
                    let (mut reader, mut writer) = stream.split();
                    let message = pattern(id, 10_000 + id as usize);
                    let mut echoed = vec![0u8; message.len()];
                    let (written, read) = futures::future::join(
                        async {
                            writer.write_all(&message).await?;
                            writer.shutdown().await
                        },
                        reader.read_exact(&mut echoed),
                    )
                    .await;
                    written?;
                    read?;
                    assert!(echoed == message, "connection {id}: wrong echo");
                    progress.fetch_add(1, Relaxed);
                    Ok::<_, io::Error>(())
                })
            })
            .collect();
        for client in clients {
            client.await.unwrap().unwrap();
        }
        server.await.unwrap().unwrap();
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn connect_to_a_missing_path_fails() {
    let rt = runtime(1);
    let path = SocketPath::new("missing");
    rt.block_on(async {
        let err = UnixStream::connect(&path.0).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn half_close_on_a_pair() {
    let rt = runtime(1);
    let dog = Watchdog::start("half_close_on_a_pair");
    dog.phase("half-close", &rt);
    rt.block_on(async {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(b"last").await.unwrap();
        a.shutdown().await.unwrap();
        let mut buf = [0u8; 4];
        b.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"last");
        assert_eq!(b.read(&mut buf).await.unwrap(), 0);
        b.write_all(b"back").await.unwrap();
        a.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"back");
    });
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

/// 4 MiB through a pipe (64 KiB of buffer) between two tasks: the writer waits for room,
/// the reader for data, over and over; every wait ends through the driver.
#[test]
fn async_fd_moves_data_through_a_pipe() {
    const TOTAL: usize = 4 << 20;
    let rt = runtime(2);
    let dog = Watchdog::start("async_fd_moves_data_through_a_pipe");
    dog.phase("pipe", &rt);
    let progress = dog.progress();
    let counted = rt.clone();
    rt.block_on(async move {
        let (read_end, write_end) = pipe();
        let reader = AsyncFd::with_interest(read_end, Interest::READABLE).unwrap();
        let writer = AsyncFd::with_interest(write_end, Interest::WRITABLE).unwrap();
        let data = pattern(11, TOTAL);
        let writing = magpie::spawn({
            let data = data.clone();
            async move {
                let mut sent = 0;
                while sent < TOTAL {
                    let mut guard = writer.writable().await?;
                    match guard.try_io(|fd| fd.get_ref().write(&data[sent..])) {
                        Ok(n) => sent += n?,
                        Err(_would_block) => continue,
                    }
                }
                Ok::<_, io::Error>(())
            }
        });
        let mut received = Vec::with_capacity(TOTAL);
        let mut buf = vec![0u8; 16 * 1024];
        while received.len() < TOTAL {
            // The `async_io` loop this time.
            let n = reader
                .async_io(Interest::READABLE, |mut file| file.read(&mut buf))
                .await
                .unwrap();
            assert_ne!(n, 0, "the pipe closed early");
            received.extend_from_slice(&buf[..n]);
            progress.fetch_add(1, Relaxed);
        }
        writing.await.unwrap().unwrap();
        assert!(received == data, "the pipe mixed up the bytes");
        // The writer's task has finished and dropped its `AsyncFd`.
        assert_eq!(io_sources(&counted), 1);
        drop(reader);
    });
    assert_eq!(io_sources(&rt), 0);
}

#[cfg(target_os = "linux")]
#[test]
fn async_fd_waits_for_an_eventfd() {
    let rt = runtime(2);
    let dog = Watchdog::start("async_fd_waits_for_an_eventfd");
    dog.phase("eventfd", &rt);
    let progress = dog.progress();
    // SAFETY: no pointers; a fresh descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
    // SAFETY: `eventfd` succeeded: the descriptor is open and owned by nobody else.
    let event = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let notifier = event.try_clone().unwrap();
    let mut event = Some(rt.block_on(async { AsyncFd::new(event) }).unwrap());
    for round in 1..=50u64 {
        // The task owns the `AsyncFd` while it waits, and hands it back.
        let owned = event.take().unwrap();
        let waiting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handle = rt.spawn(net_support::NoteWaiting::new(
            async move {
                let mut counter = [0u8; 8];
                loop {
                    let mut guard = owned.readable().await?;
                    if let Ok(result) = guard.try_io(|fd| fd.get_ref().read(&mut counter)) {
                        assert_eq!(result?, 8);
                        return Ok::<_, io::Error>((u64::from_ne_bytes(counter), owned));
                    }
                }
            },
            &waiting,
        ));
        common::eventually("the task waits on the eventfd", || waiting.load(Relaxed));
        (&notifier).write_all(&round.to_ne_bytes()).unwrap();
        let (value, back) = handle.join().unwrap().unwrap();
        assert_eq!(value, round, "the eventfd's counter");
        event = Some(back);
        progress.fetch_add(1, Relaxed);
    }
    drop(event);
    assert_eq!(io_sources(&rt), 0);
}

/// Readiness rules of the guard: dropping (or `retain_ready`) keeps the readiness, so the
/// next wait returns at once; `clear_ready` clears it, so the next wait waits for a new
/// event.
#[test]
fn guard_keeps_or_clears_readiness() {
    let rt = runtime(1);
    let dog = Watchdog::start("guard_keeps_or_clears_readiness");
    dog.phase("guards", &rt);
    rt.block_on(async {
        let (read_end, mut write_end) = pipe();
        let reader = AsyncFd::new(read_end).unwrap();
        write_end.write_all(b"x").unwrap();
        reader.readable().await.unwrap().retain_ready();
        let _ = reader.readable().await.unwrap();
        // Still ready: a fresh wait completes on its first poll.
        let mut wait = Box::pin(reader.readable());
        let mut guard = match poll_once(wait.as_mut()) {
            std::task::Poll::Ready(guard) => guard.unwrap(),
            std::task::Poll::Pending => panic!("readiness was lost by a dropped guard"),
        };
        // Pretend the read said `WouldBlock` (wrongly: the byte is there). The readiness is
        // gone, and the next wait waits until the driver reports something new.
        guard.clear_ready();
        drop(wait);
        let mut wait = Box::pin(reader.readable());
        assert!(
            poll_once(wait.as_mut()).is_pending(),
            "clear_ready cleared nothing"
        );
        // New data is a new event.
        write_end.write_all(b"y").unwrap();
        let mut guard = wait.await.unwrap();
        let mut buf = [0u8; 2];
        let n = guard
            .try_io(|fd| fd.get_ref().read(&mut buf))
            .expect("readable")
            .unwrap();
        assert_eq!(&buf[..n], b"xy");
        // Drained: `try_io` turns the next `WouldBlock` into `TryIoError` and clears.
        assert!(guard.try_io(|fd| fd.get_ref().read(&mut buf)).is_err());
    });
}

#[test]
fn async_fd_registration_follows_its_owner() {
    let rt = runtime(1);
    let (read_end, write_end) = pipe();
    let (reader, writer) = rt.block_on(async {
        (
            AsyncFd::new(read_end).unwrap(),
            AsyncFd::new(write_end).unwrap(),
        )
    });
    assert_eq!(io_sources(&rt), 2);
    let read_end: File = reader.into_inner();
    assert_eq!(
        io_sources(&rt),
        1,
        "into_inner left the descriptor registered"
    );
    drop(writer);
    assert_eq!(io_sources(&rt), 0, "drop left the descriptor registered");
    // The descriptor handed back is open: the write end is closed, so it reads end of file.
    assert_eq!((&read_end).read(&mut [0u8; 1]).unwrap(), 0);
}

/// epoll refuses regular files (`EPERM`): `AsyncFd::new` reports it and leaves nothing
/// registered.
#[cfg(target_os = "linux")]
#[test]
fn async_fd_refuses_a_regular_file() {
    let rt = runtime(1);
    let file = File::open(std::env::current_exe().unwrap()).unwrap();
    let err = rt.block_on(async { AsyncFd::new(file) }).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn std_conversions() {
    let rt = runtime(1);
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let (a, b) = rt
        .block_on(async {
            Ok::<_, io::Error>((UnixStream::from_std(a)?, UnixStream::from_std(b)?))
        })
        .unwrap();
    assert_eq!(io_sources(&rt), 2);
    let mut a = a.into_std().unwrap();
    assert_eq!(io_sources(&rt), 1);
    a.set_nonblocking(false).unwrap();
    a.write_all(b"std").unwrap();
    rt.block_on(async {
        let mut b = b;
        let mut buf = [0u8; 3];
        b.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"std");
    });
    assert_eq!(io_sources(&rt), 0);
}
