//! `magpie demo`: the task pool's load-balancing scenario on the default runtime.
//!
//! Half the tasks are heavy and all of them are queued on worker 0 (`submit_to(0, ..)`); the
//! other half are light and go through the inject queue (`submit`). Without stealing, worker
//! 0 would run every heavy task while the others finish the light ones and sit idle. The
//! main thread redraws a live view from `Runtime::stats` every 100 ms while a helper thread
//! waits for the runtime to go idle, then prints what each worker did and how close the run
//! came to the ideal makespan (total work spread evenly over the workers).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use magpie::{Runtime, Stats};

use crate::report::{ms, write_json, Failure, Table, WorkerDelta};
use crate::workload::{spin, SplitMix64};
use crate::{task_count, CommonArgs};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Tasks in all: half heavy (all queued on worker 0), half light (spread).
    #[arg(long, default_value_t = 100, value_parser = task_count())]
    tasks: usize,
    /// Work of a heavy task in microseconds (each varies by ±20%).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..=60_000_000))]
    heavy_us: u64,
    /// Work of a light task in microseconds (each varies by ±20%).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=60_000_000))]
    light_us: u64,
    /// Instead: a task blocks its worker for 2 s with tasks queued behind it while the
    /// other workers are busy; shows the stall report and who ran the queued tasks.
    #[arg(long)]
    stall: bool,
}

/// One worker's row of the final table.
#[derive(Debug, serde::Serialize)]
struct Row {
    worker: usize,
    tasks: u64,
    heavy: u64,
    stolen: u64,
    steal_operations: u64,
    busy_percent: f64,
    parks: u64,
}

/// The `--json` report.
#[derive(Debug, serde::Serialize)]
struct Report {
    workers: usize,
    tasks: usize,
    heavy_tasks: usize,
    light_tasks: usize,
    makespan_ms: f64,
    ideal_ms: f64,
    ratio: f64,
    per_worker: Vec<Row>,
    stats: Stats,
}

pub(crate) fn run(args: &DemoArgs, out: &mut impl Write) -> Result<(), Failure> {
    if args.stall {
        return crate::demo_stall::run(args.common.workers, args.common.json, out);
    }
    // The README's command runs on the embedded default runtime; `--workers` configures it
    // before its first use. Without it, a bad `MAGPIE_WORKER_THREADS` is an error here, not
    // a panic in `magpie::default_runtime`.
    if let Some(n) = args.common.workers {
        Runtime::builder().worker_threads(n).build_global()?;
    }
    let rt: &'static Runtime = magpie::try_default_runtime()?;
    let workers = rt.num_workers();

    // Durations first, so drawing them is not timed.
    let scenario = Scenario::generate(
        args.tasks,
        Duration::from_micros(args.heavy_us),
        Duration::from_micros(args.light_us),
        args.common.seed,
    );
    let heavy_count = scenario.heavy.len();
    let ideal = scenario.total_work() / workers as u32;
    // Which worker ran each heavy task: the live view cannot tell heavy from light. One
    // entry per entry of `stats().workers`, not per `num_workers()`: a runtime with
    // compensation workers lists (and runs tasks on) slots beyond the ordinary workers.
    let slots = rt.stats().workers.len();
    let heavy_by_worker: Arc<Vec<AtomicU64>> =
        Arc::new((0..slots).map(|_| AtomicU64::new(0)).collect());

    if !args.common.json {
        writeln!(
            out,
            "magpie demo: {heavy_count} heavy tasks (~{:.1} ms) all queued on worker 0, {} light \
             (~{:.1} ms) spread; {workers} workers\n",
            args.heavy_us as f64 / 1e3,
            scenario.light.len(),
            args.light_us as f64 / 1e3,
        )?;
        out.flush()?;
    }
    let live = (!args.common.json && std::io::stdout().is_terminal())
        .then(|| LiveView::new(workers, args.tasks as u64));

    let before = rt.stats();
    let start = Instant::now();
    scenario.submit(rt, &heavy_by_worker)?;

    // A helper thread waits, so this one can redraw the live view meanwhile.
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        rt.wait_idle();
        let _ = done_tx.send(Instant::now());
    });
    let end = loop {
        match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(end) => break end,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(view) = &live {
                    view.update(&WorkerDelta::between(&rt.stats(), &before));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Failure::Run("the waiting thread died".into()))
            }
        }
    };
    let makespan = end - start;
    let after = rt.stats();
    let deltas = WorkerDelta::between(&after, &before);
    if let Some(view) = live {
        view.finish(&deltas);
    }

    let rows: Vec<Row> = deltas
        .iter()
        .enumerate()
        .map(|(i, d)| Row {
            worker: i,
            tasks: d.tasks,
            heavy: heavy_by_worker[i].load(Relaxed),
            stolen: d.stolen,
            steal_operations: d.steal_operations,
            busy_percent: d.busy_percent(),
            parks: d.parks,
        })
        .collect();
    let report = Report {
        workers,
        tasks: args.tasks,
        heavy_tasks: heavy_count,
        light_tasks: args.tasks - heavy_count,
        makespan_ms: ms(makespan),
        ideal_ms: ms(ideal),
        ratio: makespan.as_secs_f64() / ideal.as_secs_f64().max(1e-9),
        per_worker: rows,
        stats: after,
    };
    if args.common.json {
        write_json(out, &report)
    } else {
        print_report(out, &report)
    }
}

