//! Adversarial tests of the observability surface: statistics, the trace, stall detection,
//! the task hooks and the live-task dump (task identity included).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use common::{assert_monotonic, spin_for, DEADLINE};
use magpie::task::TaskState;
use magpie::{Runtime, StallInfo, Stats};

/// The stall threshold of the stall tests.
const THRESHOLD: Duration = Duration::from_millis(20);

/// How long a unit that is meant to stall runs: many thresholds (the stimulus).
const STALL_FOR: Duration = Duration::from_millis(600);

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "magpie-insight-adversarial-{}-{name}.json",
        std::process::id()
    ))
}

/// Per worker: polls never fewer than finished tasks, busy and idle time adding up.
fn assert_consistent(stats: &Stats) {
    for (i, w) in stats.workers.iter().enumerate() {
        assert!(
            w.tasks_polled >= w.tasks_executed,
            "worker {i}: {} tasks finished but only {} polls counted (WorkerStats::tasks_polled \
             says it is never below tasks_executed)",
            w.tasks_executed,
            w.tasks_polled
        );
        assert!((0.0..=1.0).contains(&w.utilization()), "worker {i}");
    }
    assert!((0.0..=1.0).contains(&stats.steal_rate()));
}

// ---------------------------------------------------------------------------------------
// Task identity inside a task's `join` wait.
// ---------------------------------------------------------------------------------------

/// The task of [`task_waiting_in_join`], the receiver of (its worker, the thief's), and the
/// release of the stolen half.
type WaitingTask = (
    magpie::JoinHandle<magpie::task::Id>,
    mpsc::Receiver<(Option<usize>, Option<usize>)>,
    mpsc::Sender<()>,
);

/// Sets up a task whose `join` waits for a stolen second half on its own worker. Returns
/// the task's handle, a receiver that yields (the task's worker, the worker of the stolen
/// half) once the task's worker is inside the wait, and the release of the stolen half.
fn task_waiting_in_join(rt: &Runtime) -> WaitingTask {
    let (started_tx, started_rx) = mpsc::channel::<Option<usize>>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel();
    let task = rt.spawn(async move {
        let me = magpie::task::id();
        let home = magpie::current_worker_index();
        let release_rx = Mutex::new(release_rx);
        magpie::join(
            move || {
                // The second half has been stolen and runs on the other worker.
                let thief = started_rx
                    .recv_timeout(DEADLINE)
                    .expect("the second half of the join was never stolen");
                ready_tx.send((home, thief)).unwrap();
            },
            move || {
                started_tx.send(magpie::current_worker_index()).unwrap();
                release_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(DEADLINE)
                    .expect("never released");
            },
        );
        me
    });
    (task, ready_rx, release_tx)
}

/// `task::try_id` says `None` outside a task. A worker whose task waits inside `join` for a
/// stolen half runs other jobs meanwhile, an `install` from outside the pool among them; that
/// closure is no part of the task, and must not read as running inside it.
#[test]
fn an_unrelated_install_run_inside_a_tasks_join_wait_has_no_task_id() {
    let rt = common::runtime(2);
    let (task, ready, release) = task_waiting_in_join(&rt);
    let (home, thief) = ready.recv_timeout(DEADLINE).expect("the task never waited");
    assert_ne!(home, thief);
    // The other worker is held by the stolen half: only the waiting worker can run this.
    let (id, worker) = rt.install(|| (magpie::task::try_id(), magpie::current_worker_index()));
    release.send(()).unwrap();
    let task_id = task.join().unwrap();
    assert_eq!(worker, home, "the install ran on the waiting worker");
    assert_eq!(
        id, None,
        "an install closure from outside the pool saw task {task_id:?}'s id as its own \
         (task::try_id inside an unrelated job)"
    );
}

