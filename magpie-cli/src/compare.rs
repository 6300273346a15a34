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
//!
//! Under each pattern's table a line sets work stealing against the other schedules: ahead
//! of all of them, behind one, or tied, by whether the middle halves of the runs lie apart
//! ([`Verdict`]), with the differences of the best runs and of the medians against the
//! schedule that decides it. On a shared or virtual machine two strategies a tenth of a
//! millisecond apart in their best runs often swap places from one invocation to the next;
//! the line says when that is so.

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
    /// Runs per strategy and pattern. The table shows the best (shortest) and the median;
    /// the line under it, whether the middle half of work stealing's runs lies below every
    /// other schedule's (ahead), above one's (behind), or overlaps one (a tie); with one run
    /// each it cannot tell.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
}

/// One strategy's best run on one pattern.
#[derive(Debug, serde::Serialize)]
struct Cell {
    strategy: &'static str,
    makespan_ms: f64,
    /// The median of the runs' makespans (the lower middle one of an even count).
    median_ms: f64,
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
    verdict: Verdict,
}

/// Work stealing set against the other schedules of one pattern.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct Verdict {
    /// The other schedule the outcome is about: of those work stealing is behind, or else
    /// ties with, or else is ahead of, the one with the shortest median run.
    rival: &'static str,
    /// Work stealing's best run minus the rival's, in ms: below zero, work stealing is ahead.
    best_diff_ms: f64,
    /// The same for the medians of the runs.
    median_diff_ms: f64,
    /// Whether the middle half of work stealing's runs (first to third quartile, see
    /// [`middle_half`]) lies below that of every other schedule (`Ahead`), above that of
    /// one (`Behind`), or else overlaps one (`Tie`); `None` with one run each, which shows
    /// no spread.
    outcome: Option<Outcome>,
}

/// See [`Verdict::outcome`]; ordered from the best for work stealing to the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Outcome {
    Ahead,
    Tie,
    Behind,
}

impl Verdict {
    /// Compares `cells[0]`, work stealing, with each of the others by their runs.
    fn of(cells: &[Cell]) -> Verdict {
        let (stealing, others) = cells.split_first().expect("work stealing's cell");
        let spread = stealing.runs_ms.len() > 1 && others.iter().all(|c| c.runs_ms.len() > 1);
        let ours = middle_half(&stealing.runs_ms);
        let against = |other: &Cell| {
            let theirs = middle_half(&other.runs_ms);
            if ours.1 < theirs.0 {
                Outcome::Ahead
            } else if ours.0 > theirs.1 {
                Outcome::Behind
            } else {
                Outcome::Tie
            }
        };
        // The worst outcome for work stealing, and among the schedules that give it, the
        // one with the shortest median; with one run each, just that one.
        let (outcome, rival) = others
            .iter()
            .map(|other| {
                (
                    if spread {
                        against(other)
                    } else {
                        Outcome::Ahead
                    },
                    other,
                )
            })
            .max_by(|(a, x), (b, y)| a.cmp(b).then(y.median_ms.total_cmp(&x.median_ms)))
            .expect("at least one other schedule");
        Verdict {
            rival: rival.strategy,
            best_diff_ms: stealing.makespan_ms - rival.makespan_ms,
            median_diff_ms: stealing.median_ms - rival.median_ms,
            outcome: spread.then_some(outcome),
        }
    }

    /// The line printed under a pattern's table.
    fn line(&self) -> String {
        let head = format!(
            "work stealing against {}: {:+.2} ms in the best runs, {:+.2} ms in the medians",
            self.rival, self.best_diff_ms, self.median_diff_ms
        );
        let tail = match self.outcome {
            Some(Outcome::Ahead) => {
                "ahead of every other schedule: the middle halves of the runs lie apart"
            }
            Some(Outcome::Behind) => "behind: the middle halves of the runs lie apart",
            Some(Outcome::Tie) => "the middle halves of the runs overlap: a tie on this machine",
            None => "one run each shows no spread (--repeat 5 tells a tie)",
        };
        format!("{head}; {tail}")
    }
}

/// The first and third quartiles of `runs` (at least one), by rank: of 5 runs the 2nd and
/// 4th fastest, of 15 the 4th and 12th, of 2 or 3 the fastest and the slowest. One slow
/// run, a patch of a shared machine, moves neither.
fn middle_half(runs: &[f64]) -> (f64, f64) {
    let mut sorted = runs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    (sorted[n / 4], sorted[(3 * n).saturating_sub(1) / 4])
}

