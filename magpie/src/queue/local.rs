#![allow(dead_code)] // Wired into the worker by the async-task issue.
//! The task ring: a bounded single-producer, multi-consumer queue of raw task pointers, one
//! per worker, from which idle workers steal half at a time.
//!
//! The owner ([`Local`]) pushes at the *tail* and pops at the *head* (FIFO: a task waits
//! behind at most 255 others, so a busy worker cannot starve one of its own tasks). Thieves
//! ([`Steal`]) also take from the head, but in batches: half of what is queued (rounded up,
//! at most [`CAPACITY`]` / 2`), copied straight into the thief's own ring.
//!
//! # Algorithm
//!
//! `tail` is written only by the owner. `head` packs two 32-bit indices in one `AtomicU64`:
//! `real`, the index of the oldest queued item, and `steal`, the index of the oldest slot
//! that may still be read. They differ only while a thief copies a batch out:
//!
//! 1. **Claim.** The thief moves `real` forward by `n` with one CAS, leaving `steal` behind.
//!    From then on the owner's pops start after the batch, and the owner does not reuse the
//!    batch's slots, because it measures free space from `steal`.
//! 2. **Copy.** The thief copies the `n` pointers into its own ring, with no atomic
//!    read-modify-write per item.
//! 3. **Release.** The thief sets `steal = real` by CAS (retrying if the owner popped in
//!    between), and gives the slots back to the owner.
//!
//! A thief that finds `steal != real` gives up: one batch is claimed at a time, so the CAS of
//! step 3 only has to race the owner's pops. When the ring is full and no thief is copying,
//! `push_back` claims the oldest half itself, the same way, and hands those items and the new
//! one to an [`Overflow`] sink (the inject queue) in one batch. If a thief *is* copying, the
//! ring will have room in a moment, but `push_back` does not wait: it sends the new item alone.
//!
//! # Sources
//!
//! tokio's multi-thread scheduler, `runtime/scheduler/multi_thread/queue.rs` (the packed head,
//! steal half, overflow half), and tokio#5041 / tokio#5042 for the index width.
//!
//! # Invariants
//!
//! 1. Only the owner thread writes `tail` and the slots. [`Steal::steal_into`] writes into
//!    `dst`'s slots and `tail`, and it runs on `dst`'s owner thread: `dst` is a `&Local`, and
//!    `Local` is `!Sync`.
//! 2. In wrapping `u32` arithmetic, `steal <= real <= tail` and `tail - steal <= CAPACITY`.
//!    Indices `real..tail` are queued; `steal..real` are claimed by a single thief (or by the
//!    owner's overflow, which releases in the same CAS), and are not queued.
//! 3. Each index is taken by exactly one successful CAS on `head`: the owner's `pop`, the
//!    owner's overflow claim, or a thief's claim. A slot is written only at index `tail`
//!    while `tail - steal < CAPACITY` (seen with an Acquire load of `head`), so a slot is
//!    never overwritten while its index is in `steal..tail`.
//! 4. Slots are `AtomicPtr`s, read and written `Relaxed`. By invariant 3 no read races a write
//!    of the same index; the atomics cost nothing (a plain move on every target we support)
//!    and mean a bug elsewhere shows as a wrong pointer, not as a torn read or a data race.
//!    Contents are published by the Release store of `tail` in `push_back` / `steal_into`.
//! 5. Indices are `u32` and wrap. Every live distance (`tail - steal`, `tail - real`) is at
//!    most `CAPACITY` = 256, far below 2^31, so `wrapping_sub` always gives the true distance.
//!    The only aliasing left is ABA on `head` (tokio#5041): a thief loads `head`, sleeps, and
//!    its CAS succeeds because `head` came back to the same 64-bit value. That needs the
//!    owner to pop a multiple of 2^32 (4.3 billion) tasks, running each, while the thief is
//!    descheduled between two adjacent instructions: minutes of CPU time at the very least,
//!    against under a millisecond for the 2^16 of tokio's old 16-bit indices. A claim is
//!    also capped at `CAPACITY / 2`, so even that could not overrun the thief's own ring.
//!
//! `tail` holds a `u32` in an `AtomicUsize`, because the sync facade does not re-export
//! `AtomicU32`; every value stored is a `u32`, so nothing is lost.

