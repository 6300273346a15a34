//! The tables and the JSON of `scale`: per row, one line per worker count with every
//! implementation's median, magpie's ratio to each, and magpie's counts.

use std::fmt::Write as _;

use serde::Serialize;

use crate::harness::{
    fmt_ms, markdown_table, median, ms, samples_json, OrderedObject, SamplesJson,
};

use super::counts::{CountsJson, Field};
use super::task_pool::PoolShape;
use super::{Group, Point, RowResult};

/// The count columns: header and reader (a [`Field`] whose name is the header). Spawns and unparks per spawn come only in the
/// groups that spawn tasks.
const COUNT_COLUMNS: [Field; 7] = [
    ("steals", |c| c.steals),
    ("failed steals", |c| c.failed_steals),
    ("steal attempts", |c| c.steal_attempts),
    ("heavy barriers", |c| c.heavy_barriers),
    ("in steals", |c| c.steal_heavy_barriers),
    ("parks", |c| c.parks),
    ("unparks", |c| c.unparks),
];

/// Whether the rows of `group` spawn tasks (and so get the spawn columns).
fn spawns_tasks(group: Group) -> bool {
    matches!(group, Group::Async | Group::TaskPool)
}

/// A median count: whole where it is whole (odd sample counts), else to one decimal.
fn fmt_count(value: Option<f64>) -> String {
    match value {
        Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "–".to_owned(),
    }
}

/// A ratio to two decimals (three below 0.1, where counts per spawn live), or a dash.
fn fmt_ratio(value: Option<f64>) -> String {
    match value {
        Some(v) if v < 0.1 => format!("{v:.3}"),
        Some(v) => format!("{v:.2}"),
        None => "–".to_owned(),
    }
}

/// magpie's median over `peer`'s, from a point's results.
fn magpie_over(point: &Point, peer: &str) -> Option<f64> {
    let med = |name: &str| {
        point
            .results
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| ms(median(s)))
    };
    Some(med("magpie")? / med(peer)?)
}

/// The table of one row.
pub(crate) fn render_row(row: &RowResult) -> String {
    let Some(first) = row.points.first() else {
        return String::new();
    };
    let names: Vec<&str> = first.results.iter().map(|(name, _)| *name).collect();
    let peers: Vec<&str> = names.iter().copied().filter(|&n| n != "magpie").collect();
    let pool = !first.shapes.is_empty();
    let spawns = spawns_tasks(row.group);

    let mut headers: Vec<String> = vec!["workers".to_owned()];
    for name in &names {
        headers.push(if pool {
            format!("{name} ms (eff, bal, ramp)")
        } else {
            format!("{name} ms")
        });
    }
    headers.extend(peers.iter().map(|p| format!("magpie/{p}")));
    headers.extend(COUNT_COLUMNS[..4].iter().map(|(h, _)| (*h).to_owned()));
    headers.push("heavy/steal".to_owned());
    headers.extend(COUNT_COLUMNS[4..].iter().map(|(h, _)| (*h).to_owned()));
    if spawns {
        headers.extend(["spawns".to_owned(), "unparks/spawn".to_owned()]);
    }
    headers.extend(["inject locks".to_owned(), "list locks".to_owned()]);

    let mut lines = Vec::new();
    for point in &row.points {
        let mut line = vec![point.workers.to_string()];
        for (name, samples) in &point.results {
            let mut cell = fmt_ms(ms(median(samples)));
            if let Some((_, shape)) = point.shapes.iter().find(|(n, _)| n == name) {
                let balance = if shape.load_balance.is_finite() {
                    format!("{:.3}", shape.load_balance)
                } else {
                    "idle".to_owned()
                };
                let ramp_up = if shape.ramp_up_ms.is_finite() {
                    format!("{:.2}", shape.ramp_up_ms)
                } else {
                    "idle".to_owned()
                };
                let _ = write!(
                    cell,
                    " ({:.1}%, {balance}, {ramp_up})",
                    shape.efficiency * 100.0
                );
            }
            line.push(cell);
        }
        line.extend(peers.iter().map(|p| fmt_ratio(magpie_over(point, p))));
        let c = &point.counts;
        line.extend(
            COUNT_COLUMNS[..4]
                .iter()
                .map(|&(_, r)| fmt_count(c.median(r))),
        );
        line.push(fmt_ratio(c.heavy_per_steal()));
        line.extend(
            COUNT_COLUMNS[4..]
                .iter()
                .map(|&(_, r)| fmt_count(c.median(r))),
        );
        if spawns {
            line.push(fmt_count(c.median(|c| c.spawns)));
            line.push(fmt_ratio(c.unparks_per_spawn()));
        }
        line.push(fmt_count(c.median(|c| c.inject_locks)));
        line.push(fmt_count(c.median(|c| c.list_locks)));
        lines.push(line);
    }

    let samples = first.results.first().map_or(0, |(_, s)| s.len());
    let mut out = format!(
        "### {}: {} — {samples} samples per point\n\n",
        row.group.name(),
        row.name
    );
    if let Some(about) = &row.about {
        let _ = writeln!(out, "{about}.\n");
    }
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let right: Vec<bool> = (0..headers.len()).map(|i| i > 0).collect();
    out.push_str(&markdown_table(&header_refs, &right, &lines));
    let unsettled: Vec<String> = row
        .points
        .iter()
        .filter(|p| p.counts.unsettled > 0)
        .map(|p| {
            format!(
                "{} of {} at {} workers",
                p.counts.unsettled, samples, p.workers
            )
        })
        .collect();
    if !unsettled.is_empty() {
        let _ = writeln!(
            out,
            "\nNote: after some magpie samples the workers did not all park within a second \
             ({}); those samples' heavy barriers may be undercounted.",
            unsettled.join(", ")
        );
    }
    out
}

