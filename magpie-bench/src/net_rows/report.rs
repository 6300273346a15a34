//! The `net` report: a table per case, the summary against the targets, and JSON.
//! The `idle-conns` row measures CPU, not round trips, and has tables of its own.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use super::idle_conns::{self, IdleConnsMeasurement, IdleSample, IdleSummary};
use super::{
    servers, Case, CaseMeasurement, Config, NetImpl, NetMeasurements, Sample, Summary, SPIN,
};
use crate::harness::{fmt_ms, json, markdown_table, ms};
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

/// All measurements as a JSON array, one object per case and one for `idle-conns`: per
/// implementation, medians and raw samples.
pub(crate) fn measurements_json(measurements: &NetMeasurements) -> String {
    let mut items: Vec<String> = measurements
        .cases
        .iter()
        .map(|m| {
            let results: Vec<String> = m
                .results
                .iter()
                .map(|(imp, samples)| {
                    let s = Summary::of(samples);
                    let each = |f: &dyn Fn(&Sample) -> f64| {
                        json::numbers(&samples.iter().map(f).collect::<Vec<_>>())
                    };
                    json::object(&[
                        ("impl", json::string(imp.name())),
                        ("median_req_per_s", json::number(s.throughput)),
                        ("median_p50_ms", json::number(s.p50)),
                        ("median_p99_ms", json::number(s.p99)),
                        ("errors", s.errors.to_string()),
                        ("req_per_s", each(&|x| x.throughput)),
                        ("p50_ms", each(&|x| ms(x.p50))),
                        ("p99_ms", each(&|x| ms(x.p99))),
                        ("max_ms", each(&|x| x.max.map_or(f64::NAN, ms))),
                    ])
                })
                .collect();
            json::object(&[
                ("workload", json::string(&m.case.name())),
                ("connections", m.case.connections().to_string()),
                ("loader", json::string(m.loader)),
                ("workers", m.workers.to_string()),
                ("results", json::array(&results)),
            ])
        })
        .collect();
    items.extend(measurements.idle_conns.as_ref().map(idle_conns_json));
    json::array(&items)
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
fn idle_conns_json(m: &IdleConnsMeasurement) -> String {
    let results: Vec<String> = m
        .results
        .iter()
        .map(|(imp, samples)| {
            let s = IdleSummary::of(samples);
            let each = |f: &dyn Fn(&IdleSample) -> f64| {
                json::numbers(&samples.iter().map(f).collect::<Vec<_>>())
            };
            json::object(&[
                ("impl", json::string(imp.name())),
                ("median_baseline_ms_per_s", json::number(s.baseline)),
                ("median_ms_per_s", json::number(s.loaded)),
                ("median_added_ms_per_s", json::number(s.added)),
                (
                    "median_own_threads_ms_per_s",
                    json::number(s.own_loaded.unwrap_or(f64::NAN)),
                ),
                ("errors", s.errors.to_string()),
                ("baseline_ms_per_s", each(&|x| x.baseline)),
                ("ms_per_s", each(&|x| x.loaded)),
                (
                    "own_threads_baseline_ms_per_s",
                    each(&|x| x.own_baseline.unwrap_or(f64::NAN)),
                ),
                (
                    "own_threads_ms_per_s",
                    each(&|x| x.own_loaded.unwrap_or(f64::NAN)),
                ),
                ("connect_s", each(&|x| x.connect_s)),
            ])
        })
        .collect();
    json::object(&[
        ("workload", json::string(&idle_conns::name(m.connections))),
        ("connections", m.connections.to_string()),
        (
            "requested_connections",
            m.requested.map_or("null".to_owned(), |r| r.to_string()),
        ),
        ("workers", m.workers.to_string()),
        ("window_s", json::number(m.window.as_secs_f64())),
        ("settle_s", json::number(idle_conns::SETTLE.as_secs_f64())),
        ("results", json::array(&results)),
    ])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
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
}
