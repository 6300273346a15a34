//! The job deque: a growable Chase-Lev work-stealing deque of raw job pointers.
//!
//! The owning worker pushes and pops at the *bottom* (LIFO, so the job it just forked is the
//! one still hot in cache); thieves take from the *top* (FIFO, so they get the oldest and,
//! in fork-join code, the largest piece of work).
//!
//! # Sources
//!
//! * D. Chase and Y. Lev, "Dynamic circular work-stealing deque", SPAA 2005: the algorithm.
//! * N. M. Lê, A. Pop, A. Cohen and F. Zappa Nardelli, "Correct and efficient work-stealing
//!   for weak memory models", PPoPP 2013: the C11 orderings used here, except that the two
//!   `seq_cst` fences (in `take` and `steal`) are our asymmetric pair
//!   [`Barrier::light`](crate::sync::barrier::Barrier::light) / [`Barrier::heavy`](crate::sync::barrier::Barrier::heavy):
//!   the owner's fence, paid on every published `join`, becomes a compiler fence, and the thief pays a
//!   `membarrier` instead. Steals are rare; pops are not.
//!
//! # Invariants
//!
//! 1. Only the owner ([`Worker`]) writes `bottom`, writes slots, and replaces the buffer.
//!    Thieves ([`Stealer`]) only read those, and only advance `top`, by CAS.
//! 2. `top` never decreases. An item at index `i` is taken by whoever moves `top` from `i` to
//!    `i + 1` (a thief's CAS, or the owner's CAS on the last item), or by the owner's pop of
//!    index `i` while `top < i`; never by two of them.
//! 3. Slots are atomics, read and written with `Relaxed` operations. A thief may read a slot
//!    the owner is overwriting (its buffer view is stale, or the index wrapped around); it then
//!    reads *some* pointer, never a torn one, and its CAS on `top` fails, so the value is
//!    discarded. This closes the stale-buffer data race of crossbeam#726 / RUSTSEC-2021-0093,
//!    where a slot was read with a plain, racy copy.
//! 4. A buffer, once installed, is never freed before the deque is: growth moves the old one
//!    to a retired list, so a thief holding a stale buffer pointer reads valid memory.
//!    Buffers double, so the retired ones together are smaller than the live one.
//! 5. Indices are `isize` and only ever incremented by one per operation: wrapping around
//!    would take 2^63 operations (centuries), so `bottom - top` is always the true length,
//!    unlike the 16- and 32-bit ring indices of tokio#5042.
//! 6. The owner overwrites a slot a thief emptied only after an Acquire read of that
//!    thief's CAS on `top` (every CAS on `top` is SeqCst, so a Release): every value of
//!    `top_seen` comes from an Acquire load of `top`, or from the owner's own CAS for the last
//!    item, Acquire on failure too. `push` trusts `top_seen` to skip reloading `top`, so
//!    without that edge the owner could reuse slot `t` while the thief that took index `t`
//!    has not yet read it (in the C++ model, the thief's read could see the new item: the
//!    old one is lost and the new one run twice).
//! 7. A thief needs no heavy barrier for index `t` when the owner itself wrote `top = t`
//!    (its CAS for the last item; or `t` = 0, the initial value), which the owner records in
//!    `owner_top` after the CAS. The barrier exists because the owner may pop index `t`
//!    without a CAS after reading a `top` below `t`: that cannot happen after the owner's own
//!    write of `t` (write-read coherence: its later loads of `top` return `t` or more), and
//!    a pop before that write is ordered before the thief's load of `bottom` by the thief's
//!    Acquire load of `top`, which read from the owner's CAS (the pop's reservation of
//!    `bottom` precedes the CAS, so the thief reads that reservation or a later `bottom`;
//!    every later one that admits index `t` comes from a push after the CAS, whose item the
//!    owner can only take by a CAS). Each value of `top` is written once, so `owner_top ==
//!    t` identifies the writer and needs no ordering of its own. A deque that drains (the
//!    owner's CAS for its last item) is thus stolen from without a barrier until a thief
//!    takes a job; in fork-join code at a few workers that is most steals (ARCHITECTURE.md,
//!    "Steals that need no barrier").

