//! The unstable sort: parallel pattern-defeating quicksort (see the parent module).

use std::mem::{self, ManuallyDrop};
use std::ptr;

use super::{ordering, sorted_or_reversed, MIN_PARALLEL};
use crate::util::rand::FastRand;

/// Elements up to this size (in bytes) are partitioned by the branchless cyclic scan, which
/// moves every element but never stalls.
const MAX_CYCLIC_SIZE: usize = 16;

/// Elements up to this size, and larger than [`MAX_CYCLIC_SIZE`], are partitioned in blocks,
/// which moves only the misplaced ones; larger still, by a plain scan from both ends that
/// swaps misplaced pairs, as ipnsort does for large elements (measured on 10^5 to 10^7
/// elements of 4 to 128 bytes).
const MAX_BLOCK_SIZE: usize = 96;

/// Leaf pieces per worker: enough for the pieces of an unlucky split to even out.
const PIECES_PER_WORKER: usize = 16;

/// Sorts `v` by `is_less`, not preserving the order of equal elements, in parallel on the
/// current runtime. O(n log n) comparisons in the worst case; no allocation.
pub(crate) fn par_quicksort<T, F>(v: &mut [T], is_less: &F)
where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
{
    let len = v.len();
    if mem::size_of::<T>() == 0 || len <= MIN_PARALLEL {
        v.sort_unstable_by(ordering(is_less));
        return;
    }
    let workers = crate::current_num_workers();
    if workers == 1 {
        v.sort_unstable_by(ordering(is_less));
        return;
    }
    if sorted_or_reversed(v, is_less, false) {
        return;
    }
    recurse(
        v,
        is_less,
        None,
        limit_for(len),
        grain_for(len, workers),
        &Join,
    );
}

/// The piece below which the sequential sort finishes: enough pieces for each of `workers`
/// to take several.
fn grain_for(len: usize, workers: usize) -> usize {
    (len / workers.saturating_mul(PIECES_PER_WORKER)).max(MIN_PARALLEL)
}

/// pdqsort's bound: about log2(len) badly unbalanced partitions before giving up.
fn limit_for(len: usize) -> u32 {
    usize::BITS - len.leading_zeros()
}

/// How [`recurse`] runs the two halves of a partitioned piece, and what it says of each
/// piece: [`Join`] in a sort; [`Timed`], one after the other with every piece timed, for
/// [`timed_tree`].
trait Fork: Sync {
    /// A piece begins.
    fn begin(&self) {}
    /// The piece was sorted whole, without halves.
    fn leaf(&self) {}
    /// The piece's own work is done: runs its halves.
    fn halves<A, B>(&self, a: A, b: B)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send;
}

/// The halves through `join`, in parallel.
struct Join;

impl Fork for Join {
    #[inline]
    fn halves<A, B>(&self, a: A, b: B)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send,
    {
        crate::join(a, b);
    }
}

/// The halves on this thread, in order, each piece's own time recorded (ns, from its start
/// to its halves or its end) with the pieces it split into.
#[derive(Default)]
struct Timed {
    state: std::sync::Mutex<TimedState>,
}

#[derive(Default)]
struct TimedState {
    own_ns: Vec<u64>,
    children: Vec<Vec<u32>>,
    /// The pieces begun and not yet ended, innermost last, with their starts.
    open: Vec<(u32, std::time::Instant)>,
}

impl Timed {
    fn state(&self) -> std::sync::MutexGuard<'_, TimedState> {
        // Poisoned only if a comparison panicked, and `timed_tree` compares integers.
        self.state.lock().expect("the timed sort does not panic")
    }
}

impl TimedState {
    /// Records the innermost open piece's own time, up to now.
    fn close_own(&mut self) {
        let (piece, start) = *self.open.last().expect("a piece is open");
        self.own_ns[piece as usize] = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    }
}

impl Fork for Timed {
    fn begin(&self) {
        let mut state = self.state();
        let piece = u32::try_from(state.own_ns.len()).expect("fewer than 2^32 pieces");
        state.own_ns.push(0);
        state.children.push(Vec::new());
        if let Some(&(parent, _)) = state.open.last() {
            state.children[parent as usize].push(piece);
        }
        state.open.push((piece, std::time::Instant::now()));
    }

    fn leaf(&self) {
        let mut state = self.state();
        state.close_own();
        state.open.pop();
    }

