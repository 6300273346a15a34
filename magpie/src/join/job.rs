//! Jobs: the fork-join unit of work, type-erased behind [`JobRef`].
//!
//! A job runs exactly once. It lives either on the stack of the `join` (or `install`) that
//! created it ([`StackJob`], which waits on its latch before its frame ends) or on the heap
//! ([`HeapJob`], for scope spawns, which frees itself when it runs). Type erasure happens only
//! here: a [`JobRef`] is a pointer to a [`JobHeader`] at offset 0 of a `#[repr(C)]` job,
//! whose `execute` function knows the concrete type.

use std::ptr::NonNull;

use super::latch::Latch;
use crate::sync::UnsafeCell;
use crate::util::unwind::{self, AbortIfPanic, Payload};

/// The first field of every job.
#[derive(Debug)]
pub(crate) struct JobHeader {
    /// Runs the job. Safety contract: see [`JobRef::execute`].
    execute: unsafe fn(NonNull<JobHeader>),
}

/// A type-erased pointer to a job. Whoever holds one may execute it once; holding one is the
/// right to do so, and queues move that right around without duplicating it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobRef(NonNull<JobHeader>);

// SAFETY: a JobRef stands for a job whose closure and result are `Send` (enforced by the
// constructors' bounds), so running it on another thread is sound.
unsafe impl Send for JobRef {}

impl JobRef {
    pub(crate) fn as_ptr(self) -> NonNull<JobHeader> {
        self.0
    }

    /// Rebuilds a `JobRef` from a pointer taken out of a queue by [`JobRef::as_ptr`].
    ///
    /// # Safety
    ///
    /// `ptr` must have come from `as_ptr` of a `JobRef` that has not been executed.
    pub(crate) unsafe fn from_ptr(ptr: NonNull<JobHeader>) -> JobRef {
        JobRef(ptr)
    }

    /// Runs the job.
    ///
    /// # Safety
    ///
    /// Each job is executed at most once, and its memory is live: a `StackJob`'s frame stays
    /// until its latch is set, which `execute` does last.
    #[inline]
    pub(crate) unsafe fn execute(self) {
        // SAFETY: the header is at offset 0 of a live job (caller's contract), and its
        // `execute` matches the job's concrete type (set by the constructors below).
        unsafe { ((*self.0.as_ptr()).execute)(self.0) }
    }
}

/// The outcome of a job, filled in by whoever ran it.
#[derive(Debug)]
pub(crate) enum JobResult<T> {
    None,
    Ok(T),
    Panic(Payload),
}

impl<T> JobResult<T> {
    /// The value, or the job's panic resumed on this thread.
    pub(crate) fn into_return_value(self) -> T {
        match self.into_outcome() {
            Ok(value) => value,
            Err(payload) => unwind::resume_unwinding(payload),
        }
    }

    /// The value, or the job's panic payload.
    pub(crate) fn into_outcome(self) -> Result<T, Payload> {
        match self {
            JobResult::Ok(value) => Ok(value),
            JobResult::Panic(payload) => Err(payload),
            JobResult::None => unreachable!("job result read before the job ran"),
        }
    }
}

/// A job on the stack of the thread that waits for it.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct StackJob<L, F, R> {
    header: JobHeader,
    func: UnsafeCell<Option<F>>,
    result: UnsafeCell<JobResult<R>>,
    pub(crate) latch: L,
}

