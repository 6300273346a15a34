//! The servers under test: the same code on magpie, tokio and smol.
//!
//! Each runtime runs two servers for the whole bench run, each on its own loopback port:
//!
//! * an echo server: an accept loop that spawns one task per connection, and each task reads
//!   into a 4 KiB buffer and writes back what it read until the client hangs up
//!   (`echo_connection!` below);
//! * an HTTP/1.1 server on hyper 1.x: an accept loop that spawns one task per connection,
//!   each serving the connection with `hyper::server::conn::http1` (`serve_http!` below). `GET /`
//!   answers `Hello, World!`; `GET /sum` answers the sum of [`SUM_LEN`] `u64`s, computed the
//!   way each runtime's users would: magpie calls `par_iter().sum()` inside the handler, on
//!   the same workers; tokio hands the sum to rayon's global pool (`rayon::spawn`) and awaits
//!   it on a `tokio::sync::oneshot`; smol does not serve it.
//!
//! The loops are macros so that they are written once and each expansion resolves `read`,
//! `write_all` and `accept` against its own runtime's types: magpie's inherent async methods,
//! tokio's `AsyncReadExt` / `AsyncWriteExt`, futures-lite's for smol. hyper reaches the
//! sockets through `hyper_util::rt::TokioIo` on magpie (its `tokio-io` feature) and tokio,
//! and through `smol_hyper::rt::FuturesIo` on smol (futures-io traits to hyper's).
//!
//! smol here is `async-executor` run by N threads, each in `async_io::block_on(ex.run(..))`
//! (what `smol::block_on` is), with async-io's reactor: a thread blocked in `block_on` turns
//! the reactor while its executor has nothing to run, and async-io's own "async-io" thread
//! turns it when no `block_on` does.

use std::convert::Infallible;
use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use async_executor::Executor;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};

/// The read buffer of an echo connection.
const ECHO_BUFFER: usize = 4096;
/// `u64`s summed by `GET /sum`.
pub(crate) const SUM_LEN: usize = 1_000_000;

/// Accept errors of every server (EMFILE and the like); reported after the run.
pub(crate) static ACCEPT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// The body of `GET /`.
pub(crate) const HELLO: &[u8] = b"Hello, World!";

/// The input of `GET /sum`: `0, 1, ..., SUM_LEN - 1`.
pub(crate) fn sum_input() -> Arc<Vec<u64>> {
    Arc::new((0..SUM_LEN as u64).collect())
}

/// What `GET /sum` answers.
pub(crate) fn expected_sum() -> u64 {
    let n = SUM_LEN as u64;
    n * (n - 1) / 2
}

/// Where one runtime's servers listen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Addrs {
    pub(crate) echo: SocketAddr,
    pub(crate) http: SocketAddr,
}

/// The echo loop of one connection: read what came, write it back, until EOF or an error.
macro_rules! echo_connection {
    ($stream:ident) => {{
        let mut buf = vec![0u8; ECHO_BUFFER];
        loop {
            let n = match $stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if $stream.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    }};
}

/// An accept loop: each accepted stream gets Nagle off and a task of its own, spawned by
/// the closure `$spawn`, running `$serve`.
macro_rules! accept_loop {
    ($listener:ident, $spawn:expr, |$stream:ident| $serve:expr) => {{
        let spawn = $spawn;
        loop {
            match $listener.accept().await {
                Ok((stream, _peer)) => {
                    NoDelay::no_delay(&stream);
                    let $stream = stream;
                    spawn($serve);
                }
                Err(_) => {
                    ACCEPT_ERRORS.fetch_add(1, Relaxed);
                }
            }
        }
    }};
}

/// Serves one connection with hyper's HTTP/1.1 server; `$route` maps a request to a
/// `Response<Full<Bytes>>` future.
macro_rules! serve_http {
    ($io:expr, $route:expr) => {{
        let route = $route;
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let answer = route(req);
            async move { Ok::<_, Infallible>(answer.await) }
        });
        // A client that hangs up mid-request is an error here; nothing to do about it.
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection($io, service)
            .await;
    }};
}

/// Turns Nagle's algorithm off on an accepted stream (the client turns it off on its end).
trait NoDelay {
    fn no_delay(&self);
}

impl NoDelay for magpie::net::TcpStream {
    fn no_delay(&self) {
        let _ = self.set_nodelay(true);
    }
}

impl NoDelay for tokio::net::TcpStream {
    fn no_delay(&self) {
        let _ = self.set_nodelay(true);
    }
}

impl NoDelay for async_io::Async<std::net::TcpStream> {
    fn no_delay(&self) {
        let _ = self.get_ref().set_nodelay(true);
    }
}

/// A response with a plain-text body.
fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// `GET /` and anything unknown, the same on every runtime.
fn common_route(req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/" => text(StatusCode::OK, Bytes::from_static(HELLO)),
        _ => text(StatusCode::NOT_FOUND, Bytes::from_static(b"not found")),
    }
}

// ---------------------------------------------------------------------------------------
// magpie

