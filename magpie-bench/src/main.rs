//! `magpie-bench`: side-by-side benchmarks of magpie against rayon, chili and plain
//! sequential code (fork-join), and against tokio, async-executor and the `futures` thread
//! pool (async tasks).
//!
//! ```text
//! cargo run --release -p magpie-bench -- fork-join [--workers N] [--samples K] [--quick]
//! cargo run --release -p magpie-bench -- idle [--workers N] [--reps R] [--pending-timers N]
//! cargo run --release -p magpie-bench -- scale [--workers 1,2,4,8,16] [--quick]
//!                                              [--only fork-join,iter,async,task-pool]
//!                                              [--processes K] [--json PATH]
//! cargo run --release -p magpie-bench -- async [--workers N] [--samples K] [--quick]
//! cargo run --release -p magpie-bench -- iter [--workers N] [--only sum,sort,...] [--quick]
//! cargo run --release -p magpie-bench -- stall [--workers N] [--stall-ms S] [--trials T]
//!     [--peer-trials P] [--gap-ms G] [--full-stall] [--busy-others] [--threshold-ms T]
//!                                              [--shapes lifo,ring,mailbox,job]
//! cargo run --release -p magpie-bench -- cold-start [--work-us W] [--rounds R]
//!                                                   [--pauses-us 0,100,1000,3000]
//! cargo run --release -p magpie-bench -- bounds [--workers 1,2,4,8,16] [--wake-us 60]
//! cargo run --release -p magpie-bench -- net [--rows echo,hello,mixed,blocked,idle-conns]
//!                                            [--secs S] [--conns 1,64,512]
//!                                            [--idle-conns 10000] [--json PATH]
//! ```
//!
//! The report goes to stdout as markdown (ready for BENCHMARKS.md), progress to stderr, and
//! `--json PATH` writes the raw samples.
//!
//! `scale` is the scaling table in one command: every row of `fork-join` (plus `tree_sum`
//! on a post-order tree), `iter` (with `par_sort_unstable` and `par_iter().sum()` listed
//! under fork-join), the six scheduler rows of `async`, and the task pool on `magpie
//! scale`'s three patterns (against rayon, tokio and async-executor, with efficiency, load
//! balance and ramp-up), each at every worker count against the same peers as in its own
//! subcommand. Beside each magpie time it prints what the samples did inside the runtime
//! that ran them (medians per sample of the difference of `Runtime::stats()` before and
//! after, the pool idle again): steals, failed steal searches, steal attempts, heavy
//! barriers (`membarrier` calls) and heavy barriers per steal, parks, unparks, spawns and
//! unparks per spawn, inject-queue lock acquisitions. The default worker counts are 1, 2, 4,
//! ... below the CPU count, then the CPU count; `--quick` (5 samples, 2,000 tasks per
//! task-pool row) takes a few minutes at `--workers 1,2` on two CPUs. `--assume-cpus N`
//! makes magpie's pools count N CPUs in the wake rules that depend on the machine's size,
//! so that the counts of a small machine show a large one's wakes (not its times).
//! `--processes K` runs the whole table in K fresh processes and pools their samples, with
//! the spread of magpie's ratios from one process to the next: where the kernel places each
//! thread lasts a process, and on a small VM it moves a pool's median up to 3 × (see
//! `scale/processes.rs`). See `scale.rs`.

mod async_rows;
mod bounds;
mod cold_start;
mod fork_join;
mod harness;
mod idle;
mod iter_rows;
mod net_rows;
mod pools;
mod scale;
mod stall;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::async_rows::{AsyncImpl, AsyncPools, Row};
use crate::fork_join::ForkJoinRow;
use crate::harness::{measure, measurement_json, render_measurement, Workload};
use crate::iter_rows::{IterCase, IterRow};
use crate::pools::{Impl, Pools};

#[derive(Parser, Debug)]
#[command(
    name = "magpie-bench",
    about = "Benchmarks magpie against rayon, chili, tokio, async-executor, futures and \
             sequential code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// fib, tree_sum (`--only tree-postorder` for the post-order tree) and quicksort with
    /// every implementation at one worker count.
    ForkJoin(ForkJoinArgs),
    /// CPU time each pool burns in the second after its work ends.
    Idle(IdleArgs),
    /// Every row (fork-join, iter, async, task pool) at several worker counts against its
    /// peers, with magpie's steal, park and barrier counts beside its times.
    Scale(ScaleArgs),
    /// Spawning, waking and yielding async tasks (tokio's scheduler benchmarks), and async
    /// tasks that run fork-join work.
    Async(AsyncArgs),
    /// Parallel iterators (sum, map + collect, min_by_key, position_first, any) and parallel
    /// sorts against rayon's, with the sequential std versions as the baseline.
    Iter(IterArgs),
    /// Start latency of a task queued behind a long poll on its worker (LIFO slot, local
    /// queue, mailbox, join half), magpie against tokio.
    Stall(StallArgs),
    /// TCP echo and hyper servers on magpie, tokio and smol under a closed-loop load over
    /// loopback; a hyper endpoint running a parallel sum; the echo load while a task blocks a
    /// worker; the CPU of idling with many open connections.
    Net(NetArgs),
    /// How soon this machine runs a second thread in parallel when work arrives after its
    /// CPUs idled (no runtime involved): two threads' time over one thread's, after pauses.
    ColdStart(ColdStartArgs),
    /// What no scheduler can beat: the quicksort row's task tree and `par_sort_unstable`'s,
    /// timed on one thread (work, span, the bound max(work / p, span),
    /// an ideal greedy schedule), and the task pool's patterns scheduled in arrival order
    /// with no overhead.
    Bounds(BoundsArgs),
}