use std::cell::Cell;
use std::ptr::NonNull;

use crate::sync::atomic::*;
use crate::sync::barrier::Barrier;
use crate::sync::{lock, Arc, AtomicIsize, AtomicPtr, Mutex};
use crate::util::CachePadded;

/// Slots in a new deque's buffer. Small under loom, so that three pushes explore growth.
#[cfg(not(loom))]
const INITIAL_CAPACITY: usize = 64;
#[cfg(loom)]
const INITIAL_CAPACITY: usize = 2;

/// The result of [`Stealer::steal`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Steal<T> {
    /// The deque was empty.
    Empty,
    /// Took the oldest item.
    Success(T),
    /// Lost a race with another thief or the owner; the deque may still hold items.
    Retry,
}

/// A steal begun by [`Stealer::steal_begin`]: the `top` it read, and whether the heavy
/// barrier must come before [`Stealer::steal_end`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Begun {
    pub(crate) top: isize,
    /// False when the owner wrote this `top` itself (invariant 7).
    pub(crate) needs_barrier: bool,
}

/// A power-of-two array of slots.
struct Buffer<T> {
    slots: Box<[AtomicPtr<T>]>,
}

impl<T> Buffer<T> {
    fn alloc(capacity: usize) -> *mut Buffer<T> {
        debug_assert!(capacity.is_power_of_two());
        let slots = (0..capacity)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        Box::into_raw(Box::new(Buffer { slots }))
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn slot(&self, index: isize) -> &AtomicPtr<T> {
        // `capacity` is a power of two, so masking is the modulo for any index, negative too.
        &self.slots[(index as usize) & (self.slots.len() - 1)]
    }

    fn read(&self, index: isize) -> *mut T {
        // Relaxed: the item's contents are published by the Release store of `bottom`
        // (or of the buffer pointer) that made this index visible; see invariant 3.
        self.slot(index).load(Relaxed)
    }

    fn write(&self, index: isize, item: *mut T) {
        // Relaxed: published by the Release store of `bottom` in `push` that follows.
        self.slot(index).store(item, Relaxed);
    }
}

/// The thieves' end of the deque, on one cache line.
struct TopEnd {
    /// Index of the oldest item.
    top: AtomicIsize,
    /// The last value of `top` the owner wrote itself (invariant 7), or 0.
    owner_top: AtomicIsize,
}

/// State shared by the owner and the thieves.
struct Inner<T> {
    /// Thieves' end: the index of the oldest item, and who wrote it.
    ends: CachePadded<TopEnd>,
    /// Owner's end: index one past the newest item.
    bottom: CachePadded<AtomicIsize>,
    /// The live buffer.
    buffer: CachePadded<AtomicPtr<Buffer<T>>>,
    /// Buffers replaced by growth, freed with the deque (invariant 4). Touched only on growth.
    retired: Mutex<Vec<*mut Buffer<T>>>,
    /// The runtime's barrier mode: the thieves' side of the pair.
    barrier: Barrier,
}

// SAFETY: the deque stores raw pointers it never dereferences; sending or sharing it sends or
// shares those pointers, which is sound when the items they stand for are `Send` (the job
// types that use it are). The buffers are owned by `Inner` and freed only in its `Drop`.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above; all shared access goes through atomics or the `retired` mutex.
unsafe impl<T: Send> Sync for Inner<T> {}

impl<T> Drop for Inner<T> {
    fn drop(&mut self) {
        let live = self.buffer.load(Relaxed);
        // SAFETY: `&mut self` means no `Worker` or `Stealer` is left, so no thread can read
        // the buffers any more; each was made by `Buffer::alloc` and is freed once here
        // (invariant 4 keeps the retired list and the live pointer disjoint).
        unsafe {
            drop(Box::from_raw(live));
            for old in lock(&self.retired).drain(..) {
                drop(Box::from_raw(old));
            }
        }
    }
}

/// The owner's handle: push and pop at the bottom. Not `Sync`, not `Clone`.
///
/// It mirrors what only the owner changes (`bottom`, the buffer) and keeps a lower bound of
/// `top`, so that a push touches no line that thieves write, and neither operation chases
/// the buffer pointer. The `Cell`s make it `!Sync`: owner operations stay on one thread.
pub(crate) struct Worker<T> {
    inner: Arc<Inner<T>>,
    /// Equal to `inner.bottom` whenever no owner operation is running (invariant 1).
    bottom: Cell<isize>,
    /// A value `inner.top` had, read with Acquire (invariant 6); `top` only grows
    /// (invariant 2), so this is a lower bound, and `bottom - top_seen` an upper bound of the
    /// length.
    top_seen: Cell<isize>,
    /// The live buffer's slots and `capacity - 1`.
    slots: Cell<*const AtomicPtr<T>>,
    mask: Cell<usize>,
    /// The runtime's barrier mode: the owner's side of the pair (a copy of `inner.barrier`,
    /// so that `pop` reads no shared line for it).
    barrier: Barrier,
}

// SAFETY: moving the owner handle to another thread is fine (a worker's deque is created on
// the builder thread and moved into the worker); only concurrent owner calls would break
// invariant 1, and `!Sync` plus `&mut`-free methods on one thread rule those out.
unsafe impl<T: Send> Send for Worker<T> {}

/// A thief's handle: take from the top. Cheap to clone, shareable.
pub(crate) struct Stealer<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Stealer<T> {
    fn clone(&self) -> Self {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("len", &self.len()).finish()
    }
}

impl<T> std::fmt::Debug for Stealer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stealer").field("len", &self.len()).finish()
    }
}

