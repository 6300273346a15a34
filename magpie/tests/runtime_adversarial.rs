//! Adversarial tests of runtime construction, resizing and failing system calls: building
//! with file descriptors or threads exhausted, the blocking pool when no thread can start,
//! `set_active_workers` flapping under every kind of work, `wait_idle` and shutdown from
//! inside the runtime, hooks that re-enter it, the default runtime from odd places.
//!
//! Tests that change process-wide state (resource limits, the user id, the panic hook) or
//! that may hang run in a child process (`common::child_test`); a hang in-process is turned
//! into a failure by a `recv_timeout` of [`HANG`] or a `Watchdog`.

#![cfg(target_os = "linux")]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex, OnceLock};
use std::time::Duration;

use common::limits::{
    all_threads_again, allow_more_threads, become_unprivileged, no_more_threads, set_limit,
};
use common::{
    assert_thread_count_returns_to, child_test, fib, is_child, panic_message, payload_text,
    run_child, thread_count, Ledger, Watchdog,
};
use magpie::{BuildError, Runtime};

/// How long anything here may take before it counts as a hang. Not a timing assertion:
/// what is waited for takes milliseconds.
const HANG: Duration = Duration::from_secs(15);

const CHILD_OK: &str = "runtime_adversarial child: ok";

/// Runs child test `name` in mode `name` and asserts it printed [`CHILD_OK`] and exited 0.
fn in_child(name: &str) {
    let out = run_child(child_test(name, name));
    assert!(
        out.status.success() && out.stdout.contains(CHILD_OK),
        "child {name} failed: status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Building with file descriptors exhausted
// ---------------------------------------------------------------------------------------------

/// With 0, 1, 2, ... descriptors left, `build` either succeeds (and the runtime works) or
/// fails with `BuildError::Io`; it never panics or aborts, and leaves no descriptor behind.
#[test]
fn building_with_descriptors_exhausted_is_an_error_and_leaks_nothing() {
    in_child("child_descriptors_exhausted");
}

#[test]
fn child_descriptors_exhausted() {
    if !is_child("child_descriptors_exhausted") {
        return;
    }
    set_limit(libc::RLIMIT_NOFILE, 256);
    let mut built_ok = 0;
    let mut refused = 0;
    for free in 0..8 {
        // Fill the table, then give `free` descriptors back.
        let mut held = Vec::new();
        loop {
            match std::fs::File::open("/dev/null") {
                Ok(file) => held.push(file),
                Err(err) => {
                    assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "{err}");
                    break;
                }
            }
        }
        for _ in 0..free {
            held.pop();
        }
        // Read with a descriptor of its own, before the table is full again.
        let threads = {
            let spare = held.pop();
            drop(spare);
            let n = thread_count();
            held.push(std::fs::File::open("/dev/null").unwrap());
            n
        };
        let before = open_fds_without_dir(&held);
        for builder in [
            Runtime::builder().worker_threads(2),
            Runtime::builder(),
            Runtime::builder()
                .worker_threads(1)
                .max_workers(3)
                .max_compensation_workers(1)
                .trace(true),
        ] {
            let result = catch_unwind(AssertUnwindSafe(|| builder.build())).unwrap_or_else(|p| {
                panic!("build panicked with {free} free: {}", payload_text(&*p))
            });
            match result {
                Ok(rt) => {
                    built_ok += 1;
                    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
                    assert_eq!(rt.block_on(rt.spawn(async { 5 })).unwrap(), 5);
                    rt.block_on(magpie::time::sleep(Duration::from_millis(1)));
                    let blocking = rt.spawn_blocking(|| 7);
                    assert_eq!(rt.block_on(blocking).unwrap(), 7);
                    drop(rt);
                }
                Err(BuildError::Io(err)) => {
                    refused += 1;
                    assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "{err}");
                }
                Err(other) => panic!("with {free} descriptors free: unexpected {other:?}"),
            }
            assert_eq!(
                open_fds_without_dir(&held),
                before,
                "descriptors leaked by a build with {free} free"
            );
        }
        drop(held);
        assert_thread_count_returns_to(threads, "after builds with few descriptors");
    }
    assert!(refused > 0, "no build was refused: the limit did not bite");
    assert!(
        built_ok > 0,
        "no build succeeded even with 7 descriptors free"
    );
    println!("{CHILD_OK}");
}

/// `open_fds`, which itself needs a descriptor for `/proc/self/fd`: with the table full, frees
/// one of `held` for the count's duration would change it, so count the table by probing.
fn open_fds_without_dir(_held: &[std::fs::File]) -> usize {
    // fcntl(F_GETFD) on every descriptor below the limit: no descriptor needed.
    let mut n = 0;
    for fd in 0..1024 {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            n += 1;
        }
    }
    n
}

