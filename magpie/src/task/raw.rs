//! The task allocation and its one type-erased pointer, [`RawTask`].
//!
//! A task is one heap cell, a `#[repr(C)]` [`Cell<F, S>`], boxed on its own or, for the
//! tasks of one batch (`Runtime::submit_batch`), placed in a block shared with up to 63
//! others (`block.rs`):
//!
//! * [`Header`]: the state word (`state.rs`), the vtable, the link for intrusive run queues,
//!   the links of the live-task list and the task's [`Identity`]. It comes first, so a pointer to the header is a pointer to the cell,
//!   and code that does not know `F` and `S` (wakers, run queues, the `JoinHandle`) can hold
//!   a task as a `NonNull<Header>` and reach the rest through the vtable.
//! * [`Core`]: the scheduler and the stage (the future, then its output or error, then
//!   nothing).
//! * [`Trailer`]: the join waker slot.
//!
//! All the type erasure of the task module lives here (STYLE.md rule 6): the only casts from
//! `NonNull<Header>` to `NonNull<Cell<F, S>>` are in this file's vtable functions, and the
//! typed handles (`Notified`, `JoinHandle`, the waker) hold a [`RawTask`] and call its
//! methods. The design follows tokio's `runtime/task/{core.rs,raw.rs}`.
//!
//! # Invariants
//!
//! These add to the numbered invariants of `state.rs` (cited there as "state 1" and so on).
//!
//! 1. A [`RawTask`] points to the `Header` at offset 0 of a live `Cell<F, S>` allocated by
//!    [`RawTask::new`], and that header's `vtable` is `Vtables::<F, S>::BOXED` for the same
//!    `F` and `S` if the cell is a `Box` (or memory the global allocator gave with the same
//!    layout, from the scheduler's cache of freed cells: `cell_cache.rs`),
//!    `Vtables::<F, S>::IN_BLOCK` if it was placed in a batch's block; the two differ only
//!    in `dealloc`, and the vtable functions cast back only to that type.
//! 2. Every method that dereferences a [`RawTask`] needs its caller to hold one of the task's
//!    references (state 5) for the whole call; a method that consumes the reference says so,
//!    and the caller must not touch the task afterwards.
//! 3. The stage is read and written only as state 2 and state 3 allow, the join waker slot
//!    only as state 4 allows, and `owned` only under the lock of the owner's task list
//!    (`owned.rs`).
//! 4. The cell is freed exactly once, by [`RawTask::dealloc`], called by the thread whose RMW
//!    dropped the last reference (state 5). Freeing drops whatever the stage still holds (a
//!    future never completed, or an output nobody read), the scheduler and the join waker.
//! 5. The future is pinned: it lives in the cell from creation until it is dropped in place
//!    ([`Core::drop_stage`]), and is never moved.
//! 6. [`Identity`] is immutable after [`RawTask::new`], except for the [`Activity`]
//!    counters of its insight, which only the poller writes (the holder of the task's
//!    `Notified`, while it holds `RUNNING`), so one thread at a time; anyone holding a
//!    reference may read them, Relaxed.

use std::alloc::Layout;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::Location;
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, Waker};

use super::block::{self, Batch, BlockHeader, BlockSpares, Tally};
use super::error::JoinError;
use super::harness::{Harness, Poller};
use super::id::Id;
use super::notified::{Notified, Schedule};
use super::owned::OwnedLink;
use super::state::State;
use crate::sync::atomic::Relaxed;
use crate::sync::{StatAtomicU64, UnsafeCell};
pub(crate) use crate::util::unwind::drop_payload;
use crate::util::unwind::{halt_unwinding, Payload};

/// How many task allocations are live, for tests that check every task is freed exactly
/// once ([`crate::task::live_tasks`]). Incremented in [`RawTask::new`], decremented when a
/// task is freed. Only in builds with debug assertions: in release builds a process-wide
/// counter would be a contended cache line on every spawn.
#[cfg(all(any(test, debug_assertions), not(loom)))]
pub(crate) static LIVE_TASKS: crate::sync::StaticAtomicUsize =
    crate::sync::StaticAtomicUsize::new(0);

/// The part of a task every holder may read without knowing its future's type.
///
/// 56 bytes on 64-bit targets, as before task identity (`header_size` in `tests_task.rs`
/// pins it): the id and the origin took the places of the owner id (read only by a test)
/// and of the live list's `linked` flag (implied by the links, `owned.rs`). It must not
/// grow: a task's allocation is header, scheduler, stage and join waker, and for a small
/// future (32 bytes, `magpie-bench`'s countdown task) that is 120 bytes, the largest glibc
/// serves from its fast bins; 64 bytes more made `spawn_many_remote`, whose tasks are
/// allocated on one thread and freed on another, twice as slow (ARCHITECTURE.md, "Task
/// identity and the live-task dump").
#[repr(C)]
pub(crate) struct Header {
    /// The state word: flags and reference count.
    pub(crate) state: State,
    /// The typed functions for this task's `F` and `S` (invariant 1).
    pub(crate) vtable: &'static Vtable,
    /// The task's link in the task inject queue (`queue/linked_inject.rs`), which alone
    /// touches it. One link suffices: a queued task is queued through its `Notified`, and a
    /// task has at most one (state 1), so it is in at most one such queue, once.
    pub(crate) queue_next: UnsafeCell<*mut Header>,
    /// The task's links in its runtime's list of live tasks (invariant 3, `owned.rs`).
    pub(crate) owned: UnsafeCell<OwnedLink>,
    /// Who the task is (invariant 6).
    pub(crate) identity: Identity,
}

