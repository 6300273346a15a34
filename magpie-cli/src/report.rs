//! Report plumbing the subcommands share: plain-text tables, JSON, and failures.
//!
//! A [`Table`] collects rows of already formatted cells and prints them with every column as
//! wide as its widest cell: the first column left-aligned (a name), the rest right-aligned
//! (numbers).

use std::io::{self, Write};

/// A text table: a header and rows of formatted cells.
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub(crate) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |out: &mut dyn Write, cells: &[String]| -> io::Result<()> {
            let mut text = String::new();
            for (i, (cell, width)) in cells.iter().zip(&widths).enumerate().take(columns) {
                if i == 0 {
                    text.push_str(&format!("{cell:<width$}"));
                } else {
                    text.push_str(&format!("  {cell:>width$}"));
                }
            }
            writeln!(out, "{}", text.trim_end())
        };
        line(out, &self.header)?;
        let rule: usize = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
        writeln!(out, "{}", "-".repeat(rule))?;
        for row in &self.rows {
            line(out, row)?;
        }
        Ok(())
    }
}

/// Why a subcommand failed; `main` prints it as `magpie: <message>`.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A bad argument that clap's parsers could not catch: exit status 2, like clap's own.
    Usage(String),
    /// Anything else: exit status 1.
    Run(String),
    /// The reader of stdout went away (`magpie compare | head`): nothing to report.
    ClosedPipe,
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Failure {
        if err.kind() == io::ErrorKind::BrokenPipe {
            Failure::ClosedPipe
        } else {
            Failure::Run(format!("cannot write the report: {err}"))
        }
    }
}

impl From<magpie::BuildError> for Failure {
    fn from(err: magpie::BuildError) -> Failure {
        Failure::Run(format!("cannot start the runtime: {err}"))
    }
}

impl From<serde_json::Error> for Failure {
    fn from(err: serde_json::Error) -> Failure {
        Failure::Run(format!("cannot encode JSON: {err}"))
    }
}

/// Prints `value` as pretty JSON on one object.
pub(crate) fn write_json(
    out: &mut impl Write,
    value: &impl serde::Serialize,
) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// Milliseconds, as a float, for reports.
pub(crate) fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// What one worker did between two snapshots of the same runtime's [`magpie::Stats`].
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct WorkerDelta {
    pub(crate) tasks: u64,
    pub(crate) stolen: u64,
    pub(crate) steal_operations: u64,
    pub(crate) parks: u64,
    pub(crate) busy_ns: u64,
    pub(crate) idle_ns: u64,
}

impl WorkerDelta {
    /// One row per worker: `after - before` (the counters are cumulative). A counter that
    /// went down (the snapshots swapped, or a counter that is not monotonic after all) gives
    /// 0, not a wrapped-around 18 quintillion.
    pub(crate) fn between(after: &magpie::Stats, before: &magpie::Stats) -> Vec<WorkerDelta> {
        WorkerDelta::pairs(after, before)
            .map(|(_, a, b)| WorkerDelta {
                tasks: a.tasks_executed.saturating_sub(b.tasks_executed),
                stolen: a.tasks_stolen.saturating_sub(b.tasks_stolen),
                steal_operations: a.steal_operations.saturating_sub(b.steal_operations),
                parks: a.parks.saturating_sub(b.parks),
                busy_ns: a.busy_time_ns.saturating_sub(b.busy_time_ns),
                idle_ns: a.idle_time_ns.saturating_sub(b.idle_time_ns),
            })
            .collect()
    }

    /// Each worker's index and its statistics in `after` and in `before` (all zero for a
    /// worker `before` did not have), for deltas of counters this struct does not carry;
    /// subtract with `saturating_sub`, as [`WorkerDelta::between`] does.
    pub(crate) fn pairs<'a>(
        after: &'a magpie::Stats,
        before: &'a magpie::Stats,
    ) -> impl Iterator<Item = (usize, &'a magpie::WorkerStats, &'a magpie::WorkerStats)> + 'a {
        static ZERO: std::sync::OnceLock<magpie::WorkerStats> = std::sync::OnceLock::new();
        let zero = ZERO.get_or_init(magpie::WorkerStats::default);
        after
            .workers
            .iter()
            .enumerate()
            .map(move |(i, a)| (i, a, before.workers.get(i).unwrap_or(zero)))
    }

    /// The share of the interval this worker was awake (running or looking for work), in
    /// percent.
    pub(crate) fn busy_percent(&self) -> f64 {
        // In floating point: the sum of two u64 nanosecond counts may not fit in one.
        let total = self.busy_ns as f64 + self.idle_ns as f64;
        if total == 0.0 {
            0.0
        } else {
            self.busy_ns as f64 * 100.0 / total
        }
    }
}

/// Stolen tasks over executed ones, summed over workers; 0 when none ran.
pub(crate) fn steal_rate(deltas: &[WorkerDelta]) -> f64 {
    let tasks: u64 = deltas.iter().map(|d| d.tasks).sum();
    let stolen: u64 = deltas.iter().map(|d| d.stolen).sum();
    if tasks == 0 {
        0.0
    } else {
        (stolen as f64 / tasks as f64).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stats of two workers whose every counter reads `value`.
    fn stats(value: u64) -> magpie::Stats {
        let mut worker = magpie::WorkerStats::default();
        worker.tasks_executed = value;
        worker.tasks_stolen = value;
        worker.steal_operations = value;
        worker.parks = value;
        worker.busy_time_ns = value;
        worker.idle_time_ns = value;
        let mut stats = magpie::Stats::default();
        stats.workers = vec![worker.clone(), worker];
        stats
    }

    #[test]
    fn deltas_of_counters_that_went_down_are_zero() {
        // `u64` subtraction: a counter lower after than before panicked in a debug build
        // and wrapped to about 1.8e19 in a release one.
        let deltas = WorkerDelta::between(&stats(5), &stats(7));
        assert_eq!(deltas.len(), 2);
        for d in &deltas {
            assert_eq!(
                (
                    d.tasks,
                    d.stolen,
                    d.steal_operations,
                    d.parks,
                    d.busy_ns,
                    d.idle_ns
                ),
                (0, 0, 0, 0, 0, 0)
            );
            assert_eq!(d.busy_percent(), 0.0);
        }
        assert_eq!(steal_rate(&deltas), 0.0);
        let d = &WorkerDelta::between(&stats(7), &stats(5))[0];
        assert_eq!((d.tasks, d.busy_ns), (2, 2));
        // A worker missing from `before` counts from zero.
        let mut one = stats(0);
        one.workers.truncate(1);
        assert_eq!(WorkerDelta::between(&stats(3), &one)[1].tasks, 3);
    }

    #[test]
    fn busy_percent_of_huge_counts() {
        let d = WorkerDelta {
            busy_ns: u64::MAX,
            idle_ns: u64::MAX,
            ..WorkerDelta::default()
        };
        assert_eq!(d.busy_percent(), 50.0);
    }

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(["name", "n"]);
        t.row(["a", "100"]);
        t.row(["longer", "2"]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "name      n\n-----------\na       100\nlonger    2\n");
    }
}
