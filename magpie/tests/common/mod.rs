//! Helpers shared by the integration tests (`mod common;` in each test file). Not a test
//! binary of its own: Cargo only builds `tests/*.rs`.

// Each test binary uses only some of these.
#![allow(dead_code)]

use std::io::Read;
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use magpie::Runtime;
use std::sync::Barrier;

/// The environment variable that puts a test binary in one of its child modes.
pub(crate) const CHILD_ENV: &str = "MAGPIE_TEST_CHILD";

/// How long a polled condition or a child process may take before the test fails. Not a
/// timing assertion: everything waited for is expected within a second, and the deadline
/// only turns a hang into a failure.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

pub(crate) fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("could not build the runtime")
}

pub(crate) fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

pub(crate) fn fib_sequential(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_sequential(n - 1) + fib_sequential(n - 2)
    }
}

/// Runs `f`, expecting it to panic, and returns the payload as a string.
pub(crate) fn panic_message(f: impl FnOnce()) -> String {
    let payload = panic::catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        panic!("panic payload is neither &str nor String")
    }
}

/// Polls `condition` until it holds; fails the test after [`DEADLINE`].
pub(crate) fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A `Key: value [kB]` line of `/proc/self/status`, as a number.
#[cfg(target_os = "linux")]
pub(crate) fn proc_status(key: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} line in /proc/self/status"));
    value
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number: {value}"))
}

/// The number of threads of this process.
#[cfg(target_os = "linux")]
pub(crate) fn thread_count() -> usize {
    proc_status("Threads:")
}

/// Waits until this process has `expected` threads again. A joined thread may be counted for
/// a moment after `pthread_join` returns (the kernel wakes the joiner before it removes the
/// thread from the group), so this polls; a thread that never exits fails the test.
#[cfg(target_os = "linux")]
pub(crate) fn assert_thread_count_returns_to(expected: usize, what: &str) {
    let mut now = thread_count();
    eventually(
        &format!("{what}: {now} threads, expected {expected}"),
        || {
            now = thread_count();
            now == expected
        },
    );
}

/// A command that runs only the test `name` of this test binary, in child mode `mode`.
pub(crate) fn child_test(name: &str, mode: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode);
    command
}

/// Whether this process runs as child mode `mode` (see [`child_test`]).
pub(crate) fn is_child(mode: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(mode)
}

/// The output of a finished child process.
#[derive(Debug)]
pub(crate) struct ChildOutput {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `command` to the end and collects its output; kills it and fails the test if it is
/// still running after [`DEADLINE`].
pub(crate) fn run_child(mut command: Command) -> ChildOutput {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("could not start the child");
    // Drain both pipes on their own threads, so a chatty child cannot block on a full pipe.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child {command:?} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ChildOutput {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Runs one job on every worker at once (a barrier of `n` holds each until all have one).
/// Afterwards every worker has finished whatever task it ran before, and its counters are
/// current: a worker flushes its per-poll counts when its local queues run dry, before it
/// looks for a job elsewhere.
pub(crate) fn quiesce(rt: &magpie::Runtime) {
    let n = rt.num_workers();
    let barrier = Barrier::new(n);
    rt.install(|| {
        magpie::scope(|s| {
            for _ in 0..n {
                s.spawn(|_| {
                    barrier.wait();
                });
            }
        })
    });
}
