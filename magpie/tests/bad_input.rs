//! Bad input to every public entry point: each nonsense value gets a documented `Err` (or a
//! handle that resolves to cancelled, or a documented panic-free behaviour), never a panic,
//! an abort or a hang.
//!
//! Each case checks the exact error variant with its fields, and the exact `Display` text, so
//! that a message that stops saying what was wrong fails here. Builder calls run under
//! `catch_unwind`, so a panic fails the case with a message instead of ending the binary.
//!
//! Cases that need a process of their own run this binary again as a child (see
//! `common::child_test`): configuring the global runtime (once per process) and a panic on
//! the smallest accepted stack (an overflow there aborts the process).

mod common;

use std::error::Error;
use std::future::Future;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::{child_test, is_child, run_child};
use futures::task::noop_waker_ref;
use magpie::task::{JoinError, JoinHandle};
use magpie::time::{interval, interval_at, sleep, timeout};
use magpie::{BuildError, Builder, Runtime, SubmitError, MAX_WORKERS, MIN_STACK_SIZE};

/// Builds `builder` under `catch_unwind` and returns the error it must fail with.
#[track_caller]
fn build_err(builder: Builder) -> BuildError {
    let result = panic::catch_unwind(AssertUnwindSafe(|| builder.build()))
        .unwrap_or_else(|_| panic!("Builder::build panicked instead of returning an error"));
    match result {
        Ok(rt) => panic!("built {rt:?} from a bad configuration"),
        Err(err) => err,
    }
}

/// Checks `err`'s `Display` text exactly, and that it is an `Error` with no source (a
/// configuration error has no underlying cause).
#[track_caller]
fn assert_message(err: &BuildError, expected: &str) {
    assert_eq!(err.to_string(), expected, "{err:?}");
    assert!(err.source().is_none(), "{err:?}");
}

fn two_workers() -> Builder {
    Runtime::builder().worker_threads(2)
}

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

