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
//! The clock runs from the first submission until the last task has reported. The pools are
//! the `async` benchmark's ([`AsyncPools`]); `magpie scale` builds a fresh runtime per row,
//! these are built once per worker count, as every other pool of the bench.
//!
//! Two figures per implementation come with the time. **Efficiency** = total task work /
//! (workers × median makespan): 100% is every worker spinning through tasks all along, with
//! no overhead and no idle worker (`magpie compare`'s ideal, for a single batch; it needs no
//! one-worker run, unlike `magpie scale`'s `T1 / (n · Tn)`). **Load balance** = the most
//! task work one thread did over the least, the median over the samples (1.00 is perfect;
//! infinite when a thread ran no task). Task work is the tasks' durations summed per thread,
//! so time a thread lost to other programs does not blur it.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
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

/// One pattern's tasks.
#[derive(Debug)]
pub(crate) struct TaskRow {
    pattern: Pattern,
    durations: Vec<Duration>,
    total_work: Duration,
}

impl TaskRow {
    /// `tasks` durations of `pattern`.
    pub(crate) fn new(pattern: Pattern, tasks: usize) -> TaskRow {
        let workload = workload::Workload::generate(pattern, tasks, SEED);
        TaskRow {
            pattern,
            durations: workload.durations().collect(),
            total_work: workload.total_work(),
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
        format!(
            "{} tasks ({shape}), {:.1} ms of work, submitted from outside the pool",
            self.durations.len(),
            self.total_work.as_secs_f64() * 1e3
        )
    }

    /// The total task work.
    pub(crate) fn total_work(&self) -> Duration {
        self.total_work
    }

    /// Runs every task once on `imp` and returns the makespan and the task work of each
    /// thread that ran tasks, in nanoseconds.
    pub(crate) fn sample(&self, pools: &AsyncPools, imp: TaskImpl) -> (Duration, Vec<u64>) {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let countdown = Arc::new(Countdown {
            remaining: AtomicUsize::new(self.durations.len()),
            done: done_tx,
        });
        let before = work_by_thread();
        let start = Instant::now();
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
        let elapsed = start.elapsed();
        let after = work_by_thread();
        let work = after
            .iter()
            .enumerate()
            .map(|(i, a)| a - before.get(i).copied().unwrap_or(0))
            .filter(|&ns| ns > 0)
            .collect();
        (elapsed, work)
    }
}

/// The tasks of one sample count down; the last signals the bench thread.
#[derive(Debug)]
struct Countdown {
    remaining: AtomicUsize,
    done: SyncSender<()>,
}

impl Countdown {
    /// One task: spins for `d`, credits it to this thread, counts down.
    fn run(&self, d: Duration) {
        workload::spin(d);
        THREAD_WORK_NS.with(|w| w.fetch_add(d.as_nanos() as u64, Relaxed));
        // AcqRel: the decrements form one release sequence, so the task that takes the
        // count to zero has acquired every other task's work credit, and its send hands
        // them all to the bench thread's `work_by_thread`.
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            self.done
                .send(())
                .expect("the bench thread stopped waiting");
        }
    }
}

std::thread_local! {
    /// Task work done on this thread, in nanoseconds; registered in [`THREADS`] on first use.
    static THREAD_WORK_NS: Arc<std::sync::atomic::AtomicU64> = {
        let cell = Arc::new(std::sync::atomic::AtomicU64::new(0));
        THREADS.lock().expect("poisoned").push(Arc::clone(&cell));
        cell
    };
}

/// Every thread's work counter, in the order the threads first ran a task. Only one pool
/// runs at a time, so the threads whose count grew during a sample are that pool's.
static THREADS: Mutex<Vec<Arc<std::sync::atomic::AtomicU64>>> = Mutex::new(Vec::new());

/// Every thread's task work so far.
fn work_by_thread() -> Vec<u64> {
    let threads = THREADS.lock().expect("poisoned");
    threads.iter().map(|w| w.load(Relaxed)).collect()
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

/// Efficiency and load balance of one implementation at one worker count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolShape {
    /// Total task work / (workers × median makespan).
    pub(crate) efficiency: f64,
    /// The median over the samples of [`load_balance`].
    pub(crate) load_balance: f64,
}

impl PoolShape {
    /// The shape of `makespans` and `balances` (one per sample) on `workers` workers.
    pub(crate) fn of(
        total_work: Duration,
        workers: usize,
        makespans: &[Duration],
        balances: &[f64],
    ) -> PoolShape {
        let makespan = crate::harness::median(makespans);
        PoolShape {
            efficiency: total_work.as_secs_f64() / (workers as f64 * makespan.as_secs_f64()),
            load_balance: median_f64(balances),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_of_a_pool() {
        assert_eq!(load_balance(&[10, 10], 2), 1.0);
        assert_eq!(load_balance(&[30, 10], 2), 3.0);
        assert_eq!(load_balance(&[30], 2), f64::INFINITY);
        assert_eq!(load_balance(&[], 1), f64::INFINITY);
    }

    #[test]
    fn every_pool_runs_every_task() {
        let pools = AsyncPools::new(2);
        let row = TaskRow::new(Pattern::Uniform, 200);
        assert_eq!(row.total_work(), Duration::from_micros(50 * 200));
        for imp in TaskImpl::ALL {
            let (elapsed, work) = row.sample(&pools, imp);
            assert_eq!(work.iter().sum::<u64>(), 50_000 * 200, "{}", imp.name());
            assert!(work.len() <= 2 && elapsed >= Duration::from_micros(50 * 100));
        }
    }
}
