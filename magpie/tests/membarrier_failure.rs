//! A failing `membarrier` aborts the process with a message naming it.
//!
//! In the asymmetric barrier mode the owner's side of the deque's and the sleep protocol's
//! barriers is only a compiler fence; the thief's (or parking worker's) `membarrier` call is
//! what orders the two. Should that call fail after registration (`ENOMEM`, a seccomp filter
//! installed later), going on would let an owner and a thief both take the last job, so magpie
//! aborts. The failure is injected (debug builds, `MAGPIE_TEST_FAIL_MEMBARRIER`): the child
//! process believes registration succeeded, and every barrier call then fails.

#![cfg(all(target_os = "linux", debug_assertions))]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use common::{child_test, is_child, run_child};

const CHILD: &str = "failing-membarrier";

/// SIGABRT: 6 on every Linux architecture (the tests do not depend on `libc`).
const SIGABRT: i32 = 6;

#[test]
fn failing_membarrier_aborts_with_a_message() {
    if is_child(CHILD) {
        // Two joins whose second halves are certainly stolen. The first steal needs no
        // heavy barrier (the deque's `top` is still the owner's, chase_lev.rs invariant 7);
        // after it a thief wrote `top`, so the second steal runs the heavy barrier (and so
        // may a worker that parks).
        let rt = magpie::Runtime::builder()
            .worker_threads(2)
            .barrier(magpie::BarrierMode::Asymmetric)
            .build()
            .unwrap();
        assert_eq!(rt.barrier_mode(), magpie::BarrierMode::Asymmetric);
        rt.install(|| {
            for _ in 0..2 {
                let b_started = AtomicBool::new(false);
                magpie::join(
                    || {
                        while !b_started.load(SeqCst) {
                            std::thread::yield_now();
                        }
                    },
                    || b_started.store(true, SeqCst),
                );
            }
        });
        drop(rt);
        println!("the child finished without aborting");
        return;
    }
    let mut command = child_test("failing_membarrier_aborts_with_a_message", CHILD);
    command
        .env("MAGPIE_TEST_FAIL_MEMBARRIER", "1")
        .env_remove("MAGPIE_BARRIER");
    let out = run_child(command);
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "the child should abort; status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains("membarrier") && out.stderr.contains("aborting"),
        "stderr should name membarrier:\n{}",
        out.stderr
    );
}
