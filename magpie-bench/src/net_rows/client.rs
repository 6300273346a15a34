//! The bench's own load generator: a closed-loop client on mio, the same for every server.
//!
//! Each connection has at most one request in flight: it writes a request, waits for the
//! whole response, records the round trip, and writes the next request at once (a closed
//! loop, as `wrk` runs). The connections are shared out among a few client threads (one by
//! default); each thread drives its share with one `mio::Poll`, edge-triggered, with
//! non-blocking sockets. Nothing here knows which runtime serves the other end, and the
//! client does the same system calls per round trip for every server: a `write` of the
//! request and `read`s until the response is whole.
//!
//! Two protocols: `Echo` (a fixed-size message that must come back byte for byte) and `Http`
//! (an HTTP/1.1 keep-alive `GET`, whose response is whole when its headers and
//! `Content-Length` bytes of body have arrived; the status must be 200 and the body, when
//! given, must match).
//!
//! Every round trip is recorded with its start and end (nanoseconds since the load began),
//! so that a caller can pick any window: the throughput window of a row after its warm-up,
//! or the second a worker of the server spins in the blocked-worker row.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::thread;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

/// What the client sends and how it recognises a whole response.
#[derive(Debug, Clone)]
pub(crate) enum Protocol {
    /// `size` bytes sent, the same bytes expected back.
    Echo { size: usize },
    /// `GET path` with keep-alive; status 200 expected, and `body` if given.
    Http { path: String, body: Option<Vec<u8>> },
}

impl Protocol {
    /// The bytes of one request.
    pub(crate) fn request(&self) -> Vec<u8> {
        match self {
            // A pattern that is not all one byte, so a reordering would be caught.
            Protocol::Echo { size } => (0..*size).map(|i| (i % 251) as u8).collect(),
            Protocol::Http { path, .. } => {
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").into_bytes()
            }
        }
    }

    /// Whether `buf` holds a whole response to `request`: `Ok(true)` if it does and the
    /// response is right, `Ok(false)` if more bytes are needed, `Err` if it is wrong.
    fn check(&self, request: &[u8], buf: &[u8]) -> Result<bool, String> {
        match self {
            Protocol::Echo { size } => {
                if buf.len() < *size {
                    Ok(false)
                } else if buf.len() > *size {
                    Err(format!("{} bytes came back for {size} sent", buf.len()))
                } else if buf != request {
                    Err("the echo differs from the message".to_owned())
                } else {
                    Ok(true)
                }
            }
            Protocol::Http { body, .. } => {
                let Some(head_len) = find(buf, b"\r\n\r\n").map(|at| at + 4) else {
                    return Ok(false);
                };
                let head = std::str::from_utf8(&buf[..head_len])
                    .map_err(|_| "response headers are not UTF-8".to_owned())?;
                let mut lines = head.split("\r\n");
                let status = lines.next().unwrap_or_default();
                if !status.starts_with("HTTP/1.1 200") {
                    return Err(format!("status line {status:?}"));
                }
                let mut content_length = None;
                for line in lines {
                    let Some((name, value)) = line.split_once(':') else {
                        continue;
                    };
                    if name.eq_ignore_ascii_case("content-length") {
                        content_length = value.trim().parse::<usize>().ok();
                    } else if name.eq_ignore_ascii_case("transfer-encoding") {
                        return Err("chunked responses are not supported".to_owned());
                    }
                }
                let len = content_length.ok_or("no Content-Length")?;
                if buf.len() < head_len + len {
                    return Ok(false);
                }
                if buf.len() > head_len + len {
                    return Err("bytes after the response".to_owned());
                }
                match body {
                    Some(expected) if &buf[head_len..] != expected.as_slice() => Err(format!(
                        "body {:?}, expected {:?}",
                        String::from_utf8_lossy(&buf[head_len..]),
                        String::from_utf8_lossy(expected)
                    )),
                    _ => Ok(true),
                }
            }
        }
    }
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One load: how many connections, for how long.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    pub(crate) addr: SocketAddr,
    pub(crate) protocol: Protocol,
    pub(crate) connections: usize,
    /// Client threads the connections are shared out among.
    pub(crate) threads: usize,
    /// How long, from the start, the connections keep sending requests.
    pub(crate) duration: Duration,
}

/// One round trip: nanoseconds since the load began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoundTrip {
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
}

impl RoundTrip {
    pub(crate) fn latency(self) -> Duration {
        Duration::from_nanos(self.end_ns - self.start_ns)
    }
}

/// What a load observed.
#[derive(Debug)]
pub(crate) struct LoadResult {
    /// When the load began (the connections were made before it).
    pub(crate) began: Instant,
    /// Every completed round trip, in no particular order.
    pub(crate) round_trips: Vec<RoundTrip>,
    /// Errors: failed connects, resets, wrong or missing responses. Each one ended its
    /// connection's loop.
    pub(crate) errors: Vec<String>,
}

