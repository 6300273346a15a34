//! The task-pool rows of `scale`: `magpie scale`'s efficiency and load balance, against peers.
//!
//! Each row is one of `magpie scale`'s duration patterns (variable, uniform, mixed), drawn
//! by magpie-cli's own generator from its default seed, so a row holds the very durations
//! `magpie scale --pattern P --tasks N` runs. Every task spins for its duration. The bench
//! thread submits them all from outside the pool, the way `magpie scale` does, to:
//!
//! - magpie: [`magpie::Runtime::submit`] (the task pool's *submit*);
//! - rayon: `ThreadPool::spawn`;
//! - tokio: `Runtime::spawn` of a future that spins (what a tokio user does with short CPU
//!   work that does not block);
//! - async-executor: `Executor::spawn` of the same future, run by N threads.
//!
//! With `scale --sleeping-tasks FACTOR` each task instead *sleeps* `FACTOR` times its
//! duration ([`Hold::Sleep`]), its thread's timer slack at 1 ns: a task then holds a worker
//! and not a CPU, so a machine with 2 CPUs runs 16 or 64 workers' tasks as a machine with a
//! CPU per worker would, and the rows show each pool's scheduling (its wakes, its steals, how
//! soon and how evenly its workers work) at worker counts the machine lacks. A sleep wakes
//! late by a few microseconds, so in this mode a task's work is the time it held its
//! thread, measured, and not its duration.
//!
//! The clock runs from the first submission until the last task has reported. The pools are
//! the `async` benchmark's ([`AsyncPools`]); `magpie scale` builds a fresh runtime per row,
//! these are built once per worker count, as every other pool of the bench.
//!
//! Two figures per implementation come with the time. **Efficiency** = task work / (workers
//! × makespan), the median over the samples: 100% is every worker spinning through tasks
//! all along, with no overhead and no idle worker (`magpie compare`'s ideal, for a single batch; it needs no
//! one-worker run, unlike `magpie scale`'s `T1 / (n · Tn)`). **Load balance** = the most
//! task work one thread did over the least, the median over the samples (1.00 is perfect;
//! infinite when a thread ran no task). Task work is the tasks' durations summed per thread,
//! so time a thread lost to other programs does not blur it. **Ramp-up** = how long after
//! the first submission the last of the pool's threads began its first task, the median over
//! the samples: how fast the pool's wake policy brings a parked pool to work on a stream of
//! submissions from one thread (infinite when a thread ran no task).

use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::async_rows::{wait, AsyncPools};
use crate::harness::median_f64;

use super::Contender;

/// magpie-cli's duration patterns and its CPU spin, compiled into this crate as well, so
/// that the rows run exactly `magpie scale`'s tasks (magpie-cli is a binary crate: there is
/// no library to depend on). This crate uses the generator and `spin`, not the burst
/// pattern's pauses or the ideal makespan.
#[allow(dead_code)]
#[path = "../../../magpie-cli/src/workload.rs"]
mod workload;

pub(crate) use workload::Pattern;

/// The patterns measured, in table order (`burst` is left out: its pauses measure sleeping).
pub(crate) const PATTERNS: [Pattern; 3] = [Pattern::Variable, Pattern::Uniform, Pattern::Mixed];

/// magpie-cli's default `--seed`.
const SEED: u64 = 0x5EED;

/// The durations of `tasks` tasks of `pattern`, in arrival order: a task-pool row's.
pub(crate) fn durations(pattern: Pattern, tasks: usize) -> Vec<Duration> {
    TaskRow::new(pattern, tasks, Hold::Spin).durations
}

/// One of the task pools under comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskImpl {
    Magpie,
    Rayon,
    Tokio,
    AsyncExecutor,
}

impl TaskImpl {
    /// All of them, magpie first.
    pub(crate) const ALL: [TaskImpl; 4] = [
        TaskImpl::Magpie,
        TaskImpl::Rayon,
        TaskImpl::Tokio,
        TaskImpl::AsyncExecutor,
    ];
}

