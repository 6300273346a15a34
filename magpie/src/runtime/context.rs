//! Which runtime the free functions (`magpie::spawn`, `magpie::time::sleep`, ...) use from
//! the calling thread: the worker's own runtime on a worker thread, the runtime whose
//! `block_on` is running on this thread, or else the global default runtime.
//!
//! Every access to the thread-local goes through `try_with`: user code may call
//! `magpie::spawn` (or `submit`, `join`, a timer's first poll) from another thread-local's
//! destructor, after this one is gone, and a panic there aborts the process. Such a thread
//! has no entered runtime any more, so it gets the global one, as documented.

use std::cell::RefCell;

use super::registry::Registry;
use super::worker::WorkerThread;
use crate::sync::thread::thread_local;
use std::sync::Arc;

thread_local! {
    /// The runtimes whose `block_on` runs on this thread, innermost last.
    static ENTERED: RefCell<Vec<Arc<Registry>>> = const { RefCell::new(Vec::new()) };
}

/// The current runtime's registry (see the module docs). A worker inside `block_in_place`
/// may run another runtime's `block_on`: that runtime is current until it returns.
pub(crate) fn current_registry() -> Arc<Registry> {
    // SAFETY: a non-null current worker is live for the duration of this call.
    if let Some(worker) = unsafe { WorkerThread::current().as_ref() } {
        if !worker.is_blocking() {
            return worker.registry_arc().clone();
        }
        return current_entered().unwrap_or_else(|| worker.registry_arc().clone());
    }
    if let Some(registry) = current_entered() {
        return registry;
    }
    super::global::registry().clone()
}

/// Calls `f` with the current runtime's registry (as [`current_registry`]), borrowed on a
/// worker outside `block_in_place`, where spawns from tasks come from: such a spawn writes
/// the registry's reference count only for the task's own reference, not for a clone
/// dropped at once (every worker's spawns write that one line). Elsewhere it clones, as
/// `current_registry` does: a `block_on` entered on this thread is found through a list
/// that `f` (a spawn hook is user code) may change by entering another runtime.
#[inline]
pub(crate) fn with_current_registry<R>(f: impl FnOnce(&Arc<Registry>) -> R) -> R {
    // SAFETY: a non-null current worker is live for the duration of this call, which `f`
    // is part of (the borrow does not escape it).
    if let Some(worker) = unsafe { WorkerThread::current().as_ref() } {
        if !worker.is_blocking() {
            return f(worker.registry_arc());
        }
    }
    f(&current_registry())
}

/// The innermost runtime whose `block_on` runs on this thread, if any.
fn current_entered() -> Option<Arc<Registry>> {
    ENTERED
        .try_with(|entered| entered.borrow().last().cloned())
        .ok()
        .flatten()
}

/// Whether this thread is a worker of a runtime that is shutting down, polling one of its
/// tasks. Every such task was cancelled before the shutdown told the workers to stop
/// (`Runtime::shutdown` cancels, then terminates), and is dropped when this poll returns: a
/// timer it files now would never be needed, and filing it elsewhere would start the global
/// runtime for nothing. Not inside `block_in_place`: the polling word still names the task
/// there, but what polls is a `block_on` in the closure, which must go on (its timers move
/// to the global runtime, time/sleep.rs).
pub(crate) fn in_task_of_terminating_runtime() -> bool {
    // SAFETY: a non-null current worker is live for the duration of this call.
    unsafe { WorkerThread::current().as_ref() }.is_some_and(|worker| {
        worker.is_polling_task() && !worker.is_blocking() && worker.registry().is_terminating()
    })
}

/// Makes `registry` the current runtime of this thread until the guard drops.
pub(crate) fn enter(registry: &Arc<Registry>) -> EnterGuard {
    // Torn down already (a thread-local destructor): nothing to enter, and nothing to pop.
    let entered = ENTERED
        .try_with(|entered| entered.borrow_mut().push(registry.clone()))
        .is_ok();
    EnterGuard { entered }
}

/// Restores the previous current runtime when dropped.
#[derive(Debug)]
pub(crate) struct EnterGuard {
    /// Whether `enter` pushed a registry (false during thread-local teardown).
    entered: bool,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let left = ENTERED
            .try_with(|entered| entered.borrow_mut().pop())
            .ok()
            .flatten();
        // The registry's last handle may be this one; drop it outside the borrow.
        drop(left);
    }
}