/// The same unrelated job, running long inside the task's `join` wait, is a stall of a *job*:
/// the report must not blame the task that merely waits there.
#[test]
fn a_long_unrelated_job_inside_a_tasks_join_wait_is_reported_as_a_job() {
    let (tx, rx) = mpsc::channel::<StallInfo>();
    let tx = Mutex::new(tx);
    let rt = Runtime::builder()
        .worker_threads(2)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.clone());
        })
        .build()
        .unwrap();
    let (task, ready, release) = task_waiting_in_join(&rt);
    let (home, _thief) = ready.recv_timeout(DEADLINE).expect("the task never waited");
    let home = home.unwrap();
    let ran_on = rt.install(|| {
        spin_for(STALL_FOR);
        magpie::current_worker_index()
    });
    release.send(()).unwrap();
    let task_id = task.join().unwrap();
    assert_eq!(ran_on, Some(home));
    let on_home: Vec<StallInfo> = rx.try_iter().filter(|i| i.worker() == home).collect();
    assert!(
        !on_home.is_empty(),
        "a {STALL_FOR:?} job on worker {home} was not reported as a stall"
    );
    for info in &on_home {
        assert_eq!(
            info.task(),
            None,
            "the stall of an install closure was blamed on task {task_id:?}, which only \
             waited in `join` on that worker: {info}"
        );
    }
}

/// `try_id` where the documentation promises an answer: inside `block_in_place` and inside
/// `join` halves run on the task's own worker it is the task's; a half stolen by another
/// worker (not running a task) and plain threads see `None`.
#[test]
fn try_id_in_block_in_place_and_join_halves() {
    assert_eq!(magpie::task::try_id(), None);
    let rt = common::runtime(2);
    let handle = rt.spawn(async {
        let me = magpie::task::id();
        let home = magpie::current_worker_index();
        let in_block = magpie::task::block_in_place(magpie::task::try_id);
        let nested = magpie::task::block_in_place(|| {
            magpie::task::block_in_place(|| {
                let (inline, _maybe_stolen) =
                    magpie::join(magpie::task::try_id, magpie::task::try_id);
                (magpie::task::try_id(), inline)
            })
        });
        let mut halves = Vec::new();
        for _ in 0..200 {
            let (a, b) = magpie::join(
                || (magpie::task::try_id(), magpie::current_worker_index()),
                || (magpie::task::try_id(), magpie::current_worker_index()),
            );
            halves.push(a);
            halves.push(b);
        }
        (me, home, in_block, nested, halves)
    });
    let id = handle.id();
    let (me, home, in_block, nested, halves) = handle.join().unwrap();
    assert_eq!(me, id);
    assert_eq!(in_block, Some(id));
    assert_eq!(nested, (Some(id), Some(id)));
    for (seen, worker) in halves {
        if worker == home {
            assert_eq!(seen, Some(id), "a join half on the task's own worker");
        } else {
            assert_eq!(seen, None, "a join half stolen by worker {worker:?}");
        }
    }
    assert_eq!(magpie::task::try_id(), None);
    let outside = std::panic::catch_unwind(|| magpie::task::id());
    assert!(outside.is_err(), "task::id() outside a task must panic");
}

// ---------------------------------------------------------------------------------------
// Stalls.
// ---------------------------------------------------------------------------------------

