//! TCP through `magpie::net`: echo over many connections on 1, 2 and 4 workers; `split` and
//! `into_split` with both directions busy at once; half-close; the cooperative budget with a
//! socket that is always ready; addresses and conversions.
//!
//! Every test runs under a [`Watchdog`]: a lost wakeup (a task that waits for readiness the
//! driver never delivers) aborts the test binary with a report instead of hanging it.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(not(any(loom, shuttle)))]

mod common;
mod net_support;

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use common::Watchdog;
use magpie::net::{TcpListener, TcpStream};
use net_support::{io_sources, pattern, runtime};

/// Connections per echo test, all open at once.
const CONNECTIONS: usize = 64;
/// Messages per connection, each answered before the next is sent.
const ROUNDS: u64 = 16;

/// Accepts `connections` connections and echoes each on a task of its own until its client
/// shuts its side down; returns once every echo task has.
async fn echo_server(listener: TcpListener, connections: usize) -> io::Result<()> {
    let mut echoes = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (socket, _) = listener.accept().await?;
        echoes.push(magpie::spawn(echo(socket)));
    }
    for echo in echoes {
        echo.await.expect("echo task")?;
    }
    Ok(())
}

/// Echoes until end of stream.
async fn echo(mut socket: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match socket.read(&mut buf).await? {
            0 => return Ok(()),
            n => socket.write_all(&buf[..n]).await?,
        }
    }
}

/// Sends `ROUNDS` messages of assorted sizes, checks each echo, then half-closes and expects
/// end of stream back.
async fn echo_client(addr: SocketAddr, id: u64, progress: Arc<AtomicU64>) -> io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    for round in 0..ROUNDS {
        let seed = id * 1000 + round;
        let message = pattern(seed, 1 + (seed as usize * 997) % 8192);
        stream.write_all(&message).await?;
        let mut echoed = vec![0u8; message.len()];
        stream.read_exact(&mut echoed).await?;
        assert!(
            echoed == message,
            "connection {id} round {round}: wrong echo"
        );
        progress.fetch_add(1, Relaxed);
    }
    stream.shutdown().await?;
    assert_eq!(stream.read(&mut [0u8; 1]).await?, 0, "no end of stream");
    Ok(())
}

fn echo_many_connections(workers: usize) {
    let rt = runtime(workers);
    let dog = Watchdog::start(&format!("echo_many_connections({workers} workers)"));
    dog.phase("echo", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = magpie::spawn(echo_server(listener, CONNECTIONS));
        let clients: Vec<_> = (0..CONNECTIONS as u64)
            .map(|id| magpie::spawn(echo_client(addr, id, progress.clone())))
            .collect();
        for client in clients {
            client.await.expect("client task").expect("client");
        }
        server.await.expect("server task").expect("server");
    });
    assert_eq!(
        io_sources(&rt),
        0,
        "every socket was dropped, but registrations remain"
    );
}

#[test]
fn echo_many_connections_on_one_worker() {
    echo_many_connections(1);
}

#[test]
fn echo_many_connections_on_two_workers() {
    echo_many_connections(2);
}

#[test]
fn echo_many_connections_on_four_workers() {
    echo_many_connections(4);
}

/// Bytes pushed through the echo in the split tests: far more than the socket buffers of
/// both ends hold, so writing all of it before reading would deadlock (the echo blocks on a
/// full buffer towards us). Only reading and writing at once finishes.
const BULK: usize = 4 << 20;

/// The end of the chunk that starts at `sent`: uneven sizes, up to 64 KiB.
fn chunk_end(sent: usize) -> usize {
    (sent + 1 + sent % 65_537).min(BULK)
}

