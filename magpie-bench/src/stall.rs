//! The `stall` benchmark: how long a runnable task waits when it is queued behind a long
//! poll (issue 15, part 4: "queued behind a stall").
//!
//! Each trial spawns one task X from outside the pool. X queues a task T on its own worker,
//! in one of the *shapes* below, notes the time, and then blocks its worker for `--stall-ms`
//! (a blocking wait inside the poll: a task that blocks without `block_in_place`). T notes
//! the time it starts. The start latency is T's start minus X's note. Trials run one after
//! the other, `--gap-ms` apart, so the other workers have parked when X blocks, and the
//! latency includes waking one.
//!
//! X's block ends early once T has started, unless `--full-stall` is given: T's start is
//! noted by then, and nothing X does afterwards can change it, so a trial of a 1 s stall
//! whose T is taken at once lasts about as long as T's start latency. That is what lets the
//! issue's shape (1,000 trials behind a 1-second stall) run in seconds; a runtime whose T
//! waits for the stall (tokio's LIFO slot) still pays the whole second per trial, which is
//! why the peers run `--peer-trials` trials. The shapes:
//!
//! * `lifo`: T spawned from X's poll, into the worker's LIFO slot (tokio's is owner-only:
//!   there T waits for the stall, tokio#4941);
//! * `ring`: T spawned, then a second task that displaces T from the LIFO slot to the
//!   worker's local queue;
//! * `mailbox`: T submitted to X's own worker with `submit_to` (magpie only: tokio has no
//!   per-worker submission);
//! * `job`: T is the second half of a `join` whose first half blocks (magpie only).
//!
//! Peers: magpie and tokio's multi-thread runtime, each with `--workers` workers. The issue's
//! target for magpie at 2 workers: median ≤ 2 ms and p99 ≤ threshold + 2 ms, where the
//! threshold is a stall monitor's; magpie needs none (thieves take the queued work as soon as
//! they look), so the report checks p99 ≤ 2 ms.
//!
//! With `--busy-others` (magpie only) every other worker runs a task that yields in a loop
//! while X blocks, so nobody searches and no thief takes T: only the stall monitor's hand-off
//! moves it, to the inject queue that busy workers pull at maintenance. The target there is
//! the p99 ≤ threshold + 2 ms (`--threshold-ms`, the runtime's stall threshold). The
//! `job` shape is left out: the monitor leaves jobs on the deque, for thieves.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::Serialize;

use crate::harness::{fmt_ms, markdown_table, ms, progress};

/// Where T is queued behind the stall.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Lifo,
    Ring,
    Mailbox,
    Job,
}

impl Shape {
    pub(crate) const ALL: [Shape; 4] = [Shape::Lifo, Shape::Ring, Shape::Mailbox, Shape::Job];

    fn label(self) -> &'static str {
        match self {
            Shape::Lifo => "LIFO slot",
            Shape::Ring => "local queue (ring)",
            Shape::Mailbox => "mailbox (submit_to)",
            Shape::Job => "join half (deque)",
        }
    }
}

/// The runtimes compared.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StallImpl {
    Magpie,
    Tokio,
}

impl fmt::Display for StallImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StallImpl::Magpie => "magpie",
            StallImpl::Tokio => "tokio",
        })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) stall: Duration,
    /// Block for the whole stall even after T started.
    pub(crate) full_stall: bool,
    /// magpie's trials per shape.
    pub(crate) trials: usize,
    /// The peers' trials per shape (the first `peer_trials` of magpie's, alternated).
    pub(crate) peer_trials: usize,
    /// The idle pause before each trial, long enough for the workers to park.
    pub(crate) gap: Duration,
    /// Keep every other worker busy during the stall (magpie only).
    pub(crate) busy_others: bool,
    /// magpie's stall threshold.
    pub(crate) threshold: Duration,
    pub(crate) shapes: Vec<Shape>,
    pub(crate) impls: Vec<StallImpl>,
}

/// The latencies of one (shape, runtime) pair; `None` where the runtime has no such queue.
#[derive(Debug)]
pub(crate) struct Cell {
    shape: Shape,
    imp: StallImpl,
    latencies: Option<Vec<Duration>>,
}

