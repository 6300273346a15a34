//! `install` across runtimes: a worker of one runtime that installs work on another keeps
//! running its own pool's jobs while it waits, so installs that alternate between two
//! runtimes, nested deeper than either pool has workers, finish.
//!
//! With a worker that simply blocked until the other runtime was done, two runtimes of 1 and
//! 2 workers deadlock at the third level: each level's waiting worker is one its own pool
//! would need to run the next level back.

mod common;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::deadline::Deadline;
use common::{fib, fib_sequential, panic_message, runtime};
use magpie::Runtime;

/// `depth` levels of `install`, alternating between the two runtimes (starting with
/// `rts[depth % 2]`), each level a `join` whose first half goes one level deeper and whose
/// second half computes a small `fib`. Checks at each level that it runs on the runtime it
/// installed on. Returns the sum of every `fib` computed.
fn alternate(rts: &[Arc<Runtime>; 2], depth: usize) -> u64 {
    if depth == 0 {
        return fib(12);
    }
    let rt = &rts[depth % 2];
    rt.install(|| {
        let here = magpie::current_num_workers();
        assert_eq!(here, rt.num_workers(), "level {depth} runs on its runtime");
        let (deeper, own) = magpie::join(|| alternate(rts, depth - 1), || fib(10));
        assert_eq!(magpie::current_num_workers(), here);
        deeper + own
    })
}

fn expected(depth: usize) -> u64 {
    fib_sequential(12) + depth as u64 * fib_sequential(10)
}

fn two_runtimes() -> [Arc<Runtime>; 2] {
    [Arc::new(runtime(1)), Arc::new(runtime(2))]
}

const DEPTH: usize = 8;

#[test]
fn nested_installs_alternating_between_two_runtimes() {
    let _deadline = Deadline::new("alternating installs", Duration::from_secs(20));
    let rts = two_runtimes();
    for depth in 1..=DEPTH {
        for _ in 0..20 {
            assert_eq!(alternate(&rts, depth), expected(depth), "depth {depth}");
        }
    }
    // Starting from either runtime's worker, too.
    for start in 0..2 {
        let rts2 = rts.clone();
        let total = rts[start].install(move || alternate(&rts2, DEPTH));
        assert_eq!(total, expected(DEPTH));
    }
}

#[test]
fn nested_installs_from_a_blocking_closure() {
    let _deadline = Deadline::new("installs from spawn_blocking", Duration::from_secs(20));
    let rts = two_runtimes();
    for start in 0..2 {
        let rts2 = rts.clone();
        let total = rts[start]
            .spawn_blocking(move || alternate(&rts2, DEPTH))
            .join()
            .unwrap();
        assert_eq!(total, expected(DEPTH));
    }
}

#[test]
fn nested_installs_from_a_task() {
    let _deadline = Deadline::new("installs from a task", Duration::from_secs(20));
    let rts = two_runtimes();
    for start in 0..2 {
        let rts2 = rts.clone();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let rts3 = rts2.clone();
                rts[start].spawn(async move { alternate(&rts3, DEPTH) })
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.join().unwrap(), expected(DEPTH));
        }
    }
}

#[test]
fn a_panic_crosses_runtimes() {
    let _deadline = Deadline::new("a panic across runtimes", Duration::from_secs(20));
    let rts = two_runtimes();
    let msg = panic_message(|| {
        rts[0].install(|| {
            rts[1].install(|| {
                rts[0].install(|| panic!("innermost"));
            });
        });
    });
    assert_eq!(msg, "innermost");
    assert_eq!(alternate(&rts, 4), expected(4));
}

#[test]
fn a_waiting_worker_parks_and_is_woken_by_the_other_runtime() {
    // The inner work waits until the outer runtime's only worker, which waits for it, has
    // parked; the inner runtime must then wake it when it is done.
    let _deadline = Deadline::new("a parked cross-runtime waiter", Duration::from_secs(20));
    let rts = two_runtimes();
    for _ in 0..5 {
        let parks_before = rts[0].stats().workers[0].parks;
        let done = AtomicBool::new(false);
        let total = rts[0].install(|| {
            rts[1].install(|| {
                while rts[0].stats().workers[0].parks == parks_before {
                    std::thread::yield_now();
                }
                done.store(true, SeqCst);
                fib(15)
            })
        });
        assert!(done.load(SeqCst));
        assert_eq!(total, 610);
    }
}
