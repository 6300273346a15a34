//! `magpie tasks`: the live-task dump (`Runtime::tasks`) of a small demo workload.
//!
//! The workload puts tasks in every state at once: named tasks parked on long timers or
//! waiting for good after a few yields (idle), one closure per worker holding its worker
//! (running), and tasks spawned behind them (scheduled). The dump is taken while they are
//! so, then the running closures are released and the runtime is dropped, which cancels the
//! rest. Polls are timed (`Builder::task_insight`), so every task has counters.

use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;
use magpie::task::{self, TaskInfo, TaskState};
use magpie::Runtime;

use crate::report::{write_json, Failure, Table};
use crate::CommonArgs;

#[derive(Debug, Args)]
pub(crate) struct TasksArgs {
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    workers: usize,
    tasks: &'a [TaskInfo],
}

/// How long the demo waits for its tasks to reach their states: they get there in
/// microseconds; this only turns a hang into an error.
const SETTLE: Duration = Duration::from_secs(10);

pub(crate) fn run(args: &TasksArgs, out: &mut impl Write) -> Result<(), Failure> {
    let workers = args.common.workers_or_default()?;
    let rt = Runtime::builder()
        .worker_threads(workers)
        .task_insight(true)
        .build()?;
    let tasks = demo_dump(&rt, workers)?;
    if args.common.json {
        write_json(
            out,
            &Report {
                workers,
                tasks: &tasks,
            },
        )?;
    } else {
        let mut table = Table::new([
            "id", "name", "state", "location", "polls", "busy", "longest", "age",
        ]);
        for info in &tasks {
            table.row(
                [
                    info.id.to_string(),
                    info.name.clone().unwrap_or_else(|| "-".to_owned()),
                    state(info.state),
                    info.location.to_string(),
                ]
                .into_iter()
                .chain(match &info.counters {
                    Some(c) => [
                        c.polls.to_string(),
                        duration(c.busy()),
                        duration(c.longest_poll()),
                        duration(c.age()),
                    ],
                    None => ["-", "-", "-", "-"].map(str::to_owned),
                }),
            );
        }
        writeln!(out, "{} live tasks on {workers} workers", tasks.len())?;
        table.write(out)?;
    }
    Ok(())
}

/// Runs the workload (module docs) and returns the dump taken while every state is shown.
fn demo_dump(rt: &Runtime, workers: usize) -> Result<Vec<TaskInfo>, Failure> {
    // Idle: timers that will not fire during the demo, and a task that yields a few times
    // before it waits on a channel.
    let mut idle = Vec::new();
    for (i, secs) in [60, 600, 3600].into_iter().enumerate() {
        let handle = task::Builder::new()
            .name(&format!("timer-{i}"))
            .spawn_on(magpie::time::sleep(Duration::from_secs(secs)), rt);
        idle.push(handle.id());
        drop(handle);
    }
    let ticker = task::Builder::new().name("ticker").spawn_on(
        async {
            for _ in 0..10 {
                task::yield_now().await;
            }
            std::future::pending::<()>().await
        },
        rt,
    );
    idle.push(ticker.id());
    settle(rt, "the idle tasks to wait", |tasks| {
        idle.iter().all(|id| {
            tasks.iter().any(|t| {
                t.id == *id && t.state == TaskState::Idle && t.counters.is_some_and(|c| c.polls > 0)
            })
        })
    })?;

    // Running: one closure per worker, each holding its worker until released.
    let started = Arc::new(Barrier::new(workers + 1));
    let release = Arc::new(Barrier::new(workers + 1));
    let busy: Vec<_> = (0..workers)
        .map(|w| {
            let (started, release) = (started.clone(), release.clone());
            task::Builder::new().name(&format!("busy-{w}")).submit_on(
                move || {
                    started.wait();
                    release.wait();
                },
                rt,
            )
        })
        .collect();
    started.wait();

    // Scheduled: spawned behind them.
    let queued: Vec<_> = (0..2)
        .map(|i| {
            task::Builder::new()
                .name(&format!("queued-{i}"))
                .spawn_on(async {}, rt)
        })
        .collect();
    let tasks = rt.tasks();

    release.wait();
    for handle in busy {
        handle
            .join()
            .map_err(|err| Failure::Run(format!("a demo task failed: {err}")))?;
    }
    for handle in queued {
        handle
            .join()
            .map_err(|err| Failure::Run(format!("a demo task failed: {err}")))?;
    }
    Ok(tasks)
}

/// Waits until `ready` holds for the dump (the tasks get there in microseconds).
fn settle(
    rt: &Runtime,
    what: &str,
    mut ready: impl FnMut(&[TaskInfo]) -> bool,
) -> Result<(), Failure> {
    let deadline = Instant::now() + SETTLE;
    while !ready(&rt.tasks()) {
        if Instant::now() > deadline {
            return Err(Failure::Run(format!("timed out waiting for {what}")));
        }
        std::thread::yield_now();
    }
    Ok(())
}

fn state(state: TaskState) -> String {
    match state {
        TaskState::Running { worker } => format!("running ({worker})"),
        other => other.to_string(),
    }
}

/// A duration in the unit that reads best.
fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "-".to_owned()
    } else if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 10_000_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_pick_their_unit() {
        assert_eq!(duration(Duration::ZERO), "-");
        assert_eq!(duration(Duration::from_nanos(950)), "950 ns");
        assert_eq!(duration(Duration::from_micros(250)), "250.0 µs");
        assert_eq!(duration(Duration::from_millis(42)), "42.0 ms");
        assert_eq!(duration(Duration::from_secs(90)), "90.0 s");
    }
}
