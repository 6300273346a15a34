//! The LIFO slot: one task that its worker runs next, which idle workers may take instead.
//!
//! Only the owner fills the slot; the owner and thieves empty it, with a `swap`, so each
//! item leaves it exactly once. (The policy, when to fill it, how often to run from it, and
//! when thieves may take from it, is the worker's: `runtime/worker/tasks.rs`.)
//!
//! Invariants:
//! 1. Only the owner stores a non-null pointer; every other access swaps in null.
//! 2. An item put in by [`LifoSlot::replace`] leaves through exactly one of: a later
//!    `replace` that displaces it (returned to the owner), or one [`LifoSlot::take`].

use std::ptr::{self, NonNull};

use crate::sync::atomic::*;
use crate::sync::AtomicPtr;

/// One slot, empty or holding an item.
pub(crate) struct LifoSlot<T> {
    item: AtomicPtr<T>,
}

impl<T> std::fmt::Debug for LifoSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifoSlot")
            .field("empty", &self.is_empty())
            .finish()
    }
}

impl<T> LifoSlot<T> {
    pub(crate) fn new() -> LifoSlot<T> {
        LifoSlot {
            item: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Owner only: puts `item` in the slot and returns the item it displaced, if any.
    #[inline]
    pub(crate) fn replace(&self, item: NonNull<T>) -> Option<NonNull<T>> {
        // Relaxed: only the owner fills the slot (invariant 1), so a null seen here stays
        // null until our store; a thief can only empty it.
        if self.item.load(Relaxed).is_null() {
            // Release: publishes the item to the Acquire swap in `take`.
            self.item.store(item.as_ptr(), Release);
            None
        } else {
            // AcqRel: Release as above; Acquire because the displaced item may have been
            // put in before a thief's emptying swap we now read from (then it is null).
            NonNull::new(self.item.swap(item.as_ptr(), AcqRel))
        }
    }

    /// Owner or thief: takes the item, if there is one.
    #[inline]
    pub(crate) fn take(&self) -> Option<NonNull<T>> {
        // Relaxed: a cheap emptiness check; the swap decides.
        if self.item.load(Relaxed).is_null() {
            return None;
        }
        // Acquire: pairs with the Release fill in `replace`.
        NonNull::new(self.item.swap(ptr::null_mut(), Acquire))
    }

    /// Whether the slot looks empty: a hint, possibly stale the moment it is read.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        // Relaxed: a hint (callers that must not miss an item order it with a barrier of
        // their own, as the sleep protocol's recheck does).
        self.item.load(Relaxed).is_null()
    }
}
