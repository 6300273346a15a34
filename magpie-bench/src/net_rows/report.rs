//! The `net` report: a table per case, the summary against the targets, and JSON.
//! The `idle-conns` row measures CPU, not round trips, and has tables of its own.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

use super::idle_conns::{self, IdleConnsMeasurement, IdleSummary};
use super::{
    servers, Case, CaseMeasurement, Config, NetImpl, NetMeasurements, Sample, Summary, SPIN,
};
use crate::harness::{fmt_ms, markdown_table, ms};
use crate::idle::count_label;

/// `a / b` with two decimals.
fn ratio(a: f64, b: f64) -> String {
    format!("{:.2}", a / b)
}

/// A count of round trips per second, without decimals.
fn fmt_rate(rate: f64) -> String {
    format!("{rate:.0}")
}

/// The table of one case.
pub(super) fn render_case(m: &CaseMeasurement, cfg: &Config) -> String {
    let magpie = m.summary(NetImpl::Magpie);
    let blocked = matches!(m.case, Case::Blocked(_));
    let rows: Vec<Vec<String>> = m
        .results
        .iter()
        .map(|(imp, samples)| {
            let s = Summary::of(samples);
            let mut row = vec![
                imp.name().to_owned(),
                fmt_rate(s.throughput),
                fmt_ms(s.p50),
                fmt_ms(s.p99),
            ];
            if blocked {
                row.push(s.max.map_or("–".to_owned(), fmt_ms));
            }
            row.push(s.errors.to_string());
            row.push(magpie.map_or("–".to_owned(), |g| ratio(g.throughput, s.throughput)));
            row.push(magpie.map_or("–".to_owned(), |g| ratio(g.p99, s.p99)));
            row
        })
        .collect();
    let mut headers = vec!["implementation", "req/s", "p50 (ms)", "p99 (ms)"];
    if blocked {
        headers.push("max (ms)");
    }
    headers.extend(["errors", "magpie/this req/s", "magpie/this p99"]);
    let right: Vec<bool> = (0..headers.len()).map(|i| i > 0).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### {} — {} workers, {} samples × {} s, {}\n",
        m.case.name(),
        m.workers,
        cfg.samples,
        cfg.secs,
        m.loader
    );
    out.push_str(&markdown_table(&headers, &right, &rows));
    if blocked {
        let _ = writeln!(
            out,
            "\nOnly the round trips that began while one task spun {} s on a worker; req/s is \
             their count over the spin.",
            SPIN.as_secs()
        );
    }
    for (imp, samples) in &m.results {
        if let Some(err) = samples.iter().find_map(|s| s.first_error.as_ref()) {
            let _ = writeln!(out, "\n{imp}: errors, the first: {err}");
        }
    }
    out
}

/// The summary of a run: that of the load rows, then that of `idle-conns`, each where it ran.
pub(crate) fn render_summary(measurements: &NetMeasurements) -> String {
    let mut out = String::new();
    if !measurements.cases.is_empty() {
        out.push_str(&render_cases_summary(&measurements.cases));
        out.push_str(
            "\nMedians over the samples (each round runs every server once, first place \
             rotating) of requests (round trips) per second and of the 50th/99th percentile \
             round trip. magpie/this = ratio of magpie's median to this server's: above 1.00 \
             for req/s and below 1.00 for p99, magpie is better.\n",
        );
    }
    if let Some(m) = &measurements.idle_conns {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&render_idle_conns_summary(m));
    }
    out
}

