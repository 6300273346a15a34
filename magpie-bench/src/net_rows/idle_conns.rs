//! The `idle-conns` row: the CPU the process spends per second while one server runtime holds
//! many open connections that carry nothing (issue 13: "10,000 idle open connections: process
//! CPU < 10 ms per idle second").
//!
//! One sample, for one runtime:
//!
//! 1. a baseline window with no connection open anywhere;
//! 2. `--idle-conns` connections to the runtime's echo server, made one at a time by
//!    [`client::connect`], each with one echo round trip: the server accepted it, spawned its
//!    task, and that task has read, written and gone back to awaiting a read (the listeners'
//!    backlog of 128 never fills, see `client::connect`);
//! 3. a window of the same length with all of them open and silent;
//! 4. the disconnect: the client shuts its side of every connection, then waits until the
//!    server closes each one (end of stream), as the load rows do. magpie and tokio count their
//!    live tasks: that count must be up by one per connection during step 3 and back where it
//!    was before step 2 after step 4.
//!
//! A window is a settling pause of [`SETTLE`] and then `--secs` of sleep on the bench's main
//! thread, the client, which holds the sockets and does nothing else; across the sleep it
//! records the process's CPU time (user + system, `getrusage`, the helper of the `idle`
//! benchmark) and divides it by the sleep's length: ms of CPU per idle second. Every runtime of
//! the run (magpie, tokio, smol and rayon's global pool, built once for the whole run) lives in
//! the process throughout and idles in both windows, so the baseline is the floor of the whole
//! process and the difference is what the open connections cost. The target is checked on the
//! with-connections figure, the process's whole cost. The CPU of the runtime's own threads, by
//! thread name from `/proc`, is shown beside it. No warm-up rounds: nothing is timed but idling.
//!
//! Each connection takes two descriptors in this one process (client and server end); the row
//! raises the open-files limit as far as it can (see [`fd_capacity`]) and, if that is not far
//! enough, uses fewer connections and says so.

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::{
    check, client, raise_fd_hard_limit, raise_fd_limit, Case, Config, NetImpl, NetRuntimes,
};
use crate::harness::{median_f64, progress, rotation};
use crate::idle::{count_label, process_cpu, threads_cpu_by_tid, threads_cpu_since};

/// The pause before each window: the last round trip's wake-ups, and the previous sample's
/// disconnects, have settled and every worker has parked.
pub(super) const SETTLE: Duration = Duration::from_millis(250);
/// Bytes of the echo round trip that proves each connection accepted.
const PROBE_SIZE: usize = 32;
/// How long the client waits for the server to close all its ends after the client closed its.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);
/// How long the runtime may take to count the ended tasks as gone after the last close.
const TASKS_LIMIT: Duration = Duration::from_secs(5);
/// Descriptors kept free for everything else (listeners, pollers, the check connection).
const FD_MARGIN: u64 = 64;

/// What one sample measured.
#[derive(Debug, Clone)]
pub(super) struct IdleSample {
    /// Process CPU per second of the window with no connection open, in ms.
    pub(super) baseline: f64,
    /// Process CPU per second of the window with the connections open, in ms.
    pub(super) loaded: f64,
    /// The runtime's own threads, per second of each window, in ms (`None` without `/proc`).
    pub(super) own_baseline: Option<f64>,
    pub(super) own_loaded: Option<f64>,
    /// Seconds taken to open and prove every connection.
    pub(super) connect_s: f64,
    /// Failed connects, connections the server did not close, tasks left alive; and the first.
    pub(super) errors: usize,
    pub(super) first_error: Option<String>,
}

/// Medians over an implementation's samples, in ms of CPU per idle second.
#[derive(Debug, Clone, Copy)]
pub(super) struct IdleSummary {
    pub(super) baseline: f64,
    pub(super) loaded: f64,
    /// The median of each sample's `loaded - baseline` (the two windows of a sample are taken
    /// seconds apart, so the paired difference is steadier than the difference of medians).
    pub(super) added: f64,
    pub(super) own_baseline: Option<f64>,
    pub(super) own_loaded: Option<f64>,
    pub(super) connect_s: f64,
    pub(super) errors: usize,
}

