//! The scheduler's side of a task: the [`Schedule`] trait, the [`Notified`] handle that run
//! queues hold, and [`new_task`], which makes a task and its two first handles.

use std::alloc::Layout;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use super::join::JoinHandle;
use std::ptr::NonNull;

use super::block::{Batch, BlockSpares};
use super::harness::Poller;
use super::raw::{Header, Identity, RawTask};
use crate::sync::StatAtomicU64;
use crate::util::unwind::{drop_payload, Payload};

/// Where a task goes when it is woken: the runtime's run queues (tests use a plain queue).
///
/// `schedule` may be called from any thread (a waker's), also from inside another task's
/// poll or from the task's own poll, and must not poll the task itself: it queues it.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// Queues `task` to be run once.
    fn schedule(&self, task: Notified<Self>);

    /// Queues `task`, which was woken while it ran (it yielded): behind the tasks that are
    /// waiting, rather than next.
    fn yield_task(&self, task: Notified<Self>) {
        self.schedule(task);
    }

    /// A task whose `JoinHandle` was gone when it finished panicked (or its cancelled
    /// future's destructor did): nobody will see `payload`. The default drops it.
    fn unhandled_panic(&self, payload: Payload) {
        drop_payload(payload);
    }

    /// The task completed: removes it from the owner's list of live tasks, if it is in one.
    /// Returns true if the list held a reference to it, which the caller then drops.
    fn release(&self, task: RawTask) -> bool {
        let _ = task;
        false
    }

    /// A task whose `JoinHandle` is gone completed: like [`release`](Schedule::release),
    /// except that the scheduler may leave the task in the live list for now and unlink it
    /// later, together with others (`WorkerThread::defer_unlink`). Returns true if it did:
    /// it then holds the caller's own reference, which it drops after the unlink (with the
    /// list's), and the caller drops none. Returns false, having done nothing, otherwise;
    /// the caller then calls `release`. The default defers nothing.
    fn release_detached(&self, task: RawTask) -> bool {
        let _ = task;
        false
    }

    /// Where this scheduler keeps freed blocks of batch cells for its next batch
    /// (`block.rs`), if it keeps any. The default keeps none.
    fn block_spares(&self) -> Option<&BlockSpares> {
        None
    }

    /// Memory for a new task's boxed cell of `layout`, from cells freed before
    /// ([`keep_cell`](Schedule::keep_cell)), if the scheduler has one: allocated by the
    /// global allocator with `layout`, holding nothing, and the caller's. The default keeps
    /// none.
    fn reuse_cell(&self, layout: Layout) -> Option<NonNull<u8>> {
        let _ = layout;
        None
    }

    /// Offers the memory of a freed boxed cell for a later [`reuse_cell`](Schedule::reuse_cell)
    /// (`cell_cache.rs`). Returns true if the scheduler took it; the caller frees it
    /// otherwise. The default takes none.
    ///
    /// # Safety
    ///
    /// `memory` was allocated by the global allocator with `layout`, holds nothing live, and
    /// is the caller's to free; if this returns true the caller must not touch it again.
    unsafe fn keep_cell(&self, memory: NonNull<u8>, layout: Layout) -> bool {
        let _ = (memory, layout);
        false
    }

    /// The task that held this scheduler was freed, and hands it back. The default drops
    /// it; the runtime's workers keep their registry's reference for the next task they
    /// spawn (`WorkerThread::keep_registry_ref`), so that a task's start and end write no
    /// line that every worker writes.
    fn recycle(self) {
        drop(self);
    }
}

/// The right to run a task once: one of the task's references, with its `NOTIFIED` bit
/// (state.rs invariant 1: at most one exists per task).
///
/// Dropping a `Notified` without running it only drops its reference: the task then stays
/// notified and is never polled again (its wakes do nothing), so the runtime runs every
/// `Notified` or shuts the task down instead. A *held* one (task/state.rs, "Woken while
/// running") holds `RUNNING` too, and dropping it cancels the task, as `shutdown` does.
pub(crate) struct Notified<S: 'static> {
    raw: RawTask,
    _scheduler: PhantomData<S>,
}

// SAFETY: a Notified is a reference to a task whose future and output are `Send` (see
// `new_task`) and whose scheduler is `Send + Sync`; every access it allows goes through the
// task's atomic state word.
unsafe impl<S: Schedule> Send for Notified<S> {}