use std::cell::Cell;
use std::iter;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::inject::Inject;
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicPtr, AtomicU64, AtomicUsize};
use crate::util::CachePadded;

/// Slots in a ring. tokio's value: enough that a worker's burst of spawns rarely overflows,
/// small enough that stealing half is cheap. Small under loom, so few pushes fill it.
#[cfg(not(loom))]
pub(crate) const CAPACITY: usize = 256;
#[cfg(loom)]
pub(crate) const CAPACITY: usize = 4;

/// `CAPACITY` as an index distance.
const CAP: u32 = CAPACITY as u32;
/// The most a steal takes, and what an overflow moves out (plus the new item).
const HALF: u32 = CAP / 2;
/// Index to slot.
const MASK: u32 = CAP - 1;

const _: () = assert!(CAPACITY.is_power_of_two() && CAPACITY >= 2);

/// Where `push_back` sends work when the ring is full.
pub(crate) trait Overflow<T> {
    /// Takes `items`, oldest first. The ring no longer holds them: the sink must keep every
    /// one or hand it to whoever owns what it points to.
    fn push_batch(&self, items: impl Iterator<Item = NonNull<T>>);
}

/// The inject queue takes a whole overflow under one lock.
///
/// A *closed* inject queue (the runtime is shutting down) refuses the batch (its invariant 2),
/// and the pointers are then dropped here. The ring never owned what they point to, so this
/// frees nothing; it is sound for the runtime only if shutdown reaches every live task by its
/// own list, not through queue entries (as tokio's `OwnedTasks` does). The worker that wires
/// this in must keep that true, or close the inject queue only after workers stop pushing.
impl<T> Overflow<T> for Inject<NonNull<T>> {
    fn push_batch(&self, items: impl Iterator<Item = NonNull<T>>) {
        if let Err(refused) = Inject::push_batch(self, items) {
            // The closed queue's batch, unread: the pointers are let go (see above).
            drop(refused);
        }
    }
}

/// `head`'s two halves: `steal` in the high 32 bits, `real` in the low.
fn pack(steal: u32, real: u32) -> u64 {
    (u64::from(steal) << 32) | u64::from(real)
}

/// `(steal, real)`.
fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

/// State shared by the owner and the thieves.
struct Inner<T> {
    /// `steal` and `real`, packed (invariant 2). Written by the owner's `pop` and overflow, and
    /// by thieves.
    head: CachePadded<AtomicU64>,
    /// One past the newest item; a `u32` (invariant 5). Written by the owner only.
    tail: CachePadded<AtomicUsize>,
    /// A fixed-size array, so that indexing with a masked index needs no bounds check (a
    /// slice's costs a load of its length and a branch on every push and pop).
    slots: Box<[AtomicPtr<T>; CAPACITY]>,
    /// The ring hands out `NonNull<T>`s: it is `Send` only when `T` is (see below).
    _items: PhantomData<NonNull<T>>,
}

// SAFETY: the ring stores raw pointers it never dereferences; sending or sharing it sends or
// shares those pointers, which is sound when the items they stand for are `Send` (tasks are).
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above; all shared access goes through atomics.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Inner<T> {
    #[inline(always)]
    fn slot(&self, index: u32) -> &AtomicPtr<T> {
        &self.slots[(index & MASK) as usize]
    }
}

/// The owner's handle: push at the tail, pop at the head. Not `Sync`, not `Clone`.
pub(crate) struct Local<T> {
    inner: Arc<Inner<T>>,
    /// Equal to `inner.tail` whenever no owner operation is running (invariant 1), so the
    /// owner never loads its own `tail`. The `Cell` also makes `Local` `!Sync`.
    tail: Cell<u32>,
}

