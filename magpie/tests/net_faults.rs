//! Networking when things go wrong: a peer that resets mid-read and mid-write, futures and
//! tasks dropped while they wait, descriptor exhaustion at `accept`, the runtime dropped under
//! open connections, and no descriptor or registration left behind after any of it.
//!
//! The tests that count the process's descriptors (`/proc/self/fd`) or lower its descriptor
//! limit run in a child process of their own (`common::child_test`), where no other test
//! opens or closes descriptors meanwhile.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(all(target_os = "linux", not(any(loom, shuttle))))]

mod common;
mod net_support;

use std::io::{self, ErrorKind, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{child_test, eventually, is_child, run_child, Watchdog};
use magpie::net::{TcpListener, TcpStream};
use magpie::JoinHandle;
use net_support::{
    fd_count, io_sources, poll_once, reset_on_close, runtime, CountPolls, NoteWaiting,
};

/// Runs the test `name` in a child process (mode `mode`) and fails unless it passes.
fn in_child(name: &str, mode: &str) {
    let out = run_child(child_test(name, mode));
    assert!(
        out.status.success() && out.stdout.contains("1 passed"),
        "the child test {name} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

/// A server task reading a connection whose client resets (`SO_LINGER` 0, then close) while
/// the read waits gets an error back, as a value: no panic, no hang.
#[test]
fn peer_reset_mid_read_is_an_error() {
    let rt = runtime(2);
    let dog = Watchdog::start("peer_reset_mid_read_is_an_error");
    dog.phase("reset while the server reads", &rt);
    let listener = Arc::new(rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind"));
    let addr = listener.local_addr().unwrap();
    for round in 0..8 {
        let waiting = Arc::new(AtomicBool::new(false));
        let server = rt.spawn({
            let listener = listener.clone();
            let waiting = waiting.clone();
            async move {
                let (mut stream, _) = listener.accept().await?;
                // The first read gets the byte sent; the second waits for the reset.
                assert_eq!(stream.read(&mut [0u8; 64]).await?, 1);
                let second = async move { stream.read(&mut [0u8; 64]).await };
                NoteWaiting::new(second, &waiting).await
            }
        });
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.write_all(b"x").unwrap();
        eventually("the server waits in its second read", || {
            waiting.load(Relaxed)
        });
        reset_on_close(&client);
        drop(client);
        let result = server.join().expect("the server task panicked");
        let err = result.expect_err("a reset connection read successfully");
        assert_eq!(
            err.kind(),
            ErrorKind::ConnectionReset,
            "round {round}: {err}"
        );
    }
    drop(listener);
    assert_eq!(io_sources(&rt), 0);
}

/// A server task writing to a client that stops reading and then resets gets an error back
/// from `write`, whether the reset finds it waiting for room or between writes.
#[test]
fn peer_reset_mid_write_is_an_error() {
    let rt = runtime(2);
    let dog = Watchdog::start("peer_reset_mid_write_is_an_error");
    dog.phase("reset while the server writes", &rt);
    let progress = dog.progress();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let server = rt.spawn({
        let written = written.clone();
        async move {
            let (mut stream, _) = listener.accept().await?;
            let chunk = vec![0x5a; 64 * 1024];
            loop {
                let n = stream.write(&chunk).await?;
                written.fetch_add(n, Relaxed);
                progress.fetch_add(1, Relaxed);
            }
        }
    });
    let client = std::net::TcpStream::connect(addr).unwrap();
    // Well into the stream (the client never reads, so the server soon waits for room).
    eventually("the server has written 1 MiB", || {
        written.load(Relaxed) >= 1 << 20
    });
    reset_on_close(&client);
    drop(client);
    let result: io::Result<()> = server.join().expect("the server task panicked");
    let err = result.expect_err("writes to a reset connection kept succeeding");
    assert!(
        matches!(
            err.kind(),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ),
        "unexpected error: {err}"
    );
    assert_eq!(io_sources(&rt), 0);
}

/// A future that owns a stream and waits in `read`, dropped: the stream's registration goes
/// with it, at once.
#[test]
fn dropping_a_waiting_read_leaves_no_registration() {
    let rt = runtime(1);
    let dog = Watchdog::start("dropping_a_waiting_read_leaves_no_registration");
    dog.phase("drop a waiting read", &rt);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = std::net::TcpStream::connect(addr).unwrap();
    let (server, _) = rt.block_on(listener.accept()).unwrap();
    assert_eq!(io_sources(&rt), 2);
    let mut read = Box::pin(async move {
        let mut server = server;
        server.read(&mut [0u8; 8]).await
    });
    // Polled inside the runtime's context, then dropped outside it.
    let first = rt.block_on(async { poll_once(read.as_mut()) });
    assert!(
        first.is_pending(),
        "nothing was sent, yet the read finished"
    );
    assert_eq!(io_sources(&rt), 2);
    drop(read);
    assert_eq!(io_sources(&rt), 1, "the dropped stream is still registered");
    drop(listener);
    assert_eq!(io_sources(&rt), 0);
}

/// Tasks blocked in `read` and in `accept`, aborted: their sockets are dropped with their
/// futures, and nothing stays registered.
#[test]
fn aborting_tasks_blocked_in_io_leaves_no_registration() {
    let rt = runtime(2);
    let dog = Watchdog::start("aborting_tasks_blocked_in_io_leaves_no_registration");
    dog.phase("abort blocked tasks", &rt);
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::net::TcpStream::connect(addr).unwrap();
    let (server, _) = rt.block_on(listener.accept()).unwrap();
    assert_eq!(io_sources(&rt), 2);

    let read_waiting = Arc::new(AtomicBool::new(false));
    let reader = rt.spawn(NoteWaiting::new(
        async move {
            let mut server = server;
            server.read(&mut [0u8; 8]).await
        },
        &read_waiting,
    ));
    let accept_waiting = Arc::new(AtomicBool::new(false));
    let acceptor = rt.spawn(NoteWaiting::new(
        async move { listener.accept().await.map(drop) },
        &accept_waiting,
    ));
    eventually("both tasks wait", || {
        read_waiting.load(Relaxed) && accept_waiting.load(Relaxed)
    });
    reader.abort();
    acceptor.abort();
    assert!(reader.join().unwrap_err().is_cancelled());
    assert!(acceptor.join().unwrap_err().is_cancelled());
    // The handle resolves once the future has been dropped.
    assert_eq!(
        io_sources(&rt),
        0,
        "an aborted task's socket is still registered"
    );
    drop(client);
}

const CYCLES_CHILD: &str = "net-connect-close-cycles";

/// 10^4 connect, accept, close cycles leave the process with the descriptors it had, and
/// the runtime with only the listener registered.
#[test]
fn connect_accept_close_cycles_leave_no_descriptor_behind() {
    in_child("child_connect_accept_close_cycles", CYCLES_CHILD);
}

#[test]
fn child_connect_accept_close_cycles() {
    if !is_child(CYCLES_CHILD) {
        return;
    }
    const CYCLES: usize = 10_000;
    let rt = runtime(2);
    let dog = Watchdog::start("child_connect_accept_close_cycles");
    dog.phase("cycles", &rt);
    let progress = dog.progress();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let before = fd_count();
    rt.block_on(async {
        for i in 0..CYCLES {
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            // Alternate who closes first, and now and then close with data in flight.
            if i % 3 == 0 {
                client.write_all(b"bye").await.unwrap();
            }
            if i % 2 == 0 {
                drop(client);
                let _ = server.read(&mut [0u8; 8]).await;
            } else {
                drop(server);
                let _ = client.read(&mut [0u8; 8]).await;
            }
            progress.fetch_add(1, Relaxed);
        }
    });
    assert_eq!(
        fd_count(),
        before,
        "descriptors leaked over {CYCLES} cycles"
    );
    assert_eq!(
        io_sources(&rt),
        1,
        "registrations leaked (only the listener should remain)"
    );
    drop(listener);
    assert_eq!(io_sources(&rt), 0);
}

const EMFILE_CHILD: &str = "net-accept-emfile";

/// With the descriptor table full, `accept` returns `EMFILE` (and its future neither hangs
/// nor spins), the pending connection stays in the backlog, and once descriptors are freed
/// the next `accept` takes it, with no new connection needed to wake it.
#[test]
fn accept_under_descriptor_exhaustion_errs_then_recovers() {
    in_child("child_accept_under_descriptor_exhaustion", EMFILE_CHILD);
}

#[test]
fn child_accept_under_descriptor_exhaustion() {
    if !is_child(EMFILE_CHILD) {
        return;
    }
    /// `EMFILE` errors seen before the test frees descriptors.
    const ERRORS_WHILE_FULL: u64 = 5;

    let rt = runtime(2);
    let dog = Watchdog::start("child_accept_under_descriptor_exhaustion");
    dog.phase("accept with a full table", &rt);
    let progress = dog.progress();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();

    // A small limit, then fill the table up to it.
    let limit = fd_count() as u64 + 16;
    set_fd_limit(limit);
    let mut fillers = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(file) => fillers.push(file),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("unexpected error filling the table: {e}"),
        }
    }
    // Room for exactly the client's socket: the accepted one will not fit.
    drop(fillers.pop());
    let mut client = std::net::TcpStream::connect(addr).unwrap();
    client.write_all(b"waited").unwrap();
    assert!(
        std::fs::File::open("/dev/null").is_err(),
        "the table is not full"
    );

    let accept_polls = Arc::new(AtomicU64::new(0));
    let (mut server, errors) = rt.block_on(async {
        let mut errors = 0u64;
        let mut fillers = Some(fillers);
        loop {
            match CountPolls::new(listener.accept(), &accept_polls).await {
                Ok((server, _)) => break (server, errors),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}");
                    errors += 1;
                    progress.fetch_add(1, Relaxed);
                    if errors == ERRORS_WHILE_FULL {
                        // Service can resume: free the descriptors. No new connection
                        // arrives, so the next accept must try the backlog at once.
                        drop(fillers.take());
                    }
                    // The pause a server's accept loop takes after `EMFILE` (see the docs
                    // of `accept`); not a synchronization.
                    magpie::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    });
    assert_eq!(
        errors, ERRORS_WHILE_FULL,
        "accept succeeded with a full table"
    );
    // Each failing accept returned after a poll or two (the first may find no readiness yet):
    // no accept future spins on the error, or waits on it for good.
    let polls = accept_polls.load(Relaxed);
    assert!(
        polls <= 3 * (ERRORS_WHILE_FULL + 1),
        "{polls} polls of accept futures for {ERRORS_WHILE_FULL} errors and one success"
    );
    let mut buf = [0u8; 6];
    rt.block_on(server.read_exact(&mut buf)).unwrap();
    assert_eq!(&buf, b"waited");

    // And a fresh connection is served too.
    let _second = std::net::TcpStream::connect(addr).unwrap();
    rt.block_on(listener.accept()).unwrap();
    drop(client);
}

fn set_fd_limit(soft: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid resource and a `rlimit` to write into.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(rc, 0, "getrlimit: {}", io::Error::last_os_error());
    limit.rlim_cur = soft as libc::rlim_t;
    // SAFETY: a valid resource and a `rlimit` to read from.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", io::Error::last_os_error());
}

const DROP_CHILD: &str = "net-runtime-drop";

/// Dropping the runtime while tasks wait in `accept`, in `read` on accepted connections and
/// in `read` on their clients resolves every one of their handles, and closes every
/// descriptor the runtime and the tasks had (the driver's too).
#[test]
fn dropping_the_runtime_resolves_handles_and_closes_descriptors() {
    in_child("child_drop_runtime_under_open_connections", DROP_CHILD);
}

#[test]
fn child_drop_runtime_under_open_connections() {
    if !is_child(DROP_CHILD) {
        return;
    }
    const CONNECTIONS: usize = 8;
    const TASKS: usize = 1 + 2 * CONNECTIONS;
    type Task = (JoinHandle<io::Result<()>>, Arc<AtomicBool>);

    let before = fd_count();
    let rt = runtime(2);
    let dog = Watchdog::start("child_drop_runtime_under_open_connections");
    dog.phase("open connections", &rt);
    // Every task, with the flag that says it has waited.
    let (tasks_tx, tasks_rx) = mpsc::channel::<Task>();

    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    // The acceptor: a reader task per connection, then a last accept that never completes.
    let acceptor_waits = Arc::new(AtomicBool::new(false));
    let acceptor = rt.spawn(NoteWaiting::new(
        {
            let tasks_tx = tasks_tx.clone();
            async move {
                for _ in 0..CONNECTIONS {
                    let (mut stream, _) = listener.accept().await?;
                    let waits = Arc::new(AtomicBool::new(false));
                    let reader = magpie::spawn(NoteWaiting::new(
                        async move {
                            let n = stream.read(&mut [0u8; 8]).await?;
                            // End of stream: the client's task was dropped by the shutdown
                            // first, closing its socket, and this read saw it before this
                            // task was cancelled. A resolution, not data.
                            if n == 0 {
                                return Err(std::io::ErrorKind::UnexpectedEof.into());
                            }
                            panic!("read {n} bytes from a silent client");
                        },
                        &waits,
                    ));
                    tasks_tx.send((reader, waits)).unwrap();
                }
                let _ = listener.accept().await?;
                panic!("accepted a connection nobody made");
            }
        },
        &acceptor_waits,
    ));
    tasks_tx.send((acceptor, acceptor_waits)).unwrap();
    // The clients, each waiting in a read too.
    for _ in 0..CONNECTIONS {
        let waits = Arc::new(AtomicBool::new(false));
        let client = rt.spawn(NoteWaiting::new(
            async move {
                let mut stream = TcpStream::connect(addr).await?;
                let n = stream.read(&mut [0u8; 8]).await?;
                // As in the reader above: the server's task went first.
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                panic!("read {n} bytes from a silent server");
            },
            &waits,
        ));
        tasks_tx.send((client, waits)).unwrap();
    }
    drop(tasks_tx);
    let tasks: Vec<Task> = (0..TASKS)
        .map(|_| {
            tasks_rx
                .recv_timeout(common::DEADLINE)
                .expect("a task was never spawned")
        })
        .collect();
    eventually("every connection is open and registered", || {
        io_sources(&rt) == TASKS as u64
    });
    eventually("every task waits", || {
        tasks.iter().all(|(_, waits)| waits.load(Relaxed))
    });

    dog.phase("drop the runtime", &rt);
    drop(rt);
    for (handle, _) in tasks {
        // Cancelled by the shutdown, or failed with the driver's error if the task ran
        // once more before: resolved either way, and never a panic (a read that returned
        // data, or an accept that returned a connection, would have panicked).
        match handle.join() {
            Ok(result) => assert!(result.is_err(), "a task finished without an error"),
            Err(e) => assert!(e.is_cancelled(), "{e}"),
        }
    }
    drop(dog);
    assert_eq!(
        fd_count(),
        before,
        "descriptors left open after the runtime was dropped"
    );
}

/// After the runtime is dropped, a socket registered with it fails every operation (its
/// driver is gone) instead of waiting for good, even when polled under another runtime;
/// sockets made under that other runtime register with it.
#[test]
fn a_stream_outliving_its_runtime_fails_its_operations() {
    let rt = runtime(1);
    let dog = Watchdog::start("a_stream_outliving_its_runtime_fails_its_operations");
    dog.phase("setup", &rt);
    let (listener, mut client, mut server) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (listener, client, server)
    });
    drop(dog);
    drop(rt);
    // Polled on another runtime: the sockets still belong to the old driver.
    let other = runtime(1);
    let dog = Watchdog::start("a_stream_outliving_its_runtime_fails_its_operations");
    dog.phase("use the orphaned sockets", &other);
    other.block_on(async {
        assert!(server.read(&mut [0u8; 8]).await.is_err());
        assert!(client.write_all(b"x").await.is_err());
        assert!(client.readable().await.is_err());
        assert!(listener.accept().await.is_err());
        // Nor can a new socket register with the old driver: it registers with `other`.
        let fresh = TcpListener::bind("127.0.0.1:0").await.unwrap();
        assert_eq!(io_sources(&other), 1);
        drop(fresh);
    });
    // Deregistering from the shut-down driver still works.
    let std_client = client
        .into_std()
        .expect("into_std after the runtime was dropped");
    std_client.set_nonblocking(false).unwrap();
}
