//! The task inject queue: an intrusive FIFO whose pushes take no lock, for tasks that arrive
//! from outside the pool (remote spawns and wakes) or overflow a worker's ring.
//!
//! # Why not the mutex queue
//!
//! [`Inject`](super::inject::Inject) takes its lock on every push. Every spawn or wake from a
//! thread outside the pool pushes here, and with many workers pulling batches the pushers
//! queue behind them on the lock (issue 19: at 16 workers, magpie's remote spawns took 1.6x
//! tokio's time).
//! Producers and consumers want different things: a push is one item from anywhere, often
//! with no consumer around; a pull is usually a batch, by one of the workers, that must
//! come out oldest first. So the two sides get two structures:
//!
//! * **Producers** push onto a Treiber stack (Treiber, "Systems Programming: Coping with
//!   Parallelism", IBM RJ 5118, 1986): link the node to the current top, CAS the top from
//!   that value to the node; retry on failure. One CAS, no lock, and the node's memory is
//!   the node itself (intrusive: a task is linked through its own header, so a push
//!   allocates nothing). Producers never pop and never read another node, so the Treiber
//!   stack's ABA problem (a pop that reads `top.next`, then CASes on a recycled `top`) does
//!   not arise: a CAS that succeeds on a recycled address links the node to the node that
//!   *is* at that address now, which is right.
//! * **Consumers** hold a lock (a `Mutex`, [`Synced`]) and keep a FIFO of their own.
//!   When it runs dry, a consumer `swap`s the whole stack out (null in its place) and
//!   moves it into the FIFO, oldest first. Everything in the FIFO is older than everything
//!   still on the stack (it was taken off the stack earlier, and the stack keeps push
//!   order), so "FIFO first, then the stack from its bottom" is push order overall. The
//!   lock makes the consumer side simple: one consumer at a time, so there is no
//!   Treiber-pop ABA there either, and no memory reclamation problem. Consumers mostly
//!   pull batches, so it is taken about once per batch, and never by a pusher.
//!
//! # The consumers' array
//!
//! The consumers' FIFO is an array of node pointers (a `VecDeque`), not a chain through
//! the nodes. The stack's links were written by the pushers, on other CPUs, so following
//! them is one cache miss per node, each waiting for the one before. Moving the stack into
//! the array follows them once, reading only. The chain it replaced (the stack reversed in
//! place) followed them twice, once to reverse, writing every link, and once to hand the
//! nodes out, often on another worker than the one that reversed them, so a node's line
//! crossed CPUs up to three times before its task ran. On a 2-CPU VM the gain is small (the
//! time between two tasks of a compare-shaped probe, 5 to 8 % less; no change beyond the
//! noise in the async rows: BENCHMARKS.md, "2026-12-02, fourth"); the line transfers it
//! saves grow with the number of workers pulling. The array keeps at most
//! [`KEEP_CAPACITY`] slots while empty. A batch leaves it a run at a time (`pop_batch`
//! extends its sink with a `Drain`), so a ring takes the run with one store of its tail.
//!
//! Alternatives considered: Vyukov's intrusive MPSC queue (1024cores.net, "Intrusive MPSC
//! node-based queue"; one `swap` per push, wait-free)
//! keeps FIFO order without a reversal, but has a window in which a pushed node is not yet
//! linked, during which the consumer must spin or report "empty" though the queue is not
//! (which the sleep protocol's recheck cannot tell from really empty), and closing it needs
//! a second mechanism. A lock-free MPMC queue (crossbeam's `SegQueue`) allocates blocks and
//! makes every pop pay an RMW; our consumers take batches under a lock that only they
//! contend. tokio's inject queue is a mutex and an intrusive list: pushers take the lock,
//! which is what this replaces.
//!
//! # Closing
//!
//! `close` swaps a sentinel, [`closed`], into `head`, under the consumer lock. A push reads
//! `head` in the CAS that would publish its node, so each push either lands before the swap
//! (its node is in the stack `close` swapped out, and `close` returns it) or sees the
//! sentinel (and is refused): none is lost. `push_batch` checks for the sentinel before it
//! touches the iterator and gives it back untouched; should `close` win the race between that
//! check and the CAS, the batch is already linked, and it gives back the same items, in
//! order, as a chain ([`Refused::Linked`]).
//!
//! # The length
//!
//! `len` counts nodes pushed and not yet taken, for the workers' batch size, the statistics
//! and the sleep protocol's recheck (`Registry::has_visible_tasks`; sleep/README.md, R1 and
//! R5). A push adds its count *after* the CAS that published its nodes; a consumer subtracts
//! what it took while it still holds the lock. A consumer may take a node before its push
//! has counted it, so the counter can dip below zero for a moment (it wraps;
//! [`LinkedInject::len`] reads it as signed and clamps at 0). It never counts a node that is
//! not there yet, so a worker that sees `len > 0` finds a node unless another worker takes it
//! first. Counting before the CAS would cover pushes in flight instead: a pusher preempted
//! between the two would send every idle worker round "not empty", finding nothing,
//! parking, and a recheck that wakes it again, until the pusher runs.
//!
//! The subtraction is made under the lock so that a worker that read an older, larger count
//! and came for a node it did not find reads the newer count after its visit (it took the
//! lock after the subtraction), instead of coming back: the loom models of the whole runtime
//! (`runtime/loom_runtime.rs`) exceed loom's branch limit with the subtraction after the
//! unlock, loom letting a Relaxed load return the older count again and again.
//!
//! Why the recheck still sees every push. The increment is a SeqCst read-modify-write of
//! the push, made before the notification that follows every push (R1: a SeqCst load of the
//! sleep state, `Sleep::notify_task_after_seqcst_push`; the pair behaves as the light
//! barrier's store–barrier–load does, and needs no fence, see sleep/README.md, R2'). Suppose a worker's recheck (R2's heavy barrier, then a load of `len`) reads 0 while
//! node J is queued. The value it read then leaves out the increment of some push that
//! published a node: J's own, or that of a node a consumer has already subtracted. That
//! increment comes after the read, so by the barrier pair that push's load of the sleep state
//! sees this worker's registration as parked, and its `notify_task` acts as the publisher in
//! the README's proof: it wakes a worker, or relies on a searcher that will recheck. A push
//! counts its nodes in a bounded number of its own steps, without waiting for anyone, so J
//! is not left behind while every worker sleeps.
//!
//! # Invariants
//!
//! 1. A node is in at most one queue at a time, and from `push` until the queue hands it back
//!    (a pop, `close`, a refusal) it stays allocated and nothing but the queue touches its
//!    link (`push`'s safety contract; for tasks, the queued `Notified` holds a reference, and
//!    a task has one `Notified` at most, task state 1).
//! 2. A node's link is written by its producer before the Release CAS that publishes it,
//!    and afterwards read only by a consumer under the lock, after the Acquire `swap` that
//!    took the stack (consumers write links only of nodes they own outright: `close`'s and a
//!    refused batch's); so every access to a link is ordered by happens-before (a plain cell
//!    suffices, and under loom the cell checks exactly this).
//! 3. `head` is null, a node, or [`closed`]. Pushers change it only from a non-sentinel to a
//!    node. It becomes the sentinel only in `close`, under the lock, which also sets
//!    `Synced::closed`; consumers swap `head` out only under the lock and only while that
//!    flag is clear, so nothing replaces the sentinel: once closed, `head` never changes
//!    again and the list stays empty. A closed queue only shrinks.
//! 4. `len`, read as signed, is the number of nodes whose push has counted them, minus the
//!    number taken. A push counts its nodes only after they are published, so `len` never
//!    exceeds the nodes reachable, and falls short of them only by nodes whose push has not
//!    counted them yet.

