//! A hierarchical timer wheel: files millisecond deadlines so that inserting, cancelling and
//! finding the next one to expire cost O(1), whatever the number of timers.
//!
//! This is the data structure only: no clock, no threads, no wakers. The caller says what time
//! it is (`poll(now_ms)`, milliseconds since the wheel's epoch) and gets back the entries due.
//!
//! # Algorithm
//!
//! Varghese & Lauck's hierarchical timing wheel ("Hashed and Hierarchical Timing Wheels",
//! SOSP 1987), in the shape tokio's `runtime/time/wheel` gives it: 6 levels of 64 slots. A slot
//! of level `L` spans `64^L` ms (level 0: 1 ms, level 1: 64 ms, ..., level 5: 64^5 ms ≈ 12.4
//! days), so a level spans `64^(L+1)` ms and the whole wheel [`RANGE_MS`] = 64^6 ms ≈ 2.2 years.
//!
//! Read a time in base 64: digit `L` of `t` is `(t >> 6L) % 64`. The wheel's clock is
//! `elapsed`. A deadline `d > elapsed` is filed at the level of the highest digit in which `d`
//! and `elapsed` differ, in the slot named by `d`'s digit there. Every higher digit agrees, so
//! that slot lies ahead of `elapsed` within the current turn of its level, and it starts (its
//! lower digits zeroed) at or before `d`. When the clock reaches a slot's start, the slot is
//! emptied: an entry that is due fires, any other is filed again against the new clock, which
//! now agrees with it in one more digit, so it drops to a lower level ("cascades"). An entry
//! within range moves at most 5 times before it fires.
//!
//! A deadline that differs from `elapsed` above the top digit (more than a turn of level 5
//! away, up to `u64::MAX`, which is what a saturating `Duration::MAX` conversion gives) is
//! clamped: it goes to level 5, in the slot `min(63, k)` slots ahead, where `k` is the number
//! of level-5 boundaries between `elapsed` and `d`. Level 5 is treated as a ring, so "ahead"
//! may wrap into the next turn. That slot still starts at or before `d`, so the entry is filed
//! again (about every 2.1 years of wheel time) until it fits, and never fires early. Near a
//! turn boundary the same rule files a close deadline exactly: `elapsed = 2^36 - 1`,
//! `d = 2^36 + 5` goes one level-5 slot ahead, to the slot starting at `2^36`.
//!
//! A deadline `<= elapsed` is already expired: it goes on a separate expired list and the next
//! poll that is not a no-op (`now >= elapsed`) returns it; `next_expiration` says `elapsed`
//! meanwhile. It does not fire from `insert` itself because the caller may hold locks or be in
//! the middle of registering a waker; one place delivers expirations.
//!
//! Entries live in a slab (`Vec` plus free list); each slot, and the expired list, is a doubly
//! linked list threaded through slab indices, so `remove` unlinks in O(1). A [`TimerKey`]
//! carries the slab index and the entry's generation, bumped whenever an entry is freed, so a
//! stale key (its timer fired or was removed, the index maybe reused) matches nothing. Each
//! level keeps a 64-bit occupancy bitmap; rotating it by the clock's digit and counting
//! trailing zeros finds the next non-empty slot without a scan.
//!
//! Costs: `insert` and `remove` O(1); `next_expiration` O(levels); `poll` O(levels) per slot it
//! empties plus O(1) per entry it fires or moves.
//!
//! # Invariants
//!
//! Write `start(L, s)` for the start of slot `s` of level `L` as seen from the clock:
//! `((elapsed >> 6L) + dist) << 6L`, where `dist = (s - digit_L(elapsed)) mod 64`.
//!
//! 1. Every live entry is on exactly one list, the one its `list` field names: the expired
//!    list, or slot `(L, s)`. A slot's bit in `occupied[L]` is set iff its list is non-empty.
//!    Vacant entries are on the free list only and hold no value.
//! 2. For every entry in slot `(L, s)`: `elapsed < start(L, s) <= deadline`, i.e. `dist` is in
//!    `1..=63`. So the slot under the clock's own digit (`dist == 0`) is always empty, and
//!    moving the clock to any time before `start(L, s)` leaves `start(L, s)` unchanged.
//! 3. For `L < 5`, `start(L, s)` lies in the same level-`L+1` slot as `elapsed`, and every
//!    occupied slot of level `L+1` starts after that slot ends. So the lowest non-empty level
//!    holds the earliest slot, which is what `next_slot` returns.
//! 4. `poll` moves the clock only to the start of the earliest occupied slot (and empties that
//!    slot there) or, when no occupied slot starts at or before `now`, to `now`. With 2, the
//!    clock therefore never passes an occupied slot's start, and an entry whose deadline is
//!    `<= now` is reached, after moving down as often as needed, within the same `poll`.
//! 5. An entry is handed out only when `deadline <= now` of the `poll` that hands it out.
//! 6. A live entry's generation is the one in the key `insert` returned for it; a vacant
//!    entry's generation has not been handed out yet.