#[derive(Args, Debug)]
struct BoundsArgs {
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    workers: Vec<usize>,
    /// Elements of the sorts (the `fork-join` and `scale` default).
    #[arg(long, default_value_t = 10_000_000)]
    sort_len: usize,
    /// Timed trees per sort; the tables give medians.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Tasks per task-pool pattern (`scale`'s default).
    #[arg(long, default_value_t = 4_000)]
    tasks: usize,
    /// Time between two submissions of the task pool, in ns (about one remote spawn).
    #[arg(long, default_value_t = 100)]
    submit_ns: u64,
    /// One wake-up latency, in µs, for the task pool's woken starts (`cold-start` measures
    /// this machine's: the helper's delay is two / one - 1 times the piece).
    #[arg(long, default_value_t = 60)]
    wake_us: u64,
}

#[derive(Args, Debug)]
struct ColdStartArgs {
    /// How long each thread's piece of work lasts, in microseconds.
    #[arg(long, default_value_t = 350)]
    work_us: u64,
    /// Rounds per pause.
    #[arg(long, default_value_t = 60)]
    rounds: usize,
    /// The idle pauses before each timed piece, in microseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,100,1000,3000")]
    pauses_us: Vec<u64>,
}

#[derive(Args, Debug)]
struct StallArgs {
    /// Worker threads per runtime.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// How long the stalling poll blocks its worker, in milliseconds (at most: see
    /// `--full-stall`).
    #[arg(long, default_value_t = 1000)]
    stall_ms: u64,
    /// Block for the whole stall in every trial, even after the queued task has started
    /// (by default the stall ends then: the latency is measured already).
    #[arg(long)]
    full_stall: bool,
    /// magpie's trials per shape.
    #[arg(long, default_value_t = 1000)]
    trials: usize,
    /// The peers' trials per shape: a peer whose queued task waits for the stall spends
    /// the whole stall on each.
    #[arg(long, default_value_t = 20)]
    peer_trials: usize,
    /// The idle pause before each trial, in milliseconds, so that the other workers have
    /// parked when the stall begins.
    #[arg(long, default_value_t = 5)]
    gap_ms: u64,
    /// Keep every other worker busy with a yielding task during each stall, so that only
    /// magpie's stall monitor can move the queued task (magpie only; no `job` shape).
    #[arg(long)]
    busy_others: bool,
    /// magpie's stall threshold, in milliseconds.
    #[arg(long, default_value_t = 100)]
    threshold_ms: u64,
    /// Where the waiting task is queued.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lifo,ring,mailbox,job"
    )]
    shapes: Vec<stall::Shape>,
    /// Runtimes to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "magpie,tokio"
    )]
    impls: Vec<stall::StallImpl>,
    /// Also write the raw latencies as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct NetArgs {
    /// Worker threads per server runtime (and rayon threads for tokio+rayon).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Rows to run (`idle-conns`, which takes about 6 s per server and sample, only when
    /// named).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "echo,hello,mixed,blocked"
    )]
    rows: Vec<net_rows::NetRow>,
    /// Seconds of load per sample (whole seconds: wrk takes no fractions); for `idle-conns`,
    /// the length of each idle window.
    #[arg(long, default_value_t = 2)]
    secs: u64,
    /// Connection counts of the echo row.
    #[arg(long, value_delimiter = ',', default_value = "1,64,512")]
    conns: Vec<usize>,
    /// Connections of the hello, mixed and blocked rows.
    #[arg(long, default_value_t = 64)]
    http_conns: usize,
    /// Connections held open and silent by the idle-conns row (fewer if the open-files limit
    /// cannot be raised to two descriptors per connection).
    #[arg(long, default_value_t = 10_000)]
    idle_conns: usize,
    /// Timed rounds; each round runs every server once.
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// Untimed rounds (half a second of load each) before the samples.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Who loads the HTTP rows.
    #[arg(long, value_enum, default_value = "auto")]
    loader: net_rows::Loader,
    /// Threads of the built-in client.
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// Servers to run (magpie/peer ratios need magpie; tokio+rayon runs only `mixed`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "magpie,tokio,smol,tokio-rayon"
    )]
    impls: Vec<net_rows::NetImpl>,
    /// Also write the raw samples and medians as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct IterArgs {
    /// Worker threads per pool.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Rows to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sum,map-collect,min-by-key,position-first,any,sort-unstable,sort"
    )]
    only: Vec<IterRow>,
    /// Elements summed by the `sum` row.
    #[arg(long, default_value_t = 100_000_000)]
    sum_len: usize,
    /// Elements of the other scans.
    #[arg(long, default_value_t = 10_000_000)]
    scan_len: usize,
    /// Elements sorted.
    #[arg(long, default_value_t = 10_000_000)]
    sort_len: usize,
    #[command(flatten)]
    sampling: Sampling,
}

