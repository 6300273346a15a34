//! Panic plumbing: catching user panics, and aborting when a runtime invariant would break.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// A caught panic payload.
pub(crate) type Payload = Box<dyn Any + Send + 'static>;

/// Runs `f`, returning its panic payload instead of unwinding.
#[inline]
pub(crate) fn halt_unwinding<F: FnOnce() -> R, R>(f: F) -> Result<R, Payload> {
    panic::catch_unwind(AssertUnwindSafe(f))
}

/// Resumes a panic caught by [`halt_unwinding`].
#[cold]
pub(crate) fn resume_unwinding(payload: Payload) -> ! {
    panic::resume_unwind(payload)
}

/// Aborts the process if dropped while armed: guards regions where unwinding would leave the
/// runtime's state inconsistent (a job half-published, a latch never set). Disarm with
/// [`std::mem::forget`] once the region ends.
#[derive(Debug)]
pub(crate) struct AbortIfPanic;

impl Drop for AbortIfPanic {
    #[cold]
    fn drop(&mut self) {
        eprintln!("magpie: unexpected panic inside the runtime; aborting");
        std::process::abort();
    }
}
