//! Adversarial user code around the async task core: task hooks that respawn, wakers that
//! re-enter the `JoinHandle`, a handle polled from two places, a task that aborts itself or
//! drops its own handle, the blocking pool at its limit, the cooperative budget, and the
//! statistics and live-task dump under churn. Each test asserts what the runtime promises
//! (no crash, no hang, every value dropped exactly once); hangs become failures through a
//! [`Deadline`] or a child process with a deadline (`common::run_child`).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::deadline::Deadline;
use common::{assert_monotonic, eventually, DEADLINE};
use magpie::{JoinHandle, Runtime, UnhandledPanic};

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The messages of the panics these tests provoke on purpose.
const EXPECTED: [&str; 3] = ["blocking closure", "a cancelled future's drop", "unhandled"];

/// Keeps the provoked panics (see [`EXPECTED`]) out of the output; every other panic is
/// reported by the default hook.
fn silence_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !EXPECTED.contains(&message) {
                default(info);
            }
        }));
    });
}

/// Runs the test `name` again in a child process in mode `mode`, and asserts that the child
/// exited normally (a stack overflow or an abort is a failure with the child's stderr).
fn in_child(name: &str, mode: &str) {
    let out = common::run_child(common::child_test(name, mode));
    assert!(
        out.status.success(),
        "the child crashed: {:?}\nstderr:\n{}",
        out.status,
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------
// A terminate hook that respawns on every call (a supervisor).
// ---------------------------------------------------------------------------------------

/// A supervisor: the terminate hook spawns a replacement for every task that ends. While
/// the runtime drops, the shutdown cancels the live task on the dropping thread, whose
/// terminate hook spawns; that spawn is refused (the live list is closed) and the refused
/// task is cancelled at once, synchronously, running the terminate hook again, which
/// spawns again... The hook must see its spawn refused (a cancelled handle), not recurse
/// until the stack overflows. In a child process: the failure is an abort.
#[test]
fn a_respawning_terminate_hook_does_not_recurse_when_the_runtime_drops() {
    const NAME: &str = "a_respawning_terminate_hook_does_not_recurse_when_the_runtime_drops";
    if !common::is_child("respawn-drop") {
        in_child(NAME, "respawn-drop");
        return;
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_terminate({
            let calls = calls.clone();
            move |_| {
                calls.fetch_add(1, SeqCst);
                drop(magpie::spawn(std::future::pending::<()>()));
            }
        })
        .build()
        .unwrap();
    let handle = rt.spawn(std::future::pending::<()>());
    drop(rt);
    assert!(handle.join().unwrap_err().is_cancelled());
    // The pending task's: its replacement is refused without hooks. (A few more calls would
    // do; a stack's worth would not.)
    let calls = calls.load(SeqCst);
    assert!((1..1000).contains(&calls), "{calls} terminate hook calls");
}

/// The same supervisor on a worker: an unhandled panic under `ShutdownRuntime` cancels
/// every live task on the completing worker, the terminate hook's spawn (to the worker's
/// own runtime) is refused there, and the refused task's terminate hook spawns again.
#[test]
fn a_respawning_terminate_hook_does_not_recurse_after_an_unhandled_panic() {
    const NAME: &str = "a_respawning_terminate_hook_does_not_recurse_after_an_unhandled_panic";
    if !common::is_child("respawn-unhandled") {
        in_child(NAME, "respawn-unhandled");
        return;
    }
    silence_expected_panics();
    let rt = Runtime::builder()
        .worker_threads(2)
        .unhandled_panic(UnhandledPanic::ShutdownRuntime)
        .on_task_terminate(|_| drop(magpie::spawn(std::future::pending::<()>())))
        .build()
        .unwrap();
    let waiting = rt.spawn(std::future::pending::<()>());
    drop(rt.spawn(async { panic!("unhandled") }));
    let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(std::future::pending::<()>())
    }));
    assert!(
        resumed.is_err(),
        "block_on did not resume the unhandled panic"
    );
    assert!(waiting.join().unwrap_err().is_cancelled());
    drop(rt);
}