#[derive(Args, Debug)]
struct ForkJoinArgs {
    /// Worker threads per pool.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[command(flatten)]
    sampling: Sampling,
    #[command(flatten)]
    sizes: Sizes,
}

#[derive(Args, Debug)]
struct IdleArgs {
    /// Worker threads per pool.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// One-second windows per subject [default: 5, or 2 with --quick].
    #[arg(long)]
    reps: Option<usize>,
    /// Hour-long sleeps held by the fresh magpie and tokio runtimes of the two pending-timer
    /// rows (0 leaves those rows out).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pending_timers: usize,
    /// Fewer windows.
    #[arg(long)]
    quick: bool,
    /// Also write the raw windows as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ScaleArgs {
    /// Worker counts to measure [default: 1, 2, 4, ... below the CPU count, then the CPU
    /// count].
    #[arg(long, value_delimiter = ',')]
    workers: Vec<usize>,
    /// Row groups to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fork-join,iter,async,task-pool"
    )]
    only: Vec<scale::Group>,
    #[command(flatten)]
    sampling: Sampling,
    #[command(flatten)]
    fork_join: fork_join::Sizes,
    /// Elements summed by `par_iter().sum()`.
    #[arg(long, default_value_t = 100_000_000)]
    sum_len: usize,
    /// Elements of the other scans of the iter group.
    #[arg(long, default_value_t = 10_000_000)]
    scan_len: usize,
    /// Tasks per task-pool row [default: 4000, or 2000 with --quick].
    #[arg(long)]
    tasks: Option<usize>,
    /// Make magpie's pools count this many CPUs in the wake rules that depend on the
    /// machine's size, so that the counts show on a small machine the wakes a large one
    /// makes (its timings then compare nothing: the workers share fewer CPUs).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    assume_cpus: Option<u64>,
    /// Make each task of the task-pool rows sleep FACTOR times its duration instead of
    /// spinning (its thread's timer slack at 1 ns), and each magpie pool count one CPU per
    /// worker in its wake rules and its barrier mode (`Builder::assume_cpus`): a task then
    /// holds a worker and not a CPU, so that a small
    /// machine shows how each pool schedules, wakes and balances at worker counts it lacks
    /// (16 workers on 2 CPUs). A task's work is then the time it held its thread. 10 keeps
    /// the shortest tasks (mixed's 10 µs) well above a sleep's wake-up cost. The iter group
    /// then has one row instead of its own: a parallel `for_each` over 1,600 items that
    /// each sleep 20 × FACTOR µs (how the splitting spreads them). Only with --only
    /// task-pool, iter or both; not with --assume-cpus.
    #[arg(
        long,
        value_name = "FACTOR",
        value_parser = clap::value_parser!(u32).range(1..=1000),
        conflicts_with = "assume_cpus"
    )]
    sleeping_tasks: Option<u32>,
    /// Run the whole table in this many fresh processes, one after the other, and report
    /// each row's times over all of their samples, with the spread of magpie's ratio from
    /// process to process (where the kernel put each thread lasts a process: one process
    /// is one draw of it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    processes: u64,
}

#[derive(Args, Debug)]
struct AsyncArgs {
    /// Worker threads per runtime or pool.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Rows to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "spawn_many_local,spawn_many_remote,yield_many,ping_pong,chained_spawn,lone_request,lone_request_cpu,mixed"
    )]
    only: Vec<Row>,
    /// Implementations to run (magpie/peer ratios need magpie; tokio-rayon runs only `mixed`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "magpie,tokio,async-executor,futures-pool,tokio-rayon"
    )]
    impls: Vec<AsyncImpl>,
    #[command(flatten)]
    sampling: Sampling,
}

#[derive(Args, Debug)]
struct Sampling {
    /// Timed rounds; each round runs every implementation once [default: 15, or 5 with --quick].
    #[arg(long)]
    samples: Option<usize>,
    /// Untimed rounds before the samples.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Fewer samples, for a quick look.
    #[arg(long)]
    quick: bool,
    /// Also write the raw samples and medians as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

impl Sampling {
    fn samples(&self) -> usize {
        self.samples
            .unwrap_or(if self.quick { 5 } else { 15 })
            .max(1)
    }
}

#[derive(Args, Debug)]
struct Sizes {
    /// Workloads to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fib,tree,sort"
    )]
    only: Vec<ForkJoinRow>,
    /// Implementations to run (magpie/peer ratios need magpie).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sequential,magpie,rayon,chili"
    )]
    impls: Vec<ImplArg>,
    #[command(flatten)]
    sizes: fork_join::Sizes,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ImplArg {
    Sequential,
    Magpie,
    Rayon,
    Chili,
}

impl Sizes {
    /// The selected implementations, in the canonical order.
    fn impls(&self) -> Vec<Impl> {
        Impl::ALL
            .into_iter()
            .filter(|imp| {
                self.impls.iter().any(|a| {
                    matches!(
                        (a, imp),
                        (ImplArg::Sequential, Impl::Sequential)
                            | (ImplArg::Magpie, Impl::Magpie)
                            | (ImplArg::Rayon, Impl::Rayon)
                            | (ImplArg::Chili, Impl::Chili)
                    )
                })
            })
            .collect()
    }

