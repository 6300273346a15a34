//! The stable sort: parallel merge sort with a buffer (see the parent module).

use crate::sync::atomic::Relaxed;
use crate::sync::AtomicBool;
use std::mem::{self, MaybeUninit};
use std::ptr;
use std::slice;

use super::{ordering, sorted_or_reversed, MIN_PARALLEL};

/// Leaf pieces per worker, at least (then rounded up to an even number of levels). More
/// even out unequal progress but add merge levels, each a pass over the whole slice, and
/// shrink the leaves, changing what driftsort sees as a run: with 2 workers and 10^7 `u32`,
/// 4 per worker sorts random input 4% faster than 2, but takes a sawtooth of 1000-long runs
/// (1000 distinct values) twice as long, merging runs where it would otherwise partition.
const LEAVES_PER_WORKER: usize = 2;

/// Leaves are at least this long, whatever the number of workers.
const MIN_LEAF: usize = 1 << 12;

/// Merges of up to this many elements run on one thread.
const MIN_MERGE_GRAIN: usize = 1 << 12;

/// Sorts `v` by `is_less`, preserving the order of equal elements, in parallel on the
/// current runtime. O(n log n) comparisons in the worst case; allocates a buffer of
/// `v.len()` elements (and std's `sort_by` its own for each leaf).
pub(crate) fn par_mergesort<T, F>(v: &mut [T], is_less: &F)
where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
{
    let len = v.len();
    if mem::size_of::<T>() == 0 || len <= MIN_PARALLEL {
        v.sort_by(ordering(is_less));
        return;
    }
    let workers = crate::current_num_workers();
    if workers == 1 {
        v.sort_by(ordering(is_less));
        return;
    }
    if sorted_or_reversed(v, is_less, true) {
        return;
    }
    // Halve `levels` times: an even number of levels puts the final merge into `v` with no
    // copy at the leaves.
    let wanted = (workers * LEAVES_PER_WORKER)
        .next_power_of_two()
        .trailing_zeros();
    let mut levels = wanted + (wanted & 1);
    while levels > 0 && len >> levels < MIN_LEAF {
        levels -= 1;
    }
    if levels == 0 {
        v.sort_by(ordering(is_less));
        return;
    }
    let merge_grain = (len / (4 * workers)).max(MIN_MERGE_GRAIN);
    let mut buf: Vec<MaybeUninit<T>> = Vec::with_capacity(len);
    let ctx = Ctx {
        is_less,
        merge_grain,
    };
    // SAFETY: `buf` has room for `len` elements, is a fresh allocation (disjoint from `v`)
    // and is used by nothing else until it is dropped, after the call; it holds only
    // bitwise copies, never dropped (`MaybeUninit`).
    unsafe { sort_into(v, Raw(buf.as_mut_ptr().cast::<T>()), levels, false, &ctx) };
}

/// What every level of the recursion shares.
struct Ctx<'f, F> {
    is_less: &'f F,
    merge_grain: usize,
}

/// A raw pointer into the slice or the buffer, sent to the thread that works on that part.
struct Raw<T>(*mut T);

impl<T> Clone for Raw<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Raw<T> {}

impl<T> Raw<T> {
    /// # Safety
    ///
    /// As for `pointer::add`: the result stays within the same allocation.
    unsafe fn add(self, n: usize) -> Raw<T> {
        // SAFETY: the caller's.
        Raw(unsafe { self.0.add(n) })
    }
}

// SAFETY: a `Raw` is only dereferenced by one thread at a time for any given element (the
// pieces handed to the two sides of a `join` are disjoint), which is what `T: Send` allows.
unsafe impl<T: Send> Send for Raw<T> {}
// SAFETY: as above; a shared `Raw` is only copied, never dereferenced through the reference.
unsafe impl<T: Send> Sync for Raw<T> {}

