//! `scope`: spawn any number of jobs that borrow from the enclosing stack frame.

use std::marker::PhantomData;
use std::ptr;

use super::job::HeapJob;
use super::latch::CountLatch;
use crate::runtime::registry::{refused_after_shutdown, Registry};
use crate::runtime::worker::WorkerThread;
use crate::sync::atomic::*;
use crate::sync::AtomicPtr;
use crate::util::unwind::{self, Payload};

/// A fork-join scope: jobs spawned on it may borrow anything that outlives the call to
/// [`scope`], which returns only after all of them have finished.
///
/// Made by [`scope`], which lends it to its closure; each spawned job gets it too, to spawn
/// more. See [`scope`] for more examples.
///
/// # Examples
///
/// A helper that takes the scope and splits its work into jobs, recursively:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// use magpie::Scope;
///
/// fn sum_into<'s>(s: &Scope<'s>, lo: u64, hi: u64, total: &'s AtomicU64) {
///     if hi - lo <= 1000 {
///         total.fetch_add((lo..hi).sum::<u64>(), Ordering::Relaxed);
///     } else {
///         let mid = lo + (hi - lo) / 2;
///         s.spawn(move |s| sum_into(s, lo, mid, total));
///         s.spawn(move |s| sum_into(s, mid, hi, total));
///     }
/// }
///
/// let total = AtomicU64::new(0);
/// magpie::scope(|s| sum_into(s, 0, 10_000, &total));
/// assert_eq!(total.into_inner(), 49_995_000);
/// ```
pub struct Scope<'scope> {
    /// One count for the scope body plus one per unfinished spawn.
    latch: CountLatch,
    /// The first panic of a spawned job.
    panic: AtomicPtr<Payload>,
    registry: *const Registry,
    /// Invariant in `'scope`, like rayon's and std's scopes, so that a spawn cannot shorten
    /// or lengthen the borrow it was given.
    _marker: PhantomData<&'scope mut &'scope ()>,
}

// SAFETY: the raw pointers are to the registry (kept alive by the worker running `scope`
// until every spawn finished) and to a boxed payload owned by the scope; everything else is
// atomics. Spawns from several threads at once are the point of the type.
unsafe impl Send for Scope<'_> {}
// SAFETY: as above.
unsafe impl Sync for Scope<'_> {}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").finish_non_exhaustive()
    }
}

/// Creates a scope, runs `op` in it on a worker, and waits for every job spawned in it.
///
/// Jobs spawned with [`Scope::spawn`] run in parallel with `op` and with each other, and may
/// borrow from the caller's stack: `scope` returns only when all of them are done.
///
/// # Panics
///
/// If `op` or any spawned job panics, the panic is resumed once every spawned job has
/// finished. `op`'s own panic wins; otherwise the first spawned job's panic is resumed. The
/// payloads that lose are dropped, and so is `op`'s value when a spawned job panicked; a panic
/// raised by those drops (a value or payload whose `Drop` panics) is caught and discarded, so
/// it never replaces the panic resumed here and never aborts the process. The resumed payload
/// itself reaches the caller untouched; what its own destructor does is the caller's affair.
///
/// Called from outside the pool (a blocking closure still running while its runtime drops)
/// on a runtime whose workers have all exited, `scope` panics with "the runtime has shut
/// down" instead of waiting for work nobody would run.
///
/// # Examples
///
/// Filling a vector in parallel, one chunk per job:
///
/// ```
/// let mut squares = vec![0u64; 1000];
/// magpie::scope(|s| {
///     for (i, chunk) in squares.chunks_mut(100).enumerate() {
///         s.spawn(move |_| {
///             for (j, x) in chunk.iter_mut().enumerate() {
///                 let n = (i * 100 + j) as u64;
///                 *x = n * n;
///             }
///         });
///     }
/// });
/// assert_eq!(squares[999], 999 * 999);
/// ```
///
/// A spawned job may only borrow what outlives the whole scope, not the body's locals:
///
/// ```compile_fail
/// let mut results = Vec::new();
/// magpie::scope(|s| {
///     let local = 42;
///     s.spawn(|_| results.push(&local));
/// });
/// ```
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    // SAFETY: a non-null current worker is live for this whole call (see `join`).
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => scope_on_worker(worker, op),
        None => crate::runtime::context::current_registry()
            .in_worker_cold(move |worker| scope_on_worker(worker, op)),
    }
}