/// The bounded form of the supervisor (it respawns a fixed number of times) works while the
/// runtime runs: every replacement runs, and `wait_idle` waits for the last.
#[test]
fn a_terminate_hook_that_respawns_a_bounded_number_of_times() {
    let _deadline = Deadline::new("bounded respawn", DEADLINE);
    let left = Arc::new(AtomicUsize::new(100));
    let ran = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_terminate({
            let left = left.clone();
            let ran = ran.clone();
            move |_| {
                if left
                    .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let ran = ran.clone();
                    drop(magpie::spawn(async move {
                        ran.fetch_add(1, SeqCst);
                    }));
                }
            }
        })
        .build()
        .unwrap();
    drop(rt.spawn(async {}));
    rt.wait_idle();
    assert_eq!(ran.load(SeqCst), 100);
    assert_eq!(left.load(SeqCst), 0);
}

// ---------------------------------------------------------------------------------------
// Join wakers that re-enter, handles polled from two places.
// ---------------------------------------------------------------------------------------

/// A waker that owns the `JoinHandle` it is the join waker of, and drops it when woken.
struct DropsHandleOnWake {
    handle: Mutex<Option<JoinHandle<Counted>>>,
    woken: AtomicUsize,
}

impl Wake for DropsHandleOnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.fetch_add(1, SeqCst);
        let handle = self.handle.lock().unwrap().take();
        drop(handle);
    }
}

/// The completer wakes the join waker, and the waker drops the handle right there, on the
/// worker, between `COMPLETE` and the completer's release of the waker slot. The unread
/// output must be dropped exactly once (by the handle's destructor), the waker released
/// (no reference cycle left behind), and the worker must go on.
#[test]
fn a_join_waker_that_drops_the_handle_when_woken() {
    let _deadline = Deadline::new("join waker drops handle", DEADLINE);
    let rt = common::runtime(2);
    for _ in 0..200 {
        let drops = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let output = Counted(drops.clone());
        let mut handle = rt.spawn(async move {
            let _ = wait.recv();
            output
        });
        let waker_state = Arc::new(DropsHandleOnWake {
            handle: Mutex::new(None),
            woken: AtomicUsize::new(0),
        });
        let waker = Waker::from(waker_state.clone());
        let polled = Pin::new(&mut handle).poll(&mut Context::from_waker(&waker));
        assert!(polled.is_pending(), "the task cannot have finished");
        *waker_state.handle.lock().unwrap() = Some(handle);
        drop(waker);
        go.send(()).unwrap();
        eventually("the waker was woken and released", || {
            waker_state.woken.load(SeqCst) == 1 && Arc::strong_count(&waker_state) == 1
        });
        assert!(waker_state.handle.lock().unwrap().is_none());
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the output was not dropped exactly once"
        );
    }
    assert_eq!(rt.block_on(rt.spawn(async { 3 })).unwrap(), 3);
}

/// A waker that counts its wakes and its live clones.
struct CountingWaker {
    wakes: AtomicUsize,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
    }
}

/// A handle polled by two pollers in turn (two executors, or two tasks handing it back and
/// forth): only the last waker is kept and woken, the replaced ones are released, and the
/// output is read once.
#[test]
fn a_join_handle_polled_from_two_pollers_in_turn() {
    let _deadline = Deadline::new("handle polled in turn", DEADLINE);
    let rt = common::runtime(2);
    let a = Arc::new(CountingWaker {
        wakes: AtomicUsize::new(0),
    });
    let b = Arc::new(CountingWaker {
        wakes: AtomicUsize::new(0),
    });
    let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
    let (go, wait) = mpsc::channel::<()>();
    let drops = Arc::new(AtomicUsize::new(0));
    let output = Counted(drops.clone());
    let mut handle = rt.spawn(async move {
        let _ = wait.recv();
        output
    });
    for round in 0..100 {
        let waker = if round % 2 == 0 { &wa } else { &wb };
        let polled = Pin::new(&mut handle).poll(&mut Context::from_waker(waker));
        assert!(polled.is_pending());
    }
    // The last poll left `b`'s waker; `a`'s clone was released.
    assert_eq!(Arc::strong_count(&a), 2, "a replaced join waker leaked");
    go.send(()).unwrap();
    eventually("the last waker was woken", || b.wakes.load(SeqCst) == 1);
    assert_eq!(a.wakes.load(SeqCst), 0, "a replaced waker was woken");
    let polled = Pin::new(&mut handle).poll(&mut Context::from_waker(&wa));
    let Poll::Ready(Ok(output)) = polled else {
        panic!("the handle of a finished task was not ready");
    };
    drop(output);
    drop(handle);
    assert_eq!(drops.load(SeqCst), 1);
    eventually("every join waker clone was released", || {
        Arc::strong_count(&a) == 2 && Arc::strong_count(&b) == 2
    });
}