/// Who a task is: its id and where it came from, set at spawn and never changed (invariant
/// 6), read by anyone holding a reference (the `JoinHandle`, the dump, the hooks) without
/// knowing the future's type.
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) id: Id,
    /// The spawn location, or the task's [`Insight`]: a tagged pointer, so that an unnamed
    /// task on a runtime without task insight carries its location in 8 bytes and allocates
    /// nothing for it (the `Location` is a static the compiler placed in the binary).
    origin: OriginPtr,
}

/// A `&'static Location` (low bit 0) or a `Box<Insight>` (low bit 1, owned). Both are at
/// least 4-byte aligned, so the low bit is free.
struct OriginPtr(NonNull<()>);

// SAFETY: the pointer is a `&'static Location` (Sync, immutable) or a `Box<Insight>` whose
// fields are immutable or atomic; the box is dropped only by the header's owner (invariant
// 4), so sharing and sending the pointer is as safe as sharing `&Insight`.
unsafe impl Send for OriginPtr {}
// SAFETY: as above.
unsafe impl Sync for OriginPtr {}

impl fmt::Debug for OriginPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OriginPtr").field(&self.0).finish()
    }
}

/// What a task keeps besides its id when it is named or its runtime keeps task insight
/// (`Builder::task_insight`): its own allocation, made at spawn, freed with the task.
#[derive(Debug)]
pub(crate) struct Insight {
    /// Where it was spawned.
    pub(crate) location: &'static Location<'static>,
    /// The name given with `task::Builder::name`.
    pub(crate) name: Option<String>,
    /// When it was spawned, in ns on its runtime's clock (`Registry::uptime_ns`; from a
    /// worker, the worker's last reading of it).
    pub(crate) spawned_ns: u64,
    /// What its polls did (invariant 6).
    pub(crate) activity: Activity,
}

impl Identity {
    /// A new task's identity, with a fresh [`Id`]. It keeps an [`Insight`] if the task is
    /// named or `insight` asks for one; `spawned_ns` is only kept there.
    pub(crate) fn new(origin: Origin, spawned_ns: u64, insight: bool) -> Identity {
        Identity::with_id(Id::next(), origin, spawned_ns, insight)
    }

    /// [`Identity::new`] with the id given (a worker's, from its own block). Inline: on
    /// every spawn without insight this is a test and a pointer; the box is out of line.
    #[inline]
    pub(crate) fn with_id(id: Id, origin: Origin, spawned_ns: u64, insight: bool) -> Identity {
        let origin = if insight || origin.name.is_some() {
            Identity::insight_origin(origin, spawned_ns)
        } else {
            OriginPtr(NonNull::from(origin.location).cast())
        };
        Identity { id, origin }
    }

    /// The tagged pointer to a new [`Insight`] box, for [`Identity::with_id`].
    #[cold]
    #[inline(never)]
    fn insight_origin(origin: Origin, spawned_ns: u64) -> OriginPtr {
        let boxed = Box::new(Insight {
            location: origin.location,
            name: origin.name,
            spawned_ns,
            activity: Activity::default(),
        });
        let ptr = Box::into_raw(boxed).cast::<()>();
        // The tag: a `Box<Insight>` is 8-byte aligned, so bit 0 is clear before this
        // (`wrapping_byte_add` keeps the pointer's provenance).
        let tagged = ptr.wrapping_byte_add(1);
        // SAFETY: a box's address plus one is not null.
        OriginPtr(unsafe { NonNull::new_unchecked(tagged) })
    }

    /// The task's [`Insight`], if it keeps one.
    #[inline]
    pub(crate) fn insight(&self) -> Option<&Insight> {
        // SAFETY: the box of `new`, live until this identity drops (it owns it), and never
        // mutated but through atomics.
        self.insight_ptr().map(|insight| unsafe { &*insight })
    }

    /// Whether the task keeps an [`Insight`]: one bit test, for the poll path.
    #[inline]
    pub(crate) fn has_insight(&self) -> bool {
        self.origin.0.as_ptr() as usize & 1 == 1
    }

    /// The `Box<Insight>` of `new`, untagged, if the origin is one.
    #[inline]
    fn insight_ptr(&self) -> Option<*mut Insight> {
        let ptr = self.origin.0.as_ptr();
        self.has_insight()
            .then(|| ptr.wrapping_byte_sub(1).cast::<Insight>())
    }