#[test]
fn split_halves_read_and_write_at_once() {
    let rt = runtime(2);
    let dog = Watchdog::start("split_halves_read_and_write_at_once");
    dog.phase("bulk echo through borrowed halves", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let server = magpie::spawn(echo_server(listener, 1));
        let (mut reader, mut writer) = client.split();
        let expected = pattern(7, BULK);
        let writing = async {
            let mut sent = 0;
            while sent < BULK {
                let end = chunk_end(sent);
                writer.write_all(&expected[sent..end]).await?;
                sent = end;
            }
            writer.shutdown().await
        };
        let reading = async {
            let mut received = Vec::with_capacity(BULK);
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match reader.read(&mut buf).await? {
                    0 => return Ok::<_, io::Error>(received),
                    n => received.extend_from_slice(&buf[..n]),
                }
                progress.fetch_add(1, Relaxed);
            }
        };
        let (written, received) = futures::future::join(writing, reading).await;
        written.unwrap();
        assert!(received.unwrap() == expected, "the echo differs");
        server.await.unwrap().unwrap();
    });
}

#[test]
fn owned_halves_in_two_tasks_then_reunite() {
    let rt = runtime(2);
    let dog = Watchdog::start("owned_halves_in_two_tasks_then_reunite");
    dog.phase("bulk echo through owned halves", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let server = magpie::spawn(echo_server(listener, 1));
        let (mut reader, mut writer) = client.into_split();
        // The write half moves to a task of its own and comes back when done.
        let writing = magpie::spawn(async move {
            let data = pattern(7, BULK);
            let mut sent = 0;
            while sent < BULK {
                let end = chunk_end(sent);
                writer.write_all(&data[sent..end]).await?;
                sent = end;
            }
            Ok::<_, io::Error>(writer)
        });
        let expected = pattern(7, BULK);
        let mut received = vec![0u8; BULK];
        let mut got = 0;
        while got < BULK {
            let n = reader.read(&mut received[got..]).await.unwrap();
            assert_ne!(n, 0, "end of stream after {got} bytes");
            got += n;
            progress.fetch_add(1, Relaxed);
        }
        let writer = writing.await.unwrap().unwrap();
        assert!(received == expected, "the echo differs");

        // Both halves back together: the same connection, still open both ways.
        let mut client = reader.reunite(writer).expect("halves of one stream");
        client.write_all(b"after reunite").await.unwrap();
        let mut buf = [0u8; 13];
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"after reunite");
        drop(client);
        server.await.unwrap().unwrap();
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn reunite_refuses_halves_of_two_streams() {
    let rt = runtime(1);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).await.unwrap();
        let b = TcpStream::connect(addr).await.unwrap();
        let (a_read, a_write) = a.into_split();
        let (b_read, b_write) = b.into_split();
        let magpie::net::tcp::ReuniteError(a_read, b_write) =
            a_read.reunite(b_write).expect_err("halves of two streams");
        // The halves came back intact: each reunites with its own.
        a_read.reunite(a_write).expect("a's halves");
        b_write.reunite(b_read).expect("b's halves");
    });
}

#[test]
fn half_close_reads_as_end_of_stream_on_the_peer() {
    let rt = runtime(2);
    let dog = Watchdog::start("half_close_reads_as_end_of_stream_on_the_peer");
    dog.phase("half-close", &rt);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();

        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        // Writing after the shutdown fails; reading still works.
        let err = client.write(b"more").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BrokenPipe, "{err}");

        let mut request = Vec::new();
        let mut buf = [0u8; 4];
        loop {
            match server.read(&mut buf).await.unwrap() {
                0 => break,
                n => request.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(request, b"request");
        // End of stream is final: every later read says so at once.
        for _ in 0..3 {
            assert_eq!(server.read(&mut buf).await.unwrap(), 0);
        }
        server.write_all(b"response").await.unwrap();
        drop(server);
        let mut response = [0u8; 8];
        client.read_exact(&mut response).await.unwrap();
        assert_eq!(&response, b"response");
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    });
}

#[test]
fn dropping_the_owned_write_half_shuts_the_write_side_down() {
    let rt = runtime(1);
    let dog = Watchdog::start("dropping_the_owned_write_half_shuts_the_write_side_down");
    dog.phase("drop the write half", &rt);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let (mut reader, writer) = client.into_split();
        drop(writer);
        assert_eq!(server.read(&mut [0u8; 8]).await.unwrap(), 0);
        // The read half still works.
        server.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 2];
        reader.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
    });
}

