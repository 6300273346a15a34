//! Timers: `sleep`, `sleep_until`, `timeout` and `interval`.
//!
//! The only timing assertions here are "not early": a timer never fires before its deadline
//! (elapsed >= requested). How late a timer may fire depends on the machine's load and is not
//! tested; a timer that never fires trips the [`Watchdog`].

mod async_support;

use std::pin::pin;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use async_support::bomb::{BombWaker, Fuses};
use async_support::{poll_once, runtime, watchdog, watchdog_for, Counter, XorShift};
use futures::channel::oneshot;
use futures::future::{self, Either};
use magpie::task::{JoinError, JoinHandle};
use magpie::time::{interval, sleep, sleep_until, timeout, Sleep};

/// Concurrent sleeps in the volume test (each 1..=50 ms, so the test takes ~50 ms plus the
/// cost of the tasks).
const SLEEPS: usize = 10_000;

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

/// Sleeps for `d` and returns how long that took.
async fn timed_sleep(d: Duration) -> Duration {
    let start = Instant::now();
    sleep(d).await;
    start.elapsed()
}

// ---------------------------------------------------------------------------------------------
// sleep and sleep_until
// ---------------------------------------------------------------------------------------------

#[test]
fn sleep_never_fires_early() {
    let _guard = watchdog("sleep_never_fires_early");
    let rt = runtime(2);
    for ms in [0, 1, 2, 3, 5, 10, 25] {
        let d = Duration::from_millis(ms);
        let elapsed = wait(rt.spawn(timed_sleep(d))).unwrap();
        assert!(
            elapsed >= d,
            "sleep({d:?}) in a task fired after {elapsed:?}"
        );
        let elapsed = rt.block_on(timed_sleep(d));
        assert!(
            elapsed >= d,
            "sleep({d:?}) in block_on fired after {elapsed:?}"
        );
    }
    // Sub-millisecond durations are not rounded down to zero.
    for us in [1, 100, 999, 1001, 1500] {
        let d = Duration::from_micros(us);
        let elapsed = wait(rt.spawn(timed_sleep(d))).unwrap();
        assert!(elapsed >= d, "sleep({d:?}) fired after {elapsed:?}");
    }
}

#[test]
fn sleep_until_never_fires_early() {
    let _guard = watchdog("sleep_until_never_fires_early");
    let rt = runtime(2);
    for ms in [1, 4, 15] {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let woke = wait(rt.spawn(async move {
            sleep_until(deadline).await;
            Instant::now()
        }))
        .unwrap();
        assert!(woke >= deadline, "woke {:?} early", deadline - woke);
    }
}

#[test]
fn sleep_until_a_past_instant_is_ready_at_once() {
    let _guard = watchdog("sleep_until_a_past_instant_is_ready_at_once");
    let rt = runtime(1);
    let ready = wait(rt.spawn(async {
        let now = Instant::now();
        let past = now.checked_sub(Duration::from_millis(50)).unwrap_or(now);
        let mut results = Vec::new();
        for deadline in [
            past,
            now.checked_sub(Duration::from_secs(1)).unwrap_or(past),
        ] {
            let mut s = pin!(sleep_until(deadline));
            results.push(futures::poll!(s.as_mut()).is_ready());
        }
        results
    }))
    .unwrap();
    assert_eq!(
        ready,
        [true, true],
        "a past deadline was not ready on the first poll"
    );
}