    /// Where the task was spawned.
    pub(crate) fn location(&self) -> &'static Location<'static> {
        match self.insight() {
            Some(insight) => insight.location,
            // SAFETY: untagged, so the pointer is the `&'static Location` of `new`.
            None => unsafe { self.origin.0.cast::<Location<'static>>().as_ref() },
        }
    }

    /// The task's name, if it has one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.insight()?.name.as_deref()
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        if let Some(insight) = self.insight_ptr() {
            // SAFETY: the box of `new` (`wrapping_byte_add` and `wrapping_byte_sub` kept the
            // pointer of `Box::into_raw`, provenance included), which this identity owns;
            // nothing else reaches it once the header is being dropped (invariant 4).
            drop(unsafe { Box::from_raw(insight) });
        }
    }
}

/// The counters of a task's polls (invariant 6). Every field is written only by the thread
/// that holds the task's `Notified` while it runs it, a single writer at a time (successive
/// pollers are ordered by the state word's transitions), and read by the dump with Relaxed
/// loads: statistics, which order nothing, so a plain load and store suffice (no RMW), and a
/// dump may see one poll's fields half-updated.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Polls so far, counting one that runs now.
    pub(crate) polls: StatAtomicU64,
    /// When the last poll started, on the runtime's clock (ns); 0 before the first.
    pub(crate) last_poll_ns: StatAtomicU64,
    /// Total time in `poll`, in ns (timed polls only: see `Poller::clock`).
    pub(crate) busy_ns: StatAtomicU64,
    /// The longest poll, in ns (timed polls only).
    pub(crate) longest_ns: StatAtomicU64,
}

impl Activity {
    /// A poll starts at `now_ns`.
    #[inline]
    pub(crate) fn begin_poll(&self, now_ns: u64) {
        // Relaxed: invariant 6, a single writer.
        self.polls.store(self.polls.load(Relaxed) + 1, Relaxed);
        self.last_poll_ns.store(now_ns, Relaxed);
    }

    /// The poll that `begin_poll` started ended; it took `elapsed_ns`, if it was timed.
    #[inline]
    pub(crate) fn end_poll(&self, elapsed_ns: Option<u64>) {
        if let Some(elapsed) = elapsed_ns {
            // Relaxed: invariant 6, a single writer.
            self.busy_ns
                .store(self.busy_ns.load(Relaxed).saturating_add(elapsed), Relaxed);
            if elapsed > self.longest_ns.load(Relaxed) {
                self.longest_ns.store(elapsed, Relaxed);
            }
        }
    }
}

/// What the spawner says of a new task: where it was spawned, and its name if it has one.
#[derive(Debug)]
pub(crate) struct Origin {
    pub(crate) location: &'static Location<'static>,
    pub(crate) name: Option<String>,
}

impl Origin {
    /// An unnamed task spawned by the caller of the `#[track_caller]` function that calls
    /// this.
    #[track_caller]
    #[inline]
    pub(crate) fn caller() -> Origin {
        Origin {
            location: Location::caller(),
            name: None,
        }
    }
}

// SAFETY: a header is shared by every holder of the task, on any thread: its state word is
// atomic, its vtable and identity are immutable (an identity's insight is atomics and a
// `String`, `Send + Sync`), its `owned` links are touched only under
// the owner list's lock (invariant 3), and its `queue_next` link only by the inject queue
// that holds its `Notified`, as that queue's invariants 1 and 2 allow. What the header
// stands for (the future and output) is `Send` (`RawTask::new` requires it).
unsafe impl Send for Header {}
// SAFETY: as above.
unsafe impl Sync for Header {}

// SAFETY: `queue_next` is a field of the header, the same for every call, and only the
// inject queue touches it (see the field).
unsafe impl crate::queue::linked_inject::Linked for Header {
    fn queue_link(&self) -> &UnsafeCell<*mut Header> {
        &self.queue_next
    }
}

/// What the task is doing with its future: polling it, holding its result, or done.
pub(crate) enum Stage<F: Future> {
    /// The future, pinned in place (invariant 5).
    Running(F),
    /// The future is gone; this is its output, or why there is none.
    Finished(Result<F::Output, JoinError>),
    /// The output was taken or dropped (or is being written).
    Consumed,
}

/// The typed middle of a task: its scheduler and its stage.
pub(crate) struct Core<F: Future, S> {
    /// Where wakes send the task's `Notified`. Given back with [`Schedule::recycle`] when
    /// the task is freed (`dealloc`, the one place a cell is dropped), not dropped with it.
    pub(crate) scheduler: ManuallyDrop<S>,
    /// See [`Stage`]; accessed under state 2 and state 3.
    pub(crate) stage: UnsafeCell<Stage<F>>,
}

/// The end of a task: the join waker slot (state 4).
pub(crate) struct Trailer {
    pub(crate) waker: UnsafeCell<Option<Waker>>,
}

/// The whole allocation. `#[repr(C)]` keeps the header at offset 0 (invariant 1).
#[repr(C)]
pub(crate) struct Cell<F: Future, S> {
    pub(crate) header: Header,
    pub(crate) core: Core<F, S>,
    pub(crate) trailer: Trailer,
}

