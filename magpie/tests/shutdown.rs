//! Shutdown: dropping a runtime (or `shutdown_timeout`) cancels every task it still owns,
//! drops each future exactly once, and resolves every `JoinHandle` to a cancelled
//! `JoinError`; spawns, wakes, aborts and handle drops that race the shutdown neither hang,
//! nor panic, nor leak.
//!
//! The pending tasks come in every shape a runtime has to find at shutdown: never polled
//! (still queued), idle with nobody to wake them, idle with a waker held by a live channel
//! sender, asleep in the timer wheel, and runnable forever (yielding in a loop). Each future
//! carries a per-task drop counter, checked right after the runtime is gone.

mod async_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_support::bomb::{BombWaker, Fuses};
use async_support::{
    channel_waker, poll_once, runtime, watchdog, watchdog_for, Counter, DropSlot, Forever, Slots,
};
use futures::channel::oneshot;
use magpie::task::{JoinError, JoinHandle};
use magpie::time::Sleep;
use magpie::Runtime;

/// Tasks pending at shutdown.
const PENDING: usize = 100_000;

/// Tasks in the racing tests, which repeat their race several times.
const RACING: usize = 10_000;

/// The kinds of pending task, by `index % KINDS`.
const KINDS: usize = 5;

fn kind_name(index: usize) -> &'static str {
    match index % KINDS {
        0 => "never woken",
        1 => "parked on a channel",
        2 => "asleep on a long timer",
        3 => "yielding forever",
        _ => "detached, never woken",
    }
}

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

#[track_caller]
fn assert_cancelled<T>(result: Result<T, JoinError>, what: &str) {
    match result {
        Ok(_) => panic!("{what}: a task pending at shutdown returned Ok"),
        Err(err) => assert!(err.is_cancelled(), "{what}: {err:?}"),
    }
}

/// What a test keeps of its pending tasks to check after the shutdown.
struct Pending {
    handles: Vec<(usize, JoinHandle<()>)>,
    senders: Vec<oneshot::Sender<()>>,
    drops: Arc<Slots>,
}

/// Spawns `PENDING` tasks of every kind on `rt`. With `settle`, waits until every task
/// has been polled at least once (so that each is idle, asleep, or spinning, not queued).
fn spawn_pending(rt: &Runtime, settle: bool) -> Pending {
    let drops = Slots::new(PENDING);
    let started = Counter::new();
    let (all_started_tx, all_started_rx) = mpsc::channel::<()>();
    let mut handles = Vec::new();
    let mut senders = Vec::new();
    for i in 0..PENDING {
        let guard = DropSlot::new(&drops, i);
        // Each task bumps `started` on its first poll; the last one to start says so.
        let (started, all_started) = (started.clone(), all_started_tx.clone());
        let first_poll = move || {
            started.bump();
            if started.get() == PENDING {
                let _ = all_started.send(());
            }
        };
        let handle = match i % KINDS {
            0 | 4 => rt.spawn(async move {
                let _guard = guard;
                first_poll();
                std::future::pending::<()>().await
            }),
            1 => {
                let (tx, rx) = oneshot::channel::<()>();
                senders.push(tx);
                rt.spawn(async move {
                    let _guard = guard;
                    first_poll();
                    let _ = rx.await;
                    unreachable!("the sender is kept until after the shutdown");
                })
            }
            2 => rt.spawn(async move {
                let _guard = guard;
                first_poll();
                magpie::time::sleep(Duration::from_secs(3600)).await;
                unreachable!("an hour passed during the test");
            }),
            _ => rt.spawn(async move {
                let _guard = guard;
                first_poll();
                loop {
                    magpie::task::yield_now().await;
                }
            }),
        };
        if i % KINDS == 4 {
            drop(handle);
        } else {
            handles.push((i, handle));
        }
    }
    drop(all_started_tx);
    if settle {
        all_started_rx
            .recv()
            .expect("not every task was polled before the shutdown");
    }
    Pending {
        handles,
        senders,
        drops,
    }
}

