//! Adversarial configuration, dynamic workers, statistics and tracing: odd values, calls
//! from odd places (a task, a hook), counters read while workers switch on and off, trace
//! rings that overflow while they are exported.
//!
//! No test depends on timing: hangs end in a [`Deadline`] abort or [`common::DEADLINE`], and
//! every wait is for a condition, not for a time.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use common::deadline::Deadline;
use common::{assert_monotonic, eventually, SplitMix64};
use magpie::{Runtime, Stats};

/// A hang limit, not a timing assertion: each guarded test takes well under a second.
const LIMIT: Duration = Duration::from_secs(60);

/// The gauges of one snapshot agree with each other and with the runtime's shape.
fn assert_gauges(stats: &Stats, ordinary: usize, compensation: usize) {
    assert_eq!(stats.workers.len(), ordinary + compensation, "{stats:#?}");
    let active = stats.active_workers as usize;
    assert!((1..=ordinary).contains(&active), "active_workers {active}");
    for (i, w) in stats.workers.iter().enumerate() {
        if i < ordinary {
            assert!(!w.compensation, "worker {i}");
            assert_eq!(w.active, i < active, "worker {i}: active flag vs {active}");
        } else {
            assert!(w.compensation, "slot {i}");
            assert_eq!(
                w.active,
                i - ordinary < stats.compensation_workers_active as usize,
                "compensation slot {i}"
            );
        }
        // Busy plus idle is the worker's uptime as read after `stats.uptime_ns`.
        assert!(
            w.busy_time_ns + w.idle_time_ns >= stats.uptime_ns,
            "worker {i}: busy {} + idle {} < uptime {}",
            w.busy_time_ns,
            w.idle_time_ns,
            stats.uptime_ns
        );
    }
    assert!(stats.compensation_workers_active as usize <= compensation);
    // A gauge that wrapped below zero reads about 1.8e19.
    assert!(
        stats.tasks_alive < 1 << 40,
        "tasks_alive {}",
        stats.tasks_alive
    );
    assert!(stats.inject_queue_depth < 1 << 40);
}

/// `assert_monotonic` plus the counters it leaves out, and the upper bound of busy + idle.
fn assert_later(then: &Stats, now: &Stats) {
    assert_monotonic(then, now);
    for (i, (a, b)) in then.workers.iter().zip(&now.workers).enumerate() {
        for (name, x, y) in [
            ("stalls", a.stalls, b.stalls),
            ("stall_handoffs", a.stall_handoffs, b.stall_handoffs),
            (
                "block_in_place_calls",
                a.block_in_place_calls,
                b.block_in_place_calls,
            ),
            ("lifo_steals", a.lifo_steals, b.lifo_steals),
            ("watch_looks", a.watch_looks, b.watch_looks),
            (
                "budget_forced_yields",
                a.budget_forced_yields,
                b.budget_forced_yields,
            ),
            ("steals_in_group", a.steals_in_group, b.steals_in_group),
            (
                "steals_across_groups",
                a.steals_across_groups,
                b.steals_across_groups,
            ),
        ] {
            assert!(y >= x, "worker {i}: {name} went from {x} to {y}");
        }
        assert!(
            a.busy_time_ns + a.idle_time_ns <= now.uptime_ns,
            "worker {i}: busy + idle {} beyond the next uptime {}",
            a.busy_time_ns + a.idle_time_ns,
            now.uptime_ns
        );
    }
    assert!(now.compensation_workers_started >= then.compensation_workers_started);
    assert!(now.trace_events >= then.trace_events);
    assert!(now.monitor_samples >= then.monitor_samples);
    assert!(now.inject_lock_acquisitions >= then.inject_lock_acquisitions);
}

