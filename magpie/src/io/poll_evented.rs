//! A mio source registered with the current runtime's I/O driver: the one place that runs the
//! readiness protocol for `magpie::net` and [`AsyncFd`](super::AsyncFd).
//!
//! Every operation follows `readiness.rs`: poll for readiness in its direction, try the
//! system call, and on `WouldBlock` clear exactly the readiness that poll saw (its
//! [`ReadyEvent`], so that readiness a later driver turn set survives) and poll again, which
//! stores the task's waker if nothing is ready. [`PollEvented::poll_io`] is that loop;
//! [`PollEvented::try_io`] is one round of it that never waits.
//!
//! # Invariants
//!
//! 1. **Registered while alive.** From [`PollEvented::new`] until `drop` or
//!    [`PollEvented::into_inner`], `io` is registered with `handle`'s driver under
//!    `registration`; both fields are `Some` exactly then.
//! 2. **Deregistered before freed, closed after.** `drop` and `into_inner` deregister the
//!    source from mio *before* the registration (its slot) is dropped, and the source (its
//!    file descriptor) is closed only after both: no event for this descriptor is reported
//!    to a freed slot, and a descriptor number reused by the OS is never still in the poll set
//!    under our token. (A stale event would be harmless anyway, `readiness.rs` invariant 1;
//!    this keeps it from happening at all.)
//! 3. **One unit of budget per completed operation.** `poll_io` and `poll_ready` take one unit
//!    of the task's cooperative budget (`task/coop.rs`) before anything else and spend it
//!    only when they return `Ready`: a source that is always ready yields to the other tasks
//!    of its worker every `coop::BUDGET` operations, and an operation that waits costs
//!    nothing. The `try_*` operations do not wait and take no budget.
//! 4. **Only a `WouldBlock` clears.** Readiness is cleared only with the event of a poll whose
//!    system call then returned `WouldBlock`. Any other result (data, end of stream, an
//!    error) leaves it set: the next operation tries the system call again at once, which is
//!    what a reader after end-of-stream, or a listener after `EMFILE`, needs (the OS reports
//!    no new edge for a connection still waiting in the backlog).

use std::fmt;
use std::io;
use std::task::{ready, Context, Poll};

use mio::event::Source;
use mio::Interest;

use super::driver::{Handle, Registration};
use super::readiness::{Direction, ReadyEvent};
use crate::task::coop;

/// A mio source registered with a runtime's I/O driver (module docs).
pub(crate) struct PollEvented<E: Source> {
    /// The source; `None` only inside `drop` and `into_inner` (invariant 1).
    io: Option<E>,
    /// Its readiness; `None` only inside `drop` and `into_inner` (invariant 1).
    registration: Option<Registration>,
    /// The driver `io` is registered with, for deregistering.
    handle: Handle,
}

impl<E: Source> PollEvented<E> {
    /// Registers `io` for reading and writing with the current runtime's driver
    /// (`io::current_handle`).
    pub(crate) fn new(io: E) -> io::Result<PollEvented<E>> {
        PollEvented::with_interest(io, Interest::READABLE | Interest::WRITABLE)
    }

    /// Registers `io` for `interest` with the current runtime's driver. On failure `io` is
    /// dropped (closed).
    pub(crate) fn with_interest(mut io: E, interest: Interest) -> io::Result<PollEvented<E>> {
        let handle = super::current_handle();
        let registration = handle.register(&mut io, interest)?;
        Ok(PollEvented {
            io: Some(io),
            registration: Some(registration),
            handle,
        })
    }

    /// The source.
    pub(crate) fn get_ref(&self) -> &E {
        self.io
            .as_ref()
            .expect("invariant 1: registered while alive")
    }

    /// The source, mutably. Replacing it, or closing its descriptor, breaks the registration;
    /// the wrappers only hand out `&mut` for options that leave the descriptor alone.
    pub(crate) fn get_mut(&mut self) -> &mut E {
        self.io
            .as_mut()
            .expect("invariant 1: registered while alive")
    }

    fn registration(&self) -> &Registration {
        self.registration
            .as_ref()
            .expect("invariant 1: registered while alive")
    }

