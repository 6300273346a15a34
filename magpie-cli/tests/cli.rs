//! The `magpie` command, run as a user would.

use std::process::Command;

fn magpie() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magpie"));
    cmd.env("MAGPIE_WORKER_THREADS", "2");
    cmd
}

#[test]
fn demo_json_reports_every_workload_and_worker() {
    let out = magpie()
        .args(["demo", "--fib", "15", "--sort", "20000", "--json"])
        .output()
        .expect("run magpie");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(json["workers"], 2);
    let workloads = json["workloads"].as_array().expect("workloads");
    assert_eq!(workloads.len(), 4);
    assert_eq!(workloads[0]["result"], "610"); // fib(15)
    assert_eq!(workloads[2]["result"], "sorted");
    assert_eq!(workloads[3]["result"], "verified");
    let stats = json["stats"].as_array().expect("stats");
    assert_eq!(stats.len(), 2);
    let jobs: u64 = stats
        .iter()
        .map(|w| w["jobs_executed"].as_u64().unwrap())
        .sum();
    // The scope alone queues 256 spawns.
    assert!(jobs >= 256, "{jobs} jobs");
}

#[test]
fn demo_table_shows_each_worker() {
    let out = magpie()
        .args(["demo", "--fib", "12", "--sort", "5000"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fib(12)"), "{text}");
    assert!(text.contains("share of jobs"), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("1 ")),
        "{text}"
    );
}

#[test]
fn bad_arguments_exit_with_status_2_and_a_message() {
    for args in [
        vec!["demo", "--fib", "0"],
        vec!["demo", "--sort", "x"],
        vec!["frobnicate"],
    ] {
        let out = magpie().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?} printed no message");
    }
}

#[test]
fn every_subcommand_has_help() {
    for args in [vec!["--help"], vec!["demo", "--help"]] {
        let out = magpie().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}