/// The functions of one `Cell<F, S>` type, called with a pointer to its header.
pub(crate) struct Vtable {
    /// Runs a `Notified` (consumes its reference): see [`RawTask::poll`].
    pub(crate) poll: unsafe fn(NonNull<Header>, &Poller<'_>) -> bool,
    /// Hands a new `Notified` to the scheduler: see [`RawTask::schedule`].
    pub(crate) schedule: unsafe fn(NonNull<Header>),
    /// Frees the task: see [`RawTask::dealloc`] and [`RawTask::dealloc_into`].
    pub(crate) dealloc: unsafe fn(NonNull<Header>, Option<&mut Tally<'_>>),
    /// The `JoinHandle`'s poll: see [`RawTask::try_read_output`].
    pub(crate) try_read_output: unsafe fn(NonNull<Header>, *mut (), &Waker),
    /// The `JoinHandle`'s drop: see [`RawTask::drop_join_handle`].
    pub(crate) drop_join_handle_slow: unsafe fn(NonNull<Header>),
    /// Cancels the task in place at runtime shutdown: see [`RawTask::shutdown`].
    pub(crate) shutdown: unsafe fn(NonNull<Header>),
    /// Cancels the task of a `Notified` that will not run: see
    /// [`RawTask::shutdown_notified`].
    pub(crate) shutdown_notified: unsafe fn(NonNull<Header>),
}

/// The two vtables of one `Cell<F, S>` type pair, as constants, so that a reference to
/// either is a `'static` promoted from a constant (one static per type pair).
struct Vtables<F, S>(PhantomData<(F, S)>);

impl<F, S> Vtables<F, S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// A boxed cell's.
    const BOXED: Vtable = Vtable {
        poll: poll::<F, S>,
        schedule: schedule::<F, S>,
        dealloc: dealloc::<F, S>,
        try_read_output: try_read_output::<F, S>,
        drop_join_handle_slow: drop_join_handle_slow::<F, S>,
        shutdown: shutdown::<F, S>,
        shutdown_notified: shutdown_notified::<F, S>,
    };

    /// A cell placed in a batch's block (`block.rs`): the same but for `dealloc`, which gives
    /// the cell's slot back instead of freeing a box.
    const IN_BLOCK: Vtable = Vtable {
        dealloc: dealloc_in_block::<F, S>,
        ..Self::BOXED
    };
}

/// A type-erased pointer to a task: `Copy`, and no right by itself. What a holder may do with
/// it depends on the references and bits it holds (the typed handles encode those).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RawTask {
    ptr: NonNull<Header>,
}