    /// Deregisters the source and hands it back, with the result of the deregistration (the
    /// slot is freed either way).
    pub(crate) fn into_inner(mut self) -> (E, io::Result<()>) {
        let (mut io, registration) = self.take().expect("invariant 1: registered while alive");
        // Invariant 2: deregister, then free the slot (inside `deregister`).
        let result = self.handle.deregister(&mut io, registration);
        (io, result)
    }

    fn take(&mut self) -> Option<(E, Registration)> {
        Some((self.io.take()?, self.registration.take()?))
    }

    /// Polls for readiness in `direction`, spending one unit of budget when ready (invariant
    /// 3). `Err` once the driver has shut down (the runtime is gone).
    pub(crate) fn poll_ready(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<ReadyEvent>> {
        let coop = ready!(coop::poll_proceed(cx));
        let event = ready!(self.registration().poll_ready(direction, cx));
        coop.made_progress();
        Poll::Ready(event)
    }

    /// Polls for readiness in either direction (a waiter for both stores its waker in both
    /// slots), spending one unit of budget when ready. The read side is looked at first.
    pub(crate) fn poll_ready_either(&self, cx: &mut Context<'_>) -> Poll<io::Result<ReadyEvent>> {
        let coop = ready!(coop::poll_proceed(cx));
        let registration = self.registration();
        let event = match registration.poll_ready(Direction::Read, cx) {
            Poll::Ready(event) => event,
            Poll::Pending => ready!(registration.poll_ready(Direction::Write, cx)),
        };
        coop.made_progress();
        Poll::Ready(event)
    }

    /// Clears what `event` saw, after its operation got `WouldBlock` (invariant 4).
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) {
        // `false` means a later turn set readiness since: it stays, and the next poll sees it.
        let _ = self.registration().clear_readiness(event);
    }

    /// Runs `op` once readiness in `direction` allows, until it does not return `WouldBlock`
    /// (or `Interrupted`), and returns what it returned: the loop of the module docs.
    pub(crate) fn poll_io<R>(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&E) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        // Invariant 3: one unit for the whole operation, given back (by the drop) if it waits.
        let coop = ready!(coop::poll_proceed(cx));
        loop {
            let event = ready!(self.registration().poll_ready(direction, cx))?;
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_readiness(event),
                // A signal interrupted the call: readiness is unchanged, try again.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                result => {
                    coop.made_progress();
                    return Poll::Ready(result);
                }
            }
        }
    }

    /// Runs `op` if readiness in `direction` is set now, without waiting and without storing
    /// a waker: `WouldBlock` if nothing is ready or `op` returns it (then clearing what was
    /// seen).
    pub(crate) fn try_io<R>(
        &self,
        direction: Direction,
        op: impl FnOnce(&E) -> io::Result<R>,
    ) -> io::Result<R> {
        self.try_io_on(self.registration().try_ready(direction), op)
    }

    /// [`PollEvented::try_io`] for readiness in either direction (the read side looked at
    /// first, as in [`PollEvented::poll_ready_either`]); a `WouldBlock` clears the direction
    /// that was used.
    pub(crate) fn try_io_either<R>(&self, op: impl FnOnce(&E) -> io::Result<R>) -> io::Result<R> {
        let registration = self.registration();
        let ready = registration
            .try_ready(Direction::Read)
            .or_else(|| registration.try_ready(Direction::Write));
        self.try_io_on(ready, op)
    }

    /// Runs `op` on what `try_ready` found, as [`PollEvented::try_io`] describes.
    fn try_io_on<R>(
        &self,
        ready: Option<io::Result<ReadyEvent>>,
        op: impl FnOnce(&E) -> io::Result<R>,
    ) -> io::Result<R> {
        let event = match ready {
            Some(event) => event?,
            None => return Err(io::ErrorKind::WouldBlock.into()),
        };
        let result = op(self.get_ref());
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.clear_readiness(event);
        }
        result
    }
}

impl<E: Source> Drop for PollEvented<E> {
    fn drop(&mut self) {
        if let Some((mut io, registration)) = self.take() {
            // Invariant 2: deregister, free the slot, then close (`io` drops last). A failure
            // leaves nothing to undo: the slot is freed regardless, and closing the
            // descriptor removes it from the poll set.
            let _ = self.handle.deregister(&mut io, registration);
        }
    }
}

impl<E: Source + fmt::Debug> fmt::Debug for PollEvented<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollEvented")
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}
