//! What a runtime does around its tasks' lives besides running them: the spawn and
//! terminate hooks ([`Builder::on_task_spawn`], [`Builder::on_task_terminate`]) and the
//! response to a panic nobody will see ([`UnhandledPanic`]).
//!
//! # Where the hooks run, and what guards them
//!
//! The spawn hook runs on the spawning thread, after the task is made and before it is
//! queued; the terminate hook on the thread that completes the task (its worker, a blocking
//! thread, or the thread dropping the runtime for the tasks a shutdown cancels), before the
//! task leaves the live-task list, so that [`Runtime::wait_idle`] returns only after every terminate hook of
//! the tasks it waited for has run. Both are user code called from the runtime's own paths,
//! where a panic must not escape (STYLE.md rule 16): each call is wrapped in
//! `halt_unwinding` and the payload dropped with `drop_payload`, so a panicking hook costs
//! the hook's own work and nothing else; the spawn goes on, the task completes.
//!
//! # Unhandled panics
//!
//! A panic is *unhandled* when the task finishes with it (its `poll` panicked, or its
//! cancelled future's destructor did) and its `JoinHandle` is gone at that moment: dropped
//! before the task finished, or during the poll that panicked. A handle dropped *after* the
//! task finished had the error delivered to it and chose not to read it: that panic is
//! handled (dropped with the handle). With [`UnhandledPanic::ShutdownRuntime`], the first
//! unhandled panic shuts the runtime down: every live task is cancelled and spawns are
//! refused from then on, as in [`Runtime`]'s drop (the workers stay until the runtime is
//! dropped), and the payload is kept for [`Runtime::block_on`], which resumes it. Tokio's
//! option of the same name also fires for a panic whose handle is still held; here a held
//! handle gets the panic as its `JoinError`, and the runtime runs on.
//!
//! [`Builder::on_task_spawn`]: crate::Builder::on_task_spawn
//! [`Builder::on_task_terminate`]: crate::Builder::on_task_terminate
//! [`Runtime`]: crate::Runtime
//! [`Runtime::wait_idle`]: crate::Runtime::wait_idle
//! [`Runtime::block_on`]: crate::Runtime::block_on

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::Relaxed;
use crate::sync::{lock, Mutex, StaticAtomicU64};
use crate::task::raw::Header;
use crate::task::TaskMeta;
use crate::util::unwind::{drop_payload, halt_unwinding, resume_unwinding, Payload};

/// What a runtime does when a task panics and nobody holds its `JoinHandle`
/// ([`Builder::unhandled_panic`](crate::Builder::unhandled_panic)).
///
/// # Examples
///
/// ```
/// use magpie::UnhandledPanic;
///
/// let rt = magpie::Runtime::builder()
///     .worker_threads(1)
///     .unhandled_panic(UnhandledPanic::ShutdownRuntime)
///     .build()
///     .unwrap();
/// drop(rt.spawn(async { panic!("nobody is listening") }));
/// let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
///     rt.block_on(std::future::pending::<()>())
/// }));
/// let payload = caught.unwrap_err();
/// assert_eq!(*payload.downcast::<&str>().unwrap(), "nobody is listening");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnhandledPanic {
    /// The panic is dropped; the runtime runs on (the default, as tokio's).
    #[default]
    Ignore,
    /// The runtime shuts down: every live task is cancelled, spawns are refused, and
    /// [`Runtime::block_on`](crate::Runtime::block_on) (a running one, or the next one)
    /// resumes the panic's payload on its caller. Later `block_on` calls panic with a
    /// message saying why.
    ShutdownRuntime,
}

/// A task hook: user code called with a task's [`TaskMeta`].
#[derive(Clone)]
pub(crate) struct TaskHook(Arc<dyn Fn(&TaskMeta<'_>) + Send + Sync>);

impl TaskHook {
    pub(crate) fn new(f: impl Fn(&TaskMeta<'_>) + Send + Sync + 'static) -> TaskHook {
        TaskHook(Arc::new(f))
    }

    /// Calls the hook for the task `header`, catching its panic (module docs).
    #[cold]
    fn call(&self, header: &Header) {
        if let Err(payload) = halt_unwinding(|| (self.0)(&TaskMeta::new(header))) {
            drop_payload(payload);
        }
    }
}

impl fmt::Debug for TaskHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TaskHook")
    }
}

/// The hooks and the unhandled-panic response of one runtime.
#[derive(Debug, Default)]
pub(crate) struct TaskHooks {
    pub(crate) on_spawn: Option<TaskHook>,
    pub(crate) on_terminate: Option<TaskHook>,
    pub(crate) unhandled_panic: UnhandledPanic,
    /// The unhandled-panic state; locked only on unhandled panics and by `block_on` polls
    /// under `ShutdownRuntime`.
    tripped: Mutex<Tripped>,
}

/// The unhandled-panic state, under its lock.
#[derive(Default)]
struct Tripped {
    /// The first unhandled panic's payload, until a `block_on` takes it.
    payload: Option<Payload>,
    /// Whether an unhandled panic shut the runtime down.
    tripped: bool,
    /// The `block_on` calls waiting on this runtime: each one's key (`WatchPanics::key`)
    /// and its thread's waker.
    waiters: Vec<(u64, Waker)>,
}

impl fmt::Debug for Tripped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tripped")
            .field("tripped", &self.tripped)
            .field("waiters", &self.waiters.len())
            .finish_non_exhaustive()
    }
}

