//! A model of the I/O driver for the shuttle scenarios (`tests/shuttle.rs`), built only under
//! `cfg(shuttle)`, where there is no OS to poll.
//!
//! It has the crate-private surface the runtime uses of the real one (`mod.rs`'s `IoDriver`
//! and `driver.rs`'s `Handle`), so under shuttle the workers take exactly the paths of the
//! real build: the holder of the driver role parks *in* [`IoDriver::turn`] (D1), every wake of
//! it goes through [`Handle::unpark`] (D2), busy workers turn it without blocking at
//! maintenance while a source is registered (D3), and a registration runs the runtime's
//! hand-off check (D4) (sleep/README.md, "The driver role"). Everything here is built on
//! `crate::sync`, so every lock is a scheduling point of the checker.
//!
//! # What is modelled
//!
//! * *The kernel's ready list*: [`FakeSource::fire`], from any thread, marks the source's
//!   event pending and ends a blocked turn, as readiness on a real file descriptor ends
//!   `epoll_wait`. It never wakes a task itself: readiness reaches tasks only through a turn.
//! * *The waker's kept event* (mio's eventfd): [`Handle::unpark`] sets a flag that the next
//!   turn consumes, so an unpark before the wait ends the wait at once, and is not lost.
//! * *A turn*: blocks until an event is pending or the flag is set (unless its timeout is
//!   zero: then it never blocks), consumes both, marks each pending source ready, and wakes
//!   the sources' wakers after the lock is released, each in a panic boundary. Any other
//!   timeout is ignored, as the parker ignores its own under shuttle (`sleep/parker.rs`):
//!   shuttle does not model time, and a wait that only a timeout ends is then a deadlock,
//!   which shuttle reports.
//! * *Shutdown*: no registration succeeds afterwards, and every wait for readiness ends with
//!   `Err`, as in the real driver (`readiness.rs`, invariant 5).
//!
//! What is not: readiness directions, clearing readiness, generations and ticks (a fake
//! source's readiness, once delivered, stays), the event buffer's bound.

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::readiness::WakeList;
use crate::sync::atomic::*;
use crate::sync::{lock, wait_until, Arc, AtomicUsize, Condvar, Mutex};
use crate::util::unwind::{drop_quietly, halt_unwinding};

/// A runtime's I/O driver, modelled: the part the holder of the driver role turns, and the
/// [`Handle`] everyone else registers with (as `mod.rs`'s `IoDriver`).
#[derive(Debug)]
pub(crate) struct IoDriver {
    handle: Handle,
}

/// Registers sources, wakes the driver, shuts it down; clone it freely (as `driver.rs`'s
/// `Handle`).
#[derive(Clone, Debug)]
pub(crate) struct Handle {
    shared: Arc<Shared>,
}

/// Behind every [`Handle`] and [`FakeSource`].
struct Shared {
    state: Mutex<State>,
    /// A blocked turn waits here for an event or an unpark.
    turn_ended: Condvar,
    /// Registered sources, kept in step with `State::sources` under its lock, and read
    /// without it (the runtime's `io_live`, in its hand-off check and at maintenance).
    live: AtomicUsize,
}

/// The driver's state; no user code runs under its lock (wakers leave it first).
#[derive(Default)]
struct State {
    /// The waker's kept event: set by `unpark`, consumed by the next turn.
    unparked: bool,
    /// A turn is in progress (the real `IoDriver` `try_lock`s the driver for the same check).
    turning: bool,
    shutdown: bool,
    /// By source id; a freed slot is reused (a `Vec`, not a hash map, so that every
    /// execution with the same schedule wakes in the same order: shuttle replays schedules).
    sources: Vec<Option<SourceState>>,
    /// Called after each registration: the runtime's hand-off check. Set once.
    on_register: Option<std::sync::Arc<dyn Fn() + Send + Sync>>,
}

#[derive(Default)]
struct SourceState {
    /// Fired, not yet taken by a turn (on the kernel's ready list).
    pending: bool,
    /// Taken by a turn: `readable` completes from now on.
    ready: bool,
    /// The task waiting in `readable`, if any.
    waker: Option<Waker>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("live", &self.live.load(Relaxed))
            .finish_non_exhaustive()
    }
}

impl IoDriver {
    /// A fresh driver. Never fails; the `Result` is the real one's (a `Poll` or an eventfd
    /// the OS refuses).
    pub(crate) fn new() -> io::Result<IoDriver> {
        Ok(IoDriver {
            handle: Handle {
                shared: Arc::new(Shared {
                    state: Mutex::new(State::default()),
                    turn_ended: Condvar::new(),
                    live: AtomicUsize::new(0),
                }),
            },
        })
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// One turn by the holder of the driver role (module docs, "A turn"), which wakes
    /// `wakers` after it (as the real driver's caller does, `io::WakeList`). Returns the
    /// events delivered to live sources.
    pub(crate) fn turn(&self, timeout: Option<Duration>, wakers: &mut WakeList) -> usize {
        let shared = &*self.handle.shared;
        let mut state = lock(&shared.state);
        // A failure here is a finding: two workers held the role at once.
        assert!(!state.turning, "two holders of the driver role");
        if timeout != Some(Duration::ZERO) {
            state.turning = true;
            while !state.unparked && !state.sources.iter().flatten().any(|s| s.pending) {
                state = wait_until(&shared.turn_ended, state, None);
            }
            state.turning = false;
        }
        state.unparked = false;
        let mut delivered = 0;
        for source in state.sources.iter_mut().flatten() {
            if std::mem::take(&mut source.pending) {
                delivered += 1;
                source.ready = true;
                if let Some(waker) = source.waker.take() {
                    wakers.push(waker);
                }
            }
        }
        delivered
    }

    /// Registered sources alive now.
    pub(crate) fn live(&self) -> usize {
        self.handle.live()
    }
}

impl Handle {
    /// Ends a turn blocked now, or the next one at once (the kept event). Any thread.
    pub(crate) fn unpark(&self) -> io::Result<()> {
        let shared = &*self.shared;
        lock(&shared.state).unparked = true;
        shared.turn_ended.notify_all();
        Ok(())
    }

