//! Adversarial tests of `magpie::time`: the cooperative budget against `timeout`, timers
//! filed while every worker is blocked in a `block_on` inside `block_in_place`, wheel level
//! boundaries, re-entrant wakers, and timers across `set_active_workers`.
//!
//! Timing assertions are only "not early" (`Instant::now() >= deadline` after the wait); an
//! upper bound appears only as a hang guard ([`DEADLINE`]).

mod common;

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use common::{named_runtime, panic_message, runtime, wait_until_asleep, DEADLINE};
use magpie::task::block_in_place;
use magpie::time::{interval, interval_at, sleep, sleep_until, timeout, timeout_at, Sleep};
use magpie::Runtime;

/// Waits for `rx` up to the hang guard; on a hang, leaks `rt` (its workers may be stuck) and
/// fails with `what`.
fn recv_or_leak<T>(rx: &mpsc::Receiver<T>, rt: Runtime, what: &str) -> (T, Runtime) {
    match rx.recv_timeout(DEADLINE) {
        Ok(value) => (value, rt),
        Err(e) => {
            std::mem::forget(rt);
            panic!("{what}: hung ({e:?})");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// timeout vs. the cooperative budget
// ---------------------------------------------------------------------------------------------

/// An inner future that makes progress through magpie's own futures on every poll (here: a
/// `sleep(ZERO)`, ready at once, each spending a unit of the budget) spends the whole budget
/// of every poll. The `Timeout` around it polls its own `Sleep` afterwards, with the budget
/// at zero: that poll answers `Pending` every time, so the deadline is never seen and the
/// timeout never elapses. (tokio polls the delay unconstrained when the inner future spent
/// the budget, for exactly this.)
#[test]
fn timeout_elapses_around_a_future_that_spends_the_whole_budget() {
    let rt = runtime(2);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let busy = {
        let stop = stop.clone();
        async move {
            let mut turns = 0u64;
            while !stop.load(SeqCst) {
                sleep(Duration::ZERO).await;
                turns += 1;
            }
            turns
        }
    };
    drop(rt.spawn(async move {
        let start = Instant::now();
        let result = timeout(Duration::from_millis(20), busy).await;
        let _ = tx.send((result.is_err(), start.elapsed()));
    }));
    let outcome = rx.recv_timeout(DEADLINE);
    // Let the spinning task finish either way.
    stop.store(true, SeqCst);
    let (elapsed, took) =
        outcome.expect("timeout(20 ms) around a budget-spending future never elapsed");
    assert!(elapsed, "the inner future cannot finish before `stop`");
    assert!(took >= Duration::from_millis(20));
    drop(rt);
}

/// The same in `Runtime::block_on`, which grants a budget per poll as a worker does.
#[test]
fn timeout_in_block_on_elapses_around_a_future_that_spends_the_whole_budget() {
    let rt = runtime(1);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let worker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let rt2 = runtime(1);
            let busy = async {
                while !stop.load(SeqCst) {
                    sleep(Duration::ZERO).await;
                }
            };
            let result = rt2.block_on(timeout(Duration::from_millis(20), busy));
            let _ = tx.send(result.is_err());
        })
    };
    let outcome = rx.recv_timeout(DEADLINE);
    stop.store(true, SeqCst);
    worker.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "timeout(20 ms) in block_on never elapsed around a budget-spending future"
    );
    drop(rt);
}

/// `timeout_at` around a loop of sleeps until past instants (each ready at its first poll,
/// one unit of budget each) starves in the same way.
#[test]
fn timeout_at_elapses_around_a_loop_of_past_sleeps() {
    let rt = runtime(2);
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let busy = {
        let stop = stop.clone();
        async move {
            while !stop.load(SeqCst) {
                let past = Instant::now();
                sleep_until(past).await;
            }
        }
    };
    drop(rt.spawn(async move {
        let deadline = Instant::now() + Duration::from_millis(20);
        let result = magpie::time::timeout_at(deadline, busy).await;
        let _ = tx.send((result.is_err(), Instant::now() >= deadline));
    }));
    let outcome = rx.recv_timeout(DEADLINE);
    stop.store(true, SeqCst);
    let (elapsed, not_early) =
        outcome.expect("timeout_at around a budget-spending future never elapsed");
    assert!(elapsed && not_early);
    drop(rt);
}

