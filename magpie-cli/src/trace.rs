//! `magpie trace`: records a traced run and draws it as a per-worker timeline.
//!
//! Runs a workload pattern (or, with `--demo`, the demo's heavy-on-worker-0 scenario, with
//! `--stall`, `magpie demo --stall`'s 2-second stall, or with `--iter`, one parallel-iterator
//! operation started on a parked pool) on a fresh runtime built with tracing
//! on, exports the events as `DIR/trace.json` (Chrome trace format: open it in Perfetto or
//! `chrome://tracing`), reads the file back, and draws
//! `DIR/timeline.svg` (see [`crate::timeline`]). With `--input FILE` it draws an existing
//! trace instead of recording one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use magpie::Runtime;

use crate::demo::Scenario;
use crate::report::{write_json, Failure};
use crate::timeline::{Counts, LaneBusy, Timeline};
use crate::workload::{pause, spin, Pattern, SplitMix64, Workload};
use crate::{task_count, CommonArgs};

#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The folder to write trace.json and timeline.svg into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Tasks to run.
    #[arg(long, default_value_t = 2_000, value_parser = task_count())]
    tasks: usize,
    /// The workload pattern to run.
    #[arg(long, value_enum, default_value_t = Pattern::Mixed)]
    pattern: Pattern,
    /// Run the demo's scenario instead (half the tasks heavy, 2 ms, all queued on worker 0;
    /// half light, 200 µs, spread).
    #[arg(long, conflicts_with = "pattern")]
    demo: bool,
    /// Record `magpie demo --stall` instead: a task blocks worker 0 for 2 s with tasks
    /// queued behind it while the other workers are busy; the stall is drawn in red.
    #[arg(long, conflicts_with_all = ["pattern", "demo", "tasks"])]
    stall: bool,
    /// Record one parallel-iterator operation instead, started after a 3 ms pause that lets
    /// every worker park (as `magpie-bench` measures it): how the computation reaches the
    /// workers, how its pieces spread, and where workers wait.
    #[arg(long, value_enum, conflicts_with_all = ["pattern", "demo", "stall", "tasks"])]
    iter: Option<IterOp>,
    /// Items of the `--iter` input (pseudo-random `u64`s, 8 bytes each).
    #[arg(
        long,
        default_value_t = 10_000_000,
        requires = "iter",
        value_parser = clap::value_parser!(u64).range(1..=1_000_000_000)
    )]
    len: u64,
    /// Draw this existing trace instead of recording one (trace.json is then not written).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["demo", "pattern", "stall", "iter"])]
    input: Option<PathBuf>,
    /// Width of the timeline's plot area, in pixels (one pixel column per time slice).
    #[arg(long, default_value_t = 1600, value_parser = clap::value_parser!(u64).range(100..=20_000))]
    width: u64,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    /// Paths as text (lossy): JSON has no way to say a path that is not UTF-8, and the
    /// report must not fail for one that the run itself handled.
    trace: String,
    svg: String,
    svg_bytes: usize,
    workers: usize,
    duration_us: f64,
    events: Counts,
    /// Per worker: when it first ran something, and for how long it ran things, waited in
    /// `join` or a scope for work another worker took, and was parked.
    busy: Vec<LaneBusy>,
}

/// The most workers `magpie trace` records. The runtime caps the trace rings of all workers
/// together at 4 GiB (`magpie::Builder::trace_capacity`), 4,096 of the default 1 MiB rings
/// this command uses; checked here first, so that the message speaks of `--workers`.
const MAX_TRACED_WORKERS: usize = 4096;

/// Where the trace to draw comes from.
#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    /// `--input FILE`.
    Input(&'a Path),
    /// A run recorded now on this many workers.
    Record { workers: usize },
}

