//! Parallel iterators over slices: [`par_iter`](crate::iter::IntoParallelRefIterator),
//! [`par_iter_mut`](crate::iter::IntoParallelRefMutIterator), [`ParallelSlice::par_chunks`],
//! [`ParallelSliceMut::par_chunks_mut`], and the parallel sorts of [`ParallelSliceMut`].
//!
//! # Examples
//!
//! ```
//! use magpie::prelude::*;
//!
//! let mut pixels = vec![0u8; 12];
//! pixels.par_chunks_mut(3).enumerate().for_each(|(i, px)| px.fill(i as u8));
//! assert_eq!(pixels[9..], [3, 3, 3]);
//! let sums: Vec<u32> = pixels.par_chunks(6).map(|c| c.iter().map(|&b| b as u32).sum()).collect();
//! assert_eq!(sums, [3, 15]);
//! ```

use std::cmp::Ordering;

use crate::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::sort;
use crate::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

/// Parallel methods on shared slices, and so on `Vec`s (through `Deref`) and arrays (which
/// method calls unsize to slices).
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let readings = vec![3, 1, 4, 1, 5, 9, 2, 6];
/// let maxima: Vec<i32> = readings.par_chunks(4).map(|c| *c.iter().max().unwrap()).collect();
/// assert_eq!(maxima, [4, 9]);
/// ```
pub trait ParallelSlice<T: Sync> {
    /// The slice itself.
    ///
    /// # Examples
    ///
    /// Implemented for a type of one's own, it brings the other methods along:
    ///
    /// ```
    /// use magpie::iter::slice::ParallelSlice;
    /// use magpie::prelude::*;
    ///
    /// struct Samples(Vec<f32>);
    ///
    /// impl ParallelSlice<f32> for Samples {
    ///     fn as_parallel_slice(&self) -> &[f32] {
    ///         &self.0
    ///     }
    /// }
    ///
    /// let samples = Samples(vec![1.0, 2.0, 3.0]);
    /// let sums: Vec<f32> = samples.par_chunks(2).map(|c| c.iter().sum()).collect();
    /// assert_eq!(sums, [3.0, 3.0]);
    /// ```
    fn as_parallel_slice(&self) -> &[T];

    /// A parallel iterator over `chunk_size` elements at a time; the last chunk may be
    /// shorter.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let v = [1, 2, 3, 4, 5];
    /// let sums: Vec<i32> = v.par_chunks(2).map(|c| c.iter().sum()).collect();
    /// assert_eq!(sums, [3, 7, 5]);
    /// ```
    fn par_chunks(&self, chunk_size: usize) -> Chunks<'_, T> {
        assert!(chunk_size != 0, "par_chunks: chunk size must be non-zero");
        Chunks {
            chunk_size,
            slice: self.as_parallel_slice(),
        }
    }
}

impl<T: Sync> ParallelSlice<T> for [T] {
    fn as_parallel_slice(&self) -> &[T] {
        self
    }
}

/// Parallel methods on mutable slices: chunks and sorting.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let mut scores = vec![70, 95, 82, 95, 61];
/// scores.par_sort_unstable_by(|a, b| b.cmp(a));
/// assert_eq!(scores, [95, 95, 82, 70, 61]);
/// scores.par_chunks_mut(2).for_each(|pair| pair.reverse());
/// assert_eq!(scores, [95, 95, 70, 82, 61]);
/// ```
pub trait ParallelSliceMut<T: Send> {
    /// The slice itself.
    ///
    /// # Examples
    ///
    /// Implemented for a type of one's own, it brings the sorts and `par_chunks_mut` along:
    ///
    /// ```
    /// use magpie::iter::slice::ParallelSliceMut;
    ///
    /// struct Leaderboard(Vec<(u32, &'static str)>);
    ///
    /// impl ParallelSliceMut<(u32, &'static str)> for Leaderboard {
    ///     fn as_parallel_slice_mut(&mut self) -> &mut [(u32, &'static str)] {
    ///         &mut self.0
    ///     }
    /// }
    ///
    /// let mut board = Leaderboard(vec![(7, "kim"), (9, "ana"), (7, "bo")]);
    /// board.par_sort_by_key(|&(points, _)| std::cmp::Reverse(points));
    /// assert_eq!(board.0, [(9, "ana"), (7, "kim"), (7, "bo")]); // stable: kim before bo
    /// ```
    fn as_parallel_slice_mut(&mut self) -> &mut [T];