// ---------------------------------------------------------------------------------------------
// Threads exhausted: RLIMIT_NPROC, as an unprivileged user (root ignores the limit)
// ---------------------------------------------------------------------------------------------

/// Whichever thread the OS refuses (a worker, a compensation slot, the stall monitor),
/// `build` fails with `Spawn` naming it, and every thread started is joined.
#[test]
fn thread_exhaustion_at_every_thread_of_a_build() {
    in_child("child_thread_exhaustion_build");
}

#[test]
fn child_thread_exhaustion_build() {
    if !is_child("child_thread_exhaustion_build") {
        return;
    }
    assert!(become_unprivileged(47001), "could not drop root");
    let base = thread_count();
    // 2 ordinary workers (1 active), 1 compensation slot, the monitor: 4 threads.
    let builder = || {
        Runtime::builder()
            .worker_threads(1)
            .max_workers(2)
            .max_compensation_workers(1)
            .stall_threshold(Duration::from_millis(50))
    };
    for allowed in 0..4 {
        allow_more_threads(allowed);
        let result = catch_unwind(AssertUnwindSafe(|| builder().build()))
            .unwrap_or_else(|p| panic!("build panicked: {}", payload_text(&*p)));
        match result {
            Err(BuildError::Spawn { index, .. }) => assert_eq!(index, allowed, "{allowed}"),
            other => panic!("{allowed} threads allowed: expected Spawn, got {other:?}"),
        }
        all_threads_again();
        assert_thread_count_returns_to(base, "after a refused build");
    }
    allow_more_threads(4);
    let rt = builder().build().expect("4 threads allowed");
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
    drop(rt);
    all_threads_again();
    assert_thread_count_returns_to(base, "after the last runtime");
    println!("{CHILD_OK}");
}

/// The default runtime cannot start while no thread can: `try_default_runtime` says so, the
/// free functions panic with that error, and once threads can start again it is built.
#[test]
fn default_runtime_under_thread_exhaustion_recovers() {
    in_child("child_default_runtime_exhaustion");
}

#[test]
fn child_default_runtime_exhaustion() {
    if !is_child("child_default_runtime_exhaustion") {
        return;
    }
    assert!(become_unprivileged(47002), "could not drop root");
    no_more_threads();
    match magpie::try_default_runtime() {
        Err(BuildError::Spawn { index: 0, .. }) => {}
        other => panic!("expected Spawn at 0, got {other:?}"),
    }
    let message = panic_message(|| {
        magpie::join(|| 1, || 2);
    });
    assert!(
        message.contains("could not start the default runtime"),
        "{message}"
    );
    all_threads_again();
    let rt = magpie::try_default_runtime().expect("threads can start again");
    assert!(rt.num_workers() >= 1);
    assert_eq!(magpie::join(|| 1, || 2), (1, 2));
    println!("{CHILD_OK}");
}

/// The message of `spawn_blocking`'s panic when no blocking thread runs and none can start.
const REFUSED: &str = "`spawn_blocking` cannot start a thread, and none is running";

/// `spawn_blocking` from outside the pool while the blocking pool cannot start a thread and
/// has none: the spawn fails clearly (as `std::thread::spawn` does) without running the
/// closure, and once threads can start again the pool works.
#[test]
fn spawn_blocking_from_outside_while_no_thread_can_start() {
    in_child("child_spawn_blocking_no_threads_outside");
}

#[test]
fn child_spawn_blocking_no_threads_outside() {
    if !is_child("child_spawn_blocking_no_threads_outside") {
        return;
    }
    assert!(become_unprivileged(47003), "could not drop root");
    let rt = common::runtime(2);
    no_more_threads();
    let ran = Arc::new(AtomicBool::new(false));
    for _ in 0..3 {
        let ran = ran.clone();
        let message = panic_message(|| drop(rt.spawn_blocking(move || ran.store(true, SeqCst))));
        assert!(message.contains(REFUSED), "{message}");
    }
    assert!(!ran.load(SeqCst), "a refused closure ran");
    all_threads_again();
    let handles: Vec<_> = (0..100).map(|i| rt.spawn_blocking(move || i)).collect();
    let sum: i32 = handles
        .into_iter()
        .map(|h| rt.block_on(h).expect("a blocking closure failed"))
        .sum();
    assert_eq!(sum, 4950);
    let panicked = rt.spawn_blocking(|| panic!("boom"));
    assert!(rt.block_on(panicked).unwrap_err().is_panic());
    drop(rt);
    println!("{CHILD_OK}");
}

/// `spawn_blocking` from a task while no blocking thread can start. Before the fix the
/// closure ran on the worker, where the `block_on` that `spawn_blocking` documents as its use
/// panicked; now the spawn itself fails, and the task's handle says why.
#[test]
fn spawn_blocking_from_a_task_while_no_thread_can_start_fails_clearly() {
    in_child("child_spawn_blocking_no_threads_block_on");
}

