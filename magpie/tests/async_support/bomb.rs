//! Wakers that misbehave on purpose: [`BombWaker`] panics in whichever of `wake`,
//! `wake_by_ref`, `drop` (of a clone) and `clone` its [`Fuses`] name, counts its wakes (and lets a thread
//! wait for them on a condition variable, not by polling), and counts its live references, so
//! a test can tell a waker that was woken from one that was dropped unwoken or leaked.
//!
//! Built on a hand-written `RawWaker` vtable: `std::task::Wake` cannot make `clone` or the
//! drop of one reference panic.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{RawWaker, RawWakerVTable, Waker};

/// Which operations of a [`BombWaker`] panic.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fuses {
    pub(crate) wake: bool,
    pub(crate) wake_by_ref: bool,
    /// Dropping a clone (not waking it by value) panics, unless the thread is already
    /// panicking (a panic in a destructor during unwinding aborts, whoever catches what).
    /// Only clones, the references a timer files: the test's own reference from
    /// [`BombWaker::waker`] drops quietly.
    pub(crate) drop: bool,
    pub(crate) clone: bool,
}

impl Fuses {
    /// Nothing panics: a well-behaved counting waker.
    pub(crate) const CALM: Fuses = Fuses {
        wake: false,
        wake_by_ref: false,
        drop: false,
        clone: false,
    };
}

/// The shared state behind every reference of one bomb waker (see the module docs).
#[derive(Debug)]
pub(crate) struct BombWaker {
    fuses: Fuses,
    wakes: Mutex<usize>,
    woken: Condvar,
    /// Live `Waker` references made from this bomb.
    refs: AtomicUsize,
}

/// The panic message of every fuse, so a test can tell a bomb's panic from a real failure.
pub(crate) const BOOM: &str = "bomb waker: boom";

impl BombWaker {
    pub(crate) fn new(fuses: Fuses) -> Arc<BombWaker> {
        Arc::new(BombWaker {
            fuses,
            wakes: Mutex::new(0),
            woken: Condvar::new(),
            refs: AtomicUsize::new(0),
        })
    }

    /// A new reference to this waker.
    pub(crate) fn waker(self: &Arc<Self>) -> Waker {
        self.refs.fetch_add(1, SeqCst);
        let data = Arc::into_raw(self.clone()).cast::<()>();
        // SAFETY: `data` is an `Arc<BombWaker>` turned into a raw pointer, which is what
        // every function of `ORIGINAL` expects; the reference is given to the `Waker`.
        unsafe { Waker::from_raw(RawWaker::new(data, &ORIGINAL)) }
    }

    /// How many times it was woken (by value or by reference).
    pub(crate) fn wakes(&self) -> usize {
        *self.wakes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live references made by [`BombWaker::waker`] (and clones) not yet dropped or woken
    /// by value.
    pub(crate) fn refs(&self) -> usize {
        self.refs.load(SeqCst)
    }

    /// Blocks until it has been woken at least `n` times. A wake that never comes is a hang,
    /// for the test's watchdog to report.
    pub(crate) fn wait_for_wakes(&self, n: usize) {
        let mut wakes = self.wakes.lock().unwrap_or_else(|e| e.into_inner());
        while *wakes < n {
            wakes = self.woken.wait(wakes).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn record_wake(&self) {
        *self.wakes.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.woken.notify_all();
    }
}

/// The vtable of the references [`BombWaker::waker`] makes: their drop never panics.
static ORIGINAL: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_original);
/// The vtable of clones: their drop panics if the `drop` fuse is set.
static CLONE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_clone);

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] (or `clone`).
unsafe fn borrow<'a>(data: *const ()) -> &'a BombWaker {
    // SAFETY: the caller's reference keeps the `Arc` alive for the call.
    unsafe { &*data.cast::<BombWaker>() }
}

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] or `clone`; the call keeps it.
unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: the vtable is only reached through a live reference.
    let bomb = unsafe { borrow(data) };
    if bomb.fuses.clone {
        panic!("{BOOM} (clone)");
    }
    bomb.refs.fetch_add(1, SeqCst);
    // SAFETY: `data` came from `Arc::into_raw` and the caller's reference is live.
    unsafe { Arc::increment_strong_count(data.cast::<BombWaker>()) };
    RawWaker::new(data, &CLONE)
}

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] or `clone`; the call hands it over.
unsafe fn wake(data: *const ()) {
    // SAFETY: waking by value hands this reference over; it is released here, before any
    // panic, so the panic leaks nothing.
    let bomb = unsafe { Arc::from_raw(data.cast::<BombWaker>()) };
    bomb.refs.fetch_sub(1, SeqCst);
    bomb.record_wake();
    let fuse = bomb.fuses.wake;
    drop(bomb);
    if fuse {
        panic!("{BOOM} (wake)");
    }
}

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] or `clone`; the call keeps it.
unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: the caller's reference is live for the call.
    let bomb = unsafe { borrow(data) };
    bomb.record_wake();
    if bomb.fuses.wake_by_ref {
        panic!("{BOOM} (wake_by_ref)");
    }
}

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] or `clone`; the call hands it over.
unsafe fn drop_original(data: *const ()) {
    // SAFETY: dropping hands this reference over.
    let bomb = unsafe { Arc::from_raw(data.cast::<BombWaker>()) };
    bomb.refs.fetch_sub(1, SeqCst);
}

/// # Safety
///
/// `data` is a live reference made by [`BombWaker::waker`] or `clone`; the call hands it over.
unsafe fn drop_clone(data: *const ()) {
    // SAFETY: dropping hands this reference over; it is released here, before any panic.
    let bomb = unsafe { Arc::from_raw(data.cast::<BombWaker>()) };
    bomb.refs.fetch_sub(1, SeqCst);
    let fuse = bomb.fuses.drop;
    drop(bomb);
    if fuse && !std::thread::panicking() {
        panic!("{BOOM} (drop)");
    }
}

/// Keeps the bombs' own panics out of the test output (they are expected by the thousand);
/// every other panic goes to the hook that was installed before. Idempotent.
pub(crate) fn quiet_bombs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = super::payload_message(info.payload());
            if !message.starts_with(BOOM) {
                previous(info);
            }
        }));
    });
}
