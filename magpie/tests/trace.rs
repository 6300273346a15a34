//! Event tracing: the Chrome trace export, and nothing recorded when tracing is off.

use std::sync::{Arc, Barrier};

use magpie::Runtime;

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("magpie-test-{}-{name}.json", std::process::id()))
}

/// Makes every one of `workers` workers poll a task and run a job.
fn exercise_every_worker(rt: &Runtime, workers: usize) {
    let barrier = Arc::new(Barrier::new(workers));
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let barrier = barrier.clone();
            rt.submit(move || {
                barrier.wait();
                magpie::join(|| (), || ())
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    rt.install(|| magpie::join(|| (), || ()));
}

#[test]
fn exported_json_parses_and_has_events_from_every_worker() {
    let rt = Runtime::builder()
        .worker_threads(3)
        .trace(true)
        .build()
        .unwrap();
    exercise_every_worker(&rt, 3);
    rt.wait_idle();
    assert!(rt.stats().trace_events > 0);
    let path = temp_path("every-worker");
    rt.trace_export(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    for worker in 0..3u64 {
        let polls = events
            .iter()
            .filter(|e| e["tid"] == worker && e["name"] == "poll" && e["ph"] == "X")
            .count();
        assert!(polls >= 1, "worker {worker} polled no task: {text}");
        assert!(
            events
                .iter()
                .any(|e| e["tid"] == worker && e["name"] == "thread_name"),
            "worker {worker} has no track name"
        );
    }
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert!(e["ts"].as_f64().unwrap() >= 0.0);
        assert!(e["dur"].as_f64().unwrap() >= 0.0);
    }
    assert!(
        events.iter().any(|e| e["name"] == "job"),
        "no job span: {text}"
    );
    assert_eq!(json["otherData"]["events_lost"], 0);
}

#[test]
fn steals_and_parks_are_traced_with_their_arguments() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .trace(true)
        // No stall monitor: it would hand the held worker's mailbox to the inject queue,
        // where worker 1 pulls the closures instead of stealing them.
        .stall_threshold(None)
        .build()
        .unwrap();
    // A worker held by a task while tasks wait on its mailbox: the other steals them. The
    // holder is submitted to worker 0, but worker 1 may take it from that mailbox first:
    // the held worker is whichever runs it.
    let started = Arc::new(Barrier::new(2));
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (index_tx, index_rx) = std::sync::mpsc::channel();
    let blocker = {
        let started = started.clone();
        rt.submit_to(0, move || {
            index_tx
                .send(magpie::current_worker_index().unwrap())
                .unwrap();
            started.wait();
            let _ = held.recv();
        })
        .unwrap()
    };
    started.wait();
    let victim = index_rx.recv().unwrap();
    let thief = 1 - victim;
    let tasks: Vec<_> = (0..20)
        .map(|i| rt.submit_to(victim, move || i).unwrap())
        .collect();
    for t in tasks {
        t.join().unwrap();
    }
    drop(release);
    blocker.join().unwrap();
    let path = temp_path("steals");
    rt.trace_export(&path).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let steal = events
        .iter()
        .find(|e| e["name"] == "steal" && e["tid"] == thief)
        .expect("the other worker stole");
    assert_eq!(steal["args"]["victim"], victim);
    assert!(steal["args"]["count"].as_u64().unwrap() >= 1);
    assert_eq!(steal["args"]["kind"], "tasks");
}

#[test]
fn a_join_waiting_for_its_stolen_half_is_a_waiting_span() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    let rt = Runtime::builder()
        .worker_threads(2)
        .trace(true)
        .build()
        .unwrap();
    let path = temp_path("wait");
    let read = |path: &std::path::Path| -> Vec<serde_json::Value> {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        json["traceEvents"].as_array().unwrap().clone()
    };
    let owner = AtomicUsize::new(usize::MAX);
    let b_started = AtomicBool::new(false);
    let thief = rt.install(|| {
        magpie::join(
            || {
                owner.store(magpie::current_worker_index().unwrap(), SeqCst);
                // Hold this worker until the other one has taken `b`: `b` is stolen.
                while !b_started.load(SeqCst) {
                    std::thread::yield_now();
                }
            },
            || {
                b_started.store(true, SeqCst);
                // Run until the owner's wait shows in the trace (an export closes the
                // spans still open at its time), so that the owner must wait for `b`.
                let owner = loop {
                    let owner = owner.load(SeqCst);
                    if owner != usize::MAX {
                        break owner as u64;
                    }
                    std::thread::yield_now();
                };
                let scratch = temp_path("wait-scratch");
                // A bound that only a broken trace reaches: the assertions below then fail
                // instead of the test hanging.
                let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while std::time::Instant::now() < give_up {
                    rt.trace_export(&scratch).unwrap();
                    if read(&scratch)
                        .iter()
                        .any(|e| e["cat"] == "wait" && e["tid"] == owner)
                    {
                        break;
                    }
                    std::thread::yield_now();
                }
                std::fs::remove_file(&scratch).unwrap();
                magpie::current_worker_index().unwrap() as u64
            },
        )
        .1
    });
    let owner = owner.load(SeqCst) as u64;
    assert_ne!(owner, thief, "b ran on the worker that forked it");
    rt.trace_export(&path).unwrap();
    let events = read(&path);
    std::fs::remove_file(&path).unwrap();
    let span = |e: &serde_json::Value| {
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    let waits: Vec<_> = events
        .iter()
        .filter(|e| e["cat"] == "wait")
        .map(|e| (e["tid"].as_u64().unwrap(), e["name"].clone(), span(e)))
        .collect();
    assert_eq!(waits.len(), 1, "one wait, the owner's: {waits:?}");
    let (tid, name, (from, to)) = waits[0].clone();
    assert_eq!((tid, name.as_str()), (owner, Some("waiting")));
    // The wait lies inside the owner's job (the `install`) and overlaps the thief's run
    // of `b`.
    let jobs = |tid: u64| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| e["cat"] == "job" && e["tid"] == tid)
            .map(span)
            .collect()
    };
    assert!(
        jobs(owner).iter().any(|&(s, e)| s <= from && to <= e),
        "no job of the owner holds its wait {from}..{to}: {:?}",
        jobs(owner)
    );
    assert!(
        jobs(thief).iter().any(|&(s, e)| s < to && from < e),
        "the thief's run of b does not overlap the wait {from}..{to}: {:?}",
        jobs(thief)
    );
}

#[test]
fn a_small_ring_keeps_the_newest_events_and_reports_the_lost() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .trace(true)
        .trace_capacity(64)
        .build()
        .unwrap();
    for _ in 0..200 {
        rt.submit(|| ()).join().unwrap();
    }
    let path = temp_path("small-ring");
    rt.trace_export(&path).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(json["otherData"]["events_lost"].as_u64().unwrap() > 0);
    assert!(rt.stats().trace_events > 64);
}

#[test]
fn with_tracing_off_nothing_is_recorded() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .trace(false)
        .build()
        .unwrap();
    exercise_every_worker(&rt, 2);
    assert_eq!(rt.stats().trace_events, 0);
    let err = rt.trace_export(temp_path("off")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(err.to_string().contains("Builder::trace"), "{err}");
    assert!(!temp_path("off").exists());
}

#[test]
fn an_unwritable_path_is_an_error() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .trace(true)
        .build()
        .unwrap();
    let err = rt
        .trace_export("/nonexistent-magpie-dir/trace.json")
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}