/// One line per load case: each implementation's medians, the ratios to the target's peer,
/// and whether the target was met.
fn render_cases_summary(measurements: &[CaseMeasurement]) -> String {
    let mut rows = Vec::new();
    for m in measurements {
        let cell =
            |imp: NetImpl, f: &dyn Fn(Summary) -> String| m.summary(imp).map_or("–".to_owned(), f);
        let peer = m.case.target_peer();
        let (magpie, peer_s) = (m.summary(NetImpl::Magpie), m.summary(peer));
        let mut row = vec![m.case.name()];
        for imp in NetImpl::ALL {
            row.push(cell(imp, &|s| {
                format!("{} / {}", fmt_rate(s.throughput), fmt_ms(s.p99))
            }));
        }
        match (magpie, peer_s) {
            (Some(g), Some(p)) => {
                row.push(format!("{} ({peer})", ratio(g.throughput, p.throughput)));
                row.push(ratio(g.p99, p.p99));
                row.push(m.case.target().to_owned());
                row.push(if m.case.met(&g, &p) { "met" } else { "missed" }.to_owned());
            }
            _ => row.extend(["–", "–", m.case.target(), "–"].map(str::to_owned)),
        }
        rows.push(row);
    }
    let mut headers = vec!["case"];
    headers.extend(NetImpl::ALL.iter().map(|imp| imp.name()));
    headers.extend(["magpie/peer req/s", "magpie/peer p99", "target", "met"]);
    let right: Vec<bool> = (0..headers.len()).map(|i| (1..=6).contains(&i)).collect();
    let mut out = String::from("### summary — median req/s / median p99 (ms)\n\n");
    out.push_str(&markdown_table(&headers, &right, &rows));
    let accept_errors = servers::ACCEPT_ERRORS.load(Relaxed);
    if accept_errors > 0 {
        let _ = writeln!(out, "\nAccept errors on the servers: {accept_errors}.");
    }
    out
}

/// One entry of the `net` JSON: a load case or the `idle-conns` row.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum NetRowJson {
    /// A load case.
    Case(CaseJson),
    /// The `idle-conns` row.
    IdleConns(IdleConnsJson),
}

/// One load case as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct CaseJson {
    workload: String,
    connections: usize,
    loader: &'static str,
    workers: usize,
    results: Vec<CaseResultJson>,
}

/// One implementation's samples of a load case: medians, then every sample's figures.
#[derive(Debug, Serialize)]
struct CaseResultJson {
    #[serde(rename = "impl")]
    imp: &'static str,
    median_req_per_s: f64,
    median_p50_ms: f64,
    median_p99_ms: f64,
    /// Over all samples.
    errors: usize,
    req_per_s: Vec<f64>,
    p50_ms: Vec<f64>,
    p99_ms: Vec<f64>,
    /// `None` (`null`) where the loader did not report the slowest round trip (`wrk`).
    max_ms: Vec<Option<f64>>,
}

/// All measurements as JSON, one object per case and one for `idle-conns`: per
/// implementation, medians and raw samples.
pub(crate) fn measurements_json(measurements: &NetMeasurements) -> Vec<NetRowJson> {
    let mut items: Vec<NetRowJson> = measurements
        .cases
        .iter()
        .map(|m| {
            let results = m
                .results
                .iter()
                .map(|(imp, samples)| {
                    let s = Summary::of(samples);
                    let each = |f: fn(&Sample) -> f64| samples.iter().map(f).collect();
                    CaseResultJson {
                        imp: imp.name(),
                        median_req_per_s: s.throughput,
                        median_p50_ms: s.p50,
                        median_p99_ms: s.p99,
                        errors: s.errors,
                        req_per_s: each(|x| x.throughput),
                        p50_ms: each(|x| ms(x.p50)),
                        p99_ms: each(|x| ms(x.p99)),
                        max_ms: samples.iter().map(|x| x.max.map(ms)).collect(),
                    }
                })
                .collect();
            NetRowJson::Case(CaseJson {
                workload: m.case.name(),
                connections: m.case.connections(),
                loader: m.loader,
                workers: m.workers,
                results,
            })
        })
        .collect();
    items.extend(
        measurements
            .idle_conns
            .as_ref()
            .map(|m| NetRowJson::IdleConns(idle_conns_json(m))),
    );
    items
}

/// A figure in ms per second, or "?" where `/proc` could not tell.
fn fmt_opt_ms(value: Option<f64>) -> String {
    value.map_or("?".to_owned(), fmt_ms)
}

