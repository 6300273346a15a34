//! Which runtime the free functions (`magpie::spawn`, `magpie::time::sleep`, ...) use from
//! the calling thread: the worker's own runtime on a worker thread, the runtime whose
//! `block_on` is running on this thread, or else the global default runtime.

use std::cell::RefCell;

use super::registry::Registry;
use super::worker::WorkerThread;
use crate::sync::thread::thread_local;
use std::sync::Arc;

thread_local! {
    /// The runtimes whose `block_on` runs on this thread, innermost last.
    static ENTERED: RefCell<Vec<Arc<Registry>>> = const { RefCell::new(Vec::new()) };
}

/// The current runtime's registry (see the module docs).
pub(crate) fn current_registry() -> Arc<Registry> {
    // SAFETY: a non-null current worker is live for the duration of this call.
    if let Some(worker) = unsafe { WorkerThread::current().as_ref() } {
        return worker.registry_arc().clone();
    }
    if let Some(registry) = ENTERED.with(|entered| entered.borrow().last().cloned()) {
        return registry;
    }
    super::global::registry().clone()
}

/// Makes `registry` the current runtime of this thread until the guard drops.
pub(crate) fn enter(registry: &Arc<Registry>) -> EnterGuard {
    ENTERED.with(|entered| entered.borrow_mut().push(registry.clone()));
    EnterGuard { _private: () }
}

/// Restores the previous current runtime when dropped.
#[derive(Debug)]
pub(crate) struct EnterGuard {
    _private: (),
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let left = ENTERED.with(|entered| entered.borrow_mut().pop());
        // The registry's last handle may be this one; drop it outside the borrow.
        drop(left);
    }
}