/// What the columns mean, printed once after the tables.
pub(crate) fn legend() -> &'static str {
    "Times: medians in ms over rotating rounds (each round runs every implementation \
         once, first place rotating; a 3 ms pause after every sample, so that each starts \
         with every pool's threads parked). magpie/peer = magpie's median / the peer's: \
         below 1.00, magpie is faster.\n\n\
         Counts (magpie only): for each timed magpie sample, `Runtime::stats()` of the \
         runtime that ran it, taken just before the sample and again once the pool was idle \
         (no task left, every worker parked: a worker copies its heavy-barrier count into \
         the statistics when it parks), subtracted; the columns are medians over the \
         samples. steals = jobs + tasks taken from another worker; failed steals = searches \
         that visited every other worker and found nothing; steal attempts = steal \
         operations on a non-empty deque, successful or not; heavy barriers = `membarrier` \
         calls, in steals = those of steal passes (one per pass, the rest are parks that \
         left another worker running); heavy/steal = all samples' heavy barriers in steals \
         / all samples' steals; parks, \
         unparks = workers going to sleep and waking; spawns = tasks spawned (on workers \
         and from outside); unparks/spawn = all unparks / all spawns; inject locks = \
         acquisitions of a global inject queue's lock; list locks = acquisitions of a \
         live-task list shard's lock (one per spawn, one per shard among a batch of \
         completed tasks unlinked together).\n\n\
         Task pool: eff = task work / (workers × makespan), median over the samples (the \
         work is the tasks' durations, or with --sleeping-tasks the time they held their \
         threads); bal = the most \
         task work one thread did over the least, median over the samples (1.000 is \
         perfect; idle: a thread ran no task); ramp = how many ms after the first \
         submission the last thread began its first task, median over the samples (how \
         fast the wake policy brings a parked pool to work). --json PATH writes the raw \
         samples, the ratios, and every sample's counts.\n"
}

/// One point as JSON.
#[derive(Debug, Serialize)]
struct PointJson<'a> {
    workers: usize,
    results: Vec<SamplesJson<'a>>,
    /// Per peer, magpie's median over the peer's (`None`: one of them has no samples).
    magpie_over: OrderedObject<&'a str, Option<f64>>,
    counts: CountsJson,
    /// Task-pool rows only (left out of the others).
    #[serde(skip_serializing_if = "Option::is_none")]
    task_pool: Option<Vec<ShapeJson<'a>>>,
}

/// One implementation's [`PoolShape`] as JSON: its name, then the shape's fields.
#[derive(Debug, Serialize)]
struct ShapeJson<'a> {
    #[serde(rename = "impl")]
    imp: &'a str,
    #[serde(flatten)]
    shape: &'a PoolShape,
}

/// `point` as JSON.
fn point_json(point: &Point) -> PointJson<'_> {
    let shapes = point
        .shapes
        .iter()
        .map(|(name, shape)| ShapeJson { imp: name, shape })
        .collect();
    PointJson {
        workers: point.workers,
        results: point
            .results
            .iter()
            .map(|(name, samples)| samples_json(name, samples))
            .collect(),
        magpie_over: OrderedObject(
            point
                .results
                .iter()
                .filter(|(name, _)| *name != "magpie")
                .map(|(name, _)| (*name, magpie_over(point, name)))
                .collect(),
        ),
        counts: point.counts.json(),
        task_pool: (!point.shapes.is_empty()).then_some(shapes),
    }
}

/// One row as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct RowJson<'a> {
    group: &'static str,
    row: &'a str,
    /// What the row does, where its name does not say it (else `null`).
    description: Option<&'a str>,
    points: Vec<PointJson<'a>>,
}