#[test]
fn child_spawn_blocking_no_threads_block_on() {
    if !is_child("child_spawn_blocking_no_threads_block_on") {
        return;
    }
    assert!(become_unprivileged(47004), "could not drop root");
    let rt = common::runtime(2);
    no_more_threads();
    let result = rt.block_on(
        rt.spawn(async { magpie::spawn_blocking(|| magpie::block_on(async { 6 * 7 })).await }),
    );
    let err = result.expect_err("the spawn did not fail");
    let text = payload_text(&*err.into_panic());
    assert!(text.contains(REFUSED), "{text}");
    all_threads_again();
    let result = rt.block_on(
        rt.spawn(async { magpie::spawn_blocking(|| magpie::block_on(async { 6 * 7 })).await }),
    );
    assert_eq!(result.unwrap().unwrap(), 42);
    println!("{CHILD_OK}");
}

/// `spawn_blocking` from a task of a one-worker runtime while no thread can start, with a
/// closure that would wait for a task spawned right after it. Run inline on the only worker
/// (before the fix), it held the worker until its timeout; now the spawn fails at once and
/// the worker runs on.
#[test]
fn spawn_blocking_from_the_only_worker_while_no_thread_can_start_does_not_hold_it() {
    in_child("child_spawn_blocking_no_threads_one_worker");
}

#[test]
fn child_spawn_blocking_no_threads_one_worker() {
    if !is_child("child_spawn_blocking_no_threads_one_worker") {
        return;
    }
    assert!(become_unprivileged(47005), "could not drop root");
    let rt = common::runtime(1);
    no_more_threads();
    let (tx, rx) = mpsc::channel::<u32>();
    let spawner = rt.spawn(async move {
        let waiter = magpie::spawn_blocking(move || rx.recv_timeout(HANG).ok());
        waiter.await
    });
    let err = rt.block_on(spawner).expect_err("the spawn did not fail");
    let text = payload_text(&*err.into_panic());
    assert!(text.contains(REFUSED), "{text}");
    // The closure was dropped with its receiver; the only worker is free.
    assert!(tx.send(9).is_err(), "the refused closure is still alive");
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
    all_threads_again();
    println!("{CHILD_OK}");
}

// ---------------------------------------------------------------------------------------------
// wait_idle from inside the runtime
// ---------------------------------------------------------------------------------------------

/// `wait_idle` on a worker panics clearly wherever the worker is: in a task, a job, inside
/// `block_in_place`, on a compensation worker, in a terminate hook.
#[test]
fn wait_idle_on_a_worker_panics_everywhere() {
    let slot: Arc<OnceLock<Arc<Runtime>>> = Arc::new(OnceLock::new());
    let hook_message = Arc::new(Mutex::new(None::<String>));
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .max_compensation_workers(1)
            .on_task_terminate({
                let slot = slot.clone();
                let hook_message = hook_message.clone();
                move |_meta| {
                    if let Some(rt) = slot.get() {
                        let r = catch_unwind(AssertUnwindSafe(|| rt.wait_idle()));
                        if let Err(p) = r {
                            *hook_message.lock().unwrap() = Some(payload_text(&*p));
                        }
                    }
                }
            })
            .build()
            .unwrap(),
    );
    let check = |message: String, place: &str| {
        assert!(message.contains("wait for itself"), "{place}: {message}");
    };
    let r = rt.clone();
    let m = rt.block_on(rt.spawn(async move { panic_message(|| r.wait_idle()) }));
    check(m.unwrap(), "task");
    let r = rt.clone();
    check(rt.install(|| panic_message(|| r.wait_idle())), "install");
    let r = rt.clone();
    let m =
        rt.block_on(rt.spawn(async move {
            magpie::task::block_in_place(|| panic_message(|| r.wait_idle()))
        }));
    check(m.unwrap(), "block_in_place");
    let r = rt.clone();
    let m = rt.install(|| {
        let (a, _) = magpie::join(|| panic_message(|| r.wait_idle()), || ());
        a
    });
    check(m, "join");
    // A compensation worker.
    assert!(rt.__start_compensation_worker());
    let (tx, rx) = mpsc::channel();
    let gate = Arc::new(Barrier::new(3));
    let mut holders = Vec::new();
    for _ in 0..2 {
        let gate = gate.clone();
        holders.push(rt.submit(move || {
            gate.wait();
        }));
    }
    let r = rt.clone();
    let probe = rt.submit(move || {
        tx.send((
            magpie::current_worker_index(),
            panic_message(|| r.wait_idle()),
        ))
        .unwrap();
    });
    let (index, message) = rx.recv_timeout(HANG).expect("the probe never ran");
    gate.wait();
    check(message, &format!("worker {index:?}"));
    for h in holders {
        h.join().unwrap();
    }
    probe.join().unwrap();
    rt.__retire_compensation_workers();
    // A terminate hook on a worker.
    slot.set(rt.clone()).unwrap();
    rt.submit(|| ()).join().unwrap();
    common::eventually("the hook has run", || {
        hook_message.lock().unwrap().is_some()
    });
    check(
        hook_message.lock().unwrap().take().unwrap(),
        "terminate hook",
    );
    // From a blocking closure: not a worker; it returns once the tasks are done.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let pending = rt.submit(move || go_rx.recv().unwrap());
    let r = rt.clone();
    let waiter = rt.spawn_blocking(move || {
        r.wait_idle();
        r.stats().tasks_alive
    });
    go_tx.send(()).unwrap();
    pending.join().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(waiter.join()).unwrap());
    assert_eq!(
        rx.recv_timeout(HANG)
            .expect("wait_idle in a blocking closure hung")
            .unwrap(),
        0
    );
}