impl<S: Schedule> Notified<S> {
    /// Takes over a reference and the `NOTIFIED` bit.
    ///
    /// # Safety
    ///
    /// The caller holds a reference to `raw` and the right to make its `Notified` (a
    /// transition answered `Submit` or `OkNotified`, or the task is new), and the task's
    /// scheduler type is `S`.
    pub(crate) unsafe fn from_raw(raw: RawTask) -> Notified<S> {
        Notified {
            raw,
            _scheduler: PhantomData,
        }
    }

    /// Gives up the handle without dropping its reference, for intrusive queues.
    pub(crate) fn into_raw(self) -> RawTask {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// Runs the task once: polls its future, or drops it if the task was aborted. Returns
    /// whether the task completed.
    pub(crate) fn run(self) -> bool {
        let word = StatAtomicU64::new(0);
        super::id::with_off_pool_word(&word, || self.run_on(&Poller::off_pool(&word)))
    }

    /// [`Notified::run`] by `poller` (a worker, with its clock).
    pub(crate) fn run_on(self, poller: &Poller<'_>) -> bool {
        let raw = self.into_raw();
        // SAFETY: the Notified's reference and NOTIFIED bit are handed to the poll.
        unsafe { raw.poll(poller) }
    }

    /// Takes over a `Notified` that a queue held as its header pointer
    /// ([`Notified::into_header`]).
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_header` of a `Notified<S>`, and is used this once.
    pub(crate) unsafe fn from_header(ptr: NonNull<Header>) -> Notified<S> {
        // SAFETY: the caller's contract: the pointer carries that Notified's reference and
        // NOTIFIED bit, and the scheduler type is `S`.
        unsafe { Notified::from_raw(RawTask::from_ptr(ptr)) }
    }

    /// Gives up the handle as its header pointer, for queues of raw pointers; the queue
    /// then holds the reference and the right to run the task.
    pub(crate) fn into_header(self) -> NonNull<Header> {
        self.into_raw().as_ptr()
    }

    /// Cancels the task in place, for a `Notified` that cannot be queued (its runtime is
    /// shutting down): the future is dropped on this thread and the handle resolves to
    /// cancelled.
    pub(crate) fn shutdown(self) {
        // SAFETY: the Notified (a held one included) is handed to `shutdown_notified`, which
        // consumes its reference.
        unsafe { self.into_raw().shutdown_notified() }
    }

    /// The task this handle runs.
    pub(crate) fn raw(&self) -> RawTask {
        self.raw
    }
}

impl<S: 'static> Drop for Notified<S> {
    fn drop(&mut self) {
        // SAFETY: the Notified, and its reference, given up here.
        unsafe { self.raw.drop_notified() }
    }
}

impl<S: 'static> fmt::Debug for Notified<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Notified").field(&self.raw).finish()
    }
}

/// Allocates a task running `future`, to be scheduled on `scheduler`, known as `identity`. Returns its `Notified`, which the caller must submit (the task
/// starts notified), and its `JoinHandle`.
pub(crate) fn new_task<F, S>(
    future: F,
    scheduler: S,
    identity: Identity,
) -> (Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    new_task_in(future, scheduler, identity, None)
}

/// [`new_task`], with the cell placed in `batch`'s block when one is given (`block.rs`;
/// `hint` as in `Batch::place`).
pub(crate) fn new_task_in<F, S>(
    future: F,
    scheduler: S,
    identity: Identity,
    batch: Option<(&mut Batch<'_, F, S>, usize)>,
) -> (Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let raw = RawTask::new(future, scheduler, identity, batch, false);
    // SAFETY: a new task holds two references and NOTIFIED (`INITIAL_STATE`): one reference
    // and NOTIFIED are the Notified's; its scheduler type is `S`.
    let notified = unsafe { Notified::from_raw(raw) };
    // SAFETY: the other reference and JOIN_INTEREST are the handle's; its output type is
    // `F::Output`.
    let handle = unsafe { JoinHandle::from_raw(raw) };
    (notified, handle)
}

/// [`new_task_in`] for a task nobody will join (`Runtime::execute`): no `JoinHandle`, and the
/// task starts as if its handle had been dropped before it was queued.
pub(crate) fn new_detached_task_in<F, S>(
    future: F,
    scheduler: S,
    identity: Identity,
    batch: Option<(&mut Batch<'_, F, S>, usize)>,
) -> Notified<S>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let raw = RawTask::new(future, scheduler, identity, batch, true);
    // SAFETY: a new detached task holds one reference and NOTIFIED (`DETACHED_STATE`), the
    // Notified's; its scheduler type is `S`.
    unsafe { Notified::from_raw(raw) }
}