pub(crate) fn run(args: &TraceArgs, out: &mut impl Write) -> Result<(), Failure> {
    // The worker count first: a run that cannot be recorded fails before any file is touched.
    let source = match &args.input {
        Some(input) => Source::Input(input),
        None => Source::Record {
            workers: traced_workers(&args.common)?,
        },
    };
    // Anything there but a folder (a file, `/dev/null`, a FIFO) is a bad argument.
    if args.out.exists() && !args.out.is_dir() {
        return Err(Failure::Usage(format!(
            "--out {}: is not a folder",
            args.out.display()
        )));
    }
    std::fs::create_dir_all(&args.out)
        .map_err(|e| Failure::Run(format!("cannot create {}: {e}", args.out.display())))?;
    let (trace_path, title) = match source {
        Source::Input(input) => (
            input.to_path_buf(),
            format!("magpie trace of {}", input.display()),
        ),
        Source::Record { workers } => record(args, workers)?,
    };
    // A `--input` that cannot be read or drawn is a bad argument (exit status 2); a trace
    // this run wrote itself and cannot read back is a failure of the run.
    let failure = |message: String| match source {
        Source::Input(_) => Failure::Usage(message),
        Source::Record { .. } => Failure::Run(message),
    };
    // A device or a FIFO (`--input /dev/zero`) would be read until memory runs out, or
    // forever: only a regular file is a trace.
    if let Source::Input(input) = source {
        if std::fs::metadata(input).is_ok_and(|m| !m.is_file()) {
            return Err(Failure::Usage(format!(
                "--input {}: is not a regular file",
                input.display()
            )));
        }
    }
    let json = std::fs::read_to_string(&trace_path)
        .map_err(|e| failure(format!("cannot read {}: {e}", trace_path.display())))?;
    let timeline =
        Timeline::parse(&json).map_err(|e| failure(format!("{}: {e}", trace_path.display())))?;
    let svg = timeline.render(args.width as usize, &title);
    let svg_path = args.out.join("timeline.svg");
    std::fs::write(&svg_path, &svg)
        .map_err(|e| Failure::Run(format!("cannot write {}: {e}", svg_path.display())))?;

    let report = Report {
        trace: trace_path.to_string_lossy().into_owned(),
        svg: svg_path.to_string_lossy().into_owned(),
        svg_bytes: svg.len(),
        workers: timeline.workers(),
        duration_us: timeline.duration_us(),
        events: timeline.counts.clone(),
        busy: timeline.busy_summary(),
    };
    if args.common.json {
        return write_json(out, &report);
    }
    let c = &report.events;
    writeln!(
        out,
        "{} events over {:.1} ms on {} workers: {} busy spans, {} parked, {} steals, {} inject \
         pulls",
        c.total,
        report.duration_us / 1e3,
        report.workers,
        c.busy_spans,
        c.park_spans,
        c.steals,
        c.inject_pulls
    )?;
    if c.stalls > 0 {
        writeln!(out, "{} stalls (drawn in red)", c.stalls)?;
    }
    // Per worker, when it joined in, how long it worked, and how long it waited for a thief
    // or slept: how a pool that started parked reached its workers, who finished last, and
    // whether the forks left workers waiting.
    if c.wait_spans > 0 {
        writeln!(out, "waits in join or scope: {}", c.wait_spans)?;
    }
    writeln!(
        out,
        "worker  first busy at         busy      waiting       parked"
    )?;
    for lane in &report.busy {
        let first = match lane.first_busy_us {
            Some(us) => format!("+{:.3} ms", us / 1e3),
            None => "never".to_string(),
        };
        writeln!(
            out,
            "{:>6}  {first:>13}  {:>8.3} ms  {:>8.3} ms  {:>8.3} ms",
            lane.worker,
            lane.busy_us / 1e3,
            lane.waiting_us / 1e3,
            lane.parked_us / 1e3
        )?;
    }
    if c.lost > 0 {
        writeln!(
            out,
            "{} older events were overwritten before the export: the timeline starts late",
            c.lost
        )?;
    }
    if args.input.is_none() {
        writeln!(out, "wrote {}", report.trace)?;
    }
    writeln!(
        out,
        "wrote {} ({} KiB)",
        report.svg,
        report.svg_bytes.div_ceil(1024)
    )?;
    Ok(())
}

/// The worker count to record: as asked or by default, at most [`MAX_TRACED_WORKERS`].
fn traced_workers(common: &CommonArgs) -> Result<usize, Failure> {
    let workers = common.workers_or_default()?;
    if workers > MAX_TRACED_WORKERS {
        let asked = if common.workers.is_some() {
            format!("--workers {workers}")
        } else {
            format!("MAGPIE_WORKER_THREADS={workers}")
        };
        return Err(Failure::Usage(format!(
            "{asked}: magpie trace records at most {MAX_TRACED_WORKERS} workers (each keeps a \
             1 MiB trace ring)"
        )));
    }
    Ok(workers)
}

/// The operations `--iter` records: rows of `magpie-bench iter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum IterOp {
    /// `par_iter().sum()`
    Sum,
    /// `par_iter().min_by_key(..)`
    MinByKey,
    /// `par_iter().any(..)` with no match: a full scan
    Any,
    /// `par_sort_unstable()`
    SortUnstable,
}

impl IterOp {
    fn describe(self) -> &'static str {
        match self {
            IterOp::Sum => "par_iter().sum()",
            IterOp::MinByKey => "par_iter().min_by_key(..)",
            IterOp::Any => "par_iter().any(..), no match",
            IterOp::SortUnstable => "par_sort_unstable()",
        }
    }

    /// Runs the operation on `data` in the current pool; returns what it computed (a
    /// sort's outcome is `data` itself).
    fn run(self, data: &mut [u64]) -> Option<u64> {
        use magpie::prelude::*;
        match self {
            IterOp::Sum => Some(data.par_iter().map(|&x| small(x)).sum::<u64>()),
            IterOp::MinByKey => data.par_iter().min_by_key(|&&x| key(x)).map(|&x| key(x)),
            IterOp::Any => Some(u64::from(data.par_iter().any(|&x| x == u64::MAX))),
            IterOp::SortUnstable => {
                data.par_sort_unstable();
                None
            }
        }
    }

    /// Checks `got`, the outcome of [`IterOp::run`] on `data`, sequentially (outside the
    /// pool, after the trace's run): a trace of a wrong answer would mislead.
    fn check(self, data: &[u64], got: Option<u64>) -> Result<(), String> {
        let ok = match self {
            IterOp::Sum => got == Some(data.iter().map(|&x| small(x)).sum::<u64>()),
            IterOp::MinByKey => got == data.iter().map(|&x| key(x)).min(),
            IterOp::Any => got == Some(0),
            IterOp::SortUnstable => data.windows(2).all(|w| w[0] <= w[1]),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{}: wrong result", self.describe()))
        }
    }
}