// ---------------------------------------------------------------------------------------------
// set_active_workers flapping under every kind of work
// ---------------------------------------------------------------------------------------------

/// One thread flaps the active count through 0 (refused), 1, every count, the maximum and
/// beyond (refused) while joins, scopes, parallel iterators, timer tasks, `submit_to` every
/// worker, `submit_balanced`, `spawn_blocking` and `block_in_place` run; every unit runs
/// exactly once, and the runtime drops cleanly.
#[test]
fn set_active_workers_flapping_under_every_kind_of_work() {
    use magpie::prelude::*;
    let dog = Watchdog::start("set_active_workers_flapping_under_every_kind_of_work");
    let progress = dog.progress();
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .max_workers(4)
            .max_compensation_workers(1)
            .build()
            .unwrap(),
    );
    dog.phase("flapping", &rt);
    let stop = Arc::new(AtomicBool::new(false));
    let flapper = {
        let rt = rt.clone();
        let stop = stop.clone();
        let progress = progress.clone();
        std::thread::spawn(move || {
            let seq = [0usize, 1, 4, 5, 2, 1, 3, 4, 1, usize::MAX, 4, 1];
            let mut i = 0;
            while !stop.load(SeqCst) {
                let n = seq[i % seq.len()];
                let result = rt.set_active_workers(n);
                assert_eq!(result.is_ok(), (1..=4).contains(&n), "{n}");
                if i % 7 == 0 {
                    rt.__start_compensation_worker();
                } else if i % 11 == 0 {
                    rt.__retire_compensation_workers();
                }
                i += 1;
                progress.fetch_add(1, SeqCst);
                std::thread::yield_now();
            }
        })
    };
    const UNITS: usize = 400;
    let ledger = Ledger::new(UNITS * 6);
    for round in 0..UNITS {
        let l = ledger.clone();
        let base = round * 6;
        // A task with a timer and a spawned child.
        let t = rt.spawn(async move {
            magpie::time::sleep(Duration::from_micros(50)).await;
            let l2 = l.clone();
            magpie::spawn(async move { l2.ran(base + 1) })
                .await
                .unwrap();
            l.ran(base);
        });
        // submit_to every worker, the parked ones included.
        let l = ledger.clone();
        let s = rt
            .submit_to(round % 4, move || l.ran(base + 2))
            .expect("in range");
        let l = ledger.clone();
        let b = rt.submit_balanced(move || l.ran(base + 3));
        let l = ledger.clone();
        let bl = rt.spawn_blocking(move || l.ran(base + 4));
        // Fork-join from outside.
        let l = ledger.clone();
        rt.install(|| {
            assert_eq!(fib(12), 144);
            let sum: u64 = (0..1000u64).into_par_iter().map(|x| x * 2).sum();
            assert_eq!(sum, 999_000);
            magpie::scope(|s| {
                s.spawn(|_| {
                    magpie::task::block_in_place(|| l.ran(base + 5));
                });
            });
        });
        for h in [t, s, b, bl] {
            rt.block_on(h).unwrap();
        }
        progress.fetch_add(1, SeqCst);
    }
    stop.store(true, SeqCst);
    flapper.join().unwrap();
    rt.wait_idle();
    ledger.assert_each_once();
    dog.phase("dropping", &rt);
    let rt = Arc::try_unwrap(rt).unwrap();
    drop(rt);
}

