//! `Runtime` and `Builder`: build errors, `install`, thread names, worker counts, statistics
//! and parking.
//!
//! Thread-count checks live in their own test binaries (`no_thread_leak.rs`,
//! `spawn_failure.rs`): tests here run in parallel in one process.

mod common;

use std::collections::BTreeSet;
use std::error::Error;
use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Barrier, Mutex};

use common::{
    child_test, eventually, fib, fib_sequential, is_child, panic_message, run_child, runtime,
};
use magpie::{BuildError, Runtime, MAX_WORKERS};

/// Runs one job on every worker at the same time (a barrier of `n` holds each worker until
/// all have a job), and returns what `f` said on each. Possible because each worker that
/// takes a job blocks in it, so the `n` jobs go to `n` different workers.
fn on_every_worker<T: Send>(rt: &Runtime, f: impl Fn() -> T + Sync) -> Vec<T> {
    let n = rt.num_workers();
    let barrier = Barrier::new(n);
    let out = Mutex::new(Vec::new());
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..n {
                s.spawn(|_| {
                    barrier.wait();
                    let value = f();
                    out.lock().unwrap().push(value);
                });
            }
        })
    });
    out.into_inner().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Building
// ---------------------------------------------------------------------------------------------

#[test]
fn zero_workers_is_an_error_not_a_panic() {
    let result = panic::catch_unwind(|| Runtime::builder().worker_threads(0).build())
        .expect("build panicked");
    let err = result.expect_err("zero workers built a runtime");
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");
    assert!(!err.to_string().is_empty());
    assert!(err.source().is_none());
}

#[test]
fn too_many_workers_is_an_error() {
    let err = Runtime::builder()
        .worker_threads(MAX_WORKERS + 1)
        .build()
        .expect_err("built a runtime beyond MAX_WORKERS");
    match err {
        BuildError::TooManyWorkers { requested } => assert_eq!(requested, MAX_WORKERS + 1),
        other => panic!("expected TooManyWorkers, got {other:?}"),
    }
    let err = Runtime::builder()
        .worker_threads(usize::MAX)
        .build()
        .expect_err("built a runtime of usize::MAX workers");
    assert!(
        matches!(err, BuildError::TooManyWorkers { requested } if requested == usize::MAX),
        "{err:?}"
    );
}

#[test]
fn failed_thread_spawn_is_an_error() {
    // std reports this stack size as an OS error (EAGAIN from pthread_create) rather than
    // panicking; checked with `std::thread::Builder` on its own first.
    let huge = usize::MAX / 2;
    let std_result = std::thread::Builder::new().stack_size(huge).spawn(|| ());
    assert!(std_result.is_err(), "the OS accepted a {huge}-byte stack");

    let result = panic::catch_unwind(|| {
        Runtime::builder()
            .worker_threads(3)
            .stack_size(huge)
            .build()
    })
    .expect("build panicked");
    let err = result.expect_err("built a runtime with impossible stacks");
    match &err {
        BuildError::Spawn { index, .. } => assert_eq!(*index, 0),
        other => panic!("expected Spawn, got {other:?}"),
    }
    assert!(err.source().is_some(), "Spawn should expose the io::Error");
    assert!(err.to_string().contains('0'), "{err}");
}

