//! Stall detection (issue 15, parts 3 and 4): the stall monitor reports a unit of work that
//! runs past the threshold exactly once, with the task's identity; counts it; moves the work
//! queued behind it to the other workers, also when they are busy; sleeps while the pool is
//! idle; survives a panicking hook; and does not exist when detection is off.
//!
//! Every wait here is for an event (a channel message, a count), with a long deadline that
//! only turns a hang into a failure; no assertion depends on how long anything took.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use common::{eventually, DEADLINE};
use magpie::{Runtime, StallInfo};

/// The threshold of these tests: small, so that the tests are quick.
const THRESHOLD: Duration = Duration::from_millis(20);

/// A runtime of `workers` workers whose stall reports go to the returned channel.
fn watched(workers: usize) -> (Runtime, mpsc::Receiver<StallInfo>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let rt = Runtime::builder()
        .worker_threads(workers)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.clone());
        })
        .build()
        .unwrap();
    (rt, rx)
}

fn total_stalls(rt: &Runtime) -> u64 {
    rt.stats().workers.iter().map(|w| w.stalls).sum()
}

#[test]
fn a_stall_is_reported_once_with_the_tasks_identity() {
    let (rt, reports) = watched(2);
    let (release, wait) = mpsc::channel::<()>();
    let blocker = magpie::task::Builder::new()
        .name("blocker")
        .submit_on(move || wait.recv_timeout(DEADLINE).unwrap(), &rt);
    let line = line!() - 1;
    let info = reports.recv_timeout(DEADLINE).expect("no stall report");
    assert_eq!(info.task(), Some(blocker.id()));
    assert_eq!(info.name(), Some("blocker"));
    let location = info.location().expect("a task has a location");
    assert_eq!((location.file.as_str(), location.line), (file!(), line));
    assert!(info.elapsed() >= THRESHOLD, "{info:?}");
    assert!(info.worker() < 2);
    // Several more samples see the same stall: none reports it again.
    let_the_monitor_sample(&rt, 5);
    release.send(()).unwrap();
    blocker.join().unwrap();
    let stats = rt.stats();
    let worker = &stats.workers[info.worker()];
    assert_eq!(worker.stalls, 1);
    assert_eq!(total_stalls(&rt), 1);
    assert!(worker.longest_stall_ns >= THRESHOLD.as_nanos() as u64);
    assert!(reports.try_recv().is_err(), "a second report");
}

#[test]
fn a_stalled_job_is_reported_without_identity() {
    let (rt, reports) = watched(2);
    let (release, wait) = mpsc::channel::<()>();
    let rt = Arc::new(rt);
    let installer = {
        let rt = rt.clone();
        std::thread::spawn(move || rt.install(move || wait.recv_timeout(DEADLINE).unwrap()))
    };
    let info = reports.recv_timeout(DEADLINE).expect("no stall report");
    assert_eq!(
        (info.task(), info.name(), info.location()),
        (None, None, None)
    );
    assert!(info.to_string().contains("a job"), "{info}");
    release.send(()).unwrap();
    installer.join().unwrap();
}

/// Where the blocker queues the tasks that must run while it blocks.
#[derive(Debug, Clone, Copy)]
enum Queue {
    /// One spawn inside the blocker's poll: its LIFO slot.
    Lifo,
    /// Four spawns: three displaced to the ring, one in the LIFO slot.
    Ring,
    /// Three `submit_to` naming the blocked worker: its mailbox.
    Mailbox,
}

