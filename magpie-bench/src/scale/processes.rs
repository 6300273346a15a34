//! `scale --processes K`: the same table from `K` fresh processes, their samples pooled.
//!
//! **Why.** On a small virtual machine a process's threads land on the CPUs as the kernel
//! places them when they start, and that placement lasts for the process: two runs of
//! `scale` in a row can put one pool's median 2–3 × apart (the `futures` pool's
//! spawn_many_remote at 2 workers read 1.09–3.6 ms from one process to the next, magpie's
//! 1.2–2.2; BENCHMARKS.md, "fifteenth" and "seventeenth"). The rotating rounds of one
//! process even out what changes from sample to sample, not that. A ratio from one
//! process is then one draw of the placement, and a row that crosses 1.0 in one run and not
//! in the next says nothing either way.
//!
//! So the parent runs `scale` with the same arguments `K` times, one child after the other,
//! each writing its JSON to a temporary folder, and reports per row, worker count and peer:
//! both medians over every child's samples together, magpie's ratio of those medians, and
//! the spread of the ratio over the children (the lowest, the median and the highest of
//! the `K` per-process ratios) with how many children had magpie ahead, then magpie's
//! counts over every child's samples (medians per sample, and the two ratios over the
//! totals). The task-pool shapes are in each child's JSON, which the parent keeps beside its
//! own when given `--json PATH` (`PATH` without its extension, then `-process-1.json` and so
//! on), and otherwise removes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use serde_json::Value;

use super::counts::{CountSummary, Counts};
use crate::harness::{markdown_table, median_f64};

/// `args` (the command line after the program's name) for one child: without
/// `--processes` and its value, and with `--json` (if given) replaced by `json`.
pub(crate) fn child_args(args: &[OsString], json: &Path) -> Vec<OsString> {
    const DROPPED: [&str; 2] = ["--processes", "--json"];
    let mut out = Vec::with_capacity(args.len() + 2);
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let text = arg.to_string_lossy();
        if DROPPED.contains(&text.as_ref()) {
            skip_value = true;
            continue;
        }
        if DROPPED
            .iter()
            .any(|flag| text.starts_with(&format!("{flag}=")))
        {
            continue;
        }
        out.push(arg.clone());
    }
    out.push(OsString::from("--json"));
    out.push(json.as_os_str().to_owned());
    out
}

/// Runs `exe args…` (`scale` with `args`) `processes` times, child `i` (from 1) writing its
/// JSON to `file(i)`, and returns the children's JSON files in order. A child that fails
/// stops the run, with its status and the end of what it printed.
pub(crate) fn run_children(
    exe: &Path,
    args: &[OsString],
    processes: usize,
    file: impl Fn(usize) -> PathBuf,
) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::with_capacity(processes);
    for i in 0..processes {
        let json = file(i + 1);
        eprintln!("scale --processes: process {} of {processes}", i + 1);
        let output = Command::new(exe)
            .args(child_args(args, &json))
            .output()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        if !output.status.success() {
            let text = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            return Err(format!(
                "process {} of {processes} failed ({}): {}",
                i + 1,
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
        files.push(json);
    }
    Ok(files)
}

/// One implementation at one point: its samples from every process, and each process's
/// median.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Pooled {
    #[serde(rename = "impl")]
    pub(crate) imp: String,
    /// The median over every process's samples together.
    pub(crate) median_ms: f64,
    /// Each process's own median, in process order.
    pub(crate) process_medians_ms: Vec<f64>,
}

/// magpie against one peer at one point.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Ratio {
    pub(crate) peer: String,
    /// magpie's pooled median over the peer's.
    pub(crate) pooled: f64,
    /// The per-process ratios (each process's medians), lowest, median and highest.
    pub(crate) per_process: [f64; 3],
    /// Processes in which magpie's median was at most the peer's.
    pub(crate) processes_ahead: usize,
}