#[track_caller]
fn assert_cancelled<T>(result: Result<T, JoinError>, what: &str) {
    match result {
        Ok(_) => panic!("{what}: ran on a runtime that had shut down"),
        Err(err) => assert!(err.is_cancelled(), "{what}: {err:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Builder
// ---------------------------------------------------------------------------------------------

#[test]
fn zero_workers() {
    let err = build_err(Runtime::builder().worker_threads(0));
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");
    assert_message(&err, "a runtime needs at least one worker thread");
    // Also when max_workers would leave room: the active count is what must be positive.
    let err = build_err(Runtime::builder().worker_threads(0).max_workers(4));
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");
}

#[test]
fn more_workers_than_max_workers_allows() {
    for requested in [MAX_WORKERS + 1, usize::MAX] {
        let err = build_err(Runtime::builder().worker_threads(requested));
        assert!(
            matches!(err, BuildError::TooManyWorkers { requested: r } if r == requested),
            "{err:?}"
        );
        assert_message(
            &err,
            &format!("{requested} worker threads requested; at most 65536 are supported"),
        );
    }
    // A `max_workers` beyond the limit is refused the same way, before anything starts.
    let err = build_err(two_workers().max_workers(MAX_WORKERS + 1));
    assert!(
        matches!(err, BuildError::TooManyWorkers { requested } if requested == MAX_WORKERS + 1),
        "{err:?}"
    );
}

#[test]
fn max_workers_below_worker_threads() {
    for max in [0, 1] {
        let err = build_err(two_workers().max_workers(max));
        assert!(
            matches!(err, BuildError::MaxWorkersBelowWorkers { workers: 2, max: m } if m == max),
            "{err:?}"
        );
        assert_message(
            &err,
            &format!("max_workers({max}) is below the 2 worker threads"),
        );
    }
}

#[test]
fn steal_groups_out_of_range() {
    // Zero groups, more groups than workers, and more than the maximum with max_workers
    // (which is what groups are counted against).
    let cases = [
        (two_workers().steal_groups(0), 0, 2),
        (two_workers().steal_groups(3), 3, 2),
        (two_workers().steal_groups(usize::MAX), usize::MAX, 2),
        (two_workers().max_workers(4).steal_groups(5), 5, 4),
    ];
    for (builder, groups, workers) in cases {
        let err = build_err(builder);
        assert!(
            matches!(err, BuildError::InvalidStealGroups { groups: g, workers: w }
                if (g, w) == (groups, workers)),
            "{err:?}"
        );
        assert_message(
            &err,
            &format!("{groups} steal groups requested for {workers} workers; use 1 to {workers}"),
        );
    }
    // The limits themselves are accepted.
    for groups in [1, 4] {
        let rt = two_workers().max_workers(4).steal_groups(groups).build();
        assert_eq!(
            rt.expect("groups in range").stats().steal_groups,
            groups as u64
        );
    }
}

#[test]
fn stack_size_out_of_range() {
    let max = isize::MAX as usize;
    for requested in [0, 1, MIN_STACK_SIZE - 1, max + 1, usize::MAX] {
        let err = build_err(two_workers().stack_size(requested));
        assert!(
            matches!(err, BuildError::InvalidStackSize { requested: r } if r == requested),
            "{err:?}"
        );
        assert_message(
            &err,
            &format!("a stack of {requested} bytes requested; use 65536 to {max} bytes"),
        );
    }
    // In range but more than any machine has: the OS refuses it, which is `Spawn`, with the
    // OS error as its source.
    let err = build_err(two_workers().stack_size(max));
    match &err {
        BuildError::Spawn { index: 0, .. } => {}
        other => panic!("expected Spawn for worker 0, got {other:?}"),
    }
    assert!(err.source().is_some(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("could not start worker thread 0: "),
        "{err}"
    );
}

/// The child mode of [`smallest_stack_survives_a_panic_with_a_backtrace`].
const SMALL_STACK_CHILD: &str = "bad_input_small_stack";
const SMALL_STACK_OK: &str = "small stack child: ok";

/// Regression: `stack_size(0)` used to be accepted (the OS rounds it up to 16 KiB), and the
/// first user panic on such a worker overflowed its stack while printing the backtrace,
/// aborting the process. The smallest stack accepted now must survive that, in a debug build
/// with `RUST_BACKTRACE=1`, on a worker (a submitted closure, a task) and on a blocking
/// thread; run in a child, since a failure is an abort.
#[test]
fn smallest_stack_survives_a_panic_with_a_backtrace() {
    let mut command = child_test("child_small_stack_panics", SMALL_STACK_CHILD);
    command.env("RUST_BACKTRACE", "1");
    let out = run_child(command);
    assert!(
        out.status.success() && out.stdout.contains(SMALL_STACK_OK),
        "a panic on a {MIN_STACK_SIZE}-byte stack killed the child: {out:?}"
    );
}

#[test]
fn child_small_stack_panics() {
    if !is_child(SMALL_STACK_CHILD) {
        return;
    }
    let rt = two_workers().stack_size(MIN_STACK_SIZE).build().unwrap();
    let closure = rt.submit(|| panic!("closure panic"));
    assert!(wait(closure).unwrap_err().is_panic());
    let task = rt.spawn(async { panic!("task panic") });
    assert!(wait(task).unwrap_err().is_panic());
    let blocking = rt.spawn_blocking(|| panic!("blocking panic"));
    assert!(wait(blocking).unwrap_err().is_panic());
    // The workers are still there.
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
    println!("{SMALL_STACK_OK}");
}

/// Regression: `trace_capacity(usize::MAX)` panicked in `build` (rounding up to a power of
/// two overflowed); a capacity too large to allocate aborted.
#[test]
fn trace_capacity_too_large() {
    for requested in [(1 << 24) + 1, 1 << 40, usize::MAX] {
        let err = build_err(two_workers().trace(true).trace_capacity(requested));
        assert!(
            matches!(err, BuildError::InvalidTraceCapacity { requested: r } if r == requested),
            "{err:?}"
        );
        assert_message(
            &err,
            &format!(
                "a trace ring of {requested} events requested; at most 16777216 are supported"
            ),
        );
    }
    // Zero (rounded up to the smallest ring) and a small ring build.
    for capacity in [0, 1 << 10] {
        let rt = two_workers().trace(true).trace_capacity(capacity).build();
        rt.expect("a capacity in range")
            .install(|| magpie::join(|| (), || ()));
    }
}

#[test]
fn zero_blocking_threads() {
    let err = build_err(two_workers().max_blocking_threads(0));
    assert!(matches!(err, BuildError::ZeroBlockingThreads), "{err:?}");
    assert_message(&err, "the blocking pool needs at least one thread");
}

#[test]
fn thread_name_with_a_nul_byte() {
    let err = build_err(two_workers().thread_name("bad\0name"));
    assert!(matches!(err, BuildError::InvalidThreadName), "{err:?}");
    assert_message(&err, "thread names may not contain NUL bytes");
}

// ---------------------------------------------------------------------------------------------
// A running runtime
// ---------------------------------------------------------------------------------------------

#[test]
fn submit_to_a_worker_out_of_range() {
    let rt = two_workers().max_workers(3).build().unwrap();
    for worker in [3, 4, usize::MAX] {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            rt.submit_to(worker, move || r.store(true, SeqCst))
        }))
        .expect("submit_to panicked");
        let err = result.expect_err("an index out of range was accepted");
        assert_eq!(err, SubmitError::NoSuchWorker { worker, workers: 3 });
        assert_eq!(
            err.to_string(),
            format!("no worker {worker}: the runtime has 3 workers")
        );
        assert!(err.source().is_none());
        assert!(!ran.load(SeqCst), "a refused closure ran");
    }
    // Worker 2 exists (parked, beyond the 2 active): accepted, and run by an active worker.
    assert_eq!(wait(rt.submit_to(2, || 5).unwrap()).unwrap(), 5);
}

#[test]
fn set_active_workers_out_of_range() {
    let rt = two_workers().max_workers(3).build().unwrap();
    for requested in [0, 4, usize::MAX] {
        let result = panic::catch_unwind(AssertUnwindSafe(|| rt.set_active_workers(requested)))
            .expect("set_active_workers panicked");
        let err = result.expect_err("a count out of range was accepted");
        assert_eq!((err.requested(), err.max()), (requested, 3));
        assert_eq!(
            err.to_string(),
            format!("{requested} active workers requested; use 1 to 3")
        );
        assert!(err.source().is_none());
        assert_eq!(rt.active_workers(), 2, "a refused count changed something");
    }
}

#[test]
fn trace_export_to_an_unwritable_path() {
    let dir = std::env::temp_dir().join(format!("magpie-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = two_workers().trace(true).build().unwrap();
    rt.install(|| magpie::join(|| (), || ()));

    // A file in a directory that does not exist.
    let missing = dir.join("no-such-directory").join("trace.json");
    let err = rt
        .trace_export(&missing)
        .expect_err("wrote into a missing directory");
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "cannot write the trace to {}: ",
            missing.display()
        )),
        "the message does not name the path: {message}"
    );

    // A path that is a directory.
    // (`ErrorKind::IsADirectory` is newer than the minimum Rust version: the OS message
    // says it.)
    let err = rt.trace_export(&dir).expect_err("wrote over a directory");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("cannot write the trace to {}: ", dir.display())),
        "the message does not name the path: {message}"
    );
    #[cfg(target_os = "linux")]
    assert!(
        message.ends_with("Is a directory (os error 21)"),
        "{message}"
    );

    // The empty path.
    let err = rt.trace_export("").expect_err("wrote to the empty path");
    assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err:?}");

    // Tracing off: refused before any file is touched.
    let untraced = two_workers().trace(false).build().unwrap();
    let path = dir.join("untraced.json");
    let err = untraced
        .trace_export(&path)
        .expect_err("exported without tracing");
    assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err:?}");
    assert_eq!(
        err.to_string(),
        "tracing is off: build the runtime with Builder::trace(true) or set MAGPIE_TRACE=1"
    );
    assert!(!path.exists());

    // The runtime is unaffected: a good path still works.
    let good = dir.join("trace.json");
    rt.trace_export(&good).expect("export to a writable path");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Timers
