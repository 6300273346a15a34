//! The `magpie` command given bad input (issue 18, items 6–10): a hostile or broken trace
//! file, an impossible `MAGPIE_WORKER_THREADS`, absurd worker counts. Each must end in a clean
//! `magpie: …` message and an exit status, never a panic, a hang or an abort.
//!
//! No test depends on timing: only exit statuses, messages and files are checked.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn magpie() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magpie"));
    cmd.env("MAGPIE_WORKER_THREADS", "2");
    cmd
}

/// A fresh folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch folder");
    dir
}

/// Writes `json` as `DIR/input.json` and runs `magpie trace --input` on it, drawing into
/// `DIR/out`.
fn trace_input(dir: &Path, json: &str) -> assert_cmd::assert::Assert {
    let input = dir.join("input.json");
    std::fs::write(&input, json).expect("write the input trace");
    magpie()
        .args(["trace", "--input"])
        .arg(&input)
        .arg("--out")
        .arg(dir.join("out"))
        .assert()
}

#[test]
fn trace_input_with_a_steal_by_an_unseen_thread_draws_it() {
    // Issue 18 item 6: tid 7 appears only as the thief of a steal; it had no lane and the
    // drawing panicked ("no entry found for key").
    let dir = scratch("bad_input_unseen_thief");
    trace_input(
        &dir,
        r#"{"traceEvents":[
 {"name":"poll","cat":"task","ph":"X","tid":0,"ts":1.0,"dur":3.0},
 {"name":"steal","cat":"steal","ph":"i","tid":7,"ts":2.0,"args":{"victim":0,"count":1}}
]}"#,
    )
    .success()
    .stdout(predicate::str::contains("on 2 workers"));
    let svg = std::fs::read_to_string(dir.join("out/timeline.svg")).unwrap();
    assert!(svg.contains("worker 7"));
}

#[test]
fn trace_input_with_absurd_times_is_a_usage_error() {
    // Issue 18 item 7: ts and dur of 1e308 made the time axis infinite; drawing it allocated
    // without end until the process aborted.
    let dir = scratch("bad_input_absurd_times");
    for (json, says) in [
        (
            r#"{"traceEvents":[{"cat":"task","ph":"X","tid":0,"ts":1e308,"dur":1e308}]}"#,
            "event 0 has \"ts\": 1e308, out of range",
        ),
        (
            r#"{"traceEvents":[{"cat":"task","ph":"X","tid":0,"ts":1,"dur":-2.5}]}"#,
            "event 0 has \"dur\": -2.5e0, out of range",
        ),
        (
            r#"{"traceEvents":[{"cat":"task","ph":"X","tid":0,"ts":-1e400}]}"#,
            "not a Chrome trace",
        ),
        (
            r#"{"traceEvents":[{"cat":"task","ph":"X","tid":0,"ts":"soon"}]}"#,
            "not a Chrome trace",
        ),
    ] {
        trace_input(&dir, json)
            .code(2)
            .stderr(predicate::str::starts_with("magpie: "))
            .stderr(predicate::str::contains(says));
        assert!(!dir.join("out/timeline.svg").exists(), "{json}");
    }
}

#[test]
fn trace_input_that_cannot_be_read_is_a_usage_error() {
    let dir = scratch("bad_input_missing");
    magpie()
        .args(["trace", "--input"])
        .arg(dir.join("no-such-trace.json"))
        .arg("--out")
        .arg(dir.join("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::starts_with("magpie: cannot read "));
}

#[test]
fn trace_input_with_control_characters_in_names_draws_well_formed_xml() {
    // Issue 18 item 9: a thread name holding U+0001 went into the SVG as is, and XML parsers
    // rejected the file.
    let dir = scratch("bad_input_control_characters");
    trace_input(
        &dir,
        r#"{"traceEvents":[
 {"name":"thread_name","ph":"M","tid":0,"args":{"name":"bad\u0001name\u001b[1m <&>\"'"}},
 {"name":"thread_name","ph":"M","tid":1,"args":{"name":"tab\there\r\nline"}},
 {"name":"poll","cat":"task","ph":"X","tid":0,"ts":1.0,"dur":3.0},
 {"name":"steal","cat":"steal","ph":"i","tid":1,"ts":2.0,"args":{"victim":0,"count":1}}
]}"#,
    )
    .success();
    let svg = std::fs::read_to_string(dir.join("out/timeline.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(
        texts.contains(&"bad\u{fffd}name\u{fffd}[1m <&>\"'"),
        "{texts:?}"
    );
    assert!(texts.contains(&"tab\there\r\nline"), "{texts:?}");
}

#[test]
fn every_subcommand_refuses_too_many_workers_from_the_environment() {
    // Issue 18 item 8: `demo` panicked inside `magpie::default_runtime`, `scale` ran every
    // power of two up to 65,536 workers before it failed, `compare` printed its header first.
    let dir = scratch("bad_input_env_workers");
    let out = dir.to_str().unwrap();
    for args in [
        vec!["demo", "--tasks", "2"],
        vec!["compare", "--tasks", "2", "--repeat", "1"],
        vec!["trace", "--tasks", "2", "--out", out],
        vec!["scale", "--tasks", "2"],
    ] {
        for value in ["70000", " 99999999999999999999999 "] {
            magpie()
                .env("MAGPIE_WORKER_THREADS", value)
                .args(&args)
                .assert()
                .code(1)
                .stdout(predicate::str::is_empty())
                .stderr(predicate::str::starts_with(format!(
                    "magpie: cannot start the runtime: MAGPIE_WORKER_THREADS is {}; at most \
                     65536 worker threads are supported\n",
                    value.trim()
                )));
        }
    }
}

#[test]
fn a_worker_count_from_the_environment_that_is_no_count_means_one_per_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for value in ["0", "-1", "abc", ""] {
        for args in [
            vec![
                "demo",
                "--tasks",
                "2",
                "--heavy-us",
                "10",
                "--light-us",
                "10",
            ],
            vec![
                "compare",
                "--tasks",
                "2",
                "--repeat",
                "1",
                "--pattern",
                "uniform",
            ],
        ] {
            let out = magpie()
                .env("MAGPIE_WORKER_THREADS", value)
                .args(&args)
                .arg("--json")
                .output()
                .expect("run magpie");
            assert!(out.status.success(), "{value:?} {args:?}: {out:?}");
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["workers"], cpus, "{value:?} {args:?}");
        }
    }
}

#[test]
fn trace_refuses_more_workers_than_it_can_trace() {
    // Issue 18 item 10: `--workers 65536` asked for 64 GiB of trace rings up front, and the
    // process aborted on allocation where memory was limited.
    let dir = scratch("bad_input_traced_workers");
    let out = dir.join("out");
    for (workers, env, says) in [
        (Some("65536"), "2", "--workers 65536"),
        (Some("4097"), "2", "--workers 4097"),
        (None, "5000", "MAGPIE_WORKER_THREADS=5000"),
    ] {
        let mut cmd = magpie();
        cmd.env("MAGPIE_WORKER_THREADS", env)
            .args(["trace", "--tasks", "1", "--out"])
            .arg(&out);
        if let Some(workers) = workers {
            cmd.args(["--workers", workers]);
        }
        cmd.assert()
            .code(2)
            .stderr(predicate::str::starts_with(format!(
                "magpie: {says}: magpie trace records at most 4096 workers"
            )));
        assert!(!out.exists(), "{says}: the output folder was created");
    }
}
