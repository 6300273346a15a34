//! `zip`: two indexed iterators in lockstep, as long as the shorter one. Both producers are
//! cut at the same indices.

use crate::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`IndexedParallelIterator::zip`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Zip;
/// use magpie::prelude::*;
///
/// let names = ["ann", "bob", "cy"];
/// let ages = [31, 27];
/// let pairs: Zip<_, _> = names.par_iter().zip(&ages);
/// assert_eq!(pairs.len(), 2); // as long as the shorter side
/// assert_eq!(pairs.collect::<Vec<_>>(), [(&"ann", &31), (&"bob", &27)]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Zip<A, B> {
    a: A,
    b: B,
}

impl<A, B> Zip<A, B> {
    pub(crate) fn new(a: A, b: B) -> Self {
        Zip { a, b }
    }
}

impl<A, B> ParallelIterator for Zip<A, B>
where
    A: IndexedParallelIterator,
    B: IndexedParallelIterator,
{
    type Item = (A::Item, B::Item);

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

impl<A, B> IndexedParallelIterator for Zip<A, B>
where
    A: IndexedParallelIterator,
    B: IndexedParallelIterator,
{
    fn len(&self) -> usize {
        self.a.len().min(self.b.len())
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
        return self.a.with_producer(CallbackA {
            callback,
            b: self.b,
        });

        struct CallbackA<CB, B> {
            callback: CB,
            b: B,
        }

        impl<CB, B, ItemA> ProducerCallback<ItemA> for CallbackA<CB, B>
        where
            B: IndexedParallelIterator,
            CB: ProducerCallback<(ItemA, B::Item)>,
        {
            type Output = CB::Output;

            fn callback<PA>(self, a: PA) -> CB::Output
            where
                PA: Producer<Item = ItemA>,
            {
                self.b.with_producer(CallbackB {
                    a,
                    callback: self.callback,
                })
            }
        }

        struct CallbackB<CB, PA> {
            a: PA,
            callback: CB,
        }

        impl<CB, PA, ItemB> ProducerCallback<ItemB> for CallbackB<CB, PA>
        where
            PA: Producer,
            CB: ProducerCallback<(PA::Item, ItemB)>,
        {
            type Output = CB::Output;

            fn callback<PB>(self, b: PB) -> CB::Output
            where
                PB: Producer<Item = ItemB>,
            {
                self.callback.callback(ZipProducer { a: self.a, b })
            }
        }
    }
}

struct ZipProducer<A, B> {
    a: A,
    b: B,
}

impl<A, B> Producer for ZipProducer<A, B>
where
    A: Producer,
    B: Producer,
{
    type Item = (A::Item, B::Item);
    type IntoIter = std::iter::Zip<A::IntoIter, B::IntoIter>;

    fn into_iter(self) -> Self::IntoIter {
        self.a.into_iter().zip(self.b.into_iter())
    }

    fn min_len(&self) -> usize {
        self.a.min_len().max(self.b.min_len())
    }

    fn max_len(&self) -> usize {
        self.a.max_len().min(self.b.max_len())
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        let (a_left, a_right) = self.a.split_at(index);
        let (b_left, b_right) = self.b.split_at(index);
        (
            ZipProducer {
                a: a_left,
                b: b_left,
            },
            ZipProducer {
                a: a_right,
                b: b_right,
            },
        )
    }
}
