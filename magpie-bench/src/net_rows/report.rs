//! The `net` report: a table per case, the summary against the targets, and JSON.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use super::{servers, Case, CaseMeasurement, Config, NetImpl, Sample, Summary, SPIN};
use crate::harness::{fmt_ms, json, markdown_table, ms};

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

/// One line per case: each implementation's medians, the ratios to the target's peer, and
/// whether the target was met.
pub(crate) fn render_summary(measurements: &[CaseMeasurement]) -> String {
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

/// All measurements as a JSON array: per implementation, medians and raw samples.
pub(crate) fn measurements_json(measurements: &[CaseMeasurement]) -> String {
    let items: Vec<String> = measurements
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
    json::array(&items)
}