    fn halves<A, B>(&self, a: A, b: B)
    where
        A: FnOnce() + Send,
        B: FnOnce() + Send,
    {
        self.state().close_own();
        a();
        b();
        self.state().open.pop();
    }
}

/// The task tree of `par_sort_unstable` on `v` as `workers` workers would cut it, run on
/// this thread with every piece timed: each piece's own time (ns: choosing its pivot and
/// partitioning it, or sorting it whole) and the pieces it split into, the root first and
/// every piece before its halves. Leaves `v` sorted. For `magpie-bench bounds`, which
/// schedules the tree on ideal workers; not part of the API. The check for sorted or
/// reversed input that precedes the sort (a parallel scan, stopped at the first pair out of
/// order on random input) is not in the tree.
#[doc(hidden)]
pub fn timed_tree(v: &mut [u32], workers: usize) -> (Vec<u64>, Vec<Vec<u32>>) {
    let timed = Timed::default();
    let len = v.len();
    recurse(
        v,
        &|a: &u32, b: &u32| a < b,
        None,
        limit_for(len),
        grain_for(len, workers.max(1)),
        &timed,
    );
    let state = timed
        .state
        .into_inner()
        .expect("the timed sort does not panic");
    (state.own_ns, state.children)
}

/// Sorts `v`, whose elements are all at least `ancestor` when it is given (the pivot of an
/// enclosing partition, right of which `v` lies). `limit` is how many more badly unbalanced
/// partitions are allowed before a piece goes to the sequential sort.
fn recurse<'a, T, F, K>(
    mut v: &'a mut [T],
    is_less: &F,
    ancestor: Option<&'a mut T>,
    mut limit: u32,
    grain: usize,
    fork: &K,
) where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
    K: Fork,
{
    fork.begin();
    loop {
        let len = v.len();
        if len <= grain || limit == 0 {
            // ipnsort is O(n log n) in the worst case too.
            v.sort_unstable_by(ordering(is_less));
            fork.leaf();
            return;
        }
        let (pivot, equal_left) = choose_pivot(v, is_less, limit);

        // A pivot no greater than the ancestor equals it: every element of `v` is at least
        // the ancestor. Split off all the elements equal to it, which need no more sorting.
        if let Some(a) = ancestor.as_deref() {
            if !is_less(a, &v[pivot]) {
                let equal = partition_equal(v, pivot, is_less);
                // Few equal elements is a badly unbalanced split too: with a comparator
                // that contradicts itself, each round could take off just the pivot, and
                // the rounds would cost O(n^2) without the limit.
                if equal < len / 8 {
                    limit -= 1;
                }
                v = &mut mem::take(&mut v)[equal..];
                continue;
            }
        }

        let mid = partition(v, pivot, equal_left, is_less);
        let (left, rest) = mem::take(&mut v).split_at_mut(mid);
        let (pivot, right) = rest.split_first_mut().expect("the pivot is in `rest`");
        if left.len().min(right.len()) < len / 8 {
            limit -= 1;
        }
        fork.halves(
            || recurse(left, is_less, ancestor, limit, grain, fork),
            || recurse(right, is_less, Some(pivot), limit, grain, fork),
        );
        return;
    }
}

/// The index of a pivot for `v` (at least a few thousand long): the median of an odd sample
/// that grows with the square root of the length, one element drawn at a pseudo-random
/// offset from each of as many equal strides. `seed` varies the draw between the attempts
/// that follow an unbalanced partition.
///
/// Also whether the elements equal to the pivot should go left: when the sample holds many
/// copies of the median, the side that gets them decides the balance (with values 0 to 3
/// in equal numbers and pivot 1, 25% go left without them, 50% with them).
fn choose_pivot<T, F>(v: &[T], is_less: &F, seed: u32) -> (usize, bool)
where
    F: Fn(&T, &T) -> bool,
{
    const MAX_SAMPLE: usize = 255;
    let len = v.len();
    debug_assert!(len >= 64);
    let sqrt = 1usize << ((usize::BITS - len.leading_zeros()) / 2);
    let count = (sqrt / 4).clamp(15, MAX_SAMPLE) | 1;
    let stride = len / count;
    let mut rng = FastRand::new((len as u64) << 8 ^ u64::from(seed));
    let mut sample = [0usize; MAX_SAMPLE];
    for (k, slot) in sample[..count].iter_mut().enumerate() {
        *slot = k * stride + rng.next_u32() as usize % stride;
    }
    let sample = &mut sample[..count];
    let by_value = ordering(is_less);
    sample.sort_unstable_by(|&a, &b| by_value(&v[a], &v[b]));
    // The sample's copies of the median are `sample[lo..hi]`.
    let median = &v[sample[count / 2]];
    let mut lo = count / 2;
    while lo > 0 && !is_less(&v[sample[lo - 1]], median) {
        lo -= 1;
    }
    let mut hi = count / 2 + 1;
    while hi < count && !is_less(median, &v[sample[hi]]) {
        hi += 1;
    }
    (
        sample[count / 2],
        count.abs_diff(2 * hi) < count.abs_diff(2 * lo),
    )
}