/// A compensation worker runs what the stalled ordinary workers left queued; when one of
/// those tasks stalls it too, that is a stall like any other: counted in its
/// `WorkerStats::stalls` and handed to the `on_stall` hook.
#[test]
fn a_stall_on_a_compensation_worker_is_reported() {
    let (tx, rx) = mpsc::channel::<StallInfo>();
    let tx = Mutex::new(tx);
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_compensation_workers(1)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.clone());
        })
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let blocker = rt.submit(move || wait.recv_timeout(DEADLINE).expect("never released"));
    let first = rx
        .recv_timeout(DEADLINE)
        .expect("the first stall was not reported");
    assert_eq!((first.worker(), first.task()), (0, Some(blocker.id())));
    // Queued while worker 0 is stalled: a compensation worker starts and runs it, and it
    // stalls that worker in turn.
    let second = rt.submit(|| {
        spin_for(STALL_FOR);
        magpie::current_worker_index()
    });
    let second_id = second.id();
    let ran_on = second.join().unwrap();
    assert_eq!(
        ran_on,
        Some(1),
        "the second task ran on the compensation worker"
    );
    let stats = rt.stats();
    let reports: Vec<(usize, Option<magpie::task::Id>)> =
        rx.try_iter().map(|i| (i.worker(), i.task())).collect();
    release.send(()).unwrap();
    blocker.join().unwrap();
    assert!(
        reports.contains(&(1, Some(second_id))),
        "a {STALL_FOR:?} poll on compensation worker 1 was not reported (reports: \
         {reports:?}; workers[1].stalls = {})",
        stats.workers[1].stalls
    );
    assert!(stats.workers[1].stalls >= 1);
}

/// An `on_stall` hook that does everything a hook could: reads `stats()` and `tasks()`,
/// spawns a task and waits for it with `block_on`, changes the active workers, and takes a
/// long time. The stalled task shows as running on the reported worker; the next stall is
/// still reported; dropping the runtime afterwards returns.
#[test]
fn a_busy_stall_hook_sees_the_stalled_task_and_the_next_stall_is_reported() {
    let slot: Arc<OnceLock<Weak<Runtime>>> = Arc::new(OnceLock::new());
    type Seen = (StallInfo, Option<TaskState>, u64, i32);
    let (tx, rx) = mpsc::channel::<Seen>();
    let tx = Mutex::new(tx);
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .stall_threshold(THRESHOLD)
            .on_stall({
                let slot = slot.clone();
                move |info| {
                    let Some(rt) = slot.get().and_then(Weak::upgrade) else {
                        return;
                    };
                    let state = info.task().and_then(|id| {
                        rt.tasks().into_iter().find(|t| t.id == id).map(|t| t.state)
                    });
                    let stats = rt.stats();
                    let stalls: u64 = stats.workers.iter().map(|w| w.stalls).sum();
                    // The other worker is free: a task spawned here runs.
                    let answer = rt.block_on(rt.spawn(async { 6 * 7 })).unwrap();
                    rt.set_active_workers(2).unwrap();
                    // A slow hook: the stall monitor is held up meanwhile.
                    spin_for(THRESHOLD * 3);
                    // Not the last handle: dropped before the test can look.
                    drop(rt);
                    let _ = tx
                        .lock()
                        .unwrap()
                        .send((info.clone(), state, stalls, answer));
                }
            })
            .build()
            .unwrap(),
    );
    slot.set(Arc::downgrade(&rt)).unwrap();
    for round in 0..2 {
        let (release, wait) = mpsc::channel::<()>();
        let blocker = magpie::task::Builder::new()
            .name(&format!("blocker {round}"))
            .submit_on(
                move || wait.recv_timeout(DEADLINE).expect("never released"),
                &rt,
            );
        let (info, state, stalls, answer) = loop {
            let seen = rx
                .recv_timeout(DEADLINE)
                .unwrap_or_else(|_| panic!("the stall of round {round} was not reported"));
            if seen.0.task() == Some(blocker.id()) {
                break seen;
            }
        };
        release.send(()).unwrap();
        blocker.join().unwrap();
        assert_eq!(info.name(), Some(format!("blocker {round}").as_str()));
        assert_eq!(
            state,
            Some(TaskState::Running {
                worker: info.worker()
            }),
            "round {round}: the stalled task as the hook's dump shows it"
        );
        assert!(stalls > round as u64, "round {round}: stats() in the hook");
        assert_eq!(answer, 42);
    }
    let rt = Arc::try_unwrap(rt).expect("the hook kept the runtime alive");
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(DEADLINE)
        .expect("dropping the runtime after busy stall hooks hung");
}

