//! Readiness of one registered I/O source: [`Readiness`] bits and the [`ScheduledIo`] word.
//!
//! The driver (`driver.rs`) learns from the OS that a source became readable or writable and
//! records it here; a task that wants to read polls [`ScheduledIo::poll_ready`], tries the
//! system call, and on `WouldBlock` clears what it saw with [`ScheduledIo::clear_readiness`],
//! then polls again and waits. The OS reports *edges* (mio is edge-triggered): readiness that
//! is cleared wrongly is never reported again, and the task waits for good. The whole point of
//! this file is that no interleaving clears or hides readiness it should not.
//!
//! # The word
//!
//! One `AtomicU64` per source (layout in `README.md`, "The readiness word"): the readiness bits,
//! the shutdown bit, the slot's *generation* and the *tick* of the last driver turn that set
//! readiness. Every change is one compare-and-swap of the whole word, so a reader sees bits,
//! generation and tick of one moment.
//!
//! # Invariants
//!
//! 1. **Generation.** [`ScheduledIo::set_readiness`] changes nothing unless the generation it
//!    was given (decoded from the event's mio token) is the word's, compared in the same CAS
//!    that sets the bits. [`ScheduledIo::retire`] (the slot is freed) bumps the generation and
//!    clears the bits in one CAS. So readiness for a freed slot, set before the free, is
//!    cleared by it, and set after it is refused: a new owner never sees it.
//! 2. **Tick.** [`ScheduledIo::clear_readiness`] clears only if the word's tick is still the
//!    tick of the [`ReadyEvent`] it is given, compared in the same CAS. Readiness set by a
//!    later turn carries a later tick, so it survives a clear based on an older poll
//!    (tokio#5042's class of bug: a clear that wiped readiness it never saw).
//! 3. **No lost wakeup.** A poller loads the word and stores its waker *under* `waiters`; the
//!    driver sets the bits *before* it locks `waiters` to take the wakers. The mutex orders
//!    the two: either the driver's lock comes after the poller's unlock and finds the waker, or
//!    the poller's lock comes after the driver's unlock, and its load sees the bits (the CAS
//!    happened before the driver's lock, which happened before the poller's).
//! 4. **Wakes follow the generation.** [`ScheduledIo::take_wakers`] takes wakers only if the word's
//!    generation, read under `waiters`, is the one the readiness was set for. A new owner
//!    stores its waker only after the slot was reused, hence after `retire`'s CAS: a stale
//!    wake that locks after that store reads the new generation and wakes nobody.
//! 5. **Shutdown is final.** Once [`ScheduledIo::shutdown`] set the bit, every poll returns
//!    ready with [`Readiness::ERROR`] and the event's `is_shutdown`, without storing a waker;
//!    wakers stored before were taken and woken by `shutdown` (same argument as 3).
//!
//! No user code runs under `waiters`: a waker's `wake` and `drop` are user code, so wakers
//! leave the slots under the lock and are woken or dropped after it is released, each inside
//! a panic boundary ([`WakeList::wake_all`]).

use std::fmt;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::*;
use crate::sync::{lock, AtomicU64, Mutex};
use crate::util::unwind::{drop_quietly, halt_unwinding};

/// A set of readiness bits, as the OS reported them for one source.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Readiness(u8);

impl Readiness {
    /// Nothing.
    pub(crate) const EMPTY: Readiness = Readiness(0);
    /// Bit 0: a read may make progress. Cleared by a task that got `WouldBlock`.
    pub(crate) const READABLE: Readiness = Readiness(1 << 0);
    /// Bit 1: a write may make progress. Cleared by a task that got `WouldBlock`.
    pub(crate) const WRITABLE: Readiness = Readiness(1 << 1);
    /// Bit 2: the read half is closed (the peer shut down or hung up). Final: never cleared,
    /// every later read returns at once (end of stream, or an error).
    pub(crate) const READ_CLOSED: Readiness = Readiness(1 << 2);
    /// Bit 3: the write half is closed. Final, like `READ_CLOSED`.
    pub(crate) const WRITE_CLOSED: Readiness = Readiness(1 << 3);
    /// Bit 4: the source has a pending error (`take_error` reports it). Wakes both
    /// directions; cleared like `READABLE` by a task that saw it and got `WouldBlock`.
    pub(crate) const ERROR: Readiness = Readiness(1 << 4);