/// How long a trial may take before the benchmark gives up on it (T never ran).
fn trial_limit(stall: Duration) -> Duration {
    stall * 4 + Duration::from_secs(10)
}

struct Runtimes {
    magpie: Arc<magpie::Runtime>,
    tokio: tokio::runtime::Runtime,
}

/// Runs every trial, alternating the runtimes trial by trial.
pub(crate) fn run(cfg: &Config) -> Vec<Cell> {
    let rts = Runtimes {
        magpie: Arc::new(
            magpie::Runtime::builder()
                .worker_threads(cfg.workers)
                .thread_name("bench-stall-mp")
                .stall_threshold(Some(cfg.threshold))
                .build()
                .expect("could not build the magpie runtime"),
        ),
        tokio: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.workers)
            .thread_name("bench-stall-tokio")
            .build()
            .expect("could not build the tokio runtime"),
    };
    let mut cells = Vec::new();
    for &shape in &cfg.shapes {
        let mut per_impl: Vec<(StallImpl, Option<Vec<Duration>>)> = cfg
            .impls
            .iter()
            .map(|&imp| (imp, supported(shape, imp, cfg.busy_others).then(Vec::new)))
            .collect();
        if per_impl.iter().any(|(_, latencies)| latencies.is_some()) {
            run_shape(&rts, shape, cfg, &mut per_impl);
        }
        cells.extend(per_impl.into_iter().map(|(imp, latencies)| Cell {
            shape,
            imp,
            latencies,
        }));
    }
    cells
}

/// The trials of one shape, alternating the runtimes that have it (`Some` in `per_impl`).
fn run_shape(
    rts: &Runtimes,
    shape: Shape,
    cfg: &Config,
    per_impl: &mut [(StallImpl, Option<Vec<Duration>>)],
) {
    progress(format_args!("stall {}: ", shape.label()));
    let started = Instant::now();
    for trial in 0..cfg.trials.max(cfg.peer_trials) {
        for k in 0..per_impl.len() {
            // Rotate which runtime goes first.
            let i = (trial + k) % per_impl.len();
            let imp = per_impl[i].0;
            let wanted = match imp {
                StallImpl::Magpie => cfg.trials,
                StallImpl::Tokio => cfg.peer_trials,
            };
            if let Some(latencies) = per_impl[i].1.as_mut().filter(|l| l.len() < wanted) {
                std::thread::sleep(cfg.gap);
                latencies.push(trial_once(rts, shape, imp, cfg));
            }
        }
        if trial % 10 == 9 {
            progress(format_args!("."));
        }
    }
    progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
}

fn supported(shape: Shape, imp: StallImpl, busy_others: bool) -> bool {
    match imp {
        StallImpl::Magpie => !(busy_others && shape == Shape::Job),
        StallImpl::Tokio => !busy_others && matches!(shape, Shape::Lifo | Shape::Ring),
    }
}

/// The other workers' spinners of a `--busy-others` trial.
struct Spinners {
    stop: Arc<AtomicBool>,
}