/// Tasks parked on timers while every worker that drove the timers is switched off: the
/// remaining worker must take the driver role and fire them.
#[test]
fn timers_fire_after_their_driver_is_switched_off() {
    let rt = Runtime::builder().worker_threads(4).build().unwrap();
    for round in 0..50 {
        let (tx, rx) = mpsc::channel();
        for i in 0..8 {
            let tx = tx.clone();
            drop(rt.spawn(async move {
                magpie::time::sleep(Duration::from_millis(1 + i % 3)).await;
                tx.send(i).unwrap();
            }));
        }
        drop(tx);
        // Let the workers park (one of them in the driver), then switch all but one off,
        // and grow back in odd rounds.
        rt.set_active_workers(1 + round % 4).unwrap();
        rt.set_active_workers(1).unwrap();
        if round % 2 == 1 {
            rt.set_active_workers(4).unwrap();
        }
        for _ in 0..8 {
            rx.recv_timeout(HANG)
                .unwrap_or_else(|e| panic!("round {round}: a timer never fired ({e:?})"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Nested install across runtimes
// ---------------------------------------------------------------------------------------------

/// `install` nested across two runtimes while each is shrunk to one worker and grown back by
/// the innermost closure: the whole nest returns.
#[test]
fn nested_install_across_runtimes_while_both_resize() {
    let a = Arc::new(
        Runtime::builder()
            .worker_threads(1)
            .max_workers(3)
            .build()
            .unwrap(),
    );
    let b = Arc::new(Runtime::builder().worker_threads(3).build().unwrap());
    let (tx, rx) = mpsc::channel();
    let (a2, b2) = (a.clone(), b.clone());
    std::thread::spawn(move || {
        let mut total = 0u64;
        for i in 0..50 {
            total += a2.install(|| {
                b2.install(|| {
                    b2.set_active_workers(1 + i % 3).unwrap();
                    let x = a2.install(|| {
                        a2.set_active_workers(3 - i % 3).unwrap();
                        let (p, q) = magpie::join(|| fib(10), || b2.install(|| fib(10)));
                        p + q
                    });
                    x + magpie::join(|| 1, || 1).0
                })
            });
        }
        tx.send(total).unwrap();
    });
    let total = rx.recv_timeout(HANG).expect("nested installs hung");
    assert_eq!(total, 50 * (55 + 55 + 1));
}

// ---------------------------------------------------------------------------------------------
// Shutdown from inside the runtime
// ---------------------------------------------------------------------------------------------

/// `shutdown_timeout` of a runtime from one of its own blocking closures: the closure's own
/// thread is not waited for, the workers are, and spawns afterwards are refused.
#[test]
fn shutdown_timeout_from_its_own_blocking_closure() {
    let slot: Arc<Mutex<Option<Runtime>>> = Arc::new(Mutex::new(Some(common::runtime(2))));
    let pending = slot
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .spawn(std::future::pending::<()>());
    let s = slot.clone();
    let handle = slot
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .spawn_blocking(move || {
            let rt = s.lock().unwrap().take().unwrap();
            rt.shutdown_timeout(Duration::from_secs(3600));
            // Still this runtime's context: a spawn now is refused.
            magpie::spawn(async { 1 })
                .join()
                .unwrap_err()
                .is_cancelled()
        });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(handle.join()).unwrap());
    let refused = rx
        .recv_timeout(HANG)
        .expect("shutdown_timeout from a blocking closure hung");
    assert!(refused.expect("the blocking closure failed"));
    assert!(pending.join().unwrap_err().is_cancelled());
}

/// The last handle of a runtime dropped by its own `on_task_spawn` hook, during a spawn from
/// one of its tasks, and by its `on_task_terminate` hook on a worker: nothing hangs or
/// panics, and the spawn whose hook dropped the runtime resolves.
#[test]
fn the_runtime_dropped_in_its_own_task_hooks() {
    for which in ["spawn", "terminate"] {
        let slot: Arc<Mutex<Option<Runtime>>> = Arc::new(Mutex::new(None));
        let armed = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicUsize::new(0));
        let hook = {
            let slot = slot.clone();
            let armed = armed.clone();
            let dropped = dropped.clone();
            move |_meta: &magpie::task::TaskMeta<'_>| {
                if armed.swap(false, SeqCst) {
                    let rt = slot.lock().unwrap().take();
                    drop(rt);
                    dropped.fetch_add(1, SeqCst);
                }
            }
        };
        let builder = Runtime::builder().worker_threads(2);
        let builder = if which == "spawn" {
            builder.on_task_spawn(hook)
        } else {
            builder.on_task_terminate(hook)
        };
        let rt = builder.build().unwrap();
        let armed2 = armed.clone();
        let outer = rt.spawn(async move {
            armed2.store(true, SeqCst);
            let inner = magpie::spawn(async { 3 });
            inner.await.map_err(|e| e.is_cancelled())
        });
        *slot.lock().unwrap() = Some(rt);
        // The outer task either finished or was cancelled by the shutdown its hook began;
        // its handle resolves either way.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(outer.join()).unwrap());
        let got = rx.recv_timeout(HANG).unwrap_or_else(|e| {
            panic!("{which}: the task whose hook dropped the runtime hung ({e:?})")
        });
        match got {
            Ok(inner) => assert!(matches!(inner, Ok(3) | Err(true)), "{which}: {inner:?}"),
            Err(e) => assert!(e.is_cancelled(), "{which}: {e:?}"),
        }
        assert!(dropped.load(SeqCst) <= 1);
        // If the hook never found the runtime (armed too early), drop it here.
        drop(slot.lock().unwrap().take());
    }
}

/// A terminate hook that, during the runtime's drop (on the dropping thread), calls
/// `spawn_blocking` on the runtime and joins it, and calls `join`: the drop returns.
#[test]
fn terminate_hooks_using_the_blocking_pool_and_join_during_the_drop() {
    let ran = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_terminate({
            let ran = ran.clone();
            move |_meta| {
                let h = magpie::spawn_blocking(|| 2);
                // Ran, or cancelled: resolved either way.
                if let Ok(v) = h.join() {
                    assert_eq!(v, 2);
                }
                let _ = catch_unwind(|| magpie::join(|| 1, || 1));
                ran.fetch_add(1, SeqCst);
            }
        })
        .build()
        .unwrap();
    for _ in 0..10 {
        drop(rt.spawn(std::future::pending::<()>()));
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(HANG).expect("the drop hung");
    assert!(ran.load(SeqCst) >= 10);
}

// ---------------------------------------------------------------------------------------------
// The blocking pool in bulk
// ---------------------------------------------------------------------------------------------

/// Thousands of `spawn_blocking` at once on a small pool with a zero keep-alive, half of them
/// panicking, from many threads and tasks: every handle resolves with its closure's outcome.
#[test]
fn thousands_of_blocking_closures_on_a_tiny_pool_with_zero_keep_alive() {
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .max_blocking_threads(3)
            .blocking_keep_alive(Duration::ZERO)
            .build()
            .unwrap(),
    );
    let dog = Watchdog::start("thousands_of_blocking_closures");
    dog.phase("spawning", &rt);
    let progress = dog.progress();
    let mut spawners = Vec::new();
    for t in 0..4usize {
        let rt = rt.clone();
        let progress = progress.clone();
        spawners.push(std::thread::spawn(move || {
            let handles: Vec<_> = (0..2000usize)
                .map(|i| {
                    rt.spawn_blocking(move || {
                        if i % 2 == 0 {
                            panic!("even");
                        }
                        t * 10_000 + i
                    })
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                match h.join() {
                    Ok(v) => assert_eq!(v, t * 10_000 + i),
                    Err(e) => assert!(e.is_panic() && i % 2 == 0, "{i}: {e:?}"),
                }
                progress.fetch_add(1, SeqCst);
            }
        }));
    }
    let from_tasks = rt.block_on(rt.spawn(async {
        let hs: Vec<_> = (0..500)
            .map(|i| magpie::spawn_blocking(move || i))
            .collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    }));
    assert_eq!(from_tasks.unwrap(), (0..500).sum::<i32>());
    for s in spawners {
        s.join().unwrap();
    }
    dog.phase("dropping", &rt);
    drop(Arc::try_unwrap(rt).unwrap());
}

/// Tasks that keep calling `spawn_blocking` while the runtime drops: every handle resolves,
/// and the drop returns.
#[test]
fn spawn_blocking_racing_the_drop() {
    for _ in 0..20 {
        let rt = common::runtime(2);
        let started = Arc::new(Barrier::new(3));
        for _ in 0..2 {
            let started = started.clone();
            drop(rt.submit(move || {
                started.wait();
                // Until the shutdown refuses spawns (its step 1); the blocking pool closes
                // only after the workers exit (step 3), so every closure here runs.
                loop {
                    let h = magpie::spawn_blocking(|| ());
                    let result = magpie::task::block_in_place(|| h.join());
                    assert!(result.is_ok(), "{result:?}");
                    // Finished at once only if refused (or cancelled): the shutdown began.
                    let probe = magpie::spawn(std::future::pending::<()>());
                    if probe.is_finished() {
                        break;
                    }
                }
            }));
        }
        started.wait();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            drop(rt);
            tx.send(()).unwrap();
        });
        rx.recv_timeout(HANG).expect("the drop hung");
    }
}

// ---------------------------------------------------------------------------------------------
// The default runtime from odd places
// ---------------------------------------------------------------------------------------------

/// The default runtime from a thread-local's destructor (on a plain thread and on the worker
/// thread of a runtime being dropped), and from a panic hook while a task of the default
/// runtime panics: no abort, and the work is done.
#[test]
fn default_runtime_from_tls_destructors_and_a_panic_hook() {
    in_child("child_default_runtime_odd_places");
}

struct UsesDefault(Arc<AtomicUsize>);

impl Drop for UsesDefault {
    fn drop(&mut self) {
        let (a, b) = magpie::join(|| 20, || 22);
        let v = magpie::block_on(async {
            magpie::time::sleep(Duration::from_millis(1)).await;
            magpie::spawn(async { 1 }).await.unwrap()
        });
        let w = magpie::submit(|| 1).join().unwrap();
        let x = magpie::spawn_blocking(|| 1).join().unwrap();
        self.0.fetch_add(a + b + v + w + x, SeqCst);
    }
}

thread_local! {
    static USES_DEFAULT: std::cell::RefCell<Option<UsesDefault>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn child_default_runtime_odd_places() {
    if !is_child("child_default_runtime_odd_places") {
        return;
    }
    let total = Arc::new(AtomicUsize::new(0));
    // A plain thread: the destructor runs after the thread's main returns.
    let t = total.clone();
    std::thread::spawn(move || USES_DEFAULT.with(|u| *u.borrow_mut() = Some(UsesDefault(t))))
        .join()
        .unwrap();
    assert_eq!(total.load(SeqCst), 45);
    // The worker threads of a runtime being dropped.
    let rt = common::runtime(2);
    let t = total.clone();
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..2 {
                let t = t.clone();
                s.spawn(move |_| {
                    USES_DEFAULT.with(|u| {
                        u.borrow_mut().get_or_insert_with(|| UsesDefault(t));
                    });
                });
            }
        })
    });
    drop(rt);
    assert!(total.load(SeqCst) >= 90, "{}", total.load(SeqCst));
    // A panic hook that uses the default runtime, fired on its worker and on this thread.
    let hooked = Arc::new(AtomicUsize::new(0));
    let h = hooked.clone();
    std::panic::set_hook(Box::new(move |_| {
        let (a, b) = magpie::join(|| 1, || 1);
        let c = magpie::default_runtime().install(|| 1);
        h.fetch_add(a + b + c, SeqCst);
    }));
    let err = magpie::submit(|| panic!("in a task")).join().unwrap_err();
    assert!(err.is_panic());
    let err = magpie::default_runtime().install(|| catch_unwind(|| panic!("in install")));
    assert!(err.is_err());
    let _ = catch_unwind(|| panic!("on this thread"));
    let _ = std::panic::take_hook();
    assert_eq!(hooked.load(SeqCst), 9);
    println!("{CHILD_OK}");
}