/// The checks after the runtime is gone: each future dropped once (by the time the shutdown
/// returned), each channel's receiver gone with its future, each handle cancelled.
fn check_after_shutdown(pending: Pending, what: &str) {
    let wrong: Vec<(usize, &str, u32)> = (0..PENDING)
        .filter(|&i| pending.drops.get(i) != 1)
        .map(|i| (i, kind_name(i), pending.drops.get(i)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} of {PENDING} futures not dropped exactly once when the shutdown returned; \
         first (index, kind, drops): {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    for (n, tx) in pending.senders.iter().enumerate() {
        assert!(
            tx.is_canceled(),
            "{what}: receiver {n} outlived the shutdown"
        );
    }
    for (n, (i, handle)) in pending.handles.into_iter().enumerate() {
        let kind = kind_name(i);
        // Half through the blocking join, half as a future.
        if n % 2 == 0 {
            assert_cancelled(handle.join(), &format!("{what}: task {i} ({kind}), join()"));
        } else {
            assert_cancelled(wait(handle), &format!("{what}: task {i} ({kind}), awaited"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cancelling what is left
// ---------------------------------------------------------------------------------------------

#[test]
fn drop_cancels_every_pending_task_once() {
    let _guard = watchdog("drop_cancels_every_pending_task_once");
    // Settled: every task polled once (idle, asleep or spinning) before the drop; not
    // settled: many still queued, never polled.
    for (workers, settle) in [(1, true), (2, false), (2, true), (3, false)] {
        let rt = runtime(workers);
        let pending = spawn_pending(&rt, settle);
        drop(rt);
        check_after_shutdown(
            pending,
            &format!("drop, {workers} workers, settled: {settle}"),
        );
    }
}

#[test]
fn shutdown_timeout_cancels_every_pending_task_once() {
    let _guard = watchdog("shutdown_timeout_cancels_every_pending_task_once");
    for (workers, settle) in [(1, false), (2, true)] {
        let rt = runtime(workers);
        let pending = spawn_pending(&rt, settle);
        rt.shutdown_timeout(Duration::from_secs(30));
        check_after_shutdown(
            pending,
            &format!("shutdown_timeout, {workers} workers, settled: {settle}"),
        );
    }
}

#[test]
fn shutdown_timeout_returns_despite_a_stuck_blocking_closure() {
    let _guard = watchdog("shutdown_timeout_returns_despite_a_stuck_blocking_closure");
    let rt = runtime(2);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocking = rt.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        7
    });
    started_rx.recv().unwrap();
    let polls = Counter::new();
    let drops = Counter::new();
    let task = rt.spawn(Forever::new(&polls, &drops));
    // The closure is released only after shutdown_timeout returns: a shutdown that waited
    // for it without the timeout would hang here (and the watchdog would say so).
    rt.shutdown_timeout(Duration::from_millis(50));
    assert_eq!(drops.get(), 1);
    assert_cancelled(wait(task), "the async task");
    release_tx.send(()).unwrap();
    // The closure was already running: it finishes (or, at least, its handle resolves).
    match wait(blocking) {
        Ok(value) => assert_eq!(value, 7),
        Err(err) => assert!(err.is_cancelled(), "{err:?}"),
    }
}

#[test]
fn queued_blocking_closures_are_cancelled_at_shutdown() {
    let _guard = watchdog("queued_blocking_closures_are_cancelled_at_shutdown");
    // One blocking thread, held by a closure until after the shutdown: the closures queued
    // behind it never start, so the shutdown cancels them.
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let running = rt.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        7
    });
    started_rx.recv().unwrap();
    let ran = Counter::new();
    let drops = Counter::new();
    let queued: Vec<_> = (0..10)
        .map(|_| {
            let (ran, guard) = (ran.clone(), drops.on_drop());
            rt.spawn_blocking(move || {
                let _guard = guard;
                ran.bump();
            })
        })
        .collect();
    rt.shutdown_timeout(Duration::from_millis(10));
    for handle in queued {
        assert_cancelled(wait(handle), "a queued blocking closure");
    }
    assert_eq!(
        ran.get(),
        0,
        "a blocking closure started after the shutdown"
    );
    assert_eq!(
        drops.get(),
        10,
        "queued blocking closures not dropped exactly once"
    );
    release_tx.send(()).unwrap();
    match wait(running) {
        Ok(value) => assert_eq!(value, 7),
        Err(err) => assert!(err.is_cancelled(), "{err:?}"),
    }
}

#[test]
fn outputs_of_finished_tasks_belong_to_their_handles() {
    let _guard = watchdog("outputs_of_finished_tasks_belong_to_their_handles");
    let rt = runtime(2);
    let drops = Counter::new();
    let handles: Vec<_> = (0..1000)
        .map(|_| {
            let guard = drops.on_drop();
            rt.spawn(async move { guard })
        })
        .collect();
    // Wait until every task has finished, without reading the outputs of those still
    // running: poll each handle once with a waker that reports to a channel, and wait for
    // one wake per handle that was pending.
    let (waker, woken) = channel_waker();
    let mut read = Vec::new();
    let mut unread = Vec::new();
    for mut handle in handles {
        match poll_once(&mut handle, &waker) {
            Poll::Ready(output) => read.push(output.expect("task failed")),
            Poll::Pending => unread.push(handle),
        }
    }
    for _ in 0..unread.len() {
        woken.recv().expect("a join waker was dropped unwoken");
    }
    assert!(unread.iter().all(JoinHandle::is_finished));
    let unread_count = unread.len();
    drop(rt);
    // Outputs belong to the handles, not to the runtime: the shutdown dropped none.
    assert_eq!(
        drops.get(),
        0,
        "the shutdown dropped outputs that handles own"
    );
    drop(read);
    assert_eq!(drops.get(), 1000 - unread_count);
    // Half of the unread ones are read after the shutdown, half dropped with their handle.
    for (n, handle) in unread.into_iter().enumerate() {
        if n % 2 == 0 {
            drop(wait(handle).expect("a task finished before the shutdown lost its output"));
        } else {
            drop(handle);
        }
    }
    assert_eq!(drops.get(), 1000, "an output was not dropped exactly once");
}

// ---------------------------------------------------------------------------------------------
// Spawning during shutdown
// ---------------------------------------------------------------------------------------------

/// Spawns a child, through the free function, from its destructor; the child reports the
/// worker count of the runtime it ran on.
struct SpawnOnDrop {
    handles: mpsc::Sender<JoinHandle<usize>>,
    child_drops: Counter,
}

impl Future for SpawnOnDrop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        let guard = self.child_drops.on_drop();
        let handle = magpie::spawn(async move {
            let _guard = guard;
            magpie::current_num_workers()
        });
        let _ = self.handles.send(handle);
    }
}

#[test]
fn spawning_from_a_destructor_during_shutdown() {
    let _guard = watchdog("spawning_from_a_destructor_during_shutdown");
    // One worker more than the global runtime (which a destructor running outside any worker
    // spawns on), so that a child's worker count says which runtime ran it.
    let global_workers = magpie::default_runtime().num_workers();
    let dying_workers = global_workers + 1;
    let rt = runtime(dying_workers);
    let (handles_tx, handles_rx) = mpsc::channel();
    let child_drops = Counter::new();
    let parents: Vec<_> = (0..1000)
        .map(|_| {
            rt.spawn(SpawnOnDrop {
                handles: handles_tx.clone(),
                child_drops: child_drops.clone(),
            })
        })
        .collect();
    drop(handles_tx);
    drop(rt);
    for parent in parents {
        // The destructor did not panic: the parent is cancelled, not a panic.
        assert_cancelled(wait(parent), "a parent");
    }
    let mut children = 0;
    for child in handles_rx {
        children += 1;
        match wait(child) {
            // Spawned where no worker of the dying runtime was current: the global one.
            Ok(workers) => assert_eq!(
                workers, global_workers,
                "a child spawned during shutdown ran on the dying runtime ({dying_workers} \
                 workers) or another"
            ),
            Err(err) => assert!(err.is_cancelled(), "{err:?}"),
        }
    }
    assert_eq!(children, 1000, "a destructor did not run exactly once");
    assert_eq!(
        child_drops.get(),
        1000,
        "a child's future was not dropped once"
    );
}

#[test]
fn tasks_spawning_in_a_loop_race_the_shutdown() {
    let _guard = watchdog("tasks_spawning_in_a_loop_race_the_shutdown");
    // Parents spawn children that never finish, in a loop, while the runtime shuts down: a
    // child spawned before the shutdown is cancelled by it, one spawned during it is refused
    // (cancelled at once); either way it is dropped exactly once. A child let in after the
    // task list closed would never be cancelled, and its drop never counted.
    for round in 0..10 {
        let rt = runtime(2);
        let spawned = Counter::new();
        let child_drops = Counter::new();
        let children: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (running_tx, running_rx) = mpsc::channel::<()>();
        let parents: Vec<_> = (0..4)
            .map(|_| {
                let (spawned, child_drops, children) =
                    (spawned.clone(), child_drops.clone(), children.clone());
                let running = running_tx.clone();
                rt.spawn(async move {
                    let _ = running.send(());
                    loop {
                        spawned.bump();
                        let guard = child_drops.on_drop();
                        let child = magpie::spawn(async move {
                            let _guard = guard;
                            std::future::pending::<()>().await
                        });
                        children.lock().unwrap().push(child);
                        magpie::task::yield_now().await;
                    }
                })
            })
            .collect();
        // Every parent is spinning before the shutdown starts.
        for _ in 0..4 {
            running_rx.recv().unwrap();
        }
        drop(rt);
        assert_eq!(
            child_drops.get(),
            spawned.get(),
            "round {round}: children spawned around the shutdown not dropped exactly once"
        );
        for parent in parents {
            assert_cancelled(wait(parent), "a spawning parent");
        }
        let children = std::mem::take(&mut *children.lock().unwrap());
        assert_eq!(children.len(), spawned.get(), "round {round}");
        for child in children {
            assert_cancelled(wait(child), &format!("round {round}: a child"));
        }
    }
}

/// Blocks its worker inside `poll` until every [`ReleaseOnDrop`] is gone, then returns
/// Pending; its destructor spawns a child (through the free function) and hands over the
/// child's handle.
struct BlockThenSpawnOnDrop {
    inside: Option<mpsc::Sender<()>>,
    release: mpsc::Receiver<()>,
    handles: mpsc::Sender<JoinHandle<usize>>,
    child_drops: Counter,
}

impl Future for BlockThenSpawnOnDrop {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if let Some(inside) = self.inside.take() {
            let _ = inside.send(());
            // Returns (disconnected) once every sender, each held by a ReleaseOnDrop, is gone.
            let _ = self.release.recv();
        }
        Poll::Pending
    }
}

