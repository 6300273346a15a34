//! Parallel iterators and parallel sorts against Rayon's (issue 4's targets).
//!
//! Every row is one consumer on one input, run by the sequential `std` iterator (the
//! baseline), by magpie inside `Runtime::install`, and by rayon inside `ThreadPool::install`.
//! Inputs are made once, untimed; sorts copy their input before each sample, untimed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::harness::{fmt_ms, markdown_table, ms, Measurement, Workload};
use crate::pools::{Impl, Pools};

/// A deterministic pseudo-random sequence (xorshift64*), so that every run sorts the same data.
fn pseudo_random(len: usize, seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed | 1;
    (0..len).map(move |_| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// The consumers, written once and compiled three times: against magpie's prelude, against
/// rayon's, and against plain `std` iterators (the sequential baseline). Method resolution
/// picks the traits imported where the macro expands.
macro_rules! consumers {
    ($iter:ident) => {
        pub(super) fn sum(data: &[u64]) -> u64 {
            data.$iter().sum::<u64>()
        }

        pub(super) fn map_collect(data: &[u64]) -> Vec<u64> {
            data.$iter().map(|&x| super::map_op(x)).collect()
        }

        pub(super) fn min_by_key(data: &[u64]) -> Option<u64> {
            data.$iter().min_by_key(|&&x| super::key_op(x)).copied()
        }

        pub(super) fn any(data: &[u64]) -> bool {
            data.$iter().any(|&x| x == super::NEEDLE)
        }
    };
}

mod with_magpie {
    use magpie::prelude::*;
    consumers!(par_iter);

    pub(super) fn position_first(data: &[u64]) -> Option<usize> {
        data.par_iter().position_first(|&x| x == super::NEEDLE)
    }
}

mod with_rayon {
    use rayon::prelude::*;
    consumers!(par_iter);

    pub(super) fn position_first(data: &[u64]) -> Option<usize> {
        data.par_iter().position_first(|&x| x == super::NEEDLE)
    }
}

mod with_std {
    consumers!(iter);

    pub(super) fn position_first(data: &[u64]) -> Option<usize> {
        data.iter().position(|&x| x == super::NEEDLE)
    }
}

/// One consumer in its three versions: `std`, magpie, rayon.
type Versions<R> = [fn(&[u64]) -> R; 3];

macro_rules! versions {
    ($consumer:ident) => {
        [
            with_std::$consumer as fn(&[u64]) -> _,
            with_magpie::$consumer,
            with_rayon::$consumer,
        ]
    };
}

/// Runs the magpie version in the magpie pool, the rayon version in the rayon pool, or the
/// `std` version on this thread, as `imp` says, and times it.
fn timed<R: Send>(
    pools: &Pools,
    imp: Impl,
    [std, magpie, rayon]: Versions<R>,
    data: &[u64],
) -> (Duration, R) {
    let start = Instant::now();
    let out = match imp {
        Impl::Sequential | Impl::Chili => std(data),
        Impl::Magpie => pools.magpie.install(|| magpie(data)),
        Impl::Rayon => pools.rayon.install(|| rayon(data)),
    };
    (start.elapsed(), out)
}

/// Which consumer a [`ScanRow`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// `par_iter().sum()` of u64.
    Sum,
    /// `par_iter().map(..).collect::<Vec<_>>()`.
    MapCollect,
    /// `par_iter().min_by_key(..)`.
    MinByKey,
    /// `par_iter().position_first(..)` with the only match at `percent` of the input.
    PositionFirst { percent: usize },
    /// `par_iter().any(..)` with the only match at `percent` of the input, or none.
    Any { percent: Option<usize> },
}

/// One consumer over a `Vec<u64>`.
pub(crate) struct ScanRow {
    scan: Scan,
    data: Vec<u64>,
    expected: u64,
}

/// The value planted where `position_first` and `any` should find it; never produced by
/// [`pseudo_random`] masked to 62 bits.
const NEEDLE: u64 = u64::MAX;

impl ScanRow {
    pub(crate) fn new(scan: Scan, len: usize) -> ScanRow {
        let mut data: Vec<u64> = pseudo_random(len, 0x5eed).map(|x| x >> 2).collect();
        let expected = match scan {
            Scan::Sum => data.iter().sum(),
            Scan::MapCollect => data.iter().map(|&x| map_op(x)).fold(0, u64::wrapping_add),
            Scan::MinByKey => *data.iter().min_by_key(|&&x| key_op(x)).unwrap(),
            Scan::PositionFirst { percent }
            | Scan::Any {
                percent: Some(percent),
            } => {
                let at = len * percent / 100;
                data[at] = NEEDLE;
                at as u64
            }
            Scan::Any { percent: None } => 0,
        };
        ScanRow {
            scan,
            data,
            expected,
        }
    }
}

fn map_op(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (x >> 7)
}

fn key_op(x: u64) -> u64 {
    x % 1_000_003
}

impl Workload for ScanRow {
    fn name(&self) -> String {
        let n = self.data.len();
        match self.scan {
            Scan::Sum => format!("sum of {n} u64"),
            Scan::MapCollect => format!("map + collect of {n} u64"),
            Scan::MinByKey => format!("min_by_key of {n} u64"),
            Scan::PositionFirst { percent } => {
                format!("position_first of {n}, match at {percent}%")
            }
            Scan::Any {
                percent: Some(percent),
            } => format!("any of {n}, match at {percent}%"),
            Scan::Any { percent: None } => format!("any of {n}, no match (full scan)"),
        }
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        let data = &self.data[..];
        let expected = self.expected;
        match self.scan {
            Scan::Sum => {
                let fns = versions!(sum);
                let (t, got) = timed(pools, imp, fns, data);
                assert_eq!(got, expected);
                t
            }
            Scan::MapCollect => {
                let fns = versions!(map_collect);
                let (t, got) = timed(pools, imp, fns, data);
                assert_eq!(got.len(), data.len());
                assert_eq!(got.iter().fold(0, |a: u64, &b| a.wrapping_add(b)), expected);
                drop(black_box(got));
                t
            }
            Scan::MinByKey => {
                let fns = versions!(min_by_key);
                let (t, got) = timed(pools, imp, fns, data);
                assert_eq!(got, Some(expected));
                t
            }
            Scan::PositionFirst { .. } => {
                let fns = versions!(position_first);
                let (t, got) = timed(pools, imp, fns, data);
                assert_eq!(got, Some(expected as usize));
                t
            }
            Scan::Any { percent } => {
                let fns = versions!(any);
                let (t, got) = timed(pools, imp, fns, data);
                assert_eq!(got, percent.is_some());
                t
            }
        }
    }
}

/// The shape of a sort input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Random,
    Sorted,
    Reversed,
    Equal,
}