    /// A parallel iterator over `chunk_size` elements at a time, mutably; the last chunk may
    /// be shorter.
    ///
    /// # Panics
    ///
    /// If `chunk_size` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = [1, 2, 3, 4, 5];
    /// v.par_chunks_mut(2).for_each(|c| c.reverse());
    /// assert_eq!(v, [2, 1, 4, 3, 5]);
    /// ```
    fn par_chunks_mut(&mut self, chunk_size: usize) -> ChunksMut<'_, T> {
        assert!(
            chunk_size != 0,
            "par_chunks_mut: chunk size must be non-zero"
        );
        ChunksMut {
            chunk_size,
            slice: self.as_parallel_slice_mut(),
        }
    }

    /// Sorts the slice in parallel, keeping equal elements in their order (stable): a
    /// parallel merge sort.
    ///
    /// Allocates a buffer as large as the slice. Already sorted, reversed and all-equal
    /// slices take one parallel pass.
    ///
    /// # Panics
    ///
    /// If `Ord` panics; the slice then holds its elements in some order, each exactly once.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![5, 4, 1, 3, 2];
    /// v.par_sort();
    /// assert_eq!(v, [1, 2, 3, 4, 5]);
    /// ```
    fn par_sort(&mut self)
    where
        T: Ord,
    {
        sort::par_mergesort(self.as_parallel_slice_mut(), &T::lt);
    }

    /// Sorts the slice in parallel with a comparator, stably. See [`par_sort`](Self::par_sort).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![5, 4, 1, 3, 2];
    /// v.par_sort_by(|a, b| b.cmp(a));
    /// assert_eq!(v, [5, 4, 3, 2, 1]);
    /// ```
    fn par_sort_by<F>(&mut self, compare: F)
    where
        F: Fn(&T, &T) -> Ordering + Sync,
    {
        sort::par_mergesort(self.as_parallel_slice_mut(), &|a: &T, b: &T| {
            compare(a, b) == Ordering::Less
        });
    }

    /// Sorts the slice in parallel by a key, stably. The key is computed at every comparison.
    /// See [`par_sort`](Self::par_sort).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![(1, 'b'), (0, 'z'), (1, 'a')];
    /// v.par_sort_by_key(|&(k, _)| k);
    /// assert_eq!(v, [(0, 'z'), (1, 'b'), (1, 'a')]);
    /// ```
    fn par_sort_by_key<K, F>(&mut self, key: F)
    where
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        sort::par_mergesort(self.as_parallel_slice_mut(), &|a: &T, b: &T| {
            key(a) < key(b)
        });
    }

    /// Sorts the slice in parallel without keeping equal elements in order (unstable): a
    /// parallel pattern-defeating quicksort. Sorts in place, without allocating.
    ///
    /// Each piece is partitioned on one thread before its halves fork (a partition shared
    /// between threads would need `T: Sync`), so the partitions at the top bound how fast
    /// it gets with many workers: for random `u32`s they are about a twelfth of the work.
    /// On a 16-CPU machine at 16 workers the stable [`par_sort`](Self::par_sort), whose
    /// merges run in parallel, sorted 10M of them faster (30 against 33 ms), at the price of
    /// a buffer as long as the slice; at 2 workers this sort took 0.6 × its time.
    ///
    /// # Panics
    ///
    /// If `Ord` panics; the slice then holds its elements in some order, each exactly once.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v: Vec<u32> = (0..10_000).rev().collect();
    /// v.par_sort_unstable();
    /// assert!(v.windows(2).all(|w| w[0] <= w[1]));
    /// ```
    fn par_sort_unstable(&mut self)
    where
        T: Ord,
    {
        sort::par_quicksort(self.as_parallel_slice_mut(), &T::lt);
    }

    /// Sorts the slice in parallel with a comparator, unstably. See
    /// [`par_sort_unstable`](Self::par_sort_unstable).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![1.5, -2.0, 0.25];
    /// v.par_sort_unstable_by(|a: &f64, b| a.total_cmp(b));
    /// assert_eq!(v, [-2.0, 0.25, 1.5]);
    /// ```
    fn par_sort_unstable_by<F>(&mut self, compare: F)
    where
        F: Fn(&T, &T) -> Ordering + Sync,
    {
        sort::par_quicksort(self.as_parallel_slice_mut(), &|a: &T, b: &T| {
            compare(a, b) == Ordering::Less
        });
    }

    /// Sorts the slice in parallel by a key, unstably. See
    /// [`par_sort_unstable`](Self::par_sort_unstable).
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![-5i32, 4, 1, -3, 2];
    /// v.par_sort_unstable_by_key(|x| x.abs());
    /// assert_eq!(v, [1, 2, -3, 4, -5]);
    /// ```
    fn par_sort_unstable_by_key<K, F>(&mut self, key: F)
    where
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        sort::par_quicksort(self.as_parallel_slice_mut(), &|a: &T, b: &T| {
            key(a) < key(b)
        });
    }
}