/// Starts magpie's servers on `rt`.
pub(crate) fn start_magpie(rt: &magpie::Runtime, data: &Arc<Vec<u64>>) -> Addrs {
    use hyper_util::rt::TokioIo;
    use magpie::net::TcpListener;
    use magpie::prelude::*;

    let (echo, http) = rt.block_on(async {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("magpie bind");
        let http = TcpListener::bind("127.0.0.1:0").await.expect("magpie bind");
        (echo, http)
    });
    let addrs = Addrs {
        echo: echo.local_addr().expect("local_addr"),
        http: http.local_addr().expect("local_addr"),
    };
    drop(rt.spawn(async move {
        accept_loop!(
            echo,
            |task| drop(magpie::spawn(task)),
            |stream| async move {
                let mut stream = stream;
                echo_connection!(stream)
            }
        )
    }));
    let data = Arc::clone(data);
    drop(rt.spawn(async move {
        accept_loop!(http, |task| drop(magpie::spawn(task)), |stream| {
            let data = Arc::clone(&data);
            async move {
                serve_http!(TokioIo::new(stream), move |req: Request<Incoming>| {
                    let data = Arc::clone(&data);
                    async move {
                        if req.uri().path() == "/sum" {
                            // Fork-join on the same workers, straight from the handler.
                            let sum: u64 = data.par_iter().sum();
                            text(StatusCode::OK, sum.to_string())
                        } else {
                            common_route(&req)
                        }
                    }
                })
            }
        })
    }));
    addrs
}

// ---------------------------------------------------------------------------------------
// tokio

/// Starts tokio's servers on `rt`; `/sum` goes to rayon's global pool.
pub(crate) fn start_tokio(rt: &tokio::runtime::Runtime, data: &Arc<Vec<u64>>) -> Addrs {
    use hyper_util::rt::TokioIo;
    use rayon::prelude::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    let (echo, http) = rt.block_on(async {
        let echo = TcpListener::bind("127.0.0.1:0").await.expect("tokio bind");
        let http = TcpListener::bind("127.0.0.1:0").await.expect("tokio bind");
        (echo, http)
    });
    let addrs = Addrs {
        echo: echo.local_addr().expect("local_addr"),
        http: http.local_addr().expect("local_addr"),
    };
    drop(rt.spawn(async move {
        accept_loop!(echo, |task| drop(tokio::spawn(task)), |stream| async move {
            let mut stream = stream;
            echo_connection!(stream)
        })
    }));
    let data = Arc::clone(data);
    drop(rt.spawn(async move {
        accept_loop!(http, |task| drop(tokio::spawn(task)), |stream| {
            let data = Arc::clone(&data);
            async move {
                serve_http!(TokioIo::new(stream), move |req: Request<Incoming>| {
                    let data = Arc::clone(&data);
                    async move {
                        if req.uri().path() == "/sum" {
                            // The usual glue: CPU work to rayon, the answer back on a oneshot.
                            let (tx, rx) = tokio::sync::oneshot::channel();
                            rayon::spawn(move || {
                                let sum: u64 = data.par_iter().sum();
                                let _ = tx.send(sum);
                            });
                            let sum = rx.await.expect("the rayon job was dropped");
                            text(StatusCode::OK, sum.to_string())
                        } else {
                            common_route(&req)
                        }
                    }
                })
            }
        })
    }));
    addrs
}

// ---------------------------------------------------------------------------------------
// smol

/// The name of smol's threads, before `-{index}`.
pub(crate) const SMOL_THREADS: &str = "net-smol";

/// An `async_executor::Executor` run by N threads in `async_io::block_on`.
#[derive(Debug)]
pub(crate) struct SmolPool {
    executor: Arc<Executor<'static>>,
    /// Dropping these completes the threads' `run` futures.
    stop: Vec<futures::channel::oneshot::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl SmolPool {
    pub(crate) fn new(workers: usize) -> SmolPool {
        let executor = Arc::new(Executor::new());
        let mut stop = Vec::with_capacity(workers);
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
            let executor = Arc::clone(&executor);
            let thread = thread::Builder::new()
                .name(format!("{SMOL_THREADS}-{i}"))
                .spawn(move || {
                    async_io::block_on(executor.run(async {
                        // Err(Canceled) when the sender is dropped: that is the signal too.
                        let _ = stop_rx.await;
                    }));
                })
                .expect("could not start a smol executor thread");
            stop.push(stop_tx);
            threads.push(thread);
        }
        SmolPool {
            executor,
            stop,
            threads,
        }
    }

    /// Spawns `fut` and detaches it.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        self.executor.spawn(fut).detach();
    }
}

impl Drop for SmolPool {
    fn drop(&mut self) {
        self.stop.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Starts smol's servers on `pool` (no `/sum`).
pub(crate) fn start_smol(pool: &SmolPool) -> Addrs {
    use async_io::Async;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use smol_hyper::rt::FuturesIo;

    let bind = || Async::<StdTcpListener>::bind(([127, 0, 0, 1], 0)).expect("smol bind");
    let (echo, http) = (bind(), bind());
    let addrs = Addrs {
        echo: echo.get_ref().local_addr().expect("local_addr"),
        http: http.get_ref().local_addr().expect("local_addr"),
    };
    let (ex_echo, ex_http) = (Arc::clone(&pool.executor), Arc::clone(&pool.executor));
    pool.spawn(async move {
        accept_loop!(
            echo,
            |task| ex_echo.spawn(task).detach(),
            |stream| async move {
                let mut stream = stream;
                echo_connection!(stream)
            }
        )
    });
    pool.spawn(async move {
        accept_loop!(
            http,
            |task| ex_http.spawn(task).detach(),
            |stream| async move {
                serve_http!(
                    FuturesIo::new(stream),
                    |req: Request<Incoming>| async move { common_route(&req) }
                )
            }
        )
    });
    addrs
}

// ---------------------------------------------------------------------------------------
// The blocked-worker row's spinner

/// A task body that keeps its worker busy for `spin` without awaiting, then reports when it
/// started and stopped.
pub(crate) async fn spin(spin: Duration, report: mpsc::SyncSender<(Instant, Instant)>) {
    let start = Instant::now();
    while start.elapsed() < spin {
        std::hint::spin_loop();
    }
    let _ = report.send((start, Instant::now()));
}