// ---------------------------------------------------------------------------------------------
// Timers filed while every worker is blocked
// ---------------------------------------------------------------------------------------------

/// The only worker is inside `block_in_place`, in a `block_on` that waits for a channel (no
/// timer of its own, so it parks with no timeout). A `block_on` on an outside thread then
/// files a 10 ms sleep with the same runtime. The module docs promise that a `block_on` in
/// `block_in_place` "turns the drivers itself while it waits: the other workers may all be
/// blocked too", but the registration's rearm wakes only a worker parked in the idle set or
/// the driver, and this thread is neither: nobody fires the sleep, and the outside thread
/// (which would then release the blocked worker) waits for good.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_filed_while_the_only_worker_blocks_in_block_on_fires() {
    let rt = Arc::new(named_runtime(1, "tadv-a"));
    let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
    let (blocked_done_tx, blocked_done_rx) = mpsc::channel();
    drop(rt.spawn(async move {
        block_in_place(|| magpie::block_on(release_rx)).unwrap();
        blocked_done_tx.send(()).unwrap();
    }));
    // The worker is in `block_on`'s park (no timer: no timeout).
    wait_until_asleep("tadv-a", 1);
    let (slept_tx, slept_rx) = mpsc::channel();
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(10);
            rt.block_on(sleep_until(deadline));
            slept_tx.send(Instant::now() >= deadline).unwrap();
        })
    };
    let outcome = slept_rx.recv_timeout(DEADLINE);
    // Unblock the worker either way, which lets it fire the timer when it goes idle.
    let _ = release_tx.send(());
    blocked_done_rx.recv_timeout(DEADLINE).unwrap();
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a sleep filed while the only worker waits in block_on inside block_in_place never fired"
    );
}

/// As above on two workers, one switched off by `set_active_workers(1)`: the switched-off
/// worker does not drive the timers either.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_filed_while_the_only_active_worker_blocks_in_block_on_fires() {
    let rt = Arc::new(named_runtime(2, "tadv-b"));
    rt.set_active_workers(1).unwrap();
    let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
    let (blocked_done_tx, blocked_done_rx) = mpsc::channel();
    drop(rt.spawn(async move {
        block_in_place(|| magpie::block_on(release_rx)).unwrap();
        blocked_done_tx.send(()).unwrap();
    }));
    wait_until_asleep("tadv-b", 2);
    let (slept_tx, slept_rx) = mpsc::channel();
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(10);
            rt.block_on(sleep_until(deadline));
            slept_tx.send(Instant::now() >= deadline).unwrap();
        })
    };
    let outcome = slept_rx.recv_timeout(DEADLINE);
    let _ = release_tx.send(());
    blocked_done_rx.recv_timeout(DEADLINE).unwrap();
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a sleep filed while the only active worker waits in block_on inside block_in_place never fired"
    );
}

// ---------------------------------------------------------------------------------------------
// Deadlines at the wheel's level boundaries, in the past, and far ahead
// ---------------------------------------------------------------------------------------------