#[test]
fn dropping_sleeps_before_they_fire() {
    let _guard = watchdog("dropping_sleeps_before_they_fire");
    let rt = runtime(2);
    let pending_polls = wait(rt.spawn(async {
        let mut pending = 0;
        // Long ones, which would never fire during the test.
        for i in 0..SLEEPS {
            let mut s = pin!(sleep(Duration::from_secs(3600 + i as u64)));
            if futures::poll!(s.as_mut()).is_pending() {
                pending += 1;
            }
        }
        // Short ones, dropped before their deadlines, which then pass while the task sleeps:
        // their entries must be gone from the wheel (firing one would wake this task with a
        // waker of an entry that no longer exists).
        // A first poll may find one ready only if its deadline passed meanwhile: a thread
        // descheduled for a millisecond between making and polling it (a loaded machine).
        let start = Instant::now();
        for i in 0..SLEEPS {
            let d = Duration::from_millis(1 + (i % 20) as u64);
            let made = Instant::now();
            let mut s = pin!(sleep(d));
            if futures::poll!(s.as_mut()).is_pending() || made.elapsed() >= d {
                pending += 1;
            }
        }
        let elapsed = timed_sleep(Duration::from_millis(30)).await;
        assert!(elapsed >= Duration::from_millis(30));
        assert!(start.elapsed() >= Duration::from_millis(20));
        pending
    }))
    .unwrap();
    assert_eq!(
        pending_polls,
        2 * SLEEPS,
        "a sleep was ready on its first poll before its deadline"
    );
    // The timer still works for new sleeps afterwards.
    let d = Duration::from_millis(3);
    assert!(wait(rt.spawn(timed_sleep(d))).unwrap() >= d);
}

#[test]
fn a_sleep_moved_between_tasks_still_fires() {
    let _guard = watchdog("a_sleep_moved_between_tasks_still_fires");
    // Polled first in one task (registering that task's waker), then awaited to the end in
    // another: the latest waker is the one woken.
    let rt = runtime(2);
    let (tx, rx) = oneshot::channel();
    let first = rt.spawn(async move {
        let start = Instant::now();
        let mut s = Box::pin(sleep(Duration::from_millis(5)));
        assert!(futures::poll!(s.as_mut()).is_pending());
        tx.send((s, start))
            .unwrap_or_else(|_| panic!("receiver gone"));
    });
    let second = rt.spawn(async move {
        let (s, start) = rx.await.unwrap();
        s.await;
        start.elapsed()
    });
    wait(first).unwrap();
    assert!(wait(second).unwrap() >= Duration::from_millis(5));
}

#[test]
fn a_sleep_outlives_the_runtime_it_was_first_polled_on() {
    let _guard = watchdog("a_sleep_outlives_the_runtime_it_was_first_polled_on");
    // Filed with one runtime's timers, which then shut down and will fire nothing: the next
    // poll files it with the runtime polling it now.
    let first = runtime(1);
    let second = runtime(1);
    let start = Instant::now();
    let mut s = Box::pin(sleep(Duration::from_millis(100)));
    // Pending unless this machine took 100 ms to get here (then the test checks less).
    first.block_on(async {
        let _ = futures::poll!(s.as_mut());
    });
    drop(first);
    second.block_on(s);
    assert!(start.elapsed() >= Duration::from_millis(100));
}

#[test]
fn ten_thousand_concurrent_sleeps_all_complete_no_earlier_than_their_deadline() {
    let _guard =
        watchdog("ten_thousand_concurrent_sleeps_all_complete_no_earlier_than_their_deadline");
    let rt = runtime(2);
    let mut rng = XorShift::new(0x5EED);
    let completed = Counter::new();
    let handles: Vec<(Duration, JoinHandle<Duration>)> = (0..SLEEPS)
        .map(|_| {
            let d = Duration::from_millis(rng.range(1, 50));
            let completed = completed.clone();
            let handle = rt.spawn(async move {
                let elapsed = timed_sleep(d).await;
                completed.bump();
                elapsed
            });
            (d, handle)
        })
        .collect();
    let mut early = Vec::new();
    for (i, (d, handle)) in handles.into_iter().enumerate() {
        let elapsed = wait(handle).unwrap();
        if elapsed < d {
            early.push((i, d, elapsed));
        }
    }
    assert!(
        early.is_empty(),
        "{} sleeps fired early; first: {:?}",
        early.len(),
        &early[..early.len().min(5)]
    );
    assert_eq!(completed.get(), SLEEPS);
}

