//! A stack overflow on a worker kills the process cleanly (Rust's "has overflowed its stack"
//! abort), rather than hanging or corrupting memory; with a large enough `stack_size` the
//! same recursion succeeds. After rayon-core's `stack_overflow_crash` test.
//!
//! The test re-runs its own binary with `MAGPIE_TEST_CHILD` naming a child mode; the child
//! tests below do nothing unless it is set.

mod common;

use common::{child_test, is_child, run_child};
use magpie::Runtime;

const DEPTH: u32 = 10_000;

/// `depth` nested joins, each level holding a 4 KiB array on its stack across the join.
fn deep(depth: u32) -> u64 {
    let frame = std::hint::black_box([depth as u8; 4096]);
    if depth == 0 {
        return u64::from(frame[0]);
    }
    let (below, side) = magpie::join(|| deep(depth - 1), || u64::from(frame[17]));
    below + side + u64::from(std::hint::black_box(frame)[4095])
}

/// What `deep(depth)` returns: each level adds `2 * (level % 256)`.
fn expected(depth: u32) -> u64 {
    (1..=depth).map(|d| 2 * u64::from(d % 256)).sum()
}

fn run_deep(stack_size: usize) {
    let rt = Runtime::builder()
        .worker_threads(2)
        .thread_name("deep")
        .stack_size(stack_size)
        .build()
        .unwrap();
    let result = rt.install(|| deep(DEPTH));
    println!("deep result: {result}");
}

#[test]
fn stack_overflow_on_a_worker_aborts_the_process() {
    let out = run_child(child_test("child_small_stack", "small_stack"));
    let (status, stdout, stderr) = (out.status, out.stdout, out.stderr);
    assert!(
        !status.success(),
        "the child survived a {DEPTH}-deep recursion on a 64 KiB stack\nstdout:\n{stdout}"
    );
    assert!(
        stderr.contains("has overflowed its stack"),
        "the child did not report a stack overflow: {status}\nstderr:\n{stderr}"
    );
    // Rust aborts after printing the message: the child dies of SIGABRT.
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(6), "{status}\nstderr:\n{stderr}");
    }
    assert!(!stdout.contains("deep result"), "{stdout}");
}

#[test]
fn deep_recursion_succeeds_with_a_large_stack() {
    let out = run_child(child_test("child_large_stack", "large_stack"));
    let (status, stdout, stderr) = (out.status, out.stdout, out.stderr);
    assert!(
        status.success(),
        "child failed: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains(&format!("deep result: {}", expected(DEPTH))),
        "stdout:\n{stdout}"
    );
}

/// Child mode: the recursion on 64 KiB stacks. Does nothing in a normal test run.
#[test]
fn child_small_stack() {
    if is_child("small_stack") {
        run_deep(64 * 1024);
    }
}

/// Child mode: the recursion on 256 MiB stacks. Does nothing in a normal test run.
#[test]
fn child_large_stack() {
    if is_child("large_stack") {
        run_deep(256 << 20);
    }
}
