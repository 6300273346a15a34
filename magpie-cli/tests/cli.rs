//! The `magpie` command, run as a user would: tiny workloads, exit codes, JSON shapes.
//!
//! No test depends on timing: only counts, keys and exit statuses are checked.

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn magpie() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magpie"));
    cmd.env("MAGPIE_WORKER_THREADS", "2");
    cmd
}

/// Runs `magpie ARGS --json`, expects success, and parses the output.
fn json(args: &[&str]) -> Value {
    let out = magpie()
        .args(args)
        .arg("--json")
        .output()
        .expect("run magpie");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// A fresh folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn demo_counts_every_task_once() {
    let v = json(&[
        "demo",
        "--tasks",
        "200",
        "--workers",
        "2",
        "--heavy-us",
        "200",
        "--light-us",
        "20",
    ]);
    assert_eq!(v["workers"], 2);
    assert_eq!(v["tasks"], 200);
    assert_eq!(v["heavy_tasks"], 100);
    let rows = v["per_worker"].as_array().expect("per_worker");
    assert_eq!(rows.len(), 2);
    let tasks: u64 = rows.iter().map(|r| r["tasks"].as_u64().unwrap()).sum();
    assert_eq!(tasks, 200);
    let heavy: u64 = rows.iter().map(|r| r["heavy"].as_u64().unwrap()).sum();
    assert_eq!(heavy, 100);
    assert!(v["makespan_ms"].as_f64().unwrap() > 0.0);
    assert!(v["ideal_ms"].as_f64().unwrap() > 0.0);
    assert!(v["ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(v["stats"]["workers"].as_array().unwrap().len(), 2);
}

#[test]
fn demo_on_the_default_runtime_prints_a_table() {
    // No --workers: the default runtime, sized by MAGPIE_WORKER_THREADS.
    magpie()
        .args([
            "demo",
            "--tasks",
            "20",
            "--heavy-us",
            "100",
            "--light-us",
            "10",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("worker  tasks  heavy  stolen"))
        .stdout(predicate::str::contains("x the ideal"));
}

#[test]
fn compare_runs_four_strategies_on_every_pattern() {
    let v = json(&[
        "compare",
        "--tasks",
        "200",
        "--workers",
        "2",
        "--repeat",
        "1",
    ]);
    assert_eq!(v["workers"], 2);
    let patterns = v["patterns"].as_array().expect("patterns");
    let names: Vec<&str> = patterns
        .iter()
        .map(|p| p["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["uniform", "mixed", "variable", "burst"]);
    for p in patterns {
        assert_eq!(p["tasks"], 200);
        assert!(p["ideal_ms"].as_f64().unwrap() > 0.0);
        let cells = p["strategies"].as_array().unwrap();
        assert_eq!(cells.len(), 4, "{p}");
        for c in cells {
            assert!(c["makespan_ms"].as_f64().unwrap() > 0.0);
            // One run: its median is itself.
            assert_eq!(c["median_ms"], c["makespan_ms"], "{c}");
            let efficiency = c["efficiency"].as_f64().unwrap();
            assert!(efficiency > 0.0, "{c}");
            assert_eq!(c["runs_ms"].as_array().unwrap().len(), 1);
        }
        // One run each shows no spread, so no outcome; the rival is a baseline.
        let verdict = &p["verdict"];
        assert!(verdict["outcome"].is_null(), "{verdict}");
        let rival = verdict["rival"].as_str().unwrap();
        assert!(
            cells[1..].iter().any(|c| c["strategy"] == rival),
            "{verdict}"
        );
        // Baselines never steal.
        for c in &cells[1..] {
            assert_eq!(c["steals"], 0);
            assert_eq!(c["steal_rate"], 0.0);
        }
    }
}

#[test]
fn compare_one_pattern_prints_one_table() {
    magpie()
        .args([
            "compare",
            "--pattern",
            "mixed",
            "--tasks",
            "100",
            "--repeat",
            "2",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("mixed: 100 tasks"))
        .stdout(predicate::str::contains("magpie (work stealing)"))
        .stdout(predicate::str::contains("static partition"))
        .stdout(predicate::str::contains("median ms"))
        // Two runs each: a spread, and an outcome against it.
        .stdout(predicate::str::contains("work stealing against "))
        .stdout(
            predicate::str::is_match("; ahead of every |; behind: |: a tie on this machine")
                .unwrap(),
        )
        .stdout(predicate::str::contains("uniform").not());
}

#[test]
fn scale_has_one_row_per_worker_count() {
    let v = json(&["scale", "--tasks", "200", "--max-workers", "3"]);
    let rows = v["rows"].as_array().expect("rows");
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| r["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 3]);
    assert_eq!(rows[0]["speedup"], 1.0);
    assert_eq!(rows[0]["steals"], 0);
    for r in rows {
        assert!(r["time_ms"].as_f64().unwrap() > 0.0);
        let work = r["work_ms"].as_array().unwrap();
        assert_eq!(work.len() as u64, r["workers"].as_u64().unwrap());
        // Every task's work is counted once, on the worker that ran it.
        let total: f64 = work.iter().map(|w| w.as_f64().unwrap()).sum();
        let expected = v["total_work_ms"].as_f64().unwrap();
        assert!(
            (total - expected).abs() < 1e-3 * expected,
            "{total} vs {expected}"
        );
    }
}

#[test]
fn scale_accepts_workers_as_the_maximum() {
    let v = json(&["scale", "--tasks", "50", "--workers", "2"]);
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
}

const SAMPLE_TRACE: &str = r#"{"traceEvents":[
 {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"worker 0"}},
 {"name":"poll","cat":"task","ph":"X","pid":1,"tid":0,"ts":12.345,"dur":3.2,"args":{"task":17}},
 {"name":"job","cat":"job","ph":"X","pid":1,"tid":1,"ts":15.0,"dur":40.1},
 {"name":"parked","cat":"park","ph":"X","pid":1,"tid":1,"ts":60.0,"dur":100.0},
 {"name":"steal","cat":"steal","ph":"i","s":"t","pid":1,"tid":1,"ts":14.9,"args":{"victim":0,"count":3,"kind":"tasks"}},
 {"name":"inject_pull","cat":"inject","ph":"i","s":"t","pid":1,"tid":0,"ts":11.0,"args":{"count":8}}
],"displayTimeUnit":"ns"}"#;

#[test]
fn trace_draws_an_existing_trace() {
    let dir = scratch("trace_input");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("given.json");
    std::fs::write(&input, SAMPLE_TRACE).unwrap();
    let out = dir.join("out/nested");
    let v = json(&[
        "trace",
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(v["workers"], 2);
    assert_eq!(v["events"]["total"], 6);
    assert_eq!(v["events"]["steals"], 1);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("worker 1"));
}

#[test]
fn trace_records_and_draws_a_run() {
    let dir = scratch("trace_run");
    let v = json(&[
        "trace",
        "--tasks",
        "200",
        "--workers",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(v["workers"], 2);
    let trace: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("trace.json")).unwrap()).unwrap();
    // One poll span per task: a poll still ending as the export runs is closed at the
    // export's time.
    let polls = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "poll")
        .count();
    assert_eq!(polls, 200);
    assert!(v["events"]["busy_spans"].as_u64().unwrap() >= 200);
    let svg = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
}

/// `trace --iter`: each operation runs (its answer checked inside the command) and is drawn;
/// the job that `install` queued, and every piece stolen, shows as a job span.
#[test]
fn trace_records_a_parallel_iterator() {
    for op in ["sum", "min-by-key", "any", "sort-unstable"] {
        let dir = scratch(&format!("trace_iter_{op}"));
        let v = json(&[
            "trace",
            "--iter",
            op,
            "--len",
            "200000",
            "--workers",
            "2",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(v["workers"], 2, "{op}: {v}");
        // Each worker's start and busy time: the first to run anything starts at 0, and
        // together they ran the operation for some time.
        let busy = v["busy"].as_array().unwrap();
        assert_eq!(busy.len(), 2, "{op}: {v}");
        assert!(busy.iter().any(|w| w["first_busy_us"] == 0.0), "{op}: {v}");
        let total: f64 = busy.iter().map(|w| w["busy_us"].as_f64().unwrap()).sum();
        assert!(total > 0.0, "{op}: {v}");
        // Beside it, the time each waited in `join` for a thief and was parked.
        for w in busy {
            for field in ["waiting_us", "parked_us"] {
                assert!(w[field].as_f64().unwrap() >= 0.0, "{op} {field}: {v}");
            }
        }
        let trace: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("trace.json")).unwrap())
                .unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        assert_eq!(
            v["events"]["wait_spans"].as_u64().unwrap() as usize,
            events.iter().filter(|e| e["cat"] == "wait").count(),
            "{op}: {v}"
        );
        let jobs = events.iter().filter(|e| e["cat"] == "job").count();
        let steals = events.iter().filter(|e| e["cat"] == "steal").count();
        // At least the installed job; a span per steal besides (a stolen job runs as one).
        assert!(jobs > steals, "{op}: {jobs} job spans, {steals} steals");
        // No task ran: the operation is fork-join work only.
        assert_eq!(
            events.iter().filter(|e| e["name"] == "poll").count(),
            0,
            "{op}"
        );
        let svg = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
        assert!(svg.starts_with("<svg"), "{op}");
    }
}

/// `trace --iter` takes no task-pool options, and `--len` only with `--iter`.
#[test]
fn trace_iter_refuses_task_options() {
    let dir = scratch("trace_iter_refuses");
    for args in [
        &["--iter", "sum", "--tasks", "10"][..],
        &["--iter", "sum", "--pattern", "uniform"],
        &["--iter", "sum", "--demo"],
        &["--len", "10"],
        &["--iter", "sum", "--len", "0"],
    ] {
        magpie()
            .arg("trace")
            .args(args)
            .arg("--out")
            .arg(&dir)
            .assert()
            .code(2);
    }
}

/// `demo --stall` (2 s): one stall report, naming the blocker by name and spawn location,
/// and every queued task run by a worker other than the blocked one.
#[test]
fn demo_stall_reports_the_blocker_and_its_queue_runs_elsewhere() {
    let v = json(&["demo", "--stall", "--workers", "2"]);
    let reports = v["stall_reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{v}");
    assert_eq!(reports[0]["name"], "blocker", "{v}");
    assert!(
        reports[0]["location"]["file"]
            .as_str()
            .unwrap()
            .ends_with("demo_stall.rs"),
        "{v}"
    );
    let blocked = v["blocked_worker"].as_u64().unwrap();
    let queued = v["queued_finished_ms"].as_array().unwrap().len();
    assert_eq!(queued, 8);
    let rows = v["per_worker"].as_array().unwrap();
    let ran_elsewhere: u64 = rows
        .iter()
        .filter(|r| r["worker"].as_u64() != Some(blocked))
        .map(|r| r["queued_tasks_run"].as_u64().unwrap())
        .sum();
    assert_eq!(ran_elsewhere, 8, "{v}");
}

/// `trace --stall` (2 s) draws the stall: a stall span in the trace and the SVG.
#[test]
fn trace_stall_draws_the_stall() {
    let dir = scratch("trace_stall");
    let v = json(&[
        "trace",
        "--stall",
        "--workers",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(v["events"]["stalls"], 1, "{v}");
    let svg = std::fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("blocker"),
        "the stall's task is not named in the drawing"
    );
}

#[test]
fn bad_arguments_exit_with_status_2_and_a_message() {
    for args in [
        vec!["demo", "--workers", "0"],
        vec!["compare", "--workers", "0"],
        vec!["scale", "--max-workers", "0"],
        vec!["compare", "--pattern", "zigzag"],
        vec!["demo", "--tasks", "abc"],
        vec!["compare", "--tasks", "0"],
        vec!["compare", "--repeat", "0"],
        vec!["trace"],
        vec!["trace", "--stall", "--demo", "--out", "x"],
        vec!["frobnicate"],
    ] {
        magpie()
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::is_empty().not());
    }
}

#[test]
fn trace_into_a_file_is_a_usage_error() {
    let dir = scratch("trace_file_out");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("not-a-folder");
    std::fs::write(&file, "x").unwrap();
    magpie()
        .args([
            "trace",
            "--input",
            "unused.json",
            "--out",
            file.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("magpie: "));
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        vec!["--help"],
        vec!["demo", "--help"],
        vec!["compare", "--help"],
        vec!["scale", "--help"],
        vec!["trace", "--help"],
    ] {
        magpie()
            .args(&args)
            .assert()
            .success()
            .stdout(predicate::str::contains("Usage"));
    }
}

#[test]
fn tasks_lists_every_state_with_names_and_locations() {
    let report = json(&["tasks", "--workers", "2"]);
    assert_eq!(report["workers"], 2);
    let tasks = report["tasks"].as_array().expect("a list of tasks");
    let named = |name: &str| {
        tasks
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no task named {name}: {tasks:?}"))
    };
    for name in ["timer-0", "timer-1", "timer-2", "ticker"] {
        assert_eq!(named(name)["state"], "Idle", "{name}");
    }
    assert_eq!(
        named("ticker")["counters"]["polls"],
        11,
        "ten yields, then the wait"
    );
    for name in ["busy-0", "busy-1"] {
        let worker = named(name)["state"]["Running"]["worker"].as_u64();
        assert!(matches!(worker, Some(0 | 1)), "{name}: {:?}", named(name));
    }
    for name in ["queued-0", "queued-1"] {
        assert_eq!(named(name)["state"], "Scheduled", "{name}");
        assert_eq!(named(name)["counters"]["polls"], 0);
    }
    let ids: std::collections::HashSet<u64> =
        tasks.iter().map(|t| t["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), tasks.len(), "ids are unique");
    assert!(tasks
        .iter()
        .all(|t| t["location"]["file"] == "magpie-cli/src/tasks.rs"));
}

#[test]
fn tasks_prints_a_table() {
    magpie()
        .args(["tasks", "--workers", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("live tasks on 1 workers"))
        .stdout(predicate::str::contains("timer-2"))
        .stdout(predicate::str::contains("running (0)"))
        .stdout(predicate::str::contains("scheduled"));
}
