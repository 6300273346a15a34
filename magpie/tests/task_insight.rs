//! Task identity and insight: ids, spawn locations, names, the live-task dump
//! (`Runtime::tasks`), the task hooks and the unhandled-panic response.
//!
//! Synchronization is by channels, barriers and one trick: on a one-worker runtime,
//! `rt.install(|| ())` returns only after the worker finished the poll it was running (it
//! runs jobs between polls), so a task seen to start a poll is seen to end it.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Barrier, Mutex};

use futures::StreamExt;
use magpie::task::{self, Id, TaskCounters, TaskInfo, TaskState};
use magpie::{Runtime, UnhandledPanic};

mod common;
use common::{eventually, panic_message, runtime};

fn info(rt: &Runtime, id: Id) -> Option<TaskInfo> {
    rt.tasks().into_iter().find(|t| t.id == id)
}

/// The counters of task `id`, which must keep them.
fn counters(rt: &Runtime, id: Id) -> TaskCounters {
    info(rt, id)
        .unwrap()
        .counters
        .expect("the task keeps counters")
}

/// A runtime that keeps counters for every task.
fn insight(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .task_insight(true)
        .build()
        .unwrap()
}

#[test]
fn ids_never_repeat_over_a_million_spawns() {
    const SPAWNS: usize = 1_000_000;
    let rt = runtime(2);
    let other = runtime(1);
    // From a worker (ids from that worker's blocks) and from this thread (its own blocks),
    // on two runtimes: ids are process-wide.
    let mut ids: Vec<u64> = rt.install(|| {
        (0..SPAWNS / 2)
            .map(|_| magpie::spawn(async {}).id().as_u64())
            .collect()
    });
    ids.extend((0..SPAWNS / 4).map(|_| rt.submit(|| ()).id().as_u64()));
    ids.extend((0..SPAWNS / 4).map(|_| other.spawn(async {}).id().as_u64()));
    rt.wait_idle();
    other.wait_idle();
    assert!(ids.iter().all(|&id| id >= 1));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), SPAWNS, "an id was handed out twice");
}

#[test]
fn task_id_inside_equals_the_handle_id() {
    let rt = runtime(2);
    assert_eq!(task::try_id(), None);
    let msg = panic_message(|| {
        task::id();
    });
    assert!(msg.contains("outside a task"), "{msg}");

    let handle = rt.spawn(async { (task::id(), task::try_id()) });
    let id = handle.id();
    assert_eq!(rt.block_on(handle).unwrap(), (id, Some(id)));

    let handle = rt.submit(task::id);
    let id = handle.id();
    assert_eq!(handle.join().unwrap(), id);

    let handle = rt.spawn_blocking(task::id);
    let id = handle.id();
    assert_eq!(handle.join().unwrap(), id);

    // A task spawned inside a task has its own id; the parent's comes back after.
    let (outer, inner, after) = rt
        .block_on(rt.spawn(async {
            let outer = task::id();
            let child = magpie::spawn(async { task::id() });
            let child_id = child.id();
            assert_eq!(child.await.unwrap(), child_id);
            (outer, child_id, task::id())
        }))
        .unwrap();
    assert_ne!(outer, inner);
    assert_eq!(outer, after);
    // `block_on`'s own future is not a task.
    assert_eq!(rt.block_on(async { task::try_id() }), None);
}

/// Sends `task::try_id()` from its destructor.
struct IdOnDrop(mpsc::Sender<Option<Id>>);

impl Drop for IdOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(task::try_id());
    }
}

/// The id covers the whole run of a task on a worker: `block_in_place` inside the poll, the
/// future's destructor and a detached output's destructor, which the run drops. Outside a
/// run, on the same workers, there is none: a worker clears its polling word after each
/// run (task/id.rs, "The current task").
#[test]
fn task_id_covers_the_run_and_ends_with_it() {
    let rt = runtime(2);
    for _ in 0..50 {
        let (drops, dropped) = mpsc::channel();
        let (release, released) = futures::channel::oneshot::channel::<()>();
        let in_future = IdOnDrop(drops.clone());
        let for_output = drops.clone();
        let handle = rt.spawn(async move {
            let _in_future = in_future;
            released.await.unwrap();
            let blocked = task::block_in_place(task::try_id);
            assert_eq!(blocked, task::try_id(), "block_in_place changed the id");
            IdOnDrop(for_output)
        });
        let id = handle.id();
        drop(handle); // detached: the run drops the output
        release.send(()).unwrap();
        let seen: Vec<Option<Id>> = (0..2).map(|_| dropped.recv().unwrap()).collect();
        assert_eq!(seen, [Some(id), Some(id)], "the destructors' ids");
        // A job on the workers, which just ran tasks, is in no task.
        assert_eq!(
            rt.install(task::try_id),
            None,
            "a worker kept a finished task's id"
        );
        let (a, b) = rt.install(|| magpie::join(task::try_id, task::try_id));
        assert_eq!((a, b), (None, None), "a worker kept a finished task's id");
    }
}

