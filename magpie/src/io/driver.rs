//! The I/O driver: one `mio::Poll`, and who may turn it.
//!
//! [`Driver`] is the part only its holder touches (the `mio::Poll`, the event buffer, the tick,
//! the lock-free copy of the slab's slots): [`Driver::turn`] takes `&mut self`, so one thread
//! at a time waits in the OS and dispatches. [`Handle`] is the part every thread shares:
//! registering and deregistering sources (a `mio::Registry` may be used from any thread while
//! another waits in `Poll::poll`), waking a blocked turn ([`Handle::unpark`], the `mio::Waker`)
//! and shutting down.
//!
//! A turn polls the OS, bumps the tick, and for each event decodes the token (slot index,
//! generation: `slab.rs`), looks the slot up in its copy of the slab (refreshing the copy
//! under the slab's lock only when the index is new to it), records the readiness
//! ([`ScheduledIo::set_readiness`], refused for a stale generation) and wakes the slot's
//! waiters ([`ScheduledIo::wake`]), each waker after every lock and in a panic boundary.
//!
//! Errors from the OS (a failed `epoll_ctl`, an `EINTR` from `epoll_wait`) are returned to
//! the caller; nothing here panics on them.

use std::io;
use std::task::{Context, Poll};
use std::time::Duration;

use mio::event::Source;
use mio::{Events, Interest, Token};

use super::readiness::{Direction, Readiness, ReadyEvent, ScheduledIo, WakeList};
use super::slab::{self, AllocError, Slab};
use crate::sync::Arc;

/// The token of the driver's `mio::Waker`; names no slot (`slab::MAX_SLOTS`).
const WAKER_TOKEN: Token = Token(usize::MAX);

/// Events read from the OS per turn; the kernel keeps the rest on its ready list for the next
/// turn. 1024, as tokio: one turn handles a busy server's burst without holding its thread
/// for long.
const EVENTS_PER_TURN: usize = 1024;

/// The holder's part of the driver (module docs). Dropping it shuts the driver down
/// ([`Handle::shutdown`]): nobody would turn it again, so every waiter gets `Err` rather than
/// waiting for good.
#[derive(Debug)]
pub(crate) struct Driver {
    poll: mio::Poll,
    events: Events,
    /// Bumped by every turn; readiness set by a turn carries it (`readiness.rs`, invariant 2).
    /// Wraps (`README.md`, "Why wrap-around is safe").
    tick: u32,
    /// The slab's slots as of the last refresh (`slab.rs`, "Allocation and dispatch").
    slots: Vec<Arc<ScheduledIo>>,
    /// Events dropped for a stale generation (a freed slot's), for statistics once wired.
    stale: u64,
    shared: Arc<Shared>,
}

/// The shared part of the driver, behind every [`Handle`] and [`Registration`].
struct Shared {
    registry: mio::Registry,
    waker: mio::Waker,
    slab: Slab,
    /// Called after each registration: makes sure some worker will wait for the new
    /// source's readiness (`Registry::hand_off_driver`). Set once, by the runtime.
    on_register: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("slab", &self.slab)
            .field("on_register", &self.on_register.get().is_some())
            .finish_non_exhaustive()
    }
}

/// Registers sources, wakes the driver, shuts it down; clone it freely.
#[derive(Clone, Debug)]
pub(crate) struct Handle {
    shared: Arc<Shared>,
}

/// One registered source's readiness. Dropping it frees its slot (the generation moves on, so
/// no later event reaches the slot's next owner); deregister the source from mio first with
/// [`Handle::deregister`], or mio keeps reporting it to a token that matches nothing.
#[derive(Debug)]
pub(crate) struct Registration {
    io: Arc<ScheduledIo>,
    index: usize,
    shared: Arc<Shared>,
}

impl Driver {
    /// A driver and the handle that registers with it.
    pub(crate) fn new() -> io::Result<(Driver, Handle)> {
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = mio::Waker::new(poll.registry(), WAKER_TOKEN)?;
        let shared = Arc::new(Shared {
            registry,
            waker,
            slab: Slab::new(),
            on_register: std::sync::OnceLock::new(),
        });
        let driver = Driver {
            poll,
            events: Events::with_capacity(EVENTS_PER_TURN),
            tick: 0,
            slots: Vec::new(),
            stale: 0,
            shared: shared.clone(),
        };
        Ok((driver, Handle { shared }))
    }

    /// Waits for readiness at most `timeout` (`None`: until an event or [`Handle::unpark`];
    /// `Some(ZERO)`: not at all), then records what the OS reported and moves the wakers of
    /// the sources it made ready onto `wakers`, for the caller to wake after the turn (see
    /// [`WakeList`]). Returns how many events reached a live registration (the waker's and
    /// stale ones are not counted).
    ///
    /// An `Err` is the OS's: `ErrorKind::Interrupted` (a signal ended the wait) is a turn
    /// that delivered nothing, and the caller may simply turn again.
    pub(crate) fn turn(
        &mut self,
        timeout: Option<Duration>,
        wakers: &mut WakeList,
    ) -> io::Result<usize> {
        self.poll.poll(&mut self.events, timeout)?;
        self.tick = self.tick.wrapping_add(1);
        let mut delivered = 0;
        for event in self.events.iter() {
            let token = event.token();
            if token == WAKER_TOKEN {
                // Only here to end the wait.
                continue;
            }
            let (index, generation) = slab::decode(token.0);
            if index >= self.slots.len() {
                // A slot allocated since the last refresh: one lock per growth, not per event.
                self.shared.slab.refresh(&mut self.slots);
            }
            let Some(io) = self.slots.get(index) else {
                continue; // names no slot: not ours
            };
            let ready = readiness_of(event);
            if io.set_readiness(generation, slab::GENERATION_MASK, self.tick, ready) {
                delivered += 1;
                io.take_wakers(generation, slab::GENERATION_MASK, ready, wakers);
            } else {
                self.stale += 1;
            }
        }
        Ok(delivered)
    }

