//! The `idle` benchmark: how much CPU a pool burns in the second after its work ends.
//!
//! All three pools exist throughout. Each window runs a short burst of joins on one pool
//! (or none, for the baseline), then sleeps one second on the main thread and records the
//! process's CPU time across the sleep (`getrusage(RUSAGE_SELF)`, user + system). On Linux
//! the time is also split per thread (`/proc/self/task/*/schedstat`) and attributed to the
//! pools by thread name, so a pool that burns CPU while another is measured shows up.

use std::fs;
use std::mem::MaybeUninit;
use std::thread;
use std::time::{Duration, Instant};

use crate::fork_join::FibTask;
use crate::harness::{fmt_ms, json, markdown_table, median_f64, progress, rotation};
use crate::pools::{Impl, Pools, MAGPIE_THREAD_PREFIX, RAYON_THREAD_PREFIX};

/// The thread groups CPU time is attributed to.
const GROUPS: [&str; 4] = [
    "magpie threads",
    "rayon threads",
    "chili+other threads",
    "main thread",
];

/// The length of one idle window.
const WINDOW: Duration = Duration::from_secs(1);

/// The work before each window: this many `fib(BURST_N)` with a join at every call.
const BURST_RUNS: usize = 5;
const BURST_N: u64 = 25;

/// CPU time of the whole process so far (user + system).
fn process_cpu() -> Duration {
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

/// Nanoseconds of CPU per pool's threads (magpie, rayon, chili+other; the main thread is
/// left out, it is measured on its own), or `None` where `/proc` cannot tell.
fn thread_cpu_by_group() -> Option<[u64; 3]> {
    let pid = std::process::id().to_string();
    let mut groups = [0u64; 3];
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
        let group = if comm.starts_with(MAGPIE_THREAD_PREFIX) {
            0
        } else if comm.starts_with(RAYON_THREAD_PREFIX) {
            1
        } else {
            2
        };
        groups[group] += ns;
    }
    Some(groups)
}

/// The sum of magpie's per-worker counters that tell about idling.
fn magpie_idle_counters(pools: &Pools) -> [u64; 3] {
    let stats = pools.magpie.stats();
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
    groups: Option<[f64; 4]>,
    /// magpie's parks, unparks and steal attempts during the window.
    magpie_counters: [u64; 3],
}

