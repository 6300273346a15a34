//! Loom models of the timer driver: a registration racing the driver's firing and the
//! timer's cancellation, and a registration racing the driver's close.
//!
//! The deadline is already due (0 ms), so the wall clock, which loom does not model, plays
//! no part: the driver fires whatever is filed when it looks. What the model checks is the
//! driver protocol of `driver.rs`: the waker runs at most once, a cancelled timer never
//! fires afterwards, the pending count ends at 0, and no timer is stranded: a registration
//! that the current driver may have missed tells its caller to wake someone (`Rearm`), and
//! honouring that (here, firing once more) fires it.
//!
//! The close models check "Closing" in `driver.rs`: a registration racing `close` is either
//! refused, its waker handed back unwoken, or filed before the close and woken by it; never
//! filed and left in a closed wheel. Every waker is woken or dropped exactly once, a replaced
//! one included (its reference count is back to one at the end).

use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

use super::{Driver, Rearm, Registration};
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicUsize};
use crate::time::wheel::TimerKey;
use crate::util::loom_support::{model, CountingWaker};

/// Files `waker` due at once with a driver that must accept it.
fn file(driver: &Driver, old: Option<TimerKey>, waker: Waker) -> (TimerKey, Rearm) {
    match driver.register(old, 0, waker) {
        Registration::Filed { key, rearm } => (key, rearm),
        Registration::Closed(_) => panic!("refused by an open driver"),
    }
}

/// With one due timer filed already (so that a second registration may be told `Nobody`
/// needs waking), registers a second due timer and then maybe cancels it, while another
/// thread takes the driver role, fires what is due and gives the role up.
fn register_fire_cancel(cancel: bool) {
    model(None, move || {
        let driver = Arc::new(Driver::new());
        let first = CountingWaker::new();
        let second = CountingWaker::new();
        let (_, rearm_first) = file(&driver, None, Waker::from(first.clone()));
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
        let (key, rearm) = file(&driver, None, Waker::from(second.clone()));
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
        let (first, second) = (first.wakes(), second.wakes());
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

/// With one timer filed (its waker `first`), another thread closes the driver while this one
/// files a second timer (waker `second`): a new one, or, with `refile`, the first one filed
/// again under the new waker (a `Sleep` re-polled by another task), which replaces `first`.
fn close_races_register(refile: bool) {
    model(None, move || {
        let driver = Arc::new(Driver::new());
        let first = CountingWaker::new();
        let second = CountingWaker::new();
        let (first_key, _) = file(&driver, None, Waker::from(first.clone()));
        let closer = {
            let driver = driver.clone();
            loom::thread::spawn(move || driver.close())
        };
        let old = refile.then_some(first_key);
        let filed = match driver.register(old, 0, Waker::from(second.clone())) {
            Registration::Filed { .. } => true,
            Registration::Closed(back) => {
                drop(back);
                false
            }
        };
        let woken_by_close = closer.join().unwrap();
        let (first_wakes, second_wakes) = (first.wakes(), second.wakes());
        if filed {
            assert_eq!(
                second_wakes, 1,
                "a timer filed before the close was stranded"
            );
        } else {
            assert_eq!(second_wakes, 0, "a refused timer was woken");
        }
        // The first timer: woken by the close, unless the refiling replaced it first.
        let replaced = refile && filed;
        assert_eq!(
            first_wakes,
            usize::from(!replaced),
            "the first timer's wakes"
        );
        assert_eq!(
            first_wakes + second_wakes,
            woken_by_close,
            "a wake the close did not count"
        );
        assert_eq!(driver.pending(), 0);
        // Every waker reference is gone: woken, dropped when replaced, or handed back and
        // dropped above; none is left in the wheel.
        assert_eq!(StdArc::strong_count(&first), 1, "the first waker leaked");
        assert_eq!(StdArc::strong_count(&second), 1, "the second waker leaked");
        // Closed for good: nothing is filed any more.
        let late = CountingWaker::new();
        assert!(matches!(
            driver.register(None, 0, Waker::from(late.clone())),
            Registration::Closed(_)
        ));
        assert_eq!(driver.close(), 0);
    });
}

#[test]
// The negative control: with `--cfg magpie_loom_broken` the close drains the wheel and marks
// it closed in two lock holds, and this model must find the timer filed in between.
#[cfg_attr(magpie_loom_broken, should_panic(expected = "stranded"))]
fn loom_timer_close_races_register() {
    close_races_register(false);
}

#[test]
fn loom_timer_close_races_refile() {
    close_races_register(true);
}