    /// Events dropped so far because their slot had been freed (or the driver shut down).
    pub(crate) fn stale_events(&self) -> u64 {
        self.stale
    }

    /// A turn whose wakers are woken at once (tests that turn the driver by hand).
    #[cfg(test)]
    pub(crate) fn turn_and_wake(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let mut wakers = WakeList::default();
        let delivered = self.turn(timeout, &mut wakers)?;
        wakers.wake_all();
        Ok(delivered)
    }

    /// The tick of the last turn (tests).
    #[cfg(test)]
    pub(crate) fn tick(&self) -> u32 {
        self.tick
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Wakers run here, contained, with no lock held (`Handle::shutdown`).
        Handle {
            shared: self.shared.clone(),
        }
        .shutdown();
    }
}

/// The readiness bits of a mio event.
fn readiness_of(event: &mio::event::Event) -> Readiness {
    let mut ready = Readiness::EMPTY;
    for (is, bit) in [
        (event.is_readable(), Readiness::READABLE),
        (event.is_writable(), Readiness::WRITABLE),
        (event.is_read_closed(), Readiness::READ_CLOSED),
        (event.is_write_closed(), Readiness::WRITE_CLOSED),
        (event.is_error(), Readiness::ERROR),
    ] {
        if is {
            ready = ready.union(bit);
        }
    }
    ready
}

impl Handle {
    /// Registers `source` for `interest` with a fresh slot. Fails with the OS's error, with
    /// `Other` if the driver shut down, or with `OutOfMemory` past `slab::MAX_SLOTS` live
    /// registrations.
    pub(crate) fn register(
        &self,
        source: &mut impl Source,
        interest: Interest,
    ) -> io::Result<Registration> {
        let allocated = match self.shared.slab.allocate() {
            Ok(allocated) => allocated,
            Err(AllocError::Shutdown) => return Err(shut_down()),
            Err(AllocError::Full) => {
                return Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "too many I/O sources registered with one driver",
                ))
            }
        };
        let token = Token(allocated.token());
        let registration = Registration {
            io: allocated.io,
            index: allocated.index,
            shared: self.shared.clone(),
        };
        // On failure `registration` drops here and frees the slot.
        self.shared.registry.register(source, token, interest)?;
        if let Some(on_register) = self.shared.on_register.get() {
            on_register();
        }
        Ok(registration)
    }

    /// Sets what runs after each registration (the runtime's driver hand-off check). Once;
    /// later calls are ignored.
    pub(crate) fn set_on_register(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.shared.on_register.set(f);
    }

    /// Deregisters `source` from mio and frees its slot. The slot is freed even if mio
    /// refuses (the registration is consumed); the OS's error is returned.
    pub(crate) fn deregister(
        &self,
        source: &mut impl Source,
        registration: Registration,
    ) -> io::Result<()> {
        let result = self.shared.registry.deregister(source);
        drop(registration);
        result
    }

    /// Ends a turn blocked in the OS now, or the next one at once (the `mio::Waker`). Any
    /// thread.
    pub(crate) fn unpark(&self) -> io::Result<()> {
        self.shared.waker.wake()
    }

    /// Shuts the driver down: no later registration succeeds, and every registration's
    /// pending and later polls return `Err` (`readiness.rs`, invariant 5). Returns how many
    /// waiting tasks were woken. Idempotent.
    pub(crate) fn shutdown(&self) -> usize {
        let woken = self.shared.slab.shutdown();
        // After the slab's lock: waking is user code.
        woken.into_iter().map(|w| w.wake_all()).sum()
    }

    /// Registrations alive.
    pub(crate) fn live(&self) -> usize {
        self.shared.slab.live()
    }
}

fn shut_down() -> io::Error {
    io::Error::other("the I/O driver has shut down")
}

impl Registration {
    /// Polls for readiness in `direction`; see [`ScheduledIo::poll_ready`]. `Err` once the
    /// driver has shut down.
    pub(crate) fn poll_ready(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<ReadyEvent>> {
        self.io.poll_ready(direction, cx).map(|event| {
            if event.shutdown {
                Err(shut_down())
            } else {
                Ok(event)
            }
        })
    }

    /// The readiness in `direction` now, without storing a waker (the `try_*` operations):
    /// `None` if there is none, `Err` once the driver has shut down.
    pub(crate) fn try_ready(&self, direction: Direction) -> Option<io::Result<ReadyEvent>> {
        self.io.ready_event(direction).map(|event| {
            if event.shutdown {
                Err(shut_down())
            } else {
                Ok(event)
            }
        })
    }

    /// Clears what `event` saw, unless a later turn set readiness since; see
    /// [`ScheduledIo::clear_readiness`].
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) -> bool {
        self.io.clear_readiness(event)
    }

    /// The mio token this registration was registered under.
    #[cfg(test)]
    pub(crate) fn token(&self) -> Token {
        Token(slab::token(
            self.index,
            self.io.generation() & slab::GENERATION_MASK,
        ))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let woken = self.shared.slab.free(self.index);
        // After the slab's lock (released by `free`): dropping wakers is user code.
        woken.drop_contained();
    }
}