impl Drop for BlockThenSpawnOnDrop {
    fn drop(&mut self) {
        let guard = self.child_drops.on_drop();
        let handle = magpie::spawn(async move {
            let _guard = guard;
            magpie::current_num_workers()
        });
        let _ = self.handles.send(handle);
    }
}

/// Holds senders whose last drop releases the blocked polls.
struct ReleaseOnDrop {
    _senders: Vec<mpsc::Sender<()>>,
}

impl Future for ReleaseOnDrop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

#[test]
fn spawning_from_a_destructor_on_a_worker_during_shutdown() {
    let _guard = watchdog("spawning_from_a_destructor_on_a_worker_during_shutdown");
    // Every worker is blocked inside a poll when the shutdown starts, so the shutdown finds
    // those tasks busy and leaves their cancellation to the workers. The polls are released
    // when the shutdown drops the last of many idle tasks; the busy tasks then end their
    // polls, see they were cancelled, and are dropped on their workers, where
    // `magpie::spawn` means the dying runtime. It must refuse: the child is cancelled,
    // never run. (If the shutdown happens to reach a busy task only after its release, that
    // task is dropped on the shutting-down thread instead, and its child goes to the global
    // runtime: allowed.)
    let global_workers = magpie::default_runtime().num_workers();
    for round in 0..10 {
        let workers = global_workers + 1;
        let rt = runtime(workers);
        let (handles_tx, handles_rx) = mpsc::channel();
        let (inside_tx, inside_rx) = mpsc::channel();
        let child_drops = Counter::new();
        let mut release_senders = Vec::new();
        let blocked: Vec<_> = (0..workers)
            .map(|_| {
                let (release_tx, release_rx) = mpsc::channel();
                release_senders.push(release_tx);
                rt.spawn(BlockThenSpawnOnDrop {
                    inside: Some(inside_tx.clone()),
                    release: release_rx,
                    handles: handles_tx.clone(),
                    child_drops: child_drops.clone(),
                })
            })
            .collect();
        drop(handles_tx);
        for _ in 0..workers {
            inside_rx.recv().unwrap();
        }
        let idle: Vec<_> = (0..1000)
            .map(|_| {
                rt.spawn(ReleaseOnDrop {
                    _senders: release_senders.clone(),
                })
            })
            .collect();
        drop(release_senders);
        drop(rt);
        for task in blocked.into_iter().chain(idle) {
            assert_cancelled(wait(task), &format!("round {round}: a parent"));
        }
        let mut children = 0;
        for child in handles_rx {
            children += 1;
            match wait(child) {
                Ok(ran_on) => assert_eq!(
                    ran_on, global_workers,
                    "round {round}: a child spawned during shutdown ran on the dying runtime \
                     ({workers} workers)"
                ),
                Err(err) => assert!(err.is_cancelled(), "round {round}: {err:?}"),
            }
        }
        assert_eq!(
            children, workers,
            "round {round}: a destructor did not run once"
        );
        assert_eq!(child_drops.get(), workers, "round {round}: child drops");
    }
}