// ---------------------------------------------------------------------------------------------

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(noop_waker_ref()))
}

#[test]
fn timers_with_extreme_durations() {
    let rt = two_workers().build().unwrap();
    rt.block_on(async {
        // `Duration::MAX` is accepted and never fires; its timer is filed and dropped.
        let mut forever = pin!(sleep(Duration::MAX));
        assert!(poll_once(forever.as_mut()).is_pending());
        assert!(!forever.is_elapsed());
        // `Duration::ZERO` is due at once.
        assert!(poll_once(pin!(sleep(Duration::ZERO))).is_ready());

        assert_eq!(timeout(Duration::MAX, async { 1 }).await, Ok(1));
        let mut never = pin!(timeout(Duration::MAX, std::future::pending::<()>()));
        assert!(poll_once(never.as_mut()).is_pending());
        assert!(timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .is_err());
    });
    assert_eq!(rt.stats().timers_pending, 0, "a dropped timer stayed filed");
}

/// Regression: `interval(Duration::MAX)` computed its second tick as "the first tick plus
/// the period", which overflows `Instant`, and fell back to the first tick's own instant, in
/// the past: it ticked on every poll. Now the second tick never comes, as `sleep(MAX)`.
#[test]
fn interval_with_the_longest_period_ticks_once() {
    let rt = two_workers().build().unwrap();
    rt.block_on(async {
        let mut ticks = interval(Duration::MAX);
        assert_eq!(ticks.period(), Duration::MAX);
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(
            ticks.poll_tick(&mut cx).is_ready(),
            "the first tick is immediate"
        );
        for _ in 0..3 {
            assert!(ticks.poll_tick(&mut cx).is_pending(), "ticked again");
        }
        // Starting in the past changes nothing: one tick, then none.
        let mut from_past = interval_at(Instant::now() - Duration::from_secs(1), Duration::MAX);
        assert!(from_past.poll_tick(&mut cx).is_ready());
        assert!(from_past.poll_tick(&mut cx).is_pending());
    });
}