    /// Every readiness bit.
    pub(crate) const ALL: Readiness = Readiness(0b1_1111);
    /// The bits that `clear_readiness` may clear: the closed bits are final.
    const CLEARABLE: Readiness = Readiness(Self::READABLE.0 | Self::WRITABLE.0 | Self::ERROR.0);

    /// The bits in either set.
    pub(crate) const fn union(self, other: Readiness) -> Readiness {
        Readiness(self.0 | other.0)
    }

    /// The bits in both sets.
    pub(crate) const fn intersection(self, other: Readiness) -> Readiness {
        Readiness(self.0 & other.0)
    }

    /// The bits of `self` not in `other`.
    pub(crate) const fn difference(self, other: Readiness) -> Readiness {
        Readiness(self.0 & !other.0)
    }

    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every bit of `other` is in `self`.
    pub(crate) const fn contains(self, other: Readiness) -> bool {
        self.0 & other.0 == other.0
    }

    pub(crate) const fn is_readable(self) -> bool {
        self.contains(Self::READABLE)
    }

    pub(crate) const fn is_writable(self) -> bool {
        self.contains(Self::WRITABLE)
    }

    pub(crate) const fn is_read_closed(self) -> bool {
        self.contains(Self::READ_CLOSED)
    }

    pub(crate) const fn is_write_closed(self) -> bool {
        self.contains(Self::WRITE_CLOSED)
    }

    pub(crate) const fn is_error(self) -> bool {
        self.contains(Self::ERROR)
    }

    /// The bits as the low bits of a word.
    const fn bits(self) -> u64 {
        self.0 as u64
    }

    /// The readiness bits of a word (the other fields masked off).
    const fn from_word(word: u64) -> Readiness {
        Readiness((word & Self::ALL.0 as u64) as u8)
    }
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::READABLE, "READABLE"),
            (Self::WRITABLE, "WRITABLE"),
            (Self::READ_CLOSED, "READ_CLOSED"),
            (Self::WRITE_CLOSED, "WRITE_CLOSED"),
            (Self::ERROR, "ERROR"),
        ];
        let mut set = f.debug_set();
        for (bit, name) in names {
            if self.contains(bit) {
                set.entry(&format_args!("{name}"));
            }
        }
        set.finish()
    }
}

/// Which half of a source a task waits for; each has its own waker slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    /// The readiness that ends a wait in this direction.
    pub(crate) const fn mask(self) -> Readiness {
        match self {
            Direction::Read => {
                Readiness(Readiness::READABLE.0 | Readiness::READ_CLOSED.0 | Readiness::ERROR.0)
            }
            Direction::Write => {
                Readiness(Readiness::WRITABLE.0 | Readiness::WRITE_CLOSED.0 | Readiness::ERROR.0)
            }
        }
    }
}

/// What a poll saw: the readiness of its direction and the tick of the turn that set it.
/// Hand it back to [`ScheduledIo::clear_readiness`] after a `WouldBlock`.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadyEvent {
    pub(crate) ready: Readiness,
    pub(crate) tick: u32,
    /// The slot's generation when the poll saw it: a clear never reaches a later owner.
    generation: u32,
    /// The driver shut down: `ready` holds `ERROR`, and the caller should fail the operation
    /// rather than retry it.
    pub(crate) shutdown: bool,
}

// The word's fields (README.md, "The readiness word").
/// Bits 0..5: the readiness bits ([`Readiness`]).
pub(super) const READINESS_MASK: u64 = Readiness::ALL.bits();
/// Bit 5: set once by `shutdown`, never cleared (invariant 5).
pub(super) const SHUTDOWN: u64 = 1 << 5;
/// Bits 8..32: the slot's generation.
pub(crate) const GENERATION_SHIFT: u32 = 8;
/// The width of the generation field in the word. The token carries at most this many bits
/// of it (`slab.rs`, `GENERATION_BITS`).
pub(crate) const WORD_GENERATION_BITS: u32 = 24;
pub(super) const WORD_GENERATION_MASK: u64 = ((1 << WORD_GENERATION_BITS) - 1) << GENERATION_SHIFT;
/// Bits 32..64: the tick of the last turn that set readiness.
pub(super) const TICK_SHIFT: u32 = 32;