impl RawTask {
    /// Allocates a task in the state `INITIAL_STATE` (two references, `NOTIFIED`,
    /// `JOIN_INTEREST`), or `DETACHED_STATE` if `detached` (one reference, `NOTIFIED`),
    /// holding `future`: in a box of its own, or, given a batch, in the batch's block
    /// (`block.rs`; `hint` as in `Batch::place`).
    pub(crate) fn new<F, S>(
        future: F,
        scheduler: S,
        identity: Identity,
        batch: Option<(&mut Batch<'_, F, S>, usize)>,
        detached: bool,
    ) -> RawTask
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        S: Schedule,
    {
        // A boxed cell's memory: a freed cell's, if the scheduler kept one of this layout
        // (`cell_cache.rs`), else a new box.
        let reused = match batch {
            Some(_) => None,
            None => scheduler.reuse_cell(Layout::new::<Cell<F, S>>()),
        };
        let cell = |vtable| Cell {
            header: Header {
                state: if detached {
                    State::new_detached()
                } else {
                    State::new()
                },
                vtable,
                queue_next: UnsafeCell::new(ptr::null_mut()),
                owned: UnsafeCell::new(OwnedLink::default()),
                identity,
            },
            core: Core {
                scheduler: ManuallyDrop::new(scheduler),
                stage: UnsafeCell::new(Stage::Running(future)),
            },
            trailer: Trailer {
                waker: UnsafeCell::new(None),
            },
        };
        let cell = match batch {
            Some((batch, hint)) => batch.place(hint, cell(&Vtables::<F, S>::IN_BLOCK)),
            None => match reused {
                Some(memory) => {
                    let memory = memory.cast::<Cell<F, S>>();
                    // SAFETY: `reuse_cell`'s contract: the memory is ours, allocated by the
                    // global allocator with this cell's layout, as a box of it is; so it
                    // is freed as one (invariant 1).
                    unsafe { memory.as_ptr().write(cell(&Vtables::<F, S>::BOXED)) };
                    memory
                }
                None => NonNull::from(Box::leak(Box::new(cell(&Vtables::<F, S>::BOXED)))),
            },
        };
        #[cfg(all(any(test, debug_assertions), not(loom)))]
        LIVE_TASKS.fetch_add(1, crate::sync::atomic::Relaxed); // Relaxed: a test tally.
        RawTask { ptr: cell.cast() }
    }

    /// The pointer a `RawWaker` carries.
    pub(crate) fn waker_data(self) -> *const () {
        self.ptr.as_ptr() as *const ()
    }

    /// The task a `RawWaker`'s data pointer names.
    ///
    /// # Safety
    ///
    /// `data` came from [`RawTask::waker_data`] of a task that is still allocated.
    pub(crate) unsafe fn from_waker_data(data: *const ()) -> RawTask {
        // SAFETY: `data` is a non-null header pointer, by the caller's contract.
        let ptr = unsafe { NonNull::new_unchecked(data as *mut Header) };
        RawTask { ptr }
    }

    /// The task's header.
    ///
    /// # Safety
    ///
    /// The caller holds a reference for as long as it uses the result (invariant 2).
    pub(crate) unsafe fn header(&self) -> &Header {
        // SAFETY: invariant 1 (the header is live at this address) and invariant 2 (the
        // caller's reference keeps it so); the header is only ever shared.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's state word.
    ///
    /// # Safety
    ///
    /// As [`RawTask::header`].
    pub(crate) unsafe fn state(&self) -> &State {
        // SAFETY: forwarded from the caller.
        unsafe { &self.header().state }
    }

    /// Runs the task once: polls it, or drops its future if it was aborted.
    ///
    /// # Safety
    ///
    /// The caller is the holder of the task's `Notified` (its reference and `NOTIFIED`,
    /// state 1), which this consumes.
    ///
    /// Returns whether the task completed in this run (its output, panic or cancellation is
    /// now the handle's to read). `poller` says who polls, and how to time the poll.
    pub(crate) unsafe fn poll(self, poller: &Poller<'_>) -> bool {
        // SAFETY: invariant 2 (the Notified's reference); the vtable function is this task's
        // (invariant 1), and its contract is the caller's.
        unsafe { (self.header().vtable.poll)(self.ptr, poller) }
    }

    /// Gives the task's scheduler a `Notified` for it.
    ///
    /// # Safety
    ///
    /// The caller holds a reference and the right to make a `Notified` (a transition
    /// answered `Submit` or `OkNotified`, state 1); both are handed over.
    pub(crate) unsafe fn schedule(self) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.schedule)(self.ptr) }
    }

    /// Frees the task (invariant 4).
    ///
    /// # Safety
    ///
    /// The caller's RMW dropped the task's last reference (state 5). The task is gone after.
    pub(crate) unsafe fn dealloc(self) {
        // SAFETY: the header is still live (nothing frees it but this call); invariant 1.
        unsafe { (self.header().vtable.dealloc)(self.ptr, None) }
    }

    /// Frees the task as [`dealloc`](Self::dealloc) does, but a cell in a batch's block gives
    /// its slot back through `tally`, with its neighbours (`block::Tally`), when the tally
    /// serves the task's scheduler.
    ///
    /// # Safety
    ///
    /// As [`dealloc`](Self::dealloc).
    pub(crate) unsafe fn dealloc_into(self, tally: &mut Tally<'_>) {
        // SAFETY: as in `dealloc`.
        unsafe { (self.header().vtable.dealloc)(self.ptr, Some(tally)) }
    }

    /// The `JoinHandle`'s poll: writes `Poll::Ready(output)` into `*dst` if the task is
    /// complete, and otherwise leaves `waker` for the completer.
    ///
    /// # Safety
    ///
    /// The caller is the task's `JoinHandle` (a reference and `JOIN_INTEREST`), and `dst` is
    /// a valid `*mut Poll<Result<F::Output, JoinError>>` for the task's future type `F`.
    pub(crate) unsafe fn try_read_output(self, dst: *mut (), waker: &Waker) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.try_read_output)(self.ptr, dst, waker) }
    }

    /// The `JoinHandle` is dropped: gives up the output, drops it if the task completed
    /// first (state 3), and drops the handle's reference.
    ///
    /// # Safety
    ///
    /// The caller is the task's `JoinHandle`; its reference and `JOIN_INTEREST` are consumed.
    pub(crate) unsafe fn drop_join_handle(self) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.drop_join_handle_slow)(self.ptr) }
    }

    /// The runtime, shutting down, cancels the task: if it is idle, drops its future here
    /// and completes it with `JoinError::Cancelled`; if it is running, its poller will. Then
    /// drops the caller's reference.
    ///
    /// # Safety
    ///
    /// The caller holds a reference, which this consumes.
    pub(crate) unsafe fn shutdown(self) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.shutdown)(self.ptr) }
    }

    /// The holder of a `Notified` that will not run cancels its task: claims it as a poller
    /// would and drops the future here, or, if the runtime claimed it at shutdown, drops the
    /// `Notified`'s reference. Unlike [`RawTask::shutdown`], right for a held `Notified`
    /// (state.rs, "Woken while running"), which holds `RUNNING` already.
    ///
    /// # Safety
    ///
    /// The caller holds the task's `Notified`, whose reference this consumes.
    pub(crate) unsafe fn shutdown_notified(self) {
        // SAFETY: as in `poll`.
        unsafe { (self.header().vtable.shutdown_notified)(self.ptr) }
    }

    /// Drops a `Notified` that was neither run nor shut down: drops its reference, and
    /// leaves the task notified and never polled again, unless it is a held one (state.rs,
    /// "Woken while running"), whose task is cancelled instead (it holds `RUNNING`, which
    /// would otherwise stay set for good, and no shutdown could drop the future).
    ///
    /// # Safety
    ///
    /// As [`RawTask::shutdown_notified`].
    // Cold and out of line: the runtime runs or shuts down every `Notified` it takes (this
    // is for the rest), and a `Notified` captured by a closure drops in its unwind path,
    // which, inlined, made the worker's poll call big enough that `coop::with_budget`'s
    // thread-local access stopped being inlined (19 instructions more per poll).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn drop_notified(self) {
        // SAFETY: the caller's reference keeps the task alive (invariant 2).
        let now = unsafe { self.state() }.load();
        // A held Notified's task stays RUNNING and NOTIFIED until its holder claims it; no
        // other Notified sees both (state.rs, "Woken while running"), so the load decides.
        if now.is_running() && now.is_notified() {
            // SAFETY: the caller's Notified and its reference are handed over.
            unsafe { self.shutdown_notified() }
        } else {
            // SAFETY: the caller's reference, given up.
            unsafe { self.drop_reference() }
        }
    }

    /// Drops one reference, freeing the task if it was the last.
    ///
    /// # Safety
    ///
    /// The caller holds a reference, which this consumes.
    pub(crate) unsafe fn drop_reference(self) {
        // SAFETY: the caller's reference keeps the task alive until this RMW (invariant 2).
        if unsafe { self.state() }.ref_dec() {
            // SAFETY: that RMW dropped the last reference (state 5).
            unsafe { self.dealloc() }
        }
    }

    /// Drops `n` references (one or two) to a task out of the live list, freeing it if
    /// they were the last, with its slot given back through `tally` (`dealloc_into`).
    /// Without a locked instruction when they were (`State::ref_dec_by_unreachable`).
    ///
    /// # Safety
    ///
    /// The caller holds `n` references, which this consumes, and the task is out of the live
    /// list (as `State::ref_dec_by_unreachable` requires).
    pub(crate) unsafe fn drop_unlinked_references(self, n: usize, tally: &mut Tally<'_>) {
        // SAFETY: the caller's references keep the task alive until then (invariant 2), and
        // the task is out of the list (the caller's contract).
        if unsafe { self.state().ref_dec_by_unreachable(n) } {
            // SAFETY: those were the last references (state 5).
            unsafe { self.dealloc_into(tally) }
        }
    }

    /// The header pointer, for queues that hold tasks as `NonNull<Header>`.
    pub(crate) fn as_ptr(self) -> NonNull<Header> {
        self.ptr
    }

    /// The task whose header is at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`RawTask::as_ptr`] of a task that is still allocated.
    pub(crate) unsafe fn from_ptr(ptr: NonNull<Header>) -> RawTask {
        RawTask { ptr }
    }

    /// A pointer to the cell of a `Cell<F, S>` task, for the harness.
    pub(crate) fn from_cell<F: Future, S>(cell: NonNull<Cell<F, S>>) -> RawTask {
        RawTask { ptr: cell.cast() }
    }
}

