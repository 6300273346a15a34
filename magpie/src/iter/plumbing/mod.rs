//! The traits under every parallel iterator: producers, consumers, folders and reducers, and
//! the bridge that splits a producer and a consumer in step across the pool.
//!
//! This module is for code that implements its own parallel iterators; code that only uses
//! them never names it. `README.md` beside this file (`magpie/src/iter/plumbing/`) explains
//! the design, with pictures. In short:
//!
//! * A [`Producer`] is a splittable source of items of known length (a slice, a range). It
//!   can be cut at any index ([`Producer::split_at`]) and turned into a sequential iterator.
//! * A [`Consumer`] is the splittable sink the items go to (a sum, a `collect` target). Cut
//!   at the same index as the producer, it yields two consumers and the [`Reducer`] that joins
//!   their results. An [`UnindexedConsumer`] can also be split without an index, for items
//!   whose count is not known in advance (after `filter`, inside `flat_map`).
//! * A [`Folder`] is one consumer's sequential state: it takes items one by one and finally
//!   gives its result.
//! * [`bridge_producer_consumer`] splits both sides with [`join`](crate::join) until each
//!   piece is small enough, folds each piece with its folder, and reduces the results in
//!   order, left with right.
//!
//! # Examples
//!
//! A parallel iterator over the squares `0, 1, 4, .., (n-1)^2`, written from scratch:
//!
//! ```
//! use magpie::iter::plumbing::{bridge, Consumer, Producer, ProducerCallback, UnindexedConsumer};
//! use magpie::prelude::*;
//!
//! struct Squares(u64, u64); // the range start..end
//!
//! impl Producer for Squares {
//!     type Item = u64;
//!     type IntoIter = std::iter::Map<std::ops::Range<u64>, fn(u64) -> u64>;
//!     fn into_iter(self) -> Self::IntoIter {
//!         (self.0..self.1).map(|i| i * i)
//!     }
//!     fn split_at(self, index: usize) -> (Self, Self) {
//!         let mid = self.0 + index as u64;
//!         (Squares(self.0, mid), Squares(mid, self.1))
//!     }
//! }
//!
//! struct ParSquares(u64);
//!
//! impl ParallelIterator for ParSquares {
//!     type Item = u64;
//!     fn drive_unindexed<C: UnindexedConsumer<u64>>(self, consumer: C) -> C::Result {
//!         bridge(self, consumer)
//!     }
//!     fn opt_len(&self) -> Option<usize> {
//!         Some(self.0 as usize)
//!     }
//! }
//!
//! impl IndexedParallelIterator for ParSquares {
//!     fn len(&self) -> usize {
//!         self.0 as usize
//!     }
//!     fn drive<C: Consumer<u64>>(self, consumer: C) -> C::Result {
//!         bridge(self, consumer)
//!     }
//!     fn with_producer<CB: ProducerCallback<u64>>(self, callback: CB) -> CB::Output {
//!         callback.callback(Squares(0, self.0))
//!     }
//! }
//!
//! let total: u64 = ParSquares(1000).sum();
//! assert_eq!(total, (0..1000u64).map(|i| i * i).sum());
//! ```

mod bridge;

pub use bridge::{bridge, bridge_producer_consumer};

/// A splittable source of a known number of items: the indexed half of the plumbing.
///
/// See the [module docs](self) for an example.
pub trait Producer: Send + Sized {
    /// The items produced.
    type Item;
    /// The sequential iterator a piece becomes once it is small enough.
    type IntoIter: Iterator<Item = Self::Item>;

    /// Turns this piece into a sequential iterator over its items.
    fn into_iter(self) -> Self::IntoIter;

    /// The smallest piece worth splitting off; the bridge never splits below it. Set by
    /// [`with_min_len`](crate::iter::IndexedParallelIterator::with_min_len).
    fn min_len(&self) -> usize {
        1
    }

    /// The largest piece to leave unsplit. Set by
    /// [`with_max_len`](crate::iter::IndexedParallelIterator::with_max_len).
    fn max_len(&self) -> usize {
        usize::MAX
    }

    /// Splits into the items before `index` and the items from `index` on.
    fn split_at(self, index: usize) -> (Self, Self);

    /// Feeds every item of this piece to `folder`. The default goes through
    /// [`into_iter`](Producer::into_iter); override it where a piece can do better.
    fn fold_with<F>(self, folder: F) -> F
    where
        F: Folder<Self::Item>,
    {
        folder.consume_iter(self.into_iter())
    }
}

/// A splittable sink for items: the other half of the plumbing.
///
/// Cutting a consumer at the index where its producer was cut gives two consumers and the
/// [`Reducer`] that combines their results, left with right.
pub trait Consumer<Item>: Send + Sized {
    /// The sequential state that consumes one piece.
    type Folder: Folder<Item, Result = Self::Result>;
    /// Combines the results of the two halves of a split.
    type Reducer: Reducer<Self::Result>;
    /// What consuming gives.
    type Result: Send;

    /// Splits into consumers for the items before `index` and from `index` on.
    fn split_at(self, index: usize) -> (Self, Self, Self::Reducer);

    /// The sequential state for one piece.
    fn into_folder(self) -> Self::Folder;

    /// True once no more items can change the result (`any` saw a match, or `find_first`
    /// knows of a match further left): the bridge starts no further pieces.
    fn full(&self) -> bool;
}

/// A consumer that can also be split without knowing where its items end.
pub trait UnindexedConsumer<Item>: Consumer<Item> {
    /// Splits off a consumer for items that all come before the items `self` will see.
    fn split_off_left(&self) -> Self;

    /// The reducer for a result of [`split_off_left`](Self::split_off_left) (left) and one
    /// of `self` (right).
    fn to_reducer(&self) -> Self::Reducer;
}

/// The sequential state of a [`Consumer`] working through one piece.
pub trait Folder<Item>: Sized {
    /// What the folder gives when complete.
    type Result;

    /// Takes one item.
    fn consume(self, item: Item) -> Self;

    /// Takes items until the iterator ends or the folder is [`full`](Self::full). Folders
    /// override it to hand the whole iterator to a tight loop (a `sum` that vectorizes).
    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = Item>,
    {
        for item in iter {
            self = self.consume(item);
            if self.full() {
                break;
            }
        }
        self
    }

    /// Finishes the piece.
    fn complete(self) -> Self::Result;

    /// True once more items cannot change the result.
    fn full(&self) -> bool;
}

/// Combines the results of the two halves of a split, in order.
pub trait Reducer<Result> {
    /// Combines `left` (the earlier items) with `right` (the later ones).
    fn reduce(self, left: Result, right: Result) -> Result;
}

/// What an indexed iterator calls with its producer: the type-level way for the iterator to
/// hand a producer (whose type it alone knows) to generic code.
pub trait ProducerCallback<Item> {
    /// What the callback returns.
    type Output;

    /// Called with the producer of the iterator's items.
    fn callback<P>(self, producer: P) -> Self::Output
    where
        P: Producer<Item = Item>;
}

/// A reducer for results that carry nothing (`for_each`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopReducer;

impl Reducer<()> for NoopReducer {
    fn reduce(self, _left: (), _right: ()) {}
}
