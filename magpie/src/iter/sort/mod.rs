//! Parallel sorting of slices: an unstable quicksort and a stable merge sort, both built on
//! [`join`](fn@crate::join) and handing pieces to the standard library's sequential sorts.
//!
//! # Unstable: parallel pattern-defeating quicksort ([`par_quicksort`])
//!
//! The recursion follows Orson Peters' pdqsort ("Pattern-defeating Quicksort", 2021,
//! arXiv:2106.05123): the pivot is the median of a sample drawn at pseudo-random offsets
//! from equal strides (15 to 255 elements, growing with the square root of the length); a
//! scan from both ends finds an already partitioned piece and moves nothing; elements equal
//! to the pivot are split off in one pass when the pivot is no greater than the pivot of an
//! ancestor, so many duplicates cost O(n) per distinct value; and a limit on badly
//! unbalanced partitions, past which a piece goes to the sequential sort, keeps the worst
//! case O(n log n). The partition of small and medium elements never branches on a
//! comparison: up to 16 bytes, a Lomuto scan that moves elements by a cyclic permutation through one hole, as
//! std's ipnsort does; up to 96 bytes, the block partition of Edelkamp and Weiß's
//! BlockQuicksort ("BlockQuicksort: Avoiding Branch Mispredictions in Quicksort", 2016),
//! which records the offsets of misplaced elements in blocks and then swaps them, moving
//! far fewer. Larger elements, for which moves cost more than mispredicted branches, have
//! their misplaced pairs swapped by a plain scan from both ends. Both sides of a partition recurse through `join`;
//! below a grain that gives each worker several pieces, std's `sort_unstable_by` (ipnsort)
//! finishes the piece.
//!
//! The first partition is sequential. Partitioning chunks in parallel would have several
//! threads compare against the one pivot at once, which needs `T: Sync`; the sorts only
//! require `T: Send`, so every element, the pivot included, is accessed by one thread at a
//! time.
//!
//! # Stable: parallel merge sort ([`par_mergesort`])
//!
//! The slice is halved a fixed number of times (enough pieces for every worker to have a
//! few); the pieces are sorted in parallel by std's `sort_by` (driftsort), then merged
//! pairwise back up the tree. Merges alternate between the slice and a buffer of `n`
//! uninitialised slots (ping-pong), so that no level copies back; an odd number of levels
//! has the leaves copy their sorted piece into the buffer. Each merge is itself parallel, the
//! idea of rayon's `par_merge`: the longer run is split at its midpoint, the other run is
//! binary-searched for the matching split, so that of equal elements those of the left run
//! come first, and the two halves merge through `join` into disjoint parts of the
//! destination. The sequential merge at the bottom splits its output in halves the same way
//! and steps the two halves' merges in turn, both from the front (see `merge.rs` for why not
//! from both ends).
//!
//! # Sorted, reversed and all-equal input
//!
//! Before either sort, a parallel scan checks whether the slice is already non-descending
//! (which includes all-equal), or descending (strictly, for the stable sort), in which case
//! it is reversed in parallel: such inputs cost O(n / workers).
//!
//! # Panic safety
//!
//! If the comparator panics, the panic reaches the caller once every piece in flight has
//! finished, and the slice then holds a permutation of its original elements: each exactly
//! once, none dropped, none duplicated. The quicksort only swaps, except in its branchless
//! partition, which holds one element out of the slice while it compares, in a guard that
//! writes it back into the hole on unwind. The merge sort keeps one rule: if a sort of a
//! piece unwinds, all the piece's elements are in the slice. A merge only reads its runs,
//! so a merge into the buffer leaves the slice intact, and a merge into the slice has a
//! guard that copies the runs, unmerged, over its part of the slice on unwind; a piece that
//! finished into the buffer before its sibling panicked is copied back by their parent's
//! guard. Buffer slots are `MaybeUninit` and never dropped. A comparator that is not a
//! strict weak order leaves the order unspecified, never the permutation.
//!
//! # Interior mutability
//!
//! A comparator may change the elements it is given, through a `Cell` or the like. Both sorts
//! keep every such change, panics included: an element is only ever compared where it lives,
//! at its one current place, and a bitwise copy that moves it (into the buffer, out of it, or
//! out of the slice in the cyclic partition) is made after its last comparison there, and the
//! place it left is never read again. The parallel checks compare in place and move
//! elements only by swaps. `tests/sort_soundness.rs` checks this with `Cell` counters and
//! with boxes that each comparison replaces.
//!
//! # Comparators
//!
//! Both sorts take `is_less`, a strict weak order. The sequential std sorts take an
//! `Ordering`; they are given `Less` when `is_less` holds and `Greater` otherwise. This is
//! exact, not an approximation: `sort_by` and `sort_unstable_by` consult their comparator
//! only through `compare(a, b) == Less`, so one comparison per call suffices.

