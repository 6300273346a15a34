//! The job inject queue: a mutex-protected FIFO with a lock-free length, for jobs that arrive
//! from outside the pool (`install`, `join` and `scope` called from other threads). Tasks
//! from outside, and a worker's ring overflow, go to `linked_inject`, whose pushes take no
//! lock.
//!
//! Lock scope is visible in the types (tokio's `inject::{Shared, Synced}`): [`Synced`] is
//! reachable only through the mutex, the length lives beside it so that workers can skip an
//! empty queue without touching the lock.
//!
//! # Invariants
//!
//! 1. `len` changes only while the lock is held, and always to `queue.len()` after the change.
//!    Readers outside the lock therefore see a value the queue really had, possibly stale.
//! 2. Once `close` has run, `push` refuses every item, so a closed queue only shrinks.

use std::collections::VecDeque;

use crate::sync::atomic::*;
use crate::sync::{AtomicUsize, CountedMutex};

/// The part reachable only under the lock.
#[derive(Debug)]
struct Synced<T> {
    queue: VecDeque<T>,
    closed: bool,
}

/// A multi-producer, multi-consumer FIFO.
#[derive(Debug)]
pub(crate) struct Inject<T> {
    synced: CountedMutex<Synced<T>>,
    len: AtomicUsize,
}

impl<T> Inject<T> {
    pub(crate) fn new() -> Inject<T> {
        Inject {
            synced: CountedMutex::new(Synced {
                queue: VecDeque::new(),
                closed: false,
            }),
            len: AtomicUsize::new(0),
        }
    }

    /// Times the lock was taken so far.
    pub(crate) fn lock_acquisitions(&self) -> u64 {
        self.synced.acquisitions()
    }

    /// Appends `item`; gives it back if the queue is closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut synced = self.synced.lock();
        if synced.closed {
            return Err(item);
        }
        synced.queue.push_back(item);
        // Release: pairs with the Acquire load in `is_empty`, so a worker that sees the new
        // length and then takes the lock finds the item (the lock orders it anyway; the
        // Release matters for the sleep protocol's recheck, which reads only `len`).
        self.len.store(synced.queue.len(), Release);
        Ok(())
    }

    /// Appends every item of `items`, in order, under one lock (a worker's overflow moves half
    /// its ring at once). If the queue is closed, gives the iterator back untouched, as `push`
    /// gives back its item (invariant 2).
    ///
    /// `items` is consumed while the lock is held, so it should be cheap to advance.
    pub(crate) fn push_batch<I>(&self, items: I) -> Result<(), I::IntoIter>
    where
        I: IntoIterator<Item = T>,
    {
        let items = items.into_iter();
        let mut synced = self.synced.lock();
        if synced.closed {
            return Err(items);
        }
        synced.queue.extend(items);
        // Release: as in `push`; pairs with the Acquire load in `len`.
        self.len.store(synced.queue.len(), Release);
        Ok(())
    }

    /// Takes the oldest item.
    pub(crate) fn pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut synced = self.synced.lock();
        let item = synced.queue.pop_front();
        // Relaxed: invariant 1; the lock orders it for every other writer.
        self.len.store(synced.queue.len(), Relaxed);
        item
    }

    /// Takes up to `max` of the oldest items, oldest first, into `out`. (The job queue takes
    /// one job at a time; the task inject queue, which pulled batches, is `LinkedInject`.)
    #[allow(dead_code)]
    pub(crate) fn pop_batch(&self, max: usize, out: &mut impl Extend<T>) -> usize {
        if self.is_empty() || max == 0 {
            return 0;
        }
        let mut synced = self.synced.lock();
        let n = max.min(synced.queue.len());
        out.extend(synced.queue.drain(..n));
        // Relaxed: invariant 1.
        self.len.store(synced.queue.len(), Relaxed);
        n
    }

    /// Refuses further pushes and returns everything still queued.
    pub(crate) fn close(&self) -> Vec<T> {
        let mut synced = self.synced.lock();
        synced.closed = true;
        self.len.store(0, Relaxed);
        synced.queue.drain(..).collect()
    }

    /// The number of queued items (possibly stale).
    pub(crate) fn len(&self) -> usize {
        // Acquire: pairs with the Release store in `push`.
        self.len.load(Acquire)
    }

    /// Whether the queue looks empty (possibly stale).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_length() {
        let q = Inject::new();
        for i in 0..5 {
            q.push(i).unwrap();
        }
        assert_eq!(q.len(), 5);
        assert_eq!(q.pop(), Some(0));
        let mut batch = Vec::new();
        assert_eq!(q.pop_batch(3, &mut batch), 3);
        assert_eq!(batch, vec![1, 2, 3]);
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop(), Some(4));
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn push_batch_appends_in_order_under_one_lock() {
        let q = Inject::new();
        q.push(0).unwrap();
        q.push_batch(1..4).unwrap();
        q.push_batch(std::iter::empty()).unwrap();
        assert_eq!(q.len(), 4);
        let mut all = Vec::new();
        assert_eq!(q.pop_batch(10, &mut all), 4);
        assert_eq!(all, vec![0, 1, 2, 3]);
        assert!(q.is_empty());
    }

    #[test]
    fn closed_queue_gives_a_batch_back_untouched() {
        let q = Inject::new();
        q.push(1).unwrap();
        assert_eq!(q.close(), vec![1]);
        let refused = q.push_batch(vec![2, 3, 4]).unwrap_err();
        assert_eq!(refused.collect::<Vec<_>>(), vec![2, 3, 4]);
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn closed_queue_refuses_and_drains() {
        let q = Inject::new();
        q.push(1).unwrap();
        q.push(2).unwrap();
        assert_eq!(q.close(), vec![1, 2]);
        assert_eq!(q.push(3), Err(3));
        assert!(q.is_empty());
    }
}
