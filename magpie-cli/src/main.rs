//! `magpie`: shows the magpie scheduler at work.
//!
//! - `magpie demo`: the task pool's load-balancing scenario, heavy tasks all queued on worker
//!   0 and light ones spread, with a live view of the steals that even the load out;
//!   `magpie demo --stall`: a task that blocks its worker, the stall report, and the other
//!   workers taking its queue.
//! - `magpie compare`: work stealing against three schedules without it, on the four
//!   workload patterns.
//! - `magpie scale`: the scaling table, 1, 2, 4, … workers on the same tasks.
//! - `magpie trace`: a traced run drawn as a per-worker timeline (SVG).
//! - `magpie tasks`: the live-task dump of a small workload (id, name, state, spawn
//!   location, polls, poll times, age).
//!
//! Every subcommand takes `--workers`, `--seed` and `--json`, and all but `tasks` take
//! `--tasks` (`tasks` runs its own small, fixed workload). Bad arguments exit
//! with status 2 and a message, from clap or as `magpie: <message>`; so does a `trace
//! --input` file that cannot be read or drawn. Any other failure exits with status 1 and a
//! `magpie: <message>`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod baseline;
mod compare;
mod demo;
mod demo_stall;
mod report;
mod scale;
mod svg;
mod tasks;
mod timeline;
mod trace;
mod workload;

use report::Failure;

/// The magpie work-stealing runtime, at work on your machine.
#[derive(Debug, Parser)]
#[command(name = "magpie", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Heavy tasks all queued on worker 0, light ones spread: watch the others steal.
    Demo(demo::DemoArgs),
    /// Work stealing against round-robin, a central queue and static partitioning.
    Compare(compare::CompareArgs),
    /// The same tasks on 1, 2, 4, … workers: speedup, efficiency, load balance.
    Scale(scale::ScaleArgs),
    /// Record a traced run and draw each worker's timeline as an SVG.
    Trace(trace::TraceArgs),
    /// List the live tasks of a small workload: what each is doing, and where it came from.
    Tasks(tasks::TasksArgs),
}

/// Options every subcommand takes (`--tasks` is each subcommand's own: its default differs).
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// Worker threads [default: one per CPU, or MAGPIE_WORKER_THREADS].
    #[arg(long, value_parser = worker_count())]
    pub(crate) workers: Option<usize>,
    /// Seed for the task durations: the same seed gives the same workload.
    #[arg(long, default_value_t = 0x5EED)]
    pub(crate) seed: u64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
}

impl CommonArgs {
    /// The worker count asked for, or the one a default runtime would have.
    pub(crate) fn workers_or_default(&self) -> Result<usize, Failure> {
        self.workers.map_or_else(default_workers, Ok)
    }
}

/// The parser for a worker count: 1 to [`magpie::MAX_WORKERS`].
pub(crate) fn worker_count() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=magpie::MAX_WORKERS as u64)
}

/// The parser for a task count: 1 to ten million.
pub(crate) fn task_count() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000_000)
}

/// The worker count of a default runtime, by the runtime builder's rule (see
/// `magpie::Builder::new`), so that baselines get as many threads as magpie workers:
/// `MAGPIE_WORKER_THREADS` if it holds a count from 1 to [`magpie::MAX_WORKERS`], the same
/// error as the builder's if it holds a larger number, else the available parallelism.
///
/// Checked before any work starts: `magpie scale` would otherwise run every power of two
/// below an impossible count before it failed.
pub(crate) fn default_workers() -> Result<usize, Failure> {
    let value = std::env::var("MAGPIE_WORKER_THREADS").unwrap_or_default();
    let value = value.trim();
    let too_large = || -> Failure {
        magpie::BuildError::WorkerThreadsEnvTooLarge {
            value: value.to_owned(),
        }
        .into()
    };
    let from_env = match value.parse::<usize>() {
        Ok(0) => None,
        Ok(count) if count <= magpie::MAX_WORKERS => Some(count),
        Ok(_) => return Err(too_large()),
        Err(err) if *err.kind() == std::num::IntErrorKind::PosOverflow => return Err(too_large()),
        Err(_) => None,
    };
    Ok(from_env.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())))
}

/// Fails as a runtime's build would on a bad runtime environment variable
/// (`MAGPIE_BARRIER`, `MAGPIE_STALL_THRESHOLD_MS`), by building and dropping a one-worker
/// runtime: for the subcommands that print a header before their first runtime, so that
/// they fail before printing anything.
pub(crate) fn check_runtime_environment() -> Result<(), Failure> {
    magpie::Runtime::builder()
        .worker_threads(1)
        .build()
        .map(drop)
        .map_err(Failure::from)
}

fn main() -> ExitCode {
    // clap exits with status 2 and a clear message on bad arguments.
    let cli = Cli::parse();
    let out = &mut std::io::stdout().lock();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args, out),
        Command::Compare(args) => compare::run(&args, out),
        Command::Scale(args) => scale::run(&args, out),
        Command::Trace(args) => trace::run(&args, out),
        Command::Tasks(args) => tasks::run(&args, out),
    };
    match result {
        Ok(()) | Err(Failure::ClosedPipe) => ExitCode::SUCCESS,
        // `writeln!`, not `eprintln!`, which panics (exit 101) when stderr cannot be
        // written: the exit code still says what happened.
        Err(Failure::Usage(message)) => {
            let _ = writeln!(std::io::stderr(), "magpie: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Run(message)) => {
            let _ = writeln!(std::io::stderr(), "magpie: {message}");
            ExitCode::FAILURE
        }
    }
}
