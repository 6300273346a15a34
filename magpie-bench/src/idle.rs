//! The `idle` benchmark: how much CPU a pool burns in the second after its work ends.
//!
//! All three pools exist throughout. Each window runs a short burst of joins on one pool
//! (or none, for the baseline), then sleeps one second on the main thread and records the
//! process's CPU time across the sleep (`getrusage(RUSAGE_SELF)`, user + system). On Linux
//! the time is also split per thread (`/proc/self/task/*/schedstat`) and attributed to the
//! pools by thread name, so a pool that burns CPU while another is measured shows up.
//!
//! Two more subjects stress idling with work that never becomes ready: a fresh runtime
//! (magpie, and tokio as the peer) holding `--pending-timers` tasks that each sleep an hour,
//! plus (magpie) one task awaiting `std::future::pending()`. Every such task has been polled
//! once, and every timer filed, before the window opens; the runtime is dropped after it
//! closes. A runtime whose idle workers wake per pending timer, or rescan the wheel on a
//! short tick, shows up here and not in the burst rows.

use std::fs;
use std::future::Future;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::fork_join::FibTask;
use crate::harness::{fmt_ms, markdown_table, median_f64, progress, rotation, OrderedObject};
use crate::pools::{Impl, Pools, MAGPIE_THREAD_PREFIX, RAYON_THREAD_PREFIX};

/// The thread groups CPU time is attributed to.
const GROUPS: [&str; 5] = [
    "magpie threads",
    "rayon threads",
    "timer-rt threads",
    "chili+other threads",
    "main thread",
];

/// Indices into [`GROUPS`]. The groups before the main thread's come from `/proc`.
const MAGPIE_GROUP: usize = 0;
const RAYON_GROUP: usize = 1;
const TIMER_RT_GROUP: usize = 2;
const OTHER_GROUP: usize = 3;
const MAIN_GROUP: usize = 4;

/// The thread-name prefix of the runtimes built for the pending-timer subjects. Linux keeps
/// 15 bytes of a thread's name, so the full names below stay within that to be told apart.
const TIMER_RT_THREAD_PREFIX: &str = "bench-tmr";
/// magpie appends `-{index}`: "bench-tmr-mp-0".
const TIMER_RT_MAGPIE_NAME: &str = "bench-tmr-mp";
const TIMER_RT_TOKIO_NAME: &str = "bench-tmr-tokio";

/// How long each pending timer sleeps: far beyond the window, so none fires during it.
const TIMER_SLEEP: Duration = Duration::from_secs(3600);

/// How long to wait for the pending tasks' first polls before giving up.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// What runs before a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    /// Nothing: the floor every other row is compared with.
    Baseline,
    /// A burst of joins on one of the shared pools.
    Burst(Impl),
    /// A fresh runtime holding `--pending-timers` hour-long sleeps (and, for magpie, one
    /// never-ready task).
    PendingTimers(TimerRt),
}

/// The runtime of a [`Subject::PendingTimers`] window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimerRt {
    Magpie,
    Tokio,
}

impl TimerRt {
    fn name(self) -> &'static str {
        match self {
            TimerRt::Magpie => "magpie",
            TimerRt::Tokio => "tokio",
        }
    }
}

/// The length of one idle window.
const WINDOW: Duration = Duration::from_secs(1);

/// The work before each window: this many `fib(BURST_N)` with a join at every call.
const BURST_RUNS: usize = 5;
const BURST_N: u64 = 25;

/// CPU time of the whole process so far (user + system).
pub(crate) fn process_cpu() -> Duration {
    let mut usage = MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `getrusage` writes a complete `rusage` through the valid pointer we pass.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage failed");
    // SAFETY: `getrusage` returned 0, so it initialised `usage`.
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU time of the calling thread so far.
fn thread_cpu() -> Duration {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `clock_gettime` writes a complete `timespec` through the valid pointer we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, ts.as_mut_ptr()) };
    assert_eq!(rc, 0, "clock_gettime failed");
    // SAFETY: `clock_gettime` returned 0, so it initialised `ts`.
    let ts = unsafe { ts.assume_init() };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Calls `f` with the id, the name and the nanoseconds of CPU so far of every thread of the