impl Spinners {
    /// From X's poll on worker `me`: puts a task that yields in a loop on every other
    /// worker, and returns once each runs on a worker of its own.
    fn start(rt: &magpie::Runtime, me: usize) -> Spinners {
        let others: Vec<usize> = (0..rt.num_workers()).filter(|&w| w != me).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let on: Arc<Vec<AtomicUsize>> = Arc::new(
            others
                .iter()
                .map(|_| AtomicUsize::new(usize::MAX))
                .collect(),
        );
        for (slot, &worker) in others.iter().enumerate() {
            let (stop, on) = (stop.clone(), on.clone());
            // Spawned inside a closure on `worker`: the task starts in its LIFO slot.
            let submitted = rt.submit_to(worker, move || {
                drop(magpie::spawn(async move {
                    // Relaxed, both: a flag and a report, nothing published through them.
                    while !stop.load(Relaxed) {
                        on[slot].store(magpie::current_worker_index().unwrap_or(me), Relaxed);
                        magpie::task::yield_now().await;
                    }
                }));
            });
            drop(submitted.expect("a worker index"));
        }
        // A woken worker may steal another's spinner before its own arrives: wait until
        // every other worker runs one (this worker, blocked here, steals none).
        let limit = Instant::now() + Duration::from_secs(10);
        loop {
            let mut seen: Vec<usize> = on.iter().map(|w| w.load(Relaxed)).collect();
            seen.sort_unstable();
            if seen == others {
                return Spinners { stop };
            }
            assert!(
                Instant::now() < limit,
                "the spinners never spread: {seen:?}"
            );
            std::thread::yield_now();
        }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// How X blocks its worker: for the whole stall, or until T says it started.
struct Block {
    stall: Duration,
    /// `None` for a full stall.
    started: Option<mpsc::Receiver<()>>,
}

impl Block {
    fn wait(self) {
        match self.started {
            // A disconnect (T dropped unrun) ends the wait as well: the trial then fails
            // on T's missing start, below.
            Some(started) => drop(started.recv_timeout(self.stall)),
            None => std::thread::sleep(self.stall),
        }
    }
}

/// One trial: returns T's start latency.
fn trial_once(rts: &Runtimes, shape: Shape, imp: StallImpl, cfg: &Config) -> Duration {
    let stall = cfg.stall;
    let (tx, rx) = mpsc::channel::<Instant>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let block = Block {
        stall,
        started: (!cfg.full_stall).then_some(done_rx),
    };
    // T's body: note the start, then let X's block end.
    let started = move || {
        let _ = tx.send(Instant::now());
        let _ = done_tx.send(());
    };
    let queued = match imp {
        StallImpl::Magpie => {
            let rt = rts.magpie.clone();
            let busy_others = cfg.busy_others;
            let x = rts.magpie.spawn(async move {
                let me = magpie::current_worker_index().expect("on a worker");
                let _spinners = busy_others.then(|| Spinners::start(&rt, me));
                let queued = Instant::now();
                match shape {
                    Shape::Lifo => drop(magpie::spawn(async move { started() })),
                    Shape::Ring => {
                        drop(magpie::spawn(async move { started() }));
                        drop(magpie::spawn(async {}));
                    }
                    Shape::Mailbox => drop(rt.submit_to(me, started).expect("worker index")),
                    Shape::Job => {
                        magpie::join(|| block.wait(), started);
                        return queued;
                    }
                }
                drop(rt);
                block.wait();
                queued
            });
            rts.magpie.block_on(x).expect("the stalling task failed")
        }
        StallImpl::Tokio => {
            let x = rts.tokio.spawn(async move {
                let queued = Instant::now();
                match shape {
                    Shape::Lifo => drop(tokio::spawn(async move { started() })),
                    Shape::Ring => {
                        drop(tokio::spawn(async move { started() }));
                        drop(tokio::spawn(async {}));
                    }
                    Shape::Mailbox | Shape::Job => unreachable!("not supported"),
                }
                block.wait();
                queued
            });
            rts.tokio.block_on(x).expect("the stalling task failed")
        }
    };
    let start = rx
        .recv_timeout(trial_limit(stall))
        .unwrap_or_else(|_| panic!("{imp}, {}: the queued task never ran", shape.label()));
    start.saturating_duration_since(queued)
}

/// The `p`-th percentile (nearest rank) of `values`, sorted here.
fn percentile(values: &[Duration], p: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The report as markdown.
pub(crate) fn render(cfg: &Config, cells: &[Cell]) -> String {
    let mut rows = Vec::new();
    for cell in cells {
        let mut row = vec![cell.shape.label().to_owned(), cell.imp.to_string()];
        match &cell.latencies {
            Some(l) if !l.is_empty() => {
                row.push(l.len().to_string());
                let median = ms(percentile(l, 50.0));
                let p99 = ms(percentile(l, 99.0));
                row.push(fmt_ms(median));
                row.push(fmt_ms(p99));
                row.push(fmt_ms(ms(*l.iter().max().expect("non-empty"))));
                row.push(if cell.imp == StallImpl::Magpie {
                    let met = if cfg.busy_others {
                        p99 <= ms(cfg.threshold) + 2.0
                    } else {
                        median <= 2.0 && p99 <= 2.0
                    };
                    if met {
                        "met".to_owned()
                    } else {
                        "NOT met".to_owned()
                    }
                } else {
                    "–".to_owned()
                });
            }
            _ => row.extend(["", "n/a", "", "", ""].map(str::to_owned)),
        }
        rows.push(row);
    }
    let mut out = format!(
        "### stall — start latency of a task queued behind a {} ms poll, {} workers{}\n\n",
        cfg.stall.as_millis(),
        cfg.workers,
        if cfg.busy_others {
            format!(
                ", the others busy (magpie's stall threshold {} ms)",
                cfg.threshold.as_millis()
            )
        } else {
            String::new()
        }
    );
    let target = if cfg.busy_others {
        format!(
            "target (magpie: p99 ≤ threshold + 2 = {} ms)",
            cfg.threshold.as_millis() + 2
        )
    } else {
        "target (magpie: median and p99 ≤ 2 ms)".to_owned()
    };
    out.push_str(&markdown_table(
        &[
            "queued in",
            "runtime",
            "trials",
            "median (ms)",
            "p99 (ms)",
            "max (ms)",
            &target,
        ],
        &[false, false, true, true, true, true, false],
        &rows,
    ));
    out.push_str(&format!(
        "\nA task blocks its worker (a blocking wait in its poll, no `block_in_place`) right \
         after queuing another task on that worker; the latency is from the queuing to the \
         other task's start. Trials run one at a time, alternating the runtimes, each after \
         an idle pause of {} ms, so the other workers have parked and the latency includes \
         waking one. n/a: the runtime has no such queue.\n",
        cfg.gap.as_secs_f64() * 1e3
    ));
    if cfg.busy_others {
        out.push_str(
            "Every other worker ran a task that yields in a loop, so nobody searched: only the \
             stall monitor's hand-off moved the queued task (tokio has none, and the join \
             shape is left to thieves).\n",
        );
    }
    out.push_str(if cfg.full_stall {
        "Every stall lasted its whole length (`--full-stall`).\n"
    } else {
        "A stall ends as soon as the queued task has started (its start is noted by then); \
         `--full-stall` keeps every stall whole.\n"
    });
    out
}

/// The settings and the raw latencies as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct StallJson {
    workers: usize,
    stall_ms: f64,
    full_stall: bool,
    gap_ms: f64,
    busy_others: bool,
    threshold_ms: f64,
    /// Every measured cell, in the order they ran.
    cells: Vec<CellJson>,
}

/// One measured [`Cell`] as JSON.
#[derive(Debug, Serialize)]
struct CellJson {
    shape: &'static str,
    runtime: String,
    latencies_ms: Vec<f64>,
}

/// `cfg` and the measured `cells` as JSON (a cell that was not measured is left out).
pub(crate) fn to_json(cfg: &Config, cells: &[Cell]) -> StallJson {
    StallJson {
        workers: cfg.workers,
        stall_ms: ms(cfg.stall),
        full_stall: cfg.full_stall,
        gap_ms: ms(cfg.gap),
        busy_others: cfg.busy_others,
        threshold_ms: ms(cfg.threshold),
        cells: cells
            .iter()
            .filter_map(|cell| {
                Some(CellJson {
                    shape: cell.shape.label(),
                    runtime: cell.imp.to_string(),
                    latencies_ms: cell.latencies.as_ref()?.iter().map(|&d| ms(d)).collect(),
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::json_check::{keys, numbers, parse, text};

    fn config(full_stall: bool) -> Config {
        Config {
            workers: 2,
            stall: Duration::from_millis(20),
            full_stall,
            trials: 3,
            peer_trials: 1,
            gap: Duration::from_millis(1),
            busy_others: false,
            threshold: Duration::from_millis(100),
            shapes: Shape::ALL.to_vec(),
            impls: vec![StallImpl::Magpie, StallImpl::Tokio],
        }
    }

    #[test]
    fn the_json_has_the_settings_and_every_measured_cell() {
        let mut cfg = config(true);
        cfg.busy_others = true;
        let cells = [
            Cell {
                shape: Shape::Mailbox,
                imp: StallImpl::Magpie,
                latencies: Some(vec![Duration::from_micros(1500), Duration::from_millis(2)]),
            },
            // Not measured (the shape does not apply): left out.
            Cell {
                shape: Shape::Job,
                imp: StallImpl::Tokio,
                latencies: None,
            },
            Cell {
                shape: Shape::Lifo,
                imp: StallImpl::Tokio,
                latencies: Some(Vec::new()),
            },
        ];
        let json = text(to_json(&cfg, &cells));
        let v = parse(&json);
        assert!(v["workers"].is_u64(), "{json}");
        assert_eq!(v["workers"], 2);
        assert_eq!(v["stall_ms"].as_f64(), Some(20.0));
        // An f64 is written as a float even where it is whole (`20.0`, not `20`).
        assert!(v["stall_ms"].is_f64(), "{json}");
        assert_eq!(v["full_stall"], true);
        assert_eq!(v["gap_ms"].as_f64(), Some(1.0));
        assert_eq!(v["busy_others"], true);
        assert_eq!(v["threshold_ms"].as_f64(), Some(100.0));
        assert_eq!(v["cells"].as_array().map(Vec::len), Some(2), "{json}");
        assert_eq!(v["cells"][0]["shape"], "mailbox (submit_to)");
        assert_eq!(v["cells"][0]["runtime"], "magpie");
        assert_eq!(
            numbers(&v["cells"][0]["latencies_ms"]),
            [Some(ms(Duration::from_micros(1500))), Some(2.0)]
        );
        assert_eq!(v["cells"][1]["runtime"], "tokio");
        assert_eq!(v["cells"][1]["latencies_ms"], serde_json::json!([]));
        let cell = ["shape", "runtime", "latencies_ms"];
        let mut expected = vec![
            "workers",
            "stall_ms",
            "full_stall",
            "gap_ms",
            "busy_others",
            "threshold_ms",
            "cells",
        ];
        expected.extend(cell.repeat(2));
        assert_eq!(keys(&json), expected);
    }

    #[test]
    fn each_runtime_runs_its_own_number_of_trials() {
        let cfg = config(false);
        let cells = run(&cfg);
        assert_eq!(cells.len(), Shape::ALL.len() * 2);
        for cell in &cells {
            let expected = match (cell.imp, supported(cell.shape, cell.imp, false)) {
                (_, false) => None,
                (StallImpl::Magpie, true) => Some(cfg.trials),
                (StallImpl::Tokio, true) => Some(cfg.peer_trials),
            };
            assert_eq!(
                cell.latencies.as_ref().map(Vec::len),
                expected,
                "{:?} on {}",
                cell.shape,
                cell.imp
            );
        }
        let report = render(&cfg, &cells);
        assert!(report.contains("| trials |"), "{report}");
        assert!(report.contains("ends as soon as"), "{report}");
    }

    #[test]
    fn a_full_stall_still_measures_every_shape() {
        let mut cfg = config(true);
        cfg.impls = vec![StallImpl::Magpie];
        let cells = run(&cfg);
        assert!(cells
            .iter()
            .all(|c| c.latencies.as_ref().map(Vec::len) == Some(cfg.trials)));
        assert!(render(&cfg, &cells).contains("`--full-stall`"));
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;

    #[test]
    fn with_busy_others_the_hand_off_moves_the_queued_task() {
        let cfg = Config {
            workers: 2,
            // Longer than the threshold, so that only the hand-off can end a trial early.
            stall: Duration::from_secs(30),
            full_stall: false,
            trials: 2,
            peer_trials: 1,
            gap: Duration::from_millis(1),
            busy_others: true,
            threshold: Duration::from_millis(4),
            shapes: Shape::ALL.to_vec(),
            impls: vec![StallImpl::Magpie, StallImpl::Tokio],
        };
        let cells = run(&cfg);
        for cell in &cells {
            let ran = cell.latencies.as_ref().map(Vec::len);
            let expected =
                (cell.imp == StallImpl::Magpie && cell.shape != Shape::Job).then_some(cfg.trials);
            assert_eq!(ran, expected, "{:?} on {}", cell.shape, cell.imp);
            // Each measured trial ended well before its stall did: the task was moved.
            for latency in cell.latencies.iter().flatten() {
                assert!(*latency < cfg.stall, "{:?}: {latency:?}", cell.shape);
            }
        }
        assert!(render(&cfg, &cells).contains("the others busy"));
    }
}
