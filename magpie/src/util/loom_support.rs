//! Helpers shared by the loom models (`cfg(all(test, loom))`).

use std::ptr::NonNull;
use std::sync::Arc as StdArc;
use std::task::Wake;

use crate::sync::atomic::Relaxed;
use crate::sync::AtomicUsize;

/// Checks `f` under loom with at most `bound` preemptions (`None`: every interleaving).
/// `LOOM_MAX_PREEMPTIONS`, when set, takes precedence, so a longer tier can raise every
/// model's bound at once.
pub(crate) fn model<F>(bound: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = bound;
    }
    builder.check(f);
}

/// The items of one model run: leaked boxes holding their own index.
pub(crate) struct Items {
    ptrs: Vec<NonNull<usize>>,
}

impl Items {
    pub(crate) fn new(n: usize) -> Items {
        Items {
            ptrs: (0..n)
                .map(|i| NonNull::from(Box::leak(Box::new(i))))
                .collect(),
        }
    }

    pub(crate) fn get(&self, i: usize) -> NonNull<usize> {
        self.ptrs[i]
    }

    /// The index of the item at address `addr`, after checking it is one of ours and holds
    /// that index.
    pub(crate) fn index_of(&self, addr: usize) -> usize {
        let i = self
            .ptrs
            .iter()
            .position(|p| p.as_ptr() as usize == addr)
            .unwrap_or_else(|| panic!("took a pointer that was never pushed: {addr:#x}"));
        // SAFETY: `ptrs[i]` is a live box of ours (freed only in `Drop`).
        let value = unsafe { *self.ptrs[i].as_ptr() };
        assert_eq!(value, i, "item {i} holds the wrong value");
        i
    }

    /// Checks that `taken` (addresses) holds each item at most once, and every item if
    /// `all` is set. Returns the indices taken, sorted.
    pub(crate) fn check(&self, taken: &[usize], all: bool) -> Vec<usize> {
        let mut indices: Vec<usize> = taken.iter().map(|&a| self.index_of(a)).collect();
        indices.sort_unstable();
        let before = indices.len();
        indices.dedup();
        assert_eq!(before, indices.len(), "an item was taken twice: {taken:x?}");
        if all {
            assert_eq!(
                indices,
                (0..self.ptrs.len()).collect::<Vec<_>>(),
                "an item was lost"
            );
        }
        indices
    }
}

impl Drop for Items {
    fn drop(&mut self) {
        for p in &self.ptrs {
            // SAFETY: each pointer came from `Box::leak` in `Items::new` and is freed only
            // here; the queues never free items.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
}

/// A waker that counts its wakes (a loom atomic: the count is part of the model).
pub(crate) struct CountingWaker(AtomicUsize);

impl CountingWaker {
    pub(crate) fn new() -> StdArc<CountingWaker> {
        StdArc::new(CountingWaker(AtomicUsize::new(0)))
    }

    pub(crate) fn wakes(&self) -> usize {
        self.0.load(Relaxed)
    }
}

impl Wake for CountingWaker {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Relaxed);
    }
}
