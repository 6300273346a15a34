//! Bombs for the timers: wakers that panic in `wake`, `wake_by_ref`, `clone` or `drop`, and
//! wakers that own another pending timer, filed through `Sleep`, `Interval` and `timeout`;
//! timers still pending when their runtime is dropped, awaited on other threads (under
//! `futures::executor::block_on`, `magpie::block_on`, and a hand-written executor) and inside
//! blocking closures. Every test checks that the process survives (a panic escaping on a
//! worker aborts it), that every waiter completes (a stranded timer trips the watchdog), and
//! that timers still fire afterwards.
//!
//! No test asserts on timings: deadlines are a few milliseconds to keep the tests short, and
//! only "pending at the first poll" depends on the machine being quick enough, which the
//! tests do not assume (a timer that is due at once only makes a test check less).

mod async_support;

use std::future::{pending, poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Poll, Wake, Waker};
use std::time::{Duration, Instant};

use async_support::bomb::{quiet_bombs, BombWaker, Fuses, BOOM};
use async_support::{payload_message, poll_once, runtime, watchdog_for, Counter};
use magpie::time::{interval_at, sleep, timeout};
use magpie::Runtime;

/// Long enough to tell a hang from a slow machine; a regression here is a hang.
const HANG: Duration = Duration::from_secs(20);

/// A short timer: the tests wait for it to fire.
const SHORT: Duration = Duration::from_millis(20);

/// A timer that never fires during a test.
const LONG: Duration = Duration::from_secs(3600);

/// The three timer futures.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Sleep,
    /// The first tick of `interval_at(now + d, d)`.
    Interval,
    /// `timeout(d, pending())`, which elapses.
    Timeout,
}

const KINDS: [Kind; 3] = [Kind::Sleep, Kind::Interval, Kind::Timeout];

/// A timer future of any kind. `Unpin`, and not poisoned by a panic in one of its polls (no
/// `async` block): a poll that panics leaves it usable.
type Timer = Pin<Box<dyn Future<Output = ()> + Send>>;

fn timer(kind: Kind, after: Duration) -> Timer {
    match kind {
        Kind::Sleep => Box::pin(sleep(after)),
        Kind::Interval => {
            let mut ticks = interval_at(Instant::now() + after, after);
            Box::pin(poll_fn(move |cx| ticks.poll_tick(cx).map(|_| ())))
        }
        Kind::Timeout => {
            let mut elapses = timeout(after, pending::<()>());
            Box::pin(poll_fn(move |cx| {
                Pin::new(&mut elapses)
                    .poll(cx)
                    .map(|out| assert!(out.is_err(), "pending() finished"))
            }))
        }
    }
}

/// Polls `timer` once with `waker` inside `rt`'s `block_on`, so that a first poll files it
/// with `rt`. Returns whether it is still pending.
fn poll_in(rt: &Runtime, timer: &mut Timer, waker: &Waker) -> bool {
    rt.block_on(poll_fn(|_| {
        Poll::Ready(poll_once(timer, waker).is_pending())
    }))
}

/// A hand-written executor: polls `timer` with `bomb`'s waker until it completes, waiting for
/// a wake between polls. A bomb records its wake before it panics, so this completes even
/// when every wake panics (on the thread that fired the timer).
fn drive(timer: &mut Timer, bomb: &Arc<BombWaker>) {
    loop {
        let seen = bomb.wakes();
        if poll_once(timer, &bomb.waker()).is_ready() {
            return;
        }
        bomb.wait_for_wakes(seen + 1);
    }
}

/// Checks that `rt` still fires timers, of every kind.
fn still_fires(rt: &Runtime) {
    for kind in KINDS {
        rt.block_on(timer(kind, Duration::from_millis(1)));
    }
}

/// Checks that the global runtime (where timers move when theirs shuts down) still fires
/// timers, and a fresh runtime too.
fn timers_still_fire_elsewhere() {
    for kind in KINDS {
        futures::executor::block_on(timer(kind, Duration::from_millis(1)));
    }
    still_fires(&runtime(1));
}

fn fuses_wake() -> Fuses {
    Fuses {
        wake: true,
        ..Fuses::CALM
    }
}

fn fuses_wake_by_ref() -> Fuses {
    Fuses {
        wake_by_ref: true,
        ..Fuses::CALM
    }
}

fn fuses_drop() -> Fuses {
    Fuses {
        drop: true,
        ..Fuses::CALM
    }
}