#[test]
fn counters_stay_monotonic_while_workers_switch_on_and_off_under_load() {
    let _deadline = Deadline::new("monotonic stats while switching", LIMIT);
    let (ordinary, compensation) = (4, 1);
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .max_workers(ordinary)
            .max_compensation_workers(compensation)
            .stall_threshold(Duration::from_millis(5))
            .on_stall(|_| ())
            .poll_time_histogram(true)
            .trace(true)
            .trace_capacity(64)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // How many times each thread below has gone round, for the start of the load.
    let (switches, samples) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let switcher = std::thread::spawn({
        let (rt, stop, switches) = (rt.clone(), stop.clone(), switches.clone());
        move || {
            let mut rng = SplitMix64::new(common::seed("monotonic switcher"));
            while !stop.load(Relaxed) {
                rt.set_active_workers(1 + rng.below(ordinary as u64) as usize)
                    .unwrap();
                switches.fetch_add(1, Relaxed);
                std::thread::yield_now();
            }
        }
    });
    let sampler = std::thread::spawn({
        let (rt, stop, samples) = (rt.clone(), stop.clone(), samples.clone());
        move || {
            let mut then = rt.stats();
            assert_gauges(&then, ordinary, compensation);
            while !stop.load(Relaxed) {
                let now = rt.stats();
                assert_gauges(&now, ordinary, compensation);
                assert_later(&then, &now);
                then = now;
                samples.fetch_add(1, Relaxed);
            }
        }
    });
    // The load starts once both threads run: on a machine with fewer CPUs than threads, the
    // 40 rounds can otherwise end before the OS has given either of them a turn, and the
    // test would check nothing (it once did, in a release build beside other tests).
    eventually(
        "the switcher and the sampler have each gone round once",
        || switches.load(Relaxed) > 0 && samples.load(Relaxed) > 0,
    );
    // Tasks, fork-join work, and a blocking section each round.
    for round in 0..40u64 {
        let handles: Vec<_> = (0..50u64).map(|i| rt.submit(move || i * round)).collect();
        assert_eq!(rt.install(|| common::fib(12)), 144);
        let blocked = rt.submit(|| magpie::task::block_in_place(|| common::fib_sequential(15)));
        let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, round * 49 * 50 / 2);
        assert_eq!(blocked.join().unwrap(), 610);
    }
    stop.store(true, Relaxed);
    switcher.join().unwrap();
    sampler.join().unwrap();
    rt.wait_idle();
    let last = rt.stats();
    assert_gauges(&last, ordinary, compensation);
    assert_eq!(last.tasks_alive, 0, "{last:#?}");
}

#[test]
fn set_active_workers_from_tasks_jobs_and_hooks() {
    let _deadline = Deadline::new("set_active_workers from inside", LIMIT);
    let weak: Arc<OnceLock<Weak<Runtime>>> = Arc::new(OnceLock::new());
    let hook_calls = Arc::new(AtomicUsize::new(0));
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(3)
            .max_workers(3)
            .on_task_spawn({
                let (weak, calls) = (weak.clone(), hook_calls.clone());
                move |_| {
                    let n = calls.fetch_add(1, Relaxed);
                    if let Some(rt) = weak.get().and_then(Weak::upgrade) {
                        rt.set_active_workers(1 + n % 3).unwrap();
                        assert!(rt.set_active_workers(0).is_err());
                    }
                }
            })
            .on_task_terminate({
                let weak = weak.clone();
                move |_| {
                    if let Some(rt) = weak.get().and_then(Weak::upgrade) {
                        rt.set_active_workers(3).unwrap();
                    }
                }
            })
            .build()
            .unwrap(),
    );
    weak.set(Arc::downgrade(&rt)).unwrap();
    let handles: Vec<_> = (0..300usize)
        .map(|i| {
            let rt2 = rt.clone();
            rt.submit(move || {
                // A worker switching itself (and the others) off and on.
                rt2.set_active_workers(1 + i % 3).unwrap();
                assert!(rt2.set_active_workers(4).is_err());
                let (a, b) = magpie::join(
                    || {
                        rt2.set_active_workers(1).unwrap();
                        i
                    },
                    || {
                        rt2.set_active_workers(2).unwrap();
                        1
                    },
                );
                a + b
            })
        })
        .collect();
    let sum: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 300 * 299 / 2 + 300);
    rt.set_active_workers(1).unwrap();
    // Fork-join work on one active worker, from outside.
    assert_eq!(rt.install(|| common::fib(15)), 610);
    rt.wait_idle();
    let stats = rt.stats();
    assert_gauges(&stats, 3, 0);
    assert_eq!(stats.tasks_alive, 0);
    assert!(hook_calls.load(Relaxed) >= 300);
}