/// Every spawn function records its caller's location: read back through the spawn hook,
/// which sees every kind of task, and through the dump for one of them.
#[test]
fn spawn_locations_point_at_the_caller() {
    let seen: Arc<Mutex<HashMap<Id, (String, u32)>>> = Arc::default();
    let log = seen.clone();
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_spawn(move |meta| {
            let location = meta.location();
            let previous = log
                .lock()
                .unwrap()
                .insert(meta.id(), (location.file().to_owned(), location.line()));
            assert!(previous.is_none(), "spawn hook called twice for one task");
        })
        .build()
        .unwrap();
    // Each spawn and its `line!()` in one tuple, which rustfmt keeps on one line.
    let (h1, l1) = (rt.spawn(async {}), line!());
    let (h2, l2) = (rt.submit(|| ()), line!());
    let (h3, l3) = (rt.submit_balanced(|| ()), line!());
    let (h4, l4) = (rt.submit_to(1, || ()).unwrap(), line!());
    let (h5, l5) = (rt.spawn_blocking(|| ()), line!());
    let (h6, l6) = (task::Builder::new().spawn_on(async {}, &rt), line!());
    let (h7, l7) = (task::Builder::new().submit_on(|| (), &rt), line!());
    let (h8, l8) = (rt.submit_batch([|| (), || ()]), line!());
    let mut expected = vec![
        (h8[0].id(), l8),
        (h8[1].id(), l8),
        (h1.id(), l1),
        (h2.id(), l2),
        (h3.id(), l3),
        (h4.id(), l4),
        (h5.id(), l5),
        (h6.id(), l6),
        (h7.id(), l7),
    ];
    let free = rt.block_on(async {
        let (a, la) = (magpie::spawn(async {}), line!());
        let (b, lb) = (magpie::submit(|| ()), line!());
        let (c, lc) = (magpie::spawn_blocking(|| ()), line!());
        let (d, ld) = (task::Builder::new().spawn(async {}), line!());
        let (e, le) = (task::Builder::new().submit(|| ()), line!());
        let ids = [
            (a.id(), la),
            (b.id(), lb),
            (c.id(), lc),
            (d.id(), ld),
            (e.id(), le),
        ];
        a.await.unwrap();
        b.await.unwrap();
        c.await.unwrap();
        d.await.unwrap();
        e.await.unwrap();
        ids
    });
    expected.extend(free);
    // And the dump, for a task that stays alive.
    let (parked, parked_line) = (rt.spawn(std::future::pending::<()>()), line!());
    let row = info(&rt, parked.id()).unwrap();
    assert_eq!(
        (row.location.file.as_str(), row.location.line),
        (file!(), parked_line)
    );
    assert!(row.location.column > 1);

    for handle in [h1, h6] {
        handle.join().unwrap();
    }
    for handle in [h2, h3, h4, h5, h7].into_iter().chain(h8) {
        handle.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(expected.len(), 14);
    for (id, line) in expected {
        assert_eq!(
            seen.get(&id),
            Some(&(file!().to_owned(), line)),
            "task {id}"
        );
    }
}

#[test]
fn names_show_in_the_dump_and_the_hooks() {
    let names: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let log = names.clone();
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_spawn(move |meta| log.lock().unwrap().push(meta.name().map(str::to_owned)))
        .build()
        .unwrap();
    let named = task::Builder::new()
        .name("db-pool")
        .spawn_on(std::future::pending::<()>(), &rt);
    let unnamed = rt.spawn(std::future::pending::<()>());
    assert_eq!(
        info(&rt, named.id()).unwrap().name.as_deref(),
        Some("db-pool")
    );
    assert_eq!(info(&rt, unnamed.id()).unwrap().name, None);
    assert_eq!(*names.lock().unwrap(), [Some("db-pool".to_owned()), None]);
}

/// A task waiting on a channel is `Idle`, with its polls counted one by one; a finished
/// task leaves the dump.
#[test]
fn dump_shows_idle_tasks_and_counts_polls() {
    let rt = insight(1);
    let (tx, mut rx) = futures::channel::mpsc::unbounded::<()>();
    let (ack, acked) = mpsc::channel();
    let handle = rt.spawn(async move {
        ack.send(()).unwrap();
        while rx.next().await.is_some() {
            ack.send(()).unwrap();
        }
    });
    let id = handle.id();
    acked.recv().unwrap();
    rt.install(|| ()); // the first poll has ended
    assert_eq!(info(&rt, id).unwrap().state, TaskState::Idle);
    let first = counters(&rt, id);
    assert_eq!(first.polls, 1);
    assert!(first.since_last_poll_ns.is_some());
    for message in 1..=3 {
        tx.unbounded_send(()).unwrap();
        acked.recv().unwrap();
        rt.install(|| ());
        assert_eq!(info(&rt, id).unwrap().state, TaskState::Idle);
        let now = counters(&rt, id);
        assert_eq!(now.polls, 1 + message, "one poll per message");
        assert!(now.age_ns >= first.age_ns);
    }
    drop(tx);
    handle.join().unwrap();
    assert!(info(&rt, id).is_none(), "a finished task left the dump");
    assert!(rt.tasks().is_empty());
}

/// A task inside its poll shows `Running` on the worker that polls it; queued behind it on a
/// one-worker runtime, another shows `Scheduled`.
#[test]
fn dump_shows_running_and_scheduled_tasks() {
    let rt = runtime(2);
    let started = Arc::new(Barrier::new(2));
    let release = Arc::new(Barrier::new(2));
    let (index_tx, index_rx) = mpsc::channel();
    let running = {
        let (started, release) = (started.clone(), release.clone());
        rt.submit(move || {
            index_tx
                .send(magpie::current_worker_index().unwrap())
                .unwrap();
            started.wait();
            release.wait();
        })
    };
    started.wait();
    let worker = index_rx.recv().unwrap();
    let row = info(&rt, running.id()).unwrap();
    assert_eq!(row.state, TaskState::Running { worker });
    assert!(worker < rt.num_workers());
    assert_eq!(
        row.counters, None,
        "no counters: a default runtime, an unnamed task"
    );
    release.wait();
    running.join().unwrap();

    let single = insight(1);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = single.submit(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv().unwrap();
    let queued = single.spawn(async {});
    let row = info(&single, queued.id()).unwrap();
    assert_eq!(row.state, TaskState::Scheduled);
    let queued_counters = row.counters.unwrap();
    assert_eq!(
        (queued_counters.polls, queued_counters.since_last_poll_ns),
        (0, None)
    );
    assert_eq!(
        info(&single, blocker.id()).unwrap().state,
        TaskState::Running { worker: 0 }
    );
    release_tx.send(()).unwrap();
    blocker.join().unwrap();
    queued.join().unwrap();
}

/// A task waiting inside `join` for its stolen half, while its worker runs a job that is no
/// part of it (an `install` from outside), is still in its poll on that worker: the dump
/// shows it running there. Until 2026-11-29 it showed `Scheduled`, since the worker clears
/// its polling word for such a job (so that `task::try_id` and the stall monitor do not put
/// the job in the task).
#[test]
fn a_task_waiting_in_join_while_its_worker_runs_a_foreign_job_shows_running() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            // No hand-off of the blocked worker's queue: the scene stays as set up.
            .stall_threshold(None)
            .build()
            .unwrap(),
    );
    let stolen = Arc::new(AtomicBool::new(false));
    let (release_half_tx, release_half_rx) = mpsc::channel::<()>();
    let release_half_rx = Mutex::new(release_half_rx);
    let (task_worker_tx, task_worker_rx) = mpsc::channel();
    let waiting = {
        let stolen = stolen.clone();
        rt.spawn(async move {
            task_worker_tx
                .send(magpie::current_worker_index().unwrap())
                .unwrap();
            magpie::join(
                || {
                    // Until the other worker took the second half: then this worker
                    // waits for it in `join` instead of running it itself.
                    let guard = std::time::Instant::now() + common::DEADLINE;
                    while !stolen.load(SeqCst) && std::time::Instant::now() < guard {
                        std::hint::spin_loop();
                    }
                },
                || {
                    stolen.store(true, SeqCst);
                    release_half_rx.lock().unwrap().recv().unwrap();
                },
            );
        })
    };
    let task_worker = task_worker_rx.recv().unwrap();
    // The install must come after the other worker took the second half: sent earlier, it
    // could go to that worker, still free (it did, 1 run in 4 of the release suite).
    let guard = std::time::Instant::now() + common::DEADLINE;
    while !stolen.load(SeqCst) {
        assert!(
            std::time::Instant::now() < guard,
            "the second half was never stolen"
        );
        std::thread::yield_now();
    }
    let (foreign_tx, foreign_rx) = mpsc::channel();
    let (release_foreign_tx, release_foreign_rx) = mpsc::channel::<()>();
    let installer = {
        let rt = rt.clone();
        std::thread::spawn(move || {
            rt.install(move || {
                foreign_tx.send(magpie::current_worker_index()).unwrap();
                release_foreign_rx.recv().unwrap();
            })
        })
    };
    // The other worker is held in the stolen half, so the waiting one runs the install.
    assert_eq!(foreign_rx.recv().unwrap(), Some(task_worker));
    let row = info(&rt, waiting.id()).unwrap();
    release_foreign_tx.send(()).unwrap();
    installer.join().unwrap();
    release_half_tx.send(()).unwrap();
    rt.block_on(waiting).unwrap();
    assert_eq!(
        row.state,
        TaskState::Running {
            worker: task_worker
        },
        "a task waiting in `join` while its worker ran a foreign job"
    );
}