    /// Builds the selected workloads (the trees and the sort input are made here, untimed).
    fn workloads(&self) -> Vec<Box<dyn Workload>> {
        ForkJoinRow::ALL
            .into_iter()
            .filter(|row| self.only.contains(row))
            .map(|row| row.make(self.sizes))
            .collect()
    }
}

/// Facts about the machine and the run, printed above every report and written as the
/// `machine` object of every JSON file.
#[derive(Debug, Serialize)]
struct MachineInfo {
    cpu: String,
    #[serde(rename = "logical_cpus")]
    cpus: usize,
    /// The cargo profile of this binary (`release`, `release-lto`, ...).
    profile: String,
    kernel: String,
    date: String,
    command: String,
}

impl MachineInfo {
    fn collect() -> MachineInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (key, value) = l.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        let date = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                format!("{secs} s since the Unix epoch")
            });
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        MachineInfo {
            cpu,
            cpus,
            profile: build_profile(),
            kernel,
            date,
            command,
        }
    }

    fn print(&self, title: &str, workers: &str) {
        self.print_with_pools(
            title,
            &format!(
                "{workers} worker threads each (chili counts the calling thread as one of its \
                 threads: it starts one fewer worker plus a heartbeat thread)"
            ),
        );
    }

    /// The header, with `pools` saying how many threads each pool has.
    fn print_with_pools(&self, title: &str, pools: &str) {
        println!("## magpie-bench {title}\n");
        println!("- CPU: {} ({} logical CPUs available)", self.cpu, self.cpus);
        println!("- kernel: Linux {}", self.kernel);
        println!("- build profile: {}", self.profile);
        println!("- date: {}", self.date);
        println!("- command: `{}`", self.command);
        println!("- load average at start: {}", load_average());
        println!("- pools: {pools}");
        if cfg!(debug_assertions) {
            println!("- WARNING: debug build; run with --release for meaningful numbers");
        }
        println!();
    }
}

/// The cargo profile this binary was built with: the name of the directory it lies in
/// (`target/<profile>/`, or `target/<profile>/deps/` for a test binary).
fn build_profile() -> String {
    let profile = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?;
        let dir = if dir.file_name()? == "deps" {
            dir.parent()?
        } else {
            dir
        };
        Some(dir.file_name()?.to_string_lossy().into_owned())
    });
    profile.unwrap_or_else(|| "unknown".to_owned())
}

/// The 1, 5 and 15 minute load averages, from `/proc/loadavg`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Prints the load average after the run, so a reader can tell a disturbed run.
fn print_load_after() {
    println!("Load average at the end: {}.\n", load_average());
}

/// The file `--json` writes: the machine, the benchmark's name, the run's own settings (if
/// any) and the results.
#[derive(Debug, Serialize)]
struct JsonFile<'a, S, R> {
    machine: &'a MachineInfo,
    benchmark: &'a str,
    /// Each field of `settings` becomes a field of the file (none for `()`).
    #[serde(flatten)]
    settings: S,
    results: R,
}

/// `scale`'s settings in its JSON file.
#[derive(Debug, Serialize)]
struct ScaleSettings {
    /// `--assume-cpus` (`None`, written as `null`: the machine's CPUs).
    assumed_cpus: Option<u64>,
    /// `--sleeping-tasks` (`None`, written as `null`: the tasks spin).
    sleeping_tasks: Option<u32>,
}

/// Writes `results` of benchmark `kind`, with the machine's description, as JSON to `path`.
fn write_json(path: &Path, info: &MachineInfo, kind: &str, results: impl Serialize) -> ExitCode {
    write_json_with(path, info, kind, (), results)
}

