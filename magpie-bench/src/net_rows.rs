//! The `net` benchmark: TCP echo and hyper servers on magpie, tokio and smol, loaded over
//! loopback by a client in the same process (issue 13, item 7).
//!
//! Rows (every server: 2 workers by default; see `servers` for the server code, written
//! once for all runtimes):
//!
//! - `echo`: 1 KiB messages echoed back, over 1, 64 and 512 connections (`--conns`); each
//!   connection has one message in flight (a closed loop). Stresses readiness delivery,
//!   task wake-up and the per-read and per-write cost of the runtime's sockets; with one
//!   connection, the latency of a single wake-up chain; with 512, the batching of events
//!   and the spread of many tasks over the workers. Reported: round trips per second and
//!   the 50th and 99th percentiles of the round trip.
//! - `hello`: `GET /` answered `Hello, World!` by hyper 1.x (HTTP/1.1, keep-alive) over 64
//!   connections, loaded by `wrk -t1 -c64 -d<secs>s --latency` when `wrk` is on `PATH`
//!   (`--loader`), else by the built-in client. The same path as `echo` plus hyper's parsing
//!   and encoding, which cost the same on every runtime.
//! - `mixed`: `GET /sum`, whose handler sums 1M `u64`s with a parallel iterator. magpie
//!   calls `par_iter().sum()` in the handler, on the same 2 workers; its peer is tokio with
//!   the sum handed to rayon's global pool (`rayon::spawn`, 2 threads) and awaited on a
//!   `tokio::sync::oneshot`, so that peer has 4 threads to magpie's 2. Stresses the meeting
//!   of I/O tasks and fork-join work.
//! - `blocked`: the echo load on 64 connections while one task on the server runtime spins
//!   for 1 s without awaiting. Reported: the round trips that *began* during the spin, their
//!   99th percentile and maximum. With a worker taken, what was queued behind the spinning
//!   task, and the I/O driver if that worker was the one turning it, must move to the other
//!   worker. magpie against tokio.
//! - `idle-conns` (not in the default `--rows`: about 6 s per server and sample): 10,000
//!   connections (`--idle-conns`) opened to the echo server, each proven by one round trip, then
//!   left silent. Reported: the process's CPU per second of a `--secs` idle window with them
//!   open, against a baseline window with none open just before, in ms of CPU per idle second.
//!   A runtime whose idle workers rescan their sockets, or wake per registered source, shows up
//!   here and in no other row. See `idle_conns` for the method.
//!
//! The client (`client`) is the same for every server: plain threads (one by default,
//! `--client-threads`) driving non-blocking sockets with a `mio::Poll`, nothing shared with
//! any server runtime. Client and servers share the machine's CPUs; on the 2-CPU VM of
//! BENCHMARKS.md the client takes about one of them, which is the same handicap for every
//! server.
//!
//! Method, as in the other subcommands: every runtime and its servers are built once, before
//! any row, and live for the whole run. Per row: warm-up rounds (`--warmup`, half a second
//! of load each, built-in client), then `--samples` rounds, each running every runtime once
//! with its first place rotating from round to round. A sample connects afresh, loads for
//! `--secs` after a quarter second of warm-up that is not counted, waits for the last
//! responses and disconnects. Each runtime's figure is the median over its samples of
//! throughput and of each percentile; the ratios are ratios of those medians. Every response
//! is checked (the echo byte for byte, the HTTP status and body), and a connection that gets
//! no response for 10 s is reported as a hung server rather than waited on. The `idle-conns`
//! row differs: no warm-up, no load, two idle windows per sample (`idle_conns`).

mod client;
mod idle_conns;
mod report;
mod servers;
mod wrk;

pub(crate) use report::{measurements_json, render_summary};

use std::fmt;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{median_f64, ms, progress, rotation};
use client::{Load, LoadResult, Protocol};
use idle_conns::IdleConnsMeasurement;
use servers::{Addrs, SmolPool};