/// `interval(Duration::ZERO)` panics in tokio; in magpie it is documented to tick at the
/// timer resolution, 1 ms.
#[test]
fn interval_with_a_zero_period_ticks_every_millisecond() {
    let rt = two_workers().build().unwrap();
    let (first, second) = rt.block_on(async {
        let mut ticks = interval(Duration::ZERO);
        assert_eq!(ticks.period(), Duration::from_millis(1));
        (ticks.tick().await, ticks.tick().await)
    });
    assert_eq!(second - first, Duration::from_millis(1));
}

// ---------------------------------------------------------------------------------------------
// After shutdown
// ---------------------------------------------------------------------------------------------

/// Blocks its worker in its first poll until released, then spawns through every free
/// function (which mean its own runtime, on its worker) and hands the handles over.
struct SpawnAfterRelease {
    inside: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
    handles: mpsc::Sender<(&'static str, JoinHandle<()>)>,
    ran: Arc<AtomicUsize>,
}

impl Future for SpawnAfterRelease {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.inside.send(()).unwrap();
        self.release.recv().unwrap();
        let ran = &self.ran;
        let (a, b, c) = (ran.clone(), ran.clone(), ran.clone());
        let spawned = magpie::spawn(async move {
            a.fetch_add(1, SeqCst);
        });
        let submitted = magpie::submit(move || {
            b.fetch_add(1, SeqCst);
        });
        let blocking = magpie::spawn_blocking(move || {
            c.fetch_add(1, SeqCst);
        });
        for handle in [
            ("magpie::spawn", spawned),
            ("magpie::submit", submitted),
            ("magpie::spawn_blocking", blocking),
        ] {
            self.handles.send(handle).unwrap();
        }
        Poll::Pending
    }
}

/// A task still inside a poll when `shutdown_timeout` gives up on it keeps running on its
/// worker, where the free functions mean the runtime that shut down: what it spawns,
/// submits or hands to the blocking pool afterwards is refused (cancelled at once, never
/// run), not queued on a runtime nobody runs any more.
#[test]
fn spawning_after_shutdown_timeout_is_cancelled() {
    let rt = two_workers().build().unwrap();
    let (inside_tx, inside_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let (handles_tx, handles_rx) = mpsc::channel();
    let ran = Arc::new(AtomicUsize::new(0));
    let stuck = rt.spawn(SpawnAfterRelease {
        inside: inside_tx,
        release: release_rx,
        handles: handles_tx,
        ran: ran.clone(),
    });
    inside_rx.recv().unwrap();
    rt.shutdown_timeout(Duration::ZERO);
    release_tx.send(()).unwrap();
    let handles: Vec<_> = handles_rx.iter().collect();
    assert_eq!(handles.len(), 3);
    for (what, handle) in handles {
        assert_cancelled(wait(handle), what);
    }
    assert_eq!(ran.load(SeqCst), 0, "work spawned after the shutdown ran");
    assert_cancelled(wait(stuck), "the task stuck in its poll");
}

// ---------------------------------------------------------------------------------------------
// The global runtime
// ---------------------------------------------------------------------------------------------

const GLOBAL_CHILD: &str = "bad_input_global";
const GLOBAL_OK: &str = "global child: ok";

/// `build_global` twice with different settings: the second is refused and changes nothing.
/// In a child, since the global runtime is per process.
#[test]
fn build_global_twice_is_refused() {
    let out = run_child(child_test("child_build_global_twice", GLOBAL_CHILD));
    assert!(
        out.status.success() && out.stdout.contains(GLOBAL_OK),
        "child failed: {out:?}"
    );
}

#[test]
fn child_build_global_twice() {
    if !is_child(GLOBAL_CHILD) {
        return;
    }
    // A bad configuration is refused without setting the global runtime.
    let err = Runtime::builder().stack_size(0).build_global().unwrap_err();
    assert!(
        matches!(err, BuildError::InvalidStackSize { requested: 0 }),
        "{err:?}"
    );

    Runtime::builder()
        .worker_threads(2)
        .thread_name("first")
        .build_global()
        .expect("the first build_global");
    for builder in [
        Runtime::builder().worker_threads(3).thread_name("second"),
        // A bad configuration is still reported as already initialized: nothing is built.
        Runtime::builder().worker_threads(0),
    ] {
        let result = panic::catch_unwind(AssertUnwindSafe(|| builder.build_global()))
            .expect("build_global panicked");
        let err = result.expect_err("the global runtime was configured twice");
        assert!(
            matches!(err, BuildError::GlobalAlreadyInitialized),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "the global runtime has already been initialized"
        );
    }
    // The first configuration stands.
    assert_eq!(magpie::default_runtime().num_workers(), 2);
    let name = magpie::submit(|| std::thread::current().name().map(str::to_owned));
    assert!(name.join().unwrap().unwrap().starts_with("first-"));
    println!("{GLOBAL_OK}");
}