fn scope_on_worker<'scope, OP, R>(worker: &WorkerThread, op: OP) -> R
where
    OP: FnOnce(&Scope<'scope>) -> R + Send,
    R: Send,
{
    let scope = Scope {
        latch: CountLatch::new(1, worker.registry(), worker.index()),
        panic: AtomicPtr::new(ptr::null_mut()),
        registry: worker.registry(),
        _marker: PhantomData,
    };
    let result = unwind::halt_unwinding(|| op(&scope));
    // The body's own count.
    // SAFETY: `scope` lives until after `wait_until` below observes the latch set.
    unsafe { CountLatch::decrement(&scope.latch) };
    worker.wait_until(scope.latch.as_spin());

    // What loses is dropped quietly: its destructor's panic must neither replace the panic
    // resumed here nor, raised while that one unwinds, abort the process.
    match (result, scope.take_panic()) {
        (Ok(value), None) => value,
        // The body's panic wins over a spawn's.
        (Err(payload), spawned) => {
            unwind::drop_quietly(spawned);
            unwind::resume_unwinding(payload)
        }
        (Ok(value), Some(payload)) => {
            unwind::drop_quietly(value);
            unwind::resume_unwinding(payload)
        }
    }
}

impl<'scope> Scope<'scope> {
    /// Spawns `body` to run in this scope, in parallel with the rest.
    ///
    /// `body` gets the scope back, to spawn more jobs from. It is queued on the calling
    /// worker (LIFO for this worker, stealable by the others), or on the runtime's inject
    /// queue when called from a thread outside the pool.
    ///
    /// # Panics
    ///
    /// From a thread outside the pool, if the runtime's workers have all exited (the scope
    /// then runs as work that reached the runtime while it shut down): "the runtime has shut
    /// down". `body` is dropped unrun.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// let count = AtomicUsize::new(0);
    /// magpie::scope(|s| {
    ///     for _ in 0..10 {
    ///         s.spawn(|s| {
    ///             count.fetch_add(1, Ordering::Relaxed);
    ///             s.spawn(|_| {
    ///                 count.fetch_add(1, Ordering::Relaxed);
    ///             });
    ///         });
    ///     }
    /// });
    /// assert_eq!(count.into_inner(), 20);
    /// ```
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.latch.increment();
        let scope = ScopePtr(self);
        let run = move || {
            let scope = scope;
            // SAFETY: the scope outlives every job spawned in it: `scope_on_worker` waits for
            // the latch, which this job releases only below, as its last act.
            let this = unsafe { &*scope.0 };
            // Nothing between the body and the decrement can unwind: the body's panic is
            // caught, and `record_panic` drops a losing payload quietly.
            if let Err(payload) = unwind::halt_unwinding(|| body(this)) {
                this.record_panic(payload);
            }
            // SAFETY: as above; after this call the job touches the scope no more.
            unsafe { CountLatch::decrement(&this.latch) };
        };
        self.queue(run);
    }

    /// Queues a spawned job, `run`, which holds one count of the latch.
    fn queue<F: FnOnce() + Send>(&self, run: F) {
        // SAFETY: the job is executed exactly once (it is pushed to exactly one queue, and
        // queues hand each job to one taker) and before the scope, and so anything `body`
        // borrows for `'scope`, goes away (the scope waits for its count to reach zero). If
        // the inject queue refuses it, it is taken back below, unexecuted.
        let job = unsafe { HeapJob::into_job_ref(run) };
        // SAFETY: a non-null current worker is live during this call.
        match unsafe { WorkerThread::current().as_ref() } {
            Some(worker) if ptr::eq(worker.registry(), self.registry) => worker.push(job),
            // SAFETY: the registry outlives the scope (see the type's SAFETY note).
            _ => match unsafe { (*self.registry).inject(job) } {
                Ok(()) => {}
                // A thread outside the pool spawned while the scope's owner runs as a
                // late job of a runtime whose other workers exited: nobody else will run it.
                Err(refused) => {
                    // SAFETY: `refused` is the reference `into_job_ref` made for this `F`,
                    // never executed; we take its box back.
                    let run = unsafe { HeapJob::<F>::into_func(refused) };
                    // Quietly: the refusal is the panic to see.
                    unwind::drop_quietly(run);
                    // SAFETY: gives back the count `run` held; the scope is live, since the
                    // caller holds another count (the body's, or a running spawn's).
                    unsafe { CountLatch::decrement(&self.latch) };
                    refused_after_shutdown();
                }
            },
        }
    }

    /// Keeps the first spawned job's panic; drops later ones quietly. Never unwinds: the
    /// spawned job still has to release its count.
    fn record_panic(&self, payload: Payload) {
        let boxed = Box::into_raw(Box::new(payload));
        // AcqRel: Release publishes the payload to `take_panic`'s Acquire swap.
        if self
            .panic
            .compare_exchange(ptr::null_mut(), boxed, AcqRel, Relaxed)
            .is_err()
        {
            // SAFETY: `boxed` was never shared; a panic was already recorded.
            unwind::drop_payload(*unsafe { Box::from_raw(boxed) });
        }
    }

    fn take_panic(&self) -> Option<Payload> {
        // Acquire: pairs with the Release in `record_panic`.
        let ptr = self.panic.swap(ptr::null_mut(), Acquire);
        // SAFETY: non-null values come from `Box::into_raw` in `record_panic`, and the swap
        // makes us their only owner.
        (!ptr.is_null()).then(|| *unsafe { Box::from_raw(ptr) })
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        // A payload nobody took: none in practice, since nothing between the wait and
        // `take_panic` in `scope_on_worker` unwinds; dropped quietly all the same.
        if let Some(payload) = self.take_panic() {
            unwind::drop_payload(payload);
        }
    }
}

/// A pointer to the scope that a spawned job may carry to another thread.
struct ScopePtr<'scope>(*const Scope<'scope>);

// SAFETY: `Scope` is `Sync`, so sharing a pointer to it across threads is sound; the job's
// SAFETY argument covers its lifetime.
unsafe impl Send for ScopePtr<'_> {}
