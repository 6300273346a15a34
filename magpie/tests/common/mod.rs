//! Helpers shared by the integration tests (`mod common;` in each test file). Not a test
//! binary of its own: Cargo only builds `tests/*.rs`.

// Each test binary uses only some of these.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Barrier, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use magpie::Runtime;

pub(crate) mod deadline;
#[cfg(target_os = "linux")]
pub(crate) mod limits;

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

/// [`runtime`] without the stall monitor (`stall_threshold(None)`), for tests that hold a
/// worker on purpose and then look at where its queued tasks are, who ran them or how they
/// got there: past the threshold (100 ms, soon reached on a slow machine) the monitor hands
/// a held worker's queued tasks to the inject queue and wakes a worker for them.
pub(crate) fn runtime_without_monitor(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .stall_threshold(None)
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
    assert!(
        payload.is::<&'static str>() || payload.is::<String>(),
        "panic payload is neither &str nor String"
    );
    payload_text(&*payload)
}

/// A panic payload as text: the message of a `&str` or `String` payload, else a placeholder.
pub(crate) fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a payload that is not a string)".to_owned()
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

/// How long a [`Watchdog`]'s progress counter may stay unchanged before it fails the test.
/// A hang detector, not a timing assertion: the watched tests bump their counter every few
/// microseconds, so five seconds without a change means nothing is moving.
pub(crate) const STALL: Duration = Duration::from_secs(5);