impl<T: Send> ParallelSliceMut<T> for [T] {
    fn as_parallel_slice_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<'a, T: Sync> IntoParallelIterator for &'a [T] {
    type Item = &'a T;
    type Iter = Iter<'a, T>;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

impl<'a, T: Sync> IntoParallelIterator for &'a Vec<T> {
    type Item = &'a T;
    type Iter = Iter<'a, T>;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

impl<'a, T: Sync, const N: usize> IntoParallelIterator for &'a [T; N] {
    type Item = &'a T;
    type Iter = Iter<'a, T>;

    fn into_par_iter(self) -> Iter<'a, T> {
        Iter { slice: self }
    }
}

impl<'a, T: Send> IntoParallelIterator for &'a mut [T] {
    type Item = &'a mut T;
    type Iter = IterMut<'a, T>;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

impl<'a, T: Send> IntoParallelIterator for &'a mut Vec<T> {
    type Item = &'a mut T;
    type Iter = IterMut<'a, T>;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

impl<'a, T: Send, const N: usize> IntoParallelIterator for &'a mut [T; N] {
    type Item = &'a mut T;
    type Iter = IterMut<'a, T>;

    fn into_par_iter(self) -> IterMut<'a, T> {
        IterMut { slice: self }
    }
}

/// Implements `ParallelIterator` and `IndexedParallelIterator` for a slice iterator whose
/// producer is `$producer { $($field),* }`.
macro_rules! indexed_slice_iterator {
    ($iter:ident <$a:lifetime, $t:ident: $bound:ident>, $item:ty, $producer:ident { $($field:ident),* }) => {
        impl<$a, $t: $bound> ParallelIterator for $iter<$a, $t> {
            type Item = $item;

            fn drive_unindexed<C>(self, consumer: C) -> C::Result
            where
                C: UnindexedConsumer<Self::Item>,
            {
                bridge(self, consumer)
            }

            fn opt_len(&self) -> Option<usize> {
                Some(self.len())
            }
        }

        impl<$a, $t: $bound> IndexedParallelIterator for $iter<$a, $t> {
            fn len(&self) -> usize {
                self.items()
            }

            fn drive<C>(self, consumer: C) -> C::Result
            where
                C: Consumer<Self::Item>,
            {
                bridge(self, consumer)
            }

            fn with_producer<CB>(self, callback: CB) -> CB::Output
            where
                CB: ProducerCallback<Self::Item>,
            {
                callback.callback($producer { $($field: self.$field),* })
            }
        }
    };
}

/// A parallel iterator over `&T` in a slice, made by `par_iter()`.
///
/// # Examples
///
/// ```
/// use magpie::iter::slice::Iter;
/// use magpie::prelude::*;
///
/// let v = vec![1, 2, 3];
/// let iter: Iter<'_, i32> = v.par_iter();
/// assert_eq!(iter.len(), 3);
/// assert_eq!(iter.clone().sum::<i32>(), 6);
/// assert_eq!(iter.max(), Some(&3));
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Debug)]
pub struct Iter<'a, T> {
    slice: &'a [T],
}

impl<'a, T> Clone for Iter<'a, T> {
    fn clone(&self) -> Self {
        Iter { slice: self.slice }
    }
}

indexed_slice_iterator!(Iter<'a, T: Sync>, &'a T, IterProducer { slice });

struct IterProducer<'a, T> {
    slice: &'a [T],
}

impl<'a, T> Iter<'a, T> {
    fn items(&self) -> usize {
        self.slice.len()
    }
}

impl<'a, T: Sync> Producer for IterProducer<'a, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter()
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left, right) = self.slice.split_at(index);
        (IterProducer { slice: left }, IterProducer { slice: right })
    }
}

