//! The I/O trait features: with `tokio-io`, tokio's `AsyncRead`/`AsyncWrite` (through
//! `AsyncReadExt`, `AsyncWriteExt`, `copy` and `BufReader` from tokio's `io-util`, no tokio
//! runtime anywhere); with `futures-io`, the `futures` crate's. Streams and all four kinds of
//! half, TCP and Unix. Run with `--features tokio-io,futures-io`.

// `magpie::net` is not built under loom or shuttle (they model no OS).
#![cfg(all(
    not(any(loom, shuttle)),
    any(feature = "tokio-io", feature = "futures-io")
))]

mod common;
mod net_support;

use common::Watchdog;
use magpie::net::{TcpListener, TcpStream};
use net_support::{pattern, runtime};

/// A connected TCP pair: (client, server).
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

#[cfg(feature = "tokio-io")]
mod tokio_io {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// An echo through `tokio::io::copy` from the server's borrowed read half to its write
    /// half; the client writes and reads through the extension traits (named, so that the
    /// inherent methods of the same names are not what runs).
    #[test]
    fn tcp_echo_through_tokio_copy() {
        let rt = runtime(2);
        let dog = Watchdog::start("tcp_echo_through_tokio_copy");
        dog.phase("copy", &rt);
        rt.block_on(async {
            let (mut client, mut server) = tcp_pair().await;
            let echo = magpie::spawn(async move {
                let (mut reader, mut writer) = server.split();
                let copied = tokio::io::copy(&mut reader, &mut writer).await?;
                AsyncWriteExt::shutdown(&mut writer).await?;
                Ok::<_, std::io::Error>(copied)
            });
            let data = pattern(5, 300_000);
            let (mut reader, mut writer) = client.split();
            let (written, echoed) = futures::future::join(
                async {
                    AsyncWriteExt::write_all(&mut writer, &data).await?;
                    AsyncWriteExt::flush(&mut writer).await?;
                    AsyncWriteExt::shutdown(&mut writer).await
                },
                async {
                    let mut echoed = Vec::new();
                    AsyncReadExt::read_to_end(&mut reader, &mut echoed).await?;
                    Ok::<_, std::io::Error>(echoed)
                },
            )
            .await;
            written.unwrap();
            assert!(echoed.unwrap() == data, "the echo differs");
            assert_eq!(echo.await.unwrap().unwrap(), data.len() as u64);
        });
    }

    /// Owned halves in two tasks, and whole streams, through `BufReader` lines.
    #[test]
    fn tcp_lines_through_owned_halves() {
        let rt = runtime(2);
        let dog = Watchdog::start("tcp_lines_through_owned_halves");
        dog.phase("lines", &rt);
        rt.block_on(async {
            let (client, mut server) = tcp_pair().await;
            let (reader, mut writer) = client.into_split();
            let writing = magpie::spawn(async move {
                for i in 0..100 {
                    AsyncWriteExt::write_all(&mut writer, format!("line {i}\n").as_bytes()).await?;
                }
                Ok::<_, std::io::Error>(())
            });
            // The server answers every line with its length, then the client reads those.
            let mut server_lines = BufReader::new(&mut server).lines();
            let mut lengths = Vec::new();
            for i in 0..100 {
                let line = server_lines.next_line().await.unwrap().expect("a line");
                assert_eq!(line, format!("line {i}"));
                lengths.push(line.len() as u8);
            }
            writing.await.unwrap().unwrap();
            AsyncWriteExt::write_all(&mut server, &lengths)
                .await
                .unwrap();
            let mut got = vec![0u8; lengths.len()];
            let mut reader = reader;
            AsyncReadExt::read_exact(&mut reader, &mut got)
                .await
                .unwrap();
            assert_eq!(got, lengths);
        });
    }

    #[cfg(unix)]
    #[test]
    fn unix_halves_through_tokio_traits() {
        let rt = runtime(2);
        let dog = Watchdog::start("unix_halves_through_tokio_traits");
        dog.phase("unix", &rt);
        rt.block_on(async {
            let (a, mut b) = magpie::net::UnixStream::pair().unwrap();
            let (mut reader, mut writer) = a.into_split();
            AsyncWriteExt::write_all(&mut writer, b"owned")
                .await
                .unwrap();
            AsyncWriteExt::shutdown(&mut writer).await.unwrap();
            let mut got = Vec::new();
            AsyncReadExt::read_to_end(&mut b, &mut got).await.unwrap();
            assert_eq!(got, b"owned");
            AsyncWriteExt::write_all(&mut b, b"back").await.unwrap();
            let mut buf = [0u8; 4];
            AsyncReadExt::read_exact(&mut reader, &mut buf)
                .await
                .unwrap();
            assert_eq!(&buf, b"back");
            let (mut borrowed_reader, _) = b.split();
            let mut none = [0u8; 1];
            drop(reader);
            drop(writer);
            // Both of `a`'s halves are gone: end of stream.
            assert_eq!(
                AsyncReadExt::read(&mut borrowed_reader, &mut none)
                    .await
                    .unwrap(),
                0
            );
        });
    }
}

#[cfg(feature = "futures-io")]
mod futures_io {
    use futures::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use futures::StreamExt;

    use super::*;

    #[test]
    fn tcp_echo_through_futures_copy() {
        let rt = runtime(2);
        let dog = Watchdog::start("tcp_echo_through_futures_copy");
        dog.phase("copy", &rt);
        rt.block_on(async {
            let (mut client, server) = tcp_pair().await;
            let echo = magpie::spawn(async move {
                let (reader, mut writer) = server.into_split();
                let copied = futures::io::copy(reader, &mut writer).await?;
                AsyncWriteExt::close(&mut writer).await?;
                Ok::<_, std::io::Error>(copied)
            });
            let data = pattern(9, 300_000);
            // Named: with `futures::io::AsyncReadExt` in scope, `client.split()` would be
            // its by-value `split` (a method taking `self` is found before one taking
            // `&mut self`).
            let (mut reader, mut writer) = TcpStream::split(&mut client);
            let (written, echoed) = futures::future::join(
                async {
                    AsyncWriteExt::write_all(&mut writer, &data).await?;
                    AsyncWriteExt::flush(&mut writer).await?;
                    AsyncWriteExt::close(&mut writer).await
                },
                async {
                    let mut echoed = Vec::new();
                    AsyncReadExt::read_to_end(&mut reader, &mut echoed).await?;
                    Ok::<_, std::io::Error>(echoed)
                },
            )
            .await;
            written.unwrap();
            assert!(echoed.unwrap() == data, "the echo differs");
            assert_eq!(echo.await.unwrap().unwrap(), data.len() as u64);
        });
    }

    #[cfg(unix)]
    #[test]
    fn unix_lines_through_futures_bufreader() {
        let rt = runtime(1);
        let dog = Watchdog::start("unix_lines_through_futures_bufreader");
        dog.phase("lines", &rt);
        rt.block_on(async {
            let (mut a, b) = magpie::net::UnixStream::pair().unwrap();
            let writing = magpie::spawn(async move {
                for i in 0..50 {
                    AsyncWriteExt::write_all(&mut a, format!("{i}\n").as_bytes()).await?;
                }
                AsyncWriteExt::close(&mut a).await
            });
            let lines: Vec<String> = BufReader::new(b)
                .lines()
                .map(|line| line.unwrap())
                .collect()
                .await;
            writing.await.unwrap().unwrap();
            assert_eq!(lines, (0..50).map(|i| i.to_string()).collect::<Vec<_>>());
        });
    }
}