fn fuses_clone() -> Fuses {
    Fuses {
        clone: true,
        ..Fuses::CALM
    }
}

// ---------------------------------------------------------------------------------------------
// Wakers that panic while filed
// ---------------------------------------------------------------------------------------------

/// Timers of every kind with one deadline, filed with one runtime by hand-written executors
/// whose wakers panic in `wake` (or `wake_by_ref`, or not at all): the firing worker survives
/// every panic, and every executor is woken and completes.
#[test]
fn panicking_wakes_strand_no_timer() {
    quiet_bombs();
    let _guard = watchdog_for("panicking_wakes_strand_no_timer", HANG);
    for workers in [1, 2] {
        let rt = runtime(workers);
        let mut waiters = Vec::new();
        for kind in KINDS {
            for fuses in [fuses_wake(), fuses_wake_by_ref(), Fuses::CALM, fuses_wake()] {
                let bomb = BombWaker::new(fuses);
                let mut t = timer(kind, SHORT);
                poll_in(&rt, &mut t, &bomb.waker());
                waiters.push((t, bomb));
            }
        }
        std::thread::scope(|scope| {
            for (t, bomb) in &mut waiters {
                scope.spawn(move || drive(t, bomb));
            }
        });
        still_fires(&rt);
        assert_eq!(rt.stats().timers_pending, 0);
        drop(waiters);
    }
}

/// The driver drops a filed waker when a re-poll replaces it and when the timer is cancelled;
/// a waker whose drop panics is dropped quietly in both cases, for every kind of timer.
#[test]
fn wakers_whose_drop_panics_are_dropped_quietly() {
    quiet_bombs();
    let _guard = watchdog_for("wakers_whose_drop_panics_are_dropped_quietly", HANG);
    let rt = runtime(2);
    for kind in KINDS {
        let dud = BombWaker::new(fuses_drop());
        let calm = BombWaker::new(Fuses::CALM);
        // Replaced, then cancelled.
        let mut t = timer(kind, LONG);
        assert!(poll_in(&rt, &mut t, &dud.waker()));
        let replaced = catch_unwind(AssertUnwindSafe(|| poll_in(&rt, &mut t, &calm.waker())));
        assert!(
            matches!(replaced, Ok(true)),
            "{kind:?}: re-poll: {replaced:?}"
        );
        assert!(poll_in(&rt, &mut t, &dud.waker()));
        assert!(
            catch_unwind(AssertUnwindSafe(|| drop(t))).is_ok(),
            "{kind:?}: cancel"
        );
        // Driven to the end: every poll but the last replaces a clone of `dud`.
        let mut t = timer(kind, SHORT);
        poll_in(&rt, &mut t, &dud.waker());
        drive(&mut t, &dud);
        drop(t);
        assert_eq!(dud.refs(), 0, "{kind:?}: a waker was kept");
        assert_eq!(calm.refs(), 0, "{kind:?}: a waker was kept");
    }
    assert_eq!(rt.stats().timers_pending, 0);
    still_fires(&rt);
}

/// A waker whose `clone` panics: the poll that files it panics (in the poller's hands, as any
/// panicking poll), and leaves the timer as it was: not filed if it was not, filed under the
/// previous waker if it was, which the timer still wakes.
#[test]
fn wakers_whose_clone_panics_leave_the_timer_usable() {
    quiet_bombs();
    let _guard = watchdog_for("wakers_whose_clone_panics_leave_the_timer_usable", HANG);
    let rt = runtime(2);
    let clumsy = BombWaker::new(fuses_clone());
    for kind in KINDS {
        // Never filed: the panic leaves nothing behind.
        let mut t = timer(kind, SHORT);
        let first = catch_unwind(AssertUnwindSafe(|| poll_in(&rt, &mut t, &clumsy.waker())));
        let message = payload_message(&*first.expect_err("cloned a waker whose clone panics"));
        assert!(message.starts_with(BOOM), "{kind:?}: {message}");
        assert_eq!(
            rt.stats().timers_pending,
            0,
            "{kind:?}: filed without a waker"
        );
        drive(&mut t, &BombWaker::new(Fuses::CALM));
        // Filed, then re-polled with the clumsy waker: still filed under the first waker.
        let calm = BombWaker::new(Fuses::CALM);
        let mut t = timer(kind, SHORT);
        let was_pending = poll_in(&rt, &mut t, &calm.waker());
        let again = catch_unwind(AssertUnwindSafe(|| poll_in(&rt, &mut t, &clumsy.waker())));
        if was_pending && again.is_err() {
            // Only the timer's firing can wake `calm` now.
            calm.wait_for_wakes(1);
        }
        drive(&mut t, &calm);
        // Filed, re-polled with the clumsy waker, then cancelled: nothing stays filed (the
        // timer still knows its entry).
        let mut t = timer(kind, LONG);
        assert!(poll_in(&rt, &mut t, &calm.waker()));
        let again = catch_unwind(AssertUnwindSafe(|| poll_in(&rt, &mut t, &clumsy.waker())));
        assert!(
            again.is_err(),
            "{kind:?}: cloned a waker whose clone panics"
        );
        assert_eq!(rt.stats().timers_pending, 1, "{kind:?}");
        drop(t);
        assert_eq!(
            rt.stats().timers_pending,
            0,
            "{kind:?}: a cancelled timer stayed filed"
        );
        assert_eq!(calm.refs(), 0, "{kind:?}: a cancelled timer kept its waker");
    }
    assert_eq!(clumsy.refs(), 0);
    assert_eq!(rt.stats().timers_pending, 0);
    still_fires(&rt);
}