/// A job (an `install` closure) whose `join` waits, parked, for a long second half that
/// another worker stole: only the thief's worker stalls; the waiting one is merely parked.
#[test]
fn a_job_parked_in_join_for_a_long_stolen_half_is_not_a_stall() {
    let (tx, rx) = mpsc::channel::<StallInfo>();
    let tx = Mutex::new(tx);
    let rt = Runtime::builder()
        .worker_threads(2)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.clone());
        })
        .build()
        .unwrap();
    for _ in 0..2 {
        let (started_tx, started_rx) = mpsc::channel::<Option<usize>>();
        let (home, thief) = rt.install(move || {
            let home = magpie::current_worker_index();
            let (thief, ()) = magpie::join(
                move || {
                    started_rx
                        .recv_timeout(DEADLINE)
                        .expect("the second half was never stolen")
                },
                move || {
                    started_tx.send(magpie::current_worker_index()).unwrap();
                    spin_for(STALL_FOR);
                },
            );
            (home, thief)
        });
        let (home, thief) = (home.unwrap(), thief.unwrap());
        assert_ne!(home, thief);
        let reports: Vec<StallInfo> = rx.try_iter().collect();
        assert!(
            reports.iter().any(|i| i.worker() == thief),
            "the thief's {STALL_FOR:?} half was not reported: {reports:?}"
        );
        assert!(
            reports.iter().all(|i| i.worker() != home),
            "worker {home}, parked in `join`, was reported stalled: {reports:?}"
        );
    }
}

/// A payload whose destructor panics.
struct Bomb(&'static str);

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}: the payload's destructor panics too", self.0);
        }
    }
}

/// Every hook panics on every call, with a payload whose destructor panics as well. The
/// runtime stays usable: tasks run and finish, `wait_idle` returns, the dump and the
/// statistics agree, and each stall is still reported (the hook is called again).
#[test]
fn hooks_that_always_panic_with_bombs_leave_the_runtime_usable() {
    let spawned = Arc::new(AtomicUsize::new(0));
    let terminated = Arc::new(AtomicUsize::new(0));
    let stalls = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder()
        .worker_threads(2)
        .stall_threshold(THRESHOLD)
        .task_insight(true)
        .on_task_spawn({
            let spawned = spawned.clone();
            move |_| {
                spawned.fetch_add(1, SeqCst);
                std::panic::panic_any(Bomb("spawn hook"));
            }
        })
        .on_task_terminate({
            let terminated = terminated.clone();
            move |_| {
                terminated.fetch_add(1, SeqCst);
                std::panic::panic_any(Bomb("terminate hook"));
            }
        })
        .on_stall({
            let stalls = stalls.clone();
            move |_| {
                stalls.fetch_add(1, SeqCst);
                std::panic::panic_any(Bomb("stall hook"));
            }
        })
        .build()
        .unwrap();
    let handles: Vec<_> = (0..500u64)
        .map(|i| rt.spawn(async move { i * 2 }))
        .collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 2 * (0..500).sum::<u64>());
    for round in 1..=2 {
        let before = stalls.load(SeqCst);
        let stalled = rt.submit(|| spin_for(STALL_FOR));
        stalled.join().unwrap();
        common::eventually(&format!("stall {round} reaches the panicking hook"), || {
            stalls.load(SeqCst) > before
        });
    }
    rt.wait_idle();
    assert_eq!(spawned.load(SeqCst), 502);
    assert_eq!(terminated.load(SeqCst), 502);
    assert!(rt.tasks().is_empty(), "{:?}", rt.tasks());
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 0);
    assert_eq!(stats.tasks_executed(), 502);
    assert_eq!(stats.tasks_spawned(), 502);
    assert_consistent(&stats);
}