#[test]
fn last_handle_dropped_on_a_worker_while_workers_switch() {
    let _deadline = Deadline::new("runtime dropped inside its own task", LIMIT);
    for round in 0..20 {
        let rt = Arc::new(
            Runtime::builder()
                .worker_threads(1)
                .max_workers(3)
                .build()
                .unwrap(),
        );
        let (done_tx, done_rx) = mpsc::channel();
        let inner = rt.clone();
        // Detached: the task holds the last handle once the test drops its own.
        drop(rt.submit(move || {
            inner.set_active_workers(3).unwrap();
            inner.set_active_workers(1 + round % 3).unwrap();
            drop(inner);
            done_tx.send(magpie::current_worker_index()).unwrap();
        }));
        drop(rt);
        let worker = done_rx
            .recv_timeout(common::DEADLINE)
            .expect("the task that dropped the runtime finished");
        assert!(worker.is_some());
    }
}

#[test]
fn racing_set_active_workers_callers_end_at_one_of_their_values() {
    let _deadline = Deadline::new("racing set_active_workers", LIMIT);
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(1)
            .max_workers(8)
            .build()
            .unwrap(),
    );
    let callers: Vec<_> = (1..=8usize)
        .map(|n| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    rt.set_active_workers(n).unwrap();
                    drop(rt.submit(|| ()));
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    let active = rt.active_workers();
    assert!((1..=8).contains(&active));
    // Whatever the last value, work still gets done, and the count can still move.
    let handles: Vec<_> = (0..100u32).map(|i| rt.submit(move || i)).collect();
    assert_eq!(
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u32>(),
        4950
    );
    rt.set_active_workers(8).unwrap();
    eventually("every worker reports active", || {
        rt.stats().workers.iter().all(|w| w.active)
    });
    rt.wait_idle();
    assert_eq!(rt.stats().tasks_alive, 0);
}

