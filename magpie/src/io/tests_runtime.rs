//! The I/O driver inside a runtime: who turns it, and that readiness reaches tasks whether
//! the workers sleep, are all busy, or one of them is stuck in a long poll.

use std::future::poll_fn;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::time::Duration;

use mio::Interest;

use super::readiness::Direction;
use super::tests::pair;
use crate::Runtime;

/// Registers `stream` with the current runtime's driver and reads until `want` bytes came,
/// the way `magpie::net` does: poll readiness, try, clear on `WouldBlock`.
async fn read_exactly(mut stream: mio::net::TcpStream, want: usize) -> Vec<u8> {
    let handle = super::current_handle();
    let registration = handle.register(&mut stream, Interest::READABLE).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < want {
        let event = poll_fn(|cx| registration.poll_ready(Direction::Read, cx))
            .await
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                registration.clear_readiness(event);
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }
    handle.deregister(&mut stream, registration).unwrap();
    got
}

/// Returns once every worker is inside a park (each park is counted after the worker tried
/// the driver role and before it blocks; its unpark after it wakes). With a source
/// registered, one of the parked workers then holds the role (sleep/README.md, "Why no
/// readiness is left unwaited for"), so only its `epoll_wait` can deliver readiness.
fn wait_until_every_worker_parks(rt: &Runtime) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let stats = rt.stats();
        if stats.workers.iter().all(|w| w.parks > w.unparks) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the workers never all parked: {stats:?}"
        );
        std::thread::yield_now();
    }
}

/// Waits for a result, failing instead of hanging if it never comes (a lost wakeup).
fn recv<T>(rx: &mpsc::Receiver<T>) -> T {
    rx.recv_timeout(Duration::from_secs(20))
        .expect("no result within 20 s: readiness never reached the task")
}

#[test]
fn readiness_wakes_a_task_while_every_worker_sleeps() {
    for workers in [1, 2, 4] {
        let rt = Runtime::builder().worker_threads(workers).build().unwrap();
        for round in 0..20 {
            let (mut client, server) = pair();
            let (tx, rx) = mpsc::channel();
            let _task = rt.spawn(async move {
                tx.send(read_exactly(server, 3).await).unwrap();
            });
            // Only when every worker sleeps: then nothing but the driver's `epoll_wait` can
            // deliver the readiness (idle workers in their yield rounds turn the driver
            // themselves).
            wait_until_every_worker_parks(&rt);
            client.write_all(&[round, 1, 2]).unwrap();
            assert_eq!(recv(&rx), vec![round, 1, 2]);
        }
        let stats = rt.stats();
        let blocking: u64 = stats.workers.iter().map(|w| w.driver_polls_blocking).sum();
        let events: u64 = stats.workers.iter().map(|w| w.io_events).sum();
        assert!(
            blocking > 0,
            "no worker parked in the driver ({workers} workers)"
        );
        assert!(events > 0, "no I/O event delivered ({workers} workers)");
        assert_eq!(
            stats.io_sources, 0,
            "a deregistered source is still counted"
        );
    }
}

#[test]
fn readiness_reaches_a_task_while_every_worker_is_busy() {
    // One worker, kept busy by a task that yields forever until the read is done: nobody
    // parks, so only the busy worker's maintenance turns of the driver deliver readiness.
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let (mut client, server) = pair();
    let done = Arc::new(AtomicBool::new(false));
    let spinner = {
        let done = done.clone();
        rt.spawn(async move {
            let mut yields = 0u64;
            while !done.load(SeqCst) {
                crate::task::yield_now().await;
                yields += 1;
            }
            yields
        })
    };
    let (tx, rx) = mpsc::channel();
    let reader = {
        let done = done.clone();
        rt.spawn(async move {
            let got = read_exactly(server, 4).await;
            done.store(true, SeqCst);
            tx.send(got).unwrap();
        })
    };
    client.write_all(b"busy").unwrap();
    assert_eq!(recv(&rx), b"busy");
    rt.block_on(reader).unwrap();
    assert!(rt.block_on(spinner).unwrap() > 0);
    let nonblocking: u64 = rt
        .stats()
        .workers
        .iter()
        .map(|w| w.driver_polls_nonblocking)
        .sum();
    assert!(nonblocking > 0, "the busy worker never turned the driver");
}

#[test]
fn readiness_reaches_a_task_while_another_is_stuck_in_a_long_poll() {
    // Two workers; one task spins inside a single poll until the read is done. The other
    // worker must serve the reader: whichever held the driver role, the stuck one does not.
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    for _ in 0..10 {
        let (mut client, server) = pair();
        let done = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let stuck = {
            let done = done.clone();
            rt.spawn(async move {
                started_tx.send(()).unwrap();
                while !done.load(SeqCst) {
                    std::hint::spin_loop();
                }
            })
        };
        recv(&started_rx);
        let (tx, rx) = mpsc::channel();
        let reader = rt.spawn(async move {
            tx.send(read_exactly(server, 5).await).unwrap();
        });
        client.write_all(b"stuck").unwrap();
        let got = recv(&rx);
        done.store(true, SeqCst);
        assert_eq!(got, b"stuck");
        rt.block_on(reader).unwrap();
        rt.block_on(stuck).unwrap();
    }
}

#[test]
fn a_task_waiting_on_io_gets_an_error_when_its_runtime_drops() {
    // The read is awaited on another thread (`block_on` of another runtime is not needed: a
    // plain `block_on` of the future polls it there), registered with `rt`'s driver. Not
    // `magpie::block_on`: outside a runtime it starts the global one, whose threads never
    // exit, and Miri fails a test binary that ends with threads still running.
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let (_client, mut server) = pair();
    let handle = rt.block_on(async { super::current_handle() });
    let registration = handle.register(&mut server, Interest::READABLE).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let result = futures::executor::block_on(poll_fn(|cx| {
            match registration.poll_ready(Direction::Read, cx) {
                Poll::Ready(r) => Poll::Ready(r.map(|_| ())),
                Poll::Pending => {
                    let _ = tx.send(());
                    Poll::Pending
                }
            }
        }));
        result.is_err()
    });
    recv(&rx);
    drop(rt);
    assert!(waiter.join().unwrap(), "the wait did not end in an error");
}