// ---------------------------------------------------------------------------------------------
// Hooks that re-enter the runtime
// ---------------------------------------------------------------------------------------------

/// Spawn and terminate hooks that spawn on the same runtime (bounded), build and drop
/// another runtime, call `block_on` (refused on a worker), `install` and `wait_idle` of
/// another runtime: every task still runs once and the runtime drops.
#[test]
fn hooks_that_reenter_the_runtime() {
    thread_local! {
        static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let other = Arc::new(common::runtime(1));
    let extra = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_spawn({
            let other = other.clone();
            let extra = extra.clone();
            move |_meta| {
                let depth = DEPTH.with(|d| d.replace(d.get() + 1));
                if depth == 0 {
                    // Re-entrant spawn (one level), a nested runtime, an install elsewhere.
                    let e = extra.clone();
                    drop(magpie::spawn(async move {
                        e.fetch_add(1, SeqCst);
                    }));
                    let nested = Runtime::builder().worker_threads(1).build().unwrap();
                    assert_eq!(nested.install(|| 4), 4);
                    drop(nested);
                    assert_eq!(other.install(|| magpie::join(|| 1, || 1)), (1, 1));
                }
                DEPTH.with(|d| d.set(depth));
            }
        })
        .on_task_terminate({
            let other = other.clone();
            move |_meta| {
                let _ = catch_unwind(|| magpie::block_on(async { 1 }));
                other.wait_idle();
            }
        })
        .build()
        .unwrap();
    let ledger = Ledger::new(50);
    for i in 0..50 {
        let l = ledger.clone();
        drop(rt.submit(move || l.ran(i)));
    }
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        rt.wait_idle();
        done_tx.send(rt).unwrap();
    });
    let rt = done_rx.recv_timeout(HANG).expect("wait_idle hung");
    ledger.assert_each_once();
    assert!(extra.load(SeqCst) >= 50, "{}", extra.load(SeqCst));
    drop(rt);
}