#[test]
fn tiny_trace_rings_overflow_and_export_while_workers_run() {
    let _deadline = Deadline::new("tiny trace rings", LIMIT);
    for capacity in [0usize, 1, 2, 3] {
        let rt = Arc::new(
            Runtime::builder()
                .worker_threads(2)
                .trace(true)
                .trace_capacity(capacity)
                // No stall monitor: its stall spans are exported besides the rings, and a
                // poll descheduled past the threshold on a slow machine would add one.
                .stall_threshold(None)
                .build()
                .unwrap(),
        );
        let path = std::env::temp_dir().join(format!(
            "magpie-adversarial-trace-{}-{capacity}.json",
            std::process::id()
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let load = std::thread::spawn({
            let (rt, stop) = (rt.clone(), stop.clone());
            // At least one round, stop or not: on a loaded machine the exports below could
            // all end before this thread first ran, and nothing would have overflowed.
            move || loop {
                let hs: Vec<_> = (0..20).map(|i| rt.submit(move || i)).collect();
                for h in hs {
                    h.join().unwrap();
                }
                rt.install(|| common::fib(8));
                if stop.load(Relaxed) {
                    break;
                }
            }
        });
        let mut last_recorded = 0;
        for _ in 0..30 {
            rt.trace_export(&path).unwrap();
            let json: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let events = json["traceEvents"].as_array().unwrap();
            // Ring of at most 2 (rounded up) events per worker, plus metadata: never more.
            let per_worker = capacity.max(2).next_power_of_two();
            let real = events.iter().filter(|e| e["ph"] != "M").count();
            assert!(real <= 2 * per_worker, "{capacity}: {real} events");
            assert!(json["otherData"]["events_lost"].as_u64().is_some());
            let recorded = rt.stats().trace_events;
            assert!(recorded >= last_recorded);
            last_recorded = recorded;
        }
        stop.store(true, Relaxed);
        load.join().unwrap();
        // Exported once the load is done, so that its events (20 tasks and a fork-join a
        // round, far more than two rings of at most 4) are behind it.
        rt.trace_export(&path).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(json["otherData"]["events_lost"].as_u64().unwrap() > 0);
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn trace_export_to_a_directory_or_missing_parent_is_an_error() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .trace(true)
        .trace_capacity(16)
        .build()
        .unwrap();
    rt.submit(|| ()).join().unwrap();
    let dir = std::env::temp_dir();
    let err = rt.trace_export(&dir).unwrap_err();
    assert!(
        err.to_string().contains("cannot write the trace to"),
        "{err}"
    );
    let missing = dir.join(format!("magpie-no-such-dir-{}/t.json", std::process::id()));
    let err = rt.trace_export(&missing).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(rt.trace_export("").is_err());
}

#[test]
fn extreme_but_valid_durations_in_the_builder_do_not_panic() {
    let _deadline = Deadline::new("extreme durations", LIMIT);
    let rt = Runtime::builder()
        .worker_threads(2)
        .stall_threshold(Duration::MAX)
        .blocking_keep_alive(Duration::MAX)
        .park_safety_net(Duration::MAX)
        .build()
        .unwrap();
    assert_eq!(rt.spawn_blocking(|| 7).join().unwrap(), 7);
    assert_eq!(rt.install(|| common::fib(10)), 55);
    rt.wait_idle();
    drop(rt);
    let rt = Runtime::builder()
        .worker_threads(1)
        .stall_threshold(Duration::from_nanos(1))
        .on_stall(|_| ())
        .blocking_keep_alive(Duration::ZERO)
        .park_safety_net(Duration::from_nanos(1))
        .build()
        .unwrap();
    assert_eq!(rt.spawn_blocking(|| 7).join().unwrap(), 7);
    assert_eq!(rt.submit(|| 3).join().unwrap(), 3);
}

// --- Environment variables: each case in a child process (the environment is global). ---

const ENV_CHILD: &str = "env";

/// In the child: builds a runtime from the environment and prints the outcome.
#[test]
fn env_child() {
    if !common::is_child(ENV_CHILD) {
        return;
    }
    match Runtime::builder().build() {
        Ok(rt) => println!(
            "\nOUTCOME OK workers={} barrier={:?}",
            rt.num_workers(),
            rt.barrier_mode()
        ),
        Err(err) => println!("\nOUTCOME ERR {err}"),
    }
}

fn env_outcome(vars: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut command = common::child_test("env_child", ENV_CHILD);
    for var in [
        "MAGPIE_WORKER_THREADS",
        "MAGPIE_BARRIER",
        "MAGPIE_STALL_THRESHOLD_MS",
        "MAGPIE_TRACE",
    ] {
        command.env_remove(var);
    }
    for (k, v) in vars {
        command.env(k, v);
    }
    let out = common::run_child(command);
    assert!(out.status.success(), "{vars:?}: {out:?}");
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("OUTCOME "))
        .unwrap_or_else(|| panic!("{vars:?}: no outcome in {out:?}"))
        .to_owned()
}

#[test]
fn odd_environment_values_give_errors_or_the_documented_default() {
    use std::ffi::OsStr;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let default = format!("OK workers={cpus} ");
    for value in ["abc", "0", "-1", "", " ", "1.5", "0x10"] {
        let got = env_outcome(&[("MAGPIE_WORKER_THREADS", OsStr::new(value))]);
        assert!(got.starts_with(&default), "{value:?}: {got}");
    }
    let got = env_outcome(&[("MAGPIE_WORKER_THREADS", OsStr::new("18446744073709551616"))]);
    assert!(
        got.starts_with("ERR MAGPIE_WORKER_THREADS is 1844674"),
        "{got}"
    );
    for value in ["bogus", "", "automatic", "1"] {
        let got = env_outcome(&[
            ("MAGPIE_WORKER_THREADS", OsStr::new("1")),
            ("MAGPIE_BARRIER", OsStr::new(value)),
        ]);
        assert!(got.starts_with("ERR MAGPIE_BARRIER is"), "{value:?}: {got}");
    }
    for value in ["x", "-1", "1e3", "18446744073709551616"] {
        let got = env_outcome(&[
            ("MAGPIE_WORKER_THREADS", OsStr::new("1")),
            ("MAGPIE_STALL_THRESHOLD_MS", OsStr::new(value)),
        ]);
        assert!(
            got.starts_with("ERR MAGPIE_STALL_THRESHOLD_MS is"),
            "{value:?}: {got}"
        );
    }
    // The largest threshold is accepted and does not overflow the monitor's clock.
    let got = env_outcome(&[
        ("MAGPIE_WORKER_THREADS", OsStr::new("1")),
        (
            "MAGPIE_STALL_THRESHOLD_MS",
            OsStr::new("18446744073709551615"),
        ),
        ("MAGPIE_TRACE", OsStr::new("yes")),
    ]);
    assert!(got.starts_with("OK workers=1 "), "{got}");
}

/// A `MAGPIE_BARRIER` or `MAGPIE_STALL_THRESHOLD_MS` that is not UTF-8 is as wrong as
/// `bogus`, which is an error; `std::env::var` reports it as `NotUnicode`, which
/// `resolved_barrier` and `resolved_stall_threshold` take for "unset" and silently use the
/// default.
#[cfg(unix)]
#[test]
fn non_utf8_barrier_or_stall_threshold_is_an_error_like_any_bad_value() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"\xffsymmetric");
    let got = env_outcome(&[
        ("MAGPIE_WORKER_THREADS", std::ffi::OsStr::new("1")),
        ("MAGPIE_BARRIER", bad),
    ]);
    assert!(got.starts_with("ERR MAGPIE_BARRIER is"), "{got}");
    let got = env_outcome(&[
        ("MAGPIE_WORKER_THREADS", std::ffi::OsStr::new("1")),
        ("MAGPIE_STALL_THRESHOLD_MS", bad),
    ]);
    assert!(got.starts_with("ERR MAGPIE_STALL_THRESHOLD_MS is"), "{got}");
}

