//! Items the queue tests push: borrowed handles, drop-counted heap items, and the
//! exactly-once marker of the stress runs. Shared by `tests_chase_lev.rs` and `tests_local.rs`.

use std::ptr::NonNull;

use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicBool, AtomicUsize};

/// Handles to the elements of `values`, which a queue borrows but does not own.
pub(crate) fn handles(values: &[usize]) -> Vec<NonNull<usize>> {
    values.iter().map(NonNull::from).collect()
}

/// Reads the value behind a handle made by [`handles`].
pub(crate) fn value(item: NonNull<usize>) -> usize {
    // SAFETY: every handle in these sequential tests points into a `values` array that
    // outlives the queue, and nobody writes through it.
    unsafe { *item.as_ptr() }
}

/// A heap item that counts its drops.
pub(crate) struct Counted {
    pub(crate) drops: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Relaxed);
    }
}

pub(crate) fn leak_counted(drops: &Arc<AtomicUsize>) -> NonNull<Counted> {
    NonNull::from(Box::leak(Box::new(Counted {
        drops: drops.clone(),
    })))
}

/// Frees an item taken from the deque.
///
/// # Safety
///
/// `item` came from [`leak_counted`] and is reclaimed at most once.
pub(crate) unsafe fn reclaim(item: NonNull<Counted>) {
    // SAFETY: the caller passes a pointer from `Box::leak`, once.
    drop(unsafe { Box::from_raw(item.as_ptr()) });
}

/// Marks the slot behind `item` as taken; panics if it already was.
pub(crate) fn take(item: NonNull<AtomicUsize>) {
    // SAFETY: the handles point into the `taken` array of `stress`, which outlives the
    // thread scope every taker runs in; the slots are atomics, so shared access is fine.
    let slot = unsafe { item.as_ref() };
    // Relaxed: the count alone is checked; the scope's join orders it before the final scan.
    let before = slot.fetch_add(1, Relaxed);
    assert_eq!(before, 0, "an item was taken twice");
}

/// Sets its flag when dropped: the owner's "no more pushes, queue drained" signal.
pub(crate) struct SetOnDrop<'a>(pub(crate) &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        // Release: pairs with the thieves' Acquire load of `done`.
        self.0.store(true, Release);
    }
}
