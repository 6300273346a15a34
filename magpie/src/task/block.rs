//! The cells of one batch of tasks, allocated together ([`Runtime::submit_batch`]).
//!
//! # Why
//!
//! A task is one heap cell (`raw.rs`), and a batch of closures from outside the pool makes
//! its cells on the submitting thread while the workers free them on theirs. That is the
//! pattern glibc's allocator serves worst: every cell comes back to the submitting thread's
//! arena from another thread, and the batch's own `Vec` of handles, a large request, makes
//! glibc first merge every small chunk freed since. callgrind, 300,000 empty closures by
//! `submit_batch` into one worker: 245 of the submitter's 529 instructions a task were
//! glibc's `malloc`, and 114 of the worker's 560 its `free` (BENCHMARKS.md, "2026-12-03").
//! So a batch places its cells in blocks of up to [`MAX_SLOTS`], one allocation each; a
//! cell gives its slot back when it is freed, and the last slot given back frees the block.
//!
//! The cost: a block lives until its last cell is freed, so one task kept alive (its
//! `JoinHandle` held, its future pending) keeps its block's [`BLOCK_BYTES`] allocated. Cells
//! larger than half a block are not worth it and are boxed one by one, as every other task.
//! Blocks are only for batches; a single spawn keeps its box.
//!
//! # Spare blocks
//!
//! A runtime keeps up to [`MAX_SPARES`] freed full blocks for its next batch
//! ([`BlockSpares`], reached through the cells' scheduler, `Schedule::block_spares`), and a
//! batch takes a spare before it allocates, whatever its length: a short batch then holds
//! a whole block while its tasks live, which was held anyway. Blocks sized for a short batch
//! are not kept, so every spare fits every batch of its type. Without them, the blocks
//! of a finished batch go back to glibc whole, merge at the top of the heap and are trimmed
//! back to the system, so the next batch faults every page in again: 4,011 minor faults
//! against 241 for 41 rounds of 4,000 closures, and a task 70 % slower than a boxed one,
//! where with trimming turned off blocks were 26 % faster (BENCHMARKS.md, "2026-12-03").
//! The spares are freed with the runtime.
//!
//! # Layout
//!
//! A block is a [`BlockHeader`] followed by `capacity` [`Slot`]s. A slot is a pointer back
//! to the header, then the task's `Cell<F, S>`, so the cell's `dealloc` (the vtable of
//! `raw::Vtables::IN_BLOCK`) finds its block at a fixed offset before the cell and nothing is
//! added to the cell itself. Slots are aligned to cache lines: a closure's cell (104 bytes
//! on x86-64) takes a slot of two lines, 64 to a block of 8 KiB.
//!
//! # Invariants
//!
//! 1. `remaining` counts the block's slots not yet given back. Each slot is given back once:
//!    by the `dealloc` of the cell placed in it (raw.rs invariant 4: once per cell), itself
//!    or through a [`Tally`] that gives it back with its neighbours, or, for a slot the
//!    batch never used, by the batch when it lets the block go.
//! 2. A cell's slot is given back only after the cell has been dropped in place; whoever
//!    takes `remaining` to zero frees the block, so nothing reads a block after its free.
//! 3. A slot is written once, with the whole cell, and the cell never moves (its future is
//!    pinned, raw.rs invariant 5).
//!
//! [`Runtime::submit_batch`]: crate::Runtime::submit_batch

use std::alloc::{self, Layout};
use std::future::Future;
use std::mem;
use std::ptr::{self, NonNull};

use super::raw::Cell;
use crate::sync::atomic::{fence, Acquire, Release};
use crate::sync::{lock, AtomicUsize, Mutex};

/// A block's size we aim for: the slots that fit, at most [`MAX_SLOTS`].
pub(crate) const BLOCK_BYTES: usize = 8 * 1024;

/// The most slots in a block: a block outlives all but its last task, so this bounds how
/// many finished cells one long-lived task keeps allocated.
pub(crate) const MAX_SLOTS: usize = 64;

/// The first block of a batch whose length is not known (its iterator's lower bound is 0);
/// each further block doubles, up to the slots that fit.
const FIRST_UNKNOWN: usize = 4;

/// The most freed blocks a runtime keeps for its next batch (512 KiB of full blocks): enough
/// for a batch of 4,096 closures.
pub(crate) const MAX_SPARES: usize = 64;