/// One row at one worker count.
#[derive(Debug, Serialize)]
pub(crate) struct PooledPoint {
    pub(crate) group: String,
    pub(crate) row: String,
    pub(crate) workers: u64,
    pub(crate) impls: Vec<Pooled>,
    pub(crate) magpie_over: Vec<Ratio>,
    /// magpie's counts over every process's samples, written as each process writes its own.
    #[serde(rename = "counts", serialize_with = "counts_json")]
    pub(crate) summary: CountSummary,
}

fn counts_json<S: serde::Serializer>(summary: &CountSummary, s: S) -> Result<S::Ok, S::Error> {
    summary.json().serialize(s)
}

/// Pools the `results` of several `scale` JSON files (the value of each file's `results`
/// key), which must hold the same rows, worker counts and implementations in the same
/// order: the same command line.
pub(crate) fn pool(runs: &[Value]) -> Result<Vec<PooledPoint>, String> {
    let first = runs.first().ok_or("no process wrote a result")?;
    let rows = first.as_array().ok_or("`results` is not an array")?;
    let mut out = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let group = text(row, "group")?;
        let name = text(row, "row")?;
        let points = row["points"].as_array().ok_or("a row without points")?;
        for (p, point) in points.iter().enumerate() {
            let workers = point["workers"].as_u64().ok_or("a point without workers")?;
            let impls = point["results"]
                .as_array()
                .ok_or("a point without results")?;
            // Every process's table has this point, with the same implementations in order.
            let names: Vec<&Value> = impls.iter().map(|imp| &imp["impl"]).collect();
            for run in runs {
                let other = &run[r]["points"][p];
                let other_names = other["results"]
                    .as_array()
                    .map(|results| results.iter().map(|imp| &imp["impl"]).collect::<Vec<_>>());
                if run[r]["row"] != row["row"]
                    || other["workers"] != point["workers"]
                    || other_names.as_ref() != Some(&names)
                {
                    return Err(format!(
                        "the processes' tables differ at {name}, {workers} workers"
                    ));
                }
            }
            // Per implementation, every process's samples.
            let mut pooled = Vec::with_capacity(impls.len());
            for (i, imp) in impls.iter().enumerate() {
                let imp_name = text(imp, "impl")?;
                let mut all = Vec::new();
                let mut medians = Vec::with_capacity(runs.len());
                for run in runs {
                    let samples: Vec<f64> = run[r]["points"][p]["results"][i]["samples_ms"]
                        .as_array()
                        .ok_or("results without samples_ms")?
                        .iter()
                        .filter_map(Value::as_f64)
                        .collect();
                    if samples.is_empty() {
                        return Err(format!(
                            "{name}, {workers} workers: {imp_name} has no samples"
                        ));
                    }
                    medians.push(median_f64(&samples));
                    all.extend(samples);
                }
                pooled.push(Pooled {
                    imp: imp_name.to_owned(),
                    median_ms: median_f64(&all),
                    process_medians_ms: medians,
                });
            }
            let magpie_over = match pooled.iter().find(|x| x.imp == "magpie") {
                Some(magpie) => pooled
                    .iter()
                    .filter(|x| x.imp != "magpie")
                    .map(|peer| ratio(magpie, peer))
                    .collect(),
                None => Vec::new(),
            };
            // magpie's counts, sample by sample, from every process.
            let mut summary = CountSummary::default();
            for run in runs {
                let counts = &run[r]["points"][p]["counts"];
                let samples = counts["per_sample"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice);
                for sample in samples {
                    let sample = Counts::from_json(sample)
                        .ok_or_else(|| format!("{name}, {workers} workers: a sample's counts"))?;
                    summary.push(sample, true);
                }
                summary.unsettled += counts["unsettled"].as_u64().unwrap_or(0) as usize;
            }
            out.push(PooledPoint {
                group: group.to_owned(),
                row: name.to_owned(),
                workers,
                impls: pooled,
                magpie_over,
                summary,
            });
        }
    }
    Ok(out)
}