impl IdleSummary {
    pub(super) fn of(samples: &[IdleSample]) -> IdleSummary {
        let med =
            |f: &dyn Fn(&IdleSample) -> f64| median_f64(&samples.iter().map(f).collect::<Vec<_>>());
        let med_opt = |f: &dyn Fn(&IdleSample) -> Option<f64>| {
            let v: Option<Vec<f64>> = samples.iter().map(f).collect();
            v.map(|v| median_f64(&v))
        };
        IdleSummary {
            baseline: med(&|s| s.baseline),
            loaded: med(&|s| s.loaded),
            added: med(&|s| s.loaded - s.baseline),
            own_baseline: med_opt(&|s| s.own_baseline),
            own_loaded: med_opt(&|s| s.own_loaded),
            connect_s: med(&|s| s.connect_s),
            errors: samples.iter().map(|s| s.errors).sum(),
        }
    }

    /// The target, on the process's whole figure with the connections open.
    pub(super) fn met(&self) -> bool {
        self.loaded < TARGET_MS_PER_S
    }
}

/// The servers of the row, in the order of the tables.
pub(super) const IMPLS: [NetImpl; 3] = [NetImpl::Magpie, NetImpl::Tokio, NetImpl::Smol];

/// The target: process CPU per idle second, in ms.
const TARGET_MS_PER_S: f64 = 10.0;
/// The target, in words.
pub(super) const TARGET: &str = "CPU < 10 ms per idle s";

/// The row's name in tables, for `connections` connections.
pub(super) fn name(connections: usize) -> String {
    format!("idle, {} open conn", count_label(connections))
}

/// Samples of the row for several implementations.
#[derive(Debug)]
pub(crate) struct IdleConnsMeasurement {
    /// Connections held open in each sample.
    pub(super) connections: usize,
    /// `--idle-conns`, when the open-files limit allowed only `connections`.
    pub(super) requested: Option<usize>,
    pub(super) workers: usize,
    /// The length of each window.
    pub(super) window: Duration,
    pub(super) results: Vec<(NetImpl, Vec<IdleSample>)>,
}

impl IdleConnsMeasurement {
    pub(super) fn summary(&self, imp: NetImpl) -> Option<IdleSummary> {
        self.results
            .iter()
            .find(|(i, _)| *i == imp)
            .map(|(_, s)| IdleSummary::of(s))
    }
}

/// How many connections the open-files limit allows at once, each taking two descriptors,
/// after raising the limit for `wanted` connections as far as the process may.
fn fd_capacity(wanted: usize) -> usize {
    let open = std::fs::read_dir("/proc/self/fd").map_or(FD_MARGIN, |d| d.count() as u64);
    raise_fd_hard_limit(2 * wanted as u64 + open + FD_MARGIN);
    let limit = raise_fd_limit();
    usize::try_from(limit.saturating_sub(open + FD_MARGIN) / 2).unwrap_or(usize::MAX)
}

/// Measures the row on `impls`: `cfg.samples` rounds, first place rotating.
pub(super) fn measure(rts: &NetRuntimes, cfg: &Config, impls: &[NetImpl]) -> IdleConnsMeasurement {
    let capacity = fd_capacity(cfg.idle_conns);
    let connections = cfg.idle_conns.min(capacity);
    if connections < cfg.idle_conns {
        eprintln!(
            "idle-conns: the open-files limit allows {connections} connections at once (two \
             descriptors each), not {}; using {connections}",
            cfg.idle_conns
        );
    }
    let window = Duration::from_secs(cfg.secs);
    let started = Instant::now();
    progress(format_args!(
        "{} ({} workers): {} rounds ",
        name(connections),
        rts.workers,
        cfg.samples
    ));
    for &imp in impls {
        check(rts, cfg, Case::Echo(1), imp);
    }
    let mut results: Vec<(NetImpl, Vec<IdleSample>)> =
        impls.iter().map(|&imp| (imp, Vec::new())).collect();
    for round in 0..cfg.samples {
        for (k, imp) in rotation(impls, round).enumerate() {
            let s = sample(rts, imp, connections, window);
            results[(round + k) % impls.len()].1.push(s);
        }
        progress(format_args!("."));
    }
    progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
    IdleConnsMeasurement {
        connections,
        requested: (connections < cfg.idle_conns).then_some(cfg.idle_conns),
        workers: rts.workers,
        window,
        results,
    }
}

