//! The measuring method shared by every subcommand, and the output helpers.
//!
//! The project's rule: pools are built once up front; every implementation is warmed up;
//! then each of K rounds runs every implementation once, the first one rotating from round
//! to round, so that slow drift of the machine (frequency, thermals, other tenants) hits all
//! implementations alike. Medians are compared, minima are shown for reference.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::pools::{Impl, Pools};

/// A benchmark that can be run once with any implementation.
pub(crate) trait Workload {
    /// A short name for tables, e.g. `fib(30)`.
    fn name(&self) -> String;

    /// Runs the workload once with `imp` and returns the time the computation took.
    ///
    /// Preparation (copying inputs) and the check of the result happen outside the timed
    /// region. Panics if the result is wrong.
    fn sample(&mut self, pools: &Pools, imp: Impl) -> Duration;
}

/// Samples of one workload for several implementations.
#[derive(Debug, Clone)]
pub(crate) struct Measurement {
    /// The workload's name.
    pub(crate) workload: String,
    /// The worker count of the pools.
    pub(crate) workers: usize,
    /// Per implementation, the samples in the order they were taken.
    pub(crate) results: Vec<(Impl, Vec<Duration>)>,
}

impl Measurement {
    /// The samples of `imp`.
    pub(crate) fn samples(&self, imp: Impl) -> Option<&[Duration]> {
        self.results
            .iter()
            .find(|(i, _)| *i == imp)
            .map(|(_, s)| s.as_slice())
    }

    /// The median of `imp`'s samples.
    pub(crate) fn median(&self, imp: Impl) -> Option<Duration> {
        self.samples(imp).map(median)
    }
}

/// What `scale` waits between two samples, so that each starts with every pool quiet.
///
/// A pool's threads spin or search for a while after its sample ends before they park. In
/// `scale` every pool of a point exists at once, with as many threads as the point has
/// workers, so at 8 workers on 2 CPUs the threads still spinning took CPU time from the
/// next sample, whichever pool ran it, and which pool paid depended on the rotation. In
/// `scale --workers 2,8 --only async`, eight runs each way, magpie's yield_many at 8
/// workers over its figure at 2 spread over 0.90–1.57 without the pause and 0.79–1.30 with
/// it (tokio's 0.99–1.55 and 1.10–1.53). The other commands run their samples back to
/// back (no pause), as before, so that their tables stay comparable with the earlier ones.
pub(crate) const SCALE_COOL_DOWN: Duration = Duration::from_millis(3);

/// The order in which round `round` runs `impls`: a rotation starting at `round mod n`.
pub(crate) fn rotation<T: Copy>(items: &[T], round: usize) -> impl Iterator<Item = T> + '_ {
    let n = items.len();
    (0..n).map(move |k| items[(round + k) % n])
}

/// Measures `workload` with each of `impls`: `warmup` rounds, then `samples` timed rounds.
pub(crate) fn measure(
    workload: &mut dyn Workload,
    pools: &Pools,
    impls: &[Impl],
    warmup: usize,
    samples: usize,
) -> Measurement {
    let name = workload.name();
    let label = format!("{name} ({} workers)", pools.workers());
    let results = measure_rounds(&label, impls, warmup, samples, Duration::ZERO, |imp, _| {
        workload.sample(pools, imp)
    });
    Measurement {
        workload: name,
        workers: pools.workers(),
        results,
    }
}

/// The rounds of the method in the module doc, for any kind of implementation `I`: `warmup`
/// untimed rounds, then `samples` timed rounds, each running every one of `impls` once, the
/// first place rotating. `sample(imp, timed)` runs `imp` once and returns the time it took;
/// `timed` is false in the warm-up rounds. Returns each implementation's timed samples, in
/// the order of `impls`. After every sample, warm-up or timed, it sleeps `cool_down` (zero:
/// not at all; see [`SCALE_COOL_DOWN`]). Progress goes to stderr under `label`.
pub(crate) fn measure_rounds<I: Copy>(
    label: &str,
    impls: &[I],
    warmup: usize,
    samples: usize,
    cool_down: Duration,
    mut sample: impl FnMut(I, bool) -> Duration,
) -> Vec<(I, Vec<Duration>)> {
    let started = Instant::now();
    progress(format_args!(
        "{label}: {warmup} warm-up + {samples} rounds "
    ));
    for round in 0..warmup {
        for imp in rotation(impls, round) {
            sample(imp, false);
            // A zero duration makes no system call.
            std::thread::sleep(cool_down);
        }
    }
    let mut results: Vec<(I, Vec<Duration>)> = impls
        .iter()
        .map(|&imp| (imp, Vec::with_capacity(samples)))
        .collect();
    for round in 0..samples {
        for (k, imp) in rotation(impls, round).enumerate() {
            let elapsed = sample(imp, true);
            std::thread::sleep(cool_down);
            let slot = (round + k) % impls.len();
            results[slot].1.push(elapsed);
        }
        progress(format_args!("."));
    }
    progress(format_args!(" {:.1} s\n", started.elapsed().as_secs_f64()));
    results
}