use std::collections::VecDeque;
use std::fmt;
use std::ptr::{self, NonNull};

use crate::sync::atomic::*;
use crate::sync::{AtomicPtr, AtomicUsize, CountedMutex, UnsafeCell};
use crate::util::CachePadded;

/// A node the queue links through a field of its own.
///
/// # Safety
///
/// `queue_link` returns the same cell for the same node every time, and the cell belongs to
/// the queue: nothing else reads or writes it (invariant 1).
pub(crate) unsafe trait Linked: Sized {
    /// The node's link: the next node in the stack or in the list, or null.
    fn queue_link(&self) -> &UnsafeCell<*mut Self>;
}

/// The `head` value of a closed queue. Never a node: a node holds a pointer (its link), so
/// it is at least pointer-aligned and cannot live at address 1. It is only compared, never
/// dereferenced. (`ptr::without_provenance_mut` says this better, from Rust 1.84; the MSRV
/// is 1.80.) Made from null rather than cast from an integer, so that it carries no
/// provenance and Miri needs no exposed-provenance fallback (`-Zmiri-strict-provenance`).
fn closed<T>() -> *mut T {
    ptr::null_mut::<T>().wrapping_byte_add(1)
}

/// Reads `node`'s link.
///
/// # Safety
///
/// `node` is live and the caller may read its link now (invariants 1 and 2).
unsafe fn next_of<T: Linked>(node: NonNull<T>) -> *mut T {
    // SAFETY: the node is live (caller); the read is ordered after the link's last write
    // (caller, invariant 2).
    unsafe { node.as_ref().queue_link().with(|next| *next) }
}