mod merge;
mod quick;

pub(crate) use merge::par_mergesort;
pub(crate) use quick::par_quicksort;
pub use quick::timed_tree;

use crate::sync::atomic::Relaxed;
use crate::sync::AtomicBool;
use std::cmp::Ordering;

/// Slices up to this long are scanned (checked, reversed) by one thread.
const SCAN_GRAIN: usize = 1 << 14;

/// Slices up to this long are sorted sequentially, with no check and no fork.
const MIN_PARALLEL: usize = 1 << 12;

/// `is_less` as the comparator std's sorts take (see "Comparators" above).
#[inline(always)]
fn ordering<T, F>(is_less: &F) -> impl Fn(&T, &T) -> Ordering + '_
where
    F: Fn(&T, &T) -> bool,
{
    move |a, b| {
        if is_less(a, b) {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    }
}

/// Makes a slice at least [`MIN_PARALLEL`] long sorted in O(n / workers) if it is already
/// non-descending (all-equal included) or descending (by reversing it), and returns whether
/// it did. `strict` asks for a strictly descending slice before reversing, which keeps a
/// stable sort stable. Costs a few comparisons on other inputs: every scanning thread stops
/// at its first counterexample.
fn sorted_or_reversed<T, F>(v: &mut [T], is_less: &F, strict: bool) -> bool
where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
{
    debug_assert!(v.len() >= 2);
    let grain = scan_grain(v.len());
    let failed = AtomicBool::new(false);
    let reversed = if is_less(&v[1], &v[0]) {
        if strict {
            all_pairs(v, &|a: &T, b: &T| is_less(b, a), &failed, grain)
        } else {
            all_pairs(v, &|a: &T, b: &T| !is_less(a, b), &failed, grain)
        }
    } else {
        return all_pairs(v, &|a: &T, b: &T| !is_less(b, a), &failed, grain);
    };
    if reversed {
        par_reverse(v, grain);
    }
    reversed
}

/// The piece length for a parallel scan of `len` elements: a few pieces per worker.
fn scan_grain(len: usize) -> usize {
    (len / (4 * crate::current_num_workers())).max(SCAN_GRAIN)
}

/// Whether `ok(a, b)` holds for every adjacent pair of `v`, checked in parallel pieces of
/// at most `grain`; `failed` lets the pieces stop early once one has found a counterexample.
/// Takes `&mut` only to hand disjoint pieces to other threads (`T` need not be `Sync`).
fn all_pairs<T, P>(v: &mut [T], ok: &P, failed: &AtomicBool, grain: usize) -> bool
where
    T: Send,
    P: Fn(&T, &T) -> bool + Sync,
{
    if v.len() <= grain {
        return all_pairs_seq(v, ok, failed);
    }
    let mid = v.len() / 2;
    if !ok(&v[mid - 1], &v[mid]) {
        failed.store(true, Relaxed);
        return false;
    }
    let (left, right) = v.split_at_mut(mid);
    let (a, b) = crate::join(
        || all_pairs(left, ok, failed, grain),
        || all_pairs(right, ok, failed, grain),
    );
    a && b
}

/// [`all_pairs`] on one thread.
fn all_pairs_seq<T, P>(v: &[T], ok: &P, failed: &AtomicBool) -> bool
where
    P: Fn(&T, &T) -> bool,
{
    // Blocks without early exit inside (the loop can then run without a branch per pair);
    // between blocks, stop if this or another piece found a counterexample.
    const BLOCK: usize = 256;
    let mut start = 0;
    while start + 1 < v.len() {
        let end = (start + BLOCK).min(v.len() - 1);
        let mut all = true;
        for i in start..end {
            all &= ok(&v[i], &v[i + 1]);
        }
        if !all {
            failed.store(true, Relaxed);
            return false;
        }
        if failed.load(Relaxed) {
            return false;
        }
        start = end;
    }
    true
}

/// Reverses `v` in parallel pieces of about `grain` elements.
fn par_reverse<T: Send>(v: &mut [T], grain: usize) {
    let half = v.len() / 2;
    let (front, rest) = v.split_at_mut(half);
    let back_start = rest.len() - half;
    swap_mirrored(front, &mut rest[back_start..], grain);
}

/// Swaps `a[i]` with `b[b.len() - 1 - i]` for every `i`; `a` and `b` have the same length.
fn swap_mirrored<T: Send>(a: &mut [T], b: &mut [T], grain: usize) {
    debug_assert_eq!(a.len(), b.len());
    if a.len() <= grain {
        for (x, y) in a.iter_mut().zip(b.iter_mut().rev()) {
            std::mem::swap(x, y);
        }
        return;
    }
    // a = a1 a2 pairs with b = b1 b2 as a1 <-> b2 and a2 <-> b1.
    let mid = a.len() / 2;
    let (a1, a2) = a.split_at_mut(mid);
    let (b1, b2) = b.split_at_mut(b.len() - mid);
    crate::join(
        || swap_mirrored(a1, b2, grain),
        || swap_mirrored(a2, b1, grain),
    );
}

#[cfg(test)]
mod tests {
    use super::{par_mergesort, par_quicksort, timed_tree, MIN_PARALLEL};
    use crate::util::rand::FastRand;
    use crate::Runtime;
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Lengths: tiny, primes, either side of the thresholds (`MIN_PARALLEL`, `SCAN_GRAIN`,
    /// the merge's leaf and grain), and large.
    const LENGTHS: &[usize] = &[
        0, 1, 2, 3, 7, 31, 257, 4093, 4095, 4096, 4097, 8191, 8192, 8193, 16383, 16384, 16385,
        32771, 65537, 100_003, 262_147,
    ];

    /// Whether the tests run at full size: in release (the second pass of `scripts/test.sh`),
    /// not in debug builds (`cargo test`, the symmetric-barrier and ASan passes), where the
    /// five largest tests took 13 to 42 s each. The debug sizes still reach every parallel
    /// path on 4 workers (8 merge leaves of `MIN_LEAF` and more, several `SCAN_GRAIN`s).
    const FULL: bool = !cfg!(debug_assertions);

    /// `LENGTHS` without those over 65,537 in a debug build.
    fn lengths() -> impl Iterator<Item = usize> {
        LENGTHS.iter().copied().filter(|&n| FULL || n <= 65_537)
    }

    const PATTERNS: &[&str] = &[
        "random", "sorted", "reversed", "revdup", "equal", "mod4", "sawtooth", "organ", "nearly",
    ];

    fn pattern(kind: &str, n: usize, seed: u64) -> Vec<u32> {
        let mut rng = FastRand::new(seed ^ n as u64);
        let n32 = n as u32;
        match kind {
            "random" => (0..n).map(|_| rng.next_u32()).collect(),
            "sorted" => (0..n32).collect(),
            "reversed" => (0..n32).rev().collect(),
            "revdup" => (0..n32).rev().map(|i| i / 3).collect(),
            "equal" => vec![5; n],
            "mod4" => (0..n).map(|_| rng.next_u32() % 4).collect(),
            "sawtooth" => (0..n32).map(|i| i % 97).collect(),
            "organ" => (0..n32).map(|i| i.min(n32 - i)).collect(),
            "nearly" => {
                let mut v: Vec<u32> = (0..n32).collect();
                for _ in 0..n / 100 {
                    let (a, b) = (rng.below(n32) as usize, rng.below(n32) as usize);
                    v.swap(a, b);
                }
                v
            }
            _ => unreachable!(),
        }
    }

    pub(super) fn with_pools(f: impl Fn() + Send + Sync) {
        with_pools_of(&[1, 2, 4], f);
    }

    pub(super) fn with_pools_of(pools: &[usize], f: impl Fn() + Send + Sync) {
        for &workers in pools {
            let rt = Runtime::builder().worker_threads(workers).build().unwrap();
            rt.install(&f);
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn sort_matches_std() {
        with_pools(|| {
            for &kind in PATTERNS {
                for n in lengths() {
                    both_sorts_match_std(pattern(kind, n, 1), &format!("{kind}, n = {n}"));
                }
            }
        });
    }

    /// Sorts `input` with both parallel sorts and checks each against `sort_unstable`.
    fn both_sorts_match_std(input: Vec<u32>, what: &str) {
        let mut expect = input.clone();
        expect.sort_unstable();
        let mut v = input.clone();
        par_quicksort(&mut v, &|a, b| a < b);
        assert!(v == expect, "par_quicksort: {what}");
        let mut v = input;
        par_mergesort(&mut v, &|a, b| a < b);
        assert!(v == expect, "par_mergesort: {what}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn sort_descending_comparator_and_large() {
        with_pools(|| {
            let input = pattern("random", if FULL { 1 << 20 } else { 1 << 17 }, 2);
            let mut expect = input.clone();
            expect.sort_unstable_by(|a, b| b.cmp(a));
            let mut v = input.clone();
            par_quicksort(&mut v, &|a, b| a > b);
            assert!(v == expect);
            let mut v = input;
            par_mergesort(&mut v, &|a, b| a > b);
            assert!(v == expect);
        });
    }

    /// `K` u64s: the key first, the original index last.
    fn check_wide<const K: usize>() {
        for kind in ["random", "mod4", "sawtooth", "reversed", "nearly"] {
            for n in [5000, if FULL { 70_001 } else { 40_009 }] {
                let input: Vec<[u64; K]> = pattern(kind, n, 6)
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let mut wide = [0; K];
                        wide[0] = u64::from(x);
                        wide[K - 1] = i as u64;
                        wide
                    })
                    .collect();
                let mut expect = input.clone();
                expect.sort_by_key(|w| w[0]);
                let mut v = input.clone();
                par_mergesort(&mut v, &|a, b| a[0] < b[0]);
                assert!(v == expect, "par_mergesort: {kind}, n = {n}, K = {K}");
                let mut v = input;
                par_quicksort(&mut v, &|a, b| a[0] < b[0]);
                assert!(v.windows(2).all(|w| w[0][0] <= w[1][0]), "{kind}, {n}, {K}");
                let mut ids: Vec<u64> = v.iter().map(|w| w[K - 1]).collect();
                ids.sort_unstable();
                assert!(ids.into_iter().eq(0..n as u64), "{kind}, n = {n}, K = {K}");
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn sort_wide_elements() {
        // The quicksort's three partitions: cyclic (16 bytes), blocks (32, 96), swapping
        // misplaced pairs (128).
        with_pools(|| {
            check_wide::<2>();
            check_wide::<4>();
            check_wide::<12>();
            check_wide::<16>();
        });
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn sort_outside_a_runtime_and_zero_sized() {
        let mut v = pattern("random", 50_000, 3);
        par_quicksort(&mut v, &|a, b| a < b);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let mut units = vec![(); 100_000];
        par_quicksort(&mut units, &|_, _| false);
        par_mergesort(&mut units, &|_, _| false);
        assert_eq!(units.len(), 100_000);
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn mergesort_is_stable() {
        with_pools(|| {
            for n in lengths().filter(|&n| n < 262_147) {
                for modulus in [1, 4, 1000, u32::MAX] {
                    for kind in ["random", "reversed", "revdup", "sawtooth"] {
                        // (key, original index): sorting by key alone must keep the
                        // indices of equal keys increasing.
                        let input: Vec<(u32, usize)> = pattern(kind, n, 4)
                            .into_iter()
                            .map(|x| x % modulus)
                            .enumerate()
                            .map(|(i, k)| (k, i))
                            .collect();
                        let mut expect = input.clone();
                        expect.sort_by_key(|p| p.0);
                        let mut v = input;
                        par_mergesort(&mut v, &|a, b| a.0 < b.0);
                        assert!(v == expect, "{kind} % {modulus}, n = {n}");
                    }
                }
            }
        });
    }

    /// An element that counts its drops in a table shared by the test; `P` words of padding
    /// choose the quicksort's partition (16 bytes in all: cyclic; 32: blocks; 112: swaps).
    struct Tracked<'a, const P: usize> {
        key: u32,
        id: u32,
        drops: &'a Vec<AtomicUsize>,
        _pad: [u64; P],
    }

    impl<const P: usize> Drop for Tracked<'_, P> {
        fn drop(&mut self) {
            self.drops[self.id as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn tracked<'a, const P: usize>(
        kind: &str,
        n: usize,
        drops: &'a Vec<AtomicUsize>,
    ) -> Vec<Tracked<'a, P>> {
        pattern(kind, n, 5)
            .into_iter()
            .enumerate()
            .map(|(id, key)| Tracked {
                key,
                id: id as u32,
                drops,
                _pad: [0; P],
            })
            .collect()
    }

    /// Checks that `v` holds each of the `n` tracked elements once, drops it, and checks
    /// that each was dropped exactly once.
    fn check_and_drop<const P: usize>(v: Vec<Tracked<'_, P>>, drops: &[AtomicUsize], what: &str) {
        assert!(
            drops.iter().all(|d| d.load(Ordering::Relaxed) == 0),
            "{what}"
        );
        let mut ids: Vec<u32> = v.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        assert!(
            ids.into_iter().eq(0..drops.len() as u32),
            "not a permutation: {what}"
        );
        drop(v);
        assert!(
            drops.iter().all(|d| d.load(Ordering::Relaxed) == 1),
            "{what}"
        );
    }

    type Sorter<const P: usize> = for<'a> fn(
        &mut [Tracked<'a, P>],
        &(dyn Fn(&Tracked<'a, P>, &Tracked<'a, P>) -> bool + Sync),
    );

    fn sorters<const P: usize>() -> [Sorter<P>; 2] {
        [|v, f| par_quicksort(v, &f), |v, f| par_mergesort(v, &f)]
    }

    /// Sorts `n` tracked elements with a comparator that panics at its `k`-th call (never if
    /// `k` is 0); returns how many comparisons ran. Checks that a panic reached us, that the
    /// slice is a permutation of the input, and that every element is dropped exactly once.
    fn sort_tracked<const P: usize>(sort: Sorter<P>, kind: &str, n: usize, k: usize) -> usize {
        let drops: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        let mut v = tracked::<P>(kind, n, &drops);
        let calls = AtomicUsize::new(0);
        let is_less = |a: &Tracked<P>, b: &Tracked<P>| {
            if calls.fetch_add(1, Ordering::Relaxed) + 1 == k {
                panic!("comparator panics on purpose");
            }
            a.key < b.key
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| sort(&mut v, &is_less)));
        let total = calls.load(Ordering::Relaxed);
        let what = format!("{kind}, n = {n}, k = {k}, P = {P}");
        assert_eq!(result.is_err(), k != 0 && k <= total, "{what}");
        if result.is_ok() {
            assert!(v.windows(2).all(|w| w[0].key <= w[1].key), "{what}");
        }
        check_and_drop(v, &drops, &what);
        total
    }

    fn panics_at_every_stage<const P: usize>(kinds: &[&str]) {
        for sort in sorters::<P>() {
            for &kind in kinds {
                // 20,011 still makes two merge levels and parallel merges.
                for n in [3000, if FULL { 40_009 } else { 20_011 }] {
                    let total = sort_tracked(sort, kind, n, 0);
                    let early = [1, 2, total / 50, total / 20, total / 3, total / 2];
                    for k in early.into_iter().chain([total * 9 / 10, total - 1, total]) {
                        sort_tracked(sort, kind, n, k.max(1));
                    }
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn panicking_comparator_leaves_a_permutation() {
        with_pools(|| {
            panics_at_every_stage::<0>(&["random", "mod4", "sorted", "reversed", "nearly"]);
            panics_at_every_stage::<2>(&["random", "mod4"]);
            panics_at_every_stage::<12>(&["random", "mod4"]);
        });
    }

    /// The parallel paths of both sorts at the smallest sizes that reach them on 2 workers
    /// (16385: two merge levels and a parallel merge; 8193: one level, whose children sort
    /// into the buffer), and a comparator that panics in a leaf, on 16-byte elements (the
    /// quicksort's cyclic partition, the one with raw moves). Sized with Miri in mind, where
    /// the tests above would take hours, though it has not yet been seen to finish there
    /// within 10 minutes (`scripts/miri.sh` skips it).
    #[test]
    fn small_parallel_sorts() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        rt.install(|| {
            both_sorts_match_std(pattern("random", 16_385, 7), "random, n = 16385");
            // The 20000th comparison falls in a leaf sort (a 4096-long leaf takes ~45000);
            // `par_merge_fills_dest_even_on_panic` covers panics in the merges.
            for sort in sorters::<0>() {
                sort_tracked(sort, "random", 8193, 20_000);
            }
        });
    }

    fn random_order<const P: usize>() {
        for sort in sorters::<P>() {
            for n in [5000, 100_003] {
                let drops: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                let mut v = tracked::<P>("random", n, &drops);
                let calls = AtomicUsize::new(0);
                let is_less = |a: &Tracked<P>, b: &Tracked<P>| {
                    let c = calls.fetch_add(1, Ordering::Relaxed) as u32;
                    (a.key ^ b.key.rotate_left(7) ^ c.wrapping_mul(0x9E37_79B9)) & 8 != 0
                };
                let _ = panic::catch_unwind(AssertUnwindSafe(|| sort(&mut v, &is_less)));
                check_and_drop(v, &drops, &format!("random order, n = {n}, P = {P}"));
            }
        }
    }

    /// A comparator that answers at random (no order at all): the sorts may panic (std's
    /// leaves detect some violations) but must leave a permutation and drop nothing twice.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri: see small_parallel_sorts")]
    fn inconsistent_comparator_leaves_a_permutation() {
        with_pools(|| {
            random_order::<0>();
            random_order::<2>();
            random_order::<12>();
        });
    }

    /// `magpie-bench bounds`' view of the unstable sort: the pieces `recurse` cuts, timed
    /// one after the other. The tree must be the sort's (a binary tree in which every piece
    /// is split in two or sorted whole, pieces no longer than the grain at the leaves), and
    /// the sort must be done.
    #[test]
    fn the_timed_tree_sorts_and_records_every_piece() {
        let len = 200_000u32;
        let mut v: Vec<u32> = (0..len).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let mut expect = v.clone();
        expect.sort_unstable();
        let (own_ns, children) = timed_tree(&mut v, 4);
        assert_eq!(v, expect);
        assert_eq!(own_ns.len(), children.len());
        let mut parents = vec![0usize; children.len()];
        for (piece, halves) in children.iter().enumerate() {
            assert!(
                halves.is_empty() || halves.len() == 2,
                "piece {piece}: {halves:?}"
            );
            for &half in halves {
                assert!(half as usize > piece, "a half comes after its piece");
                parents[half as usize] += 1;
            }
        }
        assert_eq!(parents[0], 0, "the root is nobody's half");
        assert!(
            parents[1..].iter().all(|&n| n == 1),
            "every other piece is one half"
        );
        // Pieces of at most max(200,000 / 64, MIN_PARALLEL) = 4,096 at the leaves: at least
        // 49 of them.
        let leaves = children.iter().filter(|h| h.is_empty()).count();
        assert!(leaves >= len as usize / MIN_PARALLEL, "{leaves} leaves");
    }
}