#[test]
fn timed_polls_fill_busy_and_longest() {
    let rt = insight(1);
    let (tx, mut rx) = futures::channel::mpsc::unbounded::<()>();
    let (ack, acked) = mpsc::channel();
    let handle = rt.spawn(async move {
        ack.send(()).unwrap();
        while rx.next().await.is_some() {
            common::spin_for(std::time::Duration::from_micros(200));
            ack.send(()).unwrap();
        }
    });
    acked.recv().unwrap();
    rt.install(|| ()); // the first poll ended: the message below needs a second one
    tx.unbounded_send(()).unwrap();
    acked.recv().unwrap();
    rt.install(|| ());
    let row = counters(&rt, handle.id());
    assert_eq!(row.polls, 2);
    // The second poll spun for 200 µs: both are at least that, whatever the clock.
    assert!(row.longest_poll_ns >= 200_000, "{row:?}");
    assert!(row.busy_ns >= row.longest_poll_ns, "{row:?}");
    drop(tx);
    handle.join().unwrap();

    // A named task on a default runtime: counts, but no times.
    let rt = runtime(1);
    let (ack, acked) = mpsc::channel();
    let handle = task::Builder::new().name("counted").spawn_on(
        async move {
            ack.send(()).unwrap();
            std::future::pending::<()>().await
        },
        &rt,
    );
    acked.recv().unwrap();
    rt.install(|| ());
    let row = counters(&rt, handle.id());
    assert_eq!((row.polls, row.busy_ns, row.longest_poll_ns), (1, 0, 0));
    // An unnamed one keeps none.
    let plain = rt.spawn(std::future::pending::<()>());
    assert_eq!(info(&rt, plain.id()).unwrap().counters, None);
}