#[test]
fn timers_on_a_one_worker_runtime() {
    let _guard = watchdog("timers_on_a_one_worker_runtime");
    // The only worker both runs the tasks and drives the timers.
    let rt = runtime(1);
    let handles: Vec<_> = (1..=20u64)
        .map(|ms| {
            let d = Duration::from_millis(ms);
            (d, rt.spawn(timed_sleep(d)))
        })
        .collect();
    for (d, handle) in handles {
        let elapsed = wait(handle).unwrap();
        assert!(elapsed >= d, "sleep({d:?}) fired after {elapsed:?}");
    }
    // A task that spins (always ready) does not stop a sleeper on the same worker from
    // being woken.
    let sleeper = rt.spawn(timed_sleep(Duration::from_millis(5)));
    let spinner = rt.spawn(async move {
        let mut yields = 0u64;
        while !sleeper.is_finished() {
            magpie::task::yield_now().await;
            yields += 1;
        }
        (sleeper.await.unwrap(), yields)
    });
    let (elapsed, _yields) = wait(spinner).unwrap();
    assert!(elapsed >= Duration::from_millis(5));
}

#[test]
fn timers_in_block_on_from_outside_threads() {
    let _guard = watchdog("timers_in_block_on_from_outside_threads");
    let rt = runtime(2);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let rt = &rt;
            s.spawn(move || {
                for ms in [1, 3, 7] {
                    let d = Duration::from_millis(ms + t);
                    let elapsed = rt.block_on(timed_sleep(d));
                    assert!(
                        elapsed >= d,
                        "sleep({d:?}) in block_on fired after {elapsed:?}"
                    );
                }
            });
        }
    });
    // The free functions from a plain thread: the global runtime.
    let d = Duration::from_millis(4);
    assert!(magpie::block_on(timed_sleep(d)) >= d);
}

// ---------------------------------------------------------------------------------------------
// timeout
// ---------------------------------------------------------------------------------------------

#[test]
fn timeout_of_sleep_max_elapses_without_overflow() {
    let _guard = watchdog("timeout_of_sleep_max_elapses_without_overflow");
    let rt = runtime(2);
    let (result, elapsed) = wait(rt.spawn(async {
        let start = Instant::now();
        let result = timeout(Duration::from_millis(5), sleep(Duration::MAX)).await;
        (result, start.elapsed())
    }))
    .expect("sleep(Duration::MAX) under a timeout panicked");
    let elapsed_err = result.expect_err("sleep(Duration::MAX) finished");
    assert!(
        elapsed >= Duration::from_millis(5),
        "the timeout fired after {elapsed:?}"
    );
    // Elapsed is an error type with a message.
    let _: &dyn std::error::Error = &elapsed_err;
    assert!(!elapsed_err.to_string().is_empty());
    // A far deadline polled once and dropped, and `timeout(Duration::MAX, ..)`.
    let value = wait(rt.spawn(async {
        let mut far = pin!(sleep(Duration::MAX));
        assert!(futures::poll!(far.as_mut()).is_pending());
        timeout(Duration::MAX, async { 8 }).await
    }))
    .unwrap();
    assert_eq!(value.unwrap(), 8);
}

#[test]
fn timeout_of_a_ready_future_is_ok() {
    let _guard = watchdog("timeout_of_a_ready_future_is_ok");
    let rt = runtime(1);
    let results = rt.block_on(async {
        [
            timeout(Duration::from_millis(5), async { 1 }).await,
            // A zero timeout still polls the future first.
            timeout(Duration::ZERO, async { 2 }).await,
            timeout(Duration::from_secs(3600), async { 3 }).await,
        ]
    });
    let values: Vec<i32> = results
        .into_iter()
        .map(|r| r.expect("a ready future timed out"))
        .collect();
    assert_eq!(values, [1, 2, 3]);
}

#[test]
fn timeout_of_a_future_that_finishes_in_time() {
    let _guard = watchdog("timeout_of_a_future_that_finishes_in_time");
    let rt = runtime(2);
    // The inner future waits for another task, which answers at once; the deadline is an
    // hour away.
    let (tx, rx) = oneshot::channel();
    let answer = rt.spawn(async move { tx.send(5).unwrap() });
    let result = wait(rt.spawn(timeout(Duration::from_secs(3600), rx))).unwrap();
    assert_eq!(result.expect("timed out").unwrap(), 5);
    wait(answer).unwrap();
    // A timeout that elapses drops the inner future, which closes its channel.
    let (tx, rx) = oneshot::channel::<u8>();
    let result = wait(rt.spawn(timeout(Duration::from_millis(2), rx))).unwrap();
    assert!(result.is_err());
    assert!(tx.is_canceled(), "the timed-out future was not dropped");
}