impl TaskHooks {
    pub(crate) fn new(
        on_spawn: Option<TaskHook>,
        on_terminate: Option<TaskHook>,
        unhandled_panic: UnhandledPanic,
    ) -> TaskHooks {
        TaskHooks {
            on_spawn,
            on_terminate,
            unhandled_panic,
            ..TaskHooks::default()
        }
    }

    /// Whether a spawn or terminate hook is set.
    pub(crate) fn has_hooks(&self) -> bool {
        self.on_spawn.is_some() || self.on_terminate.is_some()
    }

    /// A task was made (its spawner calls this).
    #[inline]
    pub(crate) fn spawned(&self, header: &Header) {
        if let Some(hook) = &self.on_spawn {
            hook.call(header);
        }
    }

    /// A task completed (its completer calls this, before the task leaves the live list).
    #[inline]
    pub(crate) fn terminated(&self, header: &Header) {
        if let Some(hook) = &self.on_terminate {
            hook.call(header);
        }
    }

    /// An unhandled panic (module docs). Returns whether the runtime must shut its tasks
    /// down now: the first unhandled panic under `ShutdownRuntime`. The payload is kept or
    /// dropped here.
    #[cold]
    pub(crate) fn unhandled(&self, payload: Payload) -> bool {
        if self.unhandled_panic != UnhandledPanic::ShutdownRuntime {
            drop_payload(payload);
            return false;
        }
        let waiters = {
            let mut tripped = lock(&self.tripped);
            if tripped.tripped {
                // Not the first: dropped after the lock is released (a payload's destructor
                // is user code).
                drop(tripped);
                drop_payload(payload);
                return false;
            }
            tripped.tripped = true;
            tripped.payload = Some(payload);
            std::mem::take(&mut tripped.waiters)
        };
        // Outside the lock, each guarded: a waker is user-visible code (in principle another
        // executor's).
        for (_, waker) in waiters {
            if let Err(payload) = halt_unwinding(move || waker.wake()) {
                drop_payload(payload);
            }
        }
        true
    }

    /// Whether `block_on` must watch for unhandled panics.
    pub(crate) fn watches_panics(&self) -> bool {
        self.unhandled_panic == UnhandledPanic::ShutdownRuntime
    }

    /// For a `block_on`'s poll: unwinds with the unhandled panic if the runtime tripped,
    /// else leaves `waker` to be woken when it does.
    fn check(&self, key: u64, waker: &Waker) {
        let mut tripped = lock(&self.tripped);
        if tripped.tripped {
            let payload = tripped.payload.take();
            drop(tripped);
            match payload {
                Some(payload) => resume_unwinding(payload),
                None => panic!(
                    "magpie: the runtime was shut down by a task's unhandled panic \
                     (UnhandledPanic::ShutdownRuntime), whose payload an earlier `block_on` \
                     resumed"
                ),
            }
        }
        // By key, not by `Waker::will_wake`, which is best-effort: it compares vtable
        // addresses, and a clone's vtable may sit at another address than the original's
        // (under Miri it does, for std's `Wake` wakers), so the list would grow by one
        // waker per poll and `forget` would leave them all (found by running these tests
        // under Miri).
        match tripped.waiters.iter_mut().find(|(k, _)| *k == key) {
            Some((_, kept)) => {
                if !kept.will_wake(waker) {
                    // Dropped after the lock is released, as in `forget`.
                    let old = std::mem::replace(kept, waker.clone());
                    drop(tripped);
                    drop(old);
                }
            }
            None => tripped.waiters.push((key, waker.clone())),
        }
    }

    /// Forgets a `block_on`'s waker when it returns.
    fn forget(&self, key: u64) {
        let removed = {
            let mut tripped = lock(&self.tripped);
            let at = tripped.waiters.iter().position(|(k, _)| *k == key);
            at.map(|at| tripped.waiters.swap_remove(at))
        };
        // Outside the lock: a waker's destructor is user-visible code.
        drop(removed);
    }
}

/// A `block_on`'s future under [`UnhandledPanic::ShutdownRuntime`]: before each poll of the
/// inner future, resumes the runtime's unhandled panic if there is one, and leaves its waker
/// for `TaskHooks::unhandled`, so that a `block_on` waiting for something that will never
/// come (a cancelled task's channel, `pending()`) still returns.
pub(crate) struct WatchPanics<'a, F> {
    hooks: &'a TaskHooks,
    /// This `block_on`'s entry in the waiters list, unique for the process's life.
    key: u64,
    future: F,
}