/// A slow stall hook that is still running when the stalled task ends and the runtime is
/// dropped: the drop returns once the hook does.
#[test]
fn dropping_the_runtime_while_a_slow_stall_hook_runs_does_not_hang() {
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let (finish_tx, finish_rx) = mpsc::channel::<()>();
    let finish_rx = Mutex::new(finish_rx);
    let rt = Runtime::builder()
        .worker_threads(1)
        .stall_threshold(THRESHOLD)
        .on_stall(move |_| {
            let _ = entered_tx.lock().unwrap().send(());
            // Held until the test has started dropping the runtime (bounded).
            let _ = finish_rx.lock().unwrap().recv_timeout(DEADLINE);
        })
        .build()
        .unwrap();
    let (release, wait) = mpsc::channel::<()>();
    let blocker = rt.submit(move || wait.recv_timeout(DEADLINE).expect("never released"));
    entered_rx
        .recv_timeout(DEADLINE)
        .expect("no stall reported");
    release.send(()).unwrap();
    blocker.join().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        done_tx.send(()).unwrap();
    });
    // The drop waits for the hook (it joins the monitor thread); the hook returns now.
    finish_tx.send(()).unwrap();
    done_rx
        .recv_timeout(DEADLINE)
        .expect("dropping the runtime while its stall hook ran hung");
}

// ---------------------------------------------------------------------------------------
// Statistics read concurrently.
// ---------------------------------------------------------------------------------------

/// `WorkerStats::tasks_polled` is documented never to be below `tasks_executed`, in any
/// snapshot. One worker finishes tiny tasks as fast as it can while this thread reads.
#[test]
fn a_snapshot_never_shows_more_tasks_finished_than_polled() {
    let rt = Arc::new(common::runtime(1));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let rt = rt.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut total = 0u64;
            while !stop.load(SeqCst) {
                let handles: Vec<_> = (0..256).map(|_| rt.submit(|| ())).collect();
                for handle in handles {
                    handle.join().unwrap();
                }
                total += 256;
            }
            total
        })
    };
    // Several readers, so that some reader is preempted between the two loads now and
    // then (the machines this runs on have few cores); each stops at the first violation.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                let mut then = rt.stats();
                for _ in 0..1_000_000 {
                    let now = rt.stats();
                    let w = &now.workers[0];
                    if w.tasks_executed > w.tasks_polled {
                        return Some((w.tasks_polled, w.tasks_executed));
                    }
                    assert_monotonic(&then, &now);
                    then = now;
                }
                None
            })
        })
        .collect();
    let bad: Vec<(u64, u64)> = readers
        .into_iter()
        .filter_map(|r| r.join().unwrap())
        .collect();
    stop.store(true, SeqCst);
    let total = producer.join().unwrap();
    rt.wait_idle();
    let last = rt.stats();
    assert_eq!(last.tasks_executed(), total);
    assert!(
        bad.is_empty(),
        "a snapshot showed more tasks finished than polled: (polled, executed) = {bad:?}"
    );
}