/// process but the main thread, or returns `None` where `/proc` cannot tell.
fn for_each_thread_cpu(mut f: impl FnMut(&str, &str, u64)) -> Option<()> {
    let pid = std::process::id().to_string();
    for entry in fs::read_dir("/proc/self/task").ok()? {
        let entry = entry.ok()?;
        let tid = entry.file_name().to_string_lossy().into_owned();
        let dir = entry.path();
        let Ok(schedstat) = fs::read_to_string(dir.join("schedstat")) else {
            continue; // the thread exited meanwhile
        };
        let ns: u64 = schedstat.split_whitespace().next()?.parse().ok()?;
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if tid == pid {
            continue;
        }
        f(&tid, comm.trim_end(), ns);
    }
    Some(())
}

/// Nanoseconds of CPU per group of threads (every group of [`GROUPS`] but the main thread,
/// which is measured on its own), or `None` where `/proc` cannot tell.
fn thread_cpu_by_group() -> Option<[u64; MAIN_GROUP]> {
    let mut groups = [0u64; MAIN_GROUP];
    for_each_thread_cpu(|_, comm, ns| {
        let group = if comm.starts_with(MAGPIE_THREAD_PREFIX) {
            MAGPIE_GROUP
        } else if comm.starts_with(RAYON_THREAD_PREFIX) {
            RAYON_GROUP
        } else if comm.starts_with(TIMER_RT_THREAD_PREFIX) {
            TIMER_RT_GROUP
        } else {
            OTHER_GROUP
        };
        groups[group] += ns;
    })?;
    Some(groups)
}

/// CPU time so far of each thread (the main thread aside) whose name (as `/proc` keeps it: at
/// most 15 bytes) `matches`, by thread id, or `None` where `/proc` cannot tell. Subtract two
/// with [`threads_cpu_since`]. `lone_request_cpu` and the `net` benchmark's idle-connections
/// row split the process's time by runtime with it.
pub(crate) fn threads_cpu_by_tid(
    matches: impl Fn(&str) -> bool,
) -> Option<std::collections::HashMap<String, u64>> {
    let mut by_tid = std::collections::HashMap::new();
    for_each_thread_cpu(|tid, comm, ns| {
        if matches(comm) {
            by_tid.insert(tid.to_owned(), ns);
        }
    })?;
    Some(by_tid)
}

/// The CPU time the threads of `after` spent since `before` (both from
/// [`threads_cpu_by_tid`]): a thread in both counts its difference, a thread started since
/// counts all of its time. A thread that exited in between (a runtime's compensation worker
/// retired, a blocking thread past its keep-alive) takes its time with it; subtracting sums
/// instead would take that time away from the others', down to nothing.
pub(crate) fn threads_cpu_since(
    before: &std::collections::HashMap<String, u64>,
    after: &std::collections::HashMap<String, u64>,
) -> Duration {
    let ns: u64 = after
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    Duration::from_nanos(ns)
}

/// The sum of a magpie runtime's per-worker counters that tell about idling.
fn magpie_idle_counters(rt: &magpie::Runtime) -> [u64; 3] {
    let stats = rt.stats();
    stats.workers.iter().fold([0; 3], |acc, w| {
        [
            acc[0] + w.parks,
            acc[1] + w.unparks,
            acc[2] + w.steal_attempts,
        ]
    })
}

/// One measured window.
#[derive(Debug, Clone)]
struct Window {
    /// Process CPU in ms per second of wall time.
    process: f64,
    /// Per group, ms per second of wall time (`None` without `/proc`).
    groups: Option<[f64; GROUPS.len()]>,
    /// Parks, unparks and steal attempts during the window of the magpie runtime under test:
    /// the pending-timer runtime in its window, the shared pool otherwise.
    magpie_counters: [u64; 3],
}

/// Prepares `subject`, then measures one idle window. `timers` is `--pending-timers`.
fn window(pools: &Pools, subject: Subject, timers: usize) -> Window {
    match subject {
        Subject::Baseline => measure(&pools.magpie),
        Subject::Burst(imp) => {
            burst(pools, imp);
            measure(&pools.magpie)
        }
        Subject::PendingTimers(TimerRt::Magpie) => {
            let rt = magpie_with_pending(pools.workers(), timers);
            let w = measure(&rt);
            // Dropped outside the window: dropping cancels the tasks, which is work.
            drop(rt);
            w
        }
        Subject::PendingTimers(TimerRt::Tokio) => {
            let rt = tokio_with_pending(pools.workers(), timers);
            let w = measure(&pools.magpie);
            drop(rt);
            w
        }
    }
}

