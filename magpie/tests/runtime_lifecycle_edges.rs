//! Timers and the runtime's lifecycle, used adversarially (from the review of issue 19):
//! timers at the extremes and outliving their runtime, a runtime dropped from its own
//! threads and hooks, re-entrant timer wakers, `block_on` inside `block_in_place`. None may
//! crash or hang. A hang becomes a failure through a `recv_timeout` of [`HANG`]; a runtime that a
//! failed test leaves stuck is leaked (`mem::forget`), so that its drop does not hang the
//! test binary in turn.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use magpie::task::block_in_place;
use magpie::time::{interval, interval_at, sleep, sleep_until, timeout};
use magpie::Runtime;

/// How long anything here may take before it counts as a hang. Not a timing assertion:
/// what is waited for takes milliseconds.
const HANG: Duration = Duration::from_secs(10);

fn runtime(workers: usize) -> Runtime {
    common::runtime(workers)
}

/// Polls `future` once on this thread with a waker that does nothing.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    std::pin::Pin::new(future).poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

/// Waits for `what` on `rx`; on a hang, leaks `rt` (whose drop would wait for the stuck
/// worker) and fails.
fn recv_or_leak<T>(rx: &mpsc::Receiver<T>, rt: Runtime, what: &str) -> (T, Runtime) {
    match rx.recv_timeout(HANG) {
        Ok(value) => (value, rt),
        Err(err) => {
            std::mem::forget(rt);
            panic!("{what}: {err:?} after {HANG:?} (a hang)");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timers and block_in_place
// ---------------------------------------------------------------------------------------------

/// `block_in_place` documents that its closure may call `block_on`; on a one-worker runtime
/// a timer awaited there is filed with that runtime, whose only worker is the one blocked.
/// That `block_on` turns the drivers itself (`WorkerThread::wait_blocked_on`); before it
/// did, nobody drove the wheel and the sleep never fired.
#[test]
fn a_sleep_in_block_on_inside_block_in_place_on_the_only_worker_fires() {
    let rt = runtime(1);
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        block_in_place(|| magpie::block_on(sleep(Duration::from_millis(2))));
        tx.send(()).unwrap();
    }));
    let ((), rt) = recv_or_leak(&rx, rt, "the sleep inside block_in_place");
    drop(rt);
}

/// Every worker inside `block_in_place`, each waiting in `block_on` for a timer: no worker
/// is left to drive the wheel but the blocked ones.
#[test]
fn sleeps_fire_while_every_worker_is_in_block_in_place() {
    let rt = runtime(2);
    let both_blocked = Arc::new(Barrier::new(2));
    let (tx, rx) = mpsc::channel();
    for _ in 0..2 {
        let both_blocked = both_blocked.clone();
        let tx = tx.clone();
        drop(rt.spawn(async move {
            block_in_place(|| {
                both_blocked.wait();
                magpie::block_on(sleep(Duration::from_millis(2)));
            });
            tx.send(()).unwrap();
        }));
    }
    let ((), rt) = recv_or_leak(&rx, rt, "the first sleep");
    let ((), rt) = recv_or_leak(&rx, rt, "the second sleep");
    drop(rt);
}

