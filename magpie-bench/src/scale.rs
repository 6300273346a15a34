//! `scale`: the whole scaling table in one command: every row of the other benchmarks, at
//! each worker count, against its peers, with the counts that explain magpie's times.
//!
//! Row groups (`--only`):
//!
//! - **fork-join**: fib, tree_sum on the level-order tree and on the post-order tree
//!   (`tree_postorder`), quicksort (`fork_join.rs`), then `par_sort_unstable` of random u32
//!   and `par_iter().sum()` of u64 (`iter_rows.rs`); against sequential code, rayon and chili
//!   (chili only in the `fork_join.rs` rows).
//! - **iter**: the rows of `magpie-bench iter` not already in fork-join; against sequential
//!   `std` and rayon.
//! - **async**: the six scheduler rows of `magpie-bench async` (`async_rows.rs`; not
//!   `mixed`); against tokio, async-executor and the `futures` thread pool.
//! - **task pool**: `magpie scale`'s patterns (variable, uniform, mixed), submitted from
//!   outside; against rayon, tokio and async-executor, with efficiency and load balance
//!   (`scale/task_pool.rs`). With `--sleeping-tasks` the tasks sleep instead of spinning, so
//!   that a small machine shows the pools' scheduling at worker counts it lacks, and the
//!   iter group is one row whose items sleep (`iter_rows::HeldRow`).
//!
//! Method: the other benchmarks' (`harness`), at every worker count. The pools of a group
//! are built once per worker count, before the group's first row, and serve all its rows
//! (fork-join and iter share [`Pools`], async and task pool share [`AsyncPools`]); each
//! row's input is made once, before its first worker count, and dropped after its last, so
//! one input at a time is in memory. Around every magpie sample, the runtime that timed it
//! is snapshotted (`scale/counts.rs`): just before, and after the sample once the pool is
//! idle again with every worker parked. Each magpie sample thus starts from a parked pool;
//! in the other subcommands it may find workers still searching after the previous sample.
//!
//! Every table is printed as soon as its row is done; `scale/report.rs` renders them.

mod counts;
pub(crate) mod processes;
mod report;
mod task_pool;

use std::time::Duration;

pub(crate) use report::{legend, render_row, rows_json};
pub(crate) use task_pool::{
    durations as task_pool_durations, load_balance, PATTERNS as TASK_POOL_PATTERNS,
};

use crate::async_rows::{AsyncImpl, AsyncPools, Row};
use crate::fork_join::{self, ForkJoinRow};
use crate::harness::{measure_rounds, Workload, SCALE_COOL_DOWN};
use crate::iter_rows::{self, IterCase, IterRow, Scan, Shape};
use crate::pools::{Impl, Pools};

use counts::{settle, CountSummary, Counts};
pub(crate) use task_pool::Hold;
use task_pool::{PoolShape, TaskImpl, TaskRow, PATTERNS};

/// A group of rows, picked with `scale --only`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    ForkJoin,
    Iter,
    Async,
    TaskPool,
}

impl Group {
    /// The name in tables and JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Group::ForkJoin => "fork-join",
            Group::Iter => "iter",
            Group::Async => "async",
            Group::TaskPool => "task pool",
        }
    }
}

/// What to measure and how.
#[derive(Debug)]
pub(crate) struct Config {
    /// Worker counts, in order.
    pub(crate) counts: Vec<usize>,
    /// The groups to run.
    pub(crate) groups: Vec<Group>,
    /// Untimed rounds per row and worker count.
    pub(crate) warmup: usize,
    /// Timed rounds per row and worker count.
    pub(crate) samples: usize,
    /// Sizes of the fork-join rows.
    pub(crate) fork_join: fork_join::Sizes,
    /// Input lengths of the iter rows.
    pub(crate) iter: iter_rows::Lengths,
    /// Tasks per task-pool row.
    pub(crate) tasks: usize,
    /// How the task-pool rows' tasks hold their workers; with [`Hold::Sleep`]
    /// (`--sleeping-tasks`) the iter group is one row of sleeping items.
    pub(crate) hold: Hold,
}