/// Bits of a time per level: 64 slots per level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Levels; level `LEVELS - 1` is the top, which also takes clamped deadlines.
const LEVELS: usize = 6;
/// The top level.
const TOP: usize = LEVELS - 1;
/// The span of the whole wheel in ms (64^6, about 2.2 years). Deadlines further than this from
/// the clock are clamped (module doc).
pub(crate) const RANGE_MS: u64 = 1 << (SLOT_BITS * LEVELS as u32);

/// The list id of the expired list; slot lists are `level * SLOTS + slot`.
const EXPIRED: u16 = (LEVELS * SLOTS) as u16;
/// Number of lists: every slot, plus the expired list.
const LISTS: usize = LEVELS * SLOTS + 1;
/// "No entry" in a link or a list head.
const NIL: u32 = u32::MAX;

/// Names one timer in a [`Wheel`], for [`Wheel::remove`]. Becomes stale (matches nothing) once
/// the timer fires or is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TimerKey {
    index: u32,
    /// A 64-bit generation cannot wrap: a stale key can never match a later entry (invariant 6).
    generation: u64,
}

/// One slab entry: a timer while `value` is `Some`, a free-list node otherwise.
#[derive(Debug)]
struct Entry<T> {
    value: Option<T>,
    generation: u64,
    deadline: u64,
    /// The list this entry is on (invariant 1); meaningless while vacant.
    list: u16,
    prev: u32,
    /// The next entry on the same list, or the next free entry while vacant.
    next: u32,
}

/// The earliest occupied slot.
#[derive(Clone, Copy, Debug)]
struct Due {
    level: usize,
    slot: usize,
    /// When the slot comes due: `start(level, slot)` in the module doc.
    start: u64,
}

/// A hierarchical timer wheel holding values of type `T` (module doc).
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    /// The clock: ms since the wheel's epoch, as of the last `poll`.
    elapsed: u64,
    entries: Vec<Entry<T>>,
    /// Head of the free list of vacant entries.
    free: u32,
    /// Live entries.
    len: usize,
    /// The head of every list, indexed by list id.
    heads: [u32; LISTS],
    /// Per level, bit `s` is set iff slot `s` is non-empty (invariant 1).
    occupied: [u64; LEVELS],
}

impl<T> Wheel<T> {
    /// An empty wheel whose clock reads 0.
    pub(crate) fn new() -> Wheel<T> {
        Wheel {
            elapsed: 0,
            entries: Vec::new(),
            free: NIL,
            len: 0,
            heads: [NIL; LISTS],
            occupied: [0; LEVELS],
        }
    }

    /// The clock: the latest `now` given to `poll` (0 before the first).
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// The number of timers filed and not yet fired or removed.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is filed.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Files `value` to fire at `deadline_ms`. A deadline at or before the clock is already
    /// expired: the next `poll` with `now >= elapsed()` returns it. Any deadline is accepted,
    /// `u64::MAX` included (module doc, clamping).
    ///
    /// # Panics
    ///
    /// If `u32::MAX - 1` timers are already filed.
    pub(crate) fn insert(&mut self, deadline_ms: u64, value: T) -> TimerKey {
        let index = if self.free != NIL {
            let index = self.free;
            self.free = self.entries[index as usize].next;
            index
        } else {
            // `NIL` must stay free for "no entry".
            assert!(self.entries.len() < NIL as usize, "too many timers");
            self.entries.push(Entry {
                value: None,
                generation: 0,
                deadline: 0,
                list: EXPIRED,
                prev: NIL,
                next: NIL,
            });
            (self.entries.len() - 1) as u32
        };
        let entry = &mut self.entries[index as usize];
        entry.value = Some(value);
        entry.deadline = deadline_ms;
        let key = TimerKey {
            index,
            generation: entry.generation,
        };
        self.len += 1;
        self.file(index);
        key
    }

    /// Cancels the timer `key` names and gives its value back, in O(1). Returns `None` if it
    /// already fired or was removed (invariant 6: a stale key never touches another timer).
    pub(crate) fn remove(&mut self, key: TimerKey) -> Option<T> {
        let entry = self.entries.get(key.index as usize)?;
        if entry.generation != key.generation || entry.value.is_none() {
            return None;
        }
        self.unlink(key.index);
        Some(self.release(key.index))
    }