const fn generation_of(word: u64) -> u32 {
    ((word & WORD_GENERATION_MASK) >> GENERATION_SHIFT) as u32
}

const fn tick_of(word: u64) -> u32 {
    (word >> TICK_SHIFT) as u32
}

/// The wakers waiting on a source, one list per direction. Only `waiters`' lock reaches
/// them, and no user code runs under it.
///
/// A list, not a slot: several tasks may wait on one direction of one source (acceptors
/// sharing an `Arc<TcpListener>`, receivers sharing an `Arc<UdpSocket>`), and with one slot
/// the last poller's waker replaced the others', so a task whose waker was replaced waited
/// for good, readiness or not (found in the review of issue 19). A poller whose waker is
/// already listed (`will_wake`) adds nothing, so one task polling again and again costs one
/// entry. A future dropped while it waits leaves its waker listed until the next readiness
/// in that direction wakes it (a wake of a task that no longer waits does nothing); so that
/// such wakers cannot pile up on a source that stays quiet, a list that reaches
/// [`MAX_WAITERS`] is woken in full before the next waker joins it: the tasks still waiting
/// poll again and list themselves anew.
#[derive(Default)]
struct Waiters {
    readers: Vec<Waker>,
    writers: Vec<Waker>,
}

/// Wakers one direction of a source lists before it wakes them all (see [`Waiters`]).
const MAX_WAITERS: usize = 32;

impl Waiters {
    fn list(&mut self, direction: Direction) -> &mut Vec<Waker> {
        match direction {
            Direction::Read => &mut self.readers,
            Direction::Write => &mut self.writers,
        }
    }

    /// Takes every waker of both directions (the lists keep their capacity).
    fn take_all(&mut self) -> WakeList {
        let mut taken = WakeList::default();
        taken.0.append(&mut self.readers);
        taken.0.append(&mut self.writers);
        taken
    }
}

/// Wakers taken out of sources, to be woken (or dropped) by whoever holds the list once no
/// lock of the runtime is held: every waker is user code.
///
/// A driver turn fills one for the worker that turned it, which wakes it after its park in
/// the driver has settled, when the sleep protocol counts it as unparked again. A waker
/// that waits (in `join`, say) parks its worker, and while the wakers ran inside the turn
/// that worker still counted as parked in the driver, so the wake of that wait went to the
/// poller instead of the worker, and it slept for good with the driver role held (found in
/// the review of issue 19; `tests/net_adversarial.rs`).
#[must_use = "wakers are woken by `wake_all`"]
#[derive(Default)]
pub(crate) struct WakeList(Vec<Waker>);

impl WakeList {
    /// Adds one waker.
    pub(crate) fn push(&mut self, waker: Waker) {
        self.0.push(waker);
    }

    /// How many wakers this holds.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Wakes every waker, each in a panic boundary (a panicking waker costs its own wake,
    /// not the caller's thread nor the other wakers). Returns how many.
    pub(crate) fn wake_all(self) -> usize {
        let count = self.0.len();
        for waker in self.0 {
            if let Err(payload) = halt_unwinding(|| waker.wake()) {
                drop_quietly(payload);
            }
        }
        count
    }

    /// Drops them unwoken (a retired slot's), each in a panic boundary.
    pub(crate) fn drop_contained(self) {
        for waker in self.0 {
            drop_quietly(waker);
        }
    }
}

/// The readiness of one registered source, shared by the driver and the tasks that use it.
/// A slab slot owns one for its whole life; reuse bumps the generation.
pub(crate) struct ScheduledIo {
    /// Readiness, shutdown, generation and tick (module docs, "The word").
    word: AtomicU64,
    /// The readers' and the writers' wakers. No user code runs under this lock (module docs).
    waiters: Mutex<Waiters>,
}

