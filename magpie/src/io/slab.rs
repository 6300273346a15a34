//! The registrations: a slab of [`ScheduledIo`] slots, and the mio token of each.
//!
//! A registration owns one slot while it lives. Its mio [`Token`](mio::Token) (a `usize`)
//! encodes the slot's index and the slot's generation at allocation (`README.md`,
//! "Tokens"); freeing the slot bumps the generation ([`ScheduledIo::retire`]), so an event
//! still carrying the old token (read by a turn before the free, dispatched after it; or
//! delivered for a source that was never deregistered from mio) fails the generation check of
//! [`ScheduledIo::set_readiness`] and is dropped.
//!
//! # Allocation and dispatch
//!
//! Allocation and freeing take one mutex (`Synced`): registration is not a hot path, it costs
//! a system call anyway. Dispatch must not take that lock per event, so slots are never
//! removed: `slots` only grows, each slot is an `Arc<ScheduledIo>` that lives as long as the
//! slab, and a freed slot is reused in place under a new generation. The driver keeps its own
//! copy of the `Arc`s ([`Slab::refresh`]) and looks events up in it without a lock; it takes
//! the lock only when an event names an index its copy does not have yet (the slab grew since),
//! which happens at most once per growth. A stale copy is never wrong: index `i` names the
//! same `ScheduledIo` forever, and the generation decides whether an event is for its current
//! owner.
//!
//! Free slots are reused first in, first out, so a slot is reused only after every other free
//! slot was: the generation then wraps only after `2^GENERATION_BITS` reuses of *this* slot
//! (`README.md`, "Why wrap-around is safe").

use std::collections::VecDeque;

use super::readiness::{ScheduledIo, WakeList, WORD_GENERATION_BITS};
use crate::sync::atomic::Relaxed;
use crate::sync::{lock, Arc, AtomicUsize, Mutex};

/// Bits 0..24 of a token: the slot index.
pub(crate) const INDEX_BITS: u32 = 24;
/// The generation bits a token carries, above the index: the word's 24 where `usize` has room
/// (64-bit targets), what is left of a 32-bit `usize` (8) otherwise.
pub(crate) const GENERATION_BITS: u32 = if usize::BITS - INDEX_BITS < WORD_GENERATION_BITS {
    usize::BITS - INDEX_BITS
} else {
    WORD_GENERATION_BITS
};
/// The generation as the token carries it: every comparison masks the word's with this.
pub(crate) const GENERATION_MASK: u32 = ((1u64 << GENERATION_BITS) - 1) as u32;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// The most slots: the last index is never allocated, so that the driver's own token
/// (`usize::MAX`, its `mio::Waker`) names no slot.
pub(crate) const MAX_SLOTS: usize = INDEX_MASK;

/// The token of slot `index` at `generation`.
pub(crate) fn token(index: usize, generation: u32) -> usize {
    debug_assert!(index < MAX_SLOTS);
    (((generation & GENERATION_MASK) as usize) << INDEX_BITS) | index
}

/// The slot index and the (masked) generation a token names.
pub(crate) fn decode(token: usize) -> (usize, u32) {
    let generation = ((token >> INDEX_BITS) as u64 & u64::from(GENERATION_MASK)) as u32;
    (token & INDEX_MASK, generation)
}

/// A slot handed to a new registration.
#[derive(Debug)]
pub(crate) struct Allocated {
    pub(crate) index: usize,
    /// The slot's generation, masked to the token's width.
    pub(crate) generation: u32,
    pub(crate) io: Arc<ScheduledIo>,
}

impl Allocated {
    pub(crate) fn token(&self) -> usize {
        token(self.index, self.generation)
    }
}

/// Why [`Slab::allocate`] gave nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AllocError {
    /// The driver shut down.
    Shutdown,
    /// `MAX_SLOTS` registrations are live.
    Full,
}

/// The part only the lock reaches.
#[derive(Debug)]
struct Synced {
    /// Every slot ever allocated; never shrinks (module docs).
    slots: Vec<Arc<ScheduledIo>>,
    /// Free slots, oldest free first.
    free: VecDeque<usize>,
    /// Set once, by `shutdown`; nothing is allocated afterwards.
    shutdown: bool,
}

/// The registrations of one driver.
#[derive(Debug)]
pub(crate) struct Slab {
    /// No user code runs under this lock: wakers of retired or shut-down slots leave it and
    /// are dropped or woken by the caller after it is released.
    synced: Mutex<Synced>,
    /// Live registrations, changed under `synced` and read without it: the busy workers'
    /// maintenance and the driver hand-off read it, and must not contend with registrations
    /// for the lock. Relaxed: a gauge; the hand-off orders it with SeqCst fences on both
    /// sides (`Registry::hand_off_driver`).
    live: AtomicUsize,
}

impl Slab {
    pub(crate) fn new() -> Slab {
        Slab {
            synced: Mutex::new(Synced {
                slots: Vec::new(),
                free: VecDeque::new(),
                shutdown: false,
            }),
            live: AtomicUsize::new(0),
        }
    }

    /// A slot for a new registration: the oldest free one, or a new one.
    pub(crate) fn allocate(&self) -> Result<Allocated, AllocError> {
        let mut synced = lock(&self.synced);
        if synced.shutdown {
            return Err(AllocError::Shutdown);
        }
        let index = match synced.free.pop_front() {
            Some(index) => index,
            None if synced.slots.len() < MAX_SLOTS => {
                synced.slots.push(Arc::new(ScheduledIo::new()));
                synced.slots.len() - 1
            }
            None => return Err(AllocError::Full),
        };
        let io = synced.slots[index].clone();
        self.live.fetch_add(1, Relaxed);
        Ok(Allocated {
            index,
            generation: io.generation() & GENERATION_MASK,
            io,
        })
    }

    /// Frees slot `index`, whose registration is gone: bumps its generation (so no event for
    /// the old owner reaches the next) and puts it on the free list. Returns the old owner's
    /// wakers, to be dropped by the caller (after this lock, which is released on return).
    ///
    /// Each allocation must be freed at most once (the registration's drop does it).
    pub(crate) fn free(&self, index: usize) -> WakeList {
        let mut synced = lock(&self.synced);
        // Retire before the slot can be handed out again: the next owner's generation is
        // the bumped one.
        let woken = synced.slots[index].retire();
        synced.free.push_back(index);
        self.live.fetch_sub(1, Relaxed);
        woken
    }

    /// Extends `copy` with the slots it lacks (the dispatcher's lock-free copy, module docs).
    pub(crate) fn refresh(&self, copy: &mut Vec<Arc<ScheduledIo>>) {
        let synced = lock(&self.synced);
        let have = copy.len();
        copy.extend(synced.slots[have..].iter().cloned());
    }

    /// Refuses every later allocation and marks every slot shut down. Returns the waiting
    /// wakers, to be woken by the caller after this lock (released on return).
    pub(crate) fn shutdown(&self) -> Vec<WakeList> {
        let mut synced = lock(&self.synced);
        synced.shutdown = true;
        synced.slots.iter().map(|io| io.shutdown()).collect()
    }

    /// Live registrations (allocated, not freed).
    pub(crate) fn live(&self) -> usize {
        self.live.load(Relaxed)
    }
}
