//! A hyper 1.x HTTP/1.1 server on magpie.
//!
//! ```text
//! cargo run --release --example http_server --features tokio-io [ADDR]
//! curl http://127.0.0.1:3000/       # Hello, World!
//! curl http://127.0.0.1:3000/sum    # 499999500000, summed by par_iter on the same workers
//! ```
//!
//! `ADDR` defaults to `127.0.0.1:3000`; the bound address is printed (use port 0 for any free
//! port). hyper reaches magpie's `TcpStream` through `hyper_util::rt::TokioIo`, which needs
//! the `tokio-io` feature (magpie's streams then implement tokio's `AsyncRead` and
//! `AsyncWrite`). `tests/http_server.rs` runs [`serve`] from this file against hyper's client.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::rt::Executor;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use magpie::net::TcpListener;
use magpie::prelude::*;

/// hyper's executor on magpie: what hyper spawns (HTTP/2 streams, upgraded connections, the
/// background task of `hyper_util`'s pooled client) becomes a magpie task.
/// `hyper::server::conn::http2::Builder::new(MagpieExecutor)` takes it; this HTTP/1.1
/// server spawns its connections with it too.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MagpieExecutor;

impl<F> Executor<F> for MagpieExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Detached: the task runs to completion on its own.
        drop(magpie::spawn(fut));
    }
}

/// The `u64`s that `GET /sum` adds up.
pub(crate) const SUM_LEN: u64 = 1_000_000;

/// Answers `GET /` with `Hello, World!` and `GET /sum` with the sum of `numbers`, computed by
/// a parallel iterator right in the handler: fork-join work on the same workers as the I/O.
async fn handle(
    req: Request<Incoming>,
    numbers: Arc<Vec<u64>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, body) = match req.uri().path() {
        "/" => (StatusCode::OK, Bytes::from_static(b"Hello, World!")),
        "/sum" => {
            let sum: u64 = numbers.par_iter().sum();
            (StatusCode::OK, Bytes::from(sum.to_string()))
        }
        _ => (StatusCode::NOT_FOUND, Bytes::from_static(b"not found")),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    Ok(response)
}

/// Accepts connections on `listener` forever, each served by hyper's HTTP/1.1 server in a
/// task of its own. Must run on a magpie runtime (`rt.block_on`, `rt.spawn`).
pub(crate) async fn serve(listener: TcpListener) {
    let numbers: Arc<Vec<u64>> = Arc::new((0..SUM_LEN).collect());
    loop {
        let (stream, _peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors, or a connection reset before it was accepted: go on.
            Err(err) => {
                eprintln!("accept: {err}");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let numbers = Arc::clone(&numbers);
        MagpieExecutor.execute(async move {
            let service = service_fn(move |req| handle(req, Arc::clone(&numbers)));
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                eprintln!("connection: {err}");
            }
        });
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => SocketAddr::from(([127, 0, 0, 1], 3000)),
    };
    let rt = magpie::Runtime::builder().build()?;
    rt.block_on(async {
        let listener = TcpListener::bind(addr).await?;
        println!("listening on http://{}", listener.local_addr()?);
        serve(listener).await;
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}
