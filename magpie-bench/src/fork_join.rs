//! The fork-join workloads: `fib`, `tree_sum` (on a tree in level order or in post-order)
//! and `quicksort`, each written once and generic over the join ([`Fork`]).

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::harness::{progress, Workload};
use crate::pools::{Fork, Impl, Pools, Task};

/// A xorshift64 generator: deterministic inputs without a dependency.
#[derive(Debug, Clone)]
pub(crate) struct XorShift64(u64);

impl XorShift64 {
    /// A generator from `seed` (0 is replaced, xorshift never leaves the all-zero state).
    pub(crate) fn new(seed: u64) -> XorShift64 {
        XorShift64(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

// ---------------------------------------------------------------------------------------
// fib

/// `fib(n)` with a join at every call, no sequential cutoff: a pure measure of join overhead.
pub(crate) fn fib<F: Fork>(ctx: &mut F::Ctx<'_>, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = F::join(ctx, |c| fib::<F>(c, n - 1), |c| fib::<F>(c, n - 2));
    a + b
}

/// `fib(n)` computed by iteration, to check the results.
fn fib_reference(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// The [`Task`] computing `fib(n)`.
#[derive(Debug)]
pub(crate) struct FibTask(pub(crate) u64);

impl Task for FibTask {
    type Output = u64;

    fn call<F: Fork>(&mut self, ctx: &mut F::Ctx<'_>) -> u64 {
        fib::<F>(ctx, black_box(self.0))
    }
}

/// The `fib(n)` workload.
#[derive(Debug)]
pub(crate) struct FibWorkload {
    n: u64,
    expected: u64,
}

impl FibWorkload {
    /// `fib(n)`; for `n = 30` the result must be 832040.
    pub(crate) fn new(n: u64) -> FibWorkload {
        let expected = fib_reference(n);
        if n == 30 {
            assert_eq!(expected, 832_040);
        }
        FibWorkload { n, expected }
    }
}

impl Workload for FibWorkload {
    fn name(&self) -> String {
        format!("fib({})", self.n)
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        let mut task = FibTask(self.n);
        let start = Instant::now();
        let result = pools.run(imp, &mut task);
        let elapsed = start.elapsed();
        assert_eq!(result, self.expected, "{imp}: wrong fib({})", self.n);
        elapsed
    }
}

// ---------------------------------------------------------------------------------------
// tree_sum

/// A heap-allocated binary tree node.
#[derive(Debug)]
pub(crate) struct Node {
    value: u64,
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

impl Node {
    /// A balanced tree of `2^depth - 1` nodes with pseudo-random values below 2^20.
    ///
    /// The nodes are allocated in level order (root first, then each level left to right).
    /// The layout matters: a tree allocated in post-order, as plain recursive construction
    /// does, lies in memory exactly in the order a right-child-first traversal reads it, and
    /// chili's `join` runs its second closure first, which would make it stream memory
    /// backwards while the others jump around (twice as fast, single-threaded, for no reason
    /// of scheduling). In level order, left-first and right-first traversals see mirror
    /// images of the same access pattern.
    pub(crate) fn balanced(depth: u32, rng: &mut XorShift64) -> Option<Box<Node>> {
        if depth == 0 {
            return None;
        }
        let count = (1usize << depth) - 1;
        let mut nodes: Vec<Option<Box<Node>>> = (0..count)
            .map(|_| {
                Some(Box::new(Node {
                    value: rng.next_u64() >> 44,
                    left: None,
                    right: None,
                }))
            })
            .collect();
        // Node i has children 2i + 1 and 2i + 2; linking from the last inner node back to
        // the root attaches every subtree before its parent is taken.
        for i in (0..count / 2).rev() {
            let left = nodes[2 * i + 1].take();
            let right = nodes[2 * i + 2].take();
            let node = nodes[i].as_mut().expect("not yet linked");
            node.left = left;
            node.right = right;
        }
        nodes[0].take()
    }

    /// A balanced tree of `2^depth - 1` nodes with pseudo-random values below 2^20, built by
    /// plain recursion: both subtrees, then their parent.
    ///
    /// The nodes are thus allocated in post-order, the layout a user's recursive builder
    /// gives. Read backwards, memory holds the nodes in the order a right-child-first
    /// traversal visits them (see [`balanced`](Self::balanced) for why that flatters chili).
    pub(crate) fn post_order(depth: u32, rng: &mut XorShift64) -> Option<Box<Node>> {
        if depth == 0 {
            return None;
        }
        let left = Node::post_order(depth - 1, rng);
        let right = Node::post_order(depth - 1, rng);
        Some(Box::new(Node {
            value: rng.next_u64() >> 44,
            left,
            right,
        }))
    }

    /// The number of nodes, counted sequentially.
    #[cfg(test)]
    fn count(&self) -> usize {
        1 + self.left.as_ref().map_or(0, |n| n.count())
            + self.right.as_ref().map_or(0, |n| n.count())
    }

    /// The height of the tree.
    #[cfg(test)]
    fn height(&self) -> u32 {
        let l = self.left.as_ref().map_or(0, |n| n.height());
        let r = self.right.as_ref().map_or(0, |n| n.height());
        1 + l.max(r)
    }
}

/// The sum of a tree, with a join at every inner node.
pub(crate) fn tree_sum<F: Fork>(ctx: &mut F::Ctx<'_>, node: &Node) -> u64 {
    match (node.left.as_deref(), node.right.as_deref()) {
        (Some(l), Some(r)) => {
            let (a, b) = F::join(ctx, |c| tree_sum::<F>(c, l), |c| tree_sum::<F>(c, r));
            node.value + a + b
        }
        (Some(child), None) | (None, Some(child)) => node.value + tree_sum::<F>(ctx, child),
        (None, None) => node.value,
    }
}

/// The [`Task`] summing a tree.
#[derive(Debug)]
struct TreeSumTask<'a>(&'a Node);

impl Task for TreeSumTask<'_> {
    type Output = u64;

    fn call<F: Fork>(&mut self, ctx: &mut F::Ctx<'_>) -> u64 {
        tree_sum::<F>(ctx, black_box(self.0))
    }
}

/// The order in which a `tree_sum` tree's nodes lie in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreeLayout {
    /// [`Node::balanced`]: the same access pattern for left-first and right-first joins.
    LevelOrder,
    /// [`Node::post_order`]: what recursive construction gives.
    PostOrder,
}

/// The `tree_sum` workload; the tree is built once when the workload is created.
#[derive(Debug)]
pub(crate) struct TreeSumWorkload {
    depth: u32,
    layout: TreeLayout,
    root: Box<Node>,
    expected: u64,
}

impl TreeSumWorkload {
    /// Builds a balanced tree of `2^depth - 1` nodes in `layout` (untimed) and its
    /// reference sum.
    pub(crate) fn new(depth: u32, layout: TreeLayout) -> TreeSumWorkload {
        assert!(depth >= 1, "the tree needs at least one level");
        let start = Instant::now();
        progress(format_args!("building a tree of 2^{depth} - 1 nodes... "));
        let mut rng = XorShift64::new(0x7265_6573);
        let root = match layout {
            TreeLayout::LevelOrder => Node::balanced(depth, &mut rng),
            TreeLayout::PostOrder => Node::post_order(depth, &mut rng),
        }
        .expect("depth >= 1");
        let expected = tree_sum::<crate::pools::SeqFork>(&mut (), &root);
        progress(format_args!("{:.1} s\n", start.elapsed().as_secs_f64()));
        TreeSumWorkload {
            depth,
            layout,
            root,
            expected,
        }
    }
}

impl Workload for TreeSumWorkload {
    fn name(&self) -> String {
        let row = match self.layout {
            TreeLayout::LevelOrder => "tree_sum",
            TreeLayout::PostOrder => "tree_postorder",
        };
        format!("{row}(2^{} - 1 nodes)", self.depth)
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        let mut task = TreeSumTask(&self.root);
        let start = Instant::now();
        let result = pools.run(imp, &mut task);
        let elapsed = start.elapsed();
        assert_eq!(result, self.expected, "{imp}: wrong tree sum");
        elapsed
    }
}

// ---------------------------------------------------------------------------------------
// quicksort

/// Below this length a subslice is sorted with `sort_unstable`, without joins.
pub(crate) const QUICKSORT_CUTOFF: usize = 4096;

/// Hoare partition around the median of the first, middle and last elements.
///
/// Returns `p` with `0 < p < v.len()`, every element of `v[..p]` at most every element of
/// `v[p..]`. Needs `v.len() >= 2`.
pub(crate) fn partition(v: &mut [u32]) -> usize {
    let len = v.len();
    debug_assert!(len >= 2);
    let mid = len / 2;
    let (a, b, c) = (v[0], v[mid], v[len - 1]);
    let median = if (a <= b) == (b <= c) {
        mid
    } else if (b <= a) == (a <= c) {
        0
    } else {
        len - 1
    };
    // Hoare's scheme with the pivot in the first slot: the scans stop at the pivot or at an
    // element they swapped, so they stay in bounds and the split point lies in 1..len.
    v.swap(0, median);
    let pivot = v[0];
    let mut i = 0;
    let mut j = len - 1;
    loop {
        while v[i] < pivot {
            i += 1;
        }
        while v[j] > pivot {
            j -= 1;
        }
        if i >= j {
            return j + 1;
        }
        v.swap(i, j);
        i += 1;
        j -= 1;
    }
}

/// Quicksort with a join after every partition and `sort_unstable` below the cutoff.
pub(crate) fn quicksort<F: Fork>(ctx: &mut F::Ctx<'_>, v: &mut [u32]) {
    if v.len() <= QUICKSORT_CUTOFF {
        v.sort_unstable();
        return;
    }
    let p = partition(v);
    let (lo, hi) = v.split_at_mut(p);
    F::join(ctx, |c| quicksort::<F>(c, lo), |c| quicksort::<F>(c, hi));
}

/// The [`Task`] sorting a slice in place.
#[derive(Debug)]
struct SortTask<'a>(&'a mut [u32]);

impl Task for SortTask<'_> {
    type Output = ();

