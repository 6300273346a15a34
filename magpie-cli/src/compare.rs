//! `magpie compare`: work stealing against three schedules without it, on each workload
//! pattern.
//!
//! For every pattern the workload is generated once (same seed, same durations), then run by
//! magpie (a fresh runtime per run, its workers parked before the clock starts, each batch
//! handed over from the main thread with `execute_batch`, as the baselines get theirs in one
//! piece and without handles, then `wait_idle`) and by the three baselines of
//! [`crate::baseline`], each on `--workers` threads, blocked before the clock starts. A cell is the best (shortest) of `--repeat` runs; the runs of one repeat go
//! through the strategies in turn, so slow patches of a shared machine hit them alike.
//! Efficiency is the ideal makespan (see [`Workload::ideal`]) over the measured one.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use magpie::Runtime;

use crate::baseline::Baseline;
use crate::report::{ms, steal_rate, write_json, Failure, Table, WorkerDelta};
use crate::workload::{pause, spin, Pattern, Workload};
use crate::{task_count, CommonArgs};

#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Tasks per pattern.
    #[arg(long, default_value_t = 4_000, value_parser = task_count())]
    tasks: usize,
    /// Run only this pattern [default: all four].
    #[arg(long, value_enum)]
    pattern: Option<Pattern>,
    /// Runs per strategy and pattern; the best (shortest) counts.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
}

/// One strategy's best run on one pattern.
#[derive(Debug, serde::Serialize)]
struct Cell {
    strategy: &'static str,
    makespan_ms: f64,
    efficiency: f64,
    steals: u64,
    steal_rate: f64,
    /// Every run's makespan, in run order.
    runs_ms: Vec<f64>,
}

#[derive(Debug, serde::Serialize)]
struct PatternReport {
    pattern: Pattern,
    tasks: usize,
    total_work_ms: f64,
    ideal_ms: f64,
    strategies: Vec<Cell>,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    workers: usize,
    tasks: usize,
    repeat: u32,
    seed: u64,
    patterns: Vec<PatternReport>,
}

/// A strategy `magpie compare` runs.
#[derive(Debug, Clone, Copy)]
enum Strategy {
    WorkStealing,
    Baseline(Baseline),
}

impl Strategy {
    fn all() -> impl Iterator<Item = Strategy> {
        std::iter::once(Strategy::WorkStealing).chain(Baseline::ALL.map(Strategy::Baseline))
    }

    fn name(self) -> &'static str {
        match self {
            Strategy::WorkStealing => "magpie (work stealing)",
            Strategy::Baseline(b) => b.name(),
        }
    }
}

/// One run's outcome.
#[derive(Debug, Clone, Copy)]
struct Run {
    makespan: Duration,
    steals: u64,
    steal_rate: f64,
}

pub(crate) fn run(args: &CompareArgs, out: &mut impl Write) -> Result<(), Failure> {
    let workers = args.common.workers_or_default()?;
    crate::check_runtime_environment()?;
    let patterns: Vec<Pattern> = match args.pattern {
        Some(p) => vec![p],
        None => Pattern::ALL.to_vec(),
    };
    let mut report = Report {
        workers,
        tasks: args.tasks,
        repeat: args.repeat,
        seed: args.common.seed,
        patterns: Vec::new(),
    };
    if !args.common.json {
        writeln!(
            out,
            "magpie compare: {} tasks per pattern on {workers} workers, best of {} runs\n",
            args.tasks, args.repeat
        )?;
    }
    for pattern in patterns {
        let workload = Workload::generate(pattern, args.tasks, args.common.seed);
        let ideal = workload.ideal(workers);
        let strategies: Vec<Strategy> = Strategy::all().collect();
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); strategies.len()];
        for _ in 0..args.repeat {
            for (s, strategy) in strategies.iter().enumerate() {
                runs[s].push(run_once(*strategy, &workload, workers)?);
            }
        }
        let cells = strategies
            .iter()
            .zip(runs)
            .map(|(strategy, runs)| {
                let best = *runs
                    .iter()
                    .min_by_key(|r| r.makespan)
                    .expect("at least one run");
                Cell {
                    strategy: strategy.name(),
                    makespan_ms: ms(best.makespan),
                    efficiency: ideal.as_secs_f64() / best.makespan.as_secs_f64().max(1e-9),
                    steals: best.steals,
                    steal_rate: best.steal_rate,
                    runs_ms: runs.iter().map(|r| ms(r.makespan)).collect(),
                }
            })
            .collect();
        let part = PatternReport {
            pattern,
            tasks: workload.len(),
            total_work_ms: ms(workload.total_work()),
            ideal_ms: ms(ideal),
            strategies: cells,
        };
        if !args.common.json {
            print_pattern(out, &part, workers)?;
            out.flush()?;
        }
        report.patterns.push(part);
    }
    if args.common.json {
        write_json(out, &report)?;
    }
    Ok(())
}