/// The items `--iter sum` adds: below 2^31 each, so that no sum of up to 10^9 overflows.
fn small(x: u64) -> u64 {
    x >> 32
}

/// The key `--iter min-by-key` compares.
fn key(x: u64) -> u64 {
    x % 1_000_003
}

/// `--iter`: one operation on a parked pool, traced.
fn record_iter(args: &TraceArgs, op: IterOp, workers: usize) -> Result<(PathBuf, String), Failure> {
    let len = usize::try_from(args.len).map_err(|_| Failure::Usage("--len: too large".into()))?;
    // The workloads' generator: the same input for the same seed. Shifted right by one, so
    // that `u64::MAX` never occurs and `any` scans everything.
    let mut rng = SplitMix64::new(args.common.seed);
    let mut data: Vec<u64> = (0..len).map(|_| rng.next_u64() >> 1).collect();
    let rt = traced_runtime(workers)?;
    // As in magpie-bench: every worker parked before the operation starts.
    pause(Duration::from_millis(3));
    let got = rt.install(|| op.run(&mut data));
    rt.wait_idle();
    op.check(&data, got).map_err(Failure::Run)?;
    let path = args.out.join("trace.json");
    export(&rt, &path)?;
    Ok((
        path,
        format!(
            "magpie: {} of {len} u64 on {workers} workers, after a 3 ms pause",
            op.describe()
        ),
    ))
}

/// Runs the workload on a traced runtime of `workers` workers and exports
/// `DIR/trace.json`; returns its path and a title for the drawing.
fn record(args: &TraceArgs, workers: usize) -> Result<(PathBuf, String), Failure> {
    if args.stall {
        return record_stall(args, workers);
    }
    if let Some(op) = args.iter {
        return record_iter(args, op, workers);
    }
    let rt = traced_runtime(workers)?;
    let title = if args.demo {
        let scenario = Scenario::generate(
            args.tasks,
            Duration::from_millis(2),
            Duration::from_micros(200),
            args.common.seed,
        );
        let heavy_by_worker = Arc::new((0..workers).map(|_| AtomicU64::new(0)).collect());
        scenario.submit(&rt, &heavy_by_worker)?;
        format!(
            "magpie: {} heavy tasks queued on worker 0, {} light spread, {workers} workers",
            scenario.heavy.len(),
            scenario.light.len()
        )
    } else {
        let workload = Workload::generate(args.pattern, args.tasks, args.common.seed);
        for batch in &workload.batches {
            for &d in &batch.durations {
                drop(rt.submit(move || spin(d)));
            }
            pause(batch.pause_after);
        }
        format!(
            "magpie: {} {} tasks on {workers} workers",
            args.tasks, args.pattern
        )
    };
    rt.wait_idle();
    let path = args.out.join("trace.json");
    export(&rt, &path)?;
    Ok((path, title))
}

/// `--stall`: plays `magpie demo --stall` on a traced runtime and exports its trace, the
/// monitor's stall span included.
fn record_stall(args: &TraceArgs, workers: usize) -> Result<(PathBuf, String), Failure> {
    let workers = crate::demo_stall::demo_workers(Some(workers))?;
    let stage = crate::demo_stall::Stage::build(workers, true)?;
    // The busy workers spin half a millisecond per poll: a trace ring holds the whole 2 s
    // of that, where one poll per yield would overwrite the stall's start.
    let spin = crate::demo_stall::Spin::Slices(Duration::from_micros(500));
    let report = stage.play(spin, None)?;
    let path = args.out.join("trace.json");
    export(&stage.rt, &path)?;
    let title = match report.stall_reports.first() {
        Some(info) => format!("magpie demo --stall, {workers} workers: {info}"),
        None => format!("magpie demo --stall, {workers} workers: no stall reported"),
    };
    Ok((path, title))
}

/// A runtime of `workers` workers that records events.
fn traced_runtime(workers: usize) -> Result<Runtime, Failure> {
    Ok(Runtime::builder()
        .worker_threads(workers)
        .trace(true)
        .build()?)
}

fn export(rt: &Runtime, path: &Path) -> Result<(), Failure> {
    rt.trace_export(path)
        .map_err(|e| Failure::Run(format!("cannot write {}: {e}", path.display())))
}
