//! `bounds`: what no scheduler can beat, for the rows whose targets ask for more than a
//! scheduler controls.
//!
//! A parallel run of a fork-join computation is a schedule of its task tree, and a run of the
//! task pool a schedule of its tasks. Two figures come from the work alone, measured on one
//! thread of this machine, with no runtime taking part:
//!
//! - **The lower bound** `max(W / p, S)`: the tree's work `W` (every node's own time) spread
//!   evenly over `p` workers, or its span `S` (the longest chain of nodes each waiting for its
//!   parent), whichever is longer. No schedule on `p` workers finishes sooner, whatever it
//!   costs to run: this is the bound by which a target beyond it is out of reach.
//! - **A greedy schedule**: the tree run on `p` ideal workers that never wait for work that
//!   is ready, take the ready node with the longest chain below it first, and pay nothing to
//!   fork, steal or wake (Graham's list scheduling: within `W / p + S`). What a scheduler
//!   with no overhead and a good choice of node achieves; real ones, magpie and rayon alike,
//!   are slower by their overheads and wake-ups.
//!
//! The trees:
//!
//! - **quicksort**, the `fork-join` row exactly: its partition, its cutoff and its input,
//!   every node timed as it runs on this thread. Its span is the chain of partitions from
//!   the root down the larger side: the root's partition alone is a sixteenth of the work.
//! - **`par_sort_unstable`**, magpie's own tree: the library's recursion run on this thread
//!   with every piece timed (`magpie::__bench`, hidden): choosing the pivot and partitioning,
//!   or sorting a piece of at most `len / (16 p)` whole, so each count has its tree. Only the
//!   check for sorted input before it (a parallel scan that stops at the first pair out of
//!   order) is left out. A parallel partition would shorten the span, and needs the pivot
//!   shared between threads (`T: Sync`), which `par_sort_unstable` does not require.
//!
//! The task pool: `scale`'s three patterns, in their order of arrival, `--submit-ns` apart
//! (one thread submitting), each to the first worker free (a schedule that takes tasks in the
//! order they come, as every pool of the bench does, and knows no task's length). Three
//! starts: every worker ready at once; woken as a tree, worker `k` after `⌈log2(k + 1)⌉`
//! wake latencies of `--wake-us` (each woken worker waking others, as rayon's and magpie's
//! rules do); and as a chain, worker `k` after `k` of them (one wake at a time).
//! Efficiency is total work / (workers × makespan), balance the most work of one worker over
//! the least: `scale`'s task-pool figures, for that schedule.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use crate::fork_join::{partition, quicksort_input, QUICKSORT_CUTOFF};
use crate::harness::{fmt_ms, markdown_table, median_f64};
use crate::scale::{load_balance, task_pool_durations, TASK_POOL_PATTERNS};

/// A tree of nodes, each with its own time (ns) and children; node 0 is the root, and every
/// node comes before its children.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tree {
    own_ns: Vec<u64>,
    children: Vec<Vec<u32>>,
}

impl Tree {
    /// Adds a node without children and returns its index.
    fn push(&mut self, own_ns: u64) -> u32 {
        self.own_ns.push(own_ns);
        self.children.push(Vec::new());
        u32::try_from(self.own_ns.len() - 1).expect("fewer than 2^32 nodes")
    }

    /// The sum of every node's own time.
    pub(crate) fn work_ns(&self) -> u64 {
        self.own_ns.iter().sum()
    }

    /// For every node, the longest chain from it down to a leaf, its own time included.
    fn chains_ns(&self) -> Vec<u64> {
        let mut chain = vec![0u64; self.own_ns.len()];
        // Children come after their parent, so a backward pass sees them first.
        for node in (0..self.own_ns.len()).rev() {
            let below = self.children[node]
                .iter()
                .map(|&c| chain[c as usize])
                .max()
                .unwrap_or(0);
            chain[node] = self.own_ns[node] + below;
        }
        chain
    }

    /// The span: the longest chain from the root.
    pub(crate) fn span_ns(&self) -> u64 {
        self.chains_ns().first().copied().unwrap_or(0)
    }

    /// `max(W / p, S)`: no schedule on `workers` workers is shorter.
    pub(crate) fn lower_bound_ns(&self, workers: usize) -> u64 {
        (self.work_ns() / workers.max(1) as u64).max(self.span_ns())
    }

