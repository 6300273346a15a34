//! `magpie demo --stall`: a task that blocks its worker for 2 s with tasks queued behind it,
//! while every other worker is busy with tasks of its own.
//!
//! The blocker (a task named "blocker") spawns the queued tasks, which land in its worker's
//! LIFO slot and ring, then sleeps. The other workers each run a task that yields until the
//! blocker is done, so none of them ever runs out of work and searches: without the stall
//! monitor nobody would look at the blocked worker's queue for the whole 2 s. The monitor
//! moves the queued tasks to the inject queue, where the busy workers pull them at their
//! maintenance, at its last sample before the blocker reaches the threshold (100 ms; it
//! samples every quarter of it), and at the first sample after it prints the stall report
//! naming the blocker's spawn location. The table shows who ran what: tasks, steals, inject pulls,
//! tasks handed off, stalls.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use magpie::{Runtime, StallInfo, Stats};

use crate::report::{ms, write_json, Failure, Table, WorkerDelta};
use crate::workload::spin;

/// How long the blocker blocks its worker.
const BLOCK: Duration = Duration::from_secs(2);
/// The stall threshold of the demo's runtime (the default).
const THRESHOLD: Duration = Duration::from_millis(100);
/// Tasks queued behind the blocker, and the work of each.
const QUEUED: usize = 8;
const QUEUED_WORK: Duration = Duration::from_millis(5);

/// One worker's row.
#[derive(Debug, serde::Serialize)]
struct Row {
    worker: usize,
    tasks: u64,
    queued_tasks_run: usize,
    steals: u64,
    inject_pulls: u64,
    stall_handoffs: u64,
    stalls: u64,
}

/// The `--json` report.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Report {
    workers: usize,
    threshold_ms: f64,
    block_ms: f64,
    pub(crate) stall_reports: Vec<StallInfo>,
    pub(crate) blocked_worker: Option<usize>,
    /// When each queued task finished, in ms after the blocker started.
    queued_finished_ms: Vec<f64>,
    blocker_ms: f64,
    per_worker: Vec<Row>,
    stats: Stats,
}

pub(crate) fn run(workers: Option<usize>, json: bool, out: &mut impl Write) -> Result<(), Failure> {
    let workers = demo_workers(workers)?;
    let stage = Stage::build(workers, false)?;
    let report = stage.play(Spin::Yield, (!json).then_some(&mut *out as &mut dyn Write))?;
    if json {
        return write_json(out, &report);
    }
    print_report(out, &report)
}

/// The worker count of the demo: as asked or the default, at least two (one to block, one
/// to take its queue).
pub(crate) fn demo_workers(workers: Option<usize>) -> Result<usize, Failure> {
    Ok(workers.map_or_else(crate::default_workers, Ok)?.max(2))
}

/// How the busy workers' tasks keep them busy.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Spin {
    /// Yield at once, every poll (the demo).
    Yield,
    /// Spin this long in each poll, then yield: fewer polls, so that a trace of the whole
    /// stall fits in the trace rings (`magpie trace --stall`).
    Slices(Duration),
}

/// The demo's runtime, with its stall reports coming down a channel.
pub(crate) struct Stage {
    pub(crate) rt: Runtime,
    workers: usize,
    report_rx: mpsc::Receiver<StallInfo>,
}

impl Stage {
    /// A runtime of `workers` workers with the demo's threshold, tracing if `trace`.
    pub(crate) fn build(workers: usize, trace: bool) -> Result<Stage, Failure> {
        let (report_tx, report_rx) = mpsc::channel::<StallInfo>();
        let report_tx = Mutex::new(report_tx);
        let rt = Runtime::builder()
            .worker_threads(workers)
            .stall_threshold(THRESHOLD)
            .trace(trace)
            .on_stall(move |info| {
                let _ = report_tx.lock().unwrap().send(info.clone());
            })
            .build()?;
        Ok(Stage {
            rt,
            workers,
            report_rx,
        })
    }