/// Sleeps whose deadlines lie around the level boundaries of the wheel (64 and 4096 ms from
/// now, ±1 ms, and a few in between), all filed at once and from one task each: every one
/// completes, none before its deadline.
#[test]
fn sleeps_around_level_boundaries_fire_and_never_early() {
    let rt = runtime(2);
    let offsets: Vec<u64> = vec![
        0, 1, 2, 62, 63, 64, 65, 66, 127, 128, 129, 4031, 4032, 4095, 4096, 4097, 4160,
    ];
    let (tx, rx) = mpsc::channel();
    let base = Instant::now();
    for &ms in &offsets {
        let task_tx = tx.clone();
        drop(rt.spawn(async move {
            let deadline = base + Duration::from_millis(ms);
            sleep_until(deadline).await;
            task_tx.send((ms, Instant::now() >= deadline)).unwrap();
        }));
        // The same deadline from `magpie::block_on` on an outside thread (the global runtime).
        let tx = tx.clone();
        let deadline = base + Duration::from_millis(ms);
        std::thread::spawn(move || {
            magpie::block_on(sleep_until(deadline));
            tx.send((ms, Instant::now() >= deadline)).unwrap();
        });
    }
    drop(tx);
    let mut seen = Vec::new();
    let mut rt = rt;
    for _ in 0..offsets.len() * 2 {
        let ((ms, not_early), back) = recv_or_leak(&rx, rt, "a sleep near a level boundary");
        rt = back;
        assert!(not_early, "the sleep of {ms} ms fired early");
        seen.push(ms);
    }
    assert_eq!(seen.len(), offsets.len() * 2);
    assert_eq!(rt.stats().timers_pending, 0);
}

/// The largest `Instant` this platform can represent (by doubling, then bisecting).
fn latest_instant() -> Instant {
    let now = Instant::now();
    let mut lo = Duration::ZERO;
    let mut hi = Duration::from_secs(1);
    while now.checked_add(hi).is_some() {
        lo = hi;
        match hi.checked_mul(2) {
            Some(next) => hi = next,
            None => return now + lo,
        }
    }
    for _ in 0..200 {
        let mid = lo + (hi - lo) / 2;
        if mid == lo {
            break;
        }
        if now.checked_add(mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    now + lo
}

/// A sleep until the latest representable `Instant` (its wheel deadline saturates), an
/// interval starting there, and a `timeout_at` there: filed without overflow, and a short
/// sleep filed after them still fires (the driver, parked for the far deadline, is woken for
/// the near one). Dropping them leaves nothing filed.
#[test]
fn timers_at_the_latest_instant_do_not_block_near_ones() {
    let rt = runtime(1);
    let end = latest_instant();
    let mut far = Box::pin(sleep_until(end));
    let mut far_ticks = interval_at(end, Duration::from_millis(1));
    let mut far_timeout = Box::pin(timeout_at(end, std::future::pending::<()>()));
    rt.block_on(async {
        assert!(futures::poll!(far.as_mut()).is_pending());
        assert!(futures::poll!(pin!(far_ticks.tick())).is_pending());
        assert!(futures::poll!(far_timeout.as_mut()).is_pending());
    });
    // The interval's sleep stays filed though its tick future is gone.
    assert_eq!(rt.stats().timers_pending, 3);
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        let deadline = Instant::now() + Duration::from_millis(5);
        sleep_until(deadline).await;
        tx.send(Instant::now() >= deadline).unwrap();
    }));
    let (not_early, rt) = recv_or_leak(&rx, rt, "a near sleep behind a far one");
    assert!(not_early);
    drop((far, far_timeout, far_ticks));
    assert_eq!(rt.stats().timers_pending, 0);
}

/// `Duration::MAX` through every constructor, and `interval(ZERO)` (rounded up to 1 ms, as
/// documented, rather than a panic or a tick on every poll): consecutive ticks differ by at
/// least a millisecond and none is early.
#[test]
fn interval_of_period_zero_ticks_one_ms_apart_and_never_early() {
    let rt = runtime(1);
    rt.block_on(async {
        let mut ticks = interval(Duration::ZERO);
        assert_eq!(ticks.period(), Duration::from_millis(1));
        let mut last = ticks.tick().await;
        for _ in 0..20 {
            let tick = ticks.tick().await;
            assert!(Instant::now() >= tick, "a tick came before its instant");
            assert_eq!(tick - last, Duration::from_millis(1));
            last = tick;
        }
        let mut never = pin!(sleep(Duration::MAX));
        assert!(futures::poll!(never.as_mut()).is_pending());
        assert!(!never.is_elapsed());
    });
}