/// A thief's handle: take half into your own ring. Cheap to clone, shareable.
pub(crate) struct Steal<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Steal {
            inner: self.inner.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Local<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local").field("len", &self.len()).finish()
    }
}

impl<T> std::fmt::Debug for Steal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steal").field("len", &self.len()).finish()
    }
}

/// A new, empty ring: the owner's handle and a thief's handle.
pub(crate) fn local<T>() -> (Local<T>, Steal<T>) {
    starting_at(0)
}

/// A new, empty ring whose indices start at `index`, so that tests reach the `u32`
/// wrap-around (invariant 5) without 4 billion operations.
#[cfg(test)]
pub(crate) fn local_starting_at<T>(index: u32) -> (Local<T>, Steal<T>) {
    starting_at(index)
}

fn starting_at<T>(index: u32) -> (Local<T>, Steal<T>) {
    let slots: Box<[AtomicPtr<T>]> = (0..CAPACITY)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect();
    let Ok(slots) = slots.try_into() else {
        unreachable!("the ring is made of exactly CAPACITY slots")
    };
    let inner = Arc::new(Inner {
        head: CachePadded::new(AtomicU64::new(pack(index, index))),
        tail: CachePadded::new(AtomicUsize::new(index as usize)),
        slots,
        _items: PhantomData,
    });
    let local = Local {
        inner: inner.clone(),
        tail: Cell::new(index),
    };
    (local, Steal { inner })
}

impl<T> Local<T> {
    /// Appends `item`. If the ring is full, moves its older half and `item` to `overflow`
    /// instead, in one batch, oldest first; if a thief is copying a batch out at that moment,
    /// moves only `item`.
    #[inline]
    pub(crate) fn push_back(&self, item: NonNull<T>, overflow: &impl Overflow<T>) {
        let inner = &*self.inner;
        let tail = self.tail.get();
        loop {
            // Acquire: pairs with the Release CAS that ends a thief's copy in `steal_into`:
            // the slots it read are read before we overwrite them (invariant 3).
            let (steal, real) = unpack(inner.head.load(Acquire));
            // Is there a free slot? Slots up to `steal` may still be read, so count from there.
            if tail.wrapping_sub(steal) < CAP {
                break;
            }
            if steal != real {
                // No, and a thief is copying a batch out: room is coming, but we do not wait
                // for it, nor can we claim half while the thief holds its claim.
                overflow.push_batch(iter::once(item));
                return;
            }
            // No. Move half of the ring out, unless a thief claims a batch first; then look
            // again.
            if self.overflow_cold(item, real, tail, overflow) {
                return;
            }
        }
        // Relaxed: published by the Release store of `tail` below (invariant 4).
        inner.slot(tail).store(item.as_ptr(), Relaxed);
        // Release: publishes the slot to thieves; pairs with the Acquire load of `tail` in
        // `steal_into`.
        inner.tail.store(tail.wrapping_add(1) as usize, Release);
        self.tail.set(tail.wrapping_add(1));
    }

    /// Appends the items of `items`, oldest first: as many as there are free slots with one
    /// load of `head` and one store of `tail` for the lot (the inject queue's batches,
    /// `pull_inject`), the rest, if any, one [`push_back`](Local::push_back) each, overflow
    /// included.
    pub(crate) fn push_back_batch<I>(&self, items: I, overflow: &impl Overflow<T>)
    where
        I: IntoIterator<Item = NonNull<T>>,
    {
        let inner = &*self.inner;
        let mut items = items.into_iter();
        let tail = self.tail.get();
        // Acquire: as in `push_back` (the slots a thief has finished reading are read before
        // we overwrite them, invariant 3).
        let (steal, _) = unpack(inner.head.load(Acquire));
        let free = CAP - tail.wrapping_sub(steal);
        let mut end = tail;
        while end.wrapping_sub(tail) < free {
            let Some(item) = items.next() else { break };
            // Relaxed: published by the Release store of `tail` below (invariant 4). The slot
            // is free: `end - steal < CAP`.
            inner.slot(end).store(item.as_ptr(), Relaxed);
            end = end.wrapping_add(1);
        }
        if end != tail {
            // Release: publishes the slots to thieves; pairs with the Acquire load of `tail`
            // in `steal_into`, as in `push_back`.
            inner.tail.store(end as usize, Release);
            self.tail.set(end);
        }
        for item in items {
            self.push_back(item, overflow);
        }
    }