/// One sample of `imp` with `connections` idle connections.
fn sample(rts: &NetRuntimes, imp: NetImpl, connections: usize, window: Duration) -> IdleSample {
    let own = |name: &str| rts.owns_thread(imp, name);
    let (baseline, own_baseline) = idle_window(window, own);
    let mut errors = Vec::new();
    let tasks_before = rts.alive_tasks(imp);
    let connect_started = Instant::now();
    let streams = open(rts.addrs(imp).echo, connections, &mut errors);
    let connect_s = connect_started.elapsed().as_secs_f64();
    if let (Some(before), Some(now)) = (tasks_before, rts.alive_tasks(imp)) {
        // Each proven connection has its task, parked on a read.
        if now < before + streams.len() as u64 {
            errors.push(format!(
                "{} server task(s) alive with {} connections open",
                now.saturating_sub(before),
                streams.len()
            ));
        }
    }
    let (loaded, own_loaded) = idle_window(window, own);
    close(streams, &mut errors);
    if let Some(before) = tasks_before {
        let deadline = Instant::now() + TASKS_LIMIT;
        let mut alive = rts.alive_tasks(imp).unwrap_or(before);
        while alive > before && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
            alive = rts.alive_tasks(imp).unwrap_or(before);
        }
        if alive > before {
            errors.push(format!(
                "{} server task(s) still alive {} s after every connection closed",
                alive - before,
                TASKS_LIMIT.as_secs()
            ));
        }
    }
    IdleSample {
        baseline,
        loaded,
        own_baseline,
        own_loaded,
        connect_s,
        errors: errors.len(),
        first_error: errors.into_iter().next(),
    }
}

/// Settles, then sleeps `len` on this thread: the process's CPU and that of the threads whose
/// name `own` accepts, in ms per second of the sleep.
fn idle_window(len: Duration, own: impl Fn(&str) -> bool) -> (f64, Option<f64>) {
    thread::sleep(SETTLE);
    // `/proc` is read outside the process's bracket: the reading costs this thread CPU.
    let own_before = threads_cpu_by_tid(&own);
    let before = process_cpu();
    let start = Instant::now();
    thread::sleep(len);
    let after = process_cpu();
    let wall = start.elapsed().as_secs_f64();
    let own_after = threads_cpu_by_tid(&own);
    let per_second = |d: Duration| d.as_secs_f64() * 1e3 / wall;
    let own = match (own_before, own_after) {
        (Some(b), Some(a)) => Some(per_second(threads_cpu_since(&b, &a))),
        _ => None,
    };
    (per_second(after - before), own)
}

/// Opens `n` connections to `addr`, one at a time, each proven by one echo round trip. Stops
/// at the first failure (an exhausted descriptor table would fail every later one alike).
fn open(addr: SocketAddr, n: usize, errors: &mut Vec<String>) -> Vec<TcpStream> {
    let protocol = client::Protocol::Echo { size: PROBE_SIZE };
    let request = protocol.request();
    let mut streams = Vec::with_capacity(n);
    for i in 0..n {
        match client::connect(addr, &protocol, &request) {
            Ok(stream) => streams.push(stream),
            Err(err) => {
                errors.push(format!("connect #{i} of {n}: {err}"));
                break;
            }
        }
    }
    streams
}

/// Closes `streams` the polite way (see `client::close`): shuts the client's side of every
/// one, then waits for the server to close each; a connection still open after
/// [`CLOSE_LIMIT`], or one that sends data, is an error.
fn close(streams: Vec<TcpStream>, errors: &mut Vec<String>) {
    for stream in &streams {
        // A failure here means the connection is gone already, which the read below sees.
        let _ = stream.shutdown(Shutdown::Write);
    }
    let deadline = Instant::now() + CLOSE_LIMIT;
    let (mut open, mut talked) = (0usize, 0usize);
    let mut scratch = [0u8; 256];
    for mut stream in streams {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let closed = stream.set_nonblocking(false).is_ok()
            && stream.set_read_timeout(Some(left)).is_ok()
            && loop {
                match stream.read(&mut scratch) {
                    Ok(0) => break true,
                    Ok(_) => {
                        talked += 1;
                        break true;
                    }
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                    // The timeout (WouldBlock or TimedOut): the server kept its end open.
                    Err(err)
                        if matches!(
                            err.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        break false
                    }
                    // A reset: the server's end is gone.
                    Err(_) => break true,
                }
            };
        if !closed {
            open += 1;
        }
    }
    if open > 0 {
        errors.push(format!(
            "{open} connection(s) not closed by the server {} s after the client closed them",
            CLOSE_LIMIT.as_secs()
        ));
    }
    if talked > 0 {
        errors.push(format!(
            "{talked} idle connection(s) got bytes from the server"
        ));
    }
}