    /// The makespan of the greedy list schedule on `workers` workers: whenever a worker is
    /// free and a node is ready, it runs the ready node with the longest chain below it.
    pub(crate) fn greedy_ns(&self, workers: usize) -> u64 {
        if self.own_ns.is_empty() {
            return 0;
        }
        let chain = self.chains_ns();
        // Ready nodes, longest chain first; running nodes, soonest end first.
        let mut ready = BinaryHeap::from([(chain[0], 0u32)]);
        let mut running: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
        let mut now = 0u64;
        loop {
            while running.len() < workers.max(1) {
                let Some((_, node)) = ready.pop() else { break };
                running.push(Reverse((now + self.own_ns[node as usize], node)));
            }
            let Some(Reverse((end, node))) = running.pop() else {
                return now;
            };
            now = end;
            for &c in &self.children[node as usize] {
                ready.push((chain[c as usize], c));
            }
        }
    }
}

/// Times `f` in ns.
fn timed(f: impl FnOnce()) -> u64 {
    let start = Instant::now();
    f();
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The `fork-join` quicksort of `v` on this thread, each node timed into `tree`: a
/// partition with its two halves as children, or a piece of at most the cutoff sorted whole.
pub(crate) fn quicksort_tree(v: &mut [u32], tree: &mut Tree) -> u32 {
    if v.len() <= QUICKSORT_CUTOFF {
        return tree.push(timed(|| v.sort_unstable()));
    }
    let mut mid = 0;
    let node = tree.push(timed(|| mid = partition(v)));
    let (lo, hi) = v.split_at_mut(mid);
    let a = quicksort_tree(lo, tree);
    let b = quicksort_tree(hi, tree);
    tree.children[node as usize] = vec![a, b];
    node
}

/// `par_sort_unstable`'s own tree on `v` as `workers` workers would cut it, each piece
/// timed on this thread (`magpie::__bench`).
pub(crate) fn sort_tree(v: &mut [u32], workers: usize) -> Tree {
    let (own_ns, children) = magpie::__bench::par_sort_unstable_timed_tree(v, workers);
    Tree { own_ns, children }
}

/// A schedule of tasks in arrival order: its makespan and every worker's work, in ns.
#[derive(Debug)]
pub(crate) struct FifoSchedule {
    pub(crate) makespan_ns: u64,
    pub(crate) work_ns: Vec<u64>,
}

impl FifoSchedule {
    /// Total work / (workers × makespan).
    pub(crate) fn efficiency(&self) -> f64 {
        let total: u64 = self.work_ns.iter().sum();
        total as f64 / (self.work_ns.len() as f64 * self.makespan_ns as f64)
    }

    /// The most work of one worker over the least (infinite if one did none): `scale`'s
    /// figure.
    pub(crate) fn balance(&self) -> f64 {
        load_balance(&self.work_ns, self.work_ns.len())
    }
}

/// Tasks of `durations` arriving `submit_ns` apart from time 0, each run from its arrival or
/// later by the worker that is free first, worker `k` free from `starts_ns[k]`; no overhead.
pub(crate) fn fifo_schedule(durations: &[u64], submit_ns: u64, starts_ns: &[u64]) -> FifoSchedule {
    let mut free: BinaryHeap<Reverse<(u64, usize)>> = starts_ns
        .iter()
        .enumerate()
        .map(|(k, &s)| Reverse((s, k)))
        .collect();
    let mut work_ns = vec![0u64; starts_ns.len()];
    let mut makespan_ns = 0;
    for (i, &d) in durations.iter().enumerate() {
        let Reverse((at, k)) = free.pop().expect("at least one worker");
        let end = at
            .max((i as u64).saturating_mul(submit_ns))
            .saturating_add(d);
        work_ns[k] += d;
        makespan_ns = makespan_ns.max(end);
        free.push(Reverse((end, k)));
    }
    FifoSchedule {
        makespan_ns,
        work_ns,
    }
}

/// How the workers of a pool start, `wake_ns` being one wake-up latency.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ramp {
    /// All at once.
    Ready,
    /// Worker `k` after `⌈log2(k + 1)⌉` latencies.
    Tree,
    /// Worker `k` after `k` latencies.
    Chain,
}

impl Ramp {
    pub(crate) const ALL: [Ramp; 3] = [Ramp::Ready, Ramp::Tree, Ramp::Chain];

    /// When each of `workers` workers starts.
    pub(crate) fn starts_ns(self, workers: usize, wake_ns: u64) -> Vec<u64> {
        (0..workers as u64)
            .map(|k| match self {
                Ramp::Ready => 0,
                // ⌈log2(k + 1)⌉ = the bits of k.
                Ramp::Tree => wake_ns.saturating_mul(u64::from(u64::BITS - k.leading_zeros())),
                Ramp::Chain => wake_ns.saturating_mul(k),
            })
            .collect()
    }

    fn name(self) -> &'static str {
        match self {
            Ramp::Ready => "all ready",
            Ramp::Tree => "woken as a tree",
            Ramp::Chain => "woken as a chain",
        }
    }
}

/// What `bounds` computes.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) counts: Vec<usize>,
    pub(crate) sort_len: usize,
    pub(crate) rounds: usize,
    pub(crate) tasks: usize,
    pub(crate) submit_ns: u64,
    pub(crate) wake_us: u64,
}