    fn call<F: Fork>(&mut self, ctx: &mut F::Ctx<'_>) {
        quicksort::<F>(ctx, black_box(&mut *self.0));
    }
}

/// The quicksort row's input: `len` pseudo-random `u32`s from a fixed seed.
pub(crate) fn quicksort_input(len: usize) -> Vec<u32> {
    let mut rng = XorShift64::new(0x736f_7274);
    (0..len).map(|_| (rng.next_u64() >> 32) as u32).collect()
}

/// The `quicksort` workload: every sample sorts a fresh copy of the same random input.
#[derive(Debug)]
pub(crate) struct QuicksortWorkload {
    input: Vec<u32>,
    sorted: Vec<u32>,
    buf: Vec<u32>,
}

impl QuicksortWorkload {
    /// `len` pseudo-random `u32`s from a fixed seed.
    pub(crate) fn new(len: usize) -> QuicksortWorkload {
        let input = quicksort_input(len);
        let mut sorted = input.clone();
        sorted.sort_unstable();
        let buf = vec![0; len];
        QuicksortWorkload { input, sorted, buf }
    }
}

impl Workload for QuicksortWorkload {
    fn name(&self) -> String {
        let len = self.input.len();
        if len >= 1_000_000 && len % 1_000_000 == 0 {
            format!("quicksort({}M u32)", len / 1_000_000)
        } else {
            format!("quicksort({len} u32)")
        }
    }

    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration {
        self.buf.copy_from_slice(&self.input);
        let mut task = SortTask(&mut self.buf);
        let start = Instant::now();
        pools.run(imp, &mut task);
        let elapsed = start.elapsed();
        assert!(
            self.buf == self.sorted,
            "{imp}: quicksort result is not sorted"
        );
        elapsed
    }
}