fn run_once(strategy: Strategy, workload: &Workload, workers: usize) -> Result<Run, Failure> {
    match strategy {
        Strategy::WorkStealing => run_magpie(workload, workers),
        Strategy::Baseline(b) => Ok(Run {
            makespan: b
                .run(workload, workers)
                .map_err(|e| Failure::Run(format!("cannot start a {} thread: {e}", b.name())))?,
            steals: 0,
            steal_rate: 0.0,
        }),
    }
}

/// A fresh runtime, its workers parked before the clock starts (as the baselines' threads
/// are blocked), each batch handed over from this thread with `execute_batch`, and
/// `wait_idle`.
fn run_magpie(workload: &Workload, workers: usize) -> Result<Run, Failure> {
    let rt = Runtime::builder().worker_threads(workers).build()?;
    wait_until_parked(&rt);
    let before = rt.stats();
    let start = Instant::now();
    for batch in &workload.batches {
        // The whole batch in one hand-over, as the baselines get theirs, and without
        // handles, as theirs: nobody joins a task here (`wait_idle` waits for them).
        rt.execute_batch(batch.durations.iter().map(|&d| move || spin(d)));
        pause(batch.pause_after);
    }
    rt.wait_idle();
    let makespan = start.elapsed();
    let deltas = WorkerDelta::between(&rt.stats(), &before);
    Ok(Run {
        makespan,
        steals: deltas.iter().map(|d| d.stolen).sum(),
        steal_rate: steal_rate(&deltas),
    })
}

/// Waits until every worker of the new runtime `rt` has started and parked, as the baselines
/// wait for their threads to block before their clock starts: `build` returns while its
/// workers are still starting, and a clock started then timed their start with the first
/// batch (about a millisecond on the 2-CPU machine, the size of the whole gap between the
/// strategies; BENCHMARKS.md, "2026-12-03, later"). Gives up after a second (a worker
/// kept busy by something else), and the run goes on.
fn wait_until_parked(rt: &Runtime) {
    let deadline = Instant::now() + Duration::from_secs(1);
    // A worker's park is counted before it blocks.
    while !rt.stats().workers.iter().all(|w| w.parks > w.unparks) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(50));
    }
}

fn print_pattern(
    out: &mut impl Write,
    part: &PatternReport,
    workers: usize,
) -> Result<(), Failure> {
    writeln!(
        out,
        "{}: {} tasks, {:.1} ms of work; ideal {:.2} ms on {workers} workers",
        part.pattern, part.tasks, part.total_work_ms, part.ideal_ms
    )?;
    let mut table = Table::new([
        "strategy",
        "makespan ms",
        "efficiency",
        "steals",
        "steal rate",
    ]);
    for c in &part.strategies {
        table.row([
            c.strategy.to_string(),
            format!("{:.2}", c.makespan_ms),
            format!("{:.1}%", c.efficiency * 100.0),
            c.steals.to_string(),
            format!("{:.1}%", c.steal_rate * 100.0),
        ]);
    }
    table.write(out)?;
    writeln!(out)?;
    Ok(())
}