/// A new, empty deque with symmetric barriers: the owner's handle and a thief's handle.
#[allow(dead_code)] // The tests and the models; runtimes use `with_barrier`.
pub(crate) fn new<T>() -> (Worker<T>, Stealer<T>) {
    with_barrier(Barrier::SYMMETRIC)
}

/// A new, empty deque whose owner and thieves order themselves with `barrier`.
pub(crate) fn with_barrier<T>(barrier: Barrier) -> (Worker<T>, Stealer<T>) {
    let buffer = Buffer::alloc(INITIAL_CAPACITY);
    let inner = Arc::new(Inner {
        ends: CachePadded::new(TopEnd {
            top: AtomicIsize::new(0),
            owner_top: AtomicIsize::new(0),
        }),
        bottom: CachePadded::new(AtomicIsize::new(0)),
        buffer: CachePadded::new(AtomicPtr::new(buffer)),
        retired: Mutex::new(Vec::new()),
        barrier,
    });
    let worker = Worker {
        inner: inner.clone(),
        bottom: Cell::new(0),
        top_seen: Cell::new(0),
        slots: Cell::new(std::ptr::null()),
        mask: Cell::new(0),
        barrier,
    };
    worker.cache_buffer(buffer);
    (worker, Stealer { inner })
}

impl<T> Inner<T> {
    fn len(&self) -> usize {
        // Relaxed: an estimate; callers that need certainty use pop/steal.
        let b = self.bottom.load(Relaxed);
        let t = self.ends.top.load(Relaxed);
        b.wrapping_sub(t).max(0) as usize
    }
}

impl<T> Worker<T> {
    /// Caches the slots of `buffer`, the live buffer.
    fn cache_buffer(&self, buffer: *mut Buffer<T>) {
        // SAFETY: `buffer` is the live buffer (or was just made so by `grow_cold`); buffers
        // live as long as the deque (invariant 4), which outlives this handle.
        let buffer = unsafe { &*buffer };
        self.slots.set(buffer.slots.as_ptr());
        self.mask.set(buffer.capacity() - 1);
    }