    /// Claims the oldest half of a full ring and sends it and `item` to `overflow`. Returns
    /// false, sending nothing, if a thief moved `head` first.
    #[cold]
    fn overflow_cold(
        &self,
        item: NonNull<T>,
        head: u32,
        tail: u32,
        overflow: &impl Overflow<T>,
    ) -> bool {
        let inner = &*self.inner;
        debug_assert_eq!(
            tail.wrapping_sub(head),
            CAP,
            "overflow of a ring that is not full"
        );
        let new_head = head.wrapping_add(HALF);
        // Claim and release in one step: only this thread reads the claimed slots, and it
        // writes none before it has read them all.
        // Release: a thief that sees the new `real` must also see the `tail` store that put
        // items there; pairs with the Acquire loads of `head` in `steal_into`. Relaxed on
        // failure: we take nothing and the caller reloads `head` with Acquire.
        if inner
            .head
            .compare_exchange(pack(head, head), pack(new_head, new_head), Release, Relaxed)
            .is_err()
        {
            return false;
        }
        // Indices `head..new_head` are ours now (invariant 3).
        let batch = (0..HALF).map(|i| {
            // Relaxed: the owner's own writes (invariant 1).
            let ptr = inner.slot(head.wrapping_add(i)).load(Relaxed);
            // Every claimed index below `tail` holds a pushed, non-null pointer.
            NonNull::new(ptr).expect("claimed an empty slot")
        });
        overflow.push_batch(batch.chain(iter::once(item)));
        true
    }

    /// Takes the oldest item, if any.
    pub(crate) fn pop(&self) -> Option<NonNull<T>> {
        let inner = &*self.inner;
        let tail = self.tail.get();
        // Relaxed: a stale value only makes the CAS below fail and retry.
        let mut head = inner.head.load(Relaxed);
        let real = loop {
            let (steal, real) = unpack(head);
            if real == tail {
                return None;
            }
            let next_real = real.wrapping_add(1);
            // Keep a thief's claim (`steal != real`) where it is; otherwise both move.
            let next = if steal == real {
                pack(next_real, next_real)
            } else {
                pack(steal, next_real)
            };
            // Release: a thief that sees the new `real` must also see the `tail` store that
            // put an item there (the owner's own earlier push); pairs with the Acquire loads
            // of `head` in `steal_into` and `Steal::len`. Relaxed on failure: we reload.
            match inner.head.compare_exchange(head, next, Release, Relaxed) {
                Ok(_) => break real,
                Err(actual) => head = actual,
            }
        };
        // Relaxed: the owner's own write (invariant 1); index `real` is ours (invariant 3).
        let ptr = inner.slot(real).load(Relaxed);
        Some(NonNull::new(ptr).expect("popped an empty slot"))
    }

    /// The number of queued items, as the owner sees it: exact but for steals in the last
    /// moment. Items a thief is copying out do not count.
    pub(crate) fn len(&self) -> usize {
        // Relaxed: an estimate; `real <= tail` always holds for the owner (invariant 2).
        let (_, real) = unpack(self.inner.head.load(Relaxed));
        self.tail.get().wrapping_sub(real) as usize
    }

    /// Whether no item is queued, as the owner sees it.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an item is queued: `!is_empty()`, under the name the worker's search uses.
    pub(crate) fn has_tasks(&self) -> bool {
        !self.is_empty()
    }

    /// How many pushes fit before the next one overflows. Slots a thief is copying out count
    /// as taken until it is done.
    pub(crate) fn remaining_slots(&self) -> usize {
        // Relaxed: an estimate; `push_back` decides with an Acquire load of its own.
        let (steal, _) = unpack(self.inner.head.load(Relaxed));
        (CAP - self.tail.get().wrapping_sub(steal)) as usize
    }
}