/// Bytes per echo message.
const ECHO_SIZE: usize = 1024;
/// Load before a sample's measured window, not counted.
const SAMPLE_WARMUP: Duration = Duration::from_millis(250);
/// Load per warm-up round.
const WARMUP_LOAD: Duration = Duration::from_millis(500);
/// How long the spinning task of the `blocked` row keeps its worker.
const SPIN: Duration = Duration::from_secs(1);
/// Load before the spin starts, and after it ends, in the `blocked` row.
const BLOCKED_LEAD: Duration = Duration::from_millis(300);
const BLOCKED_TAIL: Duration = Duration::from_millis(300);

/// One of the servers under comparison.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetImpl {
    /// `magpie::net` on a magpie runtime.
    Magpie,
    /// `tokio::net` on tokio's multi-thread runtime.
    Tokio,
    /// `async-io` sockets on an `async-executor` run by N threads.
    Smol,
    /// tokio, with the `/sum` of the `mixed` row on rayon's global pool.
    TokioRayon,
}

impl NetImpl {
    /// All of them, in the order of the tables.
    const ALL: [NetImpl; 4] = [
        NetImpl::Magpie,
        NetImpl::Tokio,
        NetImpl::Smol,
        NetImpl::TokioRayon,
    ];

    fn name(self) -> &'static str {
        match self {
            NetImpl::Magpie => "magpie",
            NetImpl::Tokio => "tokio",
            NetImpl::Smol => "smol",
            NetImpl::TokioRayon => "tokio+rayon",
        }
    }
}

impl fmt::Display for NetImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A row of the benchmark, as `--rows` names it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetRow {
    Echo,
    Hello,
    Mixed,
    Blocked,
    IdleConns,
}

/// Who loads the HTTP rows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loader {
    /// `wrk` if it is on `PATH`, else the built-in client.
    Auto,
    /// `wrk -t1`; fails if it is missing.
    Wrk,
    /// The built-in closed-loop client.
    Builtin,
}

/// The run's settings (from the command line).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) rows: Vec<NetRow>,
    pub(crate) secs: u64,
    pub(crate) conns: Vec<usize>,
    pub(crate) http_conns: usize,
    pub(crate) samples: usize,
    pub(crate) warmup: usize,
    pub(crate) client_threads: usize,
    pub(crate) impls: Vec<NetImpl>,
    /// Connections held open by the `idle-conns` row.
    pub(crate) idle_conns: usize,
}

/// One measured line of a report: a row at one connection count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Echo(usize),
    Hello(usize),
    Mixed(usize),
    Blocked(usize),
}

impl Case {
    fn name(self) -> String {
        match self {
            Case::Echo(c) => format!("echo 1 KiB, {c} conn"),
            Case::Hello(c) => format!("hello, {c} conn"),
            Case::Mixed(c) => format!("mixed /sum, {c} conn"),
            Case::Blocked(c) => format!("blocked worker, echo {c} conn"),
        }
    }

    fn connections(self) -> usize {
        match self {
            Case::Echo(c) | Case::Hello(c) | Case::Mixed(c) | Case::Blocked(c) => c,
        }
    }

    /// The implementations that take part, magpie first.
    fn impls(self) -> &'static [NetImpl] {
        match self {
            Case::Echo(_) | Case::Hello(_) => &[NetImpl::Magpie, NetImpl::Tokio, NetImpl::Smol],
            Case::Mixed(_) => &[NetImpl::Magpie, NetImpl::TokioRayon],
            Case::Blocked(_) => &[NetImpl::Magpie, NetImpl::Tokio],
        }
    }

    /// The peer whose ratio the target is stated against.
    fn target_peer(self) -> NetImpl {
        match self {
            Case::Mixed(_) => NetImpl::TokioRayon,
            _ => NetImpl::Tokio,
        }
    }

    /// The target, in words.
    fn target(self) -> &'static str {
        match self {
            Case::Echo(_) | Case::Hello(_) => "thr ≥ 1.0×, p99 ≤ 1.0×",
            Case::Mixed(_) => "thr ≥ 1.3×, p99 ≤ 0.8×",
            Case::Blocked(_) => "p99 ≤ 5 ms",
        }
    }

    /// Whether magpie met the target, from the medians.
    fn met(self, magpie: &Summary, peer: &Summary) -> bool {
        let thr = magpie.throughput / peer.throughput;
        let p99 = magpie.p99 / peer.p99;
        match self {
            Case::Echo(_) | Case::Hello(_) => thr >= 1.0 && p99 <= 1.0,
            Case::Mixed(_) => thr >= 1.3 && p99 <= 0.8,
            Case::Blocked(_) => magpie.p99 <= 5.0,
        }
    }
}