/// Many threads read `stats()` while the pool resizes, runs fork-join and tasks, and
/// compensation workers come and go; every snapshot is consistent and later than the one
/// before on the same thread. The last handle is dropped on one of the readers.
#[test]
fn stats_read_from_many_threads_while_the_pool_resizes_and_shuts_down() {
    let _watchdog = common::Watchdog::start("stats_read_from_many_threads");
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(3)
            .max_workers(4)
            .max_compensation_workers(1)
            .stall_threshold(THRESHOLD)
            .on_stall(|_| ())
            .build()
            .unwrap(),
    );
    let progress = _watchdog.progress();
    _watchdog.phase("load", &rt);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let rt = rt.clone();
            let stop = stop.clone();
            let progress = progress.clone();
            std::thread::spawn(move || {
                let mut then = rt.stats();
                let mut reads = 0u64;
                while !stop.load(SeqCst) || reads < 100 {
                    let now = rt.stats();
                    assert_monotonic(&then, &now);
                    assert_consistent(&now);
                    // Each worker's lifetime as the snapshot read it lies between this
                    // snapshot's uptime and the next one's (WorkerStats::idle_time_ns).
                    for (i, w) in then.workers.iter().enumerate() {
                        let life = w.busy_time_ns + w.idle_time_ns;
                        assert!(
                            then.uptime_ns <= life && life <= now.uptime_ns,
                            "worker {i}: lifetime {life} outside {}..={}",
                            then.uptime_ns,
                            now.uptime_ns
                        );
                    }
                    assert_eq!(now.workers.len(), 5);
                    assert!(now.active_workers >= 1 && now.active_workers <= 4);
                    assert!(now.trace_events == 0);
                    then = now;
                    reads += 1;
                    progress.fetch_add(1, SeqCst);
                }
                rt // one of these is dropped last
            })
        })
        .collect();
    let spawned = Arc::new(AtomicU64::new(0));
    for round in 0..40usize {
        rt.set_active_workers(1 + round % 4).unwrap();
        assert_eq!(rt.install(|| common::fib(14)), 377);
        let handles: Vec<_> = (0..50)
            .map(|i| {
                spawned.fetch_add(1, SeqCst);
                rt.spawn(async move {
                    magpie::task::yield_now().await;
                    i
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i);
        }
        if round % 10 == 0 {
            // One stall of every active worker at once: a compensation worker may start.
            let n = rt.active_workers();
            let held: Vec<_> = (0..n)
                .map(|_| rt.submit(|| spin_for(THRESHOLD * 3)))
                .collect();
            let queued: Vec<_> = (0..20).map(|_| rt.submit(|| ())).collect();
            spawned.fetch_add((n + 20) as u64, SeqCst);
            for h in held.into_iter().chain(queued) {
                h.join().unwrap();
            }
        }
        progress.fetch_add(1, SeqCst);
    }
    rt.wait_idle();
    let totals = rt.stats();
    assert_eq!(totals.tasks_executed(), spawned.load(SeqCst));
    assert_eq!(totals.tasks_spawned(), spawned.load(SeqCst));
    assert_eq!(totals.tasks_alive, 0);
    let mine = rt.clone();
    drop(rt);
    stop.store(true, SeqCst);
    let mut rts: Vec<Arc<Runtime>> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    drop(mine);
    // The last handle: dropped on a thread of its own, as a reader would.
    let last = rts.pop().unwrap();
    drop(rts);
    std::thread::spawn(move || drop(last)).join().unwrap();
}

// ---------------------------------------------------------------------------------------
// Task names.
// ---------------------------------------------------------------------------------------

/// Names that are empty, huge, or full of characters that need escaping show in the dump,
/// the hooks, the stall report and the exported trace unchanged, and the trace stays valid
/// JSON.
#[test]
fn odd_task_names_survive_the_dump_the_stall_report_and_the_trace() {
    let names: Vec<String> = vec![
        String::new(),
        "x".repeat(1 << 20),
        "nul\0inside".to_owned(),
        "two\nlines\r\n".to_owned(),
        "\"quoted\" \\back\\slash\t\u{1}\u{1f}".to_owned(),
        "\u{202e}rtl \u{2028}\u{2029} \u{feff} \u{10ffff} 💥".to_owned(),
        "}]},{\"name\":\"injected".to_owned(),
    ];
    let (tx, rx) = mpsc::channel::<StallInfo>();
    let tx = Mutex::new(tx);
    let hook_names = Arc::new(Mutex::new(Vec::new()));
    let rt = Runtime::builder()
        .worker_threads(2)
        .trace(true)
        .stall_threshold(THRESHOLD)
        .on_stall(move |info| {
            let _ = tx.lock().unwrap().send(info.clone());
        })
        .on_task_spawn({
            let hook_names = hook_names.clone();
            move |meta| {
                hook_names
                    .lock()
                    .unwrap()
                    .push((meta.id(), meta.name().map(str::to_owned)));
            }
        })
        .build()
        .unwrap();
    let pending: Vec<_> = names
        .iter()
        .map(|name| {
            magpie::task::Builder::new()
                .name(name)
                .spawn_on(std::future::pending::<()>(), &rt)
        })
        .collect();
    let dump = rt.tasks();
    for (handle, name) in pending.iter().zip(&names) {
        let info = dump
            .iter()
            .find(|t| t.id == handle.id())
            .expect("a named task missing from the dump");
        assert_eq!(info.name.as_deref(), Some(name.as_str()));
        assert!(info.counters.is_some());
        let hooked = hook_names.lock().unwrap();
        let seen = hooked.iter().find(|(id, _)| *id == handle.id()).unwrap();
        assert_eq!(seen.1.as_deref(), Some(name.as_str()));
    }
    // Each name stalls a worker once, so that the trace holds a stall span with it.
    let mut stalled_ids = Vec::new();
    for name in &names {
        let h = magpie::task::Builder::new()
            .name(name)
            .submit_on(|| spin_for(THRESHOLD * 4), &rt);
        stalled_ids.push(h.id());
        h.join().unwrap();
    }
    let reports: Vec<StallInfo> = rx.try_iter().collect();
    for (id, name) in stalled_ids.iter().zip(&names) {
        if let Some(info) = reports.iter().find(|i| i.task() == Some(*id)) {
            assert_eq!(info.name(), Some(name.as_str()));
            let line = info.to_string();
            assert!(line.contains(&format!("{name:?}")), "Display of a stall");
        }
    }
    let path = temp_path("odd-names");
    rt.trace_export(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let json: serde_json::Value =
        serde_json::from_str(&text).expect("the exported trace is not valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let stall_names: Vec<&str> = events
        .iter()
        .filter(|e| e["name"] == "stall")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    for info in &reports {
        if let Some(name) = info.name() {
            assert!(
                stall_names.contains(&name),
                "a stall of a task named {:?} is missing from the trace",
                &name[..name.len().min(40)]
            );
        }
    }
    for h in &pending {
        h.abort();
    }
    rt.wait_idle();
    assert!(rt.tasks().is_empty());
}

// ---------------------------------------------------------------------------------------
// The live-task dump.
// ---------------------------------------------------------------------------------------

/// 100k live tasks on a runtime with task insight: every one of them is in the dump, once,
/// with counters; after they are aborted and the runtime idles, none is.
#[test]
fn a_dump_of_a_hundred_thousand_live_tasks() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .task_insight(true)
        .build()
        .unwrap();
    const N: usize = 100_000;
    let handles: Vec<_> = (0..N)
        .map(|_| rt.spawn(std::future::pending::<()>()))
        .collect();
    let dump = rt.tasks();
    assert_eq!(dump.len(), N);
    let mut ids: Vec<_> = dump.iter().map(|t| t.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), N, "a task listed twice");
    let mut wanted: Vec<_> = handles.iter().map(|h| h.id()).collect();
    wanted.sort_unstable();
    assert_eq!(ids, wanted);
    for t in &dump {
        let c = t.counters.expect("task insight keeps counters");
        assert!(c.polls <= 1);
        assert!(c.longest_poll_ns <= c.busy_ns);
        if let Some(since) = c.since_last_poll_ns {
            assert!(
                since <= c.age_ns,
                "task {:?}: last poll {since} ns ago, but spawned only {} ns ago",
                t.id,
                c.age_ns
            );
        }
    }
    assert_eq!(rt.stats().tasks_alive, N as u64);
    for h in &handles {
        h.abort();
    }
    rt.wait_idle();
    assert!(rt.tasks().is_empty());
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 0);
    assert_eq!(
        stats.tasks_executed(),
        N as u64,
        "aborted tasks count as finished"
    );
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}

