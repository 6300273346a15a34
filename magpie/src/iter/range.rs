//! `(a..b).into_par_iter()` for the primitive integer types.
//!
//! # Examples
//!
//! ```
//! use magpie::prelude::*;
//!
//! let evens: Vec<i64> = (-4..5i64).into_par_iter().filter(|x| x % 2 == 0).collect();
//! assert_eq!(evens, [-4, -2, 0, 2, 4]);
//! assert_eq!((10..0u8).into_par_iter().count(), 0); // empty, as `10..0` is
//! ```

use std::ops::Range;

use crate::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

/// A parallel iterator over a range of integers, made by `into_par_iter()`.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let squares: u64 = (0..1000u64).into_par_iter().map(|i| i * i).sum();
/// assert_eq!(squares, (0..1000u64).map(|i| i * i).sum());
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Iter<T> {
    range: Range<T>,
}

struct RangeProducer<T> {
    range: Range<T>,
}

macro_rules! parallel_range {
    ($($t:ty),*) => {$(
        impl IntoParallelIterator for Range<$t> {
            type Item = $t;
            type Iter = Iter<$t>;

            fn into_par_iter(self) -> Iter<$t> {
                Iter { range: self }
            }
        }

        impl ParallelIterator for Iter<$t> {
            type Item = $t;

            fn drive_unindexed<C>(self, consumer: C) -> C::Result
            where
                C: UnindexedConsumer<$t>,
            {
                bridge(self, consumer)
            }

            fn opt_len(&self) -> Option<usize> {
                Some(self.len())
            }
        }

        impl IndexedParallelIterator for Iter<$t> {
            fn len(&self) -> usize {
                let Range { start, end } = self.range;
                if start >= end {
                    return 0;
                }
                // Widened so that the difference of any two values fits.
                let len = end as i128 - start as i128;
                usize::try_from(len).expect("into_par_iter: the range is longer than usize::MAX")
            }

            fn drive<C>(self, consumer: C) -> C::Result
            where
                C: Consumer<$t>,
            {
                bridge(self, consumer)
            }

            fn with_producer<CB>(self, callback: CB) -> CB::Output
            where
                CB: ProducerCallback<$t>,
            {
                let range = if self.range.start < self.range.end {
                    self.range
                } else {
                    self.range.start..self.range.start
                };
                callback.callback(RangeProducer { range })
            }
        }

        impl Producer for RangeProducer<$t> {
            type Item = $t;
            type IntoIter = Range<$t>;

            fn into_iter(self) -> Range<$t> {
                self.range
            }

            fn split_at(self, index: usize) -> (Self, Self) {
                // `index` fits the range, so start + index does not overflow; the wrapping
                // add is for signed types, where `index as $t` alone may wrap.
                let mid = self.range.start.wrapping_add(index as $t);
                (
                    RangeProducer { range: self.range.start..mid },
                    RangeProducer { range: mid..self.range.end },
                )
            }
        }
    )*};
}

parallel_range!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);