/// magpie or one of its peers, whatever kind of benchmark it takes part in.
pub(crate) trait Contender: Copy {
    /// The name in tables and JSON.
    fn name(self) -> &'static str;
    /// Whether this is magpie, whose samples are counted.
    fn is_magpie(self) -> bool;
}

impl Contender for Impl {
    fn name(self) -> &'static str {
        Impl::name(self)
    }

    fn is_magpie(self) -> bool {
        self == Impl::Magpie
    }
}

impl Contender for AsyncImpl {
    fn name(self) -> &'static str {
        AsyncImpl::name(self)
    }

    fn is_magpie(self) -> bool {
        self == AsyncImpl::Magpie
    }
}

/// One row at one worker count.
#[derive(Debug)]
pub(crate) struct Point {
    /// The worker count.
    pub(crate) workers: usize,
    /// Per implementation, magpie first, the timed samples in the order they were taken.
    pub(crate) results: Vec<(&'static str, Vec<Duration>)>,
    /// magpie's counts.
    pub(crate) counts: CountSummary,
    /// Task-pool rows only: per implementation, efficiency and load balance.
    pub(crate) shapes: Vec<(&'static str, PoolShape)>,
}

/// One row at every worker count.
#[derive(Debug)]
pub(crate) struct RowResult {
    pub(crate) group: Group,
    pub(crate) name: String,
    /// One line on what the row does, if the name does not say it.
    pub(crate) about: Option<String>,
    pub(crate) points: Vec<Point>,
}

/// Measures every selected row, printing each table as soon as its row is done.
pub(crate) fn run(cfg: &Config) -> Vec<RowResult> {
    let mut rows = Vec::new();
    let mut emit = |row: RowResult| {
        println!("{}", render_row(&row));
        rows.push(row);
    };
    let wants = |g: Group| cfg.groups.contains(&g);
    if wants(Group::ForkJoin) || wants(Group::Iter) {
        let pools: Vec<Pools> = cfg.counts.iter().map(|&n| Pools::new(n)).collect();
        for (group, case) in pool_cases(cfg) {
            let mut workload = case.make(cfg);
            let points = pools
                .iter()
                .map(|p| {
                    let name = workload.name();
                    measure_point(group, &name, p.workers(), case.impls(), &p.magpie, cfg, {
                        let workload = &mut workload;
                        move |imp, _| workload.sample(p, imp)
                    })
                })
                .collect();
            emit(RowResult {
                group,
                name: workload.name(),
                about: None,
                points,
            });
        }
    }
    if wants(Group::Async) || wants(Group::TaskPool) {
        let pools: Vec<AsyncPools> = cfg.counts.iter().map(|&n| AsyncPools::new(n)).collect();
        if wants(Group::Async) {
            for row in Row::ALL.into_iter().filter(|&r| r != Row::Mixed) {
                let points = pools
                    .iter()
                    .map(|p| {
                        let name = row.name();
                        // The counters' cost is `async`'s question, not the scaling table's.
                        let impls: Vec<AsyncImpl> = row
                            .impls()
                            .iter()
                            .copied()
                            .filter(|&imp| imp != AsyncImpl::MagpieInsight)
                            .collect();
                        measure_point(Group::Async, name, p.workers(), &impls, p.magpie(), cfg, {
                            move |imp, _| p.sample(row, imp)
                        })
                    })
                    .collect();
                emit(RowResult {
                    group: Group::Async,
                    name: row.name().to_owned(),
                    about: Some(row.describe()),
                    points,
                });
            }
        }
        if wants(Group::TaskPool) {
            for pattern in PATTERNS {
                let row = TaskRow::new(pattern, cfg.tasks, cfg.hold);
                let points = pools.iter().map(|p| task_point(&row, p, cfg)).collect();
                emit(RowResult {
                    group: Group::TaskPool,
                    name: row.name(),
                    about: Some(row.describe()),
                    points,
                });
            }
        }
    }
    rows
}

/// A row run on [`Pools`]: a fork-join workload or an iter case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolCase {
    ForkJoin(ForkJoinRow),
    Iter(IterCase),
}

impl PoolCase {
    fn make(self, cfg: &Config) -> Box<dyn Workload> {
        match self {
            PoolCase::ForkJoin(row) => row.make(cfg.fork_join),
            PoolCase::Iter(case) => case.make(cfg.iter),
        }
    }

