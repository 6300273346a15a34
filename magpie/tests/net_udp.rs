//! UDP through `magpie::net::UdpSocket`: `send_to`/`recv_from` and connected `send`/`recv`
//! between tasks on several workers, the `try_*` operations and readiness, a receiver that
//! waits before anything is sent, and conversions.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(not(any(loom, shuttle)))]

mod common;
mod net_support;

use std::io::ErrorKind;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use common::Watchdog;
use magpie::net::UdpSocket;
use net_support::{io_sources, pattern, runtime};

/// Datagrams per exchange: each is answered before the next is sent, so none is lost to a
/// full receive buffer (loopback drops nothing else).
const DATAGRAMS: u64 = 200;

#[test]
fn send_to_and_recv_from_between_tasks() {
    let rt = runtime(2);
    let dog = Watchdog::start("send_to_and_recv_from_between_tasks");
    dog.phase("ping-pong", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let server_addr = server.local_addr().unwrap();
        let client_addr = client.local_addr().unwrap();
        // The server answers each datagram with its bytes reversed, to the sender.
        let answering = magpie::spawn(async move {
            let mut buf = [0u8; 2048];
            for _ in 0..DATAGRAMS {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                assert_eq!(from, client_addr);
                buf[..n].reverse();
                assert_eq!(server.send_to(&buf[..n], from).await.unwrap(), n);
            }
        });
        let mut buf = [0u8; 2048];
        for i in 0..DATAGRAMS {
            let message = pattern(i, 1 + (i as usize * 37) % 1500);
            let sent = client.send_to(&message, server_addr).await.unwrap();
            assert_eq!(sent, message.len());
            let (n, from) = client.recv_from(&mut buf).await.unwrap();
            assert_eq!(from, server_addr);
            let mut expected = message.clone();
            expected.reverse();
            assert_eq!(&buf[..n], &expected[..], "datagram {i}");
            progress.fetch_add(1, Relaxed);
        }
        answering.await.unwrap();
    });
    assert_eq!(io_sources(&rt), 0);
}

#[test]
fn connected_send_and_recv() {
    let rt = runtime(2);
    let dog = Watchdog::start("connected_send_and_recv");
    dog.phase("connected ping-pong", &rt);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.connect(b.local_addr().unwrap()).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
        // A connected socket takes datagrams from its peer only.
        stranger
            .send_to(b"not for you", b.local_addr().unwrap())
            .await
            .unwrap();
        a.send(b"hello").await.unwrap();
        let mut buf = [0u8; 32];
        let n = b.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"hello");
        b.send(b"world").await.unwrap();
        let n = a.recv(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"world");
    });
}

/// A receiver that waits before anything is sent is woken by the datagram; a sender on
/// another worker sends it only once the receiver waits.
#[test]
fn a_waiting_receiver_is_woken() {
    let rt = runtime(2);
    let dog = Watchdog::start("a_waiting_receiver_is_woken");
    dog.phase("wake a receiver", &rt);
    let progress = dog.progress();
    rt.block_on(async {
        let receiver = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = receiver.local_addr().unwrap();
        for round in 0..100u8 {
            let waiting = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let receiving = magpie::spawn(net_support::NoteWaiting::new(
                {
                    let receiver = receiver.clone();
                    async move {
                        let mut buf = [0u8; 8];
                        let (n, _) = receiver.recv_from(&mut buf).await.unwrap();
                        (n, buf[0])
                    }
                },
                &waiting,
            ));
            while !waiting.load(Relaxed) {
                magpie::task::yield_now().await;
            }
            sender.send_to(&[round], to).await.unwrap();
            assert_eq!(receiving.await.unwrap(), (1, round));
            progress.fetch_add(1, Relaxed);
        }
    });
}

#[test]
fn try_operations_and_readiness() {
    let rt = runtime(1);
    let dog = Watchdog::start("try_operations_and_readiness");
    dog.phase("try_*", &rt);
    rt.block_on(async {
        let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let err = b.try_recv_from(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);
        a.writable().await.unwrap();
        assert_eq!(a.try_send_to(b"x", b.local_addr().unwrap()).unwrap(), 1);
        // `readable` then `try_recv_from`, with the retry a spurious readiness needs.
        let (n, from) = loop {
            b.readable().await.unwrap();
            match b.try_recv_from(&mut [0u8; 8]) {
                Ok(got) => break got,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!((n, from), (1, a.local_addr().unwrap()));
        // Drained: the next try says so (and clears the readiness it saw).
        let err = b.try_recv_from(&mut [0u8; 8]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WouldBlock);

        a.connect(b.local_addr().unwrap()).await.unwrap();
        b.connect(a.local_addr().unwrap()).await.unwrap();
        assert_eq!(a.try_send(b"y").unwrap(), 1);
        let n = loop {
            b.readable().await.unwrap();
            match b.try_recv(&mut [0u8; 8]) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(n, 1);
    });
}

#[test]
fn unconnected_send_and_empty_targets_fail() {
    let rt = runtime(1);
    rt.block_on(async {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        assert!(socket.peer_addr().is_err());
        assert!(socket.send(b"to nobody").await.is_err());
        let none: &[std::net::SocketAddr] = &[];
        let err = socket.send_to(b"x", none).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    });
}

#[test]
fn std_conversions() {
    let rt = runtime(1);
    let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = std_socket.local_addr().unwrap();
    let socket = rt
        .block_on(async { UdpSocket::from_std(std_socket) })
        .unwrap();
    assert_eq!(io_sources(&rt), 1);
    assert_eq!(socket.local_addr().unwrap(), addr);
    let std_socket = socket.into_std().unwrap();
    assert_eq!(io_sources(&rt), 0);
    assert_eq!(std_socket.local_addr().unwrap(), addr);
}
