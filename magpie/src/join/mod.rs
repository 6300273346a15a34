//! Fork-join: [`join`] and [`scope`](fn@scope).
//!
//! How a `join` runs (see ARCHITECTURE.md, "Life of a job", for the whole story):
//!
//! 1. `b` becomes a [`StackJob`] in `join`'s own frame and is pushed on the
//!    bottom of the worker's deque (no allocation, no lock, no hardware fence);
//! 2. `a` runs right here;
//! 3. the worker pops its deque: if it gets `b` back, nobody stole it, and `b` runs right
//!    here too (the fast path, which is almost every `join` in a saturated pool);
//! 4. otherwise a thief runs `b`; the worker runs other jobs until `b`'s latch is set,
//!    parking if there are none.

pub(crate) mod job;
pub(crate) mod latch;
mod scope;

pub use scope::{scope, Scope};

use crate::runtime::worker::WorkerThread;
use crate::util::unwind::{self, Payload};
use job::StackJob;
use latch::SpinLatch;

/// Runs `a` and `b`, potentially in parallel, and returns both results.
///
/// `a` runs on the calling thread. `b` is offered to the other workers when the calling
/// worker offers fewer than a handful of stealable jobs; otherwise this worker already
/// offers its oldest, largest pieces of work to thieves, and `b` simply runs after `a` on this
/// thread. This makes `join` cheap enough to call at every level of a recursion: past the
/// first few levels it costs about as much as calling `a` and `b` in turn.
///
/// Called from outside a magpie worker, `join` runs on the current runtime (the global
/// default, outside any) and blocks the calling thread until both halves are done.
///
/// # Panics
///
/// If `a` or `b` panics, the panic is resumed after *both* have finished, so neither half is
/// left running with borrowed data. If both panic, `a`'s payload is the one resumed and `b`'s
/// is dropped; if one panics, the other's result is dropped. A panic raised by those drops (a
/// value or payload whose `Drop` panics) is caught and discarded: it never replaces the panic
/// resumed here, and never aborts the process. The resumed payload itself reaches the caller
/// untouched; what its own destructor does is the caller's affair.
///
/// Called from outside the pool (a blocking closure still running while its runtime drops)
/// on a runtime whose workers have all exited, `join` panics with "the runtime has shut
/// down" instead of waiting for work nobody would run.
///
/// # Blocking
///
/// Both halves may run on the same thread, one after the other, so `a` must not wait for
/// something that only `b` does unless another worker is sure to take `b`. magpie guarantees
/// that `b` is stealable when the calling worker's deque holds fewer than 3 stealable jobs:
/// in particular at the outermost `join` of a computation and the first levels below it.
/// Rayon makes every `b` stealable; chili only one in 64 deeper down. We trade that last bit
/// of guarantee for speed; see ARCHITECTURE.md.
///
/// # Examples
///
/// A parallel quicksort:
///
/// ```
/// fn quick_sort<T: PartialOrd + Send>(v: &mut [T]) {
///     if v.len() > 1 {
///         let mid = partition(v);
///         let (lo, hi) = v.split_at_mut(mid);
///         magpie::join(|| quick_sort(lo), || quick_sort(hi));
///     }
/// }
///
/// fn partition<T: PartialOrd + Send>(v: &mut [T]) -> usize {
///     let pivot = v.len() - 1;
///     let mut i = 0;
///     for j in 0..pivot {
///         if v[j] <= v[pivot] {
///             v.swap(i, j);
///             i += 1;
///         }
///     }
///     v.swap(i, pivot);
///     i
/// }
///
/// let mut v = vec![5, 1, 8, 22, 0, 44];
/// quick_sort(&mut v);
/// assert_eq!(v, vec![0, 1, 5, 8, 22, 44]);
/// ```
///
/// Both closures may run on another thread, so what they capture must be `Send`:
///
/// ```compile_fail
/// let shared = std::rc::Rc::new(5);
/// magpie::join(|| *shared + 1, || 0);
/// ```
#[inline]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // SAFETY: a non-null current worker is live for as long as its thread runs jobs, which
    // covers this call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => join_on_worker(worker, a, b),
        None => join_cold(a, b),
    }
}

/// [`join`] for closures whose first one, `a`, must stay on the calling thread (it holds
/// something that is not `Send`): on a worker, `b` is offered to the pool as `join` offers
/// it, and `a` runs here; elsewhere, `a` then `b`, here. Panics as `join`'s.
///
/// For the parallel iterators' bridge, whose folders need not be `Send` (rule 5 of
/// `iter/plumbing/bridge.rs`).
pub(crate) fn join_here<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    // SAFETY: a non-null current worker is live for as long as its thread runs jobs, which
    // covers this call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => join_on_worker(worker, a, b),
        None => join_inline(a, b),
    }
}

/// [`join`] with the publication policy of a parallel iterator's split
/// (`WorkerThread::should_offer_split`): `b` is offered while the worker's deque holds fewer
/// jobs than a computation's split spine has levels on this pool, where `join` stops at 3.
/// The spine runs in nanoseconds, so with 16 workers `join`'s reserve was full by the third
/// level, and the worker that split first kept its next two levels to itself, an eighth of
/// the input where its share is a sixteenth, with no later `join` of its (it folds) to
/// publish again (`iter/plumbing/README.md`, "Every split is offered"). A fork-join tree
/// does work between its `join`s, so thieves empty the reserve before the next one; it
/// keeps [`join`].
#[inline]
pub(crate) fn join_offered<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // SAFETY: a non-null current worker is live for as long as its thread runs jobs, which
    // covers this call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) if worker.should_offer_split() => join_published(worker, a, b),
        Some(_) => join_inline(a, b),
        None => join_cold(a, b),
    }
}