/// Every row as JSON.
pub(crate) fn rows_json(rows: &[RowResult]) -> Vec<RowJson<'_>> {
    rows.iter()
        .map(|row| RowJson {
            group: row.group.name(),
            row: &row.name,
            description: row.about.as_deref(),
            points: row.points.iter().map(point_json).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::counts::CountSummary;
    use super::*;
    use crate::harness::json_check::{keys, parse, text};

    fn point(workers: usize, results: &[(&'static str, u64)]) -> Point {
        Point {
            workers,
            results: results
                .iter()
                .map(|&(name, millis)| (name, vec![Duration::from_millis(millis)]))
                .collect(),
            counts: CountSummary::default(),
            shapes: Vec::new(),
        }
    }

    #[test]
    fn rows_json_has_each_row_its_points_and_magpies_ratios() {
        let mut task_pool = point(4, &[("magpie", 2), ("rayon", 4), ("tokio", 1)]);
        task_pool.shapes = vec![
            (
                "magpie",
                PoolShape {
                    efficiency: 0.75,
                    // A thread that ran no task: infinite, written as null.
                    load_balance: f64::INFINITY,
                    ramp_up_ms: 0.25,
                },
            ),
            (
                "rayon",
                PoolShape {
                    efficiency: 0.5,
                    load_balance: 1.25,
                    ramp_up_ms: f64::NAN,
                },
            ),
        ];
        let rows = [
            RowResult {
                group: Group::TaskPool,
                name: "variable".to_owned(),
                about: Some("tasks of \"varied\" length".to_owned()),
                points: vec![point(1, &[("magpie", 3), ("rayon", 6)]), task_pool],
            },
            RowResult {
                group: Group::Iter,
                name: "sum".to_owned(),
                about: None,
                points: Vec::new(),
            },
            RowResult {
                group: Group::Async,
                name: "yield_many".to_owned(),
                about: None,
                // No magpie samples: its ratios are null.
                points: vec![point(2, &[("tokio", 5)])],
            },
        ];
        let json = text(rows_json(&rows));
        let v = parse(&json);
        assert_eq!(v.as_array().map(Vec::len), Some(3), "{json}");

        let row = &v[0];
        assert_eq!(row["group"], "task pool");
        assert_eq!(row["row"], "variable");
        assert_eq!(row["description"], "tasks of \"varied\" length");
        let first = &row["points"][0];
        assert!(first["workers"].is_u64(), "{json}");
        assert_eq!(first["workers"], 1);
        assert_eq!(first["results"][1]["impl"], "rayon");
        assert_eq!(first["results"][1]["samples_ms"][0].as_f64(), Some(6.0));
        assert_eq!(first["magpie_over"]["rayon"].as_f64(), Some(0.5));
        assert!(first["magpie_over"].get("magpie").is_none(), "{json}");
        assert_eq!(first["counts"]["samples"], 0);
        assert!(first.get("task_pool").is_none(), "{json}");
        let second = &row["points"][1];
        assert_eq!(second["magpie_over"]["tokio"].as_f64(), Some(2.0));
        let shapes = &second["task_pool"];
        assert_eq!(shapes[0]["impl"], "magpie");
        assert_eq!(shapes[0]["efficiency"].as_f64(), Some(0.75));
        assert!(shapes[0]["load_balance"].is_null(), "{json}");
        assert_eq!(shapes[0]["ramp_up_ms"].as_f64(), Some(0.25));
        assert_eq!(shapes[1]["load_balance"].as_f64(), Some(1.25));
        assert!(shapes[1]["ramp_up_ms"].is_null(), "{json}");

        assert!(v[1]["description"].is_null(), "{json}");
        assert_eq!(v[1]["points"], serde_json::json!([]));
        assert!(
            v[2]["points"][0]["magpie_over"]["tokio"].is_null(),
            "{json}"
        );

        let counts = keys(&text(CountSummary::default().json()));
        let samples = ["impl", "median_ms", "min_ms", "samples_ms"];
        let shape = ["impl", "efficiency", "load_balance", "ramp_up_ms"];
        let mut expected = vec!["group", "row", "description", "points"];
        expected.extend(["workers", "results"]);
        expected.extend(samples.repeat(2));
        expected.extend(["magpie_over", "rayon", "counts"]);
        expected.extend(counts.iter().map(String::as_str));
        expected.extend(["workers", "results"]);
        expected.extend(samples.repeat(3));
        expected.extend(["magpie_over", "rayon", "tokio", "counts"]);
        expected.extend(counts.iter().map(String::as_str));
        expected.push("task_pool");
        expected.extend(shape.repeat(2));
        expected.extend(["group", "row", "description", "points"]);
        expected.extend(["group", "row", "description", "points"]);
        expected.extend(["workers", "results"]);
        expected.extend(samples);
        expected.extend(["magpie_over", "tokio", "counts"]);
        expected.extend(counts.iter().map(String::as_str));
        assert_eq!(keys(&json), expected);
    }
}