/// `spawn_blocking` from a plain thread while the blocking pool cannot start a thread: the
/// call must come back (here with its panic) without running the closure on the caller. The
/// closure waits for a value the caller sends only after `spawn_blocking` has come back; run
/// inline on the caller (before the fix), `spawn_blocking` never came back.
#[test]
fn spawn_blocking_from_outside_while_no_thread_can_start_returns_first() {
    in_child("child_spawn_blocking_no_threads_returns_first");
}

#[test]
fn child_spawn_blocking_no_threads_returns_first() {
    if !is_child("child_spawn_blocking_no_threads_returns_first") {
        return;
    }
    assert!(become_unprivileged(47100), "could not drop root");
    let rt = Arc::new(common::runtime(2));
    // The caller: a thread started before the limit.
    let (value_tx, value_rx) = mpsc::channel::<u32>();
    let (returned_tx, returned_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let r = rt.clone();
    let caller = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        let spawned = catch_unwind(AssertUnwindSafe(|| {
            r.spawn_blocking(move || value_rx.recv_timeout(HANG).ok())
        }));
        returned_tx.send(()).unwrap();
        spawned.map(|handle| handle.join())
    });
    no_more_threads();
    go_tx.send(()).unwrap();
    let returned = returned_rx.recv_timeout(HANG);
    all_threads_again();
    assert!(
        returned.is_ok(),
        "spawn_blocking did not return: it ran the closure on the calling thread"
    );
    // Refused: the closure (and its receiver) dropped, never run.
    assert!(
        value_tx.send(5).is_err(),
        "the refused closure is still alive"
    );
    let payload = caller.join().unwrap().expect_err("the spawn did not fail");
    assert!(payload_text(&*payload).contains(REFUSED));
    println!("{CHILD_OK}");
}