/// One sort (stable or not) of one input shape of `u32`s.
pub(crate) struct SortRow {
    stable: bool,
    shape: Shape,
    input: Vec<u32>,
    sorted: Vec<u32>,
    scratch: Vec<u32>,
}

impl SortRow {
    pub(crate) fn new(stable: bool, shape: Shape, len: usize) -> SortRow {
        let input: Vec<u32> = match shape {
            Shape::Random => pseudo_random(len, 0xabcd)
                .map(|x| (x >> 32) as u32)
                .collect(),
            Shape::Sorted => (0..len as u32).collect(),
            Shape::Reversed => (0..len as u32).rev().collect(),
            Shape::Equal => vec![7; len],
        };
        let mut sorted = input.clone();
        sorted.sort_unstable();
        SortRow {
            stable,
            shape,
            scratch: input.clone(),
            input,
            sorted,
        }
    }
}

impl Workload for SortRow {
    fn name(&self) -> String {
        let which = if self.stable {
            "par_sort"
        } else {
            "par_sort_unstable"
        };
        let shape = match self.shape {
            Shape::Random => "random",
            Shape::Sorted => "sorted",
            Shape::Reversed => "reversed",
            Shape::Equal => "all equal",
        };
        format!("{which} of {} u32, {shape}", self.input.len())
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        self.scratch.copy_from_slice(&self.input);
        let v = &mut self.scratch[..];
        let stable = self.stable;
        let start = Instant::now();
        match (imp, stable) {
            (Impl::Sequential | Impl::Chili, true) => v.sort(),
            (Impl::Sequential | Impl::Chili, false) => v.sort_unstable(),
            (Impl::Magpie, true) => pools.magpie.install(|| {
                use magpie::prelude::*;
                v.par_sort()
            }),
            (Impl::Magpie, false) => pools.magpie.install(|| {
                use magpie::prelude::*;
                v.par_sort_unstable()
            }),
            (Impl::Rayon, true) => pools.rayon.install(|| {
                use rayon::prelude::*;
                v.par_sort()
            }),
            (Impl::Rayon, false) => pools.rayon.install(|| {
                use rayon::prelude::*;
                v.par_sort_unstable()
            }),
        }
        let elapsed = start.elapsed();
        assert!(self.scratch == self.sorted, "{} sorted wrongly", imp.name());
        elapsed
    }
}