/// While other tasks complete, are cancelled, and are spawned from terminate hooks, a task
/// known to be alive is in every dump, and a task whose handle has returned is in none
/// taken afterwards.
#[test]
fn dumps_during_churn_list_the_live_and_drop_the_finished() {
    let respawns = Arc::new(AtomicUsize::new(0));
    let slot: Arc<OnceLock<Weak<Runtime>>> = Arc::new(OnceLock::new());
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .task_insight(true)
            .on_task_terminate({
                let respawns = respawns.clone();
                let slot = slot.clone();
                move |meta| {
                    if meta.name() == Some("parent") && respawns.fetch_add(1, SeqCst) < 2_000 {
                        if let Some(rt) = slot.get().and_then(Weak::upgrade) {
                            drop(
                                magpie::task::Builder::new()
                                    .name("child")
                                    .spawn_on(async { magpie::task::yield_now().await }, &rt),
                            );
                        }
                    }
                }
            })
            .build()
            .unwrap(),
    );
    slot.set(Arc::downgrade(&rt)).unwrap();
    let sentinel = rt.spawn(std::future::pending::<()>());
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let rt = rt.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(SeqCst) || n < 2_000 {
                let a = magpie::task::Builder::new()
                    .name("parent")
                    .spawn_on(async { magpie::task::yield_now().await }, &rt);
                let b = rt.spawn(std::future::pending::<()>());
                b.abort();
                a.join().unwrap();
                assert!(b.join().unwrap_err().is_cancelled());
                n += 1;
            }
        })
    };
    for _ in 0..300 {
        let finished = rt.spawn(async { magpie::task::yield_now().await });
        let finished_id = finished.id();
        finished.join().unwrap();
        let dump = rt.tasks();
        assert!(
            dump.iter().any(|t| t.id == sentinel.id()),
            "the live sentinel is missing from a dump"
        );
        assert!(
            dump.iter().all(|t| t.id != finished_id),
            "a task whose join returned is still listed"
        );
        let mut running = [0usize; 2];
        for t in &dump {
            if let TaskState::Running { worker } = t.state {
                running[worker] += 1;
            }
        }
        assert!(running.iter().all(|&n| n <= 1), "{running:?}");
    }
    stop.store(true, SeqCst);
    churn.join().unwrap();
    sentinel.abort();
    rt.wait_idle();
    let left = rt.tasks();
    assert!(left.is_empty(), "tasks left after wait_idle: {left:?}");
    assert_eq!(rt.stats().tasks_alive, 0);
}