impl<F: Future, S> Core<F, S> {
    /// Polls the future.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING` (state 2) and the stage is `Running`.
    pub(crate) unsafe fn poll(&self, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.stage.with_mut(|stage| {
            // SAFETY: state 2: the holder of RUNNING is the only one touching the stage.
            let stage = unsafe { &mut *stage };
            let Stage::Running(future) = stage else {
                unreachable!("magpie: a task was polled without its future");
            };
            // SAFETY: invariant 5: the future stays at this address until dropped in place.
            let future = unsafe { Pin::new_unchecked(future) };
            future.poll(cx)
        })
    }

    /// Drops whatever the stage holds, in place, and leaves it `Consumed`, even if the drop
    /// panics; returns the panic's payload if it did.
    ///
    /// # Safety
    ///
    /// The caller has the right to the stage (state 2 or state 3, or invariant 4).
    pub(crate) unsafe fn drop_stage(&self) -> Result<(), Payload> {
        self.stage.with_mut(|stage| {
            halt_unwinding(|| {
                let consume = ConsumeOnDrop(stage);
                // SAFETY: the caller's right to the stage; `consume` overwrites the dropped
                // value with `Consumed` without dropping it again, even when this unwinds.
                unsafe { ptr::drop_in_place(stage) };
                drop(consume);
            })
        })
    }

    /// Stores the result of the task.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING` (state 2), and has dropped the future.
    pub(crate) unsafe fn store_output(&self, result: Result<F::Output, JoinError>) {
        self.stage.with_mut(|stage| {
            // SAFETY: state 2. The old value is `Consumed`: this drops nothing.
            let stage = unsafe { &mut *stage };
            debug_assert!(matches!(stage, Stage::Consumed));
            *stage = Stage::Finished(result);
        })
    }

    /// Takes the result out of the stage.
    ///
    /// # Panics
    ///
    /// If it was taken already (a `JoinHandle` polled after it returned `Ready`).
    ///
    /// # Safety
    ///
    /// The caller is the `JoinHandle` and saw `COMPLETE` (state 2's exception).
    pub(crate) unsafe fn take_output(&self) -> Result<F::Output, JoinError> {
        let stage = self.stage.with_mut(|stage| {
            // SAFETY: state 2's exception: after COMPLETE the handle owns the stage.
            std::mem::replace(unsafe { &mut *stage }, Stage::Consumed)
        });
        match stage {
            Stage::Finished(result) => result,
            _ => panic!("`JoinHandle` polled after it returned `Poll::Ready`"),
        }
    }
}