    /// Shuts the driver down: no later registration succeeds, and every wait for readiness,
    /// pending or later, ends with `Err`. Returns how many waiting tasks were woken.
    /// Idempotent.
    pub(crate) fn shutdown(&self) -> usize {
        let woken: Vec<Waker> = {
            let mut state = lock(&self.shared.state);
            state.shutdown = true;
            state
                .sources
                .iter_mut()
                .flatten()
                .filter_map(|s| s.waker.take())
                .collect()
        };
        let count = woken.len();
        for waker in woken {
            if let Err(payload) = halt_unwinding(|| waker.wake()) {
                drop_quietly(payload);
            }
        }
        count
    }

    /// Sets what runs after each registration (the runtime's driver hand-off check). Once;
    /// later calls are ignored.
    pub(crate) fn set_on_register(&self, f: Box<dyn Fn() + Send + Sync>) {
        let mut state = lock(&self.shared.state);
        if state.on_register.is_none() {
            state.on_register = Some(std::sync::Arc::from(f));
        }
    }

    /// Registrations alive.
    pub(crate) fn live(&self) -> usize {
        // SeqCst: the registrar's side of the hand-off's Dekker pair (`Registry::
        // hand_off_driver`: a releaser of the role loads this after its fence).
        self.shared.live.load(SeqCst)
    }

    /// Registers a new source, then runs the hook, as the real `Handle::register` does.
    fn register(&self) -> io::Result<usize> {
        let (id, on_register) = {
            let mut state = lock(&self.shared.state);
            if state.shutdown {
                return Err(io::Error::other("the I/O driver has shut down"));
            }
            let source = Some(SourceState::default());
            let id = match state.sources.iter().position(Option::is_none) {
                Some(free) => {
                    state.sources[free] = source;
                    free
                }
                None => {
                    state.sources.push(source);
                    state.sources.len() - 1
                }
            };
            // SeqCst: see `live`.
            self.shared.live.fetch_add(1, SeqCst);
            (id, state.on_register.clone())
        };
        // After the lock: the hook wakes a worker.
        if let Some(on_register) = on_register {
            on_register();
        }
        Ok(id)
    }

    fn deregister(&self, id: usize) {
        let source = {
            let mut state = lock(&self.shared.state);
            // SeqCst: see `live`.
            self.shared.live.fetch_sub(1, SeqCst);
            state.sources[id].take()
        };
        // After the lock: dropping a waker is user code.
        drop_quietly(source.and_then(|s| s.waker));
    }

    /// Marks `id`'s event pending (the kernel's ready list) and ends a blocked turn, as
    /// readiness on a real descriptor ends `epoll_wait`.
    fn fire(&self, id: usize) {
        let shared = &*self.shared;
        if let Some(source) = lock(&shared.state).sources[id].as_mut() {
            source.pending = true;
        }
        shared.turn_ended.notify_all();
    }

    fn poll_readable(&self, id: usize, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let old = {
            let mut state = lock(&self.shared.state);
            if state.shutdown {
                return Poll::Ready(Err(io::Error::other("the I/O driver has shut down")));
            }
            let source = state.sources[id].as_mut().expect("a registered source");
            if source.ready {
                return Poll::Ready(Ok(()));
            }
            source.waker.replace(cx.waker().clone())
        };
        // After the lock: dropping a waker is user code.
        drop_quietly(old);
        Poll::Pending
    }
}

/// A pretend I/O source for the shuttle scenarios (`tests/shuttle.rs`): registered with the
/// current runtime's (modelled) I/O driver, it counts as a live source, so the runtime keeps
/// a worker waiting in the driver for it (sleep/README.md, "The driver role"). Its readiness
/// comes from [`fire`](FakeSource::fire), from any thread, and reaches a task waiting in
/// [`readable`](FakeSource::readable) only through a driver turn, as a real socket's would.
/// Dropping it deregisters it.
///
/// Only under `cfg(shuttle)`, and not part of magpie's API.
#[derive(Debug)]
pub struct FakeSource {
    handle: Handle,
    id: usize,
}

impl FakeSource {
    /// Registers a new source with the current runtime's I/O driver (a worker's own
    /// runtime, else the one whose `block_on` runs on this thread, else the global one), and
    /// runs the runtime's driver hand-off check, as any registration does.
    ///
    /// # Errors
    ///
    /// If the runtime has shut down its driver.
    pub fn new() -> io::Result<FakeSource> {
        let handle = crate::runtime::handle::DriverHandle::current().io().clone();
        let id = handle.register()?;
        Ok(FakeSource { handle, id })
    }

    /// Completes once a driver turn has delivered an event fired for this source (at once
    /// if one already has); `Err` once the driver has shut down.
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| self.handle.poll_readable(self.id, cx)).await
    }

    /// Makes this source ready, as the kernel would: the event waits on the driver's ready
    /// list, and ends a turn blocked in the driver. Wakes no task itself. Any thread.
    pub fn fire(&self) {
        self.handle.fire(self.id);
    }
}

impl Drop for FakeSource {
    fn drop(&mut self) {
        self.handle.deregister(self.id);
    }
}
