//! `with_min_len` and `with_max_len`: bounds on the pieces the bridge cuts.

use crate::iter::plumbing::{
    bridge, Consumer, Folder, Producer, ProducerCallback, UnindexedConsumer,
};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`IndexedParallelIterator::with_min_len`].
///
/// # Examples
///
/// ```
/// use magpie::iter::MinLen;
/// use magpie::prelude::*;
///
/// let whole: MinLen<_> = (0..1000u32).into_par_iter().with_min_len(1000);
/// // Too short to cut in two pieces of 1000: one piece, which `fold` shows.
/// let pieces: Vec<usize> = whole.fold(|| 0, |n, _| n + 1).collect();
/// assert_eq!(pieces, [1000]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct MinLen<I> {
    base: I,
    min: usize,
}

/// The iterator returned by [`IndexedParallelIterator::with_max_len`].
///
/// # Examples
///
/// ```
/// use magpie::iter::MaxLen;
/// use magpie::prelude::*;
///
/// let bounded: MaxLen<_> = (0..1000u32).into_par_iter().with_max_len(100);
/// let pieces: Vec<usize> = bounded.fold(|| 0, |n, _| n + 1).collect();
/// assert!(pieces.iter().all(|&n| n <= 100));
/// assert_eq!(pieces.iter().sum::<usize>(), 1000);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct MaxLen<I> {
    base: I,
    max: usize,
}

impl<I> MinLen<I> {
    pub(crate) fn new(base: I, min: usize) -> Self {
        MinLen { base, min }
    }
}

impl<I> MaxLen<I> {
    pub(crate) fn new(base: I, max: usize) -> Self {
        MaxLen { base, max }
    }
}

/// Which bound a [`BoundedProducer`] changes.
#[derive(Clone, Copy)]
enum Bound {
    Min(usize),
    Max(usize),
}

macro_rules! bounded_iterator {
    ($name:ident, $field:ident, $bound:ident) => {
        impl<I> ParallelIterator for $name<I>
        where
            I: IndexedParallelIterator,
        {
            type Item = I::Item;

            fn drive_unindexed<C>(self, consumer: C) -> C::Result
            where
                C: UnindexedConsumer<I::Item>,
            {
                bridge(self, consumer)
            }

            fn opt_len(&self) -> Option<usize> {
                Some(self.base.len())
            }
        }

        impl<I> IndexedParallelIterator for $name<I>
        where
            I: IndexedParallelIterator,
        {
            fn len(&self) -> usize {
                self.base.len()
            }

            fn drive<C>(self, consumer: C) -> C::Result
            where
                C: Consumer<I::Item>,
            {
                bridge(self, consumer)
            }

            fn with_producer<CB>(self, callback: CB) -> CB::Output
            where
                CB: ProducerCallback<I::Item>,
            {
                self.base.with_producer(Callback {
                    callback,
                    bound: Bound::$bound(self.$field),
                })
            }
        }
    };
}

bounded_iterator!(MinLen, min, Min);
bounded_iterator!(MaxLen, max, Max);

struct Callback<CB> {
    callback: CB,
    bound: Bound,
}

impl<T, CB> ProducerCallback<T> for Callback<CB>
where
    CB: ProducerCallback<T>,
{
    type Output = CB::Output;

    fn callback<P>(self, base: P) -> CB::Output
    where
        P: Producer<Item = T>,
    {
        self.callback.callback(BoundedProducer {
            base,
            bound: self.bound,
        })
    }
}

struct BoundedProducer<P> {
    base: P,
    bound: Bound,
}

impl<P> Producer for BoundedProducer<P>
where
    P: Producer,
{
    type Item = P::Item;
    type IntoIter = P::IntoIter;

    fn into_iter(self) -> P::IntoIter {
        self.base.into_iter()
    }

    fn min_len(&self) -> usize {
        match self.bound {
            Bound::Min(min) => self.base.min_len().max(min),
            Bound::Max(_) => self.base.min_len(),
        }
    }

    fn max_len(&self) -> usize {
        match self.bound {
            Bound::Min(_) => self.base.max_len(),
            Bound::Max(max) => self.base.max_len().min(max),
        }
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(index);
        (
            BoundedProducer {
                base: left,
                bound: self.bound,
            },
            BoundedProducer {
                base: right,
                bound: self.bound,
            },
        )
    }

    fn fold_with<F>(self, folder: F) -> F
    where
        F: Folder<P::Item>,
    {
        self.base.fold_with(folder)
    }
}