/// Partitions `v` around `v[pivot]`: returns `mid` such that `v[mid]` is the pivot,
/// `v[..mid]` are less than it (not greater if `equal_left`), and `v[mid + 1..]` are not
/// less (greater if `equal_left`).
fn partition<T, F>(v: &mut [T], pivot: usize, equal_left: bool, is_less: &F) -> usize
where
    F: Fn(&T, &T) -> bool,
{
    v.swap(0, pivot);
    let (p, rest) = v.split_first_mut().expect("`v` holds the pivot");
    let mid = if equal_left {
        partition_by(rest, |x| !is_less(p, x))
    } else {
        partition_by(rest, |x| is_less(x, p))
    };
    v.swap(0, mid);
    mid
}

/// Partitions `v` around `v[pivot]` into the elements not greater than it (the pivot first)
/// and those greater, and returns how many are not greater. Called when no element is less
/// than the pivot, so the first part is all equal to it.
fn partition_equal<T, F>(v: &mut [T], pivot: usize, is_less: &F) -> usize
where
    F: Fn(&T, &T) -> bool,
{
    v.swap(0, pivot);
    let (p, rest) = v.split_first_mut().expect("`v` holds the pivot");
    1 + partition_by(rest, |x| !is_less(p, x))
}

/// Moves the elements of `v` for which `pred` holds before those for which it does not, and
/// returns how many hold. Scans from both ends first, skipping the prefix that holds and the
/// suffix that does not: on partitioned input (sorted, all equal) they meet and nothing
/// moves. What is left goes to the branchless cyclic scan (small elements) or to the block
/// partition, and is finished by swapping misplaced pairs (larger ones).
fn partition_by<T, P>(v: &mut [T], mut pred: P) -> usize
where
    P: FnMut(&T) -> bool,
{
    // The scans first skip whole chunks, with no branch inside one, then single elements.
    const CHUNK: usize = 32;
    let size = mem::size_of::<T>();
    let (mut l, mut r) = (0, v.len());
    while r - l >= CHUNK && v[l..l + CHUNK].iter().fold(true, |all, x| all & pred(x)) {
        l += CHUNK;
    }
    while r - l >= CHUNK && v[r - CHUNK..r].iter().fold(true, |all, x| all & !pred(x)) {
        r -= CHUNK;
    }
    if size > MAX_CYCLIC_SIZE && size <= MAX_BLOCK_SIZE {
        let (a, b) = partition_blocks(&mut v[l..r], &mut pred);
        (l, r) = (l + a, l + b);
    }
    loop {
        while l < r && pred(&v[l]) {
            l += 1;
        }
        while l < r && !pred(&v[r - 1]) {
            r -= 1;
        }
        if l == r {
            return l;
        }
        if size <= MAX_CYCLIC_SIZE {
            return l + partition_cyclic(&mut v[l..r], &mut pred);
        }
        v.swap(l, r - 1);
        l += 1;
        r -= 1;
    }
}