#[test]
fn runtime_new_uses_the_default_worker_count() {
    let expected = std::env::var("MAGPIE_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.num_workers(), expected);
    assert_eq!(rt.install(|| fib(10)), 55);
}

#[test]
fn num_workers_and_current_num_workers() {
    for n in [1, 2, 3, 5] {
        let rt = runtime(n);
        assert_eq!(rt.num_workers(), n);
        assert_eq!(rt.install(magpie::current_num_workers), n);
        let mut indices: Vec<usize> = on_every_worker(&rt, || {
            assert_eq!(magpie::current_num_workers(), n);
            magpie::current_worker_index().unwrap()
        });
        indices.sort_unstable();
        assert_eq!(indices, (0..n).collect::<Vec<_>>(), "{n} workers");
    }
    assert_eq!(magpie::current_worker_index(), None);
}

#[test]
fn debug_output_names_the_worker_count() {
    let rt = runtime(3);
    let debug = format!("{rt:?}");
    assert!(debug.contains("Runtime") && debug.contains('3'), "{debug}");
}

// ---------------------------------------------------------------------------------------------
// Thread names and stacks
// ---------------------------------------------------------------------------------------------

#[test]
fn worker_threads_are_named_after_the_builder() {
    let rt = Runtime::builder()
        .worker_threads(3)
        .thread_name("named")
        .build()
        .unwrap();
    let names: BTreeSet<String> = on_every_worker(&rt, || {
        let index = magpie::current_worker_index().unwrap();
        let name = std::thread::current().name().unwrap().to_owned();
        assert_eq!(name, format!("named-{index}"));
        name
    })
    .into_iter()
    .collect();
    let expected: BTreeSet<String> = (0..3).map(|i| format!("named-{i}")).collect();
    assert_eq!(names, expected);
}

#[test]
fn worker_threads_have_a_default_name() {
    let rt = runtime(2);
    let names: BTreeSet<String> =
        on_every_worker(&rt, || std::thread::current().name().unwrap().to_owned())
            .into_iter()
            .collect();
    let expected: BTreeSet<String> = (0..2).map(|i| format!("magpie-worker-{i}")).collect();
    assert_eq!(names, expected);
}

#[test]
fn stack_size_is_applied_to_workers() {
    // 16 MiB of stack in one frame chain: far beyond std's 2 MiB default, fine in 64 MiB.
    fn deep(n: usize) -> u64 {
        let frame = std::hint::black_box([n as u8; 16 * 1024]);
        if n == 0 {
            return u64::from(frame[0]);
        }
        deep(n - 1) + u64::from(frame[frame.len() - 1])
    }
    let rt = Runtime::builder()
        .worker_threads(1)
        .stack_size(64 << 20)
        .build()
        .unwrap();
    let expected: u64 = (0..=1024u64).map(|n| n % 256).sum();
    assert_eq!(rt.install(|| deep(1024)), expected);
}

// ---------------------------------------------------------------------------------------------
// install
// ---------------------------------------------------------------------------------------------

#[test]
fn install_returns_the_value() {
    let rt = runtime(2);
    assert_eq!(rt.install(|| 5), 5);
    assert_eq!(rt.install(|| String::from("hello")), "hello");
    let data = [1, 2, 3];
    // `install` may borrow from the caller.
    assert_eq!(rt.install(|| data.iter().sum::<i32>()), 6);
    assert!(rt.install(|| magpie::current_worker_index().is_some()));
}

#[test]
fn install_propagates_panics_and_stays_usable() {
    let rt = runtime(2);
    for _ in 0..10 {
        assert_eq!(
            panic_message(|| rt.install(|| panic!("install panic"))),
            "install panic"
        );
        let msg = panic_message(|| {
            rt.install(|| {
                let n = 3;
                panic!("formatted {n}")
            })
        });
        assert_eq!(msg, "formatted 3");
        assert_eq!(rt.install(|| fib(12)), 144);
    }
}

#[test]
fn install_on_own_worker_runs_in_place() {
    let rt = runtime(2);
    for _ in 0..20 {
        let (outer, inner) = rt.install(|| {
            let outer = magpie::current_worker_index();
            (outer, rt.install(magpie::current_worker_index))
        });
        assert!(outer.is_some());
        assert_eq!(outer, inner);
    }
}

#[test]
fn install_across_runtimes_nests() {
    let rt_a = Runtime::builder()
        .worker_threads(2)
        .thread_name("nest-a")
        .build()
        .unwrap();
    let rt_b = Runtime::builder()
        .worker_threads(2)
        .thread_name("nest-b")
        .build()
        .unwrap();
    let name = || std::thread::current().name().unwrap().to_owned();
    for _ in 0..20 {
        // A -> B -> A. The A worker waiting for B keeps running A's jobs (a cross-runtime
        // wait, like a `join`'s), so the innermost job may run on it or on the other.
        let (a, (b, a2)) = rt_a.install(|| {
            let a = name();
            let inner = rt_b.install(|| (name(), rt_a.install(name)));
            (a, inner)
        });
        assert!(a.starts_with("nest-a-"), "{a}");
        assert!(b.starts_with("nest-b-"), "{b}");
        assert!(a2.starts_with("nest-a-"), "{a2}");
        // A panic crosses both runtimes.
        let msg = panic_message(|| {
            rt_a.install(|| rt_b.install(|| magpie::join(|| (), || panic!("deep"))));
        });
        assert_eq!(msg, "deep");
    }
}

#[test]
fn install_from_many_threads_at_once() {
    let rt = runtime(2);
    let done = AtomicUsize::new(0);
    std::thread::scope(|ts| {
        for t in 0..8u64 {
            let (rt, done) = (&rt, &done);
            ts.spawn(move || {
                for i in 0..25u64 {
                    let n = 8 + (t + i) % 8;
                    assert_eq!(rt.install(|| fib(n)), fib_sequential(n));
                    done.fetch_add(1, SeqCst);
                }
            });
        }
    });
    assert_eq!(done.load(SeqCst), 8 * 25);
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

#[test]
fn fresh_runtime_has_executed_nothing() {
    let rt = runtime(3);
    let stats = rt.stats();
    assert_eq!(stats.workers.len(), 3);
    assert_eq!(stats.jobs_executed(), 0);
    assert_eq!(stats.jobs_stolen(), 0);
    for w in &stats.workers {
        assert_eq!(w.jobs_executed, 0);
        assert_eq!(w.jobs_stolen, 0);
        assert_eq!(w.steal_attempts, 0);
    }
}

#[test]
fn stats_count_the_workload() {
    for n in [1, 2, 4] {
        let rt = runtime(n);
        assert_eq!(rt.install(|| fib(18)), 2584);
        let stats = rt.stats();
        assert_eq!(stats.workers.len(), n);
        // fib(18) makes fib(19) - 1 = 4180 joins, of which those published are jobs, plus one
        // job for the install; the outermost join is always published.
        assert!(
            (2..=4181).contains(&stats.jobs_executed()),
            "{} jobs on {n} workers",
            stats.jobs_executed()
        );
        assert_eq!(
            stats.jobs_executed(),
            stats.workers.iter().map(|w| w.jobs_executed).sum::<u64>()
        );
        assert_eq!(
            stats.jobs_stolen(),
            stats.workers.iter().map(|w| w.jobs_stolen).sum::<u64>()
        );
        assert_eq!(
            stats.parks(),
            stats.workers.iter().map(|w| w.parks).sum::<u64>()
        );
        assert!(stats.jobs_stolen() <= stats.jobs_executed());
        for w in &stats.workers {
            assert!(w.jobs_stolen <= w.steal_attempts, "{w:?}");
        }
        if n == 1 {
            assert_eq!(
                stats.jobs_stolen(),
                0,
                "a single worker has nobody to steal from"
            );
        }
    }
}

#[test]
fn stats_count_forced_steals() {
    // Each join's `b` is certainly stolen (its `a` waits for it at a barrier).
    let rt = runtime(2);
    let barrier = Barrier::new(2);
    for _ in 0..10 {
        rt.install(|| magpie::join(|| barrier.wait(), || barrier.wait()));
    }
    let stats = rt.stats();
    assert_eq!(stats.jobs_executed(), 20);
    assert!(stats.jobs_stolen() >= 10, "{stats:?}");
}

#[test]
fn idle_workers_park() {
    let rt = runtime(3);
    assert_eq!(rt.install(|| fib(15)), 610);
    eventually("every worker has parked", || {
        rt.stats().workers.iter().all(|w| w.parks >= 1)
    });
    assert!(rt.stats().parks() >= 3);

    // New work wakes a parked worker: whoever runs it returned from a park.
    let index = rt.install(|| magpie::current_worker_index().unwrap());
    let stats = rt.stats();
    assert!(
        stats.workers[index].unparks >= 1,
        "worker {index} ran a job without having unparked: {stats:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Default worker count (child processes: the environment is per process)
// ---------------------------------------------------------------------------------------------

const EXPECTED_ENV: &str = "MAGPIE_TEST_EXPECTED_WORKERS";

#[test]
fn default_worker_count_comes_from_the_environment() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cases: [(&str, usize); 6] = [
        ("3", 3),
        (" 5 ", 5),
        ("1", 1),
        // Not a positive number: one worker per CPU.
        ("0", cpus),
        ("-2", cpus),
        ("many", cpus),
    ];
    for (value, expected) in cases {
        let mut child = child_test("child_default_worker_count", "default_workers");
        child
            .env("MAGPIE_WORKER_THREADS", value)
            .env(EXPECTED_ENV, expected.to_string());
        let out = run_child(child);
        assert!(
            out.status.success() && out.stdout.contains("default workers: ok"),
            "MAGPIE_WORKER_THREADS={value:?}: {out:?}"
        );
    }
}

/// Child mode of `default_worker_count_comes_from_the_environment`; does nothing in a normal
/// test run.
#[test]
fn child_default_worker_count() {
    if !is_child("default_workers") {
        return;
    }
    let expected: usize = std::env::var(EXPECTED_ENV).unwrap().parse().unwrap();
    assert_eq!(Runtime::new().unwrap().num_workers(), expected);
    assert_eq!(Runtime::builder().build().unwrap().num_workers(), expected);
    // An explicit count wins over the environment.
    assert_eq!(runtime(2).num_workers(), 2);
    // The global runtime too.
    assert_eq!(magpie::current_num_workers(), expected);
    println!("default workers: ok");
}

#[test]
fn thread_name_with_a_nul_byte_is_an_error_not_a_panic() {
    let err = magpie::Runtime::builder()
        .worker_threads(2)
        .thread_name("bad\0name")
        .build()
        .expect_err("a NUL byte in the thread name must be rejected");
    assert!(
        matches!(err, magpie::BuildError::InvalidThreadName),
        "got {err:?}"
    );
    assert!(err.to_string().contains("NUL"));
}

#[test]
fn barrier_mode_comes_from_the_builder_then_the_environment() {
    // (MAGPIE_BARRIER value, what the child expects of a default runtime.)
    let cases = [
        ("symmetric", "symmetric"),
        (" Symmetric ", "symmetric"),
        ("asymmetric", "asymmetric-if-available"),
        ("auto", "auto"),
        ("membarrier", "error"),
    ];
    for (value, expected) in cases {
        let mut child = child_test("child_barrier_mode", "barrier_mode");
        child
            .env("MAGPIE_BARRIER", value)
            .env(EXPECTED_ENV, expected);
        let out = run_child(child);
        assert!(
            out.status.success() && out.stdout.contains("barrier mode: ok"),
            "MAGPIE_BARRIER={value:?}: {out:?}"
        );
    }
}

/// Child mode of `barrier_mode_comes_from_the_builder_then_the_environment`; does nothing in
/// a normal test run.
#[test]
fn child_barrier_mode() {
    use magpie::BarrierMode;
    if !is_child("barrier_mode") {
        return;
    }
    let expected = std::env::var(EXPECTED_ENV).unwrap();
    let built = Runtime::builder().worker_threads(2).build();
    match expected.as_str() {
        "error" => {
            let err = built.expect_err("a bad MAGPIE_BARRIER must fail the build");
            assert!(matches!(err, magpie::BuildError::InvalidBarrierEnv { .. }));
            assert!(err.to_string().contains("MAGPIE_BARRIER"), "{err}");
        }
        "symmetric" => assert_eq!(built.unwrap().barrier_mode(), BarrierMode::Symmetric),
        "asymmetric-if-available" => {
            let mode = built.unwrap().barrier_mode();
            // Linux with membarrier (every kernel since 4.14): asymmetric; else symmetric.
            assert!(cfg!(target_os = "linux") || mode == BarrierMode::Symmetric);
            assert_ne!(mode, BarrierMode::Auto);
        }
        _ => {
            // Auto: asymmetric only on few CPUs.
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let mode = built.unwrap().barrier_mode();
            if cpus.min(2) > magpie::AUTO_ASYMMETRIC_MAX_CPUS {
                assert_eq!(mode, BarrierMode::Symmetric);
            }
            assert_ne!(mode, BarrierMode::Auto);
            let many = Runtime::builder()
                .worker_threads(magpie::AUTO_ASYMMETRIC_MAX_CPUS + 1)
                .build()
                .unwrap();
            if cpus > magpie::AUTO_ASYMMETRIC_MAX_CPUS {
                assert_eq!(many.barrier_mode(), BarrierMode::Symmetric);
            }
            // A pool told to count 16 CPUs (a testing aid, `Builder::assume_cpus`) picks the
            // mode such a machine would, whatever this one has.
            let assumed = Runtime::builder()
                .worker_threads(16)
                .assume_cpus(16)
                .build()
                .unwrap();
            assert_eq!(assumed.barrier_mode(), BarrierMode::Symmetric);
            assert_eq!(assumed.install(|| magpie::join(|| 1, || 2)), (1, 2));
        }
    }
    // A mode set on the builder wins over the variable.
    let explicit = Runtime::builder()
        .worker_threads(2)
        .barrier(BarrierMode::Symmetric)
        .build()
        .unwrap();
    assert_eq!(explicit.barrier_mode(), BarrierMode::Symmetric);
    assert_eq!(explicit.stats().barrier_mode, BarrierMode::Symmetric);
    assert_eq!(explicit.install(|| magpie::join(|| 1, || 2)), (1, 2));
    println!("barrier mode: ok");
}

/// The CPUs the calling thread may run on (its affinity mask).
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed; 0 is this thread.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(
        rc,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    (0..8 * std::mem::size_of_val(&set))
        // SAFETY: `cpu` is below the set's capacity in bits.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Restricts the calling thread (and the threads it starts from now on) to `cpus`, as
/// `taskset -c` does to a whole process.
#[cfg(target_os = "linux")]
fn restrict_to(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: `cpu` came from `allowed_cpus`, so it is below the set's capacity in bits.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

const AFFINITY_CHILD: &str = "affinity";

/// The default worker count follows the affinity mask (issue 19 part 9): run as under
/// `taskset -c 0`, a default runtime has one worker, not one per CPU of the machine. The
/// child, with `MAGPIE_WORKER_THREADS` unset, restricts its own thread before it builds
/// (the mask is per thread, and the building thread's is what counts); in a process of its
/// own, so that no other test's runtime is affected.
#[cfg(target_os = "linux")]
#[test]
fn default_worker_count_follows_the_affinity_mask() {
    let mut child = child_test("child_default_worker_count_under_taskset", AFFINITY_CHILD);
    child.env_remove("MAGPIE_WORKER_THREADS");
    let out = run_child(child);
    assert!(
        out.status.success() && out.stdout.contains("affinity: ok"),
        "{out:?}"
    );
}

/// Child mode of `default_worker_count_follows_the_affinity_mask`; does nothing in a normal
/// test run.
#[cfg(target_os = "linux")]
#[test]
fn child_default_worker_count_under_taskset() {
    if !is_child(AFFINITY_CHILD) {
        return;
    }
    let cpus = allowed_cpus();
    // Unrestricted: one worker per CPU of the mask (or fewer, under a cgroup CPU quota).
    let unrestricted = Runtime::new().unwrap().num_workers();
    assert!(
        (1..=cpus.len()).contains(&unrestricted),
        "{unrestricted} workers for {cpus:?}"
    );
    if cpus.len() >= 2 {
        // Two CPUs of the mask: two workers (a quota below two CPUs would have shown above).
        restrict_to(&cpus[..2]);
        assert_eq!(Runtime::new().unwrap().num_workers(), unrestricted.min(2));
    }
    // One CPU, as `taskset -c <cpu>`: one worker, for every way of asking for the default.
    restrict_to(&cpus[..1]);
    assert_eq!(allowed_cpus(), cpus[..1]);
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.num_workers(), 1);
    assert_eq!(rt.install(|| fib(10)), 55);
    assert_eq!(Runtime::builder().build().unwrap().num_workers(), 1);
    // The global runtime, built on first use from this thread.
    assert_eq!(magpie::current_num_workers(), 1);
    println!("affinity: ok");
}