/// Sorts `v` stably. On return the sorted elements are in `buf[..v.len()]` if `into_buf`
/// (and `v`'s slots are stale copies, logically moved out), else in `v`. If it panics, `v`
/// holds every element exactly once and `buf` holds none.
///
/// # Safety
///
/// `buf` is valid for writes of `v.len()` elements, disjoint from `v`, and accessed by
/// nothing else during the call.
unsafe fn sort_into<T, F>(v: &mut [T], buf: Raw<T>, levels: u32, into_buf: bool, ctx: &Ctx<'_, F>)
where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
{
    let len = v.len();
    if levels == 0 {
        v.sort_by(ordering(ctx.is_less));
        if into_buf {
            // SAFETY: the caller's contract on `buf`; the copies move the elements out of
            // `v` logically, as the contract says.
            unsafe { ptr::copy_nonoverlapping(v.as_ptr(), buf.0, len) };
        }
        return;
    }
    // Children leave their results where this level's merge reads them: the other place.
    let children_into_buf = !into_buf;
    let mid = len / 2;
    let base = Raw(v.as_mut_ptr());
    let done = [AtomicBool::new(false), AtomicBool::new(false)];
    // If one child panics, a child that finished into the buffer is copied back to `v`.
    let recall = children_into_buf.then(|| Recall {
        v: base,
        buf,
        mid,
        len,
        done: &done,
    });
    // SAFETY: the two halves of `v`, derived from the same raw pointer that `recall` and the
    // merge below use after the children are done with their halves.
    let (left, right) = unsafe {
        (
            slice::from_raw_parts_mut(base.0, mid),
            slice::from_raw_parts_mut(base.add(mid).0, len - mid),
        )
    };
    // SAFETY (of the `buf` halves in both closures): `buf[..mid]` and `buf[mid..len]` are
    // disjoint parts of the caller's buffer, each given to one child.
    crate::join(
        || {
            // SAFETY: see above.
            unsafe { sort_into(left, buf, levels - 1, children_into_buf, ctx) };
            done[0].store(true, Relaxed);
        },
        || {
            // SAFETY: see above.
            unsafe { sort_into(right, buf.add(mid), levels - 1, children_into_buf, ctx) };
            done[1].store(true, Relaxed);
        },
    );
    mem::forget(recall);
    let (src, dest) = if children_into_buf {
        (buf, base)
    } else {
        (base, buf)
    };
    // SAFETY: the sorted halves are `src[..mid]` and `src[mid..len]`; `dest` has room for
    // `len` and is the other allocation. Merging into the buffer leaves `v` untouched, so a
    // panic leaves every element in `v`; merging into `v` fills `v` completely even on a
    // panic (`par_merge`'s contract), so the same holds.
    unsafe { par_merge(src, mid, src.add(mid), len - mid, dest, ctx) };
}

/// Copies back to `v` the halves whose sort finished into the buffer, on unwind.
struct Recall<'a, T> {
    v: Raw<T>,
    buf: Raw<T>,
    mid: usize,
    len: usize,
    done: &'a [AtomicBool; 2],
}

impl<T> Drop for Recall<'_, T> {
    fn drop(&mut self) {
        let halves = [(0, self.mid), (self.mid, self.len)];
        for (done, (start, end)) in self.done.iter().zip(halves) {
            if done.load(Relaxed) {
                // SAFETY: a half marked done holds its sorted elements in `buf[start..end]`
                // and stale copies in `v[start..end]`; the other half left its own elements
                // in `v` (`sort_into`'s contract), so copying back restores the permutation.
                unsafe {
                    ptr::copy_nonoverlapping(
                        self.buf.0.add(start),
                        self.v.0.add(start),
                        end - start,
                    )
                };
            }
        }
    }
}