/// How long a connection may wait for a response before the client calls the server hung.
const RESPONSE_LIMIT: Duration = Duration::from_secs(10);

/// Runs `load`; returns when every connection has had its last response (or failed).
pub(crate) fn run(load: &Load) -> LoadResult {
    let threads = load.threads.clamp(1, load.connections.max(1));
    // Connect everything first, outside the timed part, one connection at a time, each
    // primed with one blocking round trip (see `connect`).
    let request = load.protocol.request();
    let mut errors = Vec::new();
    let mut shares: Vec<Vec<StdTcpStream>> = (0..threads).map(|_| Vec::new()).collect();
    for i in 0..load.connections {
        match connect(load.addr, &load.protocol, &request) {
            Ok(stream) => shares[i % threads].push(stream),
            Err(err) => errors.push(format!("connect: {err}")),
        }
    }
    let began = Instant::now();
    let stop = began + load.duration;
    let results: Vec<(Vec<RoundTrip>, Vec<String>)> = thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(i, share)| {
                let protocol = &load.protocol;
                thread::Builder::new()
                    .name(format!("net-client-{i}"))
                    .spawn_scoped(scope, move || drive(share, protocol, began, stop))
                    .expect("could not start a client thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client thread panicked"))
            .collect()
    });
    let mut round_trips = Vec::new();
    for (trips, errs) in results {
        round_trips.extend(trips);
        errors.extend(errs);
    }
    LoadResult {
        began,
        round_trips,
        errors,
    }
}

/// A blocking connect with Nagle off, one blocking round trip, then the socket made
/// non-blocking for mio.
///
/// The round trip proves that the server accepted the connection before the next one is
/// made. The runtimes' listeners have the standard backlog of 128 (mio's and std's); 512
/// connects in a burst overflowed it, and the kernel drops a SYN that finds the accept queue
/// full, so some connects took one or two seconds of SYN retransmission.
pub(crate) fn connect(
    addr: SocketAddr,
    protocol: &Protocol,
    request: &[u8],
) -> io::Result<StdTcpStream> {
    let mut stream = StdTcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(RESPONSE_LIMIT))?;
    stream.write_all(request)?;
    let mut received = Vec::new();
    let mut scratch = [0u8; 4096];
    loop {
        let n = stream.read(&mut scratch)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        received.extend_from_slice(&scratch[..n]);
        match protocol.check(request, &received) {
            Ok(true) => break,
            Ok(false) => {}
            Err(err) => return Err(io::Error::other(err)),
        }
    }
    stream.set_nonblocking(true)?;
    Ok(stream)
}

/// One connection's state in the loop.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// Bytes of the current request written so far.
    written: usize,
    /// Bytes of the current response read so far.
    received: Vec<u8>,
    /// When the current request began; `None` when the connection is done.
    started: Option<Instant>,
}

/// Drives `streams` in a closed loop until `stop`, then waits for the last responses.
fn drive(
    streams: Vec<StdTcpStream>,
    protocol: &Protocol,
    began: Instant,
    stop: Instant,
) -> (Vec<RoundTrip>, Vec<String>) {
    let request = protocol.request();
    let mut errors = Vec::new();
    let mut trips = Vec::with_capacity(1 << 16);
    let mut poll = Poll::new().expect("mio::Poll::new");
    let mut events = Events::with_capacity(1024);
    let mut conns: Vec<Conn> = Vec::with_capacity(streams.len());
    for (i, std_stream) in streams.into_iter().enumerate() {
        let mut stream = TcpStream::from_std(std_stream);
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .expect("mio register");
        conns.push(Conn {
            stream,
            written: 0,
            received: Vec::with_capacity(request.len().max(256)),
            started: None,
        });
    }
    let now = Instant::now();
    let mut live = 0;
    for conn in &mut conns {
        conn.started = Some(now);
        match write_some(conn, &request) {
            Ok(()) => live += 1,
            Err(err) => {
                errors.push(format!("write: {err}"));
                conn.started = None;
            }
        }
    }
    let mut scratch = vec![0u8; 64 * 1024];
    let mut last_check = Instant::now();
    while live > 0 {
        // Look for a hung server every 100 ms, not every turn: the scan is O(connections).
        let now = Instant::now();
        if now.duration_since(last_check) > Duration::from_millis(100) {
            last_check = now;
            let stuck = conns
                .iter()
                .filter(|c| {
                    c.started
                        .is_some_and(|t| now.duration_since(t) > RESPONSE_LIMIT)
                })
                .count();
            if stuck > 0 {
                errors.push(format!(
                    "{stuck} connection(s) got no response for {} s: the server looks hung",
                    RESPONSE_LIMIT.as_secs()
                ));
                break;
            }
        }
        if let Err(err) = poll.poll(&mut events, Some(Duration::from_millis(50))) {
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            panic!("mio poll: {err}");
        }
        for event in events.iter() {
            let conn = &mut conns[event.token().0];
            let Some(start) = conn.started else { continue };
            match step(conn, protocol, &request, &mut scratch) {
                Ok(false) => {}
                Ok(true) => {
                    let end = Instant::now();
                    trips.push(RoundTrip {
                        start_ns: nanos(start.duration_since(began)),
                        end_ns: nanos(end.duration_since(began)),
                    });
                    conn.received.clear();
                    conn.written = 0;
                    if end >= stop {
                        conn.started = None;
                        live -= 1;
                        continue;
                    }
                    conn.started = Some(end);
                    if let Err(err) = write_some(conn, &request) {
                        errors.push(format!("write: {err}"));
                        conn.started = None;
                        live -= 1;
                    }
                }
                Err(err) => {
                    errors.push(err);
                    conn.started = None;
                    live -= 1;
                }
            }
        }
    }
    if errors.is_empty() {
        close(
            &mut poll,
            &mut events,
            &mut conns,
            &mut scratch,
            &mut errors,
        );
    }
    (trips, errors)
}

