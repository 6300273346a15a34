//! [`JoinHandle`]: the spawner's handle to a task's output.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::error::JoinError;
use super::id::Id;
use super::raw::RawTask;
use super::state::TransitionToCancelled;

/// An owned permission to wait for a task's output: a future resolving to
/// `Ok(output)`, or to a [`JoinError`] if the task was cancelled or panicked.
///
/// Await it from async code, or call [`JoinHandle::join`] to block a thread outside the pool.
/// Dropping the handle detaches the task: it keeps running, and its output is dropped when
/// it finishes (or at once, if it already has).
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let handle = rt.spawn(async { 6 * 7 });
/// assert_eq!(handle.join().unwrap(), 42);
///
/// let failing = rt.spawn(async { panic!("boom") });
/// let err = rt.block_on(failing).unwrap_err();
/// assert!(err.is_panic());
/// ```
///
/// # Task lifecycle
///
/// What the handle yields, and who drops the future and the output, for each way a task's
/// life can go. Every future is dropped exactly once, on a worker (or, at shutdown, on the
/// thread dropping the runtime), and before the handle can see the task finish; every output
/// is dropped exactly once. A panic in `poll` or in either destructor is caught: it never
/// aborts the process or stops a worker. `tests/task_combinations.rs` checks every
/// combination of these rows.
///
/// | What happens | The handle yields | The future is dropped | The output is dropped |
/// |---|---|---|---|
/// | `poll` returns `Ready` | `Ok(output)` | by the worker, after that poll | by whoever reads it, else see "handle dropped" |
/// | `poll` panics | `Err`, [`is_panic`](JoinError::is_panic), with that panic's payload | by the worker, after that poll | (none) |
/// | the future's destructor panics after `Ready` or a panicking `poll` | what it would have: that panic is discarded | by the worker | as in the rows above |
/// | the future's destructor panics while the task is cancelled | `Err`, `is_panic`, with the destructor's payload (the only thing the task did) | by the worker | (none) |
/// | the output's destructor panics | (unchanged) | (unchanged) | the panic is the dropper's: it unwinds in the reader's code, and is caught and discarded when the handle's destructor or a worker drops it |
/// | [`abort`](JoinHandle::abort) before the first poll (or while the task waits) | `Err`, [`is_cancelled`](JoinError::is_cancelled), never polled again | by a worker, the next time the task would have run | (none) |
/// | `abort` during a poll (from anywhere, the task itself included) | that poll decides: `Pending` gives `is_cancelled`, `Ready` gives `Ok(output)`, a panic gives `is_panic` | by the worker, when that poll returns | if `Ready`: as above |
/// | `abort` after the task finished | its result, unchanged | (already) | (unchanged) |
/// | the runtime shuts down | `is_cancelled`, as an abort | idle tasks: by the thread dropping the runtime; running ones: by their worker | (none) |
/// | handle dropped before or during the run (detached) | (nobody) | the task keeps running: by its worker | by the worker at completion, or by the handle's destructor if the output was already stored when it ran; either way before [`Runtime::wait_idle`](crate::Runtime::wait_idle), called after the handle's drop, returns |
/// | handle dropped after the task finished, unread | (nobody) | (already) | by the handle's destructor |
/// | handle awaited or [`join`](JoinHandle::join)ed | as the rows above | (already) | by the caller, who owns the output |
///
/// Aborting needs the handle: once it is dropped, the task can no longer be aborted (except by
/// the runtime's shutdown). A task leaves the runtime's live-task count just before it is
/// marked finished, so that a handle that resolved never counts as alive; right after
/// `wait_idle` returns, [`is_finished`](JoinHandle::is_finished) may still be false for an
/// instant, and awaiting the handle returns at once.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
/// use std::sync::Arc;
///
/// /// Counts its drops; panics in `drop` if asked to.
/// struct Guard {
///     drops: Arc<AtomicUsize>,
///     panics: bool,
/// }
///
/// impl Drop for Guard {
///     fn drop(&mut self) {
///         self.drops.fetch_add(1, SeqCst);
///         if self.panics {
///             panic!("guard dropped");
///         }
///     }
/// }
///
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let drops = Arc::new(AtomicUsize::new(0));
/// let guard = |panics| Guard { drops: drops.clone(), panics };
///
/// // Aborted while it waits: a worker drops the future, and the handle says so.
/// let g = guard(false);
/// let handle = rt.spawn(async move {
///     let _g = g;
///     std::future::pending::<()>().await
/// });
/// handle.abort();
/// assert!(handle.join().unwrap_err().is_cancelled());
/// assert_eq!(drops.load(SeqCst), 1);
///
/// // A cancelled future whose destructor panics: that panic is the task's result.
/// let g = guard(true);
/// let handle = rt.spawn(async move {
///     let _g = g;
///     std::future::pending::<()>().await
/// });
/// handle.abort();
/// let err = handle.join().unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "guard dropped");
/// assert_eq!(drops.load(SeqCst), 2);
///
/// // An output whose destructor panics, dropped by the handle's destructor: caught there.
/// let output = guard(true);
/// let handle = rt.spawn(async move { output });
/// while !handle.is_finished() {
///     std::thread::yield_now();
/// }
/// drop(handle);
/// assert_eq!(drops.load(SeqCst), 3);
///
/// // The workers survived every panic.
/// assert_eq!(rt.spawn(async { 7 }).join().unwrap(), 7);
/// ```
pub struct JoinHandle<T> {
    raw: RawTask,
    _output: PhantomData<T>,
}