/// Runs `bounds` and prints its tables.
pub(crate) fn run(cfg: &Config) {
    let input = quicksort_input(cfg.sort_len);
    let mut sequential = Vec::new();
    let mut trees = Vec::new();
    for round in 0..cfg.rounds {
        eprintln!("bounds: quicksort tree, round {}", round + 1);
        let mut v = input.clone();
        sequential.push(timed(|| v.sort_unstable()) as f64);
        let mut v = input.clone();
        let mut tree = Tree::default();
        quicksort_tree(&mut v, &mut tree);
        assert!(
            v.windows(2).all(|w| w[0] <= w[1]),
            "the quicksort tree sorts"
        );
        trees.push(tree);
    }
    print_tree_table(
        &format!(
            "quicksort({} u32), the `fork-join` row's tree",
            cfg.sort_len
        ),
        &cfg.counts,
        |_| Cow::Borrowed(&trees[..]),
    );

    // Each worker count cuts its own pieces, so each has its trees.
    let sort_trees = |workers: usize| -> Cow<'_, [Tree]> {
        (0..cfg.rounds)
            .map(|_| {
                let mut v = input.clone();
                let tree = sort_tree(&mut v, workers);
                assert!(v.windows(2).all(|w| w[0] <= w[1]), "the sort's tree sorts");
                tree
            })
            .collect()
    };
    eprintln!("bounds: par_sort_unstable tree");
    print_tree_table(
        &format!(
            "`par_sort_unstable` of {} u32, magpie's own tree (`sort_unstable` alone: {} ms)",
            cfg.sort_len,
            fmt_ms(median_f64(&sequential) / 1e6)
        ),
        &cfg.counts,
        sort_trees,
    );

    print_task_pool(cfg);
}

/// One table of a tree's bounds at every worker count, medians over the trees `trees_for`
/// gives for each count (the same ones for every count, or each count's own).
fn print_tree_table<'a>(
    title: &str,
    counts: &[usize],
    trees_for: impl Fn(usize) -> Cow<'a, [Tree]>,
) {
    let mut rows = Vec::new();
    for &p in counts {
        let trees = trees_for(p);
        let median = |f: &dyn Fn(&Tree) -> u64| {
            median_f64(&trees.iter().map(|t| f(t) as f64).collect::<Vec<_>>()) / 1e6
        };
        let work = median(&|t| t.work_ns());
        let span = median(&|t| t.span_ns());
        let bound = median(&|t| t.lower_bound_ns(p));
        let greedy = median(&|t| t.greedy_ns(p));
        rows.push(vec![
            p.to_string(),
            fmt_ms(work),
            fmt_ms(span),
            fmt_ms(bound),
            fmt_ms(greedy),
            format!("{:.3}", bound / work),
            format!("{:.3}", greedy / work),
        ]);
    }
    println!("### {title}\n");
    println!(
        "{}",
        markdown_table(
            &[
                "workers",
                "work ms",
                "span ms",
                "bound ms",
                "greedy ms",
                "bound / work",
                "greedy / work",
            ],
            &[false, true, true, true, true, true, true],
            &rows,
        )
    );
    println!(
        "bound = max(work / workers, span): no schedule is shorter; greedy: ideal workers with \
         no overhead, longest chain first. Medians over the rounds.\n"
    );
}

