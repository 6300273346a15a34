//! `magpie demo`: three fork-join workloads on the default runtime, then a per-worker table.

use std::time::Duration;

use std::io::{self, Write};

use clap::Args;
use magpie::{Stats, WorkerStats};

use crate::timed;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Compute fib(N) with a `join` at every call.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=40))]
    fib: u32,
    /// Sort this many random numbers with a join-based quicksort.
    #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(1..=200_000_000))]
    sort: u64,
    /// Print the results and statistics as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// One workload's outcome.
#[derive(Debug, serde::Serialize)]
struct Outcome {
    name: String,
    result: String,
    millis: f64,
}

pub(crate) fn run(args: &DemoArgs, out: &mut impl Write) -> Result<(), String> {
    let workers = magpie::current_num_workers();
    if !args.json {
        writeln!(
            out,
            "magpie demo: fork-join on the default runtime, {workers} workers"
        )
        .map_err(write_error)?;
        writeln!(
            out,
            "(set MAGPIE_WORKER_THREADS to change the worker count)\n"
        )
        .map_err(write_error)?;
    }
    let before = global_stats();

    let mut outcomes = Vec::new();

    let (value, took) = timed(|| fib(u64::from(args.fib)));
    let (expected, sequential) = timed(|| fib_sequential(u64::from(args.fib)));
    if value != expected {
        return Err(format!(
            "fib({}) gave {value}, expected {expected}",
            args.fib
        ));
    }
    outcomes.push(outcome(
        &format!("fib({}), join at every call", args.fib),
        value,
        took,
    ));
    outcomes.push(outcome("  same, sequential", expected, sequential));

    let mut data = random_u32s(args.sort as usize, 0x5EED);
    let (_, took) = timed(|| quicksort(&mut data));
    if !data.windows(2).all(|w| w[0] <= w[1]) {
        return Err("quicksort produced an unsorted result".into());
    }
    outcomes.push(outcome(
        &format!("quicksort of {} u32", args.sort),
        "sorted",
        took,
    ));

    let mut squares = vec![0u64; 1 << 22];
    let (_, took) = timed(|| {
        magpie::scope(|s| {
            for (i, chunk) in squares.chunks_mut(1 << 14).enumerate() {
                s.spawn(move |_| {
                    for (j, x) in chunk.iter_mut().enumerate() {
                        let n = (i << 14 | j) as u64;
                        *x = n * n;
                    }
                });
            }
        })
    });
    if let Some(i) = (0..squares.len()).find(|&i| squares[i] != (i as u64) * (i as u64)) {
        return Err(format!("scope demo: square {i} is wrong"));
    }
    outcomes.push(outcome(
        "scope: 256 spawns fill 4M squares",
        "verified",
        took,
    ));

    let stats = delta(&global_stats(), &before);
    if args.json {
        let json = serde_json::json!({ "workers": workers, "workloads": outcomes, "stats": stats });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?
        )
        .map_err(write_error)?;
    } else {
        print_outcomes(out, &outcomes).map_err(write_error)?;
        print_stats(out, &stats).map_err(write_error)?;
    }
    Ok(())
}

/// Writing the report failed; a closed pipe (`magpie demo | head`) is not worth a message.
fn write_error(err: io::Error) -> String {
    if err.kind() == io::ErrorKind::BrokenPipe {
        String::new()
    } else {
        format!("cannot write the report: {err}")
    }
}

fn outcome(name: &str, result: impl ToString, took: Duration) -> Outcome {
    Outcome {
        name: name.to_string(),
        result: result.to_string(),
        millis: took.as_secs_f64() * 1e3,
    }
}

fn global_stats() -> Stats {
    // The default runtime is the one the free functions use from this (non-worker) thread.
    magpie::default_runtime().stats()
}

/// Counts between two snapshots of the same runtime.
fn delta(after: &Stats, before: &Stats) -> Vec<WorkerStats> {
    after
        .workers
        .iter()
        .zip(&before.workers)
        .map(|(a, b)| {
            let mut d = a.clone();
            d.jobs_executed -= b.jobs_executed;
            d.jobs_stolen -= b.jobs_stolen;
            d.steal_attempts -= b.steal_attempts;
            d.parks -= b.parks;
            d.unparks -= b.unparks;
            d
        })
        .collect()
}

fn print_outcomes(out: &mut impl Write, outcomes: &[Outcome]) -> io::Result<()> {
    writeln!(out, "{:<40} {:>16} {:>12}", "workload", "result", "time")?;
    for o in outcomes {
        writeln!(out, "{:<40} {:>16} {:>9.2} ms", o.name, o.result, o.millis)?;
    }
    writeln!(out)
}

fn print_stats(out: &mut impl Write, workers: &[WorkerStats]) -> io::Result<()> {
    let total: u64 = workers.iter().map(|w| w.jobs_executed).sum::<u64>().max(1);
    writeln!(
        out,
        "{:>6} {:>12} {:>8} {:>9} {:>7}  share of jobs",
        "worker", "jobs", "stolen", "attempts", "parks"
    )?;
    for (i, w) in workers.iter().enumerate() {
        let share = w.jobs_executed as f64 / total as f64;
        let bar = "█".repeat((share * 40.0).round() as usize);
        writeln!(
            out,
            "{:>6} {:>12} {:>8} {:>9} {:>7}  {bar} {:.0}%",
            i,
            w.jobs_executed,
            w.jobs_stolen,
            w.steal_attempts,
            w.parks,
            share * 100.0
        )?;
    }
    let stolen: u64 = workers.iter().map(|w| w.jobs_stolen).sum();
    writeln!(
        out,
        "\n{total} jobs queued, {stolen} stolen ({:.1}%). Joins deeper than a worker's reserve of \
         stealable jobs ran inline and are not jobs (see ARCHITECTURE.md).",
        stolen as f64 * 100.0 / total as f64
    )
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn fib_sequential(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_sequential(n - 1) + fib_sequential(n - 2)
    }
}

fn random_u32s(len: usize, seed: u64) -> Vec<u32> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u32
        })
        .collect()
}

fn quicksort(v: &mut [u32]) {
    if v.len() <= 4096 {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    magpie::join(|| quicksort(lo), || quicksort(&mut hi[1..]));
}

/// Lomuto partition around the median of three; returns the pivot's final index.
fn partition(v: &mut [u32]) -> usize {
    let last = v.len() - 1;
    let mid = v.len() / 2;
    if v[mid] < v[0] {
        v.swap(mid, 0);
    }
    if v[last] < v[0] {
        v.swap(last, 0);
    }
    if v[mid] < v[last] {
        v.swap(mid, last);
    }
    let pivot = v[last];
    let mut store = 0;
    for i in 0..last {
        if v[i] < pivot {
            v.swap(i, store);
            store += 1;
        }
    }
    v.swap(store, last);
    store
}