/// What one sample measured.
#[derive(Debug, Clone)]
struct Sample {
    /// Round trips (requests) per second in the measured window.
    throughput: f64,
    p50: Duration,
    p99: Duration,
    /// The slowest round trip, where the loader reports it (not `wrk`).
    max: Option<Duration>,
    /// Errors the client saw, and the first of them.
    errors: usize,
    first_error: Option<String>,
}

/// Medians over an implementation's samples, in round trips/s and ms.
#[derive(Debug, Clone, Copy)]
struct Summary {
    throughput: f64,
    p50: f64,
    p99: f64,
    max: Option<f64>,
    errors: usize,
}

impl Summary {
    fn of(samples: &[Sample]) -> Summary {
        let med =
            |f: &dyn Fn(&Sample) -> f64| median_f64(&samples.iter().map(f).collect::<Vec<_>>());
        let maxes: Vec<f64> = samples.iter().filter_map(|s| s.max.map(ms)).collect();
        Summary {
            throughput: med(&|s| s.throughput),
            p50: med(&|s| ms(s.p50)),
            p99: med(&|s| ms(s.p99)),
            max: (!maxes.is_empty()).then(|| median_f64(&maxes)),
            errors: samples.iter().map(|s| s.errors).sum(),
        }
    }
}

/// Samples of one case for several implementations.
#[derive(Debug)]
pub(crate) struct CaseMeasurement {
    case: Case,
    workers: usize,
    loader: &'static str,
    results: Vec<(NetImpl, Vec<Sample>)>,
}

impl CaseMeasurement {
    fn summary(&self, imp: NetImpl) -> Option<Summary> {
        self.results
            .iter()
            .find(|(i, _)| *i == imp)
            .map(|(_, s)| Summary::of(s))
    }
}

/// Thread names of the server runtimes (magpie appends `-{index}`; smol's are `net-smol-{i}`,
/// plus async-io's own `async-io` thread).
const MAGPIE_THREADS: &str = "net-magpie";
const TOKIO_THREADS: &str = "net-tokio";

/// Every server runtime with its servers, built once.
#[derive(Debug)]
pub(crate) struct NetRuntimes {
    workers: usize,
    magpie: magpie::Runtime,
    tokio: tokio::runtime::Runtime,
    /// Held for its threads, which run smol's servers.
    _smol: SmolPool,
    magpie_addrs: Addrs,
    tokio_addrs: Addrs,
    smol_addrs: Addrs,
}