/// A `block_on` inside `block_in_place`, in a task, awaits a sleep filed with the task's
/// runtime; the runtime is dropped meanwhile. Its close wakes the sleep, whose next poll must
/// file it with a runtime that runs (the global one), as for any `block_on` outside the pool.
/// `in_task_of_terminating_runtime` reads the worker's polling word, which is non-zero inside
/// `block_in_place` too; before it also asked `is_blocking`, the sleep was filed nowhere, and
/// the `block_on` parked for good, and so did the drop, which waits for that worker.
#[test]
fn a_sleep_in_block_in_place_survives_its_runtime_drop() {
    let rt = runtime(2);
    let (filed_tx, filed_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    drop(rt.spawn(async move {
        block_in_place(|| {
            magpie::block_on(async {
                let mut nap = pin!(sleep(Duration::from_millis(500)));
                assert!(futures::poll!(nap.as_mut()).is_pending());
                filed_tx.send(()).unwrap();
                nap.await;
            });
        });
        done_tx.send(()).unwrap();
    }));
    filed_rx
        .recv_timeout(HANG)
        .expect("the sleep was never filed");
    let dropper = std::thread::spawn(move || drop(rt));
    done_rx
        .recv_timeout(HANG)
        .expect("the sleep never completed after its runtime was dropped (a hang)");
    dropper.join().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Dropping a runtime from its own threads
// ---------------------------------------------------------------------------------------------

/// The last handle of a runtime dropped in its `on_stall` hook, on the monitor thread. The
/// shutdown joins every thread of the runtime but that one: `pthread_join` on itself fails
/// with EDEADLK, and std's `JoinHandle::join` panics then ("failed to join thread").
#[test]
fn a_runtime_dropped_in_its_own_stall_hook_does_not_panic() {
    let slot: Arc<Mutex<Option<Arc<Runtime>>>> = Arc::new(Mutex::new(None));
    let hook_ran = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let tx = Mutex::new(tx);
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(1)
            .stall_threshold(Duration::from_millis(20))
            .on_stall({
                let slot = slot.clone();
                let hook_ran = hook_ran.clone();
                move |_info| {
                    let Some(rt) = slot.lock().unwrap().take() else {
                        return;
                    };
                    // Until the test has dropped its own handle: this one is the last.
                    while Arc::strong_count(&rt) > 1 {
                        std::thread::yield_now();
                    }
                    // Lets the stalled closure return, so that the workers can exit.
                    hook_ran.store(true, SeqCst);
                    let outcome = catch_unwind(AssertUnwindSafe(|| drop(rt)))
                        .map_err(|payload| common::payload_text(&*payload));
                    tx.lock().unwrap().send(outcome).unwrap();
                }
            })
            .build()
            .unwrap(),
    );
    *slot.lock().unwrap() = Some(rt.clone());
    let stalled = hook_ran.clone();
    drop(rt.submit(move || {
        while !stalled.load(SeqCst) {
            std::thread::yield_now();
        }
    }));
    drop(rt);
    let outcome = rx
        .recv_timeout(HANG)
        .expect("the stall hook never dropped the runtime");
    assert_eq!(outcome, Ok(()), "dropping the runtime in its stall hook");
}

/// The last handle of a runtime, dropped by a task of that runtime from inside `join`,
/// `scope` and `block_in_place` on its own worker: the drop returns (it does not join its own
/// thread), and the work around it finishes.
#[test]
fn a_runtime_dropped_on_its_own_worker_inside_join_scope_and_block_in_place() {
    for place in ["join", "scope", "block_in_place"] {
        let rt = runtime(2);
        let (give, take) = futures::channel::oneshot::channel::<Runtime>();
        let (tx, rx) = mpsc::channel();
        drop(rt.spawn(async move {
            let rt = take.await.unwrap();
            let sum = match place {
                "join" => {
                    let (_, b) = magpie::join(move || drop(rt), || common::fib(15));
                    b
                }
                "scope" => magpie::scope(move |s| {
                    s.spawn(move |_| drop(rt));
                    common::fib(15)
                }),
                _ => block_in_place(move || {
                    drop(rt);
                    common::fib(15)
                }),
            };
            // The task may be cancelled by the very shutdown it ran; it still gets here.
            let _ = tx.send(sum);
        }));
        give.send(rt).unwrap();
        let sum = rx
            .recv_timeout(HANG)
            .unwrap_or_else(|err| panic!("{place}: the drop on its own worker hung: {err:?}"));
        assert_eq!(sum, common::fib_sequential(15), "{place}");
    }
}

/// `shutdown_timeout` called by a task of the runtime itself, on its own worker, returns.
#[test]
fn shutdown_timeout_on_its_own_worker_returns() {
    let rt = runtime(2);
    let pending = rt.spawn(std::future::pending::<()>());
    let (give, take) = futures::channel::oneshot::channel::<Runtime>();
    let (tx, rx) = mpsc::channel();
    drop(rt.spawn(async move {
        take.await
            .unwrap()
            .shutdown_timeout(Duration::from_secs(60));
        let _ = tx.send(());
    }));
    give.send(rt).unwrap();
    rx.recv_timeout(HANG)
        .expect("shutdown_timeout on its own worker hung");
    assert!(pending.join().unwrap_err().is_cancelled());
}

/// A waker fired by the driver (on a worker) that drops the runtime's last handle, spawns on
/// it, and calls `block_on` (refused on a worker, with a panic the driver contains): nothing
/// escapes, and the timers of the same batch still fire.
#[test]
fn a_timer_waker_that_drops_the_last_handle_and_reenters() {
    struct Reentrant {
        rt: Mutex<Option<Runtime>>,
        done: Mutex<mpsc::Sender<&'static str>>,
    }
    impl Wake for Reentrant {
        fn wake(self: Arc<Self>) {
            let done = self.done.lock().unwrap().clone();
            drop(magpie::spawn(async {}));
            if let Some(rt) = self.rt.lock().unwrap().take() {
                drop(rt);
                done.send("dropped").unwrap();
            }
            // Panics: a worker is no place to block. The driver catches it.
            magpie::block_on(async {});
        }
    }
    let rt = runtime(2);
    let (tx, rx) = mpsc::channel();
    let waker = Arc::new(Reentrant {
        rt: Mutex::new(None),
        done: Mutex::new(tx.clone()),
    });
    let mut reentrant = Box::pin(sleep(Duration::from_millis(2)));
    let mut plain = Box::pin(sleep(Duration::from_millis(2)));
    let (plain_waker, plain_woken) = {
        let (tx, rx) = mpsc::channel::<()>();
        struct Signal(Mutex<mpsc::Sender<()>>);
        impl Wake for Signal {
            fn wake(self: Arc<Self>) {
                let _ = self.0.lock().unwrap().send(());
            }
        }
        (Waker::from(Arc::new(Signal(Mutex::new(tx)))), rx)
    };
    rt.block_on(std::future::poll_fn(|_| {
        let w = Waker::from(waker.clone());
        assert!(reentrant
            .as_mut()
            .poll(&mut Context::from_waker(&w))
            .is_pending());
        assert!(plain
            .as_mut()
            .poll(&mut Context::from_waker(&plain_waker))
            .is_pending());
        Poll::Ready(())
    }));
    *waker.rt.lock().unwrap() = Some(rt);
    assert_eq!(rx.recv_timeout(HANG), Ok("dropped"));
    plain_woken
        .recv_timeout(HANG)
        .expect("the other timer of the batch never fired");
    assert!(poll_once(&mut plain).is_ready());
}

// ---------------------------------------------------------------------------------------------
// Timers at the edges
// ---------------------------------------------------------------------------------------------

/// `sleep(Duration::MAX)`, `sleep_until` far ahead and far behind, `timeout(ZERO, ..)`, and
/// `interval` with a zero and a huge period: nothing overflows, nothing fires early, what is
/// due fires.
#[test]
fn timers_at_the_extremes() {
    let rt = runtime(2);
    rt.block_on(async {
        let mut forever = pin!(sleep(Duration::MAX));
        assert!(futures::poll!(forever.as_mut()).is_pending());
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        let mut far_sleep = pin!(sleep_until(far));
        assert!(futures::poll!(far_sleep.as_mut()).is_pending());
        if let Some(past) = Instant::now().checked_sub(Duration::from_secs(3600)) {
            sleep_until(past).await;
        }
        assert!(timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .is_err());
        assert_eq!(timeout(Duration::ZERO, async { 5 }).await, Ok(5));
        assert_eq!(timeout(Duration::MAX, async { 6 }).await, Ok(6));

        let mut fast = interval(Duration::ZERO);
        let first = fast.tick().await;
        let second = fast.tick().await;
        assert!(second > first);

        let mut once = interval(Duration::MAX);
        once.tick().await;
        let mut next = pin!(once.tick());
        assert!(futures::poll!(next.as_mut()).is_pending());

        // Ticks from the distant past burst: each is due at once.
        if let Some(start) = Instant::now().checked_sub(Duration::from_millis(50)) {
            let mut behind = interval_at(start, Duration::from_millis(10));
            for _ in 0..5 {
                let mut tick = pin!(behind.tick());
                assert!(futures::poll!(tick.as_mut()).is_ready());
            }
        }
    });
    assert_eq!(rt.stats().timers_pending, 0, "a dropped sleep stayed filed");
}

/// Thousands of timers filed, cancelled and filed again (a `timeout` around a future that
/// wins, in a loop, on several tasks): every entry leaves the wheel.
#[test]
fn thousands_of_timers_cancelled_and_refiled() {
    let rt = runtime(2);
    let handles: Vec<_> = (0..8)
        .map(|_| {
            rt.spawn(async {
                for i in 0..2_000u64 {
                    let won = timeout(Duration::from_secs(3600), async move {
                        if i % 3 == 0 {
                            magpie::task::yield_now().await;
                        }
                        i
                    })
                    .await;
                    assert_eq!(won, Ok(i));
                    let mut nap = pin!(sleep(Duration::from_millis(1 + i % 50)));
                    let _ = futures::poll!(nap.as_mut());
                }
            })
        })
        .collect();
    for handle in handles {
        rt.block_on(handle).unwrap();
    }
    assert_eq!(rt.stats().timers_pending, 0);
    // The wheel still works.
    rt.block_on(sleep(Duration::from_millis(2)));
}

/// A `Sleep` filed with runtime A and polled again after A is gone: in a task of runtime B
/// (it moves to B), in `magpie::block_on` outside any runtime (it moves to the global one),
/// and in a `Timeout` and an `Interval`: each completes.
#[test]
fn timers_of_a_dropped_runtime_complete_elsewhere() {
    let a = runtime(1);
    let b = runtime(2);
    let mut in_b = Box::pin(sleep(Duration::from_millis(30)));
    let mut outside = Box::pin(sleep(Duration::from_millis(30)));
    let mut bounded = Box::pin(timeout(
        Duration::from_millis(30),
        std::future::pending::<()>(),
    ));
    let mut ticks = interval(Duration::from_millis(30));
    a.block_on(async {
        assert!(futures::poll!(in_b.as_mut()).is_pending());
        assert!(futures::poll!(outside.as_mut()).is_pending());
        assert!(futures::poll!(bounded.as_mut()).is_pending());
        ticks.tick().await;
        let mut second = pin!(ticks.tick());
        assert!(futures::poll!(second.as_mut()).is_pending());
    });
    assert_eq!(a.stats().timers_pending, 4);
    drop(a);
    let (tx, rx) = mpsc::channel();
    drop(b.spawn(async move {
        in_b.await;
        ticks.tick().await;
        tx.send(()).unwrap();
    }));
    let ((), b) = recv_or_leak(&rx, b, "the sleep moved to runtime B");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        magpie::block_on(outside);
        tx.send(magpie::block_on(bounded).is_err()).unwrap();
    });
    let (elapsed, b) = recv_or_leak(&rx, b, "the sleep moved to the global runtime");
    assert!(elapsed);
    drop(b);
}