/// Missed ticks burst (documented): after a stall of about 10 periods every tick is due at
/// once, each exactly one period after the last, and the first tick after the burst is not
/// early.
#[test]
fn interval_burst_after_a_stall_keeps_the_schedule() {
    let rt = runtime(1);
    rt.block_on(async {
        let period = Duration::from_millis(3);
        let mut ticks = interval(period);
        let first = ticks.tick().await;
        common::spin_for(period * 10);
        let mut last = first;
        let mut caught_up = false;
        for _ in 0..40 {
            let tick = ticks.tick().await;
            assert_eq!(tick - last, period, "a tick skipped or repeated");
            assert!(Instant::now() >= tick, "a tick came before its instant");
            last = tick;
            if tick > first + period * 12 {
                caught_up = true;
            }
        }
        assert!(caught_up);
    });
}

// ---------------------------------------------------------------------------------------------
// Panics, cancellation at scale, re-entrancy
// ---------------------------------------------------------------------------------------------

/// A future that panics inside `timeout` (before and after the timeout's sleep is filed):
/// the task fails with the panic, and the timeout's entry leaves the wheel.
#[test]
fn a_panic_inside_timeout_unfiles_its_sleep() {
    let rt = runtime(2);
    let first = rt.spawn(timeout(Duration::from_secs(3600), async {
        panic!("boom at once");
    }));
    let later = rt.spawn(timeout(Duration::from_secs(3600), async {
        magpie::task::yield_now().await;
        sleep(Duration::from_millis(2)).await;
        panic!("boom later");
    }));
    let err = rt.block_on(first).unwrap_err();
    assert!(err.is_panic());
    let err = rt.block_on(later).unwrap_err();
    assert!(err.is_panic());
    assert_eq!(
        panic_message(move || std::panic::resume_unwind(err.into_panic())),
        "boom later"
    );
    common::eventually("the panicked timeouts' sleeps leave the wheel", || {
        rt.stats().timers_pending == 0
    });
    rt.block_on(sleep(Duration::from_millis(1)));
}