/// Runs the burst for `imp` (nothing for `None`), then measures one idle window.
fn window(pools: &Pools, imp: Option<Impl>) -> Window {
    if let Some(imp) = imp {
        burst(pools, imp);
    }
    let counters_before = magpie_idle_counters(pools);
    let groups_before = thread_cpu_by_group();
    let cpu_before = process_cpu();
    let main_before = thread_cpu();
    let start = Instant::now();
    thread::sleep(WINDOW);
    let main_after = thread_cpu();
    let cpu_after = process_cpu();
    let wall = start.elapsed().as_secs_f64();
    let groups_after = thread_cpu_by_group();
    let counters_after = magpie_idle_counters(pools);
    let per_second = |ns: f64| ns / 1e6 / wall;
    let main = per_second((main_after - main_before).as_nanos() as f64);
    let groups = match (groups_before, groups_after) {
        (Some(b), Some(a)) => Some(std::array::from_fn(|g| {
            if g == 3 {
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

fn label(imp: Option<Impl>) -> &'static str {
    imp.map_or("none (baseline)", Impl::name)
}

/// The result of the idle benchmark.
#[derive(Debug)]
pub(crate) struct IdleReport {
    workers: usize,
    windows: Vec<(Option<Impl>, Vec<Window>)>,
}

/// Measures `reps` windows for the baseline and after each pool's burst, in rotating order.
pub(crate) fn run(pools: &Pools, reps: usize) -> IdleReport {
    let subjects = [
        None,
        Some(Impl::Magpie),
        Some(Impl::Rayon),
        Some(Impl::Chili),
    ];
    // Warm every pool up, then let all of them fall asleep before the first window.
    for imp in Impl::POOLS {
        burst(pools, imp);
    }
    thread::sleep(WINDOW);
    let mut windows: Vec<(Option<Impl>, Vec<Window>)> =
        subjects.iter().map(|&s| (s, Vec::new())).collect();
    let started = Instant::now();
    progress(format_args!(
        "idle ({} workers): {reps} rounds of {} one-second windows ",
        pools.workers(),
        subjects.len()
    ));
    for round in 0..reps {
        for (k, subject) in rotation(&subjects, round).enumerate() {
            let w = window(pools, subject);
            windows[(round + k) % subjects.len()].1.push(w);
        }
        progress(format_args!("."));
    }
    progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
    IdleReport {
        workers: pools.workers(),
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
    fn process_median(&self, subject: Option<Impl>) -> f64 {
        let (_, ws) = self
            .windows
            .iter()
            .find(|(s, _)| *s == subject)
            .expect("measured");
        median_f64(&ws.iter().map(|w| w.process).collect::<Vec<_>>())
    }

    /// The report as markdown.
    pub(crate) fn render(&self) -> String {
        let baseline = self.process_median(None);
        let mut rows = Vec::new();
        for (subject, ws) in &self.windows {
            let process: Vec<f64> = ws.iter().map(|w| w.process).collect();
            let med = median_f64(&process);
            let min = process.iter().copied().fold(f64::INFINITY, f64::min);
            let max = process.iter().copied().fold(0.0, f64::max);
            let mut row = vec![
                label(*subject).to_owned(),
                fmt_ms(med),
                fmt_ms(min),
                fmt_ms(max),
                if subject.is_some() {
                    fmt_ms(med - baseline)
                } else {
                    "–".to_owned()
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
        if let Some((_, ws)) = self.windows.iter().find(|(s, _)| *s == Some(Impl::Magpie)) {
            let median_of = |i: usize| {
                median_f64(
                    &ws.iter()
                        .map(|w| w.magpie_counters[i] as f64)
                        .collect::<Vec<_>>(),
                )
            };
            let magpie_threads: Option<Vec<f64>> =
                ws.iter().map(|w| w.groups.map(|g| g[0])).collect();
            let own = magpie_threads
                .map_or(self.process_median(Some(Impl::Magpie)) - baseline, |v| {
                    median_f64(&v)
                });
            out.push_str(&format!(
                "\nmagpie in its idle windows (medians): {} ms/s on its own threads \
                 (target < 10 ms/s: {}), {} parks, {} unparks, {} steal attempts.\n",
                fmt_ms(own),
                if own < 10.0 { "met" } else { "NOT met" },
                median_of(0),
                median_of(1),
                median_of(2),
            ));
        }
        out
    }

    /// The raw windows as JSON.
    pub(crate) fn to_json(&self) -> String {
        let subjects: Vec<String> = self
            .windows
            .iter()
            .map(|(subject, ws)| {
                let process: Vec<f64> = ws.iter().map(|w| w.process).collect();
                let mut fields = vec![
                    ("after_work_on", json::string(label(*subject))),
                    (
                        "process_cpu_ms_per_s_median",
                        json::number(median_f64(&process)),
                    ),
                    ("process_cpu_ms_per_s", json::numbers(&process)),
                ];
                let groups: Vec<(&str, String)> = GROUPS
                    .iter()
                    .enumerate()
                    .map(|(g, &name)| {
                        let v: Vec<f64> =
                            ws.iter().filter_map(|w| w.groups.map(|gs| gs[g])).collect();
                        (name, json::numbers(&v))
                    })
                    .collect();
                fields.push(("threads_cpu_ms_per_s", json::object(&groups)));
                json::object(&fields)
            })
            .collect();
        json::object(&[
            ("workers", self.workers.to_string()),
            ("window_s", json::number(WINDOW.as_secs_f64())),
            ("subjects", json::array(&subjects)),
        ])
    }
}