/// Writes `node`'s link.
///
/// # Safety
///
/// `node` is live and the caller may write its link now (invariants 1 and 2).
unsafe fn set_next<T: Linked>(node: NonNull<T>, next: *mut T) {
    // SAFETY: as in `next_of`.
    unsafe { node.as_ref().queue_link().with_mut(|link| *link = next) }
}

/// Reverses a chain linked newest first (as the stack holds it) and returns its oldest node,
/// now the head of a chain linked oldest first.
///
/// # Safety
///
/// The caller owns every node of the chain (it took them off the stack, or never published
/// them): it may read and write their links.
unsafe fn reverse<T: Linked>(mut newest: *mut T) -> *mut T {
    let mut reversed = ptr::null_mut();
    while let Some(node) = NonNull::new(newest) {
        // SAFETY: the caller owns the chain.
        newest = unsafe { next_of(node) };
        // SAFETY: as above.
        unsafe { set_next(node, reversed) };
        reversed = node.as_ptr();
    }
    reversed
}

/// The part every push touches, on a cache line of its own.
struct Shared<T> {
    /// The top of the Treiber stack (the newest push), null, or [`closed`] (invariant 3).
    head: AtomicPtr<T>,
    /// Nodes counted by their push and not yet taken, as a wrapping signed count
    /// (invariant 4).
    len: AtomicUsize,
}

/// The consumers' part, reachable only under the lock.
struct Synced<T> {
    /// The nodes taken off the stack and not yet handed out, oldest first: pointers in an
    /// array, so that handing out a batch reads the array, not a chain of links through
    /// nodes that another thread wrote last (module docs, "The consumers' array").
    list: VecDeque<NonNull<T>>,
    /// Set by `close`, with `head` set to the sentinel (invariant 3).
    closed: bool,
}

/// The most pointers the consumers' array keeps room for while empty: a burst of a million
/// remote spawns leaves 8 MiB behind otherwise.
const KEEP_CAPACITY: usize = 4096;

impl<T: Linked> Synced<T> {
    /// Takes the oldest node: from the list, else from the stack (moved into the list first).
    /// The caller holds the lock (it has `&mut self`) and uncounts what it takes.
    fn take(&mut self, shared: &Shared<T>) -> Option<NonNull<T>> {
        if self.list.is_empty() {
            self.refill(shared);
        }
        self.list.pop_front()
    }