// SAFETY: the handle only moves the output out (to the thread that polls it) or drops it;
// every other access goes through the task's atomic state word.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` allows only `abort` and `is_finished`, which touch nothing but the
// state word (and the scheduler, which is `Sync`).
unsafe impl<T: Send> Sync for JoinHandle<T> {}

// The handle never pins the output: it moves it out.
impl<T> Unpin for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// # Safety
    ///
    /// The caller hands over a reference to `raw` and its `JOIN_INTEREST` bit, and the
    /// task's output type is `T`.
    pub(crate) unsafe fn from_raw(raw: RawTask) -> JoinHandle<T> {
        JoinHandle {
            raw,
            _output: PhantomData,
        }
    }

    /// The task's id: the same as [`task::id()`](fn@crate::task::id) inside it, and as its
    /// row in [`Runtime::tasks`](crate::Runtime::tasks).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = rt.spawn(async { magpie::task::id() });
    /// let id = handle.id();
    /// assert_eq!(handle.join().unwrap(), id);
    /// ```
    pub fn id(&self) -> Id {
        // SAFETY: raw.rs invariant 2: the handle holds a reference; the identity is
        // immutable (raw.rs invariant 6).
        unsafe { self.raw.header() }.identity.id
    }

    /// Cancels the task: unless it has already finished, its future is dropped (on a worker,
    /// the next time it would have run) and the handle resolves to a cancelled `JoinError`.
    ///
    /// Aborting a finished task does nothing: the handle still yields its output.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// assert!(handle.join().unwrap_err().is_cancelled());
    /// ```
    pub fn abort(&self) {
        // SAFETY: raw.rs invariant 2: the handle holds a reference.
        match unsafe { self.raw.state() }.transition_to_cancelled() {
            TransitionToCancelled::DoNothing => {}
            // SAFETY: state.rs invariant 1: the RMW took a reference for a new Notified.
            TransitionToCancelled::Submit => unsafe { self.raw.schedule() },
        }
    }

    /// Whether the task has finished (with an output, cancelled, or panicked), so that
    /// awaiting the handle will not wait.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(1).build().unwrap();
    /// let handle = rt.spawn(async { 1 });
    /// while !handle.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// assert_eq!(handle.join().unwrap(), 1);
    /// ```
    pub fn is_finished(&self) -> bool {
        // SAFETY: raw.rs invariant 2: the handle holds a reference.
        unsafe { self.raw.state() }.load().is_complete()
    }

    /// Blocks the calling thread until the task finishes, and returns its output.
    ///
    /// For threads outside the pool; async code awaits the handle instead.
    ///
    /// A task that finishes while a thread waits here wakes that thread: joining thousands
    /// of short tasks one after the other pays a thread wake-up per task (about 1.4 µs each
    /// on a 2-CPU machine, BENCHMARKS.md). To wait for a whole batch whose outputs are not
    /// needed, [`Runtime::wait_idle`](crate::Runtime::wait_idle) wakes the thread once.
    ///
    /// # Panics
    ///
    /// If called on a worker thread of a magpie runtime, outside
    /// [`block_in_place`](crate::task::block_in_place): blocking a worker could deadlock
    /// (the task may be queued behind the caller on that very worker).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let handle = rt.submit(|| (1..=10).product::<u64>());
    /// assert_eq!(handle.join().unwrap(), 3_628_800);
    /// ```
    pub fn join(self) -> Result<T, JoinError> {
        crate::runtime::block_on::block_on_thread(self, "JoinHandle::join")
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// # Panics
    ///
    /// If polled again after it returned `Poll::Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A ready handle is progress: it spends a unit of the cooperative budget, so a task
        // awaiting many finished tasks in a loop still takes turns with the others.
        let coop = std::task::ready!(super::coop::poll_proceed(cx));
        let mut output = Poll::Pending;
        // SAFETY: the handle holds a reference and JOIN_INTEREST, and `output` is a
        // `Poll<Result<T, JoinError>>` with `T` the task's output type (`from_raw`).
        unsafe {
            self.raw.try_read_output(
                &mut output as *mut Poll<Self::Output> as *mut (),
                cx.waker(),
            )
        };
        if output.is_ready() {
            coop.made_progress();
        }
        output
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: the handle's reference and JOIN_INTEREST are given up here, once.
        unsafe { self.raw.drop_join_handle() }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