impl fmt::Debug for ScheduledIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.word.load(Relaxed);
        f.debug_struct("ScheduledIo")
            .field("ready", &Readiness::from_word(word))
            .field("shutdown", &(word & SHUTDOWN != 0))
            .field("generation", &generation_of(word))
            .field("tick", &tick_of(word))
            .finish_non_exhaustive()
    }
}

impl ScheduledIo {
    /// A fresh slot at generation 0, nothing ready.
    pub(crate) fn new() -> ScheduledIo {
        ScheduledIo {
            word: AtomicU64::new(0),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// The current generation (the slab hands it to a new owner).
    pub(crate) fn generation(&self) -> u32 {
        // Acquire: pairs with the Release of `retire`'s CAS (the slab reads this under its
        // lock after `retire`, so the lock orders them already; Acquire keeps the read
        // self-evidently fresh).
        generation_of(self.word.load(Acquire))
    }

    /// Applies `f` to the word in a CAS loop until it returns `None` (no change) or the CAS
    /// succeeds. Returns whether it changed the word.
    fn update(&self, mut f: impl FnMut(u64) -> Option<u64>) -> bool {
        // Acquire on the load and on failure: we decide on the fields we read (generation,
        // tick); pairs with the Release of the CAS that wrote them.
        let mut current = self.word.load(Acquire);
        loop {
            let Some(new) = f(current) else {
                return false;
            };
            // AcqRel: Release publishes the new fields to `poll_ready`'s Acquire loads and to
            // the other updaters' Acquire; Acquire as above.
            match self
                .word
                .compare_exchange_weak(current, new, AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Records readiness `ready` from a driver turn `tick` for the owner of `generation`
    /// (decoded from the event's token, so masked to the token's width: `generation_mask`).
    /// Returns `false`, changing nothing, if the slot has been freed since (invariant 1) or the
    /// driver shut down. The caller then calls [`ScheduledIo::wake`] with the same arguments.
    pub(crate) fn set_readiness(
        &self,
        generation: u32,
        generation_mask: u32,
        tick: u32,
        ready: Readiness,
    ) -> bool {
        self.update(|word| {
            let stale = generation_of(word) & generation_mask != generation;
            // A negative control for `loom_readiness`: without the generation check, an
            // event for a freed slot reaches its next owner.
            if (stale && !cfg!(magpie_loom_broken)) || word & SHUTDOWN != 0 {
                return None;
            }
            let kept = word & (WORD_GENERATION_MASK | SHUTDOWN);
            let bits = (word & READINESS_MASK) | ready.bits();
            Some(kept | bits | (u64::from(tick) << TICK_SHIFT))
        })
    }

    /// Polls for readiness in `direction`. Ready: the event to hand to
    /// [`ScheduledIo::clear_readiness`] after a `WouldBlock`. Pending: `cx`'s waker is in the
    /// direction's slot (replacing the previous one), and a later `set_readiness` + `wake`
    /// for it wakes it (invariant 3).
    pub(crate) fn poll_ready(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
    ) -> Poll<ReadyEvent> {
        // The fast path, without the lock: readiness is already here.
        if let Some(event) = self.ready_event(direction) {
            return Poll::Ready(event);
        }
        // Cloned before the lock: a waker's `clone` is user code, and one that panicked or
        // polled this source again must not do it under `waiters`.
        let mut waker = Some(cx.waker().clone());
        let overflow = {
            let mut waiters = lock(&self.waiters);
            // Reread under the lock (invariant 3).
            if let Some(event) = self.ready_event(direction) {
                drop(waiters);
                if let Some(unused) = waker {
                    drop_quietly(unused);
                }
                return Poll::Ready(event);
            }
            let list = waiters.list(direction);
            if list.iter().any(|listed| listed.will_wake(cx.waker())) {
                None
            } else {
                // Full: wake them all (see `Waiters`), after the lock.
                let full = list.len() >= MAX_WAITERS;
                let overflow = full.then(|| WakeList(std::mem::take(list)));
                list.extend(waker.take());
                overflow
            }
        };
        // After the lock: waking and dropping are user code.
        if let Some(overflow) = overflow {
            overflow.wake_all();
        }
        if let Some(unused) = waker {
            drop_quietly(unused);
        }
        Poll::Pending
    }

    /// The readiness in `direction` now, if any (or the shutdown event). Stores no waker:
    /// for the `try_*` operations, which must not displace a waiting task's waker.
    pub(crate) fn ready_event(&self, direction: Direction) -> Option<ReadyEvent> {
        // Acquire: pairs with the Release of the CAS in `set_readiness`/`shutdown`.
        let word = self.word.load(Acquire);
        let tick = tick_of(word);
        let generation = generation_of(word);
        if word & SHUTDOWN != 0 {
            return Some(ReadyEvent {
                ready: Readiness::from_word(word).union(Readiness::ERROR),
                tick,
                generation,
                shutdown: true,
            });
        }
        let ready = Readiness::from_word(word).intersection(direction.mask());
        (!ready.is_empty()).then_some(ReadyEvent {
            ready,
            tick,
            generation,
            shutdown: false,
        })
    }

    /// Clears the readiness of `event` (after its operation got `WouldBlock`), unless a later
    /// turn has set readiness since (the tick moved: invariant 2). The closed bits are final
    /// and stay. Returns whether it cleared.
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) -> bool {
        let clear = event.ready.intersection(Readiness::CLEARABLE).bits();
        self.update(|word| {
            let moved = tick_of(word) != event.tick || generation_of(word) != event.generation;
            // A negative control for `loom_readiness`: clearing whatever the tick says
            // wipes readiness that a later turn set after the poll.
            if (moved && !cfg!(magpie_loom_broken)) || word & clear == 0 {
                return None;
            }
            Some(word & !clear)
        })
    }

    /// Moves the wakers that `ready` (set for `generation`) ends onto `list`, unless the
    /// slot has been retired since (invariant 4). Wake them after any lock of the caller's
    /// is released.
    pub(crate) fn take_wakers(
        &self,
        generation: u32,
        generation_mask: u32,
        ready: Readiness,
        list: &mut WakeList,
    ) {
        let mut waiters = lock(&self.waiters);
        // Relaxed is enough here: the lock orders this load after the new owner's stores
        // (invariant 4), and the word is only ever changed by CAS.
        if generation_of(self.word.load(Relaxed)) & generation_mask != generation {
            return;
        }
        if !ready.intersection(Direction::Read.mask()).is_empty() {
            list.0.append(&mut waiters.readers);
        }
        if !ready.intersection(Direction::Write.mask()).is_empty() {
            list.0.append(&mut waiters.writers);
        }
    }

    /// [`ScheduledIo::take_wakers`], then wakes them, contained. Returns how many.
    pub(crate) fn wake(&self, generation: u32, generation_mask: u32, ready: Readiness) -> usize {
        let mut list = WakeList::default();
        self.take_wakers(generation, generation_mask, ready, &mut list);
        list.wake_all()
    }

    /// Frees the slot for reuse: bumps the generation (wrapping in its field) and clears the
    /// readiness in one CAS (invariant 1), then takes both wakers (the old owner's; it is
    /// gone). Returns them, to be dropped after any lock of the caller's. The shutdown bit
    /// and the tick stay.
    pub(crate) fn retire(&self) -> WakeList {
        self.update(|word| {
            let generation = (generation_of(word).wrapping_add(1) as u64) << GENERATION_SHIFT;
            let kept = word & (SHUTDOWN | !(WORD_GENERATION_MASK | READINESS_MASK));
            Some(kept | (generation & WORD_GENERATION_MASK))
        });
        lock(&self.waiters).take_all()
    }

    /// Marks the source shut down (its driver is going away): every later poll is ready with
    /// `ERROR` and `shutdown` (invariant 5). Returns the waiting wakers, to be woken after
    /// any lock of the caller's. Idempotent.
    pub(crate) fn shutdown(&self) -> WakeList {
        self.update(|word| (word & SHUTDOWN == 0).then_some(word | SHUTDOWN));
        // Under the lock after the CAS: a poller that stored its waker before this lock is
        // woken; one that locks after it sees the bit (invariant 3's argument).
        lock(&self.waiters).take_all()
    }
}

impl fmt::Debug for WakeList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WakeList")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(test, loom))]
#[path = "loom_readiness.rs"]
mod loom_readiness;