/// How many live blocks there are (spares included), for tests (as `raw::LIVE_TASKS`).
#[cfg(all(any(test, debug_assertions), not(loom)))]
pub(crate) static LIVE_BLOCKS: crate::sync::StaticAtomicUsize =
    crate::sync::StaticAtomicUsize::new(0);

/// The start of a block.
pub(crate) struct BlockHeader {
    /// Slots not yet given back (invariant 1).
    remaining: AtomicUsize,
    /// The block's whole allocation, for its free.
    layout: Layout,
    /// Whether it has the most slots a block of its type can have: only such blocks are kept
    /// as spares, so that every spare serves every batch of its type.
    full: bool,
}

/// One slot of a block: where its block starts, then a task's cell. Slots start on cache
/// lines, so no two tasks of a block share one (for a cell of up to 56 bytes past its
/// header, as a closure's, the whole header shares its line only with the block pointer);
/// tokio aligns its task cells to 128 bytes on x86-64 for the same reason.
#[repr(C, align(64))]
pub(crate) struct Slot<F: Future, S> {
    block: NonNull<BlockHeader>,
    cell: Cell<F, S>,
}

/// The cells a batch has placed so far, in its current block. Dropped when the batch ends,
/// which gives back the slots it did not use.
pub(crate) struct Batch<'a, F: Future, S> {
    /// Where freed blocks wait for reuse, if the scheduler keeps any.
    spares: Option<&'a BlockSpares>,
    /// The current block, if any.
    block: Option<NonNull<BlockHeader>>,
    /// Its first slot.
    slots: *mut Slot<F, S>,
    /// Its slots, used and not.
    capacity: usize,
    /// How many of them hold a cell.
    used: usize,
    /// The size of the next block of a batch of unknown length.
    grow: usize,
}

impl<'a, F: Future, S> Batch<'a, F, S> {
    /// How many slots a full block has.
    const PER_BLOCK: usize = {
        let fit = BLOCK_BYTES / mem::size_of::<Slot<F, S>>();
        if fit < MAX_SLOTS {
            fit
        } else {
            MAX_SLOTS
        }
    };

    /// A batch that places its cells in blocks, reusing `spares` (the cells' scheduler's,
    /// `Schedule::block_spares`), or `None` if `Cell<F, S>` is too large for blocks to pay
    /// (fewer than two fit): its cells are then boxed one by one.
    pub(crate) fn new(spares: Option<&'a BlockSpares>) -> Option<Batch<'a, F, S>> {
        (Self::PER_BLOCK >= 2).then_some(Batch {
            spares,
            block: None,
            slots: ptr::null_mut(),
            capacity: 0,
            used: 0,
            grow: FIRST_UNKNOWN,
        })
    }

    /// Moves `cell` into a free slot, starting a new block if the current one is full, and
    /// returns where it now lives. `hint` is how many cells the batch still expects, this one
    /// included (0 if it does not know): a new block has room for that many, if they fit.
    pub(crate) fn place(&mut self, hint: usize, cell: Cell<F, S>) -> NonNull<Cell<F, S>> {
        if self.used == self.capacity {
            self.start_block(hint);
        }
        let block = self.block.expect("start_block leaves a block");
        // SAFETY: `used < capacity`, so the slot is inside the block's allocation, and it was
        // never written (invariant 3): `used` only grows.
        let slot = unsafe { self.slots.add(self.used) };
        // SAFETY: as above; the slot is suitably aligned (the block was laid out for
        // `capacity` of them) and nothing else refers to it.
        unsafe { slot.write(Slot { block, cell }) };
        self.used += 1;
        // SAFETY: `slot` is not null (inside a live allocation); the field's address is
        // derived from it, so it keeps the block's provenance.
        unsafe { NonNull::new_unchecked(ptr::addr_of_mut!((*slot).cell)) }
    }

    /// The layout of a block of `capacity` slots, and where its slots start.
    fn layout(capacity: usize) -> (Layout, usize) {
        let slots = Layout::array::<Slot<F, S>>(capacity).expect("a block fits in memory");
        let (layout, offset) = Layout::new::<BlockHeader>()
            .extend(slots)
            .expect("a block fits in memory");
        (layout.pad_to_align(), offset)
    }

    /// Starts a block: a spare full one if the scheduler keeps one, else a new one for
    /// `hint` cells (see [`Batch::place`]), or for the next size of a batch of unknown
    /// length. The current block, if any, is full: its cells hold it.
    fn start_block(&mut self, hint: usize) {
        debug_assert_eq!(self.used, self.capacity, "a block is left only when full");
        let (full, offset) = Self::layout(Self::PER_BLOCK);
        let spare = self.spares.and_then(|spares| spares.take(full));
        let (base, capacity, layout) = match spare {
            Some(base) => (base, Self::PER_BLOCK, full),
            None => {
                let capacity = if hint > 0 {
                    hint.min(Self::PER_BLOCK)
                } else {
                    let n = self.grow.min(Self::PER_BLOCK);
                    self.grow = self.grow.saturating_mul(2);
                    n
                };
                let (layout, _) = Self::layout(capacity);
                // SAFETY: `layout` has a non-zero size (it holds the header).
                let base = unsafe { alloc::alloc(layout) };
                let Some(base) = NonNull::new(base) else {
                    alloc::handle_alloc_error(layout)
                };
                #[cfg(all(any(test, debug_assertions), not(loom)))]
                LIVE_BLOCKS.fetch_add(1, crate::sync::atomic::Relaxed); // Relaxed: a test tally.
                (base, capacity, layout)
            }
        };
        let header = base.cast::<BlockHeader>();
        // SAFETY: the allocation (new, or a spare of this very layout) starts with room for
        // the header, aligned for it, and nothing else refers to it.
        unsafe {
            header.as_ptr().write(BlockHeader {
                remaining: AtomicUsize::new(capacity),
                layout,
                full: capacity == Self::PER_BLOCK,
            })
        };
        self.block = Some(header);
        // SAFETY: `offset` is where the slots start in a block of any capacity (the header
        // comes first, its size and the slots' alignment fixed), inside the allocation.
        self.slots = unsafe { base.as_ptr().add(offset) }.cast();
        self.capacity = capacity;
        self.used = 0;
    }
}

impl<F: Future, S> Drop for Batch<'_, F, S> {
    fn drop(&mut self) {
        let Some(block) = self.block else { return };
        let unused = self.capacity - self.used;
        if unused > 0 {
            // SAFETY: these slots were never used, so nobody else gives them back
            // (invariant 1); the block is live, since they were still counted.
            unsafe { release(block, unused, self.spares) };
        }
    }
}