/// Counts its wakes.
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// 50,000 sleeps filed with one runtime, due at once, dropped from four threads while the
/// driver fires them: no panic, no abort, every entry leaves the wheel, and the wheel still
/// works.
#[test]
fn thousands_of_timers_dropped_while_they_fire() {
    const N: usize = 50_000;
    let rt = runtime(2);
    let counter = Arc::new(CountWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    // Far enough for the polls below to file every one before it is due.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut sleeps: Vec<Pin<Box<Sleep>>> = (0..N)
        .map(|i| {
            Box::pin(sleep_until(
                deadline + Duration::from_micros((i % 4000) as u64),
            ))
        })
        .collect();
    rt.block_on(async {
        let mut cx = Context::from_waker(&waker);
        for s in &mut sleeps {
            let _ = s.as_mut().poll(&mut cx);
        }
    });
    // Not a synchronisation: only makes the drops race the firing.
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
    let chunks: Vec<Vec<_>> = {
        let mut chunks = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for (i, s) in sleeps.into_iter().enumerate() {
            chunks[i % 4].push(s);
        }
        chunks
    };
    let threads: Vec<_> = chunks
        .into_iter()
        .map(|chunk| std::thread::spawn(move || drop(chunk)))
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    common::eventually("every dropped sleep leaves the wheel", || {
        rt.stats().timers_pending == 0
    });
    assert!(counter.0.load(SeqCst) <= N, "a timer fired twice");
    let deadline = Instant::now() + Duration::from_millis(3);
    rt.block_on(sleep_until(deadline));
    assert!(Instant::now() >= deadline);
}

/// A waker that, when its timer is woken by the runtime's shutdown, polls the same `Sleep`
/// again from inside `wake` (re-entering the timer while the close runs): the sleep moves to
/// the global runtime and completes there, at its deadline.
#[test]
fn a_waker_that_repolls_its_sleep_during_the_close_moves_it() {
    struct Repoll {
        sleep: Mutex<Option<Pin<Box<Sleep>>>>,
        done: Mutex<Option<mpsc::Sender<bool>>>,
        me: Mutex<Option<Waker>>,
    }
    impl Repoll {
        fn poll(self: &Arc<Self>) {
            let waker = self.me.lock().unwrap().clone().unwrap();
            let mut cx = Context::from_waker(&waker);
            let mut slot = self.sleep.lock().unwrap();
            if let Some(s) = slot.as_mut() {
                if s.as_mut().poll(&mut cx).is_ready() {
                    let deadline = s.deadline();
                    *slot = None;
                    if let Some(done) = self.done.lock().unwrap().take() {
                        done.send(Instant::now() >= deadline).unwrap();
                    }
                }
            }
        }
    }
    impl Wake for Repoll {
        fn wake(self: Arc<Self>) {
            self.poll();
        }
    }
    let rt = runtime(1);
    let (tx, rx) = mpsc::channel();
    let repoll = Arc::new(Repoll {
        sleep: Mutex::new(Some(Box::pin(sleep(Duration::from_millis(40))))),
        done: Mutex::new(Some(tx)),
        me: Mutex::new(None),
    });
    *repoll.me.lock().unwrap() = Some(Waker::from(repoll.clone()));
    {
        let repoll = repoll.clone();
        rt.block_on(async move { repoll.poll() });
    }
    assert_eq!(rt.stats().timers_pending, 1);
    drop(rt);
    let not_early = rx
        .recv_timeout(DEADLINE)
        .expect("the sleep re-polled during its runtime's close never fired");
    assert!(not_early);
    // Break the cycle waker -> Repoll -> waker.
    repoll.me.lock().unwrap().take();
}

/// Two tasks poll one `Sleep` through a mutex (documented: the waker of the last poll is
/// the one woken). The last poller is woken and sees it ready; the sleep is not early.
#[test]
fn a_sleep_shared_by_two_tasks_wakes_the_last_poller() {
    let rt = runtime(2);
    let shared = Arc::new(Mutex::new(Box::pin(sleep(Duration::from_millis(15)))));
    let deadline = shared.lock().unwrap().deadline();
    let first_polled = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let first = {
        let shared = shared.clone();
        let first_polled = first_polled.clone();
        rt.spawn(std::future::poll_fn(move |cx| {
            let ready = shared.lock().unwrap().as_mut().poll(cx).is_ready();
            first_polled.store(true, SeqCst);
            if ready {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }))
    };
    while !first_polled.load(SeqCst) {
        std::thread::yield_now();
    }
    {
        let shared = shared.clone();
        drop(rt.spawn(async move {
            std::future::poll_fn(|cx| shared.lock().unwrap().as_mut().poll(cx)).await;
            tx.send(Instant::now() >= deadline).unwrap();
        }));
    }
    let (not_early, rt) = recv_or_leak(&rx, rt, "the last poller of a shared sleep");
    assert!(not_early);
    first.abort();
    drop(rt);
}

// ---------------------------------------------------------------------------------------------
// set_active_workers
// ---------------------------------------------------------------------------------------------

/// Hundreds of sleeping tasks while the pool shrinks to one worker and grows back, over and
/// over: every sleep completes, none early.
#[test]
fn sleeps_complete_while_the_pool_shrinks_and_grows() {
    let rt = runtime(4);
    const TASKS: usize = 400;
    let (tx, rx) = mpsc::channel();
    for i in 0..TASKS {
        let tx = tx.clone();
        drop(rt.spawn(async move {
            let mut ok = true;
            for round in 0..3u64 {
                let deadline =
                    Instant::now() + Duration::from_millis(1 + (i as u64 * 7 + round) % 25);
                sleep_until(deadline).await;
                ok &= Instant::now() >= deadline;
            }
            tx.send(ok).unwrap();
        }));
    }
    drop(tx);
    let mut done = 0;
    let mut n = 1;
    let guard = Instant::now() + DEADLINE;
    while done < TASKS {
        rt.set_active_workers(n).unwrap();
        n = n % 4 + 1;
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok(ok) => {
                assert!(ok, "a sleep fired early");
                done += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("{e:?}"),
        }
        if Instant::now() > guard {
            std::mem::forget(rt);
            panic!("only {done} of {TASKS} sleeping tasks finished while the pool was resized");
        }
    }
    // Settle on one worker: a fresh sleep still fires.
    rt.set_active_workers(1).unwrap();
    let deadline = Instant::now() + Duration::from_millis(5);
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        sleep_until(deadline).await;
        tx.send(()).unwrap();
    }));
    let ((), rt) = recv_or_leak(&rx, rt, "a sleep on a pool shrunk to one worker");
    drop(rt);
}