impl Contender for TaskImpl {
    fn name(self) -> &'static str {
        match self {
            TaskImpl::Magpie => "magpie",
            TaskImpl::Rayon => "rayon",
            TaskImpl::Tokio => "tokio",
            TaskImpl::AsyncExecutor => "async-executor",
        }
    }

    fn is_magpie(self) -> bool {
        self == TaskImpl::Magpie
    }
}

/// How a task holds its worker for its duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// It spins on the clock: CPU work, the rows' default.
    Spin,
    /// It sleeps `factor` times its duration (`scale --sleeping-tasks`): it holds its worker
    /// but not a CPU.
    Sleep { factor: u32 },
}

/// One pattern's tasks.
#[derive(Debug)]
pub(crate) struct TaskRow {
    pattern: Pattern,
    hold: Hold,
    durations: Vec<Duration>,
    total_work: Duration,
}

impl TaskRow {
    /// `tasks` durations of `pattern`, each held as `hold` says (a sleep `factor` times
    /// longer).
    pub(crate) fn new(pattern: Pattern, tasks: usize, hold: Hold) -> TaskRow {
        let workload = workload::Workload::generate(pattern, tasks, SEED);
        let factor = match hold {
            Hold::Spin => 1,
            Hold::Sleep { factor } => factor,
        };
        let durations: Vec<Duration> = workload.durations().map(|d| d * factor).collect();
        TaskRow {
            pattern,
            hold,
            total_work: durations.iter().sum(),
            durations,
        }
    }

    /// The name in tables and JSON (the group says it is the task pool).
    pub(crate) fn name(&self) -> String {
        self.pattern.to_string()
    }

    /// One line on the tasks.
    pub(crate) fn describe(&self) -> String {
        let shape = match self.pattern {
            Pattern::Uniform => "each 50 µs",
            Pattern::Mixed => "every 10th about 200 µs, the others about 10 µs",
            Pattern::Variable => "log-uniform from 1 µs to 1 ms",
            Pattern::Burst => "mixed, in 10 bursts",
        };
        let held = match self.hold {
            Hold::Spin => String::new(),
            Hold::Sleep { factor } => format!(", each sleeping {factor} × its duration"),
        };
        format!(
            "{} tasks ({shape}{held}), {:.1} ms of work, submitted from outside the pool",
            self.durations.len(),
            self.total_work.as_secs_f64() * 1e3
        )
    }

    /// Runs every task once on `imp` and returns the makespan, and for each thread that ran
    /// tasks its task work and when it began its first task.
    pub(crate) fn sample(&self, pools: &AsyncPools, imp: TaskImpl) -> Sample {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let before = work_by_thread();
        let start = Instant::now();
        let countdown = Arc::new(Countdown {
            remaining: AtomicUsize::new(self.durations.len()),
            done: done_tx,
            // Relaxed: only distinct values matter.
            sample: NEXT_SAMPLE.fetch_add(1, Relaxed),
            start,
            hold: self.hold,
        });
        for &d in &self.durations {
            let countdown = Arc::clone(&countdown);
            let task = move || countdown.run(d);
            match imp {
                TaskImpl::Magpie => drop(pools.magpie().submit(task)),
                TaskImpl::Rayon => pools.rayon().spawn(task),
                TaskImpl::Tokio => drop(pools.tokio().spawn(async move { task() })),
                TaskImpl::AsyncExecutor => pools.executor().spawn(async move { task() }).detach(),
            }
        }
        wait(&done_rx, "task pool");
        let makespan = start.elapsed();
        let threads = THREADS.lock().expect("poisoned");
        let mut sample = Sample {
            makespan,
            work: Vec::new(),
            first_task: Vec::new(),
        };
        for (i, thread) in threads.iter().enumerate() {
            let work = thread.work_ns.load(Relaxed) - before.get(i).copied().unwrap_or(0);
            if work > 0 {
                sample.work.push(work);
            }
            if thread.sample.load(Relaxed) == countdown.sample {
                sample
                    .first_task
                    .push(Duration::from_nanos(thread.first_task_ns.load(Relaxed)));
            }
        }
        sample
    }
}