/// Merges the sorted runs `left[..nl]` and `right[..nr]` stably (of equal elements, those of
/// `left` first) into `dest[..nl + nr]`, in parallel for long runs. The runs are only read.
/// Even if it panics, `dest[..nl + nr]` ends holding a bitwise copy of every input element
/// exactly once.
///
/// # Safety
///
/// The runs are initialised, `dest` is valid for `nl + nr` writes, does not overlap them,
/// and nothing else accesses any of them during the call.
unsafe fn par_merge<T, F>(
    left: Raw<T>,
    nl: usize,
    right: Raw<T>,
    nr: usize,
    dest: Raw<T>,
    ctx: &Ctx<'_, F>,
) where
    T: Send,
    F: Fn(&T, &T) -> bool + Sync,
{
    // Should a comparison panic, `fill` copies the runs to `dest` as they are, over whatever
    // the merge wrote so far: the runs are only read, so they are still intact.
    let fill = Fill {
        left,
        nl,
        right,
        nr,
        dest,
    };
    if nl + nr <= ctx.merge_grain {
        // SAFETY: the caller's contract.
        unsafe {
            seq_merge(
                left.0.cast_const(),
                nl,
                right.0.cast_const(),
                nr,
                dest.0,
                ctx.is_less,
            )
        };
        mem::forget(fill);
        return;
    }
    // SAFETY: the runs are initialised and only read while these borrows live.
    let (l, r) = unsafe {
        (
            slice::from_raw_parts(left.0.cast_const(), nl),
            slice::from_raw_parts(right.0.cast_const(), nr),
        )
    };
    let is_less = ctx.is_less;
    // Split the longer run at its midpoint `p`; the other run splits before its first
    // element that must follow `p`: one not less than `p` if `p` is from the left run (equal
    // elements of the left run come first), one greater than `p` if from the right run.
    let (lm, rm) = if nl >= nr {
        let lm = nl / 2;
        (lm, r.partition_point(|x| is_less(x, &l[lm])))
    } else {
        let rm = nr / 2;
        (l.partition_point(|x| !is_less(&r[rm], x)), rm)
    };
    mem::forget(fill);
    // SAFETY: the two calls get disjoint parts of both runs (`..lm`/`lm..`, `..rm`/`rm..`)
    // and of `dest` (`..lm + rm`, then the rest), each as long as its inputs together.
    crate::join(
        // SAFETY: see above.
        || unsafe { par_merge(left, lm, right, rm, dest, ctx) },
        // SAFETY: see above.
        || unsafe {
            par_merge(
                left.add(lm),
                nl - lm,
                right.add(rm),
                nr - rm,
                dest.add(lm + rm),
                ctx,
            )
        },
    );
}

/// Copies the runs to `dest` unmerged, on unwind from a comparison of the merge.
struct Fill<T> {
    left: Raw<T>,
    nl: usize,
    right: Raw<T>,
    nr: usize,
    dest: Raw<T>,
}

impl<T> Drop for Fill<T> {
    fn drop(&mut self) {
        // SAFETY: `par_merge`'s contract: the runs are initialised and `dest` has room for
        // both, disjoint from them.
        unsafe {
            ptr::copy_nonoverlapping(self.left.0, self.dest.0, self.nl);
            ptr::copy_nonoverlapping(self.right.0, self.dest.0.add(self.nl), self.nr);
        }
    }
}

/// A merge from the front of two sorted runs into a destination.
///
/// Each element is compared only at its place in its run, only while it is untaken, and is
/// copied out exactly once, when it is taken, after its last comparison. That is what makes
/// the merge sound for every `T`: a comparator that changes an element through a `Cell` (or
/// swaps a `Box` inside one) has its last change in the copy that ends in the output. A
/// merge that also worked from the back (as this module's once did) compares an element its
/// front end may already have copied, and keeps the stale copy (issue 17); std merges from
/// both ends only for `Freeze` types, which stable Rust cannot name.
struct Front<T> {
    left: *const T,
    nl: usize,
    right: *const T,
    nr: usize,
    dest: *mut T,
    /// The next untaken element of each run; the next free slot is `dest[lf + rf]`.
    lf: usize,
    rf: usize,
}

impl<T> Front<T> {
    /// A merge of `left[..nl]` and `right[..nr]` into `dest[..nl + nr]`, nothing taken yet.
    fn new(left: *const T, nl: usize, right: *const T, nr: usize, dest: *mut T) -> Self {
        Front {
            left,
            nl,
            right,
            nr,
            dest,
            lf: 0,
            rf: 0,
        }
    }

    /// How many steps cannot run out of either run, whatever the comparator answers: each
    /// step takes one element, from one run. Zero once a run is exhausted.
    fn safe_steps(&self) -> usize {
        (self.nl - self.lf).min(self.nr - self.rf)
    }

    /// Moves the lesser of the next untaken elements (the left one on ties, for stability)
    /// to the next free slot, without a branch on the comparison.
    ///
    /// # Safety
    ///
    /// `safe_steps() > 0`, and the contract of [`seq_merge`] holds for the runs and `dest`.
    #[inline(always)]
    unsafe fn step<F>(&mut self, is_less: &F)
    where
        F: Fn(&T, &T) -> bool,
    {
        // SAFETY: `safe_steps() > 0` puts `lf < nl` and `rf < nr`, so both reads are of
        // untaken, initialised elements of the runs; `lf + rf < nl + nr`, so the write goes
        // to a free slot of `dest`, which does not overlap the runs. The element copied is
        // the one taken: it is never read again (its index moves past it).
        unsafe {
            let l = self.left.add(self.lf);
            let r = self.right.add(self.rf);
            let take_right = is_less(&*r, &*l);
            let src = if take_right { r } else { l };
            ptr::copy_nonoverlapping(src, self.dest.add(self.lf + self.rf), 1);
            self.rf += take_right as usize;
            self.lf += !take_right as usize;
        }
    }