impl<'a, F> WatchPanics<'a, F> {
    pub(crate) fn new(hooks: &'a TaskHooks, future: F) -> Self {
        // Relaxed: only uniqueness matters, which the RMW gives.
        static NEXT_KEY: StaticAtomicU64 = StaticAtomicU64::new(0);
        WatchPanics {
            hooks,
            key: NEXT_KEY.fetch_add(1, Relaxed),
            future,
        }
    }
}

impl<F: Future> Future for WatchPanics<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self` (and
        // `WatchPanics` has no `Drop` that would move it, nor an `Unpin` impl of its own);
        // the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // Forgets the waker if this poll ends the `block_on`: with the output, or with a
        // panic (the inner future's, or the runtime's that `check` resumes), which would
        // otherwise leave it in the list for the runtime's life.
        let leaving = Forget {
            hooks: this.hooks,
            key: this.key,
        };
        this.hooks.check(this.key, cx.waker());
        // SAFETY: as above: pinned in place for as long as `self` is.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let polled = future.poll(cx);
        if polled.is_pending() {
            std::mem::forget(leaving);
        }
        polled
    }
}

/// Calls [`TaskHooks::forget`] when dropped.
struct Forget<'a> {
    hooks: &'a TaskHooks,
    key: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.hooks.forget(self.key);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Counted;

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {}
    }

    /// A `block_on` whose future panics leaves no waker behind (the list would grow by one
    /// per such call for the runtime's life).
    #[test]
    fn a_panicking_block_on_forgets_its_waker() {
        let hooks = TaskHooks::new(None, None, UnhandledPanic::ShutdownRuntime);
        let counted = Arc::new(Counted);
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..3 {
            let mut watched = std::pin::pin!(WatchPanics::new(&hooks, async {
                panic!("the future's own panic")
            }));
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                watched.as_mut().poll(&mut cx)
            }));
            assert!(polled.is_err());
        }
        assert_eq!(lock(&hooks.tripped).waiters.len(), 0);
        drop(waker);
        assert_eq!(Arc::strong_count(&counted), 1);
    }

    /// A future that is pending for its first `polls` polls, then ready.
    fn pending_for(polls: usize) -> impl Future<Output = ()> {
        let mut left = polls;
        std::future::poll_fn(move |_| {
            if left == 0 {
                return Poll::Ready(());
            }
            left -= 1;
            Poll::Pending
        })
    }

    /// A pending poll keeps the waker (an unhandled panic must reach it); the ready one
    /// forgets it.
    #[test]
    fn a_pending_block_on_keeps_its_waker_until_ready() {
        let hooks = TaskHooks::new(None, None, UnhandledPanic::ShutdownRuntime);
        let waker = Waker::from(Arc::new(Counted));
        let mut cx = Context::from_waker(&waker);
        let mut watched = std::pin::pin!(WatchPanics::new(&hooks, pending_for(1)));
        assert!(watched.as_mut().poll(&mut cx).is_pending());
        assert_eq!(lock(&hooks.tripped).waiters.len(), 1);
        assert!(watched.as_mut().poll(&mut cx).is_ready());
        assert_eq!(lock(&hooks.tripped).waiters.len(), 0);
    }

    /// A waker whose clones carry another vtable than the original, so that
    /// `Waker::will_wake` (which compares vtable addresses) says no to a clone of itself, as
    /// std's `Wake` wakers do under Miri.
    fn waker_unlike_its_clones() -> Waker {
        use std::task::{RawWaker, RawWakerVTable};
        fn clone(data: *const ()) -> RawWaker {
            RawWaker::new(data, &CLONED)
        }
        fn noop(_: *const ()) {}
        static ORIGINAL: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        static CLONED: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        // SAFETY: the vtable's functions do nothing with the (null) data pointer, and
        // `clone` returns a waker with the same contract.
        unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &ORIGINAL)) }
    }

    /// Polled many times with the same waker, a `block_on` has one entry in the list, and
    /// none once it returns, even where `will_wake` cannot recognise the waker's clone: the
    /// entry is found by the `block_on`'s key (it was found by `will_wake`, which left one
    /// more waker per poll, and all of them once it returned).
    #[test]
    fn a_block_on_keeps_one_entry_whatever_its_waker_says_to_will_wake() {
        let hooks = TaskHooks::new(None, None, UnhandledPanic::ShutdownRuntime);
        let waker = waker_unlike_its_clones();
        assert!(!waker.will_wake(&waker.clone()));
        let mut cx = Context::from_waker(&waker);
        let mut watched = std::pin::pin!(WatchPanics::new(&hooks, pending_for(4)));
        for _ in 0..4 {
            assert!(watched.as_mut().poll(&mut cx).is_pending());
            assert_eq!(lock(&hooks.tripped).waiters.len(), 1);
        }
        assert!(watched.as_mut().poll(&mut cx).is_ready());
        assert_eq!(lock(&hooks.tripped).waiters.len(), 0);
    }
}
