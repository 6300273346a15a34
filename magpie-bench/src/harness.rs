//! The measuring method shared by every subcommand, and the output helpers (tables and
//! JSON).
//!
//! The project's rule: pools are built once up front; every implementation is warmed up;
//! then each of K rounds runs every implementation once, the first one rotating from round
//! to round, so that slow drift of the machine (frequency, thermals, other tenants) hits all
//! implementations alike. Medians are compared, minima are shown for reference.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

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

/// A JSON object whose keys are known only at run time, its entries in the order given
/// (a [`serde_json::Map`] would sort them).
#[derive(Debug)]
pub(crate) struct OrderedObject<K, V>(pub(crate) Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for OrderedObject<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// One implementation's samples as JSON: median, minimum and raw samples, in milliseconds.
#[derive(Debug, Serialize)]
pub(crate) struct SamplesJson<'a> {
    /// The implementation's name.
    #[serde(rename = "impl")]
    imp: &'a str,
    median_ms: f64,
    min_ms: f64,
    /// Every sample, in the order they were taken.
    samples_ms: Vec<f64>,
}

/// `name`'s `samples` as JSON.
pub(crate) fn samples_json<'a>(name: &'a str, samples: &[Duration]) -> SamplesJson<'a> {
    let raw: Vec<f64> = samples.iter().map(|&d| ms(d)).collect();
    SamplesJson {
        imp: name,
        median_ms: ms(median(samples)),
        min_ms: raw.iter().copied().fold(f64::INFINITY, f64::min),
        samples_ms: raw,
    }
}

/// One measurement as JSON: raw samples and summary per implementation, in milliseconds.
#[derive(Debug, Serialize)]
pub(crate) struct MeasurementJson<'a> {
    workload: &'a str,
    workers: usize,
    results: Vec<SamplesJson<'static>>,
}

/// `m` as JSON.
pub(crate) fn measurement_json(m: &Measurement) -> MeasurementJson<'_> {
    MeasurementJson {
        workload: &m.workload,
        workers: m.workers,
        results: m
            .results
            .iter()
            .map(|(imp, samples)| samples_json(imp.name(), samples))
            .collect(),
    }
}

/// Checks of the JSON the builders write, for the tests of every module that writes some.
#[cfg(test)]
pub(crate) mod json_check {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    /// What a builder returned, as the text `--json` writes.
    pub(crate) fn text(json: impl serde::Serialize) -> String {
        serde_json::to_string_pretty(&json).expect("the builders' values serialize")
    }

    /// `text` parsed; panics if it is not JSON.
    pub(crate) fn parse(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"))
    }

    /// Every object key of `text`, depth first, in the order the text has them (a parsed
    /// [`serde_json::Value`] sorts each object's keys).
    pub(crate) fn keys(text: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        KeysOf(&mut keys)
            .deserialize(&mut de)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
        de.end().expect("text after the JSON value");
        keys
    }

    /// Walks a value, pushing its objects' keys.
    struct KeysOf<'a>(&'a mut Vec<String>);

    impl<'de> DeserializeSeed<'de> for KeysOf<'_> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
            de.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for KeysOf<'_> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }

        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }

        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }

        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }

        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }

        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(KeysOf(&mut *self.0))?.is_some() {}
            Ok(())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                self.0.push(key);
                map.next_value_seed(KeysOf(&mut *self.0))?;
            }
            Ok(())
        }
    }

    /// The numbers of the array `value`, `None` for each `null`; panics on anything else.
    pub(crate) fn numbers(value: &serde_json::Value) -> Vec<Option<f64>> {
        value
            .as_array()
            .unwrap_or_else(|| panic!("not an array: {value}"))
            .iter()
            .map(|x| match x.as_f64() {
                Some(x) => Some(x),
                None if x.is_null() => None,
                None => panic!("not a number or null: {x}"),
            })
            .collect()
    }
}

/// Sleeps `d` on a thread whose timer slack is 1 ns (set on its first sleep; the default,
/// 50 µs, would add that much to every sleep); returns how long the sleep took. What
/// `scale --sleeping-tasks` holds a worker with instead of a CPU.
pub(crate) fn sleep_held(d: Duration) -> Duration {
    std::thread_local! {
        static SLACK_SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    SLACK_SET.with(|set| {
        if !set.replace(true) {
            set_timer_slack_ns(1);
        }
    });
    let start = Instant::now();
    std::thread::sleep(d);
    start.elapsed()
}

/// Sets the calling thread's timer slack (Linux; elsewhere nothing).
fn set_timer_slack_ns(ns: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches only the calling
    // thread's scheduling attributes; the unused arguments are zero, as prctl(2) asks.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = ns;
}

#[cfg(test)]
mod tests {
    use super::json_check::{keys, numbers, parse, text};
    use super::*;

    #[test]
    fn samples_json_gives_the_median_minimum_and_every_sample_in_ms() {
        let samples = [
            Duration::from_micros(3250),
            Duration::from_micros(1500),
            Duration::from_micros(2100),
        ];
        let json = text(samples_json("rayon", &samples));
        let v = parse(&json);
        assert_eq!(v["impl"], "rayon");
        assert_eq!(v["median_ms"].as_f64(), Some(ms(samples[2])));
        assert_eq!(v["min_ms"].as_f64(), Some(ms(samples[1])));
        assert_eq!(
            numbers(&v["samples_ms"]),
            samples.map(|d| Some(ms(d))).to_vec()
        );
        assert_eq!(keys(&json), ["impl", "median_ms", "min_ms", "samples_ms"]);
    }

    #[test]
    fn measurement_json_nests_each_implementation_in_order() {
        let m = Measurement {
            workload: "tree \"sum\" \\ 2\n".to_owned(),
            workers: 4,
            results: vec![
                (Impl::Magpie, vec![Duration::from_millis(2)]),
                (Impl::Rayon, vec![Duration::from_millis(3)]),
            ],
        };
        let json = text(measurement_json(&m));
        let v = parse(&json);
        assert_eq!(v["workload"], "tree \"sum\" \\ 2\n");
        assert!(v["workers"].is_u64(), "{json}");
        assert_eq!(v["workers"], 4);
        let impls: Vec<&str> = v["results"]
            .as_array()
            .expect("results is an array")
            .iter()
            .map(|r| r["impl"].as_str().expect("impl is a string"))
            .collect();
        assert_eq!(impls, ["magpie", "rayon"]);
        assert_eq!(v["results"][1]["median_ms"].as_f64(), Some(3.0));
        let row = ["impl", "median_ms", "min_ms", "samples_ms"];
        let mut expected = vec!["workload", "workers", "results"];
        expected.extend(row);
        expected.extend(row);
        assert_eq!(keys(&json), expected);

        let empty = Measurement {
            results: Vec::new(),
            ..m
        };
        let json = text(measurement_json(&empty));
        assert_eq!(parse(&json)["results"], serde_json::json!([]));
        assert_eq!(keys(&json), ["workload", "workers", "results"]);
    }
}