/// A row selectable with `iter --only`; some stand for several [`IterCase`]s.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IterRow {
    Sum,
    MapCollect,
    MinByKey,
    PositionFirst,
    Any,
    SortUnstable,
    Sort,
}

impl IterRow {
    /// Every row, in the order they run.
    pub(crate) const ALL: [IterRow; 7] = [
        IterRow::Sum,
        IterRow::MapCollect,
        IterRow::MinByKey,
        IterRow::PositionFirst,
        IterRow::Any,
        IterRow::SortUnstable,
        IterRow::Sort,
    ];

    /// The cases this row runs: `position_first` and `any` with two match positions, the
    /// sorts on four input shapes.
    pub(crate) fn cases(self) -> Vec<IterCase> {
        match self {
            IterRow::Sum => vec![IterCase::Scan(Scan::Sum)],
            IterRow::MapCollect => vec![IterCase::Scan(Scan::MapCollect)],
            IterRow::MinByKey => vec![IterCase::Scan(Scan::MinByKey)],
            IterRow::PositionFirst => [1, 50]
                .map(|percent| IterCase::Scan(Scan::PositionFirst { percent }))
                .to_vec(),
            IterRow::Any => [Some(1), None]
                .map(|percent| IterCase::Scan(Scan::Any { percent }))
                .to_vec(),
            IterRow::SortUnstable | IterRow::Sort => {
                let stable = self == IterRow::Sort;
                [Shape::Random, Shape::Sorted, Shape::Reversed, Shape::Equal]
                    .map(|shape| IterCase::Sort { stable, shape })
                    .to_vec()
            }
        }
    }
}

/// `for_each` over `0..items`, each item holding its thread for `hold` by sleeping
/// (`harness::sleep_held`) instead of computing: the splitting of a parallel iterator at
/// worker counts this machine's CPUs cannot run, since an item holds a worker and not a CPU
/// (`scale --sleeping-tasks`). An ideal schedule takes `ceil(items / workers) × hold`; a
/// piece kept from thieves shows as a longer makespan.
pub(crate) struct HeldRow {
    items: usize,
    hold: Duration,
}

impl HeldRow {
    /// The number of items run, after running them.
    fn run(&self, imp: Impl, pools: &Pools) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let ran = AtomicUsize::new(0);
        let item = |_: usize| {
            crate::harness::sleep_held(self.hold);
            // Relaxed: read after the `for_each` returned, which orders every item before.
            ran.fetch_add(1, Relaxed);
        };
        match imp {
            Impl::Sequential | Impl::Chili => (0..self.items).for_each(item),
            Impl::Magpie => pools.magpie.install(|| {
                use magpie::prelude::*;
                (0..self.items).into_par_iter().for_each(item);
            }),
            Impl::Rayon => pools.rayon.install(|| {
                use rayon::prelude::*;
                (0..self.items).into_par_iter().for_each(item);
            }),
        }
        ran.into_inner()
    }
}