/// One sample of a task-pool row.
#[derive(Debug)]
pub(crate) struct Sample {
    /// From the first submission until the last task reported.
    pub(crate) makespan: Duration,
    /// The task work of each thread that ran tasks, in nanoseconds.
    pub(crate) work: Vec<u64>,
    /// For each thread that ran tasks, when it began its first, after the first submission.
    pub(crate) first_task: Vec<Duration>,
}

impl Sample {
    /// The task work of the sample: the row's durations when they spin, the time the tasks
    /// held their threads when they sleep.
    pub(crate) fn total_work(&self) -> Duration {
        Duration::from_nanos(self.work.iter().sum())
    }

    /// When the last of `workers` threads began its first task; `None` if fewer than
    /// `workers` threads ran one.
    pub(crate) fn ramp_up(&self, workers: usize) -> Option<Duration> {
        if self.first_task.len() < workers {
            return None;
        }
        self.first_task.iter().copied().max()
    }
}

/// Numbers the samples, so that a thread can tell its first task of a sample.
static NEXT_SAMPLE: AtomicU64 = AtomicU64::new(1);

/// The tasks of one sample count down; the last signals the bench thread.
#[derive(Debug)]
struct Countdown {
    remaining: AtomicUsize,
    done: SyncSender<()>,
    /// This sample's number and its first submission.
    sample: u64,
    start: Instant,
    /// How each task holds its worker.
    hold: Hold,
}

impl Countdown {
    /// One task: notes this thread's first task of the sample, spins for `d` (or sleeps it),
    /// credits it (or the time the sleep took) to this thread, counts down.
    fn run(&self, d: Duration) {
        THREAD.with(|thread| {
            // Relaxed: only this thread writes its cell; the bench thread reads it after
            // the count reached zero (see below).
            if thread.sample.load(Relaxed) != self.sample {
                let since = self.start.elapsed().as_nanos() as u64;
                thread.first_task_ns.store(since, Relaxed);
                thread.sample.store(self.sample, Relaxed);
            }
            let held = match self.hold {
                Hold::Spin => {
                    workload::spin(d);
                    d
                }
                Hold::Sleep { .. } => crate::harness::sleep_held(d),
            };
            thread.work_ns.fetch_add(held.as_nanos() as u64, Relaxed);
        });
        // AcqRel: the decrements form one release sequence, so the task that takes the
        // count to zero has acquired every other task's work credit and first-task note,
        // and its send hands them all to the bench thread.
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            self.done
                .send(())
                .expect("the bench thread stopped waiting");
        }
    }
}

/// What one thread notes about the tasks it ran.
#[derive(Debug, Default)]
struct ThreadNotes {
    /// Task work done on this thread, in nanoseconds.
    work_ns: AtomicU64,
    /// The last sample this thread ran a task of, and when, in nanoseconds after that
    /// sample's first submission, it began its first task of it.
    sample: AtomicU64,
    first_task_ns: AtomicU64,
}

std::thread_local! {
    /// This thread's notes; registered in [`THREADS`] on first use.
    static THREAD: Arc<ThreadNotes> = {
        let notes = Arc::new(ThreadNotes::default());
        THREADS.lock().expect("poisoned").push(Arc::clone(&notes));
        notes
    };
}

/// Every thread's notes, in the order the threads first ran a task. Only one pool runs at
/// a time, so the threads whose count grew during a sample are that pool's.
static THREADS: Mutex<Vec<Arc<ThreadNotes>>> = Mutex::new(Vec::new());

/// Every thread's task work so far.
fn work_by_thread() -> Vec<u64> {
    let threads = THREADS.lock().expect("poisoned");
    threads.iter().map(|t| t.work_ns.load(Relaxed)).collect()
}

/// The most task work on one of `workers` threads over the least; infinite when fewer than
/// `workers` threads ran a task.
pub(crate) fn load_balance(work: &[u64], workers: usize) -> f64 {
    let most = work.iter().copied().max().unwrap_or(0);
    let least = work.iter().copied().min().unwrap_or(0);
    if work.len() < workers || least == 0 {
        f64::INFINITY
    } else {
        most as f64 / least as f64
    }
}