fn print_task_pool(cfg: &Config) {
    let wake_ns = cfg.wake_us.saturating_mul(1000);
    println!(
        "### The task pool in arrival order, no overhead ({} tasks submitted {} ns apart; \
         a wake-up {} µs)\n",
        cfg.tasks, cfg.submit_ns, cfg.wake_us
    );
    let mut rows = Vec::new();
    for pattern in TASK_POOL_PATTERNS {
        let durations: Vec<u64> = task_pool_durations(pattern, cfg.tasks)
            .iter()
            .map(|d: &Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .collect();
        for &p in &cfg.counts {
            let mut row = vec![pattern.to_string(), p.to_string()];
            for ramp in Ramp::ALL {
                let s = fifo_schedule(&durations, cfg.submit_ns, &ramp.starts_ns(p, wake_ns));
                row.push(format!(
                    "{:.1}%, {:.3}",
                    s.efficiency() * 100.0,
                    s.balance()
                ));
            }
            rows.push(row);
        }
    }
    let headers: Vec<String> = ["pattern".to_owned(), "workers".to_owned()]
        .into_iter()
        .chain(Ramp::ALL.map(|r| format!("{} (eff, bal)", r.name())))
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    println!(
        "{}",
        markdown_table(&headers, &[false, false, true, true, true], &rows)
    );
    println!(
        "Each task goes to the worker free first, from its arrival on: the best any pool that \
         takes tasks in order and pays nothing per task can do, with its workers starting \
         as said.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree from (own time, children) pairs, node 0 the root.
    fn tree(nodes: &[(u64, &[u32])]) -> Tree {
        Tree {
            own_ns: nodes.iter().map(|n| n.0).collect(),
            children: nodes.iter().map(|n| n.1.to_vec()).collect(),
        }
    }

    #[test]
    fn a_chain_takes_its_span_on_any_number_of_workers() {
        let chain = tree(&[(5, &[1]), (7, &[2]), (11, &[])]);
        assert_eq!(chain.work_ns(), 23);
        assert_eq!(chain.span_ns(), 23);
        for p in [1, 2, 16] {
            assert_eq!(chain.greedy_ns(p), 23);
            assert_eq!(chain.lower_bound_ns(p), 23);
        }
    }

    #[test]
    fn a_star_spreads_its_leaves() {
        // A root of 2, then four leaves of 10.
        let star = tree(&[
            (2, &[1, 2, 3, 4]),
            (10, &[]),
            (10, &[]),
            (10, &[]),
            (10, &[]),
        ]);
        assert_eq!(star.greedy_ns(1), 42);
        assert_eq!(star.greedy_ns(2), 22);
        assert_eq!(star.greedy_ns(4), 12);
        assert_eq!(star.greedy_ns(8), 12);
        assert_eq!(star.span_ns(), 12);
        assert_eq!(star.lower_bound_ns(2), 21);
    }

    #[test]
    fn the_longest_chain_goes_first() {
        // After a root of 1, three nodes are ready: leaves A and B of 5, and C of 1 above a
        // leaf of 8. Two workers running A and B first would end at 15 (C and its leaf
        // after them); C first, then its leaf as soon as C ends, ends at 11.
        let t = tree(&[(1, &[1, 2, 3]), (5, &[]), (5, &[]), (1, &[4]), (8, &[])]);
        assert_eq!(t.span_ns(), 10);
        assert_eq!(t.lower_bound_ns(2), 10);
        assert_eq!(t.greedy_ns(2), 11);
        assert_eq!(t.greedy_ns(1), 20);
        assert_eq!(t.greedy_ns(3), 10);
    }

    #[test]
    fn greedy_stays_between_the_lower_bound_and_grahams() {
        let mut v: Vec<u32> = (0..200_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut t = Tree::default();
        quicksort_tree(&mut v, &mut t);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        for p in [1, 2, 3, 8, 64] {
            let greedy = t.greedy_ns(p);
            assert!(greedy >= t.lower_bound_ns(p), "p = {p}");
            assert!(
                greedy <= t.work_ns() / p as u64 + t.span_ns() + 1,
                "p = {p}"
            );
        }
        assert_eq!(t.greedy_ns(1), t.work_ns());
    }

    #[test]
    fn the_sort_tree_is_magpies() {
        let mut v: Vec<u32> = (0..100_000u32)
            .map(|i| i.wrapping_mul(40_503) ^ 0x5555)
            .collect();
        let mut expected = v.clone();
        expected.sort_unstable();
        let t = sort_tree(&mut v, 4);
        assert_eq!(v, expected);
        assert!(t.children.iter().all(|c| c.is_empty() || c.len() == 2));
        assert!(t.greedy_ns(4) >= t.lower_bound_ns(4));
    }

    #[test]
    fn arrival_order_schedules() {
        // Four tasks of 10 on two ready workers, arriving at once: 20, balanced.
        let s = fifo_schedule(&[10, 10, 10, 10], 0, &[0, 0]);
        assert_eq!(s.makespan_ns, 20);
        assert_eq!(s.work_ns, [20, 20]);
        assert_eq!(s.efficiency(), 1.0);
        assert_eq!(s.balance(), 1.0);
        // A long task last: the other worker idles while it runs.
        let s = fifo_schedule(&[10, 10, 30], 0, &[0, 0]);
        assert_eq!(s.makespan_ns, 40);
        assert_eq!(s.balance(), 4.0);
        // A worker that starts late takes less; arrivals 5 apart delay the tasks.
        let s = fifo_schedule(&[10, 10, 10], 5, &[0, 100]);
        assert_eq!(s.makespan_ns, 30);
        assert_eq!(s.work_ns, [30, 0]);
        assert!(s.balance().is_infinite());
    }

    #[test]
    fn ramps_start_workers_as_said() {
        assert_eq!(Ramp::Ready.starts_ns(3, 7), [0, 0, 0]);
        assert_eq!(Ramp::Tree.starts_ns(8, 10), [0, 10, 20, 20, 30, 30, 30, 30]);
        assert_eq!(Ramp::Chain.starts_ns(4, 10), [0, 10, 20, 30]);
    }
}