// ---------------------------------------------------------------------------------------------
// interval
// ---------------------------------------------------------------------------------------------

#[test]
fn interval_ticks_are_monotonic_and_never_early() {
    let _guard = watchdog("interval_ticks_are_monotonic_and_never_early");
    let rt = runtime(2);
    for (ms, n) in [(1u64, 20u32), (5, 10)] {
        let period = Duration::from_millis(ms);
        let (elapsed, ticks) = wait(rt.spawn(async move {
            // Measured from before the interval exists: its first tick is at its creation.
            let start = Instant::now();
            let mut iv = interval(period);
            let mut ticks = Vec::new();
            for _ in 0..n {
                ticks.push((iv.tick().await, Instant::now()));
            }
            (start.elapsed(), ticks)
        }))
        .unwrap();
        assert!(
            elapsed >= period * (n - 1),
            "{n} ticks of {period:?} took {elapsed:?}"
        );
        for pair in ticks.windows(2) {
            let ((scheduled_a, seen_a), (scheduled_b, seen_b)) = (pair[0], pair[1]);
            assert!(
                scheduled_b > scheduled_a,
                "tick instants not increasing: {ticks:?}"
            );
            assert!(seen_b >= seen_a);
        }
        // No tick completes before its scheduled instant.
        for (k, &(scheduled, seen)) in ticks.iter().enumerate() {
            assert!(seen >= scheduled, "tick {k} completed before its instant");
        }
    }
}