/// A sleep filed with runtime A, awaited in `Runtime::block_on` of runtime B on an outside
/// thread and in `magpie::block_on` (the global runtime's) on another, while A's pool is
/// shrunk to one worker: each completes at its deadline, staying filed with A.
#[test]
fn a_sleep_filed_with_one_runtime_completes_in_block_on_of_another() {
    let a = runtime(3);
    let b = Arc::new(runtime(1));
    a.set_active_workers(1).unwrap();
    let mut in_b = Box::pin(sleep(Duration::from_millis(20)));
    let mut global = Box::pin(sleep(Duration::from_millis(20)));
    a.block_on(async {
        assert!(futures::poll!(in_b.as_mut()).is_pending());
        assert!(futures::poll!(global.as_mut()).is_pending());
    });
    assert_eq!(a.stats().timers_pending, 2);
    let (tx, rx) = mpsc::channel();
    {
        let tx = tx.clone();
        let b = b.clone();
        std::thread::spawn(move || {
            let deadline = in_b.deadline();
            b.block_on(in_b);
            tx.send(Instant::now() >= deadline).unwrap();
        });
    }
    std::thread::spawn(move || {
        let deadline = global.deadline();
        magpie::block_on(global);
        tx.send(Instant::now() >= deadline).unwrap();
    });
    let (first, a) = recv_or_leak(&rx, a, "a sleep of runtime A in another block_on");
    let (second, a) = recv_or_leak(&rx, a, "a sleep of runtime A in another block_on");
    assert!(first && second);
    assert_eq!(a.stats().timers_pending, 0);
    assert_eq!(b.stats().timers_pending, 0);
}

/// The same lost wake-up inside one runtime, with no outside thread: the only worker's task
/// waits in `block_in_place(|| block_on(..))` for a result that a `spawn_blocking` closure of
/// the same runtime produces after a 10 ms `magpie::block_on(sleep(..))`. The closure's sleep
/// is filed with the runtime (the blocking thread's current one), but the one thread that
/// could fire it is parked in `wait_blocked_on` with no timeout, and the rearm never reaches
/// it.
#[cfg(target_os = "linux")]
#[test]
fn a_blocking_closure_sleeping_for_a_task_blocked_in_place_wakes_it() {
    let rt = named_runtime(1, "tadv-c");
    let (result_tx, result_rx) = futures::channel::oneshot::channel::<bool>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    drop(rt.spawn(async move {
        let not_early = block_in_place(|| magpie::block_on(result_rx)).unwrap_or(false);
        let _ = done_tx.send(not_early);
    }));
    wait_until_asleep("tadv-c", 1);
    drop(rt.spawn_blocking(move || {
        // Starts the sleep only once told to (the worker is parked by then).
        go_rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_millis(10);
        magpie::block_on(sleep_until(deadline));
        let _ = result_tx.send(Instant::now() >= deadline);
    }));
    go_tx.send(()).unwrap();
    match done_rx.recv_timeout(DEADLINE) {
        Ok(not_early) => {
            assert!(not_early);
            drop(rt);
        }
        Err(e) => {
            // Both threads are stuck for good: leak the runtime rather than wait on it.
            std::mem::forget(rt);
            panic!(
                "a task blocked in place waiting for a blocking closure's 10 ms sleep never \
                 woke ({e:?})"
            );
        }
    }
}