/// magpie's ratio to `peer`, pooled and process by process.
fn ratio(magpie: &Pooled, peer: &Pooled) -> Ratio {
    let mut per: Vec<f64> = magpie
        .process_medians_ms
        .iter()
        .zip(&peer.process_medians_ms)
        .map(|(m, p)| m / p)
        .collect();
    let processes_ahead = per.iter().filter(|&&r| r <= 1.0).count();
    per.sort_by(f64::total_cmp);
    Ratio {
        peer: peer.imp.clone(),
        pooled: magpie.median_ms / peer.median_ms,
        per_process: [per[0], median_f64(&per), per[per.len() - 1]],
        processes_ahead,
    }
}

fn text<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    value[key]
        .as_str()
        .ok_or_else(|| format!("a `{key}` that is not a string"))
}

/// The pooled table: one line per row, worker count and peer.
pub(crate) fn render(points: &[PooledPoint], processes: usize) -> String {
    let mut lines = Vec::new();
    for point in points {
        let magpie = point.impls.iter().find(|x| x.imp == "magpie");
        for ratio in &point.magpie_over {
            let peer = point
                .impls
                .iter()
                .find(|x| x.imp == ratio.peer)
                .map_or(f64::NAN, |x| x.median_ms);
            lines.push(vec![
                format!("{}: {}", point.group, point.row),
                point.workers.to_string(),
                ratio.peer.clone(),
                format!("{:.3}", magpie.map_or(f64::NAN, |m| m.median_ms)),
                format!("{peer:.3}"),
                format!("{:.2}", ratio.pooled),
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    ratio.per_process[0], ratio.per_process[1], ratio.per_process[2]
                ),
                format!("{} of {processes}", ratio.processes_ahead),
            ]);
        }
    }
    markdown_table(
        &[
            "row",
            "workers",
            "peer",
            "magpie ms",
            "peer ms",
            "magpie/peer",
            "per process: low / median / high",
            "magpie ahead",
        ],
        &[false, true, false, true, true, true, true, true],
        &lines,
    )
}

/// magpie's counts over every process's samples: one line per row and worker count.
pub(crate) fn render_counts(points: &[PooledPoint]) -> String {
    let fmt = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"));
    let ratio = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), |v| format!("{v:.4}"));
    let lines: Vec<Vec<String>> = points
        .iter()
        .filter(|point| !point.summary.samples.is_empty())
        .map(|point| {
            let s = &point.summary;
            vec![
                format!("{}: {}", point.group, point.row),
                point.workers.to_string(),
                s.samples.len().to_string(),
                fmt(s.median(|c| c.steals)),
                fmt(s.median(|c| c.failed_steals)),
                fmt(s.median(|c| c.heavy_barriers)),
                ratio(s.heavy_per_steal()),
                fmt(s.median(|c| c.parks)),
                fmt(s.median(|c| c.unparks)),
                ratio(s.unparks_per_spawn()),
                fmt(s.median(|c| c.inject_locks)),
            ]
        })
        .collect();
    markdown_table(
        &[
            "row",
            "workers",
            "samples",
            "steals",
            "failed steals",
            "heavy barriers",
            "heavy/steal",
            "parks",
            "unparks",
            "unparks/spawn",
            "inject locks",
        ],
        &[
            false, true, true, true, true, true, true, true, true, true, true,
        ],
        &lines,
    )
}