impl NetRuntimes {
    /// Builds every runtime with `workers` workers and starts its servers; sets up rayon's
    /// global pool with `workers` threads for tokio+rayon.
    pub(crate) fn new(workers: usize) -> NetRuntimes {
        raise_fd_limit();
        if let Err(err) = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("net-rayon-{i}"))
            .build_global()
        {
            eprintln!("warning: rayon's global pool was already built ({err})");
        }
        let data = servers::sum_input();
        let magpie = magpie::Runtime::builder()
            .worker_threads(workers)
            .thread_name(MAGPIE_THREADS)
            .build()
            .expect("could not build the magpie runtime");
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name(TOKIO_THREADS)
            .enable_io()
            .build()
            .expect("could not build the tokio runtime");
        let smol = SmolPool::new(workers);
        let magpie_addrs = servers::start_magpie(&magpie, &data);
        let tokio_addrs = servers::start_tokio(&tokio, &data);
        let smol_addrs = servers::start_smol(&smol);
        NetRuntimes {
            workers,
            magpie,
            tokio,
            _smol: smol,
            magpie_addrs,
            tokio_addrs,
            smol_addrs,
        }
    }

    fn addrs(&self, imp: NetImpl) -> Addrs {
        match imp {
            NetImpl::Magpie => self.magpie_addrs,
            NetImpl::Tokio | NetImpl::TokioRayon => self.tokio_addrs,
            NetImpl::Smol => self.smol_addrs,
        }
    }

    /// Whether the thread named `name` belongs to `imp`'s runtime.
    fn owns_thread(&self, imp: NetImpl, name: &str) -> bool {
        match imp {
            NetImpl::Magpie => name.starts_with(MAGPIE_THREADS),
            NetImpl::Tokio | NetImpl::TokioRayon => name.starts_with(TOKIO_THREADS),
            NetImpl::Smol => name.starts_with(servers::SMOL_THREADS) || name == "async-io",
        }
    }

    /// The tasks alive on `imp`'s runtime, where it counts them (magpie and tokio).
    fn alive_tasks(&self, imp: NetImpl) -> Option<u64> {
        match imp {
            NetImpl::Magpie => Some(self.magpie.stats().tasks_alive),
            NetImpl::Tokio | NetImpl::TokioRayon => {
                Some(self.tokio.metrics().num_alive_tasks() as u64)
            }
            NetImpl::Smol => None,
        }
    }

    /// Spawns the `blocked` row's spinner on `imp`'s runtime.
    fn spawn_spinner(&self, imp: NetImpl, report: mpsc::SyncSender<(Instant, Instant)>) {
        match imp {
            NetImpl::Magpie => drop(self.magpie.spawn(servers::spin(SPIN, report))),
            NetImpl::Tokio => drop(self.tokio.spawn(servers::spin(SPIN, report))),
            other => unreachable!("{other} does not run the blocked row"),
        }
    }
}

/// The current limits on open files, or `None` if `getrlimit` fails.
fn fd_limits() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0).then_some(limit)
}

/// Lifts the soft limit on open files to the hard limit: 512 connections take 1,024
/// descriptors in this one process, client and server ends together. Returns the soft limit
/// in effect afterwards (0 if it cannot be read).
fn raise_fd_limit() -> u64 {
    let Some(mut limit) = fd_limits() else {
        return 0;
    };
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit; failure leaves the old limit in place.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
    fd_limits().map_or(0, |l| l.rlim_cur)
}

/// Lifts both limits on open files to `wanted` where the hard limit is lower: only a
/// privileged process (`CAP_SYS_RESOURCE`) may, up to `fs.nr_open`; for any other the call
/// fails and changes nothing. The idle-connections row needs two descriptors per connection.
fn raise_fd_hard_limit(wanted: u64) {
    let Some(limit) = fd_limits() else { return };
    if limit.rlim_max < wanted {
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: wanted,
        };
        // SAFETY: `raised` is a valid rlimit; failure (EPERM, EINVAL) leaves the old limit.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// The protocol and path of a case's requests.
fn protocol(case: Case) -> Protocol {
    match case {
        Case::Echo(_) | Case::Blocked(_) => Protocol::Echo { size: ECHO_SIZE },
        Case::Hello(_) => Protocol::Http {
            path: "/".to_owned(),
            body: Some(servers::HELLO.to_vec()),
        },
        Case::Mixed(_) => Protocol::Http {
            path: "/sum".to_owned(),
            body: Some(servers::expected_sum().to_string().into_bytes()),
        },
    }
}

/// Runs the built-in client against `imp`'s server of `case` for `duration`.
fn builtin_load(
    rts: &NetRuntimes,
    cfg: &Config,
    case: Case,
    imp: NetImpl,
    duration: Duration,
) -> LoadResult {
    let addrs = rts.addrs(imp);
    let addr = match case {
        Case::Echo(_) | Case::Blocked(_) => addrs.echo,
        Case::Hello(_) | Case::Mixed(_) => addrs.http,
    };
    client::run(&Load {
        addr,
        protocol: protocol(case),
        connections: case.connections(),
        threads: cfg.client_threads,
        duration,
    })
}

/// Throughput and percentiles of the round trips of `result` selected by `keep`, over a
/// window of `window`.
fn summarize(
    result: &LoadResult,
    window: Duration,
    keep: impl Fn(client::RoundTrip) -> bool,
) -> Sample {
    let mut latencies: Vec<Duration> = result
        .round_trips
        .iter()
        .copied()
        .filter(|&rt| keep(rt))
        .map(client::RoundTrip::latency)
        .collect();
    latencies.sort_unstable();
    Sample {
        throughput: latencies.len() as f64 / window.as_secs_f64(),
        p50: client::percentile(&latencies, 50.0),
        p99: client::percentile(&latencies, 99.0),
        max: latencies.last().copied(),
        errors: result.errors.len(),
        first_error: result.errors.first().cloned(),
    }
}

/// Nanoseconds from `began` to `t` (zero if `t` is earlier).
fn since(began: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(began).as_nanos()).unwrap_or(u64::MAX)
}

