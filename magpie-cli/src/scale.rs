//! `magpie scale`: the task pool's scaling table.
//!
//! The same tasks (variable durations by default) run on a fresh runtime of 1, 2, 4, …
//! workers, up to `--max-workers` (included even if not a power of two). Per row: the
//! makespan, the speedup over one worker, the efficiency `T1 / (n · Tn)`, the tasks stolen,
//! and the load balance: the most task work any worker did over the least (1.00 is perfect).
//! Task work is counted from the durations each worker ran, so time a worker lost to other
//! programs on a busy machine does not blur it.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use magpie::Runtime;

use crate::report::{ms, write_json, Failure, Table, WorkerDelta};
use crate::workload::{spin, Pattern, Workload};
use crate::{default_workers, task_count, worker_count};

#[derive(Debug, Args)]
pub(crate) struct ScaleArgs {
    /// Tasks per row.
    #[arg(long, default_value_t = 10_000, value_parser = task_count())]
    tasks: usize,
    /// The largest worker count [default: one per CPU, or MAGPIE_WORKER_THREADS].
    #[arg(long = "max-workers", visible_alias = "workers", value_parser = worker_count())]
    max_workers: Option<usize>,
    /// How task durations are distributed.
    #[arg(long, value_enum, default_value_t = Pattern::Variable)]
    pattern: Pattern,
    /// Seed for the task durations: the same seed gives the same workload.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, serde::Serialize)]
struct Row {
    workers: usize,
    time_ms: f64,
    speedup: f64,
    efficiency: f64,
    steals: u64,
    /// Most task work on one worker over the least; `null` if a worker ran no task.
    load_balance: Option<f64>,
    /// Task work per worker, in milliseconds.
    work_ms: Vec<f64>,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    tasks: usize,
    pattern: Pattern,
    seed: u64,
    total_work_ms: f64,
    rows: Vec<Row>,
}

/// 1, 2, 4, … below `max`, then `max`.
fn worker_counts(max: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |n| n.checked_mul(2))
        .take_while(|&n| n < max)
        .collect();
    counts.push(max);
    counts
}

pub(crate) fn run(args: &ScaleArgs, out: &mut impl Write) -> Result<(), Failure> {
    let max = args.max_workers.map_or_else(default_workers, Ok)?;
    crate::check_runtime_environment()?;
    let workload = Workload::generate(args.pattern, args.tasks, args.seed);
    if !args.json {
        writeln!(
            out,
            "magpie scale: {} {} tasks, {:.1} ms of work, a fresh runtime per row\n",
            args.tasks,
            args.pattern,
            ms(workload.total_work())
        )?;
    }
    let mut rows: Vec<Row> = Vec::new();
    for n in worker_counts(max) {
        let mut row = run_row(&workload, n)?;
        let t1 = rows.first().map_or(row.time_ms, |r| r.time_ms);
        row.speedup = t1 / row.time_ms.max(1e-9);
        row.efficiency = row.speedup / n as f64;
        rows.push(row);
    }
    let report = Report {
        tasks: args.tasks,
        pattern: args.pattern,
        seed: args.seed,
        total_work_ms: ms(workload.total_work()),
        rows,
    };
    if args.json {
        return write_json(out, &report);
    }
    let mut table = Table::new([
        "workers",
        "time ms",
        "speedup",
        "efficiency",
        "steals",
        "load balance",
    ]);
    for r in &report.rows {
        table.row([
            r.workers.to_string(),
            format!("{:.1}", r.time_ms),
            format!("{:.2}x", r.speedup),
            format!("{:.1}%", r.efficiency * 100.0),
            r.steals.to_string(),
            r.load_balance
                .map_or_else(|| "a worker idle".to_string(), |b| format!("{b:.3}")),
        ]);
    }
    table.write(out)?;
    writeln!(
        out,
        "\nload balance: most task work on one worker / least (1.000 is perfect)."
    )?;
    Ok(())
}

/// One row: a fresh runtime of `workers` workers runs every task once.
fn run_row(workload: &Workload, workers: usize) -> Result<Row, Failure> {
    let rt = Runtime::builder().worker_threads(workers).build()?;
    let work_ns: Arc<Vec<AtomicU64>> = Arc::new((0..workers).map(|_| AtomicU64::new(0)).collect());
    let before = rt.stats();
    let start = Instant::now();
    for d in workload.durations() {
        let work_ns = Arc::clone(&work_ns);
        drop(rt.submit(move || {
            spin(d);
            if let Some(i) = magpie::current_worker_index() {
                work_ns[i].fetch_add(d.as_nanos() as u64, Relaxed);
            }
        }));
    }
    rt.wait_idle();
    let elapsed = start.elapsed();
    let deltas = WorkerDelta::between(&rt.stats(), &before);
    let work: Vec<u64> = work_ns.iter().map(|w| w.load(Relaxed)).collect();
    let (most, least) = (
        work.iter().copied().max().unwrap_or(0),
        work.iter().copied().min().unwrap_or(0),
    );
    Ok(Row {
        workers,
        time_ms: ms(elapsed),
        speedup: 1.0,
        efficiency: 1.0,
        steals: deltas.iter().map(|d| d.stolen).sum(),
        load_balance: (least > 0).then(|| most as f64 / least as f64),
        work_ms: work.iter().map(|&ns| ns as f64 / 1e6).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::worker_counts;

    #[test]
    fn powers_of_two_then_the_max() {
        assert_eq!(worker_counts(1), [1]);
        assert_eq!(worker_counts(2), [1, 2]);
        assert_eq!(worker_counts(6), [1, 2, 4, 6]);
        assert_eq!(worker_counts(8), [1, 2, 4, 8]);
    }
}