// ---------------------------------------------------------------------------------------------
// Wakers that own a timer
// ---------------------------------------------------------------------------------------------

/// A waker that owns another pending timer: when the driver lets go of the last reference
/// (replacing, cancelling, firing or closing), the owned timer is dropped, which takes the
/// wheel's lock. Reports its drop on a channel.
struct Owner {
    owned: Mutex<Option<Timer>>,
    dropped: Mutex<mpsc::Sender<()>>,
}

impl Wake for Owner {
    fn wake(self: Arc<Self>) {}
}

impl Drop for Owner {
    fn drop(&mut self) {
        // The owned timer first, so that whoever hears of the drop finds it deregistered
        // (the drop may run on a worker, as the timer fires).
        drop(self.owned.lock().unwrap().take());
        let _ = self.dropped.lock().unwrap().send(());
    }
}

/// How the driver lets go of a filed waker.
#[derive(Clone, Copy, Debug)]
enum LetGo {
    /// A re-poll with another waker replaces it.
    Replaced,
    /// The timer is dropped.
    Cancelled,
    /// The timer fires: the waker is woken by value.
    Fired,
    /// The runtime is dropped: the close wakes it.
    Closed,
}

#[test]
fn a_waker_that_owns_a_timer_of_the_same_runtime() {
    let _guard = watchdog_for(
        "a_waker_that_owns_a_timer_of_the_same_runtime (a deadlock on the wheel lock?)",
        HANG,
    );
    for let_go in [
        LetGo::Replaced,
        LetGo::Cancelled,
        LetGo::Fired,
        LetGo::Closed,
    ] {
        for kind in KINDS {
            let what = format!("{kind:?}, {let_go:?}");
            let rt = runtime(1);
            let mut owned = timer(kind, LONG);
            assert!(poll_in(&rt, &mut owned, futures::task::noop_waker_ref()));
            let (dropped_tx, dropped_rx) = mpsc::channel();
            let owner = Waker::from(Arc::new(Owner {
                owned: Mutex::new(Some(owned)),
                dropped: Mutex::new(dropped_tx),
            }));
            let after = match let_go {
                LetGo::Fired => SHORT,
                _ => LONG,
            };
            let mut t = timer(kind, after);
            let pending = poll_in(&rt, &mut t, &owner);
            // The wheel holds the last reference (unless the timer was due already).
            drop(owner);
            match let_go {
                LetGo::Replaced => {
                    assert!(
                        poll_in(&rt, &mut t, futures::task::noop_waker_ref()),
                        "{what}"
                    );
                    dropped_rx.recv().unwrap();
                    drop(t);
                }
                LetGo::Cancelled => {
                    drop(t);
                    dropped_rx.recv().unwrap();
                }
                LetGo::Fired => {
                    // Dropped by the firing (or at once, if the first poll was too late).
                    dropped_rx.recv().unwrap();
                    if pending {
                        rt.block_on(poll_fn(|cx| t.as_mut().poll(cx)));
                    }
                }
                LetGo::Closed => {
                    drop(rt);
                    dropped_rx.recv().unwrap();
                    drop(t);
                    timers_still_fire_elsewhere();
                    continue;
                }
            }
            assert_eq!(rt.stats().timers_pending, 0, "{what}");
            still_fires(&rt);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timers pending when their runtime is dropped
// ---------------------------------------------------------------------------------------------

/// How a waiter outside the pool waits for its timer.
#[derive(Clone, Copy, Debug)]
enum Waiter {
    Futures,
    /// `magpie::block_on`: the current runtime (the global one on a plain thread, the
    /// runtime itself inside one of its blocking closures).
    Magpie,
    /// [`drive`] with a waker that panics when woken.
    Bomb,
}

const WAITERS: [Waiter; 3] = [Waiter::Futures, Waiter::Magpie, Waiter::Bomb];

/// Waits for `t` as `waiter` says, reporting the first poll on `filed` (by the time it
/// arrives, the timer is filed under this waiter's waker, or complete).
fn wait_for(waiter: Waiter, mut t: Timer, filed: mpsc::Sender<()>) {
    let mut filed = Some(filed);
    let reporting = poll_fn(move |cx| {
        let poll = t.as_mut().poll(cx);
        if let Some(filed) = filed.take() {
            filed.send(()).unwrap();
        }
        poll
    });
    match waiter {
        Waiter::Futures => futures::executor::block_on(reporting),
        Waiter::Magpie => magpie::block_on(reporting),
        Waiter::Bomb => {
            let mut boxed: Timer = Box::pin(reporting);
            drive(&mut boxed, &BombWaker::new(fuses_wake()));
        }
    }
}

/// Timers first polled on a runtime's worker, then awaited on plain threads, of every kind
/// and by every waiter, all pending when the runtime is dropped (with tasks of its own asleep
/// too): the drop wakes each, each moves to the global runtime, and every waiter completes.
#[test]
fn timers_awaited_on_other_threads_survive_their_runtime() {
    quiet_bombs();
    let _guard = watchdog_for(
        "timers_awaited_on_other_threads_survive_their_runtime",
        HANG,
    );
    for workers in [1, 2] {
        let rt = runtime(workers);
        let asleep: Vec<_> = (0..100).map(|_| rt.spawn(sleep(LONG))).collect();
        let (filed_tx, filed_rx) = mpsc::channel();
        let mut threads = Vec::new();
        for kind in KINDS {
            for waiter in WAITERS {
                // Filed on a worker, then handed (in a tuple: handed, not awaited) to the
                // waiter.
                let (t,) = rt
                    .block_on(rt.spawn(async move {
                        let mut t = timer(kind, Duration::from_millis(200));
                        let _ = futures::poll!(&mut t);
                        (t,)
                    }))
                    .unwrap();
                let filed = filed_tx.clone();
                threads.push(std::thread::spawn(move || wait_for(waiter, t, filed)));
            }
        }
        for _ in &threads {
            filed_rx.recv().unwrap();
        }
        drop(rt);
        for thread in threads {
            thread.join().unwrap();
        }
        for handle in asleep {
            assert!(futures::executor::block_on(handle)
                .unwrap_err()
                .is_cancelled());
        }
    }
    timers_still_fire_elsewhere();
}

/// Blocking closures waiting on timers filed with their own runtime, of every kind and by
/// every waiter: the runtime's drop waits for the closures, and they complete because the
/// drop wakes their timers, which move to the global runtime.
#[test]
fn timers_in_blocking_closures_do_not_hang_the_drop() {
    quiet_bombs();
    let _guard = watchdog_for(
        "timers_in_blocking_closures_do_not_hang_the_drop (a drop waiting for a blocking \
         closure whose timer nobody fires)",
        HANG,
    );
    let rt = runtime(2);
    let done = Counter::new();
    let (filed_tx, filed_rx) = mpsc::channel();
    let mut handles = Vec::new();
    for kind in KINDS {
        for waiter in WAITERS {
            let filed = filed_tx.clone();
            let done = done.clone();
            handles.push(rt.spawn_blocking(move || {
                wait_for(waiter, timer(kind, Duration::from_millis(200)), filed);
                done.bump();
            }));
        }
    }
    for _ in &handles {
        filed_rx.recv().unwrap();
    }
    drop(rt);
    assert_eq!(
        done.get(),
        handles.len(),
        "a blocking closure did not finish"
    );
    for handle in handles {
        futures::executor::block_on(handle).unwrap();
    }
    timers_still_fire_elsewhere();
}

/// A timer filed on a fresh blocking closure of a runtime that is shutting down moves to the
/// global runtime at once; one filed with a closed runtime by a re-poll moves there too. Here
/// the runtime is dropped while a blocking closure files timers in a loop: each completes.
#[test]
fn timers_filed_while_the_runtime_shuts_down() {
    quiet_bombs();
    let _guard = watchdog_for("timers_filed_while_the_runtime_shuts_down", HANG);
    for round in 0..20 {
        let rt = runtime(1);
        let (started_tx, started_rx) = mpsc::channel();
        let handle = rt.spawn_blocking(move || {
            let mut rounds = 0;
            let deadline = Instant::now() + Duration::from_millis(50);
            while Instant::now() < deadline {
                for kind in KINDS {
                    magpie::block_on(timer(kind, Duration::from_millis(1)));
                }
                if rounds == 0 {
                    started_tx.send(()).unwrap();
                }
                rounds += 1;
            }
            rounds
        });
        started_rx.recv().unwrap();
        drop(rt);
        assert!(
            futures::executor::block_on(handle).unwrap() >= 1,
            "round {round}"
        );
    }
    timers_still_fire_elsewhere();
}

/// A runtime dropped on a worker of another runtime, in a blocking closure of another
/// runtime, and on one of its own workers (which skips the waits) still wakes the timers
/// filed with it, which complete elsewhere.
#[test]
fn runtimes_dropped_off_the_main_thread_wake_their_timers() {
    quiet_bombs();
    let _guard = watchdog_for(
        "runtimes_dropped_off_the_main_thread_wake_their_timers",
        HANG,
    );
    let host = runtime(2);
    for place in ["host worker", "host blocking closure", "own worker"] {
        let rt = runtime(2);
        let (filed_tx, filed_rx) = mpsc::channel();
        let waiters: Vec<_> = KINDS
            .iter()
            .flat_map(|&kind| WAITERS.iter().map(move |&waiter| (kind, waiter)))
            .map(|(kind, waiter)| {
                let mut t = timer(kind, Duration::from_millis(200));
                let _ = poll_in(&rt, &mut t, futures::task::noop_waker_ref());
                let filed = filed_tx.clone();
                std::thread::spawn(move || wait_for(waiter, t, filed))
            })
            .collect();
        for _ in &waiters {
            filed_rx.recv().unwrap();
        }
        match place {
            "host worker" => host.block_on(host.spawn(async move { drop(rt) })).unwrap(),
            "host blocking closure" => host
                .block_on(host.spawn_blocking(move || drop(rt)))
                .unwrap(),
            _ => {
                let (rt_tx, rt_rx) = futures::channel::oneshot::channel::<Runtime>();
                let own = rt.spawn(async move { drop(rt_rx.await.unwrap()) });
                rt_tx.send(rt).unwrap();
                // The runtime is gone once its own task has dropped it: the handle resolves
                // (completed, or cancelled by the very shutdown it ran).
                let _ = futures::executor::block_on(own);
            }
        }
        for waiter in waiters {
            waiter.join().unwrap();
        }
    }
    still_fires(&host);
    timers_still_fire_elsewhere();
}

/// Wakers that panic when the close wakes them, next to wakers that do not: the drop of the
/// runtime neither panics nor stops at the first panic, and every waiter completes.
#[test]
fn the_close_survives_panicking_wakers() {
    quiet_bombs();
    let _guard = watchdog_for("the_close_survives_panicking_wakers", HANG);
    let rt = runtime(1);
    let mut waiters = Vec::new();
    for kind in KINDS {
        for fuses in [fuses_wake(), Fuses::CALM, fuses_wake(), fuses_drop()] {
            let bomb = BombWaker::new(fuses);
            let mut t = timer(kind, LONG);
            assert!(poll_in(&rt, &mut t, &bomb.waker()));
            waiters.push((t, bomb));
        }
    }
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(rt)));
    assert!(dropped.is_ok(), "dropping the runtime panicked");
    for (i, (t, bomb)) in waiters.iter_mut().enumerate() {
        assert_eq!(bomb.wakes(), 1, "waiter {i}: the close did not wake it");
        assert_eq!(bomb.refs(), 0, "waiter {i}: the close kept its waker");
        // Moved to the global runtime by this poll; dropping it cancels it there.
        assert!(poll_once(t, &bomb.waker()).is_pending());
    }
    drop(waiters);
    timers_still_fire_elsewhere();
}