/// Writes progress to stderr, keeping stdout for the report.
pub(crate) fn progress(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.flush();
}

/// The median of `samples` (the mean of the middle two for an even count).
pub(crate) fn median(samples: &[Duration]) -> Duration {
    assert!(!samples.is_empty(), "median of no samples");
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2
    }
}

/// The median of plain numbers.
pub(crate) fn median_f64(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "median of no values");
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Milliseconds as a float.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A number of milliseconds with a precision that suits its size.
pub(crate) fn fmt_ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.1}")
    } else if value >= 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The per-workload table of `fork-join`.
pub(crate) fn render_measurement(m: &Measurement) -> String {
    let magpie = m.median(Impl::Magpie);
    let mut rows = Vec::new();
    for (imp, samples) in &m.results {
        let med = median(samples);
        let min = samples.iter().copied().min().unwrap_or_default();
        let max = samples.iter().copied().max().unwrap_or_default();
        let ratio = match magpie {
            Some(mag) => format!("{:.2}", ms(mag) / ms(med)),
            None => "–".to_owned(),
        };
        rows.push(vec![
            imp.name().to_owned(),
            fmt_ms(ms(med)),
            fmt_ms(ms(min)),
            fmt_ms(ms(max)),
            ratio,
        ]);
    }
    let samples = m.results.first().map_or(0, |(_, s)| s.len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### {} — {} workers, {} samples\n",
        m.workload, m.workers, samples
    );
    out.push_str(&markdown_table(
        &[
            "implementation",
            "median (ms)",
            "min (ms)",
            "max (ms)",
            "magpie/this",
        ],
        &[false, true, true, true, true],
        &rows,
    ));
    out
}

/// A markdown table whose columns are padded to line up in a terminal. `right[i]` aligns
/// column `i` to the right.
pub(crate) fn markdown_table(headers: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let pad = |text: &str, width: usize, right: bool| {
        let fill = " ".repeat(width.saturating_sub(text.chars().count()));
        if right {
            format!("{fill}{text}")
        } else {
            format!("{text}{fill}")
        }
    };
    let mut out = String::new();
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    out.push_str(&line(
        (0..cols)
            .map(|i| pad(headers[i], widths[i], right[i]))
            .collect(),
    ));
    out.push_str(&line(
        (0..cols)
            .map(|i| {
                let dashes = "-".repeat(widths[i].saturating_sub(1));
                if right[i] {
                    format!("{dashes}:")
                } else {
                    format!("{dashes}-")
                }
            })
            .collect(),
    ));
    for row in rows {
        out.push_str(&line(
            (0..cols)
                .map(|i| pad(row.get(i).map_or("", String::as_str), widths[i], right[i]))
                .collect(),
        ));
    }
    out
}

/// Minimal JSON building: the report is small and flat, a dependency is not worth it.
pub(crate) mod json {
    use std::fmt::Write as _;

    /// `s` as a JSON string literal.
    pub(crate) fn string(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// A finite number (non-finite ones become `null`).
    pub(crate) fn number(x: f64) -> String {
        if x.is_finite() {
            format!("{x}")
        } else {
            "null".to_owned()
        }
    }

    /// An array of numbers.
    pub(crate) fn numbers(xs: &[f64]) -> String {
        let items: Vec<String> = xs.iter().map(|&x| number(x)).collect();
        format!("[{}]", items.join(", "))
    }

    /// An object from already-encoded values.
    pub(crate) fn object(fields: &[(&str, String)]) -> String {
        let items: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{}: {v}", string(k)))
            .collect();
        format!("{{{}}}", items.join(", "))
    }

    /// An array from already-encoded values, one per line.
    pub(crate) fn array(items: &[String]) -> String {
        if items.is_empty() {
            return "[]".to_owned();
        }
        format!("[\n{}\n]", items.join(",\n"))
    }
}

/// One implementation's samples as JSON: median, minimum and raw samples, in milliseconds.
pub(crate) fn samples_json(name: &str, samples: &[Duration]) -> String {
    let raw: Vec<f64> = samples.iter().map(|&d| ms(d)).collect();
    json::object(&[
        ("impl", json::string(name)),
        ("median_ms", json::number(ms(median(samples)))),
        (
            "min_ms",
            json::number(raw.iter().copied().fold(f64::INFINITY, f64::min)),
        ),
        ("samples_ms", json::numbers(&raw)),
    ])
}

/// One measurement as JSON: raw samples and summary per implementation, in milliseconds.
pub(crate) fn measurement_json(m: &Measurement) -> String {
    let results: Vec<String> = m
        .results
        .iter()
        .map(|(imp, samples)| samples_json(imp.name(), samples))
        .collect();
    json::object(&[
        ("workload", json::string(&m.workload)),
        ("workers", m.workers.to_string()),
        ("results", json::array(&results)),
    ])
}
