//! A worker thread the OS refuses to start makes `build` fail with `BuildError::Spawn`, and
//! the workers already started are stopped and joined: no thread is left behind.
//!
//! To make the *second* worker's spawn fail after the first succeeded, the test re-runs its
//! own binary under an address-space limit (`ulimit -v`) and asks for stacks so large that
//! one fits under the limit and two do not. The child is the test `child_spawn_failure`,
//! which does nothing unless `MAGPIE_TEST_CHILD` says so. Linux only: it reads `/proc` and
//! uses `sh`.

#![cfg(target_os = "linux")]

mod common;

use std::process::Command;

use common::{
    assert_thread_count_returns_to, is_child, proc_status, run_child, thread_count, CHILD_ENV,
};
use magpie::{BuildError, Runtime};

const CHILD_MODE: &str = "spawn_failure";
const CHILD_OK: &str = "spawn_failure child: ok";

/// The soft address-space limit in bytes, from `/proc/self/limits`.
fn address_space_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").expect("read /proc/self/limits");
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max address space"))
        .expect("no address space line");
    let soft = line["Max address space".len()..]
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

#[test]
fn failed_spawns_leave_no_threads_behind() {
    // Leave the child about 3 GiB of address space beyond what this process uses now; the
    // child measures what it really has left.
    let limit_kib = proc_status("VmSize:") + (3 << 20);
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"ulimit -v "$1" && exec "$0" --exact child_spawn_failure --nocapture --test-threads=1"#)
        .arg(std::env::current_exe().unwrap())
        .arg(limit_kib.to_string())
        .env(CHILD_ENV, CHILD_MODE);
    let out = run_child(command);
    assert!(
        out.status.success() && out.stdout.contains(CHILD_OK),
        "child failed: {out:?}"
    );
}

/// The child: does nothing in a normal test run.
#[test]
fn child_spawn_failure() {
    if !is_child(CHILD_MODE) {
        return;
    }
    let limit = address_space_limit().expect("the child runs under an address-space limit");
    let used = proc_status("VmSize:") * 1024;
    assert!(limit > used, "limit {limit} below current use {used}");
    let room = limit - used;
    // One stack of 3/5 of the room fits; a second one does not.
    let stack = (room / 5 * 3) & !0xfff;
    println!("limit {limit}, used {used}, stack {stack}");

    let before = thread_count();

    // The first worker already fails: nothing was started.
    match Runtime::builder()
        .worker_threads(4)
        .stack_size(usize::MAX / 2)
        .build()
    {
        Err(BuildError::Spawn { index, .. }) => assert_eq!(index, 0),
        Err(other) => panic!("expected Spawn, got {other:?}"),
        Ok(_) => panic!("built a runtime with impossible stacks"),
    }
    assert_thread_count_returns_to(before, "after the first spawn failed");

    // The first worker starts, the second fails: the first must be stopped and joined.
    for _ in 0..5 {
        match Runtime::builder()
            .worker_threads(4)
            .stack_size(stack)
            .build()
        {
            Err(BuildError::Spawn { index, source }) => {
                assert_eq!(index, 1, "the second worker should be the one refused");
                println!("refused as expected: {source}");
            }
            Err(other) => panic!("expected Spawn, got {other:?}"),
            Ok(_) => panic!("four {stack}-byte stacks fit in {room} bytes"),
        }
        assert_thread_count_returns_to(before, "after the second spawn failed");
    }

    // The first worker's stack was given back: one such worker fits again.
    let rt = Runtime::builder()
        .worker_threads(1)
        .stack_size(stack)
        .build()
        .expect("one worker with the big stack should fit again");
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
    drop(rt);
    assert_thread_count_returns_to(before, "after the last runtime");

    println!("{CHILD_OK}");
}