/// The block partition of Edelkamp and Weiß's BlockQuicksort: read a block at each end of
/// the unpartitioned middle, recording without branches the offsets of the elements on the
/// wrong side, then swap the recorded pairs. Returns `(l, r)` such that `pred` holds on
/// `v[..l]` and not on `v[r..]`; the middle, under two blocks, is left to the caller.
fn partition_blocks<T, P>(v: &mut [T], pred: &mut P) -> (usize, usize)
where
    P: FnMut(&T) -> bool,
{
    const BLOCK: usize = 64;
    let (mut l, mut r) = (0, v.len());
    // Offsets, from `l` up and from `r - 1` down, of the misplaced elements of each block
    // not yet swapped: `left[left_start..][..left_count]`, likewise on the right.
    let (mut left, mut right) = ([0u8; BLOCK], [0u8; BLOCK]);
    let (mut left_start, mut left_count) = (0, 0);
    let (mut right_start, mut right_count) = (0, 0);
    while r - l >= 2 * BLOCK {
        if left_count == 0 {
            left_start = 0;
            for i in 0..BLOCK {
                left[left_count] = i as u8;
                left_count += !pred(&v[l + i]) as usize;
            }
        }
        if right_count == 0 {
            right_start = 0;
            for i in 0..BLOCK {
                right[right_count] = i as u8;
                right_count += pred(&v[r - 1 - i]) as usize;
            }
        }
        let n = left_count.min(right_count);
        for k in 0..n {
            let (a, b) = (left[left_start + k], right[right_start + k]);
            v.swap(l + a as usize, r - 1 - b as usize);
        }
        (left_start, left_count) = (left_start + n, left_count - n);
        (right_start, right_count) = (right_start + n, right_count - n);
        // A block with nothing misplaced left is done; the other keeps its offsets.
        if left_count == 0 {
            l += BLOCK;
        }
        if right_count == 0 {
            r -= BLOCK;
        }
    }
    (l, r)
}

/// Moves the elements of `v` for which `pred` holds before those for which it does not, and
/// returns how many hold. Branchless Lomuto with cyclic moves: the first element is held
/// out, leaving a hole; each step compares the next element `x` and, whatever the outcome,
/// moves the first element of the "false" region into the hole and `x` where that element
/// was, then advances the "true" count by the outcome. Two moves per element, no branch on
/// the comparison.
fn partition_cyclic<T, P>(v: &mut [T], pred: &mut P) -> usize
where
    P: FnMut(&T) -> bool,
{
    let len = v.len();
    if len == 0 {
        return 0;
    }
    let base = v.as_mut_ptr();
    // Invariant between steps, before processing `v[i]`: `v[..count]` hold, `v[count..i - 1]`
    // do not, `v[i - 1]` is the hole and `gap` holds the element taken out of `v[0]`. If
    // `pred` panics, dropping `gap` fills the hole, leaving a permutation of `v`.
    let mut gap = Gap {
        // SAFETY: `len > 0`, so `base` points at `v[0]`, which from now on is a hole that
        // `gap` owns the value of (the invariant above).
        value: ManuallyDrop::new(unsafe { ptr::read(base) }),
        hole: base,
    };
    let mut count = 0;
    for i in 1..len {
        // SAFETY: `count < i < len`, so both pointers are in `v`; `cur` is not the hole
        // (`i - 1`), so `pred` reads an initialised element. `dst` may be the hole itself,
        // hence `ptr::copy`; `cur` and `dst` differ (`count < i`). After the two moves the
        // hole is `v[i]` and the invariant holds for `i + 1` whatever `holds` is.
        unsafe {
            let cur = base.add(i);
            let holds = pred(&*cur);
            let dst = base.add(count);
            ptr::copy(dst, gap.hole, 1);
            ptr::copy_nonoverlapping(cur, dst, 1);
            gap.hole = cur;
            count += holds as usize;
        }
    }
    // The held element, processed like the others; then `gap` fills `v[count]`.
    let holds = pred(&gap.value);
    // SAFETY: `count < len`; the hole is `v[len - 1]` and may be `v[count]` itself.
    unsafe {
        let dst = base.add(count);
        ptr::copy(dst, gap.hole, 1);
        gap.hole = dst;
    }
    drop(gap);
    count + holds as usize
}

/// An element held out of a slice, and the hole it goes back into when dropped.
struct Gap<T> {
    value: ManuallyDrop<T>,
    hole: *mut T,
}

impl<T> Drop for Gap<T> {
    fn drop(&mut self) {
        // SAFETY: `hole` is a slot of the slice being partitioned whose value was moved out
        // (into `value` or elsewhere in the slice), and `value` is written exactly once.
        unsafe { ptr::copy_nonoverlapping(&*self.value, self.hole, 1) }
    }
}
