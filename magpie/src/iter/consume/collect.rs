//! `collect` into a `Vec`, in order.
//!
//! * **Length known** (every adapter indexed): each piece writes its items straight into its
//!   own range of the vector's spare capacity. A [`CollectResult`] owns the items a piece has
//!   written, so a panic drops exactly those. Adjacent results merge as the reduction climbs;
//!   at the top, one result covers the whole range and the vector takes ownership of it by
//!   setting its length.
//! * **Length unknown** (after `filter`, `flat_map`, ...): each piece collects into its own
//!   `Vec`, the reduction links them into a list in order, and the vector appends them at
//!   the end, one copy per item.

use std::collections::LinkedList;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;

use crate::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
use crate::iter::{FromParallelIterator, IndexedParallelIterator, ParallelIterator};

impl<T: Send> FromParallelIterator<T> for Vec<T> {
    fn from_par_iter<I>(iter: I) -> Vec<T>
    where
        I: crate::iter::IntoParallelIterator<Item = T>,
    {
        let iter = iter.into_par_iter();
        let mut vec = Vec::new();
        match iter.opt_len() {
            Some(len) => collect_indexed(iter, len, &mut vec),
            None => append_list(&mut vec, iter.drive_unindexed(ListVecConsumer)),
        }
        vec
    }
}

/// Collects an indexed iterator into `vec`, replacing its contents (the
/// [`collect_into_vec`](IndexedParallelIterator::collect_into_vec) consumer).
pub(crate) fn collect_into_vec<I>(iter: I, vec: &mut Vec<I::Item>)
where
    I: IndexedParallelIterator,
{
    vec.clear();
    let len = iter.len();
    collect_indexed(iter, len, vec);
}

/// Appends the `len` items of `iter` to `vec`. `iter` must drive its consumer with indexed
/// splits only, which `opt_len` returning `Some(len)` promises.
fn collect_indexed<I>(iter: I, len: usize, vec: &mut Vec<I::Item>)
where
    I: ParallelIterator,
{
    vec.reserve(len);
    let start = vec.len();
    // One raw pointer for the whole target, split by offset: a merged `CollectResult`
    // drops (on unwind) slots that another piece wrote, so every piece's pointer must carry
    // the whole target's provenance, not that of a `split_at_mut` part of it.
    let target = vec.spare_capacity_mut()[..len]
        .as_mut_ptr()
        .cast::<I::Item>();
    let result = iter.drive_unindexed(CollectConsumer {
        start: target,
        len,
        marker: PhantomData,
    });
    let written = result.initialized;
    assert_eq!(
        written, len,
        "collect: the iterator promised {len} items and gave {written}"
    );
    // The vector owns the items now: `result` must not drop them.
    std::mem::forget(result);
    // SAFETY: the `len` slots after `start` were written (the assert above, and invariant 1
    // of `CollectResult`: a result covering the whole target with `initialized == len` has
    // written every slot of it), and `start + len <= capacity` by the `reserve` above.
    unsafe { vec.set_len(start + len) };
}

fn append_list<T>(vec: &mut Vec<T>, list: LinkedList<Vec<T>>) {
    vec.reserve(list.iter().map(Vec::len).sum());
    for mut piece in list {
        vec.append(&mut piece);
    }
}

/// Writes items into a range of uninitialized slots: `start .. start + len`, a part of the
/// target of `collect_indexed`, with the provenance of the whole target.
struct CollectConsumer<'c, T> {
    start: *mut T,
    len: usize,
    marker: PhantomData<&'c mut [MaybeUninit<T>]>,
}

// SAFETY: the consumer stands for exclusive access to its slots, like the
// `&mut [MaybeUninit<T>]` it replaces; sending it sends the right to write `T`s there.
unsafe impl<'c, T: Send> Send for CollectConsumer<'c, T> {}

impl<'c, T: Send> Consumer<T> for CollectConsumer<'c, T> {
    type Folder = CollectResult<'c, T>;
    type Reducer = CollectReducer;
    type Result = CollectResult<'c, T>;

    fn split_at(self, index: usize) -> (Self, Self, CollectReducer) {
        assert!(
            index <= self.len,
            "collect: split past the end of the target"
        );
        (
            CollectConsumer {
                start: self.start,
                len: index,
                marker: PhantomData,
            },
            CollectConsumer {
                // SAFETY: `index <= len`: within the target or one past its end.
                start: unsafe { self.start.add(index) },
                len: self.len - index,
                marker: PhantomData,
            },
            CollectReducer,
        )
    }

    fn into_folder(self) -> CollectResult<'c, T> {
        CollectResult {
            start: self.start,
            len: self.len,
            initialized: 0,
            marker: PhantomData,
        }
    }

    fn full(&self) -> bool {
        false
    }

    fn splits_cheaply(&self) -> bool {
        // A cut is a split of the target slots, a reduction a check that two runs of
        // written slots touch.
        true
    }
}

