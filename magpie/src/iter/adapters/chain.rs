//! `chain`: one iterator's items, then another's. The two halves run as the two sides of a
//! `join`; indexed when both are.

use crate::iter::plumbing::{
    Consumer, Folder, Producer, ProducerCallback, Reducer, UnindexedConsumer,
};
use crate::iter::{IndexedParallelIterator, ParallelIterator};

/// The iterator returned by [`ParallelIterator::chain`].
///
/// # Examples
///
/// ```
/// use magpie::iter::Chain;
/// use magpie::prelude::*;
///
/// let both: Chain<_, _> = (0..3u8).into_par_iter().chain(10..12u8);
/// assert_eq!(both.len(), 5); // indexed, as both halves are
/// assert_eq!(both.collect::<Vec<_>>(), [0, 1, 2, 10, 11]);
/// ```
#[must_use = "parallel iterators are lazy: call a consumer such as `for_each` or `collect`"]
#[derive(Clone, Debug)]
pub struct Chain<A, B> {
    a: A,
    b: B,
}

impl<A, B> Chain<A, B> {
    pub(crate) fn new(a: A, b: B) -> Self {
        Chain { a, b }
    }
}

impl<A, B> ParallelIterator for Chain<A, B>
where
    A: ParallelIterator,
    B: ParallelIterator<Item = A::Item>,
{
    type Item = A::Item;

    fn drive_unindexed<C>(self, consumer: C) -> C::Result
    where
        C: UnindexedConsumer<A::Item>,
    {
        let Chain { a, b } = self;
        // With `a`'s length known, split at it: an indexed consumer (`collect` into a `Vec`)
        // needs the exact index, and `opt_len` promised one.
        let (left, right, reducer) = match a.opt_len() {
            Some(len) => consumer.split_at(len),
            None => {
                let reducer = consumer.to_reducer();
                (consumer.split_off_left(), consumer, reducer)
            }
        };
        let (a, b) = crate::join(|| a.drive_unindexed(left), || b.drive_unindexed(right));
        reducer.reduce(a, b)
    }

    fn opt_len(&self) -> Option<usize> {
        self.a.opt_len()?.checked_add(self.b.opt_len()?)
    }
}

impl<A, B> IndexedParallelIterator for Chain<A, B>
where
    A: IndexedParallelIterator,
    B: IndexedParallelIterator<Item = A::Item>,
{
    fn len(&self) -> usize {
        self.a
            .len()
            .checked_add(self.b.len())
            .expect("chain: the total length overflows usize")
    }

    fn drive<C>(self, consumer: C) -> C::Result
    where
        C: Consumer<A::Item>,
    {
        let Chain { a, b } = self;
        let (left, right, reducer) = consumer.split_at(a.len());
        let (a, b) = crate::join(|| a.drive(left), || b.drive(right));
        reducer.reduce(a, b)
    }

    fn with_producer<CB>(self, callback: CB) -> CB::Output
    where
        CB: ProducerCallback<A::Item>,
    {
        let a_len = self.a.len();
        return self.a.with_producer(CallbackA {
            callback,
            a_len,
            b: self.b,
        });

        struct CallbackA<CB, B> {
            callback: CB,
            a_len: usize,
            b: B,
        }

        impl<CB, B> ProducerCallback<B::Item> for CallbackA<CB, B>
        where
            B: IndexedParallelIterator,
            CB: ProducerCallback<B::Item>,
        {
            type Output = CB::Output;

            fn callback<PA>(self, a: PA) -> CB::Output
            where
                PA: Producer<Item = B::Item>,
            {
                self.b.with_producer(CallbackB {
                    callback: self.callback,
                    a_len: self.a_len,
                    a,
                })
            }
        }

        struct CallbackB<CB, PA> {
            callback: CB,
            a_len: usize,
            a: PA,
        }

        impl<CB, PA> ProducerCallback<PA::Item> for CallbackB<CB, PA>
        where
            PA: Producer,
            CB: ProducerCallback<PA::Item>,
        {
            type Output = CB::Output;

            fn callback<PB>(self, b: PB) -> CB::Output
            where
                PB: Producer<Item = PA::Item>,
            {
                self.callback.callback(ChainProducer {
                    a_len: self.a_len,
                    a: self.a,
                    b,
                })
            }
        }
    }
}

struct ChainProducer<A, B> {
    /// The number of items in `a`; `b` follows.
    a_len: usize,
    a: A,
    b: B,
}

impl<A, B> Producer for ChainProducer<A, B>
where
    A: Producer,
    B: Producer<Item = A::Item>,
{
    type Item = A::Item;
    type IntoIter = std::iter::Chain<A::IntoIter, B::IntoIter>;

    fn into_iter(self) -> Self::IntoIter {
        self.a.into_iter().chain(self.b.into_iter())
    }

    fn min_len(&self) -> usize {
        self.a.min_len().max(self.b.min_len())
    }

    fn max_len(&self) -> usize {
        self.a.max_len().min(self.b.max_len())
    }

    fn split_at(self, index: usize) -> (Self, Self) {
        if index <= self.a_len {
            let (a_left, a_right) = self.a.split_at(index);
            let (b_left, b_right) = self.b.split_at(0);
            (
                ChainProducer {
                    a_len: index,
                    a: a_left,
                    b: b_left,
                },
                ChainProducer {
                    a_len: self.a_len - index,
                    a: a_right,
                    b: b_right,
                },
            )
        } else {
            let (a_left, a_right) = self.a.split_at(self.a_len);
            let (b_left, b_right) = self.b.split_at(index - self.a_len);
            (
                ChainProducer {
                    a_len: self.a_len,
                    a: a_left,
                    b: b_left,
                },
                ChainProducer {
                    a_len: 0,
                    a: a_right,
                    b: b_right,
                },
            )
        }
    }

    fn fold_with<F>(self, folder: F) -> F
    where
        F: Folder<A::Item>,
    {
        let folder = self.a.fold_with(folder);
        if folder.full() {
            return folder;
        }
        self.b.fold_with(folder)
    }
}