// ---------------------------------------------------------------------------------------
// The trace.
// ---------------------------------------------------------------------------------------

/// Exports from several threads at once while the workers record at full speed into tiny
/// rings; every export is valid JSON, and the lost count never goes down.
#[test]
fn concurrent_exports_while_tiny_rings_overflow() {
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .trace(true)
            .trace_capacity(2)
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let rt = rt.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                assert_eq!(rt.install(|| common::fib(12)), 144);
                let hs: Vec<_> = (0..64).map(|i| rt.spawn(async move { i })).collect();
                for h in hs {
                    h.join().unwrap();
                }
            }
        })
    };
    let exporters: Vec<_> = (0..2)
        .map(|k| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                let path = temp_path(&format!("concurrent-{k}"));
                let mut events_then = 0;
                for _ in 0..50 {
                    rt.trace_export(&path).unwrap();
                    let text = std::fs::read_to_string(&path).unwrap();
                    let json: serde_json::Value =
                        serde_json::from_str(&text).expect("an export is not valid JSON");
                    assert!(json["otherData"]["events_lost"].as_u64().is_some());
                    let recorded = rt.stats().trace_events;
                    assert!(recorded >= events_then);
                    events_then = recorded;
                    for e in json["traceEvents"].as_array().unwrap() {
                        if e["ph"] == "X" {
                            assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
                        }
                    }
                }
                let _ = std::fs::remove_file(&path);
            })
        })
        .collect();
    for e in exporters {
        e.join().unwrap();
    }
    stop.store(true, SeqCst);
    load.join().unwrap();
}