    fn impls(self) -> &'static [Impl] {
        match self {
            PoolCase::ForkJoin(_) => &Impl::ALL,
            PoolCase::Iter(_) => &IterCase::IMPLS,
        }
    }
}

/// Items of the iter group's one row under `--sleeping-tasks` (100 per worker at 16).
const HELD_ITEMS: usize = 1600;
/// How long each of those items sleeps, times `--sleeping-tasks`' factor: 200 µs at 10.
const HELD_ITEM_MICROS: u64 = 20;

/// The selected rows that run on [`Pools`], in order. The two iter rows that the fork-join
/// group includes appear once, in the first selected group that has them. With sleeping
/// tasks the iter group is the one row of sleeping items.
fn pool_cases(cfg: &Config) -> Vec<(Group, PoolCase)> {
    let mut cases = Vec::new();
    if cfg.groups.contains(&Group::ForkJoin) {
        for row in ForkJoinRow::ALL {
            cases.push((Group::ForkJoin, PoolCase::ForkJoin(row)));
        }
        let sort = IterCase::Sort {
            stable: false,
            shape: Shape::Random,
        };
        for case in [sort, IterCase::Scan(Scan::Sum)] {
            cases.push((Group::ForkJoin, PoolCase::Iter(case)));
        }
    }
    if !cfg.groups.contains(&Group::Iter) {
        return cases;
    }
    if let Hold::Sleep { factor } = cfg.hold {
        // Only a row whose items can sleep: the others measure memory and CPUs.
        let held = IterCase::Held {
            items: HELD_ITEMS,
            micros: HELD_ITEM_MICROS * u64::from(factor),
        };
        cases.push((Group::Iter, PoolCase::Iter(held)));
    } else {
        for case in IterRow::ALL.into_iter().flat_map(IterRow::cases) {
            if !cases.iter().any(|&(_, c)| c == PoolCase::Iter(case)) {
                cases.push((Group::Iter, PoolCase::Iter(case)));
            }
        }
    }
    cases
}

/// Measures one row at one worker count: the harness's rounds over `impls`, with magpie's
/// samples counted on `rt`, the runtime that runs them.
fn measure_point<C: Contender>(
    group: Group,
    row: &str,
    workers: usize,
    impls: &[C],
    rt: &magpie::Runtime,
    cfg: &Config,
    mut sample: impl FnMut(C, bool) -> Duration,
) -> Point {
    let mut counts = CountSummary::default();
    let label = format!("{}: {row} ({workers} workers)", group.name());
    let mut results = measure_rounds(
        &label,
        impls,
        cfg.warmup,
        cfg.samples,
        SCALE_COOL_DOWN,
        |imp, timed| {
            if !imp.is_magpie() {
                return sample(imp, timed);
            }
            let before = rt.stats();
            let elapsed = sample(imp, timed);
            let settled = settle(rt);
            if timed {
                counts.push(Counts::between(&before, &rt.stats()), settled);
            }
            elapsed
        },
    );
    // Stable: the peers keep their order.
    results.sort_by_key(|(imp, _)| !imp.is_magpie());
    Point {
        workers,
        results: results
            .into_iter()
            .map(|(imp, samples)| (imp.name(), samples))
            .collect(),
        counts,
        shapes: Vec::new(),
    }
}

/// One implementation's timed samples of a task-pool row, as [`PoolShape::of`] takes them.
struct ShapeSamples {
    imp: TaskImpl,
    /// Each sample's task work.
    works: Vec<Duration>,
    /// Each sample's load balance.
    balances: Vec<f64>,
    /// Each sample's ramp-up, in ms.
    ramp_ups_ms: Vec<f64>,
}

