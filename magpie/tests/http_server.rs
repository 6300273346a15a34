//! The hyper example (`examples/http_server.rs`) served on a magpie runtime and queried by
//! real HTTP/1.1 clients: hyper's client on a magpie `TcpStream`, and a blocking
//! `std::net::TcpStream` on a plain thread. Needs the `tokio-io` feature:
//! `cargo test -p magpie --features tokio-io --test http_server`.

#![cfg(feature = "tokio-io")]

mod common;

// The example's own code: `serve` and its handler, exactly as the example runs them.
#[path = "../examples/http_server.rs"]
#[allow(dead_code)]
mod example;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::deadline::Deadline;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use magpie::net::{TcpListener, TcpStream};

/// Ends a hung test. Not a timing assertion: every test here takes milliseconds.
const LIMIT: Duration = Duration::from_secs(60);

/// A two-worker runtime serving the example on a free loopback port.
fn start() -> (magpie::Runtime, SocketAddr) {
    let rt = common::runtime(2);
    let addr = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local_addr");
        drop(magpie::spawn(example::serve(listener)));
        addr
    });
    (rt, addr)
}

/// Sends `GET path` on `sender` and returns the status and body.
async fn get(sender: &mut http1::SendRequest<Empty<Bytes>>, path: &str) -> (StatusCode, Bytes) {
    let request = Request::get(path)
        .header(hyper::header::HOST, "127.0.0.1")
        .body(Empty::new())
        .expect("request");
    // The connection takes the next request once it has finished with the last response.
    sender.ready().await.expect("the connection closed");
    let response = sender.send_request(request).await.expect("send_request");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body)
}

#[test]
fn hyper_client_gets_hello_world_over_one_kept_alive_connection() {
    let _deadline = Deadline::new("hyper client, keep-alive", LIMIT);
    let (rt, addr) = start();
    rt.block_on(async {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        let conn = magpie::spawn(conn);
        for _ in 0..10 {
            let (status, body) = get(&mut sender, "/").await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(&body[..], b"Hello, World!");
        }
        // Ten answers on one connection, and the server has not closed it.
        assert!(
            !conn.is_finished(),
            "the server closed a keep-alive connection"
        );
        let (status, body) = get(&mut sender, "/sum").await;
        assert_eq!(status, StatusCode::OK);
        let n = example::SUM_LEN;
        assert_eq!(body, (n * (n - 1) / 2).to_string());
        let (status, _) = get(&mut sender, "/nowhere").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // Dropping the sender closes the connection cleanly.
        drop(sender);
        conn.await
            .expect("the connection task")
            .expect("the connection");
    });
}

#[test]
fn many_connections_at_once() {
    let _deadline = Deadline::new("hyper client, 16 connections", LIMIT);
    let (rt, addr) = start();
    let clients: Vec<_> = (0..16)
        .map(|_| {
            rt.spawn(async move {
                let stream = TcpStream::connect(addr).await.expect("connect");
                let (mut sender, conn) = http1::handshake(TokioIo::new(stream))
                    .await
                    .expect("handshake");
                let conn = magpie::spawn(conn);
                for _ in 0..20 {
                    let (status, body) = get(&mut sender, "/").await;
                    assert_eq!(status, StatusCode::OK);
                    assert_eq!(&body[..], b"Hello, World!");
                }
                drop(sender);
                conn.await
                    .expect("the connection task")
                    .expect("the connection");
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client task failed");
    }
}

#[test]
fn blocking_std_client_from_a_plain_thread() {
    let _deadline = Deadline::new("std client", LIMIT);
    let (_rt, addr) = start();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    for _ in 0..3 {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .expect("write");
        let (head, body) = read_response(&mut stream);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(body, b"Hello, World!");
    }
    // The last request asks the server to close; it answers, then closes.
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    let (head, body) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(body, b"Hello, World!");
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("read to EOF");
    assert!(rest.is_empty(), "bytes after the last response");
}

/// Reads one response with a `Content-Length` body: its head and its body.
fn read_response(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read head");
        assert_eq!(n, 1, "EOF inside the response head");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).expect("UTF-8 head");
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("Content-Length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read body");
    (head, body)
}