/// A `JoinHandle` of a runtime that was dropped, awaited in a task of another runtime and
/// joined on a plain thread; aborting it afterwards does nothing.
#[test]
fn join_handles_outlive_their_runtime() {
    let a = runtime(2);
    let b = runtime(2);
    let pending = a.spawn(std::future::pending::<u8>());
    let finished = a.spawn(async { 7u8 });
    while !finished.is_finished() {
        std::thread::yield_now();
    }
    let blocking = a.spawn_blocking(|| 9u8);
    drop(a);
    pending.abort();
    let (p, f) = b
        .block_on(b.spawn(async move { (pending.await, finished.await) }))
        .unwrap();
    assert!(p.unwrap_err().is_cancelled());
    assert_eq!(f.unwrap(), 7);
    // Run to the end before the drop, or cancelled by it.
    match blocking.join() {
        Ok(v) => assert_eq!(v, 9),
        Err(err) => assert!(err.is_cancelled()),
    }
}

/// Task hooks that panic, spawn and re-enter while the runtime drops: the terminate hook
/// runs on the dropping thread for the tasks the shutdown cancels, and its spawns are
/// refused there (cancelled handles), not sent to the global runtime. The hook respawns on
/// every call, as a supervisor would: a spawn refused during the shutdown runs no hook, so
/// this ends (it ran the terminate hook again, which spawned again, until the stack
/// overflowed).
#[test]
fn task_hooks_that_panic_and_spawn_during_shutdown() {
    let terminated = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_spawn(|_| panic!("spawn hook"))
        .on_task_terminate({
            let terminated = terminated.clone();
            let refused = refused.clone();
            move |_| {
                terminated.fetch_add(1, SeqCst);
                let handle = magpie::spawn(async {});
                if futures::executor::block_on(handle).is_err_and(|e| e.is_cancelled()) {
                    refused.fetch_add(1, SeqCst);
                }
                panic!("terminate hook");
            }
        })
        .build()
        .unwrap();
    let handles: Vec<_> = (0..20)
        .map(|_| rt.spawn(std::future::pending::<()>()))
        .collect();
    let dropped = catch_unwind(AssertUnwindSafe(|| drop(rt)));
    assert!(dropped.is_ok(), "the drop panicked");
    for handle in handles {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
    // The 20 cancelled tasks; the 20 spawns their hooks made were refused, without hooks.
    assert_eq!(terminated.load(SeqCst), 20);
    assert_eq!(
        refused.load(SeqCst),
        20,
        "a spawn during shutdown was not refused"
    );
}

/// The last handle of a runtime kept in a thread-local of one of its blocking threads: when
/// the thread exits after its keep-alive, the thread-local's destructor drops the runtime,
/// on a thread of its own blocking pool, during thread-local teardown. The drop must neither
/// abort (a thread-local read with `with` after its teardown) nor wait for that very thread.
/// In a child process, since the failure is an abort.
#[test]
fn a_runtime_dropped_by_a_thread_local_of_its_own_blocking_thread() {
    const NAME: &str = "a_runtime_dropped_by_a_thread_local_of_its_own_blocking_thread";
    if !common::is_child("tls-drop") {
        let out = common::run_child(common::child_test(NAME, "tls-drop"));
        assert!(
            out.status.success(),
            "child failed: {:?}\n{}",
            out.status,
            out.stderr
        );
        return;
    }
    thread_local! {
        static KEEP: std::cell::RefCell<Option<Runtime>> = const { std::cell::RefCell::new(None) };
    }
    let rt = Runtime::builder()
        .worker_threads(2)
        .blocking_keep_alive(Duration::from_millis(1))
        .build()
        .unwrap();
    let pending = rt.spawn(std::future::pending::<()>());
    let (give, take) = mpsc::channel::<Runtime>();
    drop(rt.spawn_blocking(move || {
        let rt = take.recv().unwrap();
        KEEP.with(|keep| *keep.borrow_mut() = Some(rt));
    }));
    give.send(rt).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(pending.join()).unwrap());
    let outcome = rx
        .recv_timeout(HANG)
        .expect("the runtime kept by the thread-local was never dropped");
    assert!(outcome.unwrap_err().is_cancelled());
}