/// A task that reads a socket at end of stream in a loop never waits: every read completes
/// at once. On a single worker, only the cooperative budget makes it yield, so that the other
/// task runs and tells it to stop. Without the budget the second task never runs and the
/// watchdog fires (the reader does not count as progress).
#[test]
fn an_always_ready_socket_does_not_starve_its_worker() {
    let rt = runtime(1);
    let dog = Watchdog::start("an_always_ready_socket_does_not_starve_its_worker");
    dog.phase("reader and ticker on one worker", &rt);
    let progress = dog.progress();
    let before = rt.stats();
    let reads = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        drop(client);
        // Wait for the end of stream once, so that every later read is ready.
        assert_eq!(server.read(&mut [0u8; 8]).await.unwrap(), 0);

        let stop = Arc::new(AtomicBool::new(false));
        let reader = magpie::spawn({
            let stop = stop.clone();
            async move {
                let mut reads = 0u64;
                while !stop.load(Relaxed) {
                    assert_eq!(server.read(&mut [0u8; 8]).await.unwrap(), 0);
                    reads += 1;
                }
                reads
            }
        });
        let ticker = magpie::spawn(async move {
            for _ in 0..10 {
                progress.fetch_add(1, Relaxed);
                magpie::task::yield_now().await;
            }
            stop.store(true, Relaxed);
        });
        ticker.await.unwrap();
        reader.await.unwrap()
    });
    assert!(reads > 0, "the reader never read");
    let forced = |stats: &magpie::Stats| -> u64 {
        stats.workers.iter().map(|w| w.budget_forced_yields).sum()
    };
    common::quiesce(&rt);
    assert!(
        forced(&rt.stats()) > forced(&before),
        "the reader was never made to yield ({reads} reads)"
    );
}

#[test]
fn connect_reports_refusal_and_tries_every_address() {
    let rt = runtime(1);
    let dog = Watchdog::start("connect_reports_refusal_and_tries_every_address");
    dog.phase("connect", &rt);
    rt.block_on(async {
        // A port nobody listens on: bound, then closed.
        let closed = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let err = TcpStream::connect(closed).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap();
        let stream = TcpStream::connect(&[closed, open][..]).await.unwrap();
        assert_eq!(stream.peer_addr().unwrap(), open);
        let err = TcpStream::connect(&[][..]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn host_names_resolve_off_the_worker() {
    let rt = runtime(1);
    let dog = Watchdog::start("host_names_resolve_off_the_worker");
    dog.phase("lookup", &rt);
    rt.block_on(async {
        let listener = TcpListener::bind(("localhost", 0)).await.unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
        let port = listener.local_addr().unwrap().port();
        let addrs: Vec<_> = magpie::net::lookup_host(format!("localhost:{port}"))
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty());
        let err = magpie::net::lookup_host("no such host.invalid:1")
            .await
            .err()
            .expect("an invalid name resolved");
        drop(err);
    });
}

#[test]
fn std_conversions_register_and_deregister() {
    let rt = runtime(1);
    let dog = Watchdog::start("std_conversions_register_and_deregister");
    dog.phase("conversions", &rt);
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let (listener, stream) = rt.block_on(async {
        let listener = TcpListener::from_std(std_listener).unwrap();
        let stream = TcpStream::connect(addr).await.unwrap();
        (listener, stream)
    });
    assert_eq!(io_sources(&rt), 2);

    // Back to std: deregistered at once, and still connected.
    let mut std_stream = stream.into_std().unwrap();
    assert_eq!(io_sources(&rt), 1);
    std_stream.set_nonblocking(false).unwrap();
    std::io::Write::write_all(&mut std_stream, b"from std").unwrap();

    rt.block_on(async {
        let (mut server, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 8];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"from std");
        // And from std again.
        let mut stream = TcpStream::from_std(std_stream).unwrap();
        server.write_all(b"to magpie").await.unwrap();
        let mut buf = [0u8; 9];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"to magpie");
        let std_listener = listener.into_std().unwrap();
        assert_eq!(std_listener.local_addr().unwrap(), addr);
    });
    assert_eq!(io_sources(&rt), 0);
}