/// The block holding `cell`.
///
/// # Safety
///
/// `cell` was placed by [`Batch::place`] and is not freed yet.
pub(crate) unsafe fn block_of<F: Future, S>(cell: NonNull<Cell<F, S>>) -> NonNull<BlockHeader> {
    let offset = mem::offset_of!(Slot<F, S>, cell);
    // SAFETY: the cell is the `cell` field of a live slot (the caller's contract), so the
    // slot starts `offset` bytes before it, inside the same allocation.
    unsafe {
        let slot = cell.as_ptr().byte_sub(offset).cast::<Slot<F, S>>();
        (*slot).block
    }
}

/// Gives back `n` slots of `block`; if they were its last, the block goes to `spares` if
/// they have room, and is freed otherwise.
///
/// # Safety
///
/// The caller gives back slots that were counted and not given back yet (invariant 1), and
/// does not touch them afterwards; a cell's slot only after the cell was dropped in place.
pub(crate) unsafe fn release(block: NonNull<BlockHeader>, n: usize, spares: Option<&BlockSpares>) {
    // SAFETY: the block is live while any slot is counted, and the caller's are.
    let header = unsafe { block.as_ref() };
    // Release: everything done to our slots (the cell's drop) happens before the block is
    // reused or freed; pairs with the Acquire fence below on the thread that gives back the
    // last slot (and, for a spare, through the spares' lock, with its next user).
    if header.remaining.fetch_sub(n, Release) != n {
        return;
    }
    fence(Acquire);
    let (layout, full) = (header.layout, header.full);
    // Every slot was given back, so no cell is left in the block and nobody else reaches it
    // (invariant 2).
    if let (Some(spares), true) = (spares, full) {
        if spares.keep(layout, block.cast()) {
            return;
        }
    }
    // SAFETY: as above; the allocation is `start_block`'s, with this layout.
    unsafe { free(block.cast(), layout) };
}

