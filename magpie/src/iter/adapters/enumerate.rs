//! `enumerate`: pairs each item with its index. Each piece of the producer knows its offset.

use crate::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`IndexedParallelIterator::enumerate`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Enumerate;
/// use magpie::prelude::*;
///
/// let letters = ['a', 'b', 'c', 'd'];
/// let numbered: Enumerate<_> = letters.par_iter().enumerate();
/// let every_other: Vec<char> = numbered.filter(|(i, _)| i % 2 == 0).map(|(_, &c)| c).collect();
/// assert_eq!(every_other, ['a', 'c']);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Enumerate<I> {
    base: I,
}

impl<I> Enumerate<I> {
    pub(crate) fn new(base: I) -> Self {
        Enumerate { base }
    }
}

impl<I> ParallelIterator for Enumerate<I>
where
    I: IndexedParallelIterator,
{
    type Item = (usize, I::Item);

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<Self::Item>,
    {
        bridge(self, consumer)
    }

    fn opt_len(&self) -> Option<usize> {
        Some(self.base.len())
    }
}

impl<I> IndexedParallelIterator for Enumerate<I>
where
    I: IndexedParallelIterator,
{
    fn len(&self) -> usize {
        self.base.len()
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
        return self.base.with_producer(Callback { callback });

        struct Callback<CB> {
            callback: CB,
        }

        impl<T, CB> ProducerCallback<T> for Callback<CB>
        where
            CB: ProducerCallback<(usize, T)>,
        {
            type Output = CB::Output;

            fn callback<P>(self, base: P) -> CB::Output
            where
                P: Producer<Item = T>,
            {
                self.callback
                    .callback(EnumerateProducer { base, offset: 0 })
            }
        }
    }
}

struct EnumerateProducer<P> {
    base: P,
    /// The index of this piece's first item in the whole iterator.
    offset: usize,
}

impl<P> Producer for EnumerateProducer<P>
where
    P: Producer,
{
    type Item = (usize, P::Item);
    type IntoIter = Numbered<P::IntoIter>;

    fn into_iter(self) -> Self::IntoIter {
        Numbered {
            base: self.base.into_iter(),
            next: self.offset,
        }
    }

    fn min_len(&self) -> usize {
        self.base.min_len()
    }

    fn max_len(&self) -> usize {
        self.base.max_len()
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (left, right) = self.base.split_at(index);
        (
            EnumerateProducer {
                base: left,
                offset: self.offset,
            },
            EnumerateProducer {
                base: right,
                offset: self.offset + index,
            },
        )
    }
}

/// A piece's items, numbered from its offset. The count moves only after the base yields an
/// item, so the last index of the longest input (`usize::MAX - 1`) is never stepped past:
/// `(offset..).zip(base)` asks the range first, and overflowed after the last item.
struct Numbered<I> {
    base: I,
    /// The index of the next item.
    next: usize,
}

impl<I: Iterator> Iterator for Numbered<I> {
    type Item = (usize, I::Item);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.base.next()?;
        let index = self.next;
        self.next += 1;
        Some((index, item))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.base.size_hint()
    }

    #[inline]
    fn fold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        let mut index = self.next;
        self.base.fold(init, move |acc, item| {
            let acc = f(acc, (index, item));
            index += 1;
            acc
        })
    }
}
