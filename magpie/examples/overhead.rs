//! What statistics and tracing cost: tokio's `yield_many` and `spawn_many_local` shapes on
//! magpie alone, printed as one `row median_ns` line per workload.
//!
//! `scripts/overhead.sh` builds this example three ways (as shipped, with the counters
//! compiled out by `--cfg magpie_no_stats`, and with the trace checks compiled out by
//! `--cfg magpie_no_trace`), runs the builds in alternation, and reports each one's median
//! against the shipped build. It lives here rather than in magpie-bench because each `--cfg`
//! build recompiles every dependency, and this example has none. Rows with `+histogram` and
//! `+trace` measure the optional recorders when they are on.
//!
//! ```text
//! cargo run --release -p magpie --example overhead -- --workers 2 --samples 15
//! ```

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const NUM_SPAWN: usize = 10_000;
const YIELD_TASKS: usize = 200;
const YIELDS_PER_TASK: usize = 1_000;

fn main() {
    let mut workers = 2;
    let mut samples = 15;
    let mut only = String::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match (arg.as_str(), value.parse::<usize>().ok()) {
            ("--workers", Some(n)) if n > 0 => workers = n,
            ("--samples", Some(n)) if n > 0 => samples = n,
            ("--only", _) => only = value,
            _ => {
                eprintln!("usage: overhead [--workers N] [--samples N] [--only ROW]");
                std::process::exit(2);
            }
        }
    }
    let configs: [(&str, magpie::Builder); 3] = [
        ("", magpie::Runtime::builder()),
        (
            "+histogram",
            magpie::Runtime::builder().poll_time_histogram(true),
        ),
        ("+trace", magpie::Runtime::builder().trace(true)),
    ];
    for (suffix, builder) in configs {
        let rt = builder
            .worker_threads(workers)
            .trace_capacity(1 << 12)
            .build()
            .expect("runtime");
        for (row, bench) in [
            ("yield_many", yield_many as fn(&magpie::Runtime) -> Duration),
            ("spawn_many_local", spawn_many_local),
        ] {
            if !only.is_empty() && format!("{row}{suffix}") != only {
                continue;
            }
            // Warm-up, then the samples.
            bench(&rt);
            let mut times: Vec<Duration> = (0..samples).map(|_| bench(&rt)).collect();
            times.sort();
            println!("{row}{suffix} {}", times[times.len() / 2].as_nanos());
        }
    }
}

fn yield_many(rt: &magpie::Runtime) -> Duration {
    let (done_tx, done_rx) = mpsc::sync_channel(YIELD_TASKS);
    let start = Instant::now();
    for _ in 0..YIELD_TASKS {
        let done_tx = done_tx.clone();
        drop(rt.spawn(async move {
            for _ in 0..YIELDS_PER_TASK {
                magpie::task::yield_now().await;
            }
            done_tx.send(()).unwrap();
        }));
    }
    for _ in 0..YIELD_TASKS {
        done_rx.recv().unwrap();
    }
    start.elapsed()
}

fn spawn_many_local(rt: &magpie::Runtime) -> Duration {
    let remaining = Arc::new(AtomicUsize::new(NUM_SPAWN));
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let start = Instant::now();
    drop(rt.spawn(async move {
        for _ in 0..NUM_SPAWN {
            let remaining = remaining.clone();
            let done_tx = done_tx.clone();
            drop(magpie::spawn(async move {
                if remaining.fetch_sub(1, Relaxed) == 1 {
                    done_tx.send(()).unwrap();
                }
            }));
        }
    }));
    done_rx.recv().unwrap();
    start.elapsed()
}