/// A stalled worker's queued tasks all run before the stall ends, with `others` other
/// workers, idle or (`busy`) each running a task that yields until the end of the test, so
/// that it never searches and never steals: only the monitor's hand-off to the inject queue
/// (which busy workers pull at maintenance) reaches them then.
fn queued_work_runs_during_a_stall(queue: Queue, others: usize, busy: bool) {
    let what = format!("{queue:?}, {others} other workers, busy: {busy}");
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(1 + others)
            .stall_threshold(THRESHOLD)
            .on_stall(|_| {})
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Where each spinner was polled last.
    let spinning_on: Arc<Vec<AtomicUsize>> =
        Arc::new((0..others).map(|_| AtomicUsize::new(usize::MAX)).collect());
    let mut spinners = Vec::new();
    if busy {
        for worker in 1..=others {
            let stop = stop.clone();
            let spinning_on = spinning_on.clone();
            // Spawned inside a poll on `worker`: it starts in that worker's LIFO slot.
            let spinner = rt
                .submit_to(worker, move || {
                    magpie::spawn(async move {
                        while !stop.load(SeqCst) {
                            let here = magpie::current_worker_index().unwrap();
                            spinning_on[worker - 1].store(here, SeqCst);
                            magpie::task::yield_now().await;
                        }
                    })
                })
                .unwrap()
                .join()
                .unwrap();
            spinners.push(spinner);
        }
    }
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<usize>();
    let expected = match queue {
        Queue::Lifo => 1,
        Queue::Ring => 4,
        Queue::Mailbox => 3,
    };
    let workers = 1 + others;
    // Submitted to worker 0, but an idle worker may take it from the mailbox: the worker
    // that runs it is the one it blocks.
    let blocker = {
        let done_tx = done_tx.clone();
        rt.submit_to(0, move || {
            let blocked = magpie::current_worker_index().unwrap();
            if busy {
                // An idle worker may have stolen a spinner, and then another one is idle.
                // Blocked here, this worker steals no more, and the idle ones steal the
                // spinners (the monitor hands on one queued here) until every other worker
                // has one: from then on nobody searches.
                let all_but_this: Vec<usize> = (0..workers).filter(|&w| w != blocked).collect();
                let deadline = std::time::Instant::now() + DEADLINE;
                loop {
                    let mut on: Vec<usize> = spinning_on.iter().map(|w| w.load(SeqCst)).collect();
                    on.sort_unstable();
                    if on == all_but_this {
                        break;
                    }
                    assert!(
                        std::time::Instant::now() < deadline,
                        "spinners never spread: {on:?}"
                    );
                    std::thread::yield_now();
                }
            }
            if !matches!(queue, Queue::Mailbox) {
                for _ in 0..expected {
                    let done_tx = done_tx.clone();
                    drop(magpie::spawn(async move { done_tx.send(()).unwrap() }));
                }
            }
            started_tx.send(blocked).unwrap();
            // Blocks the worker until every queued task has run elsewhere.
            (0..expected)
                .filter(|_| done_rx.recv_timeout(DEADLINE).is_ok())
                .count()
        })
        .unwrap()
    };
    let blocked = started_rx.recv_timeout(DEADLINE).unwrap();
    if matches!(queue, Queue::Mailbox) {
        for _ in 0..expected {
            let done_tx = done_tx.clone();
            drop(
                rt.submit_to(blocked, move || done_tx.send(()).unwrap())
                    .unwrap(),
            );
        }
    }
    let ran = blocker.join();
    stop.store(true, SeqCst);
    for spinner in spinners {
        rt.block_on(spinner).unwrap();
    }
    assert_eq!(
        ran.unwrap(),
        expected,
        "{what}: tasks stuck behind the stall"
    );
    if busy {
        // Nobody searched, so nothing but the monitor's hand-off reached the queued tasks.
        // (With idle workers, thieves may take everything before the threshold: no stall.)
        // The hand-off comes a period before the threshold, so the blocker may be released
        // before its stall can be reported: whether one was is not asserted.
        let stats = rt.stats();
        let worker = &stats.workers[blocked];
        assert!(
            worker.stall_handoffs >= expected as u64,
            "{what}: {} handed off",
            worker.stall_handoffs
        );
    }
}

/// [`queued_work_runs_during_a_stall`] with 1 and 2 other workers, each idle and busy.
fn queued_work_runs_during_every_stall(queue: Queue) {
    for others in [1, 2] {
        for busy in [false, true] {
            queued_work_runs_during_a_stall(queue, others, busy);
        }
    }
}

#[test]
fn the_lifo_slot_of_a_stalled_worker_runs_elsewhere() {
    queued_work_runs_during_every_stall(Queue::Lifo);
}

#[test]
fn the_ring_of_a_stalled_worker_runs_elsewhere() {
    queued_work_runs_during_every_stall(Queue::Ring);
}

#[test]
fn the_mailbox_of_a_stalled_worker_runs_elsewhere() {
    queued_work_runs_during_every_stall(Queue::Mailbox);
}

