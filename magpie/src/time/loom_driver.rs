//! Loom model of the timer driver: a registration racing the driver's firing and the
//! timer's cancellation.
//!
//! The deadline is already due (0 ms), so the wall clock, which loom does not model, plays
//! no part: the driver fires whatever is filed when it looks. What the model checks is the
//! driver protocol of `driver.rs`: the waker runs at most once, a cancelled timer never
//! fires afterwards, the pending count ends at 0, and no timer is stranded: a registration
//! that the current driver may have missed tells its caller to wake someone (`Rearm`), and
//! honouring that (here, firing once more) fires it.

use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

use super::{Driver, Rearm};
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicUsize};
use crate::util::loom_support::model;

/// Counts its wakes.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: StdArc<Self>) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// With one due timer filed already (so that a second registration may be told `Nobody`
/// needs waking), registers a second due timer and then maybe cancels it, while another
/// thread takes the driver role, fires what is due and gives the role up.
fn register_fire_cancel(cancel: bool) {
    model(None, move || {
        let driver = Arc::new(Driver::new());
        let first = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let second = StdArc::new(CountingWaker(AtomicUsize::new(0)));
        let (_, rearm_first) = driver.register(None, 0, Waker::from(first.clone()));
        assert!(
            !matches!(rearm_first, Rearm::Nobody),
            "nobody would fire it"
        );
        let firer = {
            let driver = driver.clone();
            loom::thread::spawn(move || {
                assert!(driver.try_drive(0), "the only driver");
                let fired = driver.fire_due();
                driver.release();
                fired
            })
        };
        let (key, rearm) = driver.register(None, 0, Waker::from(second.clone()));
        if cancel {
            driver.deregister(key);
        }
        let fired_by_driver = firer.join().unwrap();
        // Honour the rearm as a worker would: whoever is woken fires what is due. `Nobody`
        // promises the driver's firing covers this timer.
        let fired_after = match rearm {
            Rearm::Nobody => 0,
            Rearm::Anyone | Rearm::Driver(_) => driver.fire_due(),
        };
        let (first, second) = (first.0.load(Relaxed), second.0.load(Relaxed));
        assert_eq!(first, 1, "the first timer fires exactly once");
        assert_eq!(
            first + second,
            fired_by_driver + fired_after,
            "a wake without a fire"
        );
        assert!(second <= 1, "fired twice");
        if !cancel {
            assert_eq!(second, 1, "the second timer was stranded ({rearm:?})");
        }
        assert_eq!(driver.pending(), 0);
    });
}

#[test]
// The negative control: with `--cfg magpie_loom_broken` the driver stores its next deadline
// after unlocking the wheel, and this model must find the stranded timer.
#[cfg_attr(magpie_loom_broken, should_panic(expected = "stranded"))]
fn loom_timer_register_races_fire() {
    register_fire_cancel(false);
}

#[test]
fn loom_timer_register_races_fire_and_cancel() {
    register_fire_cancel(true);
}