impl Workload for HeldRow {
    fn name(&self) -> String {
        format!(
            "for_each of {} items, each sleeping {} µs",
            self.items,
            self.hold.as_micros()
        )
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        let start = Instant::now();
        let ran = self.run(imp, pools);
        let elapsed = start.elapsed();
        assert_eq!(ran, self.items, "every item runs once");
        elapsed
    }
}

/// Input lengths of the rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lengths {
    /// Elements summed by `sum`.
    pub(crate) sum: usize,
    /// Elements of the other scans.
    pub(crate) scan: usize,
    /// Elements sorted.
    pub(crate) sort: usize,
}

/// One measured row, before its input is made: inputs are large (800 MB for the default
/// `sum`), so a run makes one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IterCase {
    /// A [`ScanRow`].
    Scan(Scan),
    /// A [`SortRow`].
    Sort { stable: bool, shape: Shape },
    /// A [`HeldRow`]: `items` items, each sleeping `micros` µs (`scale --sleeping-tasks`).
    Held { items: usize, micros: u64 },
}

impl IterCase {
    /// The implementations a case runs: the `std` baseline, magpie and rayon.
    pub(crate) const IMPLS: [Impl; 3] = [Impl::Sequential, Impl::Magpie, Impl::Rayon];

    /// Makes the case's input (untimed) and returns the workload.
    pub(crate) fn make(self, lengths: Lengths) -> Box<dyn Workload> {
        match self {
            IterCase::Scan(scan @ Scan::Sum) => Box::new(ScanRow::new(scan, lengths.sum)),
            IterCase::Scan(scan) => Box::new(ScanRow::new(scan, lengths.scan)),
            IterCase::Sort { stable, shape } => Box::new(SortRow::new(stable, shape, lengths.sort)),
            IterCase::Held { items, micros } => Box::new(HeldRow {
                items,
                hold: Duration::from_micros(micros),
            }),
        }
    }
}

/// The table of issue 4's targets: magpie/rayon per row, and the early-exit ratio (`any`
/// with the match at 1% over `any` scanning everything) per pool.
pub(crate) fn render_summary(measurements: &[Measurement]) -> String {
    let ms_of = |m: &Measurement, imp: Impl| m.median(imp).map(ms);
    let mut rows = Vec::new();
    for m in measurements {
        let (Some(magpie), Some(rayon)) = (ms_of(m, Impl::Magpie), ms_of(m, Impl::Rayon)) else {
            continue;
        };
        let seq = ms_of(m, Impl::Sequential).map_or("–".to_owned(), fmt_ms);
        rows.push(vec![
            m.workload.clone(),
            seq,
            fmt_ms(magpie),
            fmt_ms(rayon),
            format!("{:.2}", magpie / rayon),
        ]);
    }
    let mut out = String::from(
        "### Summary: medians in ms, magpie/rayon below 1.00 means magpie is faster\n\n",
    );
    out.push_str(&markdown_table(
        &["row", "sequential", "magpie", "rayon", "magpie/rayon"],
        &[false, true, true, true, true],
        &rows,
    ));
    let early = measurements
        .iter()
        .find(|m| m.workload.contains("match at 1%") && m.workload.starts_with("any"));
    let full = measurements
        .iter()
        .find(|m| m.workload.contains("full scan"));
    if let (Some(early), Some(full)) = (early, full) {
        out.push('\n');
        for imp in [Impl::Magpie, Impl::Rayon] {
            if let (Some(e), Some(f)) = (ms_of(early, imp), ms_of(full, imp)) {
                out.push_str(&format!(
                    "early exit, {}: any with the match at 1% takes {:.1}% of a full scan\n",
                    imp.name(),
                    100.0 * e / f
                ));
            }
        }
    }
    out
}