/// A handle polled after it returned `Ready` panics with a clear message (documented), and
/// the task and its output are still freed exactly once.
#[test]
fn a_join_handle_polled_after_ready_panics_clearly() {
    let rt = common::runtime(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let output = Counted(drops.clone());
    let mut handle = rt.spawn(async move { output });
    let first = rt.block_on(&mut handle).unwrap();
    drop(first);
    let message = common::panic_message(|| {
        let _ =
            Pin::new(&mut handle).poll(&mut Context::from_waker(futures::task::noop_waker_ref()));
    });
    assert!(message.contains("after it returned"), "{message}");
    drop(handle);
    assert_eq!(drops.load(SeqCst), 1);
}

/// `JoinHandle::join` inside a task panics with a message naming it, rather than blocking
/// the worker; the task's handle gets that panic.
#[test]
fn join_on_a_worker_panics_clearly() {
    let _deadline = Deadline::new("join on a worker", DEADLINE);
    let rt = common::runtime(1);
    let inner = rt.spawn(async { 1 });
    let outer = rt.spawn(async move { inner.join() });
    let err = rt.block_on(outer).unwrap_err();
    assert!(err.is_panic());
    let payload = err.into_panic();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(message.contains("JoinHandle::join"), "{message}");
}

// ---------------------------------------------------------------------------------------
// A task that aborts itself, drops its own handle, or whose cancelled future's drop panics.
// ---------------------------------------------------------------------------------------

/// A future that, on its first poll, takes its own handle out of `slot`, aborts itself and
/// (if `drop_handle`) drops the handle, then waits for good. Its drop is counted, and
/// panics if `bomb`.
struct SelfAborting {
    slot: Arc<Mutex<Option<JoinHandle<()>>>>,
    drop_handle: bool,
    bomb: bool,
    _counted: Counted,
}

impl Future for SelfAborting {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let handle = self.slot.lock().unwrap().take();
        if let Some(handle) = handle {
            handle.abort();
            if self.drop_handle {
                drop(handle);
            } else {
                *self.slot.lock().unwrap() = Some(handle);
            }
        }
        Poll::Pending
    }
}

impl Drop for SelfAborting {
    fn drop(&mut self) {
        if self.bomb && !std::thread::panicking() {
            panic!("a cancelled future's drop");
        }
    }
}

/// Every combination of: the task aborts itself during its poll, keeps or drops its own
/// handle there, and its future's destructor panics or not. The future is dropped exactly
/// once, after the poll, the handle (if kept) says why, and the runtime goes on; a panic
/// nobody will see is an unhandled panic, ignored by default.
#[test]
fn a_task_that_aborts_itself_and_drops_its_own_handle() {
    let _deadline = Deadline::new("self abort", DEADLINE);
    silence_expected_panics();
    let rt = common::runtime(2);
    for drop_handle in [false, true] {
        for bomb in [false, true] {
            let drops = Arc::new(AtomicUsize::new(0));
            let slot = Arc::new(Mutex::new(None));
            let (go, wait) = mpsc::channel::<()>();
            let future = SelfAborting {
                slot: slot.clone(),
                drop_handle,
                bomb,
                _counted: Counted(drops.clone()),
            };
            // Held back until the handle is in the slot.
            let handle = rt.spawn(async move {
                let _ = wait.recv();
                future.await
            });
            *slot.lock().unwrap() = Some(handle);
            go.send(()).unwrap();
            eventually("the future was dropped", || drops.load(SeqCst) == 1);
            rt.wait_idle();
            assert_eq!(drops.load(SeqCst), 1);
            let kept = slot.lock().unwrap().take();
            assert_eq!(kept.is_some(), !drop_handle);
            if let Some(handle) = kept {
                let err = handle.join().unwrap_err();
                assert_eq!(
                    err.is_panic(),
                    bomb,
                    "drop_handle {drop_handle} bomb {bomb}"
                );
                assert_eq!(err.is_cancelled(), !bomb);
            }
        }
    }
    assert_eq!(rt.block_on(rt.spawn(async { 4 })).unwrap(), 4);
}

