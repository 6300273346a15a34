//! Dropping a runtime joins its workers: building and dropping many runtimes leaves the
//! process with as many threads as before.
//!
//! Alone in its test binary (its own process), because it counts the process's threads and
//! other tests would start and stop workers meanwhile. Linux only: it reads `/proc`.

#![cfg(target_os = "linux")]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Barrier;

use common::{assert_thread_count_returns_to, thread_count};
use magpie::Runtime;

#[test]
fn dropping_runtimes_leaves_no_threads_behind() {
    let before = thread_count();
    let joins = AtomicUsize::new(0);

    for i in 0..1000 {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let (a, b) = rt.install(|| {
            magpie::join(
                || {
                    joins.fetch_add(1, SeqCst);
                    i
                },
                || {
                    joins.fetch_add(1, SeqCst);
                    i + 1
                },
            )
        });
        assert_eq!((a, b), (i, i + 1));
        if i == 0 {
            // While a runtime lives, its workers and its stall monitor are threads of this
            // process.
            assert_eq!(thread_count(), before + 3);
        }
        drop(rt);
    }
    assert_eq!(joins.load(SeqCst), 2000);
    assert_thread_count_returns_to(before, "after 1000 runtimes");

    // Also when workers are parked, busy until just before the drop, or never used at all.
    for _ in 0..20 {
        let idle = Runtime::builder().worker_threads(3).build().unwrap();
        drop(idle);

        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let barrier = Barrier::new(2);
        rt.install(|| magpie::join(|| barrier.wait(), || barrier.wait()));
        drop(rt);
    }
    assert_thread_count_returns_to(before, "after idle and busy runtimes");

    // Compensation slots are threads too, started with the runtime: all are joined, whether
    // they were switched on, retired, or neither.
    for i in 0..20 {
        let rt = Runtime::builder()
            .worker_threads(1)
            .max_compensation_workers(2)
            .build()
            .unwrap();
        if i == 0 {
            // One worker, two compensation slots and the stall monitor.
            assert_eq!(thread_count(), before + 4);
        }
        if i % 2 == 0 {
            assert!(rt.__start_compensation_worker());
        }
        if i % 4 == 0 {
            rt.__retire_compensation_workers();
        }
        assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
        drop(rt);
    }
    assert_thread_count_returns_to(before, "after runtimes with compensation workers");

    // A runtime dropped on a worker of another runtime joins its threads from there.
    let outer = Runtime::builder().worker_threads(2).build().unwrap();
    for _ in 0..20 {
        let inner = Runtime::builder().worker_threads(2).build().unwrap();
        assert_eq!(inner.install(|| magpie::join(|| 1, || 2)), (1, 2));
        outer.install(move || drop(inner));
    }
    drop(outer);
    assert_thread_count_returns_to(before, "after runtimes dropped on other workers");
}