    /// Moves the whole stack into the (empty) list, oldest first.
    fn refill(&mut self, shared: &Shared<T>) {
        debug_assert!(self.list.is_empty());
        // The sentinel stays (invariant 3).
        if self.closed {
            return;
        }
        // A swap, not a load first to skip an empty stack: an RMW reads the latest `head`,
        // where a load may return an older one (and under loom, may do so again and again),
        // sending a consumer that `len` sent here away empty-handed.
        // Acquire: pairs with the Release CAS in `publish` (and, through the release
        // sequence of those CASes, with every earlier push still on the stack), so the
        // links and contents of every node we took are visible.
        let top = shared.head.swap(ptr::null_mut(), Acquire);
        debug_assert!(top != closed(), "invariant 3");
        if self.list.capacity() > KEEP_CAPACITY {
            self.list.shrink_to(KEEP_CAPACITY);
        }
        // The stack is newest first: each node goes in front of the newer ones.
        let mut newest = top;
        while let Some(node) = NonNull::new(newest) {
            // SAFETY: the swap made the stack ours, and its links are the producers',
            // ordered before us by the swap (invariant 2).
            newest = unsafe { next_of(node) };
            self.list.push_front(node);
        }
    }
}

/// What a refused `push_batch` gives back: its items, in the order given.
#[must_use = "the refused items are still owned by the caller"]
pub(crate) enum Refused<I, T> {
    /// The queue was closed before the iterator was touched.
    Untouched(I),
    /// `close` won the race with the publishing CAS: the items were already linked, oldest
    /// first from this node.
    Linked(*mut T),
}

impl<I, T> Iterator for Refused<I, T>
where
    I: Iterator<Item = NonNull<T>>,
    T: Linked,
{
    type Item = NonNull<T>;

    fn next(&mut self) -> Option<NonNull<T>> {
        match self {
            Refused::Untouched(items) => items.next(),
            Refused::Linked(first) => {
                let node = NonNull::new(*first)?;
                // SAFETY: the chain was never published: the refused nodes are ours, and
                // live (the push's contract, invariant 1).
                *first = unsafe { next_of(node) };
                Some(node)
            }
        }
    }
}

impl<I, T> fmt::Debug for Refused<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Untouched(_) => f.write_str("Refused::Untouched"),
            Refused::Linked(first) => f.debug_tuple("Refused::Linked").field(first).finish(),
        }
    }
}

/// A multi-producer, multi-consumer intrusive FIFO with lock-free pushes (see the module
/// docs).
pub(crate) struct LinkedInject<T> {
    shared: CachePadded<Shared<T>>,
    /// The consumers' side; its lock counts its acquisitions (`Stats::inject_lock_acquisitions`).
    synced: CountedMutex<Synced<T>>,
}

// SAFETY: the queue holds pointers to nodes that it hands to whichever thread pops them;
// that is sound when the nodes may move between threads (`T: Send`). Its own state is
// atomics and a mutex.
unsafe impl<T: Send> Send for LinkedInject<T> {}
// SAFETY: as above: every method takes `&self`, and the shared state is atomics, the lock,
// and links ordered by invariant 2.
unsafe impl<T: Send> Sync for LinkedInject<T> {}

impl<T: Linked> fmt::Debug for LinkedInject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkedInject")
            .field("len", &self.len())
            // Relaxed: for display.
            .field("closed", &(self.shared.head.load(Relaxed) == closed()))
            .finish_non_exhaustive()
    }
}

/// The number of nodes a raw value of the length word stands for: below zero (a node taken
/// before its push counted it, invariant 4) reads as 0.
fn count_of(raw: usize) -> usize {
    (raw as isize).max(0) as usize
}

impl<T: Linked> LinkedInject<T> {
    pub(crate) fn new() -> LinkedInject<T> {
        const { assert!(align_of::<T>() > 1, "`closed` needs nodes off address 1") };
        LinkedInject {
            shared: CachePadded::new(Shared {
                head: AtomicPtr::new(ptr::null_mut()),
                len: AtomicUsize::new(0),
            }),
            synced: CountedMutex::new(Synced {
                list: VecDeque::new(),
                closed: false,
            }),
        }
    }

    /// Times the consumer lock was taken so far (pushes take none).
    pub(crate) fn lock_acquisitions(&self) -> u64 {
        self.synced.acquisitions()
    }