/// The demo's tasks: heavy ones for worker 0's mailbox, light ones for the inject queue.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) heavy: Vec<Duration>,
    pub(crate) light: Vec<Duration>,
}

impl Scenario {
    /// `tasks / 2` heavy tasks and the rest light, each duration within ±20% of its mean.
    pub(crate) fn generate(tasks: usize, heavy: Duration, light: Duration, seed: u64) -> Scenario {
        let mut rng = SplitMix64::new(seed);
        let heavy_count = tasks / 2;
        Scenario {
            heavy: (0..heavy_count).map(|_| rng.jitter(heavy, 0.2)).collect(),
            light: (heavy_count..tasks)
                .map(|_| rng.jitter(light, 0.2))
                .collect(),
        }
    }

    pub(crate) fn total_work(&self) -> Duration {
        self.heavy.iter().chain(&self.light).sum()
    }

    /// Queues every heavy task on worker 0 and submits the light ones; a heavy task counts
    /// itself in `heavy_by_worker[i]` for the worker `i` that ran it. Returns at once: the
    /// caller waits with `Runtime::wait_idle`.
    pub(crate) fn submit(
        &self,
        rt: &Runtime,
        heavy_by_worker: &Arc<Vec<AtomicU64>>,
    ) -> Result<(), Failure> {
        for &d in &self.heavy {
            let counts = Arc::clone(heavy_by_worker);
            let handle = rt
                .submit_to(0, move || {
                    spin(d);
                    if let Some(i) = magpie::current_worker_index() {
                        counts[i].fetch_add(1, Relaxed);
                    }
                })
                .map_err(|e| Failure::Run(e.to_string()))?;
            // Dropping a handle detaches the task; `wait_idle` waits for it.
            drop(handle);
        }
        for &d in &self.light {
            drop(rt.submit(move || spin(d)));
        }
        Ok(())
    }
}

fn print_report(out: &mut impl Write, report: &Report) -> Result<(), Failure> {
    let mut table = Table::new(["worker", "tasks", "heavy", "stolen", "busy %", "parks"]);
    for r in &report.per_worker {
        table.row([
            r.worker.to_string(),
            r.tasks.to_string(),
            r.heavy.to_string(),
            r.stolen.to_string(),
            format!("{:.1}", r.busy_percent),
            r.parks.to_string(),
        ]);
    }
    table.write(out)?;
    let stolen: u64 = report.per_worker.iter().map(|r| r.stolen).sum();
    writeln!(
        out,
        "\n{} tasks, {stolen} stolen. Total {:.1} ms; ideal {:.1} ms (all task work / {} \
         workers): {:.3}x the ideal.",
        report.tasks, report.makespan_ms, report.ideal_ms, report.workers, report.ratio
    )?;
    writeln!(
        out,
        "(busy % is the share of the run a worker was awake: running tasks or looking for one.)"
    )?;
    Ok(())
}

/// The live view: one bar for all tasks, one per worker (up to [`LiveView::MAX_BARS`]).
#[derive(Debug)]
struct LiveView {
    multi: MultiProgress,
    total: ProgressBar,
    workers: Vec<ProgressBar>,
}

impl LiveView {
    /// More bars than this would not fit a terminal; the table shows every worker anyway.
    const MAX_BARS: usize = 16;

    fn new(workers: usize, tasks: u64) -> LiveView {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout_with_hz(20));
        let total_style = ProgressStyle::with_template(
            "{prefix:>9} [{bar:32.green/white}] {pos:>6}/{len} done  {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> ");
        let worker_style =
            ProgressStyle::with_template("{prefix:>9} [{bar:32.cyan/white}] {pos:>6} tasks  {msg}")
                .expect("a valid template")
                .progress_chars("=> ");
        let total = multi.add(
            ProgressBar::new(tasks)
                .with_style(total_style)
                .with_prefix("all"),
        );
        let workers = (0..workers.min(Self::MAX_BARS))
            .map(|i| {
                multi.add(
                    ProgressBar::new(tasks)
                        .with_style(worker_style.clone())
                        .with_prefix(format!("worker {i}")),
                )
            })
            .collect();
        LiveView {
            multi,
            total,
            workers,
        }
    }

    fn update(&self, deltas: &[WorkerDelta]) {
        let done: u64 = deltas.iter().map(|d| d.tasks).sum();
        let stolen: u64 = deltas.iter().map(|d| d.stolen).sum();
        self.total.set_position(done);
        self.total.set_message(format!("{stolen} stolen"));
        for (bar, d) in self.workers.iter().zip(deltas) {
            bar.set_position(d.tasks);
            bar.set_message(format!("{} stolen", d.stolen));
        }
    }

    fn finish(self, deltas: &[WorkerDelta]) {
        self.update(deltas);
        // `abandon`, not `finish`: `finish` would draw every bar full, and a worker's bar
        // shows its own share of the tasks.
        for bar in self.workers.iter().chain([&self.total]) {
            bar.abandon();
        }
        let _ = self.multi.clear();
    }
}