    /// Plays the scenario, narrating to `out` if given, and returns what happened.
    pub(crate) fn play(
        &self,
        spin_mode: Spin,
        mut out: Option<&mut dyn Write>,
    ) -> Result<Report, Failure> {
        let (rt, workers, report_rx) = (&self.rt, self.workers, &self.report_rx);
        let reports = Arc::new(Mutex::new(Vec::new()));
        if let Some(out) = out.as_mut() {
            let others = match workers - 1 {
                1 => "the other worker is busy with a task that yields".to_owned(),
                n => format!("the other {n} workers are busy with tasks that yield"),
            };
            writeln!(
                out,
                "magpie demo --stall: a task blocks its worker for {} s with {QUEUED} tasks queued \
                 behind it; {others} until it is done; stall threshold {} ms\n",
                BLOCK.as_secs(),
                THRESHOLD.as_millis(),
            )?;
            out.flush()?;
        }
        let done = Arc::new(AtomicBool::new(false));
        // The busy workers: one yielding task on each worker but 0, spawned inside a poll on
        // that worker so that it starts there.
        let mut spinners = Vec::new();
        for worker in 1..workers {
            let done = done.clone();
            let spinner = rt
                .submit_to(worker, move || {
                    magpie::spawn(async move {
                        while !done.load(SeqCst) {
                            if let Spin::Slices(slice) = spin_mode {
                                spin(slice);
                            }
                            magpie::task::yield_now().await;
                        }
                    })
                })
                .map_err(|err| Failure::Run(err.to_string()))?
                .join()
                .map_err(|err| Failure::Run(err.to_string()))?;
            spinners.push(spinner);
        }
        // Counted from here: the spinners' start (an idle worker may steal one back and forth)
        // is not part of the story.
        let before = rt.stats();
        // The queued tasks record where and when they ran.
        let finished: Arc<Mutex<Vec<(usize, Duration)>>> = Arc::default();
        let start = Instant::now();
        let queued_finished = finished.clone();
        let blocker = rt
            .submit_to(0, move || {
                magpie::task::Builder::new()
                    .name("blocker")
                    .spawn(async move {
                        for _ in 0..QUEUED {
                            let finished = queued_finished.clone();
                            // Spawned inside the blocker's poll: its worker's LIFO slot and ring.
                            drop(magpie::spawn(async move {
                                spin(QUEUED_WORK);
                                let worker = magpie::current_worker_index().unwrap_or(usize::MAX);
                                finished.lock().unwrap().push((worker, start.elapsed()));
                            }));
                        }
                        // The stall: the worker is blocked, its queue is not.
                        std::thread::sleep(BLOCK);
                        start.elapsed()
                    })
            })
            .map_err(|err| Failure::Run(err.to_string()))?
            .join()
            .map_err(|err| Failure::Run(err.to_string()))?;
        // The report comes while the blocker blocks.
        if let Ok(info) = report_rx.recv_timeout(BLOCK + Duration::from_secs(30)) {
            if let Some(out) = out.as_mut() {
                writeln!(out, "stall report: {info}")?;
                out.flush()?;
            }
            reports.lock().unwrap().push(info);
        }
        let blocker_time = rt
            .block_on(blocker)
            .map_err(|err| Failure::Run(err.to_string()))?;
        done.store(true, SeqCst);
        for spinner in spinners {
            rt.block_on(spinner)
                .map_err(|err| Failure::Run(err.to_string()))?;
        }
        rt.wait_idle();
        let after = rt.stats();
        let stall_reports: Vec<StallInfo> = reports.lock().unwrap().drain(..).collect();
        let blocked_worker = stall_reports.first().map(StallInfo::worker);
        let finished = finished.lock().unwrap().clone();
        let per_worker: Vec<Row> = WorkerDelta::pairs(&after, &before)
            .map(|(i, a, b)| Row {
                worker: i,
                tasks: a.tasks_executed.saturating_sub(b.tasks_executed),
                queued_tasks_run: finished.iter().filter(|(w, _)| *w == i).count(),
                steals: a.steals().saturating_sub(b.steals()),
                inject_pulls: a.inject_pulls.saturating_sub(b.inject_pulls),
                stall_handoffs: a.stall_handoffs.saturating_sub(b.stall_handoffs),
                stalls: a.stalls.saturating_sub(b.stalls),
            })
            .collect();
        let report = Report {
            workers,
            threshold_ms: ms(THRESHOLD),
            block_ms: ms(BLOCK),
            stall_reports,
            blocked_worker,
            queued_finished_ms: finished.iter().map(|(_, t)| ms(*t)).collect(),
            blocker_ms: ms(blocker_time),
            per_worker,
            stats: after,
        };
        Ok(report)
    }
}

fn print_report(out: &mut impl Write, report: &Report) -> Result<(), Failure> {
    let mut table = Table::new([
        "worker",
        "tasks run",
        "queued tasks run",
        "steals",
        "inject pulls",
        "handed off",
        "stalls",
    ]);
    for row in &report.per_worker {
        table.row([
            row.worker.to_string(),
            row.tasks.to_string(),
            row.queued_tasks_run.to_string(),
            row.steals.to_string(),
            row.inject_pulls.to_string(),
            row.stall_handoffs.to_string(),
            row.stalls.to_string(),
        ]);
    }
    writeln!(out)?;
    table.write(out)?;
    let last = report
        .queued_finished_ms
        .iter()
        .copied()
        .fold(0.0_f64, f64::max);
    writeln!(
        out,
        "\n{} of {QUEUED} queued tasks finished, the last {last:.1} ms after the blocker \
         started; the blocker returned after {:.1} ms.",
        report.queued_finished_ms.len(),
        report.blocker_ms,
    )?;
    match report.blocked_worker {
        Some(worker) => writeln!(
            out,
            "\"handed off\": tasks the stall monitor moved from worker {worker}'s queues to the \
             inject queue; the busy workers took them at their maintenance (\"inject pulls\")."
        )?,
        None => writeln!(out, "No stall was reported.")?,
    }
    Ok(())
}