// ---------------------------------------------------------------------------------------------
// shutdown_timeout and the stall monitor
// ---------------------------------------------------------------------------------------------

/// `shutdown_timeout` promises to wait "at most `timeout` for the threads". The stall
/// monitor's thread runs the user's `on_stall` hook; while that hook blocks, the shutdown must
/// still return after its timeout (leaving the monitor to exit on its own, as it leaves a
/// worker stuck in a poll).
#[test]
fn shutdown_timeout_returns_while_the_stall_hook_blocks() {
    let (in_hook_tx, in_hook_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let in_hook_tx = Mutex::new(Some(in_hook_tx));
    let release_rx = Mutex::new(release_rx);
    let rt = Runtime::builder()
        .worker_threads(1)
        .stall_threshold(Duration::from_millis(20))
        .on_stall(move |_info| {
            if let Some(tx) = in_hook_tx.lock().unwrap().take() {
                tx.send(()).unwrap();
                // Blocks until the test is done with the shutdown.
                let _ = release_rx.lock().unwrap().recv();
            }
        })
        .build()
        .unwrap();
    // A stalled closure, until the hook has been entered.
    let (stalled_tx, stalled_rx) = mpsc::channel::<()>();
    drop(rt.submit(move || {
        let _ = stalled_rx.recv_timeout(HANG);
    }));
    in_hook_rx
        .recv_timeout(HANG)
        .expect("the stall hook never ran");
    drop(stalled_tx); // the closure returns; the worker can exit
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        rt.shutdown_timeout(Duration::from_millis(100));
        done_tx.send(()).unwrap();
    });
    let returned = done_rx.recv_timeout(HANG);
    release_tx.send(()).unwrap();
    assert!(
        returned.is_ok(),
        "shutdown_timeout(100 ms) did not return while the on_stall hook blocked"
    );
}

// ---------------------------------------------------------------------------------------------
// Dropping a runtime on a worker of another runtime
// ---------------------------------------------------------------------------------------------

/// A task of runtime A (one worker) drops runtime B while one of B's blocking closures waits
/// for a task of A queued behind it. `block_on` and `JoinHandle::join` refuse to block a
/// worker for exactly this reason; the drop, which blocks until B's blocking closures return,
/// does not, and the two runtimes wait for each other for good.
#[test]
fn dropping_a_runtime_on_a_worker_of_another_does_not_deadlock_them() {
    in_child("child_drop_on_another_runtimes_worker");
}

#[test]
fn child_drop_on_another_runtimes_worker() {
    if !is_child("child_drop_on_another_runtimes_worker") {
        return;
    }
    let a = Arc::new(common::runtime(1));
    let b = common::runtime(1);
    let (queued_tx, queued_rx) = mpsc::channel::<magpie::task::JoinHandle<u32>>();
    // B's blocking closure waits for a task of A, whose handle it is sent. Started before
    // the drop: one still queued then is cancelled, as documented.
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let waiting = b.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        queued_rx.recv().unwrap().join()
    });
    started_rx
        .recv_timeout(HANG)
        .expect("the blocking closure never started");
    let (done_tx, done_rx) = mpsc::channel();
    let a2 = a.clone();
    drop(a.spawn(async move {
        // Queued on A behind this very task.
        queued_tx.send(a2.spawn(async { 7 })).unwrap();
        drop(b);
        done_tx.send(()).unwrap();
    }));
    let outcome = done_rx.recv_timeout(HANG);
    assert!(
        outcome.is_ok(),
        "a task of A dropping B never returned: B's drop waits for B's blocking closure, which \
         waits for a task of A queued behind the dropping one"
    );
    assert_eq!(waiting.join().unwrap().unwrap(), 7);
    println!("{CHILD_OK}");
}