// ---------------------------------------------------------------------------------------
// The rows

/// A fork-join row, as `fork-join --only` names it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ForkJoinRow {
    /// `fib`.
    Fib,
    /// `tree_sum` on a tree in level order.
    Tree,
    /// `tree_sum` on a tree built recursively (post-order).
    TreePostorder,
    /// `quicksort`.
    Sort,
}

impl ForkJoinRow {
    /// Every row, in the order they run.
    pub(crate) const ALL: [ForkJoinRow; 4] = [
        ForkJoinRow::Fib,
        ForkJoinRow::Tree,
        ForkJoinRow::TreePostorder,
        ForkJoinRow::Sort,
    ];

    /// Builds the workload (the tree and the sort input are made here, untimed).
    pub(crate) fn make(self, sizes: Sizes) -> Box<dyn Workload> {
        match self {
            ForkJoinRow::Fib => Box::new(FibWorkload::new(sizes.fib_n)),
            ForkJoinRow::Tree => Box::new(TreeSumWorkload::new(
                sizes.tree_depth,
                TreeLayout::LevelOrder,
            )),
            ForkJoinRow::TreePostorder => Box::new(TreeSumWorkload::new(
                sizes.tree_depth,
                TreeLayout::PostOrder,
            )),
            ForkJoinRow::Sort => Box::new(QuicksortWorkload::new(sizes.sort_len)),
        }
    }
}