#[cfg(feature = "serde")]
#[test]
fn task_info_round_trips_through_json() {
    let rt = insight(1);
    let _named = task::Builder::new()
        .name("json")
        .spawn_on(std::future::pending::<()>(), &rt);
    let tasks = rt.tasks();
    let json = serde_json::to_string(&tasks).unwrap();
    let back: Vec<TaskInfo> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, tasks);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value[0]["name"], "json");
    assert!(value[0]["id"].is_u64());
    assert!(value[0]["counters"]["polls"].is_u64());
}

fn shutdown_on_panic(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .unhandled_panic(UnhandledPanic::ShutdownRuntime)
        .build()
        .unwrap()
}

#[test]
fn unhandled_panic_shuts_the_runtime_down_and_block_on_resumes_it() {
    let rt = shutdown_on_panic(2);
    let bystander = rt.spawn(std::future::pending::<()>());
    drop(rt.spawn(async { panic!("nobody is listening") }));
    // `block_on` is woken by the shutdown, though its own future never completes.
    let payload = panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(std::future::pending::<()>())
    }))
    .unwrap_err();
    assert_eq!(*payload.downcast::<&str>().unwrap(), "nobody is listening");
    // Every other task was cancelled, and spawns are refused.
    assert!(bystander.join().unwrap_err().is_cancelled());
    assert!(rt.spawn(async {}).join().unwrap_err().is_cancelled());
    // The payload went to the first `block_on`; the next one says why it panics.
    let msg = panic_message(|| {
        rt.block_on(async {});
    });
    assert!(msg.contains("unhandled panic"), "{msg}");
}