/// How long the client waits for the server to close its end after the client closed its.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// Closes every connection the polite way: shuts the client's side for writing, then waits
/// until the server closes its side (reads return 0).
///
/// Dropping the sockets at once would leave server-side sockets of the connections lingering
/// until each server task noticed; loopback connects reuse the client's TIME_WAIT ports, and
/// a SYN that reaches such a lingering socket is dropped and sent again a second later, which
/// turned the next sample's connects into seconds. This way every server socket is gone when
/// the load returns, and a server that never closes a connection is reported.
fn close(
    poll: &mut Poll,
    events: &mut Events,
    conns: &mut [Conn],
    scratch: &mut [u8],
    errors: &mut Vec<String>,
) {
    let mut open = conns.len();
    let mut closed = vec![false; conns.len()];
    for (i, conn) in conns.iter_mut().enumerate() {
        if conn.stream.shutdown(std::net::Shutdown::Write).is_err() {
            closed[i] = true;
            open -= 1;
        }
    }
    let deadline = Instant::now() + CLOSE_LIMIT;
    while open > 0 && Instant::now() < deadline {
        if let Err(err) = poll.poll(events, Some(Duration::from_millis(50))) {
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            panic!("mio poll: {err}");
        }
        for event in events.iter() {
            let i = event.token().0;
            if closed[i] {
                continue;
            }
            loop {
                match conns[i].stream.read(scratch) {
                    // EOF, or anything but "not yet": the server's side is closed.
                    Ok(0) => break closed[i] = true,
                    Ok(_) => {}
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break closed[i] = true,
                }
            }
            if closed[i] {
                open -= 1;
            }
        }
    }
    if open > 0 {
        errors.push(format!(
            "{open} connection(s) not closed by the server {} s after the client closed them",
            CLOSE_LIMIT.as_secs()
        ));
    }
}

/// Nanoseconds in `d`, saturating (a load lasts seconds).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Writes as much of the rest of `request` as the socket takes.
fn write_some(conn: &mut Conn, request: &[u8]) -> io::Result<()> {
    while conn.written < request.len() {
        match conn.stream.write(&request[conn.written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => conn.written += n,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Handles an event on `conn`: finishes writing the request, reads what has arrived (until
/// `WouldBlock`: the poll is edge-triggered), and says whether the response is whole.
fn step(
    conn: &mut Conn,
    protocol: &Protocol,
    request: &[u8],
    scratch: &mut [u8],
) -> Result<bool, String> {
    write_some(conn, request).map_err(|err| format!("write: {err}"))?;
    loop {
        match conn.stream.read(scratch) {
            Ok(0) => return Err("the server closed the connection".to_owned()),
            Ok(n) => conn.received.extend_from_slice(&scratch[..n]),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(format!("read: {err}")),
        }
    }
    if conn.received.is_empty() {
        return Ok(false);
    }
    protocol.check(request, &conn.received)
}

/// The `p`-th percentile (0..=100) of `sorted`, nearest rank.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_check_waits_for_the_body_and_checks_it() {
        let p = Protocol::Http {
            path: "/".to_owned(),
            body: Some(b"Hello, World!".to_vec()),
        };
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\ndate: x\r\n\r\n";
        assert_eq!(p.check(&[], head), Ok(false));
        let mut whole = head.to_vec();
        whole.extend_from_slice(b"Hello, World!");
        assert_eq!(p.check(&[], &whole), Ok(true));
        let mut wrong = head.to_vec();
        wrong.extend_from_slice(b"Hello, world?");
        assert!(p.check(&[], &wrong).is_err());
        assert!(p.check(&[], b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
    }
}