/// `block_on` of runtime B nested inside `block_on` of runtime A on a plain thread, and the
/// other way round, each with timers: the innermost runtime is current for the free
/// functions, and every timer fires.
#[test]
fn nested_block_on_of_two_runtimes_with_timers() {
    let a = runtime(1);
    let b = runtime(2);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = a.block_on(async {
                sleep(Duration::from_millis(1)).await;
                let inner = b.block_on(async {
                    sleep(Duration::from_millis(1)).await;
                    let nested = a.block_on(async {
                        sleep(Duration::from_millis(1)).await;
                        magpie::current_num_workers()
                    });
                    (magpie::current_num_workers(), nested)
                });
                (magpie::current_num_workers(), inner)
            });
            tx.send(out).unwrap();
        });
        let out = rx.recv_timeout(HANG).expect("nested block_on hung");
        assert_eq!(out, (1, (2, 1)));
    });
}

/// `Runtime::block_on` inside a task of another runtime is refused with the documented
/// panic, delivered to the task's handle; the worker survives.
#[test]
fn block_on_of_another_runtime_inside_a_task_panics_clearly() {
    let a = runtime(1);
    let b = Arc::new(runtime(1));
    let inner = b.clone();
    let err = a
        .block_on(a.spawn(async move { inner.block_on(async { 1 }) }))
        .unwrap_err();
    let message = common::payload_text(&*err.into_panic());
    assert!(
        message.contains("called on a worker thread"),
        "unexpected message: {message}"
    );
    assert_eq!(a.block_on(a.spawn(async { 2 })).unwrap(), 2);
}