// ---------------------------------------------------------------------------------------------
// Other threads racing the shutdown
// ---------------------------------------------------------------------------------------------

/// Shuts `rt` down on this thread while `racer` runs on another, both released by one
/// barrier.
fn race_shutdown(rt: Runtime, racer: impl FnOnce() + Send) {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            barrier.wait();
            racer();
        });
        barrier.wait();
        drop(rt);
    });
}

/// Spawns `RACING` never-woken tasks, each with a per-task drop slot, and waits until each
/// has been polled once (so each is idle, owned only by the runtime's task list).
fn spawn_idle(rt: &Runtime) -> (Vec<JoinHandle<()>>, Arc<Slots>) {
    let drops = Slots::new(RACING);
    let polls = Counter::new();
    let unused = Counter::new();
    let mut started = Vec::new();
    let handles = (0..RACING)
        .map(|i| {
            let guard = DropSlot::new(&drops, i);
            let (tx, rx) = mpsc::channel();
            started.push(rx);
            let forever = Forever::reporting(&polls, &unused, tx);
            rt.spawn(async move {
                let _guard = guard;
                forever.await
            })
        })
        .collect();
    for rx in started {
        rx.recv().unwrap();
    }
    (handles, drops)
}

#[test]
fn aborts_race_the_shutdown() {
    let _guard = watchdog("aborts_race_the_shutdown");
    for round in 0..5 {
        let rt = runtime(2);
        let (handles, drops) = spawn_idle(&rt);
        let handles = Arc::new(handles);
        let h = handles.clone();
        race_shutdown(rt, move || h.iter().for_each(JoinHandle::abort));
        drops.assert_all(1, &format!("round {round}: future drops"));
        for handle in Arc::into_inner(handles).unwrap() {
            assert_cancelled(wait(handle), &format!("round {round}"));
        }
    }
}

