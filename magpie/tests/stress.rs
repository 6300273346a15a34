//! Stress: fork-join across worker counts, with exact accounting. Runs in debug with
//! `cargo test` and again in release (larger sizes) from `scripts/test.sh`.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

fn runtime(workers: usize) -> magpie::Runtime {
    magpie::Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("runtime")
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn fib_sequential(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_sequential(n - 1) + fib_sequential(n - 2)
    }
}

const WORKER_COUNTS: [usize; 5] = [1, 2, 3, 4, 8];

#[test]
fn fib_through_join_equals_sequential_on_every_worker_count() {
    let n = if cfg!(debug_assertions) { 22 } else { 30 };
    let expected = fib_sequential(n);
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        for _ in 0..3 {
            assert_eq!(
                rt.install(|| fib(n)),
                expected,
                "fib({n}) on {workers} workers"
            );
        }
    }
}

/// A binary tree of joins whose leaves each bump their own slot: every leaf runs exactly once.
fn leaves(slots: &[AtomicUsize]) {
    if slots.len() == 1 {
        slots[0].fetch_add(1, Relaxed);
        return;
    }
    let (left, right) = slots.split_at(slots.len() / 2);
    magpie::join(|| leaves(left), || leaves(right));
}

#[test]
fn every_join_half_runs_exactly_once_on_every_worker_count() {
    let n = if cfg!(debug_assertions) {
        1 << 15
    } else {
        1 << 20
    };
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let slots: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        rt.install(|| leaves(&slots));
        let wrong = slots.iter().position(|s| s.load(Relaxed) != 1);
        assert_eq!(
            wrong, None,
            "a leaf ran other than once on {workers} workers"
        );
    }
}

#[test]
fn nested_scopes_spawn_exactly_once_on_every_worker_count() {
    let per_level = if cfg!(debug_assertions) { 20 } else { 60 };
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let count = AtomicUsize::new(0);
        rt.install(|| {
            magpie::scope(|s| {
                for _ in 0..per_level {
                    s.spawn(|s| {
                        for _ in 0..per_level {
                            s.spawn(|_| {
                                count.fetch_add(1, Relaxed);
                            });
                        }
                    });
                }
            })
        });
        assert_eq!(
            count.load(Relaxed),
            per_level * per_level,
            "on {workers} workers"
        );
    }
}

#[test]
fn many_outside_threads_install_at_once() {
    let rt = runtime(3);
    let threads = 8;
    let per_thread = if cfg!(debug_assertions) { 200 } else { 2_000 };
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for i in 0..per_thread {
                    let (a, b) = rt.install(|| magpie::join(|| i, || 1));
                    total.fetch_add(a + b - i, Relaxed);
                }
            });
        }
    });
    assert_eq!(total.load(Relaxed), threads * per_thread);
}