    /// Links the chain `newest ..= oldest` (already linked newest first, `oldest`'s link
    /// free) on top of the stack with one CAS, then counts its `count` nodes. Returns the
    /// count before ours (see [`LinkedInject::push`]), or `None` if the queue is closed
    /// (nothing published, nothing counted).
    ///
    /// # Safety
    ///
    /// The caller owns the chain's nodes (they are unpublished), and they meet `push`'s
    /// contract.
    unsafe fn publish(
        &self,
        newest: NonNull<T>,
        oldest: NonNull<T>,
        count: usize,
    ) -> Option<usize> {
        // Relaxed: only a guess at the top; the CAS checks it.
        let mut top = self.shared.head.load(Relaxed);
        loop {
            if top == closed() {
                return None;
            }
            // SAFETY: `oldest` is unpublished, so its link is ours (invariant 2).
            unsafe { set_next(oldest, top) };
            // Release on success: pairs with the Acquire swap in `Synced::refill` and in
            // `close`, which then see the links and contents of our nodes. (`--cfg
            // magpie_loom_broken` weakens it to Relaxed: the negative control of
            // `loom_inject_two_producers_and_a_consumer`.) Relaxed on failure: we only
            // retry with the value read.
            let success = if cfg!(magpie_loom_broken) {
                Relaxed
            } else {
                Release
            };
            match self
                .shared
                .head
                .compare_exchange_weak(top, newest.as_ptr(), success, Relaxed)
            {
                Ok(_) => break,
                Err(actual) => top = actual,
            }
        }
        // Counted once reachable (invariant 4; module docs, "The length"). The count orders
        // nothing for a consumer (the CAS does). SeqCst for the sleep protocol: this is the
        // store a parking worker's recheck reads, and a SeqCst RMW here followed by the
        // SeqCst load of the sleep state in `Sleep::notify_task_after_seqcst_push` pairs
        // with the parker's SeqCst decrement and fence with no fence of our own (R2' in
        // sleep/README.md). The same instruction as Relaxed on x86.
        Some(self.shared.len.fetch_add(count, SeqCst))
    }

    /// Appends `node`; gives it back if the queue is closed. Takes no lock.
    ///
    /// Returns how many nodes the length counted just before this one: the pushes counted
    /// so far, less the pops counted so far (a pop counts its nodes once it has taken them).
    /// Zero says the queue was empty as far as the count knows; a pusher uses it to tell a
    /// backlog from a lone node (`Registry::push_inject`). A hint: a concurrent pop may have
    /// taken nodes it has not yet uncounted, and a concurrent push may be linked and not yet
    /// counted (invariant 4).
    ///
    /// # Safety
    ///
    /// `node` points to a live `T` that is in no queue, and stays allocated, its link
    /// untouched by anyone else, until the queue hands it back: from a pop, from `close`, or
    /// as this call's `Err` (invariant 1).
    pub(crate) unsafe fn push(&self, node: NonNull<T>) -> Result<usize, NonNull<T>> {
        // SAFETY: the node is ours and unpublished (caller); a chain of one.
        let before = unsafe { self.publish(node, node, 1) }.ok_or(node)?;
        Ok(count_of(before))
    }