#[test]
fn handle_drops_race_the_shutdown() {
    let _guard = watchdog("handle_drops_race_the_shutdown");
    for round in 0..5 {
        let rt = runtime(2);
        let (handles, drops) = spawn_idle(&rt);
        race_shutdown(rt, move || drop(handles));
        drops.assert_all(1, &format!("round {round}: future drops"));
    }
}

/// Pending forever; hands each new waker to a shared list, so that a foreign thread can
/// wake the task at any moment.
struct Exposed {
    wakers: Arc<Mutex<Vec<Waker>>>,
    registered: Option<mpsc::Sender<()>>,
}

impl Future for Exposed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.wakers.lock().unwrap().push(cx.waker().clone());
        if let Some(registered) = self.registered.take() {
            let _ = registered.send(());
        }
        Poll::Pending
    }
}

#[test]
fn wakes_race_the_shutdown() {
    let _guard = watchdog("wakes_race_the_shutdown");
    for round in 0..5 {
        let rt = runtime(2);
        let drops = Slots::new(RACING);
        let wakers: Arc<Mutex<Vec<Waker>>> = Arc::default();
        let mut registered = Vec::new();
        let handles: Vec<_> = (0..RACING)
            .map(|i| {
                let guard = DropSlot::new(&drops, i);
                let (tx, rx) = mpsc::channel();
                registered.push(rx);
                let exposed = Exposed {
                    wakers: wakers.clone(),
                    registered: Some(tx),
                };
                rt.spawn(async move {
                    let _guard = guard;
                    exposed.await
                })
            })
            .collect();
        for rx in registered {
            rx.recv().unwrap();
        }
        let w = wakers.clone();
        // Wakes every task three times over while the shutdown runs. Each wake that re-queues
        // a task adds a waker to the list; each pass takes a snapshot.
        race_shutdown(rt, move || {
            for _ in 0..3 {
                let snapshot: Vec<Waker> = w.lock().unwrap().clone();
                snapshot.iter().for_each(Waker::wake_by_ref);
            }
        });
        drops.assert_all(1, &format!("round {round}: future drops"));
        for handle in handles {
            assert_cancelled(wait(handle), &format!("round {round}"));
        }
        // Waking after the shutdown is a no-op; dropping the wakers frees the tasks.
        let after: Vec<Waker> = std::mem::take(&mut *wakers.lock().unwrap());
        for waker in after {
            waker.wake();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timers at shutdown (issue 17, defects 7c and 8). More in `bombs_timers.rs`.
// ---------------------------------------------------------------------------------------------

/// Polls `sleep` with the context's waker, and reports the first poll on `filed` (the timer
/// is filed, with this poll's waker, once that poll returns).
fn reporting_first_poll(
    mut sleep: Pin<Box<Sleep>>,
    filed: mpsc::Sender<()>,
) -> impl Future<Output = ()> {
    let mut filed = Some(filed);
    std::future::poll_fn(move |cx| {
        let poll = sleep.as_mut().poll(cx);
        if let Some(filed) = filed.take() {
            filed.send(()).unwrap();
        }
        poll
    })
}

/// Regression (issue 17, defect 8): a `Sleep` filed with a runtime, then awaited on another
/// thread outside it, was stranded when the runtime dropped: the shutdown dropped the wheel's
/// wakers unwoken. Now the shutdown wakes it, and its next poll files it with the global
/// runtime, which fires it.
#[test]
fn a_sleep_awaited_on_another_thread_completes_after_its_runtime_drops() {
    let _guard = watchdog_for(
        "a_sleep_awaited_on_another_thread_completes_after_its_runtime_drops (a timer \
         stranded by the shutdown)",
        Duration::from_secs(20),
    );
    let rt = runtime(1);
    // Long enough that `rt` cannot fire it before it drops, short enough for a test.
    let mut sleep = Box::pin(magpie::time::sleep(Duration::from_millis(300)));
    rt.block_on(async {
        assert!(futures::poll!(sleep.as_mut()).is_pending());
    });
    let (filed_tx, filed_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        futures::executor::block_on(reporting_first_poll(sleep, filed_tx));
    });
    // Re-filed with `rt`, under the waiter's waker.
    filed_rx.recv().unwrap();
    drop(rt);
    waiter.join().unwrap();
}

/// The deterministic half of the test above: by the time the drop returns, the shutdown has
/// woken the waker of every timer still filed with the runtime, and the next poll files the
/// timer elsewhere.
#[test]
fn shutdown_wakes_every_timer_still_filed() {
    let _guard = watchdog("shutdown_wakes_every_timer_still_filed");
    let rt = runtime(2);
    let waker = BombWaker::new(Fuses::CALM);
    let mut sleeps: Vec<_> = (0..3)
        .map(|_| Box::pin(magpie::time::sleep(Duration::from_secs(3600))))
        .collect();
    rt.block_on(std::future::poll_fn(|_| {
        for sleep in &mut sleeps {
            assert!(poll_once(sleep, &waker.waker()).is_pending());
        }
        Poll::Ready(())
    }));
    assert_eq!(rt.stats().timers_pending, 3);
    drop(rt);
    assert_eq!(waker.wakes(), 3, "the shutdown left timers unwoken");
    assert_eq!(waker.refs(), 0, "the shutdown kept a waker");
    for sleep in &mut sleeps {
        assert!(poll_once(sleep, &waker.waker()).is_pending());
    }
    drop(sleeps);
    assert_eq!(
        waker.refs(),
        0,
        "a re-filed timer kept its waker after its drop"
    );
}

/// Regression (issue 17, defect 7c): a blocking closure waiting (in `magpie::block_on`) on a
/// timer filed with its own runtime hung that runtime's drop: the shutdown waits for running
/// blocking closures, and nobody fired the timer once the workers were gone.
#[test]
fn a_blocking_closure_sleeping_on_its_runtime_does_not_hang_the_drop() {
    let _guard = watchdog_for(
        "a_blocking_closure_sleeping_on_its_runtime_does_not_hang_the_drop (the drop \
         waited for a blocking closure whose timer nobody fired)",
        Duration::from_secs(20),
    );
    let rt = runtime(1);
    let (filed_tx, filed_rx) = mpsc::channel();
    let handle = rt.spawn_blocking(move || {
        let sleep = Box::pin(magpie::time::sleep(Duration::from_millis(300)));
        magpie::block_on(reporting_first_poll(sleep, filed_tx));
        7
    });
    // Filed with `rt` (the current runtime inside its blocking closures).
    filed_rx.recv().unwrap();
    drop(rt);
    assert_eq!(wait(handle).unwrap(), 7);
}