/// The last step of a steal: the thief that claimed the `n` slots from `first` (moving
/// `steal` away from `real`) and has read them lets `steal` catch up with `real`, so the
/// owner may reuse the slots. The owner may have popped meanwhile (moving `real`), so it
/// retries until the CAS holds.
fn release_claim<T>(src: &Inner<T>, first: u32, n: u32) {
    let mut head = pack(first, first.wrapping_add(n));
    loop {
        let (steal, real) = unpack(head);
        debug_assert_eq!(steal, first, "someone else moved `steal` during our claim");
        // Release: the thief's slot reads happen before the owner reuses the slots; pairs
        // with the Acquire load of `head` in `push_back`. Relaxed on failure: only the
        // owner's `pop` can have moved `head`, and we just retry with its value.
        match src
            .head
            .compare_exchange(head, pack(real, real), Release, Relaxed)
        {
            Ok(_) => break,
            Err(actual) => head = actual,
        }
    }
}

impl<T> Steal<T> {
    /// Moves about half of the victim's items (rounded up, at most `CAPACITY / 2`) into
    /// `dst`, the thief's own ring, and returns one of them, which the caller runs next.
    ///
    /// Returns `None` if the victim is empty, if another thief is copying from it right now,
    /// or if `dst` could not take `CAPACITY / 2` more items (more than half of it is in use).
    /// Stealing is for idle workers, whose rings are empty, so the last case does not cost a
    /// worker any work in practice; it keeps a steal from ever overflowing `dst`.
    pub(crate) fn steal_into(&self, dst: &Local<T>) -> Option<NonNull<T>> {
        debug_assert!(
            !Arc::ptr_eq(&self.inner, &dst.inner),
            "a ring stealing from itself"
        );
        let dst_tail = dst.tail.get();
        // Acquire: pairs with the Release CAS that ends a copy out of `dst` by one of its own
        // thieves: those slots are read before we overwrite them (invariant 3).
        let (dst_steal, _) = unpack(dst.inner.head.load(Acquire));
        if dst_tail.wrapping_sub(dst_steal) > HALF {
            return None;
        }

        // Step 1: claim a batch.
        let src = &*self.inner;
        // Acquire: pairs with the Release CAS of whoever last moved `real` (a pop, an overflow,
        // another thief), so the `tail` we read next is at least `real` (invariant 2).
        let mut head = src.head.load(Acquire);
        let (first, n) = loop {
            let (steal, real) = unpack(head);
            if steal != real {
                // Another thief is copying; one claim at a time (invariant 2).
                return None;
            }
            // Acquire: pairs with the Release store of `tail` in `push_back` (or the victim's
            // own `steal_into`), publishing the slots below it.
            let tail = src.tail.load(Acquire) as u32;
            // `tail` may be newer than `head` (the owner kept pushing and popping), so `len`
            // may exceed `CAPACITY`; then `head` has moved too and the CAS below fails.
            let len = tail.wrapping_sub(real);
            // Half, rounded up. The cap matters only after an ABA (invariant 5).
            let n = (len - len / 2).min(HALF);
            if n == 0 {
                return None;
            }
            // Release: a thief that sees the new `real` must see the `tail` we read; pairs
            // with the Acquire loads of `head` here and in `Steal::len`. Acquire on failure:
            // the value is our next `head`, as the load above.
            match src.head.compare_exchange(
                head,
                pack(steal, real.wrapping_add(n)),
                Release,
                Acquire,
            ) {
                Ok(_) => {
                    // `head` did not move between its load and the CAS, and `tail - real`
                    // never exceeds `CAPACITY` while it holds still (invariant 2).
                    debug_assert!(len <= CAP, "claimed from a ring of length {len}");
                    break (real, n);
                }
                Err(actual) => head = actual,
            }
        };

        // Step 2: copy all but the newest into `dst`, keep the newest to return. Indices
        // `first..first + n` are ours (invariant 3); `dst` has room for `n - 1` (checked above).
        for i in 0..n - 1 {
            // Relaxed: published by the `tail` we acquired (invariant 4).
            let ptr = src.slot(first.wrapping_add(i)).load(Relaxed);
            // Relaxed: published by the Release store of `dst.tail` below.
            dst.inner.slot(dst_tail.wrapping_add(i)).store(ptr, Relaxed);
        }
        // Relaxed: as above.
        let ret = src.slot(first.wrapping_add(n - 1)).load(Relaxed);

        // Step 3: release the slots.
        release_claim(src, first, n);

        if n > 1 {
            let new_tail = dst_tail.wrapping_add(n - 1);
            // Release: publishes the copied slots to `dst`'s thieves; pairs with the Acquire
            // load of `tail` above (in their `steal_into`).
            dst.inner.tail.store(new_tail as usize, Release);
            dst.tail.set(new_tail);
        }
        Some(NonNull::new(ret).expect("stole an empty slot"))
    }