/// One sample of `case` on `imp`.
fn sample(rts: &NetRuntimes, cfg: &Config, case: Case, imp: NetImpl, use_wrk: bool) -> Sample {
    let secs = Duration::from_secs(cfg.secs);
    match case {
        Case::Hello(conns) | Case::Mixed(conns) if use_wrk => {
            let path = if matches!(case, Case::Mixed(_)) {
                "/sum"
            } else {
                "/"
            };
            let url = format!("http://{}{path}", rts.addrs(imp).http);
            match wrk::run(&url, conns, cfg.secs) {
                Ok(report) => Sample {
                    throughput: report.requests_per_sec,
                    p50: report.p50,
                    p99: report.p99,
                    max: None,
                    errors: usize::try_from(report.errors).unwrap_or(usize::MAX),
                    first_error: (report.errors > 0)
                        .then(|| format!("wrk: {} errors", report.errors)),
                },
                Err(err) => panic!("{err}"),
            }
        }
        Case::Echo(_) | Case::Hello(_) | Case::Mixed(_) => {
            let result = builtin_load(rts, cfg, case, imp, SAMPLE_WARMUP + secs);
            let (from, to) = (nanos(SAMPLE_WARMUP), nanos(SAMPLE_WARMUP + secs));
            summarize(&result, secs, |rt| rt.end_ns >= from && rt.end_ns < to)
        }
        Case::Blocked(_) => {
            let (report_tx, report_rx) = mpsc::sync_channel(1);
            let result = thread::scope(|scope| {
                let load = scope.spawn(|| {
                    builtin_load(rts, cfg, case, imp, BLOCKED_LEAD + SPIN + BLOCKED_TAIL)
                });
                thread::sleep(BLOCKED_LEAD);
                rts.spawn_spinner(imp, report_tx);
                load.join().expect("the client panicked")
            });
            let (spin_start, spin_end) = report_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("the spinning task never reported");
            let (from, to) = (
                since(result.began, spin_start),
                since(result.began, spin_end),
            );
            summarize(&result, spin_end - spin_start, |rt| {
                rt.start_ns >= from && rt.start_ns < to
            })
        }
    }
}

/// Nanoseconds in `d`.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Checks that `imp` answers `case` right, with one connection and one request.
fn check(rts: &NetRuntimes, cfg: &Config, case: Case, imp: NetImpl) {
    let one = match case {
        Case::Echo(_) | Case::Blocked(_) => Case::Echo(1),
        Case::Hello(_) => Case::Hello(1),
        Case::Mixed(_) => Case::Mixed(1),
    };
    let result = builtin_load(rts, cfg, one, imp, Duration::ZERO);
    assert!(
        result.errors.is_empty() && !result.round_trips.is_empty(),
        "{imp}: a single {} request failed: {:?}",
        case.name(),
        result.errors
    );
}

