//! `Vec::into_par_iter()`: a parallel iterator that moves the items out of a vector.
//!
//! The vector keeps its buffer and forgets its items (its length is set to 0); the items
//! belong to the producer pieces, each of which drops what it did not hand out, whether it
//! finished, stopped early, or is unwinding. The buffer is freed when the iteration returns.
//!
//! # Examples
//!
//! ```
//! use magpie::prelude::*;
//!
//! let names = vec![String::from("ada"), String::from("grace")];
//! let upper: Vec<String> = names.into_par_iter().map(|n| n.to_uppercase()).collect();
//! assert_eq!(upper, ["ADA", "GRACE"]);
//! ```

use std::ptr;

use crate::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

/// A parallel iterator that moves the items out of a `Vec`, made by `into_par_iter()`.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let words = vec![String::from("a"), String::from("bb")];
/// let lengths: Vec<usize> = words.into_par_iter().map(|w| w.len()).collect();
/// assert_eq!(lengths, [1, 2]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct IntoIter<T> {
    vec: Vec<T>,
}

impl<T: Send> IntoParallelIterator for Vec<T> {
    type Item = T;
    type Iter = IntoIter<T>;

    fn into_par_iter(self) -> IntoIter<T> {
        IntoIter { vec: self }
    }
}

impl<T: Send> ParallelIterator for IntoIter<T> {
    type Item = T;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<T>,
    {
        bridge(self, consumer)
    }

    fn opt_len(&self) -> Option<usize> {
        Some(self.vec.len())
    }
}

impl<T: Send> IndexedParallelIterator for IntoIter<T> {
    fn len(&self) -> usize {
        self.vec.len()
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<T>,
    {
        bridge(self, consumer)
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<T>,
    {
        let mut vec = self.vec;
        let len = vec.len();
        // SAFETY: 0 <= capacity, and no slot is left initialized in the vector's view: the
        // items move to the producer below, which drops each one it does not hand out.
        unsafe { vec.set_len(0) };
        // SAFETY: the first `len` slots of the buffer hold initialized items (the vector's
        // length was `len`), nothing else refers to them, and the buffer outlives the
        // producer: `vec` is dropped only after `callback` returns or unwinds.
        let items = unsafe { std::slice::from_raw_parts_mut(vec.as_mut_ptr(), len) };
        callback.callback(DrainProducer { items })
    }
}

/// Owns the items in `items`: they are moved out (by the iterator) or dropped (on drop).
struct DrainProducer<'a, T> {
    items: &'a mut [T],
}

impl<'a, T: Send> Producer for DrainProducer<'a, T> {
    type Item = T;
    type IntoIter = Drain<'a, T>;

    fn into_iter(mut self) -> Drain<'a, T> {
        let items = std::mem::take(&mut self.items);
        Drain {
            iter: items.iter_mut(),
        }
    }

    fn split_at(mut self, index: usize) -> (Self, Self) {
        let items = std::mem::take(&mut self.items);
        let (left, right) = items.split_at_mut(index);
        (
            DrainProducer { items: left },
            DrainProducer { items: right },
        )
    }
}

impl<'a, T> Drop for DrainProducer<'a, T> {
    fn drop(&mut self) {
        let items: *mut [T] = std::mem::take(&mut self.items) as *mut [T];
        // SAFETY: the producer owns its items and has handed none of them out (taking them
        // for `into_iter` or `split_at` leaves `items` empty).
        unsafe { ptr::drop_in_place(items) };
    }
}

/// Moves items out one by one; drops the rest when dropped.
struct Drain<'a, T> {
    iter: std::slice::IterMut<'a, T>,
}

impl<'a, T> Iterator for Drain<'a, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let item: *mut T = self.iter.next()?;
        // SAFETY: the iterator visits each owned item once, and this is the only read of it:
        // it moves out here and is never dropped in place.
        Some(unsafe { item.read() })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}

impl<'a, T> ExactSizeIterator for Drain<'a, T> {}

impl<'a, T> Drop for Drain<'a, T> {
    fn drop(&mut self) {
        let rest: *mut [T] = std::mem::take(&mut self.iter).into_slice() as *mut [T];
        // SAFETY: the items the iterator has not reached are still owned and were never read.
        unsafe { ptr::drop_in_place(rest) };
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use crate::prelude::*;
    use crate::Runtime;
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Counts its drops in a table shared by the test.
    struct Tracked<'a>(usize, &'a [AtomicUsize]);

    impl Drop for Tracked<'_> {
        fn drop(&mut self) {
            self.1[self.0].fetch_add(1, Relaxed);
        }
    }

    fn tracked(drops: &[AtomicUsize]) -> Vec<Tracked<'_>> {
        (0..drops.len()).map(|i| Tracked(i, drops)).collect()
    }

    fn drop_counts(n: usize) -> Vec<AtomicUsize> {
        (0..n).map(|_| AtomicUsize::new(0)).collect()
    }

    fn each_dropped_once(drops: &[AtomicUsize]) -> bool {
        drops.iter().all(|d| d.load(Relaxed) == 1)
    }

    /// The owning producer (`DrainProducer`, `Drain`) and the in-place collect
    /// (`CollectResult`) on two workers, run to the end, stopped early and unwound: every
    /// item is moved or dropped exactly once, and the raw writes stay in their pieces. Sized
    /// for Miri.
    #[test]
    fn drain_and_collect_move_or_drop_each_item_once() {
        const N: usize = 1000;
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        rt.install(|| {
            // Moved out, through `map`, into a collected vector.
            let drops = drop_counts(N);
            let out: Vec<Tracked<'_>> = tracked(&drops).into_par_iter().map(|t| t).collect();
            assert!(out.iter().enumerate().all(|(i, t)| t.0 == i));
            drop(out);
            assert!(each_dropped_once(&drops));

            // `collect_into_vec` over an existing vector's items.
            let drops = drop_counts(N);
            let old = [AtomicUsize::new(0)];
            let mut out = vec![Tracked(0, &old)];
            tracked(&drops).into_par_iter().collect_into_vec(&mut out);
            assert_eq!(old[0].load(Relaxed), 1, "the old item was not dropped once");
            assert_eq!(out.len(), N);
            drop(out);
            assert!(each_dropped_once(&drops));

            // Stopped early: the pieces drop what they did not hand out.
            let drops = drop_counts(N);
            let found = tracked(&drops).into_par_iter().find_any(|t| t.0 == N / 3);
            assert_eq!(found.as_ref().map(|t| t.0), Some(N / 3));
            drop(found);
            assert!(each_dropped_once(&drops));

            // A panic in the middle: the pieces drop their untaken items, the collect
            // results drop what they wrote.
            let drops = drop_counts(N);
            let result = panic::catch_unwind(AssertUnwindSafe(|| {
                tracked(&drops)
                    .into_par_iter()
                    .map(|t| {
                        assert!(t.0 != N / 2, "a map panics on purpose");
                        t
                    })
                    .collect::<Vec<_>>()
            }));
            assert!(result.is_err());
            assert!(each_dropped_once(&drops));
        });
    }
}