/// Efficiency, load balance and ramp-up of one implementation at one worker count. In
/// `scale`'s JSON an infinite figure (a thread ran no task) is written as `null`.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub(crate) struct PoolShape {
    /// The median over the samples of task work / (workers × makespan): with spinning
    /// tasks, whose work is the same in every sample, the work over workers × the median
    /// makespan.
    pub(crate) efficiency: f64,
    /// The median over the samples of [`load_balance`].
    pub(crate) load_balance: f64,
    /// The median over the samples of [`Sample::ramp_up`], in milliseconds (infinite for a
    /// sample in which a thread ran no task).
    pub(crate) ramp_up_ms: f64,
}

impl PoolShape {
    /// The shape of `works`, `makespans`, `balances` and `ramp_ups` (one per sample, in ms)
    /// on `workers` workers.
    pub(crate) fn of(
        works: &[Duration],
        workers: usize,
        makespans: &[Duration],
        balances: &[f64],
        ramp_ups_ms: &[f64],
    ) -> PoolShape {
        let efficiencies: Vec<f64> = works
            .iter()
            .zip(makespans)
            .map(|(work, makespan)| work.as_secs_f64() / (workers as f64 * makespan.as_secs_f64()))
            .collect();
        PoolShape {
            efficiency: median_f64(&efficiencies),
            load_balance: median_f64(balances),
            ramp_up_ms: median_f64(ramp_ups_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by each test that takes samples: a sample credits the work of every thread that
    /// ran a task meanwhile to its pool, so two at once would mix their tests' threads.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    #[test]
    fn balance_of_a_pool() {
        assert_eq!(load_balance(&[10, 10], 2), 1.0);
        assert_eq!(load_balance(&[30, 10], 2), 3.0);
        assert_eq!(load_balance(&[30], 2), f64::INFINITY);
        assert_eq!(load_balance(&[], 1), f64::INFINITY);
    }

    #[test]
    fn every_pool_runs_every_task() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let pools = AsyncPools::new(2);
        let row = TaskRow::new(Pattern::Uniform, 200, Hold::Spin);
        assert_eq!(row.total_work, Duration::from_micros(50 * 200));
        for imp in TaskImpl::ALL {
            let sample = row.sample(&pools, imp);
            let work = &sample.work;
            assert_eq!(work.iter().sum::<u64>(), 50_000 * 200, "{}", imp.name());
            assert_eq!(sample.total_work(), row.total_work, "{}", imp.name());
            assert!(work.len() <= 2 && sample.makespan >= Duration::from_micros(50 * 100));
            // Every thread that worked noted its first task of this sample, within it.
            assert_eq!(sample.first_task.len(), work.len(), "{}", imp.name());
            assert!(sample.first_task.iter().all(|&t| t < sample.makespan));
            assert_eq!(
                sample.ramp_up(work.len()),
                sample.first_task.iter().copied().max()
            );
            assert_eq!(sample.ramp_up(work.len() + 1), None);
        }
    }

    #[test]
    fn sleeping_tasks_credit_the_time_they_held_their_thread() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let pools = AsyncPools::new(2);
        let row = TaskRow::new(Pattern::Uniform, 40, Hold::Sleep { factor: 3 });
        // Each task sleeps 3 × 50 µs.
        assert!(row
            .durations
            .iter()
            .all(|&d| d == Duration::from_micros(150)));
        assert_eq!(row.total_work, Duration::from_micros(150 * 40));
        assert!(row.describe().contains("sleeping 3 ×"));
        for imp in TaskImpl::ALL {
            let sample = row.sample(&pools, imp);
            // A sleep never ends early: every thread is credited at least its tasks'
            // durations, and the sample at least the row's.
            assert!(sample.total_work() >= row.total_work, "{}", imp.name());
            assert!(sample.work.len() <= 2, "{}", imp.name());
            assert!(sample.work.iter().all(|&w| w >= 150_000), "{}", imp.name());
            assert!(sample.makespan >= Duration::from_micros(150 * 20));
        }
    }
}