#[test]
fn unhandled_panic_of_a_handle_dropped_after_spawn_before_block_on() {
    // The panic happens before anybody is in `block_on`; a later one resumes it.
    let rt = shutdown_on_panic(1);
    let handle = rt.spawn(async { panic!("early") });
    drop(handle);
    rt.wait_idle();
    let payload = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(async { 1 }))).unwrap_err();
    assert_eq!(*payload.downcast::<&str>().unwrap(), "early");
}

#[test]
fn a_held_handle_gets_the_panic_and_the_runtime_runs_on() {
    let rt = shutdown_on_panic(2);
    let err = rt.spawn(async { panic!("seen") }).join().unwrap_err();
    assert!(err.is_panic());
    assert_eq!(rt.block_on(async { 7 }), 7);
    assert_eq!(rt.spawn(async { 8 }).join().unwrap(), 8);
    // A handle dropped after the task finished had the panic delivered: handled too.
    let handle = rt.spawn(async { panic!("delivered") });
    while !handle.is_finished() {
        std::thread::yield_now();
    }
    drop(handle);
    assert_eq!(rt.block_on(async { 9 }), 9);
}

#[test]
fn ignore_keeps_the_runtime_running() {
    for rt in [
        runtime(2),
        Runtime::builder()
            .worker_threads(2)
            .unhandled_panic(UnhandledPanic::Ignore)
            .build()
            .unwrap(),
    ] {
        drop(rt.spawn(async { panic!("ignored") }));
        rt.wait_idle();
        assert_eq!(rt.block_on(async { 1 }), 1);
        assert_eq!(rt.spawn(async { 2 }).join().unwrap(), 2);
    }
}

type Log = Arc<Mutex<Vec<Id>>>;

fn hooked(spawned: &Log, terminated: &Log) -> Runtime {
    let (s, t) = (spawned.clone(), terminated.clone());
    Runtime::builder()
        .worker_threads(2)
        .on_task_spawn(move |meta| s.lock().unwrap().push(meta.id()))
        .on_task_terminate(move |meta| t.lock().unwrap().push(meta.id()))
        .build()
        .unwrap()
}

#[test]
fn hooks_run_once_per_task_with_its_id() {
    let (spawned, terminated): (Log, Log) = Default::default();
    let rt = hooked(&spawned, &terminated);
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push(rt.spawn(async move { i }).id());
        ids.push(rt.submit(|| ()).id());
        ids.push(rt.spawn(async { panic!("a task's own panic") }).id());
    }
    let blocking = rt.spawn_blocking(|| ());
    ids.push(blocking.id());
    blocking.join().unwrap();
    let aborted = rt.spawn(std::future::pending::<()>());
    ids.push(aborted.id());
    aborted.abort();
    rt.wait_idle();
    // Cancelled by the runtime's drop: the hook runs on the dropping thread.
    let at_shutdown = rt.spawn(std::future::pending::<()>());
    ids.push(at_shutdown.id());
    drop(rt);
    assert!(at_shutdown.join().unwrap_err().is_cancelled());

    ids.sort_unstable();
    for log in [&spawned, &terminated] {
        let mut log = log.lock().unwrap().clone();
        log.sort_unstable();
        assert_eq!(log, ids, "once per task, with its id");
    }
}

#[test]
fn panicking_hooks_do_not_hurt_the_runtime() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .on_task_spawn(|_| panic!("spawn hook"))
        .on_task_terminate(|_| panic!("terminate hook"))
        .build()
        .unwrap();
    let handles: Vec<_> = (0..20u32).map(|i| rt.spawn(async move { i })).collect();
    for (i, handle) in (0..20u32).zip(handles) {
        assert_eq!(handle.join().unwrap(), i);
    }
    assert_eq!(rt.spawn_blocking(|| 5).join().unwrap(), 5);
    assert_eq!(
        rt.block_on(async { magpie::spawn(async { 6 }).await.unwrap() }),
        6
    );
    drop(rt.submit(|| ()));
    rt.wait_idle();
    assert!(rt.tasks().is_empty());
}