    /// Appends every node of `nodes`, in order, with one CAS (a worker's overflow moves half
    /// its ring at once). Takes no lock. If the queue is closed, gives the iterator back
    /// untouched, as `push` gives back its node; if `close` wins a race with the CAS, gives
    /// back the same nodes, in order, already consumed from the iterator (module docs,
    /// "Closing").
    ///
    /// # Safety
    ///
    /// Every node of `nodes` meets `push`'s contract.
    pub(crate) unsafe fn push_batch<I>(&self, nodes: I) -> Result<(), Refused<I::IntoIter, T>>
    where
        I: IntoIterator<Item = NonNull<T>>,
    {
        let mut nodes = nodes.into_iter();
        // Relaxed: a stale answer only means the CAS below finds the sentinel (invariant 3).
        if self.shared.head.load(Relaxed) == closed() {
            return Err(Refused::Untouched(nodes));
        }
        let Some(oldest) = nodes.next() else {
            return Ok(());
        };
        // Link the batch privately, newest first, as the stack holds it.
        let mut newest = oldest;
        let mut count = 1;
        for node in nodes {
            // SAFETY: the node is ours and unpublished (caller, invariant 2).
            unsafe { set_next(node, newest.as_ptr()) };
            newest = node;
            count += 1;
        }
        // SAFETY: the chain is ours and unpublished; the caller vouches for its nodes.
        if unsafe { self.publish(newest, oldest, count) }.is_some() {
            return Ok(());
        }
        // Refused: relink the chain oldest first and hand it back. `oldest`'s link holds the
        // last top we saw, not part of the chain: cut it first.
        // SAFETY: the chain was never published; its nodes are ours.
        unsafe { set_next(oldest, ptr::null_mut()) };
        // SAFETY: as above.
        Err(Refused::Linked(unsafe { reverse(newest.as_ptr()) }))
    }

    /// Takes the oldest node.
    pub(crate) fn pop(&self) -> Option<NonNull<T>> {
        if self.is_empty() {
            return None;
        }
        let mut synced = self.synced.lock();
        let node = synced.take(&self.shared)?;
        self.uncount(1);
        drop(synced);
        Some(node)
    }

    /// Subtracts `taken` nodes from `len`. The caller holds the lock, so that whoever takes
    /// it next reads this count or a later one (module docs, "The length").
    fn uncount(&self, taken: usize) {
        // Relaxed: invariant 4 needs only the value (the nodes are gone before they are
        // uncounted), and the lock orders it for the next consumer. It may wrap below zero
        // for a moment.
        self.shared.len.fetch_sub(taken, Relaxed);
    }

    /// Takes up to `max` of the oldest nodes, oldest first, into `out`, under one lock.
    /// Returns how many it took. `out` gets them a run of the consumers' array at a time,
    /// so that a ring can take a run with one store (`Local::push_back_batch`).
    pub(crate) fn pop_batch(&self, max: usize, out: &mut impl Extend<NonNull<T>>) -> usize {
        if max == 0 || self.is_empty() {
            return 0;
        }
        let mut synced = self.synced.lock();
        let mut taken = 0;
        while taken < max {
            if synced.list.is_empty() {
                synced.refill(&self.shared);
                if synced.list.is_empty() {
                    break;
                }
            }
            let n = (max - taken).min(synced.list.len());
            out.extend(synced.list.drain(..n));
            taken += n;
        }
        if taken > 0 {
            self.uncount(taken);
        }
        drop(synced);
        taken
    }

    /// Refuses further pushes and returns everything queued, oldest first.
    pub(crate) fn close(&self) -> Vec<NonNull<T>> {
        let mut synced = self.synced.lock();
        let mut all: Vec<NonNull<T>> = synced.list.drain(..).collect();
        // Acquire: pairs with the Release CAS of every push on the stack, as in `refill`.
        // From here on every push sees the sentinel (invariant 3).
        let top = self.shared.head.swap(closed(), Acquire);
        synced.closed = true;
        if top != closed() {
            // SAFETY: the swap made the stack ours.
            let mut first = unsafe { reverse(top) };
            while let Some(node) = NonNull::new(first) {
                // SAFETY: as above.
                first = unsafe { next_of(node) };
                all.push(node);
            }
        }
        self.uncount(all.len());
        drop(synced);
        all
    }

    /// The number of queued nodes, possibly stale, and short by pushes that have not counted
    /// their nodes yet (invariant 4).
    pub(crate) fn len(&self) -> usize {
        // Relaxed: a hint. A consumer that acts on it takes the lock and the Acquire swap;
        // the sleep protocol's recheck is ordered by its barriers (module docs, "The
        // length").
        count_of(self.shared.len.load(Relaxed))
    }

    /// Whether the queue looks empty (possibly stale; see `len`).
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