/// Abort racing completion from another thread, many times: the handle yields the output
/// or a cancellation, never hangs, and the output is dropped exactly once either way.
#[test]
fn abort_racing_completion() {
    let _deadline = Deadline::new("abort racing completion", DEADLINE);
    let rt = common::runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut outputs = 0;
    for i in 0..2000 {
        let output = Counted(drops.clone());
        let handle = Arc::new(rt.spawn(async move {
            magpie::task::yield_now().await;
            output
        }));
        let aborter = {
            let handle = handle.clone();
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    std::thread::yield_now();
                }
                handle.abort();
            })
        };
        aborter.join().unwrap();
        let handle = Arc::into_inner(handle).unwrap();
        match handle.join() {
            Ok(output) => {
                outputs += 1;
                drop(output);
            }
            Err(err) => assert!(err.is_cancelled()),
        }
    }
    rt.wait_idle();
    assert_eq!(drops.load(SeqCst), 2000, "{outputs} outputs were read");
}

// ---------------------------------------------------------------------------------------
// The blocking pool.
// ---------------------------------------------------------------------------------------

/// A pool of one blocking thread: a closure spawns a second one and joins it, which can
/// never start (the documented deadlock of a full pool). Dropping the runtime must still
/// return: the queued closure is cancelled, which wakes the first with a cancellation.
#[test]
fn a_full_blocking_pool_waiting_on_itself_still_shuts_down() {
    let _deadline = Deadline::new("full blocking pool shutdown", DEADLINE);
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (started, is_started) = mpsc::channel::<()>();
    let (result, got) = mpsc::channel::<bool>();
    let first = rt.spawn_blocking(move || {
        let second = magpie::spawn_blocking(|| 7);
        started.send(()).unwrap();
        let cancelled = second.join().is_err_and(|e| e.is_cancelled());
        result.send(cancelled).unwrap();
    });
    is_started.recv_timeout(DEADLINE).unwrap();
    drop(rt);
    assert!(
        got.recv_timeout(DEADLINE).unwrap(),
        "the second closure ran"
    );
    first.join().unwrap();
}

/// Blocking closures that panic, and one that spawns blocking closures until the pool's
/// limit and beyond: every handle resolves, and the pool keeps working.
#[test]
fn blocking_closures_that_panic_and_fan_out_past_the_limit() {
    let _deadline = Deadline::new("blocking fan out", DEADLINE);
    silence_expected_panics();
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let panicked = rt.spawn_blocking(|| -> u8 { panic!("blocking closure") });
    assert!(rt.block_on(panicked).unwrap_err().is_panic());
    let total = rt
        .spawn_blocking(|| {
            let handles: Vec<_> = (0..32u64)
                .map(|i| magpie::spawn_blocking(move || i))
                .collect();
            // Joined from a pool thread while the other one runs them, one after the other.
            handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        })
        .join()
        .unwrap();
    assert_eq!(total, (0..32).sum::<u64>());
}

/// A blocking closure that outlives its runtime (`shutdown_timeout` leaves it running)
/// still delivers its output to its handle.
#[test]
fn a_blocking_closure_outlives_its_runtime() {
    let _deadline = Deadline::new("blocking closure outlives runtime", DEADLINE);
    let rt = common::runtime(1);
    let (started, is_started) = mpsc::channel::<()>();
    let (release, released) = mpsc::channel::<()>();
    let handle = rt.spawn_blocking(move || {
        started.send(()).unwrap();
        released.recv().unwrap();
        11
    });
    is_started.recv_timeout(DEADLINE).unwrap();
    rt.shutdown_timeout(Duration::ZERO);
    release.send(()).unwrap();
    assert_eq!(handle.join().unwrap(), 11);
}

// ---------------------------------------------------------------------------------------
// The cooperative budget.
// ---------------------------------------------------------------------------------------

/// On one worker, a task that loops on a timer that is always ready (a zero sleep) never
/// returns `Pending` of its own accord; the budget must make it yield so that the other
/// task on that worker runs and stops it.
#[test]
fn an_always_ready_loop_lets_the_other_tasks_of_its_worker_run() {
    let _deadline = Deadline::new("coop budget", DEADLINE);
    let rt = common::runtime(1);
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = rt.spawn({
        let stop = stop.clone();
        async move {
            let mut turns = 0u64;
            while !stop.load(SeqCst) {
                magpie::time::sleep(Duration::ZERO).await;
                turns += 1;
            }
            turns
        }
    });
    let stopper = rt.spawn({
        let stop = stop.clone();
        async move { stop.store(true, SeqCst) }
    });
    rt.block_on(stopper).unwrap();
    assert!(rt.block_on(spinner).unwrap() > 0);
    assert!(rt.stats().workers[0].budget_forced_yields > 0);
}