    /// Runs the merge to its end.
    ///
    /// # Safety
    ///
    /// As for [`seq_merge`].
    unsafe fn finish<F>(&mut self, is_less: &F)
    where
        F: Fn(&T, &T) -> bool,
    {
        loop {
            let steps = self.safe_steps();
            if steps == 0 {
                break;
            }
            for _ in 0..steps {
                // SAFETY: each step lowers `safe_steps()` by at most one, so it stays
                // positive for all `steps` of them; the contract is the caller's.
                unsafe { self.step(is_less) };
            }
        }
        // SAFETY: one run is exhausted; the other's untaken elements, copied once, fill the
        // free slots, which start at `lf + rf` and are exactly as many.
        unsafe {
            let out = self.dest.add(self.lf + self.rf);
            ptr::copy_nonoverlapping(self.left.add(self.lf), out, self.nl - self.lf);
            let out = out.add(self.nl - self.lf);
            ptr::copy_nonoverlapping(self.right.add(self.rf), out, self.nr - self.rf);
        }
    }
}

/// The sequential merge: two independent merges from the front, stepped in turn, so that
/// their chains of loads and comparisons overlap (what a merge from both ends buys, without
/// ever comparing an element already copied; see [`Front`]). A binary search first finds
/// how many elements of each run belong to the first half of the output, the "merge path"
/// split (Odeh, Green, Mwassi, Shmueli and Birk, "Merge Path", 2012): `left[..i]` and
/// `right[..half - i]` merge into `dest[..half]`, the rest into `dest[half..]`. The two
/// merges share no element, so each element is still compared only in its run, while
/// untaken, and copied once. A comparator that is not a strict weak order only misplaces
/// the split: both merges still get runs exactly as long as their part of `dest`.
///
/// Writes `dest` partially if it panics; `par_merge`'s guard then overwrites it.
///
/// # Safety
///
/// As for [`par_merge`].
unsafe fn seq_merge<T, F>(
    left: *const T,
    nl: usize,
    right: *const T,
    nr: usize,
    dest: *mut T,
    is_less: &F,
) where
    F: Fn(&T, &T) -> bool,
{
    let half = (nl + nr) / 2;
    // `left[i]` is among the first `half` of the output if fewer than `half - i` elements of
    // `right` are less than it (equal ones come after it): if `i < half - nr`, or else if
    // `right[half - i - 1]` is not less than it. That holds for a prefix of the `i` in
    // `lo..hi`; the split is the length of that prefix.
    let (mut lo, mut hi) = (half.saturating_sub(nr), half.min(nl));
    while lo < hi {
        let i = lo + (hi - lo) / 2;
        // SAFETY: `lo <= i < hi` gives `i < nl` and `half - nr <= i < half`, so
        // `half - i - 1` is in `0..nr`: both are elements of the runs, which the caller's
        // contract makes initialised; nothing has been copied yet.
        let in_first_half = unsafe { !is_less(&*right.add(half - i - 1), &*left.add(i)) };
        if in_first_half {
            lo = i + 1;
        } else {
            hi = i;
        }
    }
    // `half - nr <= i <= min(half, nl)`: both parts of both runs are in bounds.
    let i = lo;
    let j = half - i;
    let mut first = Front::new(left, i, right, j, dest);
    // SAFETY: `i <= nl`, `j <= nr` and `half <= nl + nr`: the second merge's runs and
    // destination are the rest of the caller's.
    let mut second =
        unsafe { Front::new(left.add(i), nl - i, right.add(j), nr - j, dest.add(half)) };
    loop {
        let steps = first.safe_steps().min(second.safe_steps());
        if steps == 0 {
            break;
        }
        for _ in 0..steps {
            // SAFETY: as in `Front::finish`, both merges have `steps` safe steps; they
            // merge disjoint parts of the runs into disjoint parts of `dest` (the caller's
            // contract covers all of them).
            unsafe {
                first.step(is_less);
                second.step(is_less);
            }
        }
    }
    // SAFETY: as above.
    unsafe {
        first.finish(is_less);
        second.finish(is_less);
    }
}