/// `join` called outside the pool: run it on a worker of the current runtime and block.
///
/// Out of line, and `#[cold]`: it runs once per computation, but inlined into the caller, the
/// `Arc<Registry>` it holds and drops took a callee-saved register in every `join` on a
/// worker, 2 instructions per `join` (BENCHMARKS.md, "The shape of `join`'s fast path").
#[cold]
#[inline(never)]
fn join_cold<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    crate::runtime::context::current_registry()
        .in_worker_cold(move |worker| join_on_worker(worker, a, b))
}

/// `join` on `worker`, the calling thread's. `a` and its value need not be `Send` here: on a
/// worker, `a` always runs on the calling thread (inline below, or in `join_published`).
#[inline]
fn join_on_worker<A, B, RA, RB>(worker: &WorkerThread, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    if worker.should_publish() {
        join_published(worker, a, b)
    } else {
        join_inline(a, b)
    }
}

/// This worker already offers enough stealable jobs: run both halves here, `a` first, with
/// the same panic rules as the published path. Not a job: nothing was queued, and nothing is
/// counted (a counter bump per call would chain every `join` through one memory location).
///
/// Each panic is handled where it is caught, in a cold function that does not return, so
/// that nothing about a panic outlives its `catch_unwind` and the path that does not panic
/// is `a(); b();` and the policy check. Keeping `a`'s outcome as a `Result` until `b` had
/// returned (as `join_outcomes` does) cost every call a callee-saved register live across
/// `b`, its zeroing and a test: 4 instructions per `join`, out of the 19.5 this path then
/// added to `a` and `b` (BENCHMARKS.md, "The shape of `join`'s fast path").
#[inline]
fn join_inline<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB,
{
    let ra = match unwind::halt_unwinding(a) {
        Ok(ra) => ra,
        Err(payload) => a_panicked_cold(payload, b),
    };
    match unwind::halt_unwinding(b) {
        Ok(rb) => (ra, rb),
        Err(payload) => b_panicked_cold(ra, payload),
    }
}

/// `join_inline` after `a` panicked: `b` still runs (outside the unwind, like every `b`),
/// then `a`'s panic is resumed and whatever `b` left is dropped quietly (`join_outcomes`'
/// rules).
#[cold]
#[inline(never)]
fn a_panicked_cold<B, RB>(payload: Payload, b: B) -> !
where
    B: FnOnce() -> RB,
{
    let rb = unwind::halt_unwinding(b);
    unwind::drop_quietly(rb);
    unwind::resume_unwinding(payload)
}

/// `join_inline` after `b` panicked and `a` returned: `a`'s value is dropped quietly and
/// `b`'s panic resumed (`join_outcomes`' rules).
#[cold]
#[inline(never)]
fn b_panicked_cold<RA>(ra: RA, payload: Payload) -> ! {
    unwind::drop_quietly(ra);
    unwind::resume_unwinding(payload)
}

/// `b` becomes a job on this worker's deque, where any idle worker can steal it.
///
/// Kept out of line: it runs for a few joins per computation, and inlined it would make
/// every caller save a full set of registers on every recursion level.
#[inline(never)]
fn join_published<A, B, RA, RB>(worker: &WorkerThread, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA,
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    let job_b = StackJob::new(b, SpinLatch::new(worker.registry(), worker.index()));
    let job_b_ref = job_b.as_job_ref();
    worker.push(job_b_ref);

    let result_a = unwind::halt_unwinding(a);

    // Take `b` back unless it was stolen. Every nested `join` inside `a` took its own job
    // back (or waited for it), so above `b` there can only be spawns of an enclosing scope
    // made inside `a`: we run those as we meet them. Thieves take the oldest first, so if
    // `b` was stolen, so was every older job, and the loop ends on an empty deque.
    while let Some(job) = worker.pop() {
        if job == job_b_ref {
            worker.count_job();
            // `b` runs even if `a` panicked.
            // SAFETY: `job_b_ref` is back in our hands: no other thread can run it.
            let result_b = unwind::halt_unwinding(|| unsafe { job_b.run_inline() });
            return join_outcomes(result_a, result_b);
        }
        // A scope spawn pushed while `a` ran (see above).
        worker.execute(job);
    }

    worker.wait_until(&job_b.latch);
    // SAFETY: `wait_until` returned, so the latch was probed set on this thread.
    let result_b = unsafe { job_b.take_result() }.into_outcome();
    join_outcomes(result_a, result_b)
}

/// `join`'s answer from the outcomes of both halves: both values, or the panic to resume,
/// `a`'s if both panicked. What is thrown away (the other half's value or payload) is dropped
/// quietly: a destructor that panics there must neither replace the panic being resumed nor,
/// raised while it unwinds, abort the process.
#[inline]
fn join_outcomes<RA, RB>(ra: Result<RA, Payload>, rb: Result<RB, Payload>) -> (RA, RB) {
    match (ra, rb) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(payload), rb) => {
            unwind::drop_quietly(rb);
            unwind::resume_unwinding(payload)
        }
        (Ok(ra), Err(payload)) => {
            unwind::drop_quietly(ra);
            unwind::resume_unwinding(payload)
        }
    }
}