#[test]
fn the_monitor_sleeps_while_the_pool_is_idle() {
    let (rt, _reports) = watched(2);
    for _ in 0..3 {
        rt.block_on(rt.spawn(async { magpie::join(|| 1, || 2) }))
            .unwrap();
        eventually("the monitor sleeps", || rt.stall_monitor_sleeping());
        let samples = rt.stats().monitor_samples;
        // Not a synchronization: time for samples to happen, if the monitor were sampling
        // (every 5 ms here); the assertion is on the count.
        std::thread::sleep(THRESHOLD * 5);
        assert_eq!(
            rt.stats().monitor_samples,
            samples,
            "the monitor sampled in an idle pool"
        );
        assert!(rt.stall_monitor_sleeping());
        // Work wakes the pool, and the pool's first wake rings the monitor.
        let (release, wait) = mpsc::channel::<()>();
        let task = rt.submit(move || wait.recv_timeout(DEADLINE).unwrap());
        eventually("the monitor samples again", || {
            rt.stats().monitor_samples > samples
        });
        release.send(()).unwrap();
        task.join().unwrap();
    }
}

#[cfg(target_os = "linux")]
fn has_thread_named(name: &str) -> bool {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("comm")).ok())
        .any(|comm| comm.trim() == name)
}

#[test]
#[cfg(target_os = "linux")]
fn without_a_threshold_there_is_no_monitor_thread() {
    let off = Runtime::builder()
        .worker_threads(2)
        .thread_name("nomon")
        .stall_threshold(None)
        .build()
        .unwrap();
    off.block_on(off.spawn(async {})).unwrap();
    assert_eq!(off.stats().monitor_samples, 0);
    assert!(!off.stall_monitor_sleeping());
    // A thread names itself once it runs: wait for the names. The monitor of a runtime
    // with one starts after its workers, so by the time the second runtime's monitor has
    // its name, the first runtime's would have had time to take its own.
    let on = Runtime::builder()
        .worker_threads(2)
        .thread_name("yesmon")
        .stall_threshold(THRESHOLD)
        .build()
        .unwrap();
    eventually("the threads have their names", || {
        has_thread_named("nomon-1") && has_thread_named("yesmon-monitor")
    });
    assert!(!has_thread_named("nomon-monitor"));
    drop(on);
    // Joined on drop (the kernel may list a joined thread for a moment longer).
    eventually("the monitor thread is gone", || {
        !has_thread_named("yesmon-monitor")
    });
}

#[test]
fn a_panicking_hook_does_not_stop_detection() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let counted = calls.clone();
    let rt = Runtime::builder()
        .worker_threads(2)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            if counted.fetch_add(1, SeqCst) == 0 {
                panic!("a hook that panics");
            }
            let _ = tx.lock().unwrap().send(info.task());
        })
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let first = rt.submit(move || wait.recv_timeout(DEADLINE).unwrap());
    eventually("the hook was called", || calls.load(SeqCst) == 1);
    release.send(()).unwrap();
    first.join().unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let second = rt.submit(move || wait.recv_timeout(DEADLINE).unwrap());
    let reported = rx
        .recv_timeout(DEADLINE)
        .expect("the second stall was not reported");
    assert_eq!(reported, Some(second.id()));
    release.send(()).unwrap();
    second.join().unwrap();
    assert_eq!(total_stalls(&rt), 2);
}