/// Measures one task-pool row at the worker count of `pools`.
fn task_point(row: &TaskRow, pools: &AsyncPools, cfg: &Config) -> Point {
    let workers = pools.workers();
    let mut shapes: Vec<ShapeSamples> = TaskImpl::ALL
        .iter()
        .map(|&imp| ShapeSamples {
            imp,
            works: Vec::new(),
            balances: Vec::new(),
            ramp_ups_ms: Vec::new(),
        })
        .collect();
    let mut point = measure_point(
        Group::TaskPool,
        &row.name(),
        workers,
        &TaskImpl::ALL,
        pools.magpie(),
        cfg,
        |imp, timed| {
            let sample = row.sample(pools, imp);
            if timed {
                let slot = shapes
                    .iter_mut()
                    .find(|s| s.imp == imp)
                    .expect("every impl has a slot");
                slot.works.push(sample.total_work());
                slot.balances.push(load_balance(&sample.work, workers));
                slot.ramp_ups_ms.push(
                    sample
                        .ramp_up(workers)
                        .map_or(f64::INFINITY, |d| d.as_secs_f64() * 1e3),
                );
            }
            sample.makespan
        },
    );
    point.shapes = shapes
        .iter()
        .map(|s| {
            let makespans = point
                .results
                .iter()
                .find(|(name, _)| *name == s.imp.name())
                .map(|(_, samples)| samples.as_slice())
                .expect("every impl was measured");
            let shape = PoolShape::of(&s.works, workers, makespans, &s.balances, &s.ramp_ups_ms);
            (s.imp.name(), shape)
        })
        .collect();
    point
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(groups: &[Group]) -> Config {
        Config {
            counts: vec![1],
            groups: groups.to_vec(),
            warmup: 0,
            samples: 1,
            fork_join: fork_join::Sizes {
                fib_n: 10,
                tree_depth: 4,
                sort_len: 100,
            },
            iter: iter_rows::Lengths {
                sum: 100,
                scan: 100,
                sort: 100,
            },
            tasks: 10,
            hold: Hold::Spin,
        }
    }

    #[test]
    fn shared_rows_run_once_in_the_first_group() {
        let iter_cases = IterRow::ALL.into_iter().flat_map(IterRow::cases).count();
        let both = pool_cases(&config(&[Group::ForkJoin, Group::Iter]));
        assert_eq!(both.len(), ForkJoinRow::ALL.len() + iter_cases);
        for (i, (_, case)) in both.iter().enumerate() {
            assert!(!both[..i].iter().any(|(_, c)| c == case), "{case:?} twice");
        }
        let sum = PoolCase::Iter(IterCase::Scan(Scan::Sum));
        assert!(both.contains(&(Group::ForkJoin, sum)));
        let iter_only = pool_cases(&config(&[Group::Iter]));
        assert_eq!(iter_only.len(), iter_cases);
        assert!(iter_only.contains(&(Group::Iter, sum)));
        assert!(pool_cases(&config(&[Group::Async])).is_empty());
    }

    #[test]
    fn with_sleeping_tasks_the_iter_group_is_one_row_of_sleeping_items() {
        let mut cfg = config(&[Group::Iter, Group::TaskPool]);
        cfg.hold = Hold::Sleep { factor: 10 };
        let held = IterCase::Held {
            items: HELD_ITEMS,
            micros: 200,
        };
        assert_eq!(pool_cases(&cfg), [(Group::Iter, PoolCase::Iter(held))]);
        cfg.groups = vec![Group::TaskPool];
        assert!(pool_cases(&cfg).is_empty());
    }

    #[test]
    fn a_row_of_sleeping_items_runs_each_once_and_holds_a_worker_per_item() {
        let pools = Pools::new(2);
        let hold = Duration::from_micros(300);
        let mut row = IterCase::Held {
            items: 8,
            micros: 300,
        }
        .make(config(&[]).iter);
        assert!(row.name().contains("8 items, each sleeping 300 µs"));
        for imp in IterCase::IMPLS {
            // `sample` asserts that every item ran once; 8 sleeps on at most 2 threads take
            // at least 4 sleeps' time, 8 on one.
            let took = row.sample(&pools, imp);
            let least = if imp == Impl::Sequential { 8 } else { 4 };
            assert!(took >= hold * least, "{imp:?}: {took:?}");
        }
    }
}