#[cfg(test)]
mod tests {
    use super::{par_merge, Ctx, Raw};
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A panic anywhere in a parallel merge, the split searches included, still leaves every
    /// input element exactly once in the destination; without one, the merge is stable.
    #[test]
    fn par_merge_fills_dest_even_on_panic() {
        // One pool under Miri: 2 workers, enough for the halves to run on different threads.
        let pools: &[usize] = if cfg!(miri) { &[2] } else { &[1, 2, 4] };
        super::super::tests::with_pools_of(pools, || {
            // Two shapes under Miri: balanced, and lopsided (the split searches' far ends).
            let shapes: &[(usize, usize)] = if cfg!(miri) {
                &[(300, 300), (7, 1000)]
            } else {
                &[(300, 300), (1000, 7), (7, 1000), (0, 500), (999, 1001)]
            };
            for &(nl, nr) in shapes {
                // (key, id): keys repeat across and within the runs.
                let mut left: Vec<(u32, usize)> = (0..nl).map(|i| (i as u32 / 3, i)).collect();
                let mut right: Vec<(u32, usize)> =
                    (0..nr).map(|i| (i as u32 / 2, nl + i)).collect();
                let mut expect: Vec<(u32, usize)> = left.iter().chain(&right).copied().collect();
                expect.sort_by_key(|p| p.0);
                // Under Miri, every 37th panic point of the first 200 (minutes, not hours).
                let step = if cfg!(miri) { 37 } else { 1 };
                for k in (0..200).step_by(step).chain([400, 800, 1500]) {
                    let calls = AtomicUsize::new(0);
                    let is_less = |a: &(u32, usize), b: &(u32, usize)| {
                        if calls.fetch_add(1, Ordering::Relaxed) + 1 == k {
                            panic!("comparator panics on purpose");
                        }
                        a.0 < b.0
                    };
                    let ctx = Ctx {
                        is_less: &is_less,
                        merge_grain: 16,
                    };
                    let mut dest = vec![(u32::MAX, usize::MAX); nl + nr];
                    let (l, r, d) = (
                        Raw(left.as_mut_ptr()),
                        Raw(right.as_mut_ptr()),
                        Raw(dest.as_mut_ptr()),
                    );
                    let result = panic::catch_unwind(AssertUnwindSafe(|| {
                        // SAFETY: the runs and `dest` are distinct vectors of the right
                        // lengths, untouched by anything else during the call.
                        unsafe { par_merge(l, nl, r, nr, d, &ctx) }
                    }));
                    if result.is_ok() {
                        assert!(dest == expect, "nl = {nl}, nr = {nr}");
                    }
                    let mut ids: Vec<usize> = dest.iter().map(|p| p.1).collect();
                    ids.sort_unstable();
                    assert!(
                        ids.into_iter().eq(0..nl + nr),
                        "nl = {nl}, nr = {nr}, k = {k}"
                    );
                }
                // No order at all: the sequential merges' splits are then arbitrary; the
                // result must still be a permutation.
                let calls = AtomicUsize::new(0);
                let random = |a: &(u32, usize), b: &(u32, usize)| {
                    let c = calls.fetch_add(1, Ordering::Relaxed);
                    (a.1 ^ b.1.rotate_left(5) ^ c.wrapping_mul(0x9E37_79B9)) & 4 != 0
                };
                let ctx = Ctx {
                    is_less: &random,
                    merge_grain: 64,
                };
                let mut dest = vec![(u32::MAX, usize::MAX); nl + nr];
                let (l, r, d) = (
                    Raw(left.as_mut_ptr()),
                    Raw(right.as_mut_ptr()),
                    Raw(dest.as_mut_ptr()),
                );
                // SAFETY: as above.
                unsafe { par_merge(l, nl, r, nr, d, &ctx) };
                let mut ids: Vec<usize> = dest.iter().map(|p| p.1).collect();
                ids.sort_unstable();
                assert!(
                    ids.into_iter().eq(0..nl + nr),
                    "random order: nl = {nl}, nr = {nr}"
                );
            }
        });
    }
}