    /// The earliest time at which `poll` may return something: the clock itself if an
    /// already-expired timer waits, otherwise the start of the earliest occupied slot (which
    /// is never later than any deadline filed there, invariant 2, but may be earlier: a poll
    /// then only moves entries down a level). `None` if the wheel is empty.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if self.heads[EXPIRED as usize] != NIL {
            return Some(self.elapsed);
        }
        self.next_slot().map(|due| due.start)
    }

    /// Moves the clock to `now_ms` and appends every timer with `deadline <= now_ms` to `out`,
    /// in no particular order; never one with a later deadline (invariant 5). Time does not run
    /// backwards: if `now_ms < elapsed()` this does nothing at all.
    pub(crate) fn poll(&mut self, now_ms: u64, out: &mut Vec<(TimerKey, T)>) {
        if now_ms < self.elapsed {
            return;
        }
        // Timers inserted already expired: their deadline is <= elapsed <= now.
        let mut index = self.take_list(EXPIRED);
        while index != NIL {
            let next = self.entries[index as usize].next;
            self.fire(index, out);
            index = next;
        }
        // Empty the occupied slots in the order they come due (invariants 3 and 4).
        while let Some(due) = self.next_slot() {
            if due.start > now_ms {
                break;
            }
            // Set the clock to the slot's start, not to `now`: every other occupied slot starts
            // later (invariant 3), so their starts stay put (invariant 2), and what we file
            // again below is filed relative to a clock that has not skipped any slot.
            self.elapsed = due.start;
            let mut index = self.take_list(list_id(due.level, due.slot));
            while index != NIL {
                let next = self.entries[index as usize].next;
                if self.entries[index as usize].deadline <= now_ms {
                    self.fire(index, out);
                } else {
                    // deadline > now >= elapsed: it goes to a slot, never the expired list,
                    // and that slot starts at or before its deadline (invariant 2).
                    self.file(index);
                }
                index = next;
            }
        }
        // No occupied slot starts at or before `now`, so moving the clock there keeps
        // invariant 2 for all of them.
        self.elapsed = now_ms;
    }

    /// Removes every timer, due or not, and appends them to `out` in no particular order;
    /// the clock stays where it is. O(lists + timers). For closing a wheel for good (the
    /// driver's shutdown), where `poll(u64::MAX)` would move the clock to the end of time.
    pub(crate) fn drain(&mut self, out: &mut Vec<(TimerKey, T)>) {
        for list in 0..LISTS as u16 {
            let mut index = self.take_list(list);
            while index != NIL {
                let next = self.entries[index as usize].next;
                self.fire(index, out);
                index = next;
            }
        }
        debug_assert_eq!(self.len, 0, "a live timer on no list (invariant 1)");
    }

    /// Puts the live entry `index` on the list its deadline calls for, given the clock.
    fn file(&mut self, index: u32) {
        let deadline = self.entries[index as usize].deadline;
        let list = if deadline <= self.elapsed {
            EXPIRED
        } else {
            let (level, slot) = slot_for(self.elapsed, deadline);
            self.occupied[level] |= 1 << slot;
            list_id(level, slot)
        };
        // Push at the head: order within a list does not matter.
        let head = self.heads[list as usize];
        let entry = &mut self.entries[index as usize];
        entry.list = list;
        entry.prev = NIL;
        entry.next = head;
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        self.heads[list as usize] = index;
    }

    /// Takes `index` off its list, keeping the occupancy bit in step (invariant 1).
    fn unlink(&mut self, index: u32) {
        let Entry {
            list, prev, next, ..
        } = self.entries[index as usize];
        if prev == NIL {
            self.heads[list as usize] = next;
            if next == NIL && list != EXPIRED {
                let (level, slot) = (list as usize / SLOTS, list as usize % SLOTS);
                self.occupied[level] &= !(1 << slot);
            }
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }

    /// Detaches a whole list and returns its head; its entries keep their `next` links, which
    /// the caller follows before filing or freeing each one.
    fn take_list(&mut self, list: u16) -> u32 {
        let head = std::mem::replace(&mut self.heads[list as usize], NIL);
        if list != EXPIRED {
            let (level, slot) = (list as usize / SLOTS, list as usize % SLOTS);
            self.occupied[level] &= !(1 << slot);
        }
        head
    }

    /// Frees the detached entry `index` and hands it to `out` under its key.
    fn fire(&mut self, index: u32, out: &mut Vec<(TimerKey, T)>) {
        let key = TimerKey {
            index,
            generation: self.entries[index as usize].generation,
        };
        let value = self.release(index);
        out.push((key, value));
    }

    /// Frees the detached entry `index`, retiring its key (invariant 6), and returns its value.
    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        let value = entry.value.take().expect("releasing a vacant timer entry");
        entry.generation += 1;
        entry.next = self.free;
        self.free = index;
        self.len -= 1;
        value
    }

    /// The earliest occupied slot, if any.
    fn next_slot(&self) -> Option<Due> {
        // Invariant 3: the lowest non-empty level holds the earliest slot.
        let level = self.occupied.iter().position(|&bits| bits != 0)?;
        let shift = SLOT_BITS * level as u32;
        let block = self.elapsed >> shift;
        // Bit `i` of the rotated map is slot `digit + i`, so the trailing zeros count the
        // slots from the clock's own digit to the next occupied one.
        let dist = self.occupied[level]
            .rotate_right((block % SLOTS as u64) as u32)
            .trailing_zeros() as u64;
        debug_assert!(dist >= 1, "an occupied slot under the clock (invariant 2)");
        // No overflow: the start is at most a deadline filed there (invariant 2).
        Some(Due {
            level,
            slot: ((block + dist) % SLOTS as u64) as usize,
            start: (block + dist) << shift,
        })
    }
}