// --- The default stall reporter with an unwritable stderr. ---

const STDERR_CHILD: &str = "stderr-full";

/// In the child (stderr is `/dev/full`): a task stalls its worker with no `on_stall` hook,
/// so the default reporter writes its line to stderr, which fails. Prints what happened.
#[test]
fn stall_report_child() {
    if !common::is_child(STDERR_CHILD) {
        return;
    }
    // A static, not a leaked box: libtest drops the panic hook after the last test, which
    // would leave a box unreachable (a leak to LeakSanitizer).
    static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let panics = &PANICS;
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_owned();
        panics.lock().unwrap().push(format!("{thread}: {info}"));
    }));
    let rt = Runtime::builder()
        .worker_threads(2)
        .thread_name("rep")
        .stall_threshold(Duration::from_millis(10))
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let blocker = rt.submit({
        let release = release.clone();
        move || {
            while !release.load(Relaxed) {
                std::hint::spin_loop();
            }
        }
    });
    let stalls = |rt: &Runtime| rt.stats().workers.iter().map(|w| w.stalls).sum::<u64>();
    eventually("the stall is counted", || stalls(&rt) >= 1);
    // The report is written in the sample that counts the stall. Then either the monitor
    // keeps sampling, or it died.
    let at_stall = rt.stats().monitor_samples;
    eventually("the monitor samples on, or panicked", || {
        rt.stats().monitor_samples >= at_stall + 8 || !panics.lock().unwrap().is_empty()
    });
    release.store(true, Relaxed);
    blocker.join().unwrap();
    let panics = panics.lock().unwrap().clone();
    println!("\nPANICS {}", panics.len());
    for p in panics {
        println!("PANIC {}", p.replace('\n', " | "));
    }
}

/// Bug: `DefaultReporter::report` (`magpie/src/runtime/stall.rs`) prints with `eprintln!`,
/// which panics when stderr cannot be written (a full disk, `/dev/full`, a closed pipe as
/// in `prog 2>&1 | head -1`). The panic ends the stall monitor thread: no more stall
/// detection, queue hand-offs or compensation workers for the rest of the runtime's life,
/// and with `panic = "abort"` the whole process aborts.
#[cfg(target_os = "linux")]
#[test]
fn default_stall_report_survives_an_unwritable_stderr() {
    let mut command = common::child_test("stall_report_child", STDERR_CHILD);
    command.env_remove("MAGPIE_STALL_THRESHOLD_MS");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let deadline = std::time::Instant::now() + common::DEADLINE;
    let out = command
        .stdout(std::process::Stdio::piped())
        .stderr(full)
        .spawn()
        .expect("start the child");
    let mut child = out;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(stdout.contains("PANICS "), "{status:?}: {stdout}");
    assert!(
        stdout.contains("PANICS 0"),
        "a panic inside magpie while reporting a stall: {stdout}"
    );
    assert!(status.success(), "{status:?}: {stdout}");
}