impl<F: Future, S> Core<F, S> {
    /// Takes the stored result back, for the completer whose handle left between its load
    /// of `JOIN_INTEREST` and `transition_to_stored` (it answered `Detached`).
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING`, stored the result, and no handle is left to read it
    /// (state 2 and state 3: the result is the completer's).
    pub(crate) unsafe fn take_detached_result(&self) -> Option<Result<F::Output, JoinError>> {
        let stage = self.stage.with_mut(|stage| {
            // SAFETY: the caller's contract: nobody else touches the stage.
            std::mem::replace(unsafe { &mut *stage }, Stage::Consumed)
        });
        match stage {
            Stage::Finished(result) => Some(result),
            _ => None,
        }
    }
}

/// Writes `Consumed` over a stage that was just dropped in place, also while unwinding from
/// that drop, so that nothing drops it a second time.
struct ConsumeOnDrop<F: Future>(*mut Stage<F>);

impl<F: Future> Drop for ConsumeOnDrop<F> {
    fn drop(&mut self) {
        // SAFETY: `Core::drop_stage` made this from the stage pointer it just dropped in
        // place: the place is valid and holds no live value.
        unsafe { ptr::write(self.0, Stage::Consumed) }
    }
}

impl Trailer {
    /// Replaces the join waker (dropping the old one).
    ///
    /// # Safety
    ///
    /// The caller owns the slot (state 4: the handle while `JOIN_WAKER` is clear, the
    /// completer once it learns the handle is gone).
    #[inline]
    pub(crate) unsafe fn set_waker(&self, waker: Option<Waker>) {
        // SAFETY: state 4, by the caller's contract: nobody else reads or writes the slot.
        self.waker.with_mut(|slot| unsafe { *slot = waker })
    }

    /// Whether the join waker would wake the same task as `waker`.
    ///
    /// # Safety
    ///
    /// The slot holds a waker and is read-only now (state 4: `JOIN_WAKER` set), or the
    /// caller owns it.
    pub(crate) unsafe fn will_wake(&self, waker: &Waker) -> bool {
        // SAFETY: state 4: while JOIN_WAKER is set nobody writes the slot.
        self.waker.with(|slot| match unsafe { &*slot } {
            Some(current) => current.will_wake(waker),
            None => false,
        })
    }

    /// Wakes the join waker, by reference.
    ///
    /// # Safety
    ///
    /// The caller is the completer and saw `JOIN_WAKER` set in `transition_to_complete`'s
    /// answer (state 4).
    pub(crate) unsafe fn wake_join(&self) {
        self.waker.with(|slot| {
            // SAFETY: state 4: after COMPLETE, only the completer reads the slot, read-only.
            if let Some(waker) = unsafe { &*slot } {
                waker.wake_by_ref();
            }
        })
    }
}

// The vtable functions. Each casts the header pointer back to `Cell<F, S>` (invariant 1: the
// vtable they were reached through was made for this `F` and `S`) and forwards to the harness.

/// # Safety
///
/// As [`RawTask::poll`].
unsafe fn poll<F, S>(ptr: NonNull<Header>, poller: &Poller<'_>) -> bool
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: invariant 1 (the cast) and invariant 2 (the caller's reference).
    unsafe { Harness::<F, S>::from_cell(ptr.cast()) }.poll(poller)
}

/// # Safety
///
/// As [`RawTask::schedule`].
unsafe fn schedule<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let cell = ptr.cast::<Cell<F, S>>();
    // SAFETY: invariant 1 and invariant 2; the caller hands over a reference and the right
    // to a Notified (state 1), which `Notified::from_raw` takes.
    unsafe {
        let notified = Notified::<S>::from_raw(RawTask { ptr });
        cell.as_ref().core.scheduler.schedule(notified);
    }
}

/// # Safety
///
/// As [`RawTask::dealloc`], for a boxed cell.
unsafe fn dealloc<F, S>(ptr: NonNull<Header>, _: Option<&mut Tally<'_>>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: invariant 1: the cell came from `Box::leak` in `RawTask::new` (this vtable is a
    // boxed cell's); invariant 4: the last reference is gone, so nothing else can reach it.
    let mut cell = unsafe { Box::from_raw(ptr.cast::<Cell<F, S>>().as_ptr()) };
    // SAFETY: this thread owns the whole cell (as above).
    let scheduler = unsafe { empty_cell(&mut cell) };
    // The rest of the cell is dropped in place; the memory, held meanwhile as a box of
    // `MaybeUninit`, which frees it without dropping anything if that drop unwinds, then goes
    // to the scheduler's cache of cells (`cell_cache.rs`) or back to the allocator.
    // SAFETY: the box's own allocation; `MaybeUninit<T>` has `T`'s layout.
    let mut memory =
        unsafe { Box::from_raw(Box::into_raw(cell).cast::<MaybeUninit<Cell<F, S>>>()) };
    // SAFETY: the cell is live and ours, and dropped once, here.
    unsafe { ptr::drop_in_place(memory.as_mut_ptr()) };
    let memory = NonNull::from(Box::leak(memory));
    // SAFETY: allocated by the global allocator with this layout (a box's), holding nothing
    // live now, and ours.
    if !unsafe { scheduler.keep_cell(memory.cast(), Layout::new::<Cell<F, S>>()) } {
        // SAFETY: not kept, so still ours: freed once, here, as the box it was.
        drop(unsafe { Box::from_raw(memory.as_ptr()) });
    }
    scheduler.recycle();
    #[cfg(all(any(test, debug_assertions), not(loom)))]
    LIVE_TASKS.fetch_sub(1, crate::sync::atomic::Relaxed); // Relaxed: a test tally.
}

/// # Safety
///
/// As [`RawTask::dealloc`], for a cell placed in a batch's block.
unsafe fn dealloc_in_block<F, S>(ptr: NonNull<Header>, tally: Option<&mut Tally<'_>>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    /// Gives the slot back once the cell is dropped, also if its drop panics (as a box
    /// frees its memory when its contents' drop unwinds); empty when a tally took it.
    struct GiveBack<'a>(Option<(NonNull<BlockHeader>, Option<&'a BlockSpares>)>);
    impl Drop for GiveBack<'_> {
        fn drop(&mut self) {
            if let Some((block, spares)) = self.0 {
                // SAFETY: the cell was dropped in place before this guard (it is declared
                // before the drop and outlives it), and its slot is given back once, here
                // (block.rs invariants 1 and 2).
                unsafe { block::release(block, 1, spares) }
            }
        }
    }
    let cell = ptr.cast::<Cell<F, S>>();
    // SAFETY: this thread owns the whole cell (invariant 4: the last reference is gone).
    let scheduler = unsafe { empty_cell(&mut *cell.as_ptr()) };
    {
        // SAFETY: invariant 1: this vtable is a block's, so `RawTask::new` placed the cell
        // with `Batch::place`; it is not freed yet.
        let block = unsafe { block::block_of(cell) };
        let spares = scheduler.block_spares();
        let give_back = match tally {
            Some(tally) if tally.serves(spares) => {
                // SAFETY: the slot is counted and given back once, by the tally, which
                // serves this scheduler; it does so after the drop below, at its next
                // block or its own drop (on unwind too).
                unsafe { tally.add(block) };
                GiveBack(None)
            }
            _ => GiveBack(Some((block, spares))),
        };
        // SAFETY: the cell is live and ours, and is dropped once, here; its memory is the
        // block's, given back by `give_back` or the tally after (on unwind too).
        unsafe { ptr::drop_in_place(cell.as_ptr()) };
        drop(give_back);
    }
    scheduler.recycle();
    #[cfg(all(any(test, debug_assertions), not(loom)))]
    LIVE_TASKS.fetch_sub(1, crate::sync::atomic::Relaxed); // Relaxed: a test tally.
}

/// What a cell's free does before the cell's own drop: drops what the stage still holds
/// and takes the scheduler out, for [`Schedule::recycle`] after the free.
///
/// # Safety
///
/// The caller owns the whole cell (invariant 4) and drops it right after, without reading
/// the scheduler again.
unsafe fn empty_cell<F, S>(cell: &mut Cell<F, S>) -> S
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // The stage may still hold a future or an unread output, user code whose destructor may
    // panic. Nobody waits for this task any more (no handle, no reference): drop the payload.
    // SAFETY: invariant 4: this thread owns the whole cell.
    if let Err(payload) = unsafe { cell.core.drop_stage() } {
        drop_payload(payload);
    }
    // SAFETY: taken once, here, just before the cell (whose field it is) is dropped; a
    // panic from the rest of the cell (the join waker's destructor) unwinds through the
    // caller's local, which drops it.
    unsafe { ManuallyDrop::take(&mut cell.core.scheduler) }
}

/// # Safety
///
/// As [`RawTask::try_read_output`].
unsafe fn try_read_output<F, S>(ptr: NonNull<Header>, dst: *mut (), waker: &Waker)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: the caller's contract: `dst` points to this task's output type, valid and
    // not aliased for the call.
    let dst = unsafe { &mut *dst.cast::<Poll<Result<F::Output, JoinError>>>() };
    // SAFETY: invariant 1 and invariant 2.
    unsafe { Harness::<F, S>::from_cell(ptr.cast()) }.try_read_output(dst, waker)
}

/// # Safety
///
/// As [`RawTask::drop_join_handle`].
unsafe fn drop_join_handle_slow<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: invariant 1 and invariant 2.
    unsafe { Harness::<F, S>::from_cell(ptr.cast()) }.drop_join_handle()
}

/// # Safety
///
/// As [`RawTask::shutdown`].
unsafe fn shutdown<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: invariant 1 and invariant 2.
    unsafe { Harness::<F, S>::from_cell(ptr.cast()) }.shutdown()
}

/// # Safety
///
/// As [`RawTask::shutdown_notified`].
unsafe fn shutdown_notified<F, S>(ptr: NonNull<Header>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    // SAFETY: invariant 1 and invariant 2.
    unsafe { Harness::<F, S>::from_cell(ptr.cast()) }.shutdown_notified()
}