/// Reads a child's JSON file and returns its `results` value and its `machine` value.
pub(crate) fn read(path: &Path) -> Result<(Value, Value), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    Ok((value["results"].take(), value["machine"].take()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_child_runs_without_the_parents_flags_and_writes_its_own_json() {
        let args = os(&[
            "scale",
            "--processes",
            "5",
            "--workers",
            "2",
            "--json",
            "out.json",
            "--only=async",
        ]);
        let child = child_args(&args, Path::new("/tmp/x/scale-1.json"));
        assert_eq!(
            child,
            os(&[
                "scale",
                "--workers",
                "2",
                "--only=async",
                "--json",
                "/tmp/x/scale-1.json"
            ])
        );
        let child = child_args(&os(&["scale", "--processes=3"]), Path::new("a.json"));
        assert_eq!(child, os(&["scale", "--json", "a.json"]));
    }

    fn run(magpie: &[f64], peer: &[f64]) -> Value {
        json!([{
            "group": "async",
            "row": "spawn_many_remote",
            "points": [{
                "workers": 2,
                "results": [
                    {"impl": "magpie", "samples_ms": magpie},
                    {"impl": "tokio", "samples_ms": peer},
                ],
            }],
        }])
    }

    /// `run` with magpie's counts: one sample of `unparks` unparks and `spawns` spawns.
    fn counted(magpie: &[f64], peer: &[f64], unparks: u64, spawns: u64) -> Value {
        let mut value = run(magpie, peer);
        let mut summary = CountSummary::default();
        summary.push(
            Counts {
                unparks,
                spawns,
                ..Counts::default()
            },
            true,
        );
        value[0]["points"][0]["counts"] = serde_json::to_value(summary.json()).unwrap();
        value
    }

    #[test]
    fn the_counts_of_every_process_are_pooled() {
        let runs = [
            counted(&[1.0], &[1.0], 1, 100),
            counted(&[1.0], &[1.0], 3, 100),
        ];
        let points = pool(&runs).unwrap();
        let summary = &points[0].summary;
        assert_eq!(summary.samples.len(), 2);
        assert_eq!(summary.unparks_per_spawn(), Some(4.0 / 200.0));
        assert_eq!(summary.median(|c| c.unparks), Some(2.0));
        let table = render_counts(&points);
        assert!(table.contains("0.0200"), "{table}");
        // A point without counts (a run of another version) pools to none, and is left out.
        let points = pool(&[run(&[1.0], &[1.0])]).unwrap();
        assert!(points[0].summary.samples.is_empty());
        assert!(!render_counts(&points).contains("spawn_many_remote"));
    }

    #[test]
    fn the_samples_of_every_process_are_pooled() {
        let runs = [
            run(&[1.0, 2.0, 3.0], &[2.0, 2.0, 2.0]),
            run(&[4.0, 5.0, 6.0], &[3.0, 3.0, 3.0]),
        ];
        let points = pool(&runs).unwrap();
        assert_eq!(points.len(), 1);
        let point = &points[0];
        assert_eq!(
            (point.row.as_str(), point.workers),
            ("spawn_many_remote", 2)
        );
        // magpie: the median of 1..6 is 3.5; tokio's of 2, 2, 2, 3, 3, 3 is 2.5.
        assert_eq!(point.impls[0].median_ms, 3.5);
        assert_eq!(point.impls[0].process_medians_ms, [2.0, 5.0]);
        assert_eq!(point.impls[1].median_ms, 2.5);
        let ratio = &point.magpie_over[0];
        assert_eq!(ratio.peer, "tokio");
        assert_eq!(ratio.pooled, 3.5 / 2.5);
        // Process 1: 2 / 2 = 1.0 (ahead: at most the peer's); process 2: 5 / 3.
        assert_eq!(ratio.per_process, [1.0, (1.0 + 5.0 / 3.0) / 2.0, 5.0 / 3.0]);
        assert_eq!(ratio.processes_ahead, 1);
        let table = render(&points, 2);
        assert!(table.contains("async: spawn_many_remote"), "{table}");
        assert!(table.contains("1 of 2"), "{table}");
    }

    #[test]
    fn processes_with_different_tables_are_refused() {
        let mut other = run(&[1.0], &[1.0]);
        other[0]["points"][0]["workers"] = json!(4);
        let err = pool(&[run(&[1.0], &[1.0]), other]).unwrap_err();
        assert!(err.contains("differ"), "{err}");
        let mut empty = run(&[1.0], &[1.0]);
        empty[0]["points"][0]["results"][1]["samples_ms"] = json!([]);
        let err = pool(&[run(&[1.0], &[1.0]), empty]).unwrap_err();
        assert!(err.contains("no samples"), "{err}");
        assert!(pool(&[]).is_err());
    }
}