// ---------------------------------------------------------------------------------------
// Statistics and the live-task dump under churn.
// ---------------------------------------------------------------------------------------

/// Tasks spawned from outside and from tasks, stolen, yielding and completing while another
/// thread takes statistics and dumps: the counters never go backwards, and each dump lists
/// every task once with at most one task running per worker.
#[test]
fn stats_and_dump_under_churn() {
    let _deadline = Deadline::new("stats and dump under churn", DEADLINE);
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .task_insight(true)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let rt = rt.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut then = rt.stats();
            let mut dumps = 0;
            while !stop.load(SeqCst) || dumps < 10 {
                let now = rt.stats();
                assert_monotonic(&then, &now);
                then = now;
                let tasks = rt.tasks();
                let mut ids: Vec<_> = tasks.iter().map(|t| t.id).collect();
                ids.dedup();
                assert_eq!(ids.len(), tasks.len(), "a task listed twice");
                let mut running = [0usize; 2];
                for task in &tasks {
                    if let magpie::task::TaskState::Running { worker } = task.state {
                        running[worker] += 1;
                    }
                }
                assert!(running.iter().all(|&n| n <= 1), "{running:?}");
                dumps += 1;
            }
        })
    };
    for _ in 0..50 {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                rt.spawn(async move {
                    let children: Vec<_> = (0..4)
                        .map(|_| {
                            magpie::spawn(async {
                                magpie::task::yield_now().await;
                            })
                        })
                        .collect();
                    for child in children {
                        child.await.unwrap();
                    }
                    if i % 3 == 0 {
                        magpie::task::yield_now().await;
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    }
    stop.store(true, SeqCst);
    observer.join().unwrap();
    rt.wait_idle();
    assert!(rt.tasks().is_empty());
}

// ---------------------------------------------------------------------------------------
// `wait_idle` across a shutdown by an unhandled panic.
// ---------------------------------------------------------------------------------------

/// A pending future whose drop (the first of its kind to run) asks, from another thread,
/// whether `wait_idle` returns while this very drop is still running.
struct ProbesWaitIdle {
    rt: std::sync::Weak<Runtime>,
    probe: Arc<AtomicBool>,
    returned_early: Arc<AtomicBool>,
}

impl Future for ProbesWaitIdle {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for ProbesWaitIdle {
    fn drop(&mut self) {
        if !self.probe.swap(false, SeqCst) {
            return;
        }
        let Some(rt) = self.rt.upgrade() else { return };
        let (done, is_done) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            rt.wait_idle();
            let _ = done.send(());
        });
        // Only a failure can be seen here: `wait_idle` returning while this drop, part of
        // a task's cancellation, has not finished. If it does not return in this window,
        // the test passes (at worst a false pass on a very slow machine, never a false
        // failure).
        if is_done.recv_timeout(Duration::from_secs(1)).is_ok() {
            self.returned_early.store(true, SeqCst);
        }
    }
}

/// `wait_idle` promises that every task has completed or been cancelled when it returns
/// (and the terminate hooks of those tasks have run). An unhandled panic under
/// `ShutdownRuntime` cancels every live task on the completing worker; `wait_idle` must not
/// return while those cancellations (the futures' destructors) are still running.
#[test]
fn wait_idle_does_not_return_while_an_unhandled_panic_cancels_tasks() {
    let _deadline = Deadline::new("wait_idle across an unhandled panic", DEADLINE);
    silence_expected_panics();
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .unhandled_panic(UnhandledPanic::ShutdownRuntime)
            .build()
            .unwrap(),
    );
    let probe = Arc::new(AtomicBool::new(true));
    let returned_early = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            rt.spawn(ProbesWaitIdle {
                rt: Arc::downgrade(&rt),
                probe: probe.clone(),
                returned_early: returned_early.clone(),
            })
        })
        .collect();
    drop(rt.spawn(async { panic!("unhandled") }));
    for handle in handles {
        assert!(handle.join().unwrap_err().is_cancelled());
    }
    assert!(!probe.load(SeqCst), "no cancelled future was dropped");
    assert!(
        !returned_early.load(SeqCst),
        "wait_idle returned while a cancelled task's future was still being dropped"
    );
}