#[test]
fn a_stall_is_a_red_span_in_the_trace() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let rt = Runtime::builder()
        .worker_threads(2)
        .trace(true)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.task());
        })
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let blocker = magpie::task::Builder::new()
        .name("traced \"blocker\"")
        .submit_on(move || wait.recv_timeout(DEADLINE).unwrap(), &rt);
    rx.recv_timeout(DEADLINE).unwrap();
    release.send(()).unwrap();
    let id = blocker.id();
    blocker.join().unwrap();
    let path = std::env::temp_dir().join(format!("magpie-stall-trace-{}.json", std::process::id()));
    rt.trace_export(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let span = text
        .lines()
        .find(|line| line.contains(r#""name":"stall""#))
        .expect("no stall span in the trace");
    assert!(span.contains(r#""cname":"terrible""#), "{span}");
    assert!(span.contains(&format!(r#""task":{id}"#)), "{span}");
    assert!(span.contains(r#""name":"traced \"blocker\"""#), "{span}");
    assert!(span.contains(file!()), "{span}");
}

#[test]
fn with_every_worker_stalled_a_compensation_worker_runs_the_queue_and_retires() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_compensation_workers(1)
        .stall_threshold(THRESHOLD)
        .on_stall(|_| {})
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let (ran_tx, ran) = mpsc::channel::<Option<usize>>();
    // The only worker queues five tasks behind itself, then blocks until they have all run:
    // only a compensation worker can run them.
    let blocker = rt.spawn(async move {
        for _ in 0..5 {
            let ran_tx = ran_tx.clone();
            drop(magpie::spawn(async move {
                ran_tx.send(magpie::current_worker_index()).unwrap();
            }));
        }
        wait.recv_timeout(DEADLINE)
            .expect("the queued tasks never ran");
    });
    for _ in 0..5 {
        let worker = ran.recv_timeout(DEADLINE).expect("a queued task never ran");
        assert_eq!(worker, Some(1), "ran on the compensation slot");
    }
    assert!(rt.stats().compensation_workers_started >= 1);
    release.send(()).unwrap();
    rt.block_on(blocker).unwrap();
    // The stall is over: the monitor retires the compensation worker at its next sample.
    eventually("the compensation worker retired", || {
        rt.stats().compensation_workers_active == 0
    });
    // And the pool runs on: its slot is off (a search it began before the retirement may
    // still take one more task, so where the next task runs is not asserted).
    assert!(!rt.stats().workers[1].active);
    assert_eq!(rt.block_on(rt.spawn(async { 7 })).unwrap(), 7);
}

/// Waits until the monitor of `rt` has taken `n` more samples: more than a threshold has
/// passed in whatever the workers were doing (a sample period is a quarter of it).
fn let_the_monitor_sample(rt: &Runtime, n: u64) {
    let samples = rt.stats().monitor_samples;
    eventually("the monitor sampled more", || {
        rt.stats().monitor_samples >= samples + n
    });
}

#[test]
fn a_poll_inside_block_in_place_is_not_a_stall() {
    let (rt, reports) = watched(2);
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, wait) = mpsc::channel::<()>();
    let task = rt.spawn(async move {
        magpie::task::block_in_place(|| {
            entered_tx.send(()).unwrap();
            wait.recv_timeout(DEADLINE).unwrap();
        });
    });
    entered.recv_timeout(DEADLINE).unwrap();
    // Eight periods: two thresholds inside `block_in_place`.
    let_the_monitor_sample(&rt, 8);
    release.send(()).unwrap();
    rt.block_on(task).unwrap();
    assert_eq!(total_stalls(&rt), 0);
    assert!(reports.try_recv().is_err(), "a report");
}

#[test]
fn a_poll_parked_in_join_for_a_stolen_half_is_not_a_stall() {
    let (rt, reports) = watched(2);
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let stolen = Arc::new(AtomicBool::new(false));
    let task = rt.spawn({
        let stolen = stolen.clone();
        async move {
            magpie::join(
                // The first half waits until the second is stolen, so that the join's
                // worker then waits for it, parked.
                || eventually("the second half was stolen", || stolen.load(SeqCst)),
                || {
                    stolen.store(true, SeqCst);
                    wait.lock().unwrap().recv_timeout(DEADLINE).unwrap();
                },
            );
        }
    });
    // The thief's job is a stall, and reported as one: a job, with no task.
    let info = reports.recv_timeout(DEADLINE).expect("no stall report");
    assert_eq!(info.task(), None, "{info:?}");
    // Eight periods more, the task's worker parked in the join all along: not a stall.
    let_the_monitor_sample(&rt, 8);
    release.send(()).unwrap();
    rt.block_on(task).unwrap();
    assert_eq!(total_stalls(&rt), 1);
    assert!(reports.try_recv().is_err(), "a second report: {reports:?}");
}

/// Timers keep firing while a worker stalls: a task sleeping on a timer releases the
/// blocked one, so the stall ends only if the timer fired during it. Each worker count
/// leaves one or two workers free (parked, so one of them drives the timers).
#[test]
fn timers_fire_while_a_worker_is_stalled() {
    for workers in [2, 3] {
        let (rt, reports) = watched(workers);
        let (release, wait) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let blocker = rt.submit(move || {
            started_tx.send(()).unwrap();
            wait.recv_timeout(DEADLINE).is_ok()
        });
        started.recv_timeout(DEADLINE).unwrap();
        // The blocker is running: wait for the monitor to call it a stall, so that the
        // timer below is set and fires while one is under way.
        let info = reports.recv_timeout(DEADLINE).expect("no stall report");
        let sleeper = rt.spawn(async move {
            magpie::time::sleep(THRESHOLD).await;
            release.send(()).unwrap();
        });
        assert!(
            blocker.join().unwrap(),
            "{workers} workers: the timer never fired during the stall on worker {}",
            info.worker()
        );
        rt.block_on(sleeper).unwrap();
    }
}