impl<'c, T: Send> UnindexedConsumer<T> for CollectConsumer<'c, T> {
    fn split_off_left(&self) -> Self {
        unreachable!("collect: an iterator with a known length split without an index")
    }

    fn to_reducer(&self) -> CollectReducer {
        CollectReducer
    }
}

/// The items one piece (or several adjacent pieces, once merged) wrote.
///
/// Invariants:
/// 1. the slots `start .. start + initialized` hold items this result owns, and
///    `initialized <= len`;
/// 2. the slots `start .. start + len` belong to this result alone (they came from disjoint
///    splits of one target).
struct CollectResult<'c, T> {
    start: *mut T,
    len: usize,
    initialized: usize,
    marker: PhantomData<&'c mut T>,
}

impl<'c, T> CollectResult<'c, T> {
    #[inline]
    fn push(&mut self, item: T) {
        assert!(
            self.initialized < self.len,
            "collect: the iterator gave more items than it promised"
        );
        // SAFETY: `initialized < len`, so the slot is in this result's range (invariant 2)
        // and not yet written (invariant 1).
        unsafe { self.start.add(self.initialized).write(item) };
        self.initialized += 1;
    }
}

// SAFETY: the result owns the `T`s it wrote (invariant 1) and nothing else, like a `Vec<T>`;
// sending it sends them.
unsafe impl<'c, T: Send> Send for CollectResult<'c, T> {}

impl<'c, T> Folder<T> for CollectResult<'c, T> {
    type Result = Self;

    fn consume(mut self, item: T) -> Self {
        self.push(item);
        self
    }

    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        // `consume` by value would move the whole result through every iteration.
        for item in iter {
            self.push(item);
        }
        self
    }

    fn complete(self) -> Self {
        self
    }

    fn full(&self) -> bool {
        false
    }
}

impl<'c, T> Drop for CollectResult<'c, T> {
    fn drop(&mut self) {
        // Reached only when unwinding (or when a short piece broke the chain; the length
        // check then panics): drop what this piece wrote.
        let written = ptr::slice_from_raw_parts_mut(self.start, self.initialized);
        // SAFETY: invariant 1: these slots hold initialized items owned by this result.
        unsafe { ptr::drop_in_place(written) };
    }
}

struct CollectReducer;

impl<'c, T> Reducer<CollectResult<'c, T>> for CollectReducer {
    fn reduce(
        self,
        mut left: CollectResult<'c, T>,
        right: CollectResult<'c, T>,
    ) -> CollectResult<'c, T> {
        // SAFETY: `left.initialized <= left.len` (invariant 1), so the pointer stays within
        // `left`'s range or one past its end (invariant 2), inside the target allocation.
        let left_end = unsafe { left.start.add(left.initialized) };
        if left.initialized == left.len && left_end == right.start {
            // The two are adjacent and `left` is full: merge, handing `right`'s items over.
            left.len += right.len;
            left.initialized += right.initialized;
            std::mem::forget(right);
        }
        // Otherwise `right` drops its items here, and the final count comes up short.
        left
    }
}

/// Collects each piece into a `Vec`, the pieces into a list in order.
struct ListVecConsumer;

impl<T: Send> Consumer<T> for ListVecConsumer {
    type Folder = ListVecFolder<T>;
    type Reducer = ListReducer;
    type Result = LinkedList<Vec<T>>;

    fn split_at(self, _index: usize) -> (Self, Self, ListReducer) {
        (ListVecConsumer, ListVecConsumer, ListReducer)
    }

    fn into_folder(self) -> ListVecFolder<T> {
        ListVecFolder { vec: Vec::new() }
    }

    fn full(&self) -> bool {
        false
    }
}

impl<T: Send> UnindexedConsumer<T> for ListVecConsumer {
    fn split_off_left(&self) -> Self {
        ListVecConsumer
    }

    fn to_reducer(&self) -> ListReducer {
        ListReducer
    }
}

struct ListVecFolder<T> {
    vec: Vec<T>,
}

impl<T> Folder<T> for ListVecFolder<T> {
    type Result = LinkedList<Vec<T>>;

    fn consume(mut self, item: T) -> Self {
        self.vec.push(item);
        self
    }

    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        self.vec.extend(iter);
        self
    }

    fn complete(self) -> LinkedList<Vec<T>> {
        let mut list = LinkedList::new();
        if !self.vec.is_empty() {
            list.push_back(self.vec);
        }
        list
    }

    fn full(&self) -> bool {
        false
    }
}

struct ListReducer;

impl<T> Reducer<LinkedList<T>> for ListReducer {
    fn reduce(self, mut left: LinkedList<T>, mut right: LinkedList<T>) -> LinkedList<T> {
        left.append(&mut right);
        left
    }
}