#[test]
fn interval_on_one_worker_alongside_other_tasks() {
    let _guard = watchdog("interval_on_one_worker_alongside_other_tasks");
    let rt = runtime(1);
    let (tx, rx) = mpsc::channel();
    let ticker = rt.spawn(async move {
        let mut iv = interval(Duration::from_millis(2));
        for k in 0..10 {
            iv.tick().await;
            tx.send(k).unwrap();
        }
    });
    // Other tasks on the same worker meanwhile.
    let others: Vec<_> = (0..100).map(|i| rt.spawn(async move { i })).collect();
    for (i, other) in others.into_iter().enumerate() {
        assert_eq!(wait(other).unwrap(), i);
    }
    wait(ticker).unwrap();
    assert_eq!(rx.iter().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Cancel safety
// ---------------------------------------------------------------------------------------------

#[test]
fn a_sleep_that_loses_a_select_is_dropped() {
    let _guard = watchdog("a_sleep_that_loses_a_select_is_dropped");
    let rt = runtime(2);
    let outcomes = wait(rt.spawn(async {
        let mut outcomes = Vec::new();
        for _ in 0..1000 {
            let long = pin!(sleep(Duration::from_secs(3600)));
            let ready = pin!(async { 1 });
            outcomes.push(matches!(
                future::select(long, ready).await,
                Either::Right((1, _))
            ));
        }
        // And the other way round: the sleep wins against a future that never finishes.
        let short = pin!(sleep(Duration::from_millis(2)));
        let never = pin!(future::pending::<()>());
        outcomes.push(matches!(
            future::select(short, never).await,
            Either::Left(_)
        ));
        outcomes
    }))
    .unwrap();
    assert!(outcomes.iter().all(|&won| won), "{outcomes:?}");
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

#[test]
fn timers_pending_counts_filed_timers() {
    let _guard = watchdog("timers_pending_counts_filed_timers");
    let rt = runtime(2);
    assert_eq!(rt.stats().timers_pending, 0);
    let mut started = Vec::new();
    let sleepers: Vec<_> = (0..10)
        .map(|_| {
            let (tx, rx) = mpsc::channel();
            started.push(rx);
            rt.spawn(async move {
                let mut s = pin!(sleep(Duration::from_secs(3600)));
                assert!(futures::poll!(s.as_mut()).is_pending());
                tx.send(()).unwrap();
                s.await
            })
        })
        .collect();
    for rx in started {
        rx.recv().unwrap();
    }
    assert_eq!(rt.stats().timers_pending, 10);
    // Cancelling the tasks drops their sleeps, which removes the entries at once.
    for sleeper in &sleepers {
        sleeper.abort();
    }
    for sleeper in sleepers {
        assert!(wait(sleeper).unwrap_err().is_cancelled());
    }
    assert_eq!(
        rt.stats().timers_pending,
        0,
        "a dropped sleep left its timer filed"
    );
    // A timer that fired is no longer pending either.
    wait(rt.spawn(sleep(Duration::from_millis(1)))).unwrap();
    assert_eq!(rt.stats().timers_pending, 0, "a fired timer is still filed");
    // A sleep in block_on, on this plain thread, is filed with the block_on's runtime.
    let filed_here = rt.block_on(async {
        let mut s = pin!(sleep(Duration::from_secs(3600)));
        assert!(futures::poll!(s.as_mut()).is_pending());
        rt.stats().timers_pending
    });
    assert_eq!(filed_here, 1, "block_on's sleep was filed elsewhere");
    assert_eq!(rt.stats().timers_pending, 0);
}

// ---------------------------------------------------------------------------------------------
// Wakers that misbehave (issue 17). The full matrix is in `bombs_timers.rs`; these are the
// regression tests of the defects the review found.
// ---------------------------------------------------------------------------------------------

/// Polls `sleep` once with `waker`, inside `rt`'s `block_on` so that a first poll files the
/// timer with `rt`. Returns whether it is still pending.
fn poll_in(rt: &magpie::Runtime, sleep: &mut Pin<Box<Sleep>>, waker: &Waker) -> bool {
    rt.block_on(future::poll_fn(|_| {
        Poll::Ready(
            sleep
                .as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending(),
        )
    }))
}

/// Regression (issue 17, defect 4): `fire_due` woke each waker unguarded on a worker, under
/// the worker's abort guard, so a waker that panics in `wake` took the process down. Now the
/// panic is caught, and the other timers due in the same firing are woken all the same.
#[test]
fn a_waker_that_panics_when_its_timer_fires_strands_no_other_timer() {
    let _guard = watchdog_for(
        "a_waker_that_panics_when_its_timer_fires_strands_no_other_timer",
        Duration::from_secs(20),
    );
    let rt = runtime(1);
    // One deadline for all, so they come due in the same firing.
    let deadline = Instant::now() + Duration::from_millis(50);
    let wakers: Vec<_> = (0..6)
        .map(|i| {
            BombWaker::new(Fuses {
                wake: i % 3 == 1,
                ..Fuses::CALM
            })
        })
        .collect();
    let mut sleeps: Vec<_> = wakers
        .iter()
        .map(|_| Box::pin(sleep_until(deadline)))
        .collect();
    let mut pending = Vec::new();
    for (sleep, bomb) in sleeps.iter_mut().zip(&wakers) {
        // Pending unless this machine took 50 ms to get here; then nobody will wake it.
        pending.push(poll_in(&rt, sleep, &bomb.waker()));
    }
    for (bomb, pending) in wakers.iter().zip(pending) {
        if pending {
            bomb.wait_for_wakes(1);
        }
    }
    // The runtime still fires timers.
    rt.block_on(sleep(Duration::from_millis(1)));
    for (i, mut sleep) in sleeps.into_iter().enumerate() {
        assert!(
            poll_once(&mut sleep, futures::task::noop_waker_ref()).is_ready(),
            "sleep {i} woken before its deadline"
        );
    }
}

/// Regression (issue 17, defect 4): the driver dropped a replaced waker (`register`) or a
/// cancelled timer's waker (`deregister`) without a guard, so a waker whose drop panics made
/// a re-poll, or the drop of a `Sleep`, panic: now the panic is contained.
#[test]
fn a_waker_whose_drop_panics_is_dropped_quietly() {
    let _guard = watchdog_for(
        "a_waker_whose_drop_panics_is_dropped_quietly",
        Duration::from_secs(20),
    );
    let rt = runtime(1);
    let dud = BombWaker::new(Fuses {
        drop: true,
        ..Fuses::CALM
    });
    let mut s = Box::pin(sleep(Duration::from_secs(3600)));
    assert!(poll_in(&rt, &mut s, &dud.waker()));
    // Re-polled with another waker: the filed clone of `dud` is dropped.
    let calm = BombWaker::new(Fuses::CALM);
    let repoll = std::panic::catch_unwind(AssertUnwindSafe(|| poll_in(&rt, &mut s, &calm.waker())));
    assert!(
        matches!(repoll, Ok(true)),
        "re-polling a sleep panicked (or completed): {repoll:?}"
    );
    assert_eq!(dud.refs(), 0, "the replaced waker was not dropped");
    // Filed with `dud` again, then cancelled: the filed clone is dropped.
    assert!(poll_in(&rt, &mut s, &dud.waker()));
    let cancel = std::panic::catch_unwind(AssertUnwindSafe(|| drop(s)));
    assert!(cancel.is_ok(), "dropping a sleep panicked");
    assert_eq!(dud.refs(), 0, "the cancelled timer's waker was not dropped");
    assert_eq!(calm.refs(), 0);
    assert_eq!(rt.stats().timers_pending, 0);
    rt.block_on(sleep(Duration::from_millis(1)));
}

/// Owns a pending `Sleep`: dropping the last reference to this waker drops the sleep.
struct OwnsASleep(#[allow(dead_code)] Pin<Box<Sleep>>);

impl std::task::Wake for OwnsASleep {
    fn wake(self: std::sync::Arc<Self>) {}
}

/// Regression (issue 17, defect 9): `register` dropped the replaced waker while holding the
/// wheel's lock. A waker that owns another pending `Sleep` of the same runtime dropped that
/// sleep there, whose `deregister` took the same lock on the same thread: a deadlock.
#[test]
fn replacing_a_waker_that_owns_a_sleep_does_not_deadlock() {
    let _guard = watchdog_for(
        "replacing_a_waker_that_owns_a_sleep_does_not_deadlock (a waker dropped under the \
         wheel lock deadlocked on it)",
        Duration::from_secs(20),
    );
    let rt = runtime(1);
    let mut owned = Box::pin(sleep(Duration::from_secs(3600)));
    assert!(poll_in(&rt, &mut owned, futures::task::noop_waker_ref()));
    let owner = Waker::from(std::sync::Arc::new(OwnsASleep(owned)));
    let mut s = Box::pin(sleep(Duration::from_secs(3600)));
    assert!(poll_in(&rt, &mut s, &owner));
    // The wheel now holds the last reference to `owner`.
    drop(owner);
    assert_eq!(rt.stats().timers_pending, 2);
    // Re-polled with another waker: the wheel drops `owner`, which drops `owned`.
    assert!(poll_in(&rt, &mut s, futures::task::noop_waker_ref()));
    assert_eq!(
        rt.stats().timers_pending,
        1,
        "the owned sleep is still filed"
    );
    drop(s);
    assert_eq!(rt.stats().timers_pending, 0);
}

/// A task that sleeps in a loop on an otherwise idle pool wakes one worker per tick: the one
/// that waits in the driver for the deadline, and which then runs the task itself. Neither
/// the wake of the task into that worker's own ring (D3a in `sleep/README.md`) nor the
/// task's next `sleep`, filed while nobody holds the driver role (D5a), wakes another: the
/// worker that filed it takes the role itself when it parks. Before those rules, every tick
/// woke two more workers of a 4-worker pool, only for them to search and park again.
#[test]
fn a_periodic_timer_on_an_idle_pool_wakes_one_worker_per_tick() {
    const TICKS: u64 = 50;
    let rt = magpie::Runtime::builder()
        .worker_threads(4)
        .stall_threshold(None)
        .build()
        .unwrap();
    let unparks = |rt: &magpie::Runtime| rt.stats().workers.iter().map(|w| w.unparks).sum::<u64>();
    let before = unparks(&rt);
    let ticker = rt.spawn(async {
        for _ in 0..TICKS {
            sleep(Duration::from_millis(1)).await;
        }
    });
    wait(ticker).unwrap();
    let woken = unparks(&rt) - before;
    // One per tick, and a few for the start (the spawn from outside wakes a worker, which
    // may find the role held by another) and the end.
    assert!(
        woken <= TICKS + 5,
        "{woken} unparks for {TICKS} ticks of a periodic timer on an idle pool"
    );
}