/// The sizes of the fork-join workloads.
#[derive(clap::Args, Clone, Copy, Debug)]
pub(crate) struct Sizes {
    /// n of fib(n).
    #[arg(long, default_value_t = 30)]
    pub(crate) fib_n: u64,
    /// Levels of the trees; each has 2^depth - 1 nodes.
    #[arg(long, default_value_t = 23)]
    pub(crate) tree_depth: u32,
    /// Elements to sort.
    #[arg(long, default_value_t = 10_000_000)]
    pub(crate) sort_len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::SeqFork;

    #[test]
    fn partition_splits_correctly() {
        let mut rng = XorShift64::new(1);
        for len in [2usize, 3, 4, 5, 10, 100, 1000] {
            for modulus in [2u64, 7, 1 << 32] {
                let mut v: Vec<u32> = (0..len)
                    .map(|_| (rng.next_u64() % modulus) as u32)
                    .collect();
                let p = partition(&mut v);
                assert!(0 < p && p < len, "len {len}: split {p}");
                let left_max = v[..p].iter().max().unwrap();
                let right_min = v[p..].iter().min().unwrap();
                assert!(left_max <= right_min);
            }
        }
    }

    #[test]
    fn trees_are_balanced() {
        for build in [Node::balanced, Node::post_order] {
            for depth in 1..=12 {
                let root = build(depth, &mut XorShift64::new(3)).unwrap();
                assert_eq!(root.count(), (1 << depth) - 1);
                assert_eq!(root.height(), depth);
            }
            assert!(build(0, &mut XorShift64::new(3)).is_none());
        }
    }

    #[test]
    fn quicksort_sorts() {
        let mut rng = XorShift64::new(2);
        let mut v: Vec<u32> = (0..100_000)
            .map(|_| (rng.next_u64() % 1000) as u32)
            .collect();
        let mut expected = v.clone();
        expected.sort_unstable();
        quicksort::<SeqFork>(&mut (), &mut v);
        assert_eq!(v, expected);
    }

    #[test]
    fn small_workloads_agree_across_implementations() {
        let pools = Pools::new(2);
        let mut fib = FibWorkload::new(20);
        let mut tree = TreeSumWorkload::new(10, TreeLayout::LevelOrder);
        let mut post = TreeSumWorkload::new(10, TreeLayout::PostOrder);
        let mut sort = QuicksortWorkload::new(50_000);
        for imp in Impl::ALL {
            fib.sample(&pools, imp);
            tree.sample(&pools, imp);
            post.sample(&pools, imp);
            sort.sample(&pools, imp);
        }
    }
}