/// Watches a progress counter on a thread of its own and, if the counter stays unchanged
/// for [`STALL`], prints the test and phase that stalled and a `Debug` dump of the watched
/// runtime's `stats()`, then aborts the process, so that CI fails at once instead of
/// hanging. Dropping the guard stops the thread (also while unwinding from a failed
/// assertion).
///
/// The report is written to the process's stderr directly: the test harness captures
/// `eprintln!` from threads a test spawns and would lose it in the abort.
#[derive(Debug)]
pub(crate) struct Watchdog {
    watched: Arc<Watched>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the watchdog thread reads.
#[derive(Debug)]
struct Watched {
    test: String,
    progress: Arc<AtomicU64>,
    phase: Mutex<String>,
    runtime: Mutex<Weak<Runtime>>,
}

impl Watchdog {
    /// Starts watching for test `test`; name a phase and a runtime with [`Watchdog::phase`].
    pub(crate) fn start(test: &str) -> Watchdog {
        let watched = Arc::new(Watched {
            test: test.to_owned(),
            progress: Arc::new(AtomicU64::new(0)),
            phase: Mutex::new("starting".to_owned()),
            runtime: Mutex::new(Weak::new()),
        });
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("watchdog: {test}"))
            .spawn({
                let watched = watched.clone();
                move || watch(&watched, &stopped)
            })
            .expect("could not start the watchdog thread");
        Watchdog {
            watched,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The counter to bump on progress (Relaxed is enough: only a change is looked for).
    pub(crate) fn progress(&self) -> Arc<AtomicU64> {
        self.watched.progress.clone()
    }

    /// Names the phase now running and the runtime whose statistics a stall report dumps.
    /// Counts as progress.
    pub(crate) fn phase(&self, phase: impl Into<String>, rt: &Arc<Runtime>) {
        *self.watched.phase.lock().unwrap() = phase.into();
        *self.watched.runtime.lock().unwrap() = Arc::downgrade(rt);
        self.watched.progress.fetch_add(1, Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Disconnecting the channel stops the thread.
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The watchdog thread: samples the counter until stopped; reports and aborts on a stall.
fn watch(watched: &Watched, stopped: &mpsc::Receiver<()>) {
    const SAMPLE: Duration = Duration::from_millis(50);
    let mut last = watched.progress.load(Relaxed);
    let mut changed_at = Instant::now();
    loop {
        match stopped.recv_timeout(SAMPLE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Nothing is ever sent: the guard's drop disconnects the channel.
            _ => return,
        }
        let now = watched.progress.load(Relaxed);
        if now != last {
            last = now;
            changed_at = Instant::now();
            continue;
        }
        let stalled = changed_at.elapsed();
        if stalled < STALL {
            continue;
        }
        let phase = watched.phase.lock().map(|p| p.clone()).unwrap_or_default();
        let stats = match watched.runtime.lock().ok().and_then(|rt| rt.upgrade()) {
            Some(rt) => format!("{:#?}", rt.stats()),
            None => "(the runtime is gone)".to_owned(),
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "\nwatchdog: `{}` stalled in phase `{phase}`: progress counter stuck at {last} \
             for {stalled:?} (a lost wakeup, a task that never runs, or a deadlock). \
             Runtime statistics:\n{stats}\nAborting.",
            watched.test
        );
        let _ = err.flush();
        std::process::abort();
    }
}

/// The seed of a randomized test: `SEED=<u64>` from the environment replays a run; otherwise
/// a fresh one from the clock. Printed either way, so a failure can be replayed.
pub(crate) fn seed(test: &str) -> u64 {
    let seed = match std::env::var("SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("SEED={text:?} is not a u64")),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as u64;
            SplitMix64::new(nanos ^ u64::from(std::process::id())).next_u64()
        }
    };
    eprintln!("{test}: SEED={seed} (set SEED={seed} to replay)");
    seed
}

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014; Vigna's constants): a tiny, good-enough,
/// seedable generator for test inputs. Every seed, 0 included, gives a full-period stream.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (Lemire's multiply-shift; the bias is negligible for test sizes).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `1 / n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Busy-spins for `d` (a delay that keeps the thread running, unlike a sleep; never used to
/// wait for another thread).
pub(crate) fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Asserts that every counter in `now` is at least its value in `then`.
pub(crate) fn assert_monotonic(then: &magpie::Stats, now: &magpie::Stats) {
    assert!(now.uptime_ns >= then.uptime_ns);
    for (i, (a, b)) in then.workers.iter().zip(&now.workers).enumerate() {
        let pairs = [
            ("busy_time_ns", a.busy_time_ns, b.busy_time_ns),
            ("idle_time_ns", a.idle_time_ns, b.idle_time_ns),
            ("jobs_executed", a.jobs_executed, b.jobs_executed),
            ("jobs_stolen", a.jobs_stolen, b.jobs_stolen),
            ("steal_attempts", a.steal_attempts, b.steal_attempts),
            ("parks", a.parks, b.parks),
            ("unparks", a.unparks, b.unparks),
            ("tasks_polled", a.tasks_polled, b.tasks_polled),
            ("tasks_executed", a.tasks_executed, b.tasks_executed),
            ("tasks_stolen", a.tasks_stolen, b.tasks_stolen),
            ("steal_operations", a.steal_operations, b.steal_operations),
            ("lifo_hits", a.lifo_hits, b.lifo_hits),
            ("inject_pulls", a.inject_pulls, b.inject_pulls),
            ("overflows", a.overflows, b.overflows),
            ("failed_steals", a.failed_steals, b.failed_steals),
            ("local_schedules", a.local_schedules, b.local_schedules),
            ("noops", a.noops, b.noops),
            ("tasks_spawned", a.tasks_spawned, b.tasks_spawned),
        ];
        for (name, then, now) in pairs {
            assert!(now >= then, "worker {i}: {name} went from {then} to {now}");
        }
    }
    assert!(now.tasks_spawned_remote >= then.tasks_spawned_remote);
    assert!(now.remote_schedules >= then.remote_schedules);
}

/// One flag per unit of work (task, job, closure), each of which must run exactly once.
pub(crate) struct Ledger(Vec<std::sync::atomic::AtomicU8>);

impl Ledger {
    pub(crate) fn new(n: usize) -> Arc<Ledger> {
        Arc::new(Ledger(
            (0..n)
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
        ))
    }

    /// Unit `i` ran (once more).
    pub(crate) fn ran(&self, i: usize) {
        // SeqCst: a test's tally, read after the runtime went idle.
        self.0[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Panics naming the first unit that ran other than once.
    pub(crate) fn assert_each_once(&self) {
        for (i, flag) in self.0.iter().enumerate() {
            assert_eq!(
                flag.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "unit {i}"
            );
        }
    }
}

/// A runtime of `workers` workers whose threads are named `name-{index}` (for
/// [`wait_until_asleep`]).
pub(crate) fn named_runtime(workers: usize, name: &str) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .thread_name(name)
        .build()
        .unwrap()
}

/// The kernel states (`R`, `S`, ...) of this process's worker threads named
/// `{prefix}-{index}` (not the monitor nor blocking threads), from `/proc/self/task`.
#[cfg(target_os = "linux")]
pub(crate) fn thread_states(prefix: &str) -> Vec<char> {
    let mut states = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let dir = entry.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let is_worker = comm
            .trim_end()
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()));
        if !is_worker {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // `pid (comm) S ...`: the state follows the last `)`.
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
            if let Some(state) = rest.trim_start().chars().next() {
                states.push(state);
            }
        }
    }
    states
}

/// Waits until every one of the `n` worker threads `prefix-*` is asleep in the kernel
/// (state `S`), as seen 20 times in a row, polling `/proc` every millisecond. A
/// precondition that makes a scenario the interesting one (every worker parked before the
/// stimulus), not a timing assumption: if it never holds, this fails after [`DEADLINE`].
#[cfg(target_os = "linux")]
pub(crate) fn wait_until_asleep(prefix: &str, n: usize) {
    let mut in_a_row = 0;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let states = thread_states(prefix);
        if states.len() == n && states.iter().all(|&s| s == 'S') {
            in_a_row += 1;
        } else {
            in_a_row = 0;
        }
        if in_a_row >= 20 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "threads `{prefix}*` never all asleep: {states:?}, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The message of every panic a test causes on purpose (see [`quiet_planned_panics`]).
pub(crate) const PLANNED: &str = "planned panic";

/// Keeps the planned panics out of the test output (there may be thousands); every other
/// panic still prints.
pub(crate) fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let planned = info.payload().downcast_ref::<&str>() == Some(&PLANNED);
            if !planned {
                default(info);
            }
        }));
    });
}

/// Panics with [`PLANNED`].
pub(crate) fn planned_panic() -> ! {
    panic::panic_any(PLANNED)
}
