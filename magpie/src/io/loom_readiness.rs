//! Loom models of the readiness word (`readiness.rs`, invariants 1 to 5): a driver turn
//! racing a task's poll, a stale clear racing newer readiness, a stale event racing a slot's
//! reuse, and a shutdown racing a poll.
//!
//! The driver's side is what `Driver::turn` does per event: `set_readiness`, and `wake` if it
//! was accepted. The OS plays no part (loom does not model it): the event is given.

use std::sync::Arc as StdArc;
use std::task::{Context, Poll, Wake, Waker};

use super::{Direction, Readiness, ScheduledIo};
use crate::io::slab::{Slab, GENERATION_MASK};
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicUsize};
use crate::util::loom_support::{model, CountingWaker};

/// Polls `io` for reading with `waker`.
fn poll_read(io: &ScheduledIo, waker: &StdArc<CountingWaker>) -> Poll<super::ReadyEvent> {
    let waker = Waker::from(waker.clone());
    io.poll_ready(Direction::Read, &mut Context::from_waker(&waker))
}

/// A driver turn's dispatch of one event: record, then wake if accepted.
fn dispatch(io: &ScheduledIo, generation: u32, tick: u32, ready: Readiness) {
    if io.set_readiness(generation, GENERATION_MASK, tick, ready) {
        io.wake(generation, GENERATION_MASK, ready);
    }
}

/// Invariant 3: a turn setting readiness races a task's poll. The task either sees the
/// readiness or is woken, exactly once; never neither.
#[test]
fn loom_io_set_readiness_races_poll() {
    model(None, || {
        let io = Arc::new(ScheduledIo::new());
        let waker = CountingWaker::new();
        let driver = {
            let io = io.clone();
            loom::thread::spawn(move || dispatch(&io, 0, 1, Readiness::READABLE))
        };
        let polled = poll_read(&io, &waker);
        driver.join().unwrap();
        match polled {
            Poll::Ready(event) => assert!(event.ready.is_readable() && event.tick == 1),
            Poll::Pending => assert_eq!(waker.wakes(), 1, "neither saw nor woken"),
        }
        assert!(waker.wakes() <= 1);
    });
}

/// Invariant 2: a task clears what it saw at tick 1 while a turn sets readiness at tick 2:
/// the newer readiness survives the clear, whatever the order.
///
/// Negative control: with `--cfg magpie_loom_broken` the clear ignores the tick, and this
/// model must fail.
#[test]
#[cfg_attr(
    magpie_loom_broken,
    should_panic(expected = "cleared by a poll of tick 1")
)]
fn loom_io_stale_clear_races_new_readiness() {
    model(None, || {
        let io = Arc::new(ScheduledIo::new());
        let waker = CountingWaker::new();
        dispatch(&io, 0, 1, Readiness::READABLE);
        let Poll::Ready(seen) = poll_read(&io, &waker) else {
            panic!("readable at tick 1");
        };
        let driver = {
            let io = io.clone();
            loom::thread::spawn(move || dispatch(&io, 0, 2, Readiness::READABLE))
        };
        // The read got WouldBlock: clear what the poll saw.
        let _ = io.clear_readiness(seen);
        driver.join().unwrap();
        match poll_read(&io, &waker) {
            Poll::Ready(event) => assert_eq!(event.tick, 2),
            Poll::Pending => panic!("the readiness of tick 2 was cleared by a poll of tick 1"),
        }
    });
}

/// Invariants 1 and 4: an event for a slot's old owner is dispatched (from the driver's
/// lock-free copy of the slots) while the slot is freed and handed to a new owner, who
/// polls. The new owner never sees the readiness nor is woken by it.
///
/// Negative control: with `--cfg magpie_loom_broken` `set_readiness` skips the generation
/// check, and this model must fail.
#[test]
#[cfg_attr(
    magpie_loom_broken,
    should_panic(expected = "the new owner saw the old owner's readiness")
)]
fn loom_io_stale_generation_races_slot_reuse() {
    model(None, || {
        let slab = Slab::new();
        let old = slab.allocate().unwrap();
        let stale = old.generation;
        let driver = {
            let io = old.io.clone();
            loom::thread::spawn(move || dispatch(&io, stale, 1, Readiness::READABLE))
        };
        slab.free(old.index).drop_contained();
        let new = slab.allocate().unwrap();
        assert_eq!(new.index, old.index, "reused");
        assert_ne!(new.generation, stale);
        let waker = CountingWaker::new();
        assert!(
            poll_read(&new.io, &waker).is_pending(),
            "the new owner saw the old owner's readiness"
        );
        driver.join().unwrap();
        assert_eq!(
            waker.wakes(),
            0,
            "the new owner was woken for the old owner"
        );
        assert!(
            poll_read(&new.io, &waker).is_pending(),
            "the new owner saw the old owner's readiness (after the race)"
        );
    });
}

/// Invariant 5: a shutdown races a poll: the poll either sees the shutdown or is woken by it.
#[test]
fn loom_io_shutdown_races_poll() {
    model(None, || {
        let io = Arc::new(ScheduledIo::new());
        let waker = CountingWaker::new();
        let closer = {
            let io = io.clone();
            loom::thread::spawn(move || io.shutdown().wake_all())
        };
        let polled = poll_read(&io, &waker);
        let woken = closer.join().unwrap();
        match polled {
            Poll::Ready(event) => assert!(event.shutdown && event.ready.is_error()),
            Poll::Pending => assert_eq!((woken, waker.wakes()), (1, 1)),
        }
        assert!(matches!(poll_read(&io, &waker), Poll::Ready(e) if e.shutdown));
    });
}
