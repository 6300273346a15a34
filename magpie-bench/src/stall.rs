//! The `stall` benchmark: how long a runnable task waits when it is queued behind a long
//! poll (issue 15, part 4: "queued behind a stall").
//!
//! Each trial spawns one task X from outside the pool. X queues a task T on its own worker,
//! in one of the *shapes* below, notes the time, and then blocks its worker for `--stall-ms`
//! (a `std::thread::sleep` inside the poll: a task that blocks without `block_in_place`). T
//! notes the time it starts. The start latency is T's start minus X's note; trials run one
//! after the other, so the other workers are usually parked when X blocks, and the latency
//! includes waking one. The shapes:
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

use std::fmt;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::ValueEnum;

use crate::harness::{fmt_ms, json, markdown_table, ms, progress};

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
    pub(crate) trials: usize,
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
            .map(|&imp| (imp, supported(shape, imp).then(Vec::new)))
            .collect();
        progress(format_args!("stall {}: ", shape.label()));
        let started = Instant::now();
        for trial in 0..cfg.trials {
            for k in 0..per_impl.len() {
                // Rotate which runtime goes first.
                let i = (trial + k) % per_impl.len();
                let imp = per_impl[i].0;
                if let Some(latencies) = &mut per_impl[i].1 {
                    latencies.push(trial_once(&rts, shape, imp, cfg.stall));
                }
            }
            if trial % 10 == 9 {
                progress(format_args!("."));
            }
        }
        progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
        cells.extend(per_impl.into_iter().map(|(imp, latencies)| Cell {
            shape,
            imp,
            latencies,
        }));
    }
    cells
}

fn supported(shape: Shape, imp: StallImpl) -> bool {
    imp == StallImpl::Magpie || matches!(shape, Shape::Lifo | Shape::Ring)
}

/// One trial: returns T's start latency.
fn trial_once(rts: &Runtimes, shape: Shape, imp: StallImpl, stall: Duration) -> Duration {
    let (tx, rx) = mpsc::channel::<Instant>();
    let queued = match imp {
        StallImpl::Magpie => {
            let rt = rts.magpie.clone();
            let x = rts.magpie.spawn(async move {
                let started = move || {
                    let _ = tx.send(Instant::now());
                };
                let queued = Instant::now();
                match shape {
                    Shape::Lifo => drop(magpie::spawn(async move { started() })),
                    Shape::Ring => {
                        drop(magpie::spawn(async move { started() }));
                        drop(magpie::spawn(async {}));
                    }
                    Shape::Mailbox => {
                        let me = magpie::current_worker_index().expect("on a worker");
                        drop(rt.submit_to(me, started).expect("worker index"));
                    }
                    Shape::Job => {
                        magpie::join(|| std::thread::sleep(stall), started);
                        return queued;
                    }
                }
                drop(rt);
                std::thread::sleep(stall);
                queued
            });
            rts.magpie.block_on(x).expect("the stalling task failed")
        }
        StallImpl::Tokio => {
            let x = rts.tokio.spawn(async move {
                let started = move || {
                    let _ = tx.send(Instant::now());
                };
                let queued = Instant::now();
                match shape {
                    Shape::Lifo => drop(tokio::spawn(async move { started() })),
                    Shape::Ring => {
                        drop(tokio::spawn(async move { started() }));
                        drop(tokio::spawn(async {}));
                    }
                    Shape::Mailbox | Shape::Job => unreachable!("not supported"),
                }
                std::thread::sleep(stall);
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
                let median = ms(percentile(l, 50.0));
                let p99 = ms(percentile(l, 99.0));
                row.push(fmt_ms(median));
                row.push(fmt_ms(p99));
                row.push(fmt_ms(ms(*l.iter().max().expect("non-empty"))));
                row.push(if cell.imp == StallImpl::Magpie {
                    if median <= 2.0 && p99 <= 2.0 {
                        "met".to_owned()
                    } else {
                        "NOT met".to_owned()
                    }
                } else {
                    "–".to_owned()
                });
            }
            _ => row.extend(["n/a", "", "", ""].map(str::to_owned)),
        }
        rows.push(row);
    }
    let mut out = format!(
        "### stall — start latency of a task queued behind a {} ms poll, {} workers, {} \
         trials\n\n",
        cfg.stall.as_millis(),
        cfg.workers,
        cfg.trials
    );
    out.push_str(&markdown_table(
        &[
            "queued in",
            "runtime",
            "median (ms)",
            "p99 (ms)",
            "max (ms)",
            "target (magpie: median and p99 ≤ 2 ms)",
        ],
        &[false, false, true, true, true, false],
        &rows,
    ));
    out.push_str(
        "\nA task blocks its worker (a `std::thread::sleep` in its poll) right after queuing \
         another task on that worker; the latency is from the queuing to the other task's \
         start. Trials run one at a time, alternating the runtimes, so the other workers are \
         usually parked and the latency includes waking one. n/a: the runtime has no such \
         queue.\n",
    );
    out
}

/// The raw latencies as JSON.
pub(crate) fn to_json(cfg: &Config, cells: &[Cell]) -> String {
    let items: Vec<String> = cells
        .iter()
        .filter_map(|cell| {
            let l = cell.latencies.as_ref()?;
            let values: Vec<f64> = l.iter().map(|d| ms(*d)).collect();
            Some(json::object(&[
                ("shape", json::string(cell.shape.label())),
                ("runtime", json::string(&cell.imp.to_string())),
                ("latencies_ms", json::numbers(&values)),
            ]))
        })
        .collect();
    json::object(&[
        ("workers", cfg.workers.to_string()),
        ("stall_ms", json::number(ms(cfg.stall))),
        ("cells", json::array(&items)),
    ])
}