/// The list id of slot `slot` of level `level`.
fn list_id(level: usize, slot: usize) -> u16 {
    (level * SLOTS + slot) as u16
}

/// The `(level, slot)` for `deadline`, seen from a clock reading `elapsed < deadline`.
fn slot_for(elapsed: u64, deadline: u64) -> (usize, usize) {
    debug_assert!(elapsed < deadline);
    // The highest bit in which they differ picks the level (module doc).
    let top_bit = 63 - (elapsed ^ deadline).leading_zeros();
    let level = (top_bit / SLOT_BITS) as usize;
    if level < TOP {
        let slot = (deadline >> (SLOT_BITS * level as u32)) % SLOTS as u64;
        return (level, slot as usize);
    }
    // The top level, or above it (clamped). Count the level-5 boundaries from the clock to the
    // deadline: at least 1, since `deadline > elapsed` differs in a digit >= 5. Below the clamp
    // this is just the difference of the two top digits; above it, 63 is the farthest slot,
    // which still starts before the deadline.
    let shift = SLOT_BITS * TOP as u32;
    let dist = ((deadline >> shift) - (elapsed >> shift)).min(SLOTS as u64 - 1);
    let slot = ((elapsed >> shift) + dist) % SLOTS as u64;
    (TOP, slot as usize)
}

#[cfg(test)]
impl<T> Wheel<T> {
    /// Checks invariants 1 to 3 by walking every list; O(timers + lists). For tests only.
    pub(crate) fn check_invariants(&self) {
        let mut seen = 0;
        for list in 0..LISTS {
            let mut prev = NIL;
            let mut index = self.heads[list];
            if list < EXPIRED as usize {
                let (level, slot) = (list / SLOTS, list % SLOTS);
                assert_eq!(
                    self.occupied[level] & (1 << slot) != 0,
                    index != NIL,
                    "occupancy bit of ({level}, {slot})"
                );
            }
            while index != NIL {
                let entry = &self.entries[index as usize];
                assert!(entry.value.is_some());
                assert_eq!(entry.list as usize, list);
                assert_eq!(entry.prev, prev);
                if list < EXPIRED as usize {
                    let (level, slot) = (list / SLOTS, list % SLOTS);
                    let shift = SLOT_BITS * level as u32;
                    let block = self.elapsed >> shift;
                    let dist = (slot as u64).wrapping_sub(block) % SLOTS as u64;
                    let start = (block + dist) << shift;
                    assert!(
                        dist >= 1 && start <= entry.deadline,
                        "({level}, {slot}) starts at {start}, clock {}, deadline {}",
                        self.elapsed,
                        entry.deadline
                    );
                }
                seen += 1;
                prev = index;
                index = entry.next;
            }
        }
        assert_eq!(seen, self.len);
        // Invariant 3: the lowest non-empty level holds the earliest slot.
        let mut starts = Vec::new();
        for level in 0..LEVELS {
            for slot in 0..SLOTS {
                if self.occupied[level] & (1 << slot) != 0 {
                    let shift = SLOT_BITS * level as u32;
                    let block = self.elapsed >> shift;
                    let dist = (slot as u64).wrapping_sub(block) % SLOTS as u64;
                    starts.push(((block + dist) << shift, level, slot));
                }
            }
        }
        starts.sort_unstable();
        let first = starts.first().map(|&(start, _, _)| start);
        assert_eq!(
            self.next_slot().map(|due| due.start),
            first,
            "{starts:?} clock {}",
            self.elapsed
        );
    }
}