    /// The slot for `index` in the live buffer.
    #[inline(always)]
    fn slot(&self, index: isize) -> &AtomicPtr<T> {
        // SAFETY: `slots` and `mask` describe the live buffer (kept in step by
        // `cache_buffer`), which lives as long as the deque; masking keeps the offset in
        // bounds.
        unsafe { &*self.slots.get().add(index as usize & self.mask.get()) }
    }

    /// Pushes `item` at the bottom. Never fails; grows the buffer when full.
    #[inline]
    pub(crate) fn push(&self, item: NonNull<T>) {
        let b = self.bottom.get();
        // Is the buffer full? `top_seen` is a lower bound of `top`, so this can only err
        // towards "full"; then look again before growing.
        if b.wrapping_sub(self.top_seen.get()) > self.mask.get() as isize {
            // Acquire: pairs with the thieves' CAS on `top`: the slots they emptied were read
            // before we overwrite them.
            let t = self.inner.ends.top.load(Acquire);
            self.top_seen.set(t);
            if b.wrapping_sub(t) > self.mask.get() as isize {
                // Yes. Grow it.
                self.grow_cold(t, b);
            }
        }
        // Relaxed: published by the Release store of `bottom` below (invariant 3).
        self.slot(b).store(item.as_ptr(), Relaxed);
        // Release: publishes the slot write to thieves; pairs with the Acquire load of
        // `bottom` in `Stealer::steal`.
        self.inner.bottom.store(b.wrapping_add(1), Release);
        self.bottom.set(b.wrapping_add(1));
    }

    /// Replaces a full buffer with one twice its size.
    #[cold]
    fn grow_cold(&self, top: isize, bottom: isize) {
        let inner = &*self.inner;
        // Relaxed: only this thread writes `buffer` (invariant 1).
        let old = inner.buffer.load(Relaxed);
        // SAFETY: `old` is the live buffer (invariants 1, 4).
        let old_ref = unsafe { &*old };
        let new = Buffer::alloc(old_ref.capacity() * 2);
        // SAFETY: `new` was just allocated and is not shared yet.
        let new_ref = unsafe { &*new };
        // Copy every item that may still be taken; thieves advancing `top` meanwhile is fine:
        // they read the old buffer, which stays intact (invariant 4).
        let mut i = top;
        while i != bottom {
            new_ref.write(i, old_ref.read(i));
            i = i.wrapping_add(1);
        }
        lock(&inner.retired).push(old);
        // Release: pairs with the Acquire load of `buffer` in `steal`, so a thief that sees
        // the new buffer sees the slots copied into it.
        inner.buffer.store(new, Release);
        self.cache_buffer(new);
    }

    /// Pops the newest item, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<T>> {
        let inner = &*self.inner;
        // Empty as far as the owner's own counts tell: `top_seen` is a lower bound of `top`
        // (invariant 2), so `bottom - top` is at most `bottom - top_seen`. Nothing to
        // reserve and nobody to race, so no store and no barrier: a worker running tasks
        // asks its empty deque first before every poll, and in the symmetric barrier mode
        // the barrier below is a full fence.
        //
        // Not under loom. The shortcut reads only the owner's own cells, so there is nothing
        // in it for loom to check, and it takes every loom operation out of an idle worker's
        // pass over its empty deque; that moved where the branch limit of the runtime
        // model's negative control (`loom_runtime_last_searcher_vs_notification`) falls, into
        // a worker's own loop, whose panic guard aborts the test binary instead of letting
        // the expected panic reach the model.
        if cfg!(not(loom)) && self.bottom.get().wrapping_sub(self.top_seen.get()) <= 0 {
            return None;
        }
        let b = self.bottom.get().wrapping_sub(1);
        // Reserve the bottom item before looking at `top`...
        // Release: a thief may read this value of `bottom` rather than the push's that it
        // replaces, and must still see the slots below it (Rust's release sequences, as
        // C++20's, no longer continue through later plain stores of the same thread);
        // pairs with the Acquire load of `bottom` in `steal_end`. The loom model of
        // invariant 7 found it (`loom_push_pop_and_steal` without the barrier). A plain
        // store on x86. Ordered before the load of `top` by the barrier below.
        inner.bottom.store(b, Release);
        // ...and make that reservation visible to any thief before we read `top`: pairs with
        // the heavy barrier of `steal` (the store/load pair of Lê et al.'s `take`).
        self.barrier.light();
        // Acquire: ordered after the reservation by the barrier above; Acquire so that
        // `top_seen` carries the synchronization `push` relies on.
        let t = inner.ends.top.load(Acquire);
        self.top_seen.set(t);

