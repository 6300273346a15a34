//! `copied` and `cloned`: a `map` by another name, with a type users can write down.

use super::map::{Map, MapConsumer};
use crate::iter::plumbing::{Consumer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`ParallelIterator::copied`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Copied;
/// use magpie::prelude::*;
///
/// let values = [1.5f64, 2.5];
/// let copied: Copied<_> = values.par_iter().copied();
/// assert_eq!(copied.sum::<f64>(), 4.0);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Copied<I> {
    base: I,
}

/// The iterator returned by [`ParallelIterator::cloned`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Cloned;
/// use magpie::prelude::*;
///
/// let tags = vec![String::from("x"), String::from("y")];
/// let owned: Cloned<_> = tags.par_iter().cloned();
/// let suffixed: Vec<String> = owned.map(|t| t + "!").collect();
/// assert_eq!(suffixed, ["x!", "y!"]);
/// assert_eq!(tags.len(), 2); // still there
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Cloned<I> {
    base: I,
}

impl<I> Copied<I> {
    pub(crate) fn new(base: I) -> Self {
        Copied { base }
    }
}

impl<I> Cloned<I> {
    pub(crate) fn new(base: I) -> Self {
        Cloned { base }
    }
}

fn copy<T: Copy>(item: &T) -> T {
    *item
}

fn clone<T: Clone>(item: &T) -> T {
    item.clone()
}

impl<'a, T, I> ParallelIterator for Copied<I>
where
    I: ParallelIterator<Item = &'a T>,
    T: 'a + Copy + Send + Sync,
{
    type Item = T;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<T>,
    {
        self.base
            .drive_unindexed(MapConsumer::new(consumer, &copy::<T>))
    }

    fn opt_len(&self) -> Option<usize> {
        self.base.opt_len()
    }
}

impl<'a, T, I> IndexedParallelIterator for Copied<I>
where
    I: IndexedParallelIterator<Item = &'a T>,
    T: 'a + Copy + Send + Sync,
{
    fn len(&self) -> usize {
        self.base.len()
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<T>,
    {
        self.base.drive(MapConsumer::new(consumer, &copy::<T>))
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<T>,
    {
        Map::new(self.base, copy::<T>).with_producer(callback)
    }
}

impl<'a, T, I> ParallelIterator for Cloned<I>
where
    I: ParallelIterator<Item = &'a T>,
    T: 'a + Clone + Send + Sync,
{
    type Item = T;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<T>,
    {
        self.base
            .drive_unindexed(MapConsumer::new(consumer, &clone::<T>))
    }

    fn opt_len(&self) -> Option<usize> {
        self.base.opt_len()
    }
}

impl<'a, T, I> IndexedParallelIterator for Cloned<I>
where
    I: IndexedParallelIterator<Item = &'a T>,
    T: 'a + Clone + Send + Sync,
{
    fn len(&self) -> usize {
        self.base.len()
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<T>,
    {
        self.base.drive(MapConsumer::new(consumer, &clone::<T>))
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<T>,
    {
        Map::new(self.base, clone::<T>).with_producer(callback)
    }
}