/// The cases of `cfg`, in the order they run.
fn cases(cfg: &Config) -> Vec<Case> {
    let mut out = Vec::new();
    for row in [NetRow::Echo, NetRow::Hello, NetRow::Mixed, NetRow::Blocked] {
        if !cfg.rows.contains(&row) {
            continue;
        }
        match row {
            NetRow::Echo => out.extend(cfg.conns.iter().map(|&c| Case::Echo(c))),
            NetRow::Hello => out.push(Case::Hello(cfg.http_conns)),
            NetRow::Mixed => out.push(Case::Mixed(cfg.http_conns)),
            NetRow::Blocked => out.push(Case::Blocked(cfg.http_conns)),
            // Not a load: measured apart, by `idle_conns`.
            NetRow::IdleConns => {}
        }
    }
    out
}

/// Whether the HTTP rows use `wrk`; an error if `--loader wrk` and it is missing.
pub(crate) fn use_wrk(loader: Loader) -> Result<bool, String> {
    match loader {
        Loader::Builtin => Ok(false),
        Loader::Auto => Ok(wrk::available()),
        Loader::Wrk if wrk::available() => Ok(true),
        Loader::Wrk => Err("--loader wrk: wrk is not on PATH".to_owned()),
    }
}

/// Everything a run measured.
#[derive(Debug)]
pub(crate) struct NetMeasurements {
    /// The load rows, in the order they ran.
    cases: Vec<CaseMeasurement>,
    /// The `idle-conns` row, if it ran.
    idle_conns: Option<IdleConnsMeasurement>,
}

/// Measures every row of `cfg`: the load rows, then `idle-conns`.
pub(crate) fn measure(rts: &NetRuntimes, cfg: &Config, use_wrk: bool) -> NetMeasurements {
    let cases = measure_cases(rts, cfg, use_wrk);
    let idle_impls: Vec<NetImpl> = idle_conns::IMPLS
        .into_iter()
        .filter(|imp| cfg.impls.contains(imp))
        .collect();
    let idle_conns = (cfg.rows.contains(&NetRow::IdleConns) && !idle_impls.is_empty()).then(|| {
        let m = idle_conns::measure(rts, cfg, &idle_impls);
        println!("{}", report::render_idle_conns(&m, cfg));
        m
    });
    NetMeasurements { cases, idle_conns }
}

/// Measures every load case of `cfg`.
fn measure_cases(rts: &NetRuntimes, cfg: &Config, use_wrk: bool) -> Vec<CaseMeasurement> {
    let mut out = Vec::new();
    for case in cases(cfg) {
        let impls: Vec<NetImpl> = case
            .impls()
            .iter()
            .copied()
            .filter(|imp| cfg.impls.contains(imp))
            .collect();
        if impls.is_empty() {
            continue;
        }
        let http = matches!(case, Case::Hello(_) | Case::Mixed(_));
        let wrk = http && use_wrk;
        let started = Instant::now();
        progress(format_args!(
            "{} ({} workers): {} warm-up + {} rounds ",
            case.name(),
            rts.workers,
            cfg.warmup,
            cfg.samples
        ));
        for &imp in &impls {
            check(rts, cfg, case, imp);
        }
        for round in 0..cfg.warmup {
            for imp in rotation(&impls, round) {
                let warm = match case {
                    Case::Blocked(c) => Case::Echo(c),
                    other => other,
                };
                let _ = builtin_load(rts, cfg, warm, imp, WARMUP_LOAD);
            }
        }
        let mut results: Vec<(NetImpl, Vec<Sample>)> =
            impls.iter().map(|&imp| (imp, Vec::new())).collect();
        for round in 0..cfg.samples {
            for (k, imp) in rotation(&impls, round).enumerate() {
                let s = sample(rts, cfg, case, imp, wrk);
                results[(round + k) % impls.len()].1.push(s);
            }
            progress(format_args!("."));
        }
        progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
        let m = CaseMeasurement {
            case,
            workers: rts.workers,
            loader: if wrk { "wrk -t1" } else { "built-in client" },
            results,
        };
        println!("{}", report::render_case(&m, cfg));
        out.push(m);
    }
    out
}