/// Slots given back in a run: a thread that frees many cells in a row (a worker unlinking
/// the tasks it completed, `WorkerThread::unlink_completed`) gives back consecutive slots of
/// one block with one decrement of `remaining` instead of one each. A batch's tasks come out
/// of the queues in runs, so such a row mostly holds neighbours: one locked instruction less
/// a task, and at many workers one write less to a line that every worker freeing the
/// block's cells writes.
///
/// What it holds is given back when a slot of another block (or of another runtime's spares)
/// comes in, and when it drops, also on unwind: the slots it holds are counted in
/// `remaining` meanwhile, so their block stays allocated until then (invariant 1).
pub(crate) struct Tally<'a> {
    /// Where a block whose last slot this gives back goes: the spares of the runtime whose
    /// tasks this frees.
    spares: Option<&'a BlockSpares>,
    /// The block of the slots held, and how many.
    held: Option<(NonNull<BlockHeader>, usize)>,
}

impl<'a> Tally<'a> {
    /// A tally for the cells of a scheduler whose spares are `spares`.
    pub(crate) fn new(spares: Option<&'a BlockSpares>) -> Tally<'a> {
        Tally { spares, held: None }
    }

    /// Whether a cell whose scheduler keeps `spares` may give its slot back through this
    /// tally: its last slot goes where the tally sends it.
    pub(crate) fn serves(&self, spares: Option<&BlockSpares>) -> bool {
        match (self.spares, spares) {
            (Some(a), Some(b)) => ptr::eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// Takes over the slot of a cell of `block`, to give it back with its neighbours.
    ///
    /// # Safety
    ///
    /// As [`release`] for one slot, and the tally [`serves`](Self::serves) the cell's
    /// scheduler. The cell may still be dropping: the slot goes back only at a later call or
    /// at the tally's drop, which come after (invariant 2).
    pub(crate) unsafe fn add(&mut self, block: NonNull<BlockHeader>) {
        match &mut self.held {
            Some((held, n)) if *held == block => *n += 1,
            held => {
                if let Some((old, n)) = held.replace((block, 1)) {
                    // SAFETY: `n` slots of `old` were handed to this tally and are counted
                    // still (this function's contract).
                    unsafe { release(old, n, self.spares) };
                }
            }
        }
    }
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        if let Some((block, n)) = self.held.take() {
            // SAFETY: as in `add`.
            unsafe { release(block, n, self.spares) };
        }
    }
}

/// Frees a block's allocation.
///
/// # Safety
///
/// `base` is a block allocated with `layout` that nobody reaches any more.
unsafe fn free(base: NonNull<u8>, layout: Layout) {
    // SAFETY: the caller's contract.
    unsafe { alloc::dealloc(base.as_ptr(), layout) };
    #[cfg(all(any(test, debug_assertions), not(loom)))]
    LIVE_BLOCKS.fetch_sub(1, crate::sync::atomic::Relaxed); // Relaxed: a test tally.
}

/// A runtime's freed blocks, kept for its next batch (module docs, "Spare blocks").
#[derive(Default)]
pub(crate) struct BlockSpares {
    blocks: Mutex<Vec<Spare>>,
}

/// One spare block: its allocation and the layout it was made with.
struct Spare {
    base: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a spare is an allocation nobody else reaches (invariant 2), owned by the list; any
// thread may reuse or free it.
unsafe impl Send for Spare {}

impl BlockSpares {
    /// A spare block of exactly `layout`, if one is kept.
    fn take(&self, layout: Layout) -> Option<NonNull<u8>> {
        let mut blocks = lock(&self.blocks);
        // The newest first: the likeliest still in a cache.
        let i = blocks.iter().rposition(|spare| spare.layout == layout)?;
        Some(blocks.swap_remove(i).base)
    }

    /// Keeps `base` if there is room; returns whether it did.
    fn keep(&self, layout: Layout, base: NonNull<u8>) -> bool {
        let mut blocks = lock(&self.blocks);
        if blocks.len() >= MAX_SPARES {
            return false;
        }
        blocks.push(Spare { base, layout });
        true
    }
}

impl Drop for BlockSpares {
    fn drop(&mut self) {
        // No lock: `&mut self` is the only reference (and the checkers see no schedule
        // point here).
        let blocks = match self.blocks.get_mut() {
            Ok(blocks) => blocks,
            Err(poisoned) => poisoned.into_inner(),
        };
        for spare in blocks.drain(..) {
            // SAFETY: a spare is a whole block allocated with its layout, which nobody
            // reaches any more (it was given back whole).
            unsafe { free(spare.base, spare.layout) };
        }
    }
}

impl std::fmt::Debug for BlockSpares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockSpares")
            .field("blocks", &lock(&self.blocks).len())
            .finish()
    }
}
