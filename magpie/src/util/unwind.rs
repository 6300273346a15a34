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

/// Drops a value nobody will read: the losing payload of two panics, the result of a `join`
/// half whose partner panicked, a scope body's value when a spawn panicked.
///
/// A panic from its destructor is caught and thrown away. This runs where another panic is
/// about to be resumed, or inside the runtime's bookkeeping (a job that must still set its
/// latch): letting the destructor's panic out would replace the panic the caller should see,
/// or skip the bookkeeping, or, raised while the first panic unwinds, abort the process. The
/// destructor's own payload may panic when dropped too: it gets one more guarded drop, and is
/// leaked if that panics as well (a recursion of bombs has to stop somewhere).
#[cold]
pub(crate) fn drop_quietly<T>(value: T) {
    if let Err(nested) = halt_unwinding(move || drop(value)) {
        if let Err(again) = halt_unwinding(move || drop(nested)) {
            std::mem::forget(again);
        }
    }
}

/// Drops a panic payload nobody will read; see [`drop_quietly`].
#[cold]
pub(crate) fn drop_payload(payload: Payload) {
    drop_quietly(payload)
}

/// Aborts the process if dropped while armed: guards regions where unwinding would leave the
/// runtime's state inconsistent (a job half-published, a latch never set). Disarm with
/// [`std::mem::forget`] once the region ends.
#[derive(Debug)]
pub(crate) struct AbortIfPanic;

impl Drop for AbortIfPanic {
    #[cold]
    fn drop(&mut self) {
        // `writeln!`, not `eprintln!`: a panic while printing here, unwinding already, would
        // abort without the message; this way the abort below is the only way out.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "magpie: unexpected panic inside the runtime; aborting"
        );
        std::process::abort();
    }
}