/// The median of `runs` (the lower middle one of an even count); NaN for none.
fn median(runs: &[f64]) -> f64 {
    let mut sorted = runs.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(f64::NAN)
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
            "magpie compare: {} tasks per pattern on {workers} workers, the best and the median \
             of {} runs\n",
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
        let cells: Vec<Cell> = strategies
            .iter()
            .zip(runs)
            .map(|(strategy, runs)| {
                let best = *runs
                    .iter()
                    .min_by_key(|r| r.makespan)
                    .expect("at least one run");
                let runs_ms: Vec<f64> = runs.iter().map(|r| ms(r.makespan)).collect();
                Cell {
                    strategy: strategy.name(),
                    makespan_ms: ms(best.makespan),
                    median_ms: median(&runs_ms),
                    efficiency: ideal.as_secs_f64() / best.makespan.as_secs_f64().max(1e-9),
                    steals: best.steals,
                    steal_rate: best.steal_rate,
                    runs_ms,
                }
            })
            .collect();
        let part = PatternReport {
            pattern,
            tasks: workload.len(),
            total_work_ms: ms(workload.total_work()),
            ideal_ms: ms(ideal),
            verdict: Verdict::of(&cells),
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
        "median ms",
        "efficiency",
        "steals",
        "steal rate",
    ]);
    for c in &part.strategies {
        table.row([
            c.strategy.to_string(),
            format!("{:.2}", c.makespan_ms),
            format!("{:.2}", c.median_ms),
            format!("{:.1}%", c.efficiency * 100.0),
            c.steals.to_string(),
            format!("{:.1}%", c.steal_rate * 100.0),
        ]);
    }
    table.write(out)?;
    writeln!(out, "{}", part.verdict.line())?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(strategy: &'static str, runs_ms: &[f64]) -> Cell {
        let makespan_ms = runs_ms.iter().copied().fold(f64::INFINITY, f64::min);
        Cell {
            strategy,
            makespan_ms,
            median_ms: median(runs_ms),
            efficiency: 1.0,
            steals: 0,
            steal_rate: 0.0,
            runs_ms: runs_ms.to_vec(),
        }
    }

    #[test]
    fn median_takes_the_lower_middle_run() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.0);
        assert_eq!(median(&[7.5]), 7.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn the_middle_half_leaves_out_the_outer_quarters() {
        assert_eq!(middle_half(&[5.0, 1.0, 4.0, 2.0, 3.0]), (2.0, 4.0));
        assert_eq!(middle_half(&[2.0, 1.0]), (1.0, 2.0));
        assert_eq!(middle_half(&[3.0, 1.0, 2.0]), (1.0, 3.0));
        assert_eq!(middle_half(&[4.0]), (4.0, 4.0));
        let fifteen: Vec<f64> = (1..=15).rev().map(f64::from).collect();
        assert_eq!(middle_half(&fifteen), (4.0, 12.0));
    }

    #[test]
    fn ahead_of_every_schedule_is_against_the_closest() {
        let cells = [
            cell("stealing", &[10.0, 10.1, 10.2]),
            cell("slow", &[12.0, 12.1, 12.2]),
            cell("fast", &[11.0, 11.1, 11.2]),
        ];
        let v = Verdict::of(&cells);
        assert_eq!(v.rival, "fast");
        assert!((v.best_diff_ms + 1.0).abs() < 1e-9, "{v:?}");
        assert!((v.median_diff_ms + 1.0).abs() < 1e-9, "{v:?}");
        assert_eq!(v.outcome, Some(Outcome::Ahead));
        assert!(v.line().contains("against fast: -1.00 ms"), "{}", v.line());
        assert!(v.line().contains("; ahead of every"), "{}", v.line());
    }

    #[test]
    fn overlapping_middle_halves_are_a_tie() {
        // Ahead by 0.1 ms in the best runs, but work stealing's runs spread over the rival's.
        let cells = [
            cell("stealing", &[10.0, 10.5, 10.9]),
            cell("rival", &[10.1, 10.2, 10.3]),
        ];
        let v = Verdict::of(&cells);
        assert_eq!(v.outcome, Some(Outcome::Tie));
        assert!(v.line().contains("a tie on this machine"), "{}", v.line());
    }

    #[test]
    fn a_tie_with_one_schedule_outweighs_a_lead_over_another() {
        // Clearly ahead of "steady", whose best run is the shortest of the others; but
        // "wide", slower in its best run and its median, spreads over work stealing's runs.
        let cells = [
            cell("stealing", &[10.0, 10.1, 10.2]),
            cell("steady", &[9.9, 10.5, 10.6, 10.7]),
            cell("wide", &[10.1, 10.2, 13.0]),
        ];
        let v = Verdict::of(&cells);
        assert_eq!(v.outcome, Some(Outcome::Tie));
        assert_eq!(v.rival, "wide");
    }

    #[test]
    fn one_slow_run_does_not_make_a_tie() {
        // Five runs each; work stealing's one slow run (a patch of the machine) is in its
        // outer quarter.
        let cells = [
            cell("stealing", &[10.0, 10.1, 10.2, 10.3, 19.0]),
            cell("rival", &[10.6, 10.7, 10.8, 10.9, 11.0]),
        ];
        assert_eq!(Verdict::of(&cells).outcome, Some(Outcome::Ahead));
        // Behind one schedule while ahead of another: behind, against the one it trails.
        let cells = [
            cell("stealing", &[12.0, 12.1, 12.2, 12.3, 9.0]),
            cell("slower", &[13.6, 13.7, 13.8, 13.9, 14.0]),
            cell("rival", &[10.6, 10.7, 10.8, 10.9, 11.0]),
        ];
        let v = Verdict::of(&cells);
        assert_eq!(v.outcome, Some(Outcome::Behind));
        assert_eq!(v.rival, "rival");
        assert!(v.line().contains("; behind:"), "{}", v.line());
    }

    #[test]
    fn one_run_each_gives_no_outcome() {
        let cells = [cell("stealing", &[10.0]), cell("rival", &[11.0])];
        let v = Verdict::of(&cells);
        assert_eq!(v.outcome, None);
        assert!(v.line().contains("--repeat"), "{}", v.line());
    }
}
