//! The tables and the JSON of `scale`: per row, one line per worker count with every
//! implementation's median, magpie's ratio to each, and magpie's counts.

use std::fmt::Write as _;

use crate::harness::{fmt_ms, json, markdown_table, median, ms, samples_json};

use super::counts::Field;
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
         Task pool: eff = total task work / (workers × median makespan); bal = the most \
         task work one thread did over the least, median over the samples (1.000 is \
         perfect; idle: a thread ran no task); ramp = how many ms after the first \
         submission the last thread began its first task, median over the samples (how \
         fast the wake policy brings a parked pool to work). --json PATH writes the raw \
         samples, the ratios, and every sample's counts.\n"
}

/// One point as JSON.
fn point_json(point: &Point) -> String {
    let results: Vec<String> = point
        .results
        .iter()
        .map(|(name, samples)| samples_json(name, samples))
        .collect();
    let ratios: Vec<(&str, String)> = point
        .results
        .iter()
        .filter(|(name, _)| *name != "magpie")
        .map(|(name, _)| {
            let ratio = magpie_over(point, name).map_or_else(|| "null".to_owned(), json::number);
            (*name, ratio)
        })
        .collect();
    let mut fields = vec![
        ("workers", point.workers.to_string()),
        ("results", json::array(&results)),
        ("magpie_over", json::object(&ratios)),
        ("counts", point.counts.json()),
    ];
    if !point.shapes.is_empty() {
        let shapes: Vec<String> = point
            .shapes
            .iter()
            .map(|(name, shape)| {
                json::object(&[
                    ("impl", json::string(name)),
                    ("efficiency", json::number(shape.efficiency)),
                    // Infinite (a thread ran no task) becomes null.
                    ("load_balance", json::number(shape.load_balance)),
                    ("ramp_up_ms", json::number(shape.ramp_up_ms)),
                ])
            })
            .collect();
        fields.push(("task_pool", json::array(&shapes)));
    }
    json::object(&fields)
}

/// Every row as a JSON array.
pub(crate) fn rows_json(rows: &[RowResult]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|row| {
            let points: Vec<String> = row.points.iter().map(point_json).collect();
            json::object(&[
                ("group", json::string(row.group.name())),
                ("row", json::string(&row.name)),
                (
                    "description",
                    row.about
                        .as_deref()
                        .map_or_else(|| "null".to_owned(), json::string),
                ),
                ("points", json::array(&points)),
            ])
        })
        .collect();
    json::array(&items)
}