impl<L, F, R> StackJob<L, F, R>
where
    L: Latch,
    F: FnOnce() -> R + Send,
    R: Send,
{
    pub(crate) fn new(func: F, latch: L) -> StackJob<L, F, R> {
        StackJob {
            header: JobHeader {
                execute: Self::execute,
            },
            func: UnsafeCell::new(Some(func)),
            result: UnsafeCell::new(JobResult::None),
            latch,
        }
    }

    /// A reference to this job for a queue.
    ///
    /// The caller must keep `self` in place until the job has run: either by taking it back
    /// from its queue (and calling [`StackJob::run_inline`]) or by waiting on its latch.
    pub(crate) fn as_job_ref(&self) -> JobRef {
        // From `self`, not `&self.header`: `execute` reaches the whole job through this
        // pointer (`func`, `result`, `latch`), and a pointer made from a reference to the
        // header alone may access only the header (Stacked and Tree Borrows). `header` is
        // at offset 0 (`#[repr(C)]`).
        JobRef(NonNull::from(self).cast::<JobHeader>())
    }

    /// The `execute` entry of the header: runs the closure, stores its outcome, sets the
    /// latch. Never unwinds.
    unsafe fn execute(this: NonNull<JobHeader>) {
        // SAFETY: `this` points at the header at offset 0 of a live `StackJob<L, F, R>`
        // (`#[repr(C)]`, built by `new`), per `JobRef::execute`'s contract.
        let this = unsafe { this.cast::<Self>().as_ref() };
        // SAFETY: executed once (`JobRef::execute`'s contract), so nobody else touches `func`.
        let func = this
            .func
            .with_mut(|f| unsafe { (*f).take() })
            .expect("job executed twice");
        let result = match unwind::halt_unwinding(func) {
            Ok(value) => JobResult::Ok(value),
            Err(payload) => JobResult::Panic(payload),
        };
        // SAFETY: the waiting thread reads `result` only after it observes the latch set,
        // which happens below (Release in `Latch::set` pairs with its Acquire probe).
        this.result.with_mut(|r| unsafe { *r = result });
        // SAFETY: `this` stays live until the latch is set; `set` is the last access.
        unsafe { L::set(&this.latch) };
    }

    /// Runs the closure on this thread: the job came back from its queue unexecuted.
    ///
    /// # Safety
    ///
    /// The job's `JobRef` must have been taken back from every queue, so it cannot be
    /// executed elsewhere.
    #[inline]
    pub(crate) unsafe fn run_inline(&self) -> R {
        // SAFETY: caller's contract: nobody else can reach `func`.
        let func = self
            .func
            .with_mut(|f| unsafe { (*f).take() })
            .expect("job executed twice");
        func()
    }

    /// The outcome, after the latch was observed set.
    ///
    /// # Safety
    ///
    /// The latch must have been probed set by this thread (so `execute` finished writing).
    pub(crate) unsafe fn take_result(&self) -> JobResult<R> {
        self.result.with_mut(|r| {
            // SAFETY: caller's contract: the writer is done and synchronized with us.
            unsafe { std::mem::replace(&mut *r, JobResult::None) }
        })
    }

    /// The value, or the job's panic resumed here; see [`StackJob::take_result`].
    ///
    /// # Safety
    ///
    /// As [`StackJob::take_result`].
    pub(crate) unsafe fn into_result(self) -> R {
        // SAFETY: forwarded contract.
        unsafe { self.take_result() }.into_return_value()
    }
}

/// A job on the heap, for fire-and-forget work whose completion is tracked elsewhere (a
/// scope's counter). Its closure must catch its own panics (the process aborts otherwise).
#[repr(C)]
pub(crate) struct HeapJob<F> {
    header: JobHeader,
    func: F,
}

impl<F> std::fmt::Debug for HeapJob<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapJob").finish_non_exhaustive()
    }
}

impl<F> HeapJob<F>
where
    F: FnOnce() + Send,
{
    /// Boxes `func` and returns the reference that owns the box.
    ///
    /// # Safety
    ///
    /// The returned `JobRef` must be executed exactly once, before anything `func` borrows
    /// goes away (a scope guarantees both by waiting for its spawns).
    pub(crate) unsafe fn into_job_ref(func: F) -> JobRef {
        let job = Box::new(HeapJob {
            header: JobHeader {
                execute: Self::execute,
            },
            func,
        });
        // SAFETY: `Box::into_raw` never returns null.
        JobRef(unsafe { NonNull::new_unchecked(Box::into_raw(job).cast::<JobHeader>()) })
    }

    /// Takes back the closure of a job that was never executed (a queue refused it), and
    /// frees the job.
    ///
    /// # Safety
    ///
    /// `job` must come from [`HeapJob::into_job_ref`] for this `F`, and must not have been
    /// executed; it must not be executed afterwards.
    pub(crate) unsafe fn into_func(job: JobRef) -> F {
        // SAFETY: as in `execute` (caller's contract); this takes the place of the execution.
        let job = unsafe { Box::from_raw(job.0.cast::<Self>().as_ptr()) };
        job.func
    }

    unsafe fn execute(this: NonNull<JobHeader>) {
        // SAFETY: `this` came from `Box::into_raw` of a `HeapJob<F>` whose header is at
        // offset 0 (`#[repr(C)]`), and is executed once (`into_job_ref`'s contract).
        let job = unsafe { Box::from_raw(this.cast::<Self>().as_ptr()) };
        // The closure catches its users' panics and then releases whoever waits for it (a
        // scope's count). A panic escaping it anyway would skip that release and unwind
        // through the frame that runs this job, maybe a `join` whose stolen half still points
        // into it: abort instead.
        let guard = AbortIfPanic;
        (job.func)();
        std::mem::forget(guard);
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::StackJob;
    use crate::join::latch::LockLatch;

    /// A `StackJob` executed through its type-erased `JobRef`, as a thief does: `execute`
    /// reaches the job's `func`, `result` and `latch` through the header pointer, so that
    /// pointer must carry the whole job's provenance (Miri: run with and without
    /// `-Zmiri-tree-borrows`).
    #[test]
    fn stack_job_runs_through_its_job_ref() {
        let data = [1u32, 2, 3];
        let job = StackJob::new(|| data.iter().sum::<u32>(), LockLatch::new());
        let job_ref = job.as_job_ref();
        // SAFETY: executed once, while `job` is live on this frame.
        unsafe { job_ref.execute() };
        job.latch.wait();
        // SAFETY: the latch was observed set above.
        assert_eq!(unsafe { job.into_result() }, 6);
    }
}