/// Measures one idle window, counting `counted`'s parks, unparks and steal attempts.
fn measure(counted: &magpie::Runtime) -> Window {
    let counters_before = magpie_idle_counters(counted);
    let groups_before = thread_cpu_by_group();
    let cpu_before = process_cpu();
    let main_before = thread_cpu();
    let start = Instant::now();
    thread::sleep(WINDOW);
    let main_after = thread_cpu();
    let cpu_after = process_cpu();
    let wall = start.elapsed().as_secs_f64();
    let groups_after = thread_cpu_by_group();
    let counters_after = magpie_idle_counters(counted);
    let per_second = |ns: f64| ns / 1e6 / wall;
    let main = per_second((main_after - main_before).as_nanos() as f64);
    let groups = match (groups_before, groups_after) {
        (Some(b), Some(a)) => Some(std::array::from_fn(|g| {
            if g == MAIN_GROUP {
                main
            } else {
                per_second(a[g].saturating_sub(b[g]) as f64)
            }
        })),
        _ => None,
    };
    Window {
        process: per_second((cpu_after - cpu_before).as_nanos() as f64),
        groups,
        magpie_counters: std::array::from_fn(|i| counters_after[i] - counters_before[i]),
    }
}

/// Wraps `fut` so that it adds one to `polled` when its first poll returns, that is, once
/// whatever it waits on (a timer, for a sleep) is registered.
async fn count_first_poll<F: Future>(polled: Arc<AtomicUsize>, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut counted = false;
    std::future::poll_fn(|cx| {
        let poll = fut.as_mut().poll(cx);
        if !counted {
            counted = true;
            // Release: publishes the registration the poll made; pairs with the Acquire
            // load in `settle`.
            polled.fetch_add(1, Release);
        }
        poll
    })
    .await
}