        let len = b.wrapping_sub(t);
        if len > 0 {
            // More than one item: no thief can reach index `b` (invariant 2).
            self.bottom.set(b);
            // Relaxed: our own write, or published to us by the thieves' CAS we acquired.
            return NonNull::new(self.slot(b).load(Relaxed));
        }
        if len < 0 {
            // Empty: undo the reservation.
            inner.bottom.store(b.wrapping_add(1), Relaxed);
            return None;
        }
        // The last item: race the thieves for it by advancing `top` ourselves.
        let item = self.slot(b).load(Relaxed);
        // SeqCst: totally ordered with the thieves' CAS on the same index. Acquire on
        // failure: we then read the winning thief's CAS (SeqCst, so Release), and record
        // `top = t + 1` in `top_seen`, which lets later pushes reuse slot `t` without
        // loading `top` again. Invariant 6: that reuse must happen after the thief's read
        // of the slot, and this Acquire is the edge that orders it.
        let won = inner
            .ends
            .top
            .compare_exchange(t, t.wrapping_add(1), SeqCst, Acquire)
            .is_ok();
        if won {
            // Relaxed: it only says who wrote `top = t + 1` (invariant 7); the thief's
            // ordering comes from its Acquire load of `top`, which reads our CAS.
            inner.ends.owner_top.store(t.wrapping_add(1), Relaxed);
        }
        // Either way the deque is now empty, with top = bottom = t + 1.
        inner.bottom.store(b.wrapping_add(1), Relaxed);
        self.bottom.set(b.wrapping_add(1));
        self.top_seen.set(t.wrapping_add(1));
        if won {
            NonNull::new(item)
        } else {
            None
        }
    }

    /// The owner's bottom index: what is pushed from now on sits at or above it, until it
    /// is popped ([`Worker::pop_above`]).
    #[inline]
    pub(crate) fn mark(&self) -> isize {
        self.bottom.get()
    }

    /// Pops the bottom item if it was pushed after `mark` was taken (and is still here).
    #[inline]
    pub(crate) fn pop_above(&self, mark: isize) -> Option<NonNull<T>> {
        if self.bottom.get().wrapping_sub(mark) > 0 {
            self.pop()
        } else {
            None
        }
    }

    /// The number of items, as the owner sees it: exact but for steals in the last moment.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        // Relaxed: an estimate (thieves may be taking items right now).
        let t = self.inner.ends.top.load(Relaxed);
        self.bottom.get().wrapping_sub(t).max(0) as usize
    }

    /// Whether the deque is empty, as the owner sees it.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Another thief's handle to this deque.
    #[allow(dead_code)]
    pub(crate) fn stealer(&self) -> Stealer<T> {
        Stealer {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Stealer<T> {
    /// Takes the oldest item, if any, paying a heavy barrier of its own where it needs one
    /// (invariant 7).
    #[allow(dead_code)] // The tests and the models; workers share barriers (`steal_begin`).
    pub(crate) fn steal(&self) -> Steal<NonNull<T>> {
        let Some(begun) = self.steal_begin() else {
            return Steal::Empty;
        };
        if begun.needs_barrier {
            self.inner.barrier.heavy();
        }
        self.steal_end(begun.top)
    }

    /// [`Stealer::steal`] with a heavy barrier whether or not it needs one: the classic
    /// algorithm, which the models check beside the barrier-free path.
    #[cfg(test)]
    pub(crate) fn steal_fenced(&self) -> Steal<NonNull<T>> {
        let Some(begun) = self.steal_begin() else {
            return Steal::Empty;
        };
        self.inner.barrier.heavy();
        self.steal_end(begun.top)
    }

    /// The first half of a steal that shares its heavy barrier with steals from other
    /// deques of the same runtime: a cheap look, then the load of `top`. `None` if the
    /// deque looks empty. If the answer says [`Begun::needs_barrier`], the caller must call
    /// [`Barrier::heavy`] (this deque's mode, see [`Stealer::barrier`]) after `steal_begin`
    /// and before [`Stealer::steal_end`]: one heavy barrier between the loads of `top` and
    /// `bottom` is all the algorithm asks of each deque, and a barrier after several loads
    /// of `top` serves them all. If it does not (the owner wrote that `top`, invariant 7),
    /// `steal_end` may follow at once.
    pub(crate) fn steal_begin(&self) -> Option<Begun> {
        let inner = &*self.inner;
        // A cheap look first, so that thieves circling an empty deque pay no barrier.
        // Relaxed: a stale answer only delays the steal; sleepers recheck after their own
        // heavy barrier (see `sleep/README.md`).
        if inner
            .bottom
            .load(Relaxed)
            .wrapping_sub(inner.ends.top.load(Relaxed))
            <= 0
        {
            return None;
        }
        // Acquire: pairs with the CAS of whichever thief (or owner) last moved `top`; if the
        // owner, this is the edge invariant 7 relies on.
        let top = inner.ends.top.load(Acquire);
        // Relaxed: compared for identity only (invariant 7). With `--cfg magpie_loom_broken`
        // every `top` passes for the owner's: a negative control the loom models must catch
        // (`loom_chase_lev::loom_pop_then_push_reuses_slot_while_stolen_from`).
        let by_owner = cfg!(magpie_loom_broken) || inner.ends.owner_top.load(Relaxed) == top;
        Some(Begun {
            top,
            needs_barrier: !by_owner,
        })
    }

    /// The second half of a steal begun by [`Stealer::steal_begin`], which returned `t`,
    /// after the caller's heavy barrier if it needed one. That barrier pairs with the light
    /// barrier in `pop`: either we see the owner's reservation of the bottom item, or the
    /// owner sees our `top` (Lê et al.'s fence). Without it, invariant 7 stands in.
    pub(crate) fn steal_end(&self, t: isize) -> Steal<NonNull<T>> {
        let inner = &*self.inner;
        // Acquire: pairs with the Release store of `bottom` in `push`, publishing the slot.
        // (`--cfg magpie_loom_broken` weakens it to Relaxed: a negative control that the
        // loom models must catch, `loom_chase_lev::loom_push_pop_and_steal`.)
        let b = inner.bottom.load(if cfg!(magpie_loom_broken) {
            Relaxed
        } else {
            Acquire
        });
        if b.wrapping_sub(t) <= 0 {
            return Steal::Empty;
        }

        // Acquire: pairs with the Release store in `grow_cold`, publishing copied slots.
        let buffer = inner.buffer.load(Acquire);
        // SAFETY: every buffer ever installed lives until the deque drops (invariant 4).
        let item = unsafe { (*buffer).read(t) };

        // Claim index `t`. SeqCst: totally ordered with the owner's CAS for the last item.
        if inner
            .ends
            .top
            .compare_exchange(t, t.wrapping_add(1), SeqCst, Relaxed)
            .is_err()
        {
            // Someone else took it; `item` may be stale (invariant 3) and is dropped unread.
            return Steal::Retry;
        }
        match NonNull::new(item) {
            Some(item) => Steal::Success(item),
            // Unreachable: a claimed index below `bottom` always holds a pushed pointer.
            None => Steal::Retry,
        }
    }

    /// The barrier mode the deque was made with.
    pub(crate) fn barrier(&self) -> Barrier {
        self.inner.barrier
    }

    /// The number of items, approximately (it may be stale by the time it returns).
    pub(crate) fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the deque looks empty (it may be stale by the time it returns).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