#[test]
fn unique_ids_in_the_dump() {
    let rt = runtime(2);
    let handles: Vec<_> = (0..100)
        .map(|_| rt.spawn(std::future::pending::<()>()))
        .collect();
    let tasks = rt.tasks();
    assert_eq!(tasks.len(), 100);
    let ids: HashSet<Id> = tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids.len(), 100);
    assert!(handles.iter().all(|h| ids.contains(&h.id())));
    // Sorted by id.
    assert!(tasks.windows(2).all(|w| w[0].id < w[1].id));
}

/// Polls that follow each other straight from a worker's local queues share a clock
/// reading (the end of one is the start of the next, `TaskState::chained`), and no other
/// poll does: whatever the mix of yields, LIFO hand-overs, steals and parks on two
/// workers, each task's counters stay consistent with each other and with its age.
#[test]
fn chained_poll_times_stay_within_each_tasks_life() {
    const TASKS: usize = 20;
    const YIELDS: u64 = 50;
    let rt = insight(2);
    let handles: Vec<_> = (0..TASKS)
        .map(|_| {
            rt.spawn(async {
                for _ in 0..YIELDS {
                    magpie::task::yield_now().await;
                }
                // Children in the LIFO slot, then wait for good.
                for _ in 0..3 {
                    drop(magpie::spawn(async {}));
                }
                std::future::pending::<()>().await
            })
        })
        .collect();
    eventually("every task polled to its wait", || {
        handles.iter().all(|h| {
            info(&rt, h.id()).is_some_and(|t| {
                t.state == TaskState::Idle && t.counters.is_some_and(|c| c.polls == YIELDS + 1)
            })
        })
    });
    for handle in &handles {
        let c = counters(&rt, handle.id());
        assert!(c.longest_poll() <= c.busy(), "{c:?}");
        assert!(c.busy() <= c.age(), "more time in polls than alive: {c:?}");
        assert!(c.since_last_poll().unwrap() <= c.age(), "{c:?}");
        assert!(c.busy() > std::time::Duration::ZERO, "{c:?}");
    }
}

/// A task whose handle is gone may stay in the live list for a moment after it completes,
/// until its worker unlinks it with others (`WorkerThread::defer_unlink`). The dump never
/// shows it, `wait_idle` waits for the unlink, and the runtime frees it.
#[test]
fn completed_tasks_without_handles_leave_the_dump_at_once_and_the_list_by_wait_idle() {
    const QUICK: usize = 10;
    let rt = runtime(1);
    let (started_tx, started) = mpsc::channel::<()>();
    let (release, held) = mpsc::channel::<()>();
    let done = Arc::new(Mutex::new(0usize));
    // One worker takes the batch oldest first: the quick tasks, then the blocker, which
    // keeps the worker busy (its local queues not yet dry) while the dump is read.
    let quick = (0..QUICK).map(|_| {
        let done = Arc::clone(&done);
        Box::new(move || *done.lock().unwrap() += 1) as Box<dyn FnOnce() + Send>
    });
    let blocker = std::iter::once(Box::new(move || {
        started_tx.send(()).unwrap();
        held.recv().unwrap();
    }) as Box<dyn FnOnce() + Send>);
    let handles = rt.submit_batch(quick.chain(blocker));
    let blocker_id = handles[QUICK].id();
    drop(handles);
    started.recv().unwrap();
    assert_eq!(*done.lock().unwrap(), QUICK);
    let dump = rt.tasks();
    assert_eq!(
        dump.iter().map(|t| t.id).collect::<Vec<_>>(),
        [blocker_id],
        "the dump shows a completed task: {dump:?}"
    );
    assert_eq!(dump[0].state, TaskState::Running { worker: 0 });
    release.send(()).unwrap();
    rt.wait_idle();
    assert_eq!(rt.stats().tasks_alive, 0);
    assert!(rt.tasks().is_empty());
    assert_eq!(rt.stats().tasks_executed(), QUICK as u64 + 1);
}