/// Waits until `polled` reaches `expected` and `ready()` holds, polling every millisecond.
///
/// # Panics
///
/// If that takes longer than [`SETTLE_LIMIT`].
fn settle(what: &str, polled: &AtomicUsize, expected: usize, ready: impl Fn() -> bool) {
    let start = Instant::now();
    // Acquire: pairs with the Release increment in `count_first_poll`.
    while polled.load(Acquire) < expected || !ready() {
        assert!(
            start.elapsed() < SETTLE_LIMIT,
            "{what}: {} of {expected} pending tasks polled after {SETTLE_LIMIT:?}",
            polled.load(Acquire),
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// A fresh magpie runtime holding `timers` tasks asleep for an hour and one task awaiting
/// `std::future::pending()`, each polled once and every timer filed.
fn magpie_with_pending(workers: usize, timers: usize) -> magpie::Runtime {
    let rt = magpie::Runtime::builder()
        .worker_threads(workers)
        .thread_name(TIMER_RT_MAGPIE_NAME)
        .build()
        .expect("could not start the pending-timer magpie runtime");
    let polled = Arc::new(AtomicUsize::new(0));
    for _ in 0..timers {
        // The handles are dropped: the tasks stay, detached, until the runtime is dropped.
        drop(rt.spawn(count_first_poll(
            polled.clone(),
            magpie::time::sleep(TIMER_SLEEP),
        )));
    }
    drop(rt.spawn(count_first_poll(
        polled.clone(),
        std::future::pending::<()>(),
    )));
    // `timers_pending` says the wheel holds every timer, not merely that every poll began.
    settle("magpie", &polled, timers + 1, || {
        rt.stats().timers_pending == timers as u64
    });
    rt
}

/// A fresh tokio multi-thread runtime (time enabled) holding `timers` tasks asleep for an
/// hour, each polled once.
fn tokio_with_pending(workers: usize, timers: usize) -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(TIMER_RT_TOKIO_NAME)
        .enable_time()
        .build()
        .expect("could not start the pending-timer tokio runtime");
    let polled = Arc::new(AtomicUsize::new(0));
    for _ in 0..timers {
        // `tokio::time::sleep` needs the runtime's context when it is created: the async
        // block defers the call to the first poll, on a worker.
        drop(rt.spawn(count_first_poll(polled.clone(), async {
            tokio::time::sleep(TIMER_SLEEP).await;
        })));
    }
    settle("tokio", &polled, timers, || true);
    rt
}

/// `n` for a table: "10k" for whole thousands.
pub(crate) fn count_label(n: usize) -> String {
    if n >= 1000 && n % 1000 == 0 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// The result of the idle benchmark.
#[derive(Debug)]
pub(crate) struct IdleReport {
    workers: usize,
    /// `--pending-timers`.
    timers: usize,
    windows: Vec<(Subject, Vec<Window>)>,
}

/// Measures `reps` windows for the baseline, after each pool's burst and (unless `timers` is
/// 0) with `timers` pending timers on a fresh magpie and tokio runtime, in rotating order.
pub(crate) fn run(pools: &Pools, reps: usize, timers: usize) -> IdleReport {
    let mut subjects = vec![
        Subject::Baseline,
        Subject::Burst(Impl::Magpie),
        Subject::Burst(Impl::Rayon),
        Subject::Burst(Impl::Chili),
    ];
    if timers > 0 {
        subjects.push(Subject::PendingTimers(TimerRt::Magpie));
        subjects.push(Subject::PendingTimers(TimerRt::Tokio));
    }
    // Warm every pool up, then let all of them fall asleep before the first window.
    for imp in Impl::POOLS {
        burst(pools, imp);
    }
    thread::sleep(WINDOW);
    let mut windows: Vec<(Subject, Vec<Window>)> =
        subjects.iter().map(|&s| (s, Vec::new())).collect();
    let started = Instant::now();
    progress(format_args!(
        "idle ({} workers): {reps} rounds of {} one-second windows ",
        pools.workers(),
        subjects.len()
    ));
    for round in 0..reps {
        for (k, subject) in rotation(&subjects, round).enumerate() {
            let w = window(pools, subject, timers);
            windows[(round + k) % subjects.len()].1.push(w);
        }
        progress(format_args!("."));
    }
    progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
    IdleReport {
        workers: pools.workers(),
        timers,
        windows,
    }
}

/// The work before a window.
fn burst(pools: &Pools, imp: Impl) {
    for _ in 0..BURST_RUNS {
        let result = pools.run(imp, &mut FibTask(BURST_N));
        assert_eq!(result, 75_025, "{imp}: wrong fib({BURST_N})");
    }
}

impl IdleReport {
    /// The row label of `subject`.
    fn label(&self, subject: Subject) -> String {
        match subject {
            Subject::Baseline => "none (baseline)".to_owned(),
            Subject::Burst(imp) => imp.name().to_owned(),
            Subject::PendingTimers(rt) => {
                format!("{} + {} timers", rt.name(), count_label(self.timers))
            }
        }
    }

    fn windows_of(&self, subject: Subject) -> Option<&[Window]> {
        self.windows
            .iter()
            .find(|(s, _)| *s == subject)
            .map(|(_, ws)| ws.as_slice())
    }

    fn process_median(&self, subject: Subject) -> f64 {
        let ws = self.windows_of(subject).expect("measured");
        median_f64(&ws.iter().map(|w| w.process).collect::<Vec<_>>())
    }

    /// The median ms/s of `subject`'s windows on the threads of `group`, or, without `/proc`,
    /// the process's median minus the baseline's.
    fn own_threads_median(&self, subject: Subject, group: usize) -> f64 {
        let ws = self.windows_of(subject).expect("measured");
        let values: Option<Vec<f64>> = ws.iter().map(|w| w.groups.map(|g| g[group])).collect();
        values.map_or_else(
            || self.process_median(subject) - self.process_median(Subject::Baseline),
            |v| median_f64(&v),
        )
    }

    /// The median of one of the magpie counters over `subject`'s windows.
    fn counter_median(&self, subject: Subject, i: usize) -> f64 {
        let ws = self.windows_of(subject).expect("measured");
        median_f64(
            &ws.iter()
                .map(|w| w.magpie_counters[i] as f64)
                .collect::<Vec<_>>(),
        )
    }

    /// "X ms/s on its own threads (target < 10 ms/s: met), P parks, U unparks, S steal
    /// attempts" for a magpie subject whose threads are `group`.
    fn magpie_summary(&self, subject: Subject, group: usize) -> String {
        let own = self.own_threads_median(subject, group);
        format!(
            "{} ms/s on its own threads (target < 10 ms/s: {}), {} parks, {} unparks, {} \
             steal attempts",
            fmt_ms(own),
            if own < 10.0 { "met" } else { "NOT met" },
            self.counter_median(subject, 0),
            self.counter_median(subject, 1),
            self.counter_median(subject, 2),
        )
    }

    /// The report as markdown.
    pub(crate) fn render(&self) -> String {
        let baseline = self.process_median(Subject::Baseline);
        let mut rows = Vec::new();
        for (subject, ws) in &self.windows {
            let process: Vec<f64> = ws.iter().map(|w| w.process).collect();
            let med = median_f64(&process);
            let min = process.iter().copied().fold(f64::INFINITY, f64::min);
            let max = process.iter().copied().fold(0.0, f64::max);
            let mut row = vec![
                self.label(*subject),
                fmt_ms(med),
                fmt_ms(min),
                fmt_ms(max),
                if *subject == Subject::Baseline {
                    "–".to_owned()
                } else {
                    fmt_ms(med - baseline)
                },
            ];
            for g in 0..GROUPS.len() {
                let values: Option<Vec<f64>> =
                    ws.iter().map(|w| w.groups.map(|gs| gs[g])).collect();
                row.push(values.map_or("?".to_owned(), |v| fmt_ms(median_f64(&v))));
            }
            rows.push(row);
        }
        let mut headers = vec![
            "after work on",
            "process CPU (ms/s)",
            "min",
            "max",
            "minus baseline",
        ];
        headers.extend(GROUPS);
        let right: Vec<bool> = (0..headers.len()).map(|i| i > 0).collect();
        let samples = self.windows.first().map_or(0, |(_, w)| w.len());
        let mut out = format!(
            "### idle — CPU per idle second after a burst, {} workers, {} windows each\n\n",
            self.workers, samples
        );
        out.push_str(&markdown_table(&headers, &right, &rows));
        out.push_str(&format!(
            "\nEach window: {BURST_RUNS}× fib({BURST_N}) on the pool named in the first column \
             (none for the baseline), then 1 s of sleep on the main thread; all pools exist \
             throughout. Medians in ms of CPU per second of wall time; thread columns split the \
             same time by thread (chili's threads are unnamed and land in chili+other; main is \
             the sleeping main thread).\n"
        ));
        if self.timers > 0 {
            out.push_str(&format!(
                "\nThe `+ timers` rows burst nothing: before each of their windows a fresh \
                 {workers}-worker runtime (magpie; tokio multi-thread with time enabled) gets \
                 {timers} spawned tasks each awaiting a {secs} s sleep (magpie: plus one task \
                 awaiting `std::future::pending()`), each polled once and (magpie) \
                 `timers_pending` = {timers}; it is dropped after the window. Its threads are \
                 the timer-rt column.\n",
                workers = self.workers,
                timers = self.timers,
                secs = TIMER_SLEEP.as_secs(),
            ));
        }
        let magpie_burst = Subject::Burst(Impl::Magpie);
        if self.windows_of(magpie_burst).is_some() {
            out.push_str(&format!(
                "\nmagpie in its idle windows (medians): {}.\n",
                self.magpie_summary(magpie_burst, MAGPIE_GROUP),
            ));
        }
        let magpie_timers = Subject::PendingTimers(TimerRt::Magpie);
        if self.windows_of(magpie_timers).is_some() {
            out.push_str(&format!(
                "\n{} (and one never-ready task) in its windows (medians): {}.\n",
                self.label(magpie_timers),
                self.magpie_summary(magpie_timers, TIMER_RT_GROUP),
            ));
        }
        let tokio_timers = Subject::PendingTimers(TimerRt::Tokio);
        if self.windows_of(tokio_timers).is_some() {
            out.push_str(&format!(
                "\n{} in its windows (median): {} ms/s on its own threads.\n",
                self.label(tokio_timers),
                fmt_ms(self.own_threads_median(tokio_timers, TIMER_RT_GROUP)),
            ));
        }
        out
    }

    /// The raw windows as JSON.
    pub(crate) fn to_json(&self) -> IdleJson {
        let subjects = self
            .windows
            .iter()
            .map(|(subject, ws)| {
                let process: Vec<f64> = ws.iter().map(|w| w.process).collect();
                let groups = GROUPS
                    .iter()
                    .enumerate()
                    .map(|(g, &name)| {
                        let v: Vec<f64> =
                            ws.iter().filter_map(|w| w.groups.map(|gs| gs[g])).collect();
                        (name, v)
                    })
                    .collect();
                SubjectJson {
                    after_work_on: self.label(*subject),
                    process_cpu_ms_per_s_median: median_f64(&process),
                    process_cpu_ms_per_s: process,
                    threads_cpu_ms_per_s: OrderedObject(groups),
                }
            })
            .collect();
        IdleJson {
            workers: self.workers,
            pending_timers: self.timers,
            window_s: WINDOW.as_secs_f64(),
            subjects,
        }
    }
}

/// An [`IdleReport`] as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct IdleJson {
    workers: usize,
    pending_timers: usize,
    window_s: f64,
    subjects: Vec<SubjectJson>,
}

/// One subject's windows as JSON, in ms of CPU per second of wall time.
#[derive(Debug, Serialize)]
struct SubjectJson {
    /// The subject's row label.
    after_work_on: String,
    process_cpu_ms_per_s_median: f64,
    process_cpu_ms_per_s: Vec<f64>,
    /// Per group of [`GROUPS`], every window's figure (none without `/proc`).
    threads_cpu_ms_per_s: OrderedObject<&'static str, Vec<f64>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::json_check::{keys, numbers, parse, text};

    fn window(process: f64, groups: Option<[f64; GROUPS.len()]>) -> Window {
        Window {
            process,
            groups,
            magpie_counters: [0; 3],
        }
    }

    #[test]
    fn the_json_has_every_subjects_windows_by_thread_group() {
        let report = IdleReport {
            workers: 4,
            timers: 10_000,
            windows: vec![
                (
                    Subject::Baseline,
                    vec![
                        window(1.5, Some([0.5, 0.25, 0.0, 0.125, 2.0])),
                        window(3.5, Some([1.0, 0.75, 0.0, 0.5, 4.0])),
                        window(2.5, None),
                    ],
                ),
                // Without `/proc`: no group's figures at all.
                (
                    Subject::PendingTimers(TimerRt::Tokio),
                    vec![window(0.75, None)],
                ),
            ],
        };
        let json = text(report.to_json());
        let v = parse(&json);
        assert!(v["workers"].is_u64(), "{json}");
        assert_eq!(v["workers"], 4);
        assert_eq!(v["pending_timers"], 10_000);
        assert_eq!(v["window_s"].as_f64(), Some(1.0));
        let baseline = &v["subjects"][0];
        assert_eq!(baseline["after_work_on"], "none (baseline)");
        assert_eq!(baseline["process_cpu_ms_per_s_median"].as_f64(), Some(2.5));
        assert_eq!(
            numbers(&baseline["process_cpu_ms_per_s"]),
            [Some(1.5), Some(3.5), Some(2.5)]
        );
        let threads = &baseline["threads_cpu_ms_per_s"];
        assert_eq!(numbers(&threads["magpie threads"]), [Some(0.5), Some(1.0)]);
        assert_eq!(numbers(&threads["main thread"]), [Some(2.0), Some(4.0)]);
        let timers = &v["subjects"][1];
        assert_eq!(
            timers["after_work_on"],
            report.label(Subject::PendingTimers(TimerRt::Tokio))
        );
        assert_eq!(timers["process_cpu_ms_per_s_median"].as_f64(), Some(0.75));
        for group in GROUPS {
            assert_eq!(timers["threads_cpu_ms_per_s"][group], serde_json::json!([]));
        }

        let subject = [
            "after_work_on",
            "process_cpu_ms_per_s_median",
            "process_cpu_ms_per_s",
            "threads_cpu_ms_per_s",
        ];
        let mut expected = vec!["workers", "pending_timers", "window_s", "subjects"];
        for _ in 0..2 {
            expected.extend(subject);
            expected.extend(GROUPS);
        }
        assert_eq!(keys(&json), expected);
    }
}