    /// Moves *every* queued item (up to `CAPACITY`) into `out`, oldest first, and returns
    /// how many. For a thread that owns no ring of its own: the stall monitor, which hands a
    /// stalled worker's tasks to the inject queue (`runtime/monitor.rs`).
    ///
    /// The same three steps as [`Steal::steal_into`], with two differences that change no
    /// invariant: the claim is the whole of `real..tail` rather than half (invariant 2 bounds
    /// it by `CAPACITY`, and `out` is a `Vec`, so there is no room to check), and the copy
    /// goes to `out` rather than into a ring's slots. The claim is still one CAS that leaves
    /// `steal` behind, so the owner's pops skip the batch and its pushes see the slots as
    /// taken (they overflow, as with any thief copying) until the release. Returns 0, taking
    /// nothing, if the ring is empty or another thief is copying from it right now.
    pub(crate) fn steal_all(&self, out: &mut Vec<NonNull<T>>) -> usize {
        let src = &*self.inner;
        // Step 1: claim everything queued. Acquire: as in `steal_into`.
        let mut head = src.head.load(Acquire);
        let (first, n) = loop {
            let (steal, real) = unpack(head);
            if steal != real {
                // Another thief is copying; one claim at a time (invariant 2).
                return 0;
            }
            // Acquire: pairs with the Release store of `tail` in `push_back` (or the owner's
            // own `steal_into`), publishing the slots below it.
            let tail = src.tail.load(Acquire) as u32;
            // As in `steal_into`, `tail` may be newer than `head`: the cap keeps a claim
            // within the ring, and the CAS below fails if `head` moved.
            let n = tail.wrapping_sub(real).min(CAP);
            if n == 0 {
                return 0;
            }
            // Release / Acquire: as in `steal_into`.
            match src.head.compare_exchange(
                head,
                pack(steal, real.wrapping_add(n)),
                Release,
                Acquire,
            ) {
                Ok(_) => break (real, n),
                Err(actual) => head = actual,
            }
        };

        // Step 2: copy. Indices `first..first + n` are ours (invariant 3).
        out.reserve(n as usize);
        for i in 0..n {
            // Relaxed: published by the `tail` we acquired (invariant 4).
            let ptr = src.slot(first.wrapping_add(i)).load(Relaxed);
            out.push(NonNull::new(ptr).expect("stole an empty slot"));
        }

        // Step 3: release the slots, as in `steal_into`.
        release_claim(src, first, n);
        n as usize
    }

    /// The number of queued items, approximately (it may be stale by the time it returns).
    pub(crate) fn len(&self) -> usize {
        // Acquire: pairs with the Release CAS of whoever last moved `real`, so `tail`, read
        // next, is at least `real`.
        let (_, real) = unpack(self.inner.head.load(Acquire));
        // Relaxed: the Acquire above already orders the `tail` store behind `real` before
        // this load; a newer `tail` only makes the estimate fresher.
        let tail = self.inner.tail.load(Relaxed) as u32;
        tail.wrapping_sub(real) as usize
    }

    /// Whether the ring looks empty (it may be stale by the time it returns).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