/// [`write_json`] with `settings`, fields of the run's own that the machine's do not say,
/// between the benchmark's name and its results.
fn write_json_with(
    path: &Path,
    info: &MachineInfo,
    kind: &str,
    settings: impl Serialize,
    results: impl Serialize,
) -> ExitCode {
    match write_json_file(path, info, kind, settings, results) {
        Ok(()) => {
            eprintln!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("could not write {}: {err}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// The file [`write_json_with`] writes, or why it could not.
fn write_json_file(
    path: &Path,
    info: &MachineInfo,
    kind: &str,
    settings: impl Serialize,
    results: impl Serialize,
) -> std::io::Result<()> {
    let file = JsonFile {
        machine: info,
        benchmark: kind,
        settings,
        results,
    };
    let text = serde_json::to_string_pretty(&file)?;
    std::fs::write(path, text + "\n")
}

fn fork_join(args: &ForkJoinArgs, info: &MachineInfo) -> ExitCode {
    let samples = args.sampling.samples();
    info.print("fork-join", &args.workers.to_string());
    let pools = Pools::new(args.workers);
    let impls = args.sizes.impls();
    let mut workloads = args.sizes.workloads();
    let mut measurements = Vec::new();
    for workload in &mut workloads {
        let m = measure(
            workload.as_mut(),
            &pools,
            &impls,
            args.sampling.warmup,
            samples,
        );
        println!("{}", render_measurement(&m));
        measurements.push(m);
    }
    println!(
        "Medians and minima of wall time in ms over rotating rounds (each round runs every \
         implementation once, first place rotating). magpie/this = magpie's median divided \
         by this row's median: below 1.00, magpie is faster.\n"
    );
    print_load_after();
    match &args.sampling.json {
        Some(path) => {
            let items: Vec<_> = measurements.iter().map(measurement_json).collect();
            write_json(path, info, "fork-join", items)
        }
        None => ExitCode::SUCCESS,
    }
}

fn idle(args: &IdleArgs, info: &MachineInfo) -> ExitCode {
    let reps = args.reps.unwrap_or(if args.quick { 2 } else { 5 }).max(1);
    info.print("idle", &args.workers.to_string());
    let pools = Pools::new(args.workers);
    let report = idle::run(&pools, reps, args.pending_timers);
    println!("{}", report.render());
    print_load_after();
    match &args.json {
        Some(path) => write_json(path, info, "idle", report.to_json()),
        None => ExitCode::SUCCESS,
    }
}

fn scale(args: &ScaleArgs, info: &MachineInfo) -> ExitCode {
    let modelled = [scale::Group::TaskPool, scale::Group::Iter];
    if args.sleeping_tasks.is_some() && args.only.iter().any(|g| !modelled.contains(g)) {
        eprintln!(
            "--sleeping-tasks has rows in the task-pool and iter groups only (the others \
             measure CPUs, and would run with a CPU counted per worker): add --only \
             task-pool,iter, or one of the two"
        );
        return ExitCode::FAILURE;
    }
    if args.processes > 1 {
        return scale_processes(args, info);
    }
    let counts: Vec<usize> = if args.workers.is_empty() {
        let cpus = info.cpus.max(1);
        let mut counts: Vec<usize> =
            std::iter::successors(Some(1usize), |&n| (n * 2 < cpus).then_some(n * 2)).collect();
        if cpus > 1 {
            counts.push(cpus);
        }
        counts
    } else {
        args.workers.clone()
    };
    if counts.contains(&0) {
        eprintln!("worker counts must be positive");
        return ExitCode::FAILURE;
    }
    let tasks = args
        .tasks
        .unwrap_or(if args.sampling.quick { 2_000 } else { 4_000 });
    if tasks == 0 {
        eprintln!("--tasks must be positive");
        return ExitCode::FAILURE;
    }
    let list: Vec<String> = counts.iter().map(ToString::to_string).collect();
    info.print_with_pools(
        "scale",
        &format!(
            "{} worker threads each, every pool built once per worker count (chili counts \
             the calling thread as one of its threads; async-executor: that many threads in \
             `run`)",
            list.join(", ")
        ),
    );
    let hold = match args.sleeping_tasks {
        Some(factor) => {
            pools::assume_a_cpu_per_worker();
            println!(
                "- sleeping tasks (--sleeping-tasks {factor}): each task sleeps {factor} × its \
                 duration, holding a worker and not a CPU, and magpie's pools count a CPU per \
                 worker; the rows show how each pool schedules at these worker counts, not \
                 how fast this machine's {} CPUs compute",
                info.cpus
            );
            scale::Hold::Sleep { factor }
        }
        None => scale::Hold::Spin,
    };
    if let Some(cpus) = args.assume_cpus {
        pools::assume_cpus(cpus as usize);
        println!(
            "- magpie's pools assume {cpus} CPUs (--assume-cpus): the counts show the wakes of \
             such a machine; the times, on {} CPUs, compare nothing",
            info.cpus
        );
    }
    print_cold_start_line();
    let cfg = scale::Config {
        counts,
        groups: args.only.clone(),
        warmup: args.sampling.warmup,
        samples: args.sampling.samples(),
        fork_join: args.fork_join,
        iter: iter_rows::Lengths {
            sum: args.sum_len,
            scan: args.scan_len,
            sort: args.fork_join.sort_len,
        },
        tasks,
        hold,
    };
    let rows = scale::run(&cfg);
    println!("{}", scale::legend());
    print_load_after();
    match &args.sampling.json {
        // The CPUs the wake rules counted (`--assume-cpus`; null: the machine's), without
        // which a file of counts from a small machine would pass for a large one's.
        Some(path) => write_json_with(
            path,
            info,
            "scale",
            ScaleSettings {
                assumed_cpus: args.assume_cpus,
                sleeping_tasks: args.sleeping_tasks,
            },
            scale::rows_json(&rows),
        ),
        None => ExitCode::SUCCESS,
    }
}

/// `scale --processes K`: the table from `K` child processes, pooled
/// (`scale/processes.rs`).
fn scale_processes(args: &ScaleArgs, info: &MachineInfo) -> ExitCode {
    use scale::processes;
    let processes = args.processes as usize;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => {
            eprintln!("scale --processes: cannot find this program: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Each child's JSON: beside `--json PATH` (kept), or in a folder of our own (removed).
    let (folder, stem, keep) = match &args.sampling.json {
        Some(path) => (
            path.parent().map_or_else(PathBuf::new, Path::to_path_buf),
            path.file_stem()
                .map_or_else(|| "scale".into(), |s| s.to_string_lossy().into_owned()),
            true,
        ),
        None => (
            std::env::temp_dir().join(format!("magpie-bench-scale-{}", std::process::id())),
            "scale".to_owned(),
            false,
        ),
    };
    if let Err(err) = std::fs::create_dir_all(&folder) {
        eprintln!(
            "scale --processes: cannot create {}: {err}",
            folder.display()
        );
        return ExitCode::FAILURE;
    }
    info.print_with_pools(
        "scale",
        &format!(
            "the table run in {processes} fresh processes, one after the other; times over \
             all of their samples"
        ),
    );
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = processes::run_children(&exe, &raw, processes, |i| {
        folder.join(format!("{stem}-process-{i}.json"))
    })
    .and_then(|files| {
        let mut results = Vec::with_capacity(files.len());
        for file in &files {
            results.push(processes::read(file)?.0);
        }
        Ok((files, processes::pool(&results)?))
    });
    let (files, pooled) = match result {
        Ok(done) => done,
        Err(err) => {
            eprintln!("scale --processes: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", processes::render(&pooled, processes));
    println!(
        "magpie ms, peer ms: medians over every process's samples together; magpie/peer: \
         their ratio; per process: the lowest, median and highest of the {processes} \
         processes' own ratios; magpie ahead: processes whose ratio was at most 1.00.\n"
    );
    println!("{}", processes::render_counts(&pooled));
    println!(
        "magpie's counts over every process's samples: medians per sample; heavy/steal and \
         unparks/spawn over the totals (see `scale` without --processes for each). \
         Task-pool shapes: each process's JSON{}.",
        if keep { " (kept beside --json)" } else { "" }
    );
    print_load_after();
    if !keep {
        for file in &files {
            let _ = std::fs::remove_file(file);
        }
        let _ = std::fs::remove_dir(&folder);
    }
    match &args.sampling.json {
        Some(path) => write_json_with(
            path,
            info,
            "scale",
            ScaleProcessesSettings {
                scale: ScaleSettings {
                    assumed_cpus: args.assume_cpus,
                    sleeping_tasks: args.sleeping_tasks,
                },
                processes: args.processes,
            },
            pooled,
        ),
        None => ExitCode::SUCCESS,
    }
}

/// `scale --processes`'s settings in its JSON file.
#[derive(Debug, Serialize)]
struct ScaleProcessesSettings {
    #[serde(flatten)]
    scale: ScaleSettings,
    /// How many processes' samples are pooled.
    processes: u64,
}

fn async_rows(args: &AsyncArgs, info: &MachineInfo) -> ExitCode {
    let samples = args.sampling.samples();
    info.print_with_pools(
        "async",
        &format!(
            "{} worker threads each (async-executor: that many threads in `run`; \
             tokio+rayon: that many tokio workers plus that many rayon threads)",
            args.workers
        ),
    );
    let pools = AsyncPools::new(args.workers);
    let mut measurements = Vec::new();
    for row in Row::ALL {
        if !args.only.contains(&row) {
            continue;
        }
        let measured =
            async_rows::measure_row(row, &pools, &args.impls, args.sampling.warmup, samples);
        if let Some(m) = measured {
            println!("{}", async_rows::render_row(&m));
            measurements.push(m);
        }
    }
    println!("{}", async_rows::render_summary(&measurements));
    println!(
        "Medians and minima of wall time in ms over rotating rounds (each round runs every \
         implementation once, first place rotating). magpie/this = magpie's median divided \
         by this row's median; magpie/best = magpie's median divided by the fastest peer's: \
         below 1.00, magpie is faster.\n"
    );
    print_load_after();
    match &args.sampling.json {
        Some(path) => write_json(
            path,
            info,
            "async",
            async_rows::measurements_json(&measurements),
        ),
        None => ExitCode::SUCCESS,
    }
}

fn iter_rows(args: &IterArgs, info: &MachineInfo) -> ExitCode {
    let samples = args.sampling.samples();
    info.print("iter", &args.workers.to_string());
    let pools = Pools::new(args.workers);
    let lengths = iter_rows::Lengths {
        sum: args.sum_len,
        scan: args.scan_len,
        sort: args.sort_len,
    };
    let mut measurements = Vec::new();
    for row in IterRow::ALL {
        if !args.only.contains(&row) {
            continue;
        }
        // Made one at a time, so that only one input is in memory at once.
        for case in row.cases() {
            let mut workload = case.make(lengths);
            let m = measure(
                workload.as_mut(),
                &pools,
                &IterCase::IMPLS,
                args.sampling.warmup,
                samples,
            );
            drop(workload);
            println!("{}", render_measurement(&m));
            measurements.push(m);
        }
    }
    println!("{}", iter_rows::render_summary(&measurements));
    print_load_after();
    match &args.sampling.json {
        Some(path) => {
            let items: Vec<_> = measurements.iter().map(measurement_json).collect();
            write_json(path, info, "iter", items)
        }
        None => ExitCode::SUCCESS,
    }
}

fn net(args: &NetArgs, info: &MachineInfo) -> ExitCode {
    if args.secs == 0
        || args.samples == 0
        || args.conns.contains(&0)
        || args.http_conns == 0
        || args.idle_conns == 0
    {
        eprintln!("--secs, --samples and connection counts must be positive");
        return ExitCode::FAILURE;
    }
    let use_wrk = match net_rows::use_wrk(args.loader) {
        Ok(use_wrk) => use_wrk,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = net_rows::Config {
        rows: args.rows.clone(),
        secs: args.secs,
        conns: args.conns.clone(),
        http_conns: args.http_conns,
        samples: args.samples,
        warmup: args.warmup,
        client_threads: args.client_threads,
        impls: args.impls.clone(),
        idle_conns: args.idle_conns,
    };
    info.print_with_pools(
        "net",
        &format!(
            "{} worker threads per server runtime (smol: that many threads in \
             `async_io::block_on(executor.run(..))`; tokio+rayon: that many tokio workers \
             plus rayon's global pool with that many threads); client: {} thread(s) of the \
             built-in mio client{}; client and servers on the same CPUs, over loopback",
            args.workers,
            args.client_threads,
            if use_wrk {
                ", HTTP rows by wrk -t1"
            } else {
                ", HTTP rows by it too (wrk not used)"
            }
        ),
    );
    let runtimes = net_rows::NetRuntimes::new(args.workers);
    let measurements = net_rows::measure(&runtimes, &cfg, use_wrk);
    println!("{}", net_rows::render_summary(&measurements));
    print_load_after();
    drop(runtimes);
    match &args.json {
        Some(path) => write_json(
            path,
            info,
            "net",
            net_rows::measurements_json(&measurements),
        ),
        None => ExitCode::SUCCESS,
    }
}

fn stall(args: &StallArgs, info: &MachineInfo) -> ExitCode {
    if args.trials == 0 || args.peer_trials == 0 || args.threshold_ms == 0 {
        eprintln!("--trials, --peer-trials and --threshold-ms must be positive");
        return ExitCode::FAILURE;
    }
    info.print_with_pools(
        "stall",
        &format!(
            "{} worker threads each (tokio: multi-thread runtime)",
            args.workers
        ),
    );
    let shapes: Vec<stall::Shape> = stall::Shape::ALL
        .into_iter()
        .filter(|s| args.shapes.contains(s))
        .collect();
    let cfg = stall::Config {
        workers: args.workers,
        stall: std::time::Duration::from_millis(args.stall_ms),
        full_stall: args.full_stall,
        trials: args.trials,
        peer_trials: args.peer_trials,
        gap: std::time::Duration::from_millis(args.gap_ms),
        busy_others: args.busy_others,
        threshold: std::time::Duration::from_millis(args.threshold_ms),
        shapes,
        impls: args.impls.clone(),
    };
    let cells = stall::run(&cfg);
    println!("{}", stall::render(&cfg, &cells));
    print_load_after();
    match &args.json {
        Some(path) => write_json(path, info, "stall", stall::to_json(&cfg, &cells)),
        None => ExitCode::SUCCESS,
    }
}

/// `scale`'s note on the machine: the `cold-start` probe at the pause `scale` takes before
/// every sample, so that a reader sees how much of a short row's time the machine's own
/// wake-up may be.
fn print_cold_start_line() {
    let pause = crate::harness::SCALE_COOL_DOWN;
    let work = std::time::Duration::from_micros(350);
    if let Some(row) = cold_start::run(&[pause], 30, work).first() {
        println!(
            "- cold start (`magpie-bench cold-start`): after the {} ms pause `scale` takes \
             before each sample, two threads running 0.35 ms of work each took {:.2} × one \
             thread's time (1.00: a second CPU at once; 2.00: one after the other)\n",
            pause.as_millis(),
            row.ratio()
        );
    }
}

fn cold_start(args: &ColdStartArgs, info: &MachineInfo) -> ExitCode {
    info.print_with_pools(
        "cold-start",
        "no pool: the bench thread and one helper thread",
    );
    use std::time::Duration;
    let pauses: Vec<Duration> = args
        .pauses_us
        .iter()
        .map(|&us| Duration::from_micros(us))
        .collect();
    let work = Duration::from_micros(args.work_us);
    let rows = cold_start::run(&pauses, args.rounds, work);
    println!("{}", cold_start::render(&rows, work));
    ExitCode::SUCCESS
}

fn bounds(args: &BoundsArgs, info: &MachineInfo) -> ExitCode {
    info.print_with_pools("bounds", "no pool: one thread times the work");
    bounds::run(&bounds::Config {
        counts: args.workers.clone(),
        sort_len: args.sort_len,
        rounds: args.rounds,
        tasks: args.tasks,
        submit_ns: args.submit_ns,
        wake_us: args.wake_us,
    });
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let info = MachineInfo::collect();
    let problem = match &cli.command {
        Command::ColdStart(a) if a.work_us == 0 || a.rounds == 0 => {
            Some("--work-us and --rounds must be positive")
        }
        Command::Bounds(a) if a.workers.iter().any(|&w| w == 0 || w > 65_536) => {
            Some("--workers must be between 1 and 65536")
        }
        Command::Bounds(a) if a.sort_len < 64 || a.rounds == 0 || a.tasks == 0 => {
            Some("--sort-len must be at least 64, --rounds and --tasks positive")
        }
        Command::ColdStart(_) | Command::Scale(_) | Command::Bounds(_) => None,
        Command::ForkJoin(ForkJoinArgs { workers, .. })
        | Command::Idle(IdleArgs { workers, .. })
        | Command::Async(AsyncArgs { workers, .. })
        | Command::Iter(IterArgs { workers, .. })
        | Command::Net(NetArgs { workers, .. })
        | Command::Stall(StallArgs { workers, .. }) => {
            (*workers == 0).then_some("--workers must be positive")
        }
    };
    if let Some(problem) = problem {
        eprintln!("{problem}");
        return ExitCode::FAILURE;
    }
    match &cli.command {
        Command::ForkJoin(args) => fork_join(args, &info),
        Command::Idle(args) => idle(args, &info),
        Command::Scale(args) => scale(args, &info),
        Command::Async(args) => async_rows(args, &info),
        Command::Iter(args) => iter_rows(args, &info),
        Command::Net(args) => net(args, &info),
        Command::Stall(args) => stall(args, &info),
        Command::ColdStart(args) => cold_start(args, &info),
        Command::Bounds(args) => bounds(args, &info),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::harness::json_check::{keys, parse};
    use crate::harness::Measurement;

    fn info() -> MachineInfo {
        MachineInfo {
            cpu: "Some CPU @ 2.0GHz".to_owned(),
            cpus: 2,
            profile: "release".to_owned(),
            kernel: "6.1.0".to_owned(),
            date: "2024-01-01T00:00:00+00:00".to_owned(),
            command: "magpie-bench scale --json \"a b\\c.json\"".to_owned(),
        }
    }

    /// A path for one test's file, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> TempFile {
            let file = format!("magpie-bench-{}-{name}.json", std::process::id());
            TempFile(std::env::temp_dir().join(file))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn the_file_holds_the_machine_the_benchmark_its_settings_and_the_results() {
        let file = TempFile::new("document");
        let m = Measurement {
            workload: "fib(30)".to_owned(),
            workers: 2,
            results: vec![(Impl::Magpie, vec![Duration::from_millis(5)])],
        };
        write_json_file(
            &file.0,
            &info(),
            "scale",
            ScaleSettings {
                assumed_cpus: None,
                sleeping_tasks: Some(10),
            },
            [measurement_json(&m)],
        )
        .expect("the file is written");
        let written = std::fs::read_to_string(&file.0).expect("the file was written");
        assert!(written.ends_with("}\n"), "{written}");
        let v = parse(&written);
        let machine = &v["machine"];
        assert_eq!(machine["cpu"], "Some CPU @ 2.0GHz");
        assert!(machine["logical_cpus"].is_u64(), "{written}");
        assert_eq!(machine["logical_cpus"], 2);
        assert_eq!(machine["profile"], "release");
        assert_eq!(machine["kernel"], "6.1.0");
        assert_eq!(machine["date"], "2024-01-01T00:00:00+00:00");
        assert_eq!(
            machine["command"],
            "magpie-bench scale --json \"a b\\c.json\""
        );
        assert_eq!(v["benchmark"], "scale");
        assert!(v["assumed_cpus"].is_null(), "{written}");
        assert_eq!(v["sleeping_tasks"], 10);
        assert_eq!(v["results"][0]["workload"], "fib(30)");
        assert_eq!(
            v["results"][0]["results"][0]["median_ms"].as_f64(),
            Some(5.0)
        );
        assert_eq!(
            keys(&written),
            [
                "machine",
                "cpu",
                "logical_cpus",
                "profile",
                "kernel",
                "date",
                "command",
                "benchmark",
                "assumed_cpus",
                "sleeping_tasks",
                "results",
                "workload",
                "workers",
                "results",
                "impl",
                "median_ms",
                "min_ms",
                "samples_ms",
            ]
        );
    }

    #[test]
    fn without_settings_the_results_follow_the_benchmark() {
        let file = TempFile::new("plain");
        write_json_file(&file.0, &info(), "fork-join", (), [(); 0]).expect("the file is written");
        let written = std::fs::read_to_string(&file.0).expect("the file was written");
        assert!(written.ends_with('\n'), "{written}");
        assert_eq!(parse(&written)["results"], serde_json::json!([]));
        let top: Vec<String> = keys(&written)
            .into_iter()
            .filter(|k| ["machine", "benchmark", "results"].contains(&k.as_str()))
            .collect();
        assert_eq!(top, ["machine", "benchmark", "results"]);
        assert_eq!(keys(&written).len(), 9);
    }

    #[test]
    fn a_file_that_cannot_be_written_is_an_error() {
        let dir = TempFile::new("not-a-dir");
        std::fs::write(&dir.0, "").expect("the blocking file was written");
        let path = dir.0.join("out.json");
        let written = write_json_file(&path, &info(), "fork-join", (), [(); 0]);
        assert!(written.is_err(), "a path under a plain file was written");
        assert!(!path.exists());
    }
}