/// A parallel iterator over `&mut T` in a slice, made by `par_iter_mut()`.
///
/// # Examples
///
/// ```
/// use magpie::iter::slice::IterMut;
/// use magpie::prelude::*;
///
/// let mut v = vec![1, 2, 3];
/// let iter: IterMut<'_, i32> = v.par_iter_mut();
/// iter.for_each(|x| *x *= *x);
/// assert_eq!(v, [1, 4, 9]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Debug)]
pub struct IterMut<'a, T> {
    slice: &'a mut [T],
}

indexed_slice_iterator!(IterMut<'a, T: Send>, &'a mut T, IterMutProducer { slice });

struct IterMutProducer<'a, T> {
    slice: &'a mut [T],
}

impl<'a, T> IterMut<'a, T> {
    fn items(&self) -> usize {
        self.slice.len()
    }
}

impl<'a, T: Send> Producer for IterMutProducer<'a, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.slice.iter_mut()
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left, right) = self.slice.split_at_mut(index);
        (
            IterMutProducer { slice: left },
            IterMutProducer { slice: right },
        )
    }
}

/// A parallel iterator over the chunks of a slice, made by [`ParallelSlice::par_chunks`].
///
/// # Examples
///
/// ```
/// use magpie::iter::slice::Chunks;
/// use magpie::prelude::*;
///
/// let bytes = [1u8, 2, 3, 4, 5];
/// let chunks: Chunks<'_, u8> = bytes.par_chunks(2);
/// assert_eq!(chunks.len(), 3); // the last chunk is shorter
/// let lens: Vec<usize> = chunks.map(|c| c.len()).collect();
/// assert_eq!(lens, [2, 2, 1]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Debug)]
pub struct Chunks<'a, T> {
    chunk_size: usize,
    slice: &'a [T],
}

impl<'a, T> Clone for Chunks<'a, T> {
    fn clone(&self) -> Self {
        Chunks { ..*self }
    }
}

indexed_slice_iterator!(
    Chunks<'a, T: Sync>,
    &'a [T],
    ChunksProducer { chunk_size, slice }
);

struct ChunksProducer<'a, T> {
    chunk_size: usize,
    slice: &'a [T],
}

impl<'a, T> Chunks<'a, T> {
    fn items(&self) -> usize {
        self.slice.len().div_ceil(self.chunk_size)
    }
}

impl<'a, T: Sync> Producer for ChunksProducer<'a, T> {
    type Item = &'a [T];
    type IntoIter = std::slice::Chunks<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.slice.chunks(self.chunk_size)
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let at = index.saturating_mul(self.chunk_size).min(self.slice.len());
        let (left, right) = self.slice.split_at(at);
        let chunk_size = self.chunk_size;
        (
            ChunksProducer {
                chunk_size,
                slice: left,
            },
            ChunksProducer {
                chunk_size,
                slice: right,
            },
        )
    }
}

/// A parallel iterator over the chunks of a slice, mutably, made by
/// [`ParallelSliceMut::par_chunks_mut`].
///
/// # Examples
///
/// ```
/// use magpie::iter::slice::ChunksMut;
/// use magpie::prelude::*;
///
/// let mut rows = vec![0u32; 6];
/// let chunks: ChunksMut<'_, u32> = rows.par_chunks_mut(3);
/// chunks.enumerate().for_each(|(i, row)| row[i] = 1);
/// assert_eq!(rows, [1, 0, 0, 0, 1, 0]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Debug)]
pub struct ChunksMut<'a, T> {
    chunk_size: usize,
    slice: &'a mut [T],
}

indexed_slice_iterator!(
    ChunksMut<'a, T: Send>,
    &'a mut [T],
    ChunksMutProducer { chunk_size, slice }
);

struct ChunksMutProducer<'a, T> {
    chunk_size: usize,
    slice: &'a mut [T],
}

impl<'a, T> ChunksMut<'a, T> {
    fn items(&self) -> usize {
        self.slice.len().div_ceil(self.chunk_size)
    }
}

impl<'a, T: Send> Producer for ChunksMutProducer<'a, T> {
    type Item = &'a mut [T];
    type IntoIter = std::slice::ChunksMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.slice.chunks_mut(self.chunk_size)
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let at = index.saturating_mul(self.chunk_size).min(self.slice.len());
        let (left, right) = self.slice.split_at_mut(at);
        let chunk_size = self.chunk_size;
        (
            ChunksMutProducer {
                chunk_size,
                slice: left,
            },
            ChunksMutProducer {
                chunk_size,
                slice: right,
            },
        )
    }
}