/// The table of the `idle-conns` row.
pub(super) fn render_idle_conns(m: &IdleConnsMeasurement, cfg: &Config) -> String {
    let n = count_label(m.connections);
    let rows: Vec<Vec<String>> = m
        .results
        .iter()
        .map(|(imp, samples)| {
            let s = IdleSummary::of(samples);
            vec![
                imp.name().to_owned(),
                fmt_ms(s.baseline),
                fmt_ms(s.loaded),
                fmt_ms(s.added),
                fmt_opt_ms(s.own_baseline),
                fmt_opt_ms(s.own_loaded),
                format!("{:.2}", s.connect_s),
                s.errors.to_string(),
                if s.met() { "met" } else { "missed" }.to_owned(),
            ]
        })
        .collect();
    let with = format!("{n} conns");
    let own_with = format!("own threads, {n} conns");
    let headers = [
        "implementation",
        "no conns (ms/s)",
        with.as_str(),
        "added",
        "own threads, no conns",
        own_with.as_str(),
        "connect (s)",
        "errors",
        "target",
    ];
    let right: Vec<bool> = (0..headers.len()).map(|i| i > 0).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### {} — {} workers, {} samples × {} s windows\n",
        idle_conns::name(m.connections),
        m.workers,
        cfg.samples,
        m.window.as_secs_f64()
    );
    out.push_str(&markdown_table(&headers, &right, &rows));
    let _ = writeln!(
        out,
        "\nMedians of the process's CPU (user + system) in ms per second of an idle window: \
         with no connection open, then with {} connections open and silent on the server \
         named in the first column; added = the median of each sample's difference; own \
         threads = the server runtime's threads alone. Every runtime of the run idles \
         throughout. connect = seconds to open and prove (one echo round trip each) every \
         connection, one at a time. Target (issue 13): {}, on the process's figure with the \
         connections open.",
        m.connections,
        idle_conns::TARGET
    );
    if let Some(requested) = m.requested {
        let _ = writeln!(
            out,
            "\nThe open-files limit allowed {} connections at once (two descriptors each), not \
             the {requested} asked for.",
            m.connections
        );
    }
    for (imp, samples) in &m.results {
        if let Some(err) = samples.iter().find_map(|s| s.first_error.as_ref()) {
            let _ = writeln!(out, "\n{imp}: errors, the first: {err}");
        }
    }
    out
}

/// The summary line of the `idle-conns` row.
fn render_idle_conns_summary(m: &IdleConnsMeasurement) -> String {
    let mut row = vec![idle_conns::name(m.connections)];
    for imp in idle_conns::IMPLS {
        row.push(m.summary(imp).map_or("–".to_owned(), |s| {
            format!("{} → {}", fmt_ms(s.baseline), fmt_ms(s.loaded))
        }));
    }
    row.push(idle_conns::TARGET.to_owned());
    row.push(match m.summary(NetImpl::Magpie) {
        Some(s) if s.met() => "met".to_owned(),
        Some(_) => "missed".to_owned(),
        None => "–".to_owned(),
    });
    let mut headers = vec!["case"];
    headers.extend(idle_conns::IMPLS.iter().map(|imp| imp.name()));
    headers.extend(["target", "met (magpie)"]);
    let right: Vec<bool> = (0..headers.len()).map(|i| (1..=3).contains(&i)).collect();
    let mut out = String::from(
        "### summary — idle open connections: median process CPU, ms per idle s (no conns → \
         conns open)\n\n",
    );
    out.push_str(&markdown_table(&headers, &right, &[row]));
    out
}

/// The `idle-conns` row as one JSON object: per implementation, medians and raw samples.
#[derive(Debug, Serialize)]
pub(crate) struct IdleConnsJson {
    workload: String,
    connections: usize,
    /// `--idle-conns`, when the open-files limit allowed only `connections` (else `null`).
    requested_connections: Option<usize>,
    workers: usize,
    window_s: f64,
    settle_s: f64,
    results: Vec<IdleResultJson>,
}

/// One implementation's samples of the `idle-conns` row, in ms of CPU per idle second
/// (`connect_s`: seconds). `None` (`null`): the runtime's own threads were not measured.
#[derive(Debug, Serialize)]
struct IdleResultJson {
    #[serde(rename = "impl")]
    imp: &'static str,
    median_baseline_ms_per_s: f64,
    median_ms_per_s: f64,
    median_added_ms_per_s: f64,
    median_own_threads_ms_per_s: Option<f64>,
    /// Over all samples.
    errors: usize,
    baseline_ms_per_s: Vec<f64>,
    ms_per_s: Vec<f64>,
    own_threads_baseline_ms_per_s: Vec<Option<f64>>,
    own_threads_ms_per_s: Vec<Option<f64>>,
    connect_s: Vec<f64>,
}