/// A sleep filed with runtime A, A dropped; polled in B's `block_on` (moves to B), B
/// dropped; then awaited on a plain thread with no runtime (moves to the global one): it
/// completes, not early, and neither runtime's drop hangs on it.
#[test]
fn a_sleep_moved_through_two_dropped_runtimes_completes() {
    let a = runtime(1);
    let b = runtime(1);
    let mut nap = Box::pin(sleep(Duration::from_millis(30)));
    let deadline = nap.deadline();
    a.block_on(async { assert!(futures::poll!(nap.as_mut()).is_pending()) });
    drop(a);
    b.block_on(async { assert!(futures::poll!(nap.as_mut()).is_pending()) });
    assert_eq!(b.stats().timers_pending, 1, "the sleep did not move to B");
    drop(b);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        futures::executor::block_on(nap);
        tx.send(Instant::now() >= deadline).unwrap();
    });
    assert!(rx
        .recv_timeout(DEADLINE)
        .expect("a sleep moved through two dropped runtimes never fired"));
}

/// `Timeout::into_inner` after the timeout's sleep was filed: the entry leaves the wheel,
/// and the inner future is intact.
#[test]
fn timeout_into_inner_unfiles_the_sleep() {
    let rt = runtime(1);
    let (tx, rx) = futures::channel::oneshot::channel::<u8>();
    let mut t = Box::pin(timeout(Duration::from_secs(3600), rx));
    rt.block_on(async { assert!(futures::poll!(t.as_mut()).is_pending()) });
    assert_eq!(rt.stats().timers_pending, 1);
    let inner = Pin::into_inner(t).into_inner();
    assert_eq!(rt.stats().timers_pending, 0);
    tx.send(4).unwrap();
    assert_eq!(rt.block_on(inner), Ok(4));
}

/// Two workers: one waits in a `scope` for a spawn the other took, and that spawn blocks (in
/// `block_in_place`, as recommended) on a channel that an outside thread's `block_on` feeds
/// after a 10 ms sleep filed with the same runtime. The scope's worker is idle, but a worker
/// waiting in `join`/`scope` never drives the timers (R6: `IdleLoop::park` tries the role
/// only `!join_wait`, `spin` turns the drivers only `!join_wait`), and the rearm wakes only
/// workers outside `join`: the sleep never fires though a worker sits idle.
#[cfg(target_os = "linux")]
#[test]
fn a_timer_fires_while_the_only_free_worker_waits_in_a_scope() {
    let rt = Arc::new(named_runtime(2, "tadv-d"));
    let (tx, rx) = mpsc::channel::<bool>();
    let taken = AtomicBool::new(false);
    let (scope_done_tx, scope_done_rx) = mpsc::channel();
    let installer = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            let got = rt.install(move || {
                let mut got = None;
                let taken = &taken;
                magpie::scope(|s| {
                    let got = &mut got;
                    s.spawn(move |_| {
                        taken.store(true, SeqCst);
                        *got = Some(block_in_place(|| rx.recv_timeout(DEADLINE * 3)));
                    });
                    // Keep the body busy until the spawn runs elsewhere (another worker took
                    // it), so that this worker then waits in the scope.
                    while !taken.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                });
                got
            });
            let _ = scope_done_tx.send(got);
        })
    };
    // Both workers asleep: one in the scope's wait, one blocked in `recv`.
    wait_until_asleep("tadv-d", 2);
    let (slept_tx, slept_rx) = mpsc::channel();
    let release = tx.clone();
    let outside = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_millis(10);
            rt.block_on(sleep_until(deadline));
            let not_early = Instant::now() >= deadline;
            let _ = tx.send(not_early);
            slept_tx.send(not_early).unwrap();
        })
    };
    let outcome = slept_rx.recv_timeout(DEADLINE);
    // On a hang, release the blocked spawn: its worker then fires the sleep.
    let _ = release.send(false);
    let got = scope_done_rx
        .recv_timeout(DEADLINE * 4)
        .expect("the scope never ended");
    installer.join().unwrap();
    outside.join().unwrap();
    assert_eq!(
        outcome.ok(),
        Some(true),
        "a 10 ms sleep never fired while a worker sat idle in a scope's wait (got {got:?})"
    );
}