/// `m` as JSON.
fn idle_conns_json(m: &IdleConnsMeasurement) -> IdleConnsJson {
    let results = m
        .results
        .iter()
        .map(|(imp, samples)| {
            let s = IdleSummary::of(samples);
            IdleResultJson {
                imp: imp.name(),
                median_baseline_ms_per_s: s.baseline,
                median_ms_per_s: s.loaded,
                median_added_ms_per_s: s.added,
                median_own_threads_ms_per_s: s.own_loaded,
                errors: s.errors,
                baseline_ms_per_s: samples.iter().map(|x| x.baseline).collect(),
                ms_per_s: samples.iter().map(|x| x.loaded).collect(),
                own_threads_baseline_ms_per_s: samples.iter().map(|x| x.own_baseline).collect(),
                own_threads_ms_per_s: samples.iter().map(|x| x.own_loaded).collect(),
                connect_s: samples.iter().map(|x| x.connect_s).collect(),
            }
        })
        .collect();
    IdleConnsJson {
        workload: idle_conns::name(m.connections),
        connections: m.connections,
        requested_connections: m.requested,
        workers: m.workers,
        window_s: m.window.as_secs_f64(),
        settle_s: idle_conns::SETTLE.as_secs_f64(),
        results,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::harness::json_check::{keys, numbers, parse, text};
    use crate::net_rows::idle_conns::IdleSample;
    use crate::net_rows::{NetMeasurements, NetRow};

    fn idle_sample(baseline: f64, loaded: f64) -> IdleSample {
        IdleSample {
            baseline,
            loaded,
            own_baseline: Some(baseline / 2.0),
            own_loaded: Some(loaded / 2.0),
            connect_s: 1.0,
            errors: 0,
            first_error: None,
        }
    }

    #[test]
    fn idle_conns_tables_show_both_windows_and_the_target() {
        let m = IdleConnsMeasurement {
            connections: 9957,
            requested: Some(10_000),
            workers: 2,
            window: Duration::from_secs(2),
            results: vec![
                (
                    NetImpl::Magpie,
                    vec![
                        idle_sample(0.2, 0.3),
                        idle_sample(0.4, 0.5),
                        idle_sample(0.3, 12.0),
                    ],
                ),
                (NetImpl::Tokio, vec![idle_sample(0.2, 11.0)]),
            ],
        };
        let cfg = Config {
            rows: vec![NetRow::IdleConns],
            secs: 2,
            conns: vec![],
            http_conns: 64,
            samples: 3,
            warmup: 0,
            client_threads: 1,
            impls: vec![NetImpl::Magpie, NetImpl::Tokio],
            idle_conns: 10_000,
        };
        let table = render_idle_conns(&m, &cfg);
        assert!(table.contains("### idle, 9957 open conn — 2 workers, 3 samples × 2 s windows"));
        // magpie: medians 0.300 and 0.500, the paired differences 0.1, 0.1, 11.7.
        let magpie = table.lines().find(|l| l.starts_with("| magpie")).unwrap();
        let cells: Vec<&str> = magpie.split('|').map(str::trim).collect();
        assert_eq!(
            &cells[1..10],
            ["magpie", "0.300", "0.500", "0.100", "0.150", "0.250", "1.00", "0", "met"]
        );
        let tokio = table.lines().find(|l| l.starts_with("| tokio")).unwrap();
        assert!(tokio.ends_with("| missed |"), "{tokio}");
        assert!(table.contains("not the 10000 asked for"));

        let summary = render_summary(&NetMeasurements {
            cases: Vec::new(),
            idle_conns: Some(m),
        });
        let row = summary.lines().find(|l| l.starts_with("| idle")).unwrap();
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            &cells[1..7],
            [
                "idle, 9957 open conn",
                "0.300 → 0.500",
                "0.200 → 11.00",
                "–",
                "CPU < 10 ms per idle s",
                "met"
            ]
        );
        assert!(!summary.contains("req/s"), "no load rows ran: {summary}");
    }

    fn sample(throughput: f64, p99_ms: u64, max_ms: Option<u64>) -> Sample {
        Sample {
            throughput,
            p50: Duration::from_micros(500),
            p99: Duration::from_millis(p99_ms),
            max: max_ms.map(Duration::from_millis),
            errors: 1,
            first_error: Some("reset".to_owned()),
        }
    }

    #[test]
    fn measurements_json_has_each_case_and_the_idle_conns_row() {
        let cases = vec![CaseMeasurement {
            case: Case::Blocked(8),
            workers: 2,
            loader: "built-in",
            results: vec![
                (
                    NetImpl::Magpie,
                    vec![sample(1000.5, 2, None), sample(3000.0, 4, Some(7))],
                ),
                (NetImpl::Tokio, vec![sample(500.0, 9, None)]),
            ],
        }];
        let own = |x: f64| IdleSample {
            own_loaded: None,
            ..idle_sample(x, x + 1.0)
        };
        let idle = IdleConnsMeasurement {
            connections: 9957,
            requested: None,
            workers: 2,
            window: Duration::from_millis(1500),
            results: vec![(NetImpl::Magpie, vec![idle_sample(0.2, 0.5), own(0.4)])],
        };
        let json = text(measurements_json(&NetMeasurements {
            cases,
            idle_conns: Some(idle),
        }));
        let v = parse(&json);
        assert_eq!(v.as_array().map(Vec::len), Some(2), "{json}");

        let case = &v[0];
        assert_eq!(case["workload"], "blocked worker, echo 8 conn");
        assert_eq!(case["connections"], 8);
        assert_eq!(case["loader"], "built-in");
        assert_eq!(case["workers"], 2);
        let magpie = &case["results"][0];
        assert_eq!(magpie["impl"], "magpie");
        assert_eq!(magpie["median_req_per_s"].as_f64(), Some(2000.25));
        assert_eq!(magpie["median_p50_ms"].as_f64(), Some(0.5));
        assert_eq!(magpie["median_p99_ms"].as_f64(), Some(3.0));
        assert!(magpie["errors"].is_u64(), "{json}");
        assert_eq!(magpie["errors"], 2);
        assert_eq!(numbers(&magpie["req_per_s"]), [Some(1000.5), Some(3000.0)]);
        assert_eq!(numbers(&magpie["p99_ms"]), [Some(2.0), Some(4.0)]);
        // A sample without a maximum (the loader did not report one) writes null.
        assert_eq!(numbers(&magpie["max_ms"]), [None, Some(7.0)]);
        assert_eq!(case["results"][1]["impl"], "tokio");
        assert_eq!(numbers(&case["results"][1]["max_ms"]), [None]);

        let idle = &v[1];
        assert_eq!(idle["workload"], "idle, 9957 open conn");
        assert_eq!(idle["connections"], 9957);
        assert!(idle["requested_connections"].is_null(), "{json}");
        assert_eq!(idle["window_s"].as_f64(), Some(1.5));
        assert_eq!(idle["settle_s"].as_f64(), Some(0.25));
        let magpie = &idle["results"][0];
        assert_eq!(
            magpie["median_baseline_ms_per_s"].as_f64(),
            Some((0.2 + 0.4) / 2.0)
        );
        assert_eq!(magpie["median_ms_per_s"].as_f64(), Some((0.5 + 1.4) / 2.0));
        // One sample without its own threads' CPU: no median of it.
        assert!(magpie["median_own_threads_ms_per_s"].is_null(), "{json}");
        assert_eq!(magpie["errors"], 0);
        assert_eq!(numbers(&magpie["ms_per_s"]), [Some(0.5), Some(1.4)]);
        assert_eq!(
            numbers(&magpie["own_threads_baseline_ms_per_s"]),
            [Some(0.1), Some(0.2)]
        );
        assert_eq!(numbers(&magpie["own_threads_ms_per_s"]), [Some(0.25), None]);
        assert_eq!(numbers(&magpie["connect_s"]), [Some(1.0), Some(1.0)]);

        let case_result = [
            "impl",
            "median_req_per_s",
            "median_p50_ms",
            "median_p99_ms",
            "errors",
            "req_per_s",
            "p50_ms",
            "p99_ms",
            "max_ms",
        ];
        let mut expected = vec!["workload", "connections", "loader", "workers", "results"];
        expected.extend(case_result.repeat(2));
        expected.extend([
            "workload",
            "connections",
            "requested_connections",
            "workers",
            "window_s",
            "settle_s",
            "results",
            "impl",
            "median_baseline_ms_per_s",
            "median_ms_per_s",
            "median_added_ms_per_s",
            "median_own_threads_ms_per_s",
            "errors",
            "baseline_ms_per_s",
            "ms_per_s",
            "own_threads_baseline_ms_per_s",
            "own_threads_ms_per_s",
            "connect_s",
        ]);
        assert_eq!(keys(&json), expected);

        let none = text(measurements_json(&NetMeasurements {
            cases: Vec::new(),
            idle_conns: None,
        }));
        assert_eq!(parse(&none), serde_json::json!([]));
    }
}
