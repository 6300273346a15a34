//! The whole runtime under [shuttle]'s randomized schedulers.
//!
//! Built only with `--cfg shuttle` (`scripts/shuttle.sh`), which makes magpie's sync facade
//! (`crate::sync`, `crate::sync::thread`) hand out shuttle's atomics, locks, threads and
//! thread-locals: every worker is a shuttle thread, every atomic access and lock a point
//! where shuttle may switch threads. Each scenario builds a fresh [`Runtime`] of 1 to 4
//! workers inside the checked closure and drops it at the end, so the workers are spawned
//! and joined within one execution, and runs under both [`shuttle::check_random`] and
//! [`shuttle::check_pct`] (a priority-based scheduler that finds bugs of small depth with a
//! known probability).
//!
//! Where the loom models (`cargo test --lib loom`, `scripts/loom.sh`) check each protocol
//! exhaustively on a small model, these check the real runtime end to end: the deque, the
//! rings, the sleep protocol, the task state machine, shutdown and the worker-count control
//! all at once, on thousands of random schedules. Two limits: shuttle treats every atomic as
//! `SeqCst` (weak-memory bugs are loom's job), and it does not model time, so no scenario uses
//! timers, and a park's timeout (the driver's deadline, or the debugging safety net
//! `Builder::park_safety_net`) is off under shuttle; no other park has one anywhere (a lost
//! wakeup is a deadlock, which shuttle reports).
//!
//! I/O readiness has no OS to come from either: under shuttle each runtime owns a model of
//! its I/O driver (`io/fake_driver.rs`) with the real one's surface, and
//! [`FakeSource`](magpie::__shuttle::FakeSource) stands for a socket whose readiness a thread
//! fires and a driver turn delivers. So the driver role runs as in the real build: a parked
//! worker waits *in* the driver, busy workers turn it at maintenance, and a worker that
//! leaves the role to run work hands it to a parked one (sleep/README.md, D1 to D4).
//!
//! Shuttle panics on a failure (an assertion, a deadlock, too many steps) and prints the
//! schedule that found it; `shuttle::replay` replays it.
//!
//! [shuttle]: https://docs.rs/shuttle
#![cfg(shuttle)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use magpie::__shuttle::FakeSource;
use magpie::Runtime;
use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use shuttle::sync::Mutex;

/// Runs `scenario` under the random scheduler for `random` iterations and under PCT (depth
/// 3) for `pct` iterations.
fn check(scenario: fn(), random: usize, pct: usize) {
    shuttle::check_random(scenario, random);
    shuttle::check_pct(scenario, pct, 3);
}

/// A fresh runtime of `workers` workers (and room for `max` after `set_active_workers`).
fn runtime(workers: usize, max: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .max_workers(max)
        .thread_name("shuttle")
        .build()
        .expect("a shuttle runtime")
}

/// Counts its drops: dropped exactly once, the count goes up by exactly one.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A one-shot event that a future waits for and any thread (in the pool or not) fires.
#[derive(Default)]
struct Event {
    state: Mutex<(bool, Option<Waker>)>,
}

impl Event {
    fn fire(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        // Wake outside the lock, as real channels do.
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn wait(self: &Arc<Self>) -> WaitEvent {
        WaitEvent(self.clone())
    }
}

struct WaitEvent(Arc<Event>);

impl Future for WaitEvent {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.state.lock().unwrap();
        if state.0 {
            Poll::Ready(())
        } else {
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// Tasks spawn tasks (from inside the pool, so through the LIFO slot and the local rings),
/// two levels deep; every result comes back.
fn nested_spawn() {
    let rt = runtime(2, 2);
    let total = rt.block_on(async {
        let outer: Vec<_> = (0..3u64)
            .map(|i| {
                magpie::spawn(async move {
                    let inner: Vec<_> = (0..2u64)
                        .map(|j| magpie::spawn(async move { i * 10 + j }))
                        .collect();
                    let mut sum = 0;
                    for handle in inner {
                        sum += handle.await.unwrap();
                    }
                    sum
                })
            })
            .collect();
        let mut total = 0;
        for handle in outer {
            total += handle.await.unwrap();
        }
        total
    });
    assert_eq!(total, (1) + (21) + (41));
    drop(rt);
}

/// `join` inside tasks on two workers at once, and `install` from outside: jobs are stolen
/// between workers whose other half is a task's poll.
fn join_in_tasks() {
    let rt = runtime(2, 2);
    let a = rt.spawn(async { fib(4) });
    let b = rt.submit(|| magpie::join(|| fib(3), || fib(2)));
    assert_eq!(rt.install(|| fib(4)), 3);
    assert_eq!(a.join().unwrap(), 3);
    assert_eq!(b.join().unwrap(), (2, 1));
    drop(rt);
}

/// Abort a task that waits forever, and one racing its own completion: each future is
/// dropped exactly once, and the handles report cancellation (or the output, if it won).
fn abort() {
    let rt = runtime(2, 2);
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCount(drops.clone());
    let forever = rt.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await
    });
    let guard = DropCount(drops.clone());
    let quick = rt.spawn(async move {
        let _guard = guard;
        7
    });
    forever.abort();
    quick.abort();
    assert!(forever.join().unwrap_err().is_cancelled());
    match quick.join() {
        Ok(v) => assert_eq!(v, 7),
        Err(e) => assert!(e.is_cancelled()),
    }
    drop(rt);
    assert_eq!(drops.load(SeqCst), 2);
}

/// A panicking closure and a panicking future: the handles report the panic, the workers
/// survive and run more work on each of them.
fn panics() {
    let rt = runtime(2, 2);
    let closure = rt.submit(|| -> u32 { panic!("planted panic (closure)") });
    let future = rt.spawn(async { panic!("planted panic (future)") });
    assert!(closure.join().unwrap_err().is_panic());
    let err: magpie::JoinError = future.join().unwrap_err();
    assert!(err.is_panic());
    for worker in 0..2 {
        assert_eq!(
            rt.submit_to(worker, move || worker + 1)
                .unwrap()
                .join()
                .unwrap(),
            worker + 1
        );
    }
    drop(rt);
}

/// Dropping the runtime with work pending: tasks that wait forever, tasks queued behind
/// them, closures not yet run. Every future and closure is dropped exactly once, whether
/// it ran or not; every handle reports an output or a cancellation.
fn shutdown_with_pending_work() {
    let rt = runtime(3, 3);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..4 {
        let guard = DropCount(drops.clone());
        handles.push(rt.spawn(async move {
            let _guard = guard;
            if i % 2 == 0 {
                std::future::pending::<()>().await;
            }
        }));
    }
    let mut closures = Vec::new();
    for _ in 0..2 {
        let guard = DropCount(drops.clone());
        closures.push(rt.submit(move || drop(guard)));
    }
    drop(rt);
    assert_eq!(drops.load(SeqCst), 6);
    for (i, handle) in handles.into_iter().enumerate() {
        match handle.join() {
            Ok(()) => assert!(i % 2 == 1, "a pending task completed"),
            Err(e) => assert!(e.is_cancelled()),
        }
    }
    for handle in closures {
        if let Err(e) = handle.join() {
            assert!(e.is_cancelled());
        }
    }
}

/// A thread outside the pool wakes a parked task, while the runtime's workers may be
/// parking, spinning or stealing.
fn outside_wake() {
    outside_wake_into(false);
}

/// As [`outside_wake`], but the outside thread first waits until every worker has parked, so
/// that each wake lands in a fully parked pool: a wake the sleep protocol loses there leaves
/// every thread blocked, which shuttle reports as a deadlock. (Left to the schedulers alone,
/// the workers hardly ever park: under shuttle every spin and yield is a scheduling point,
/// and `yield_now` lowers a thread's priority under PCT, so the other threads finish first.)
fn outside_wake_into_parked_pool() {
    outside_wake_into(true);
}

/// Whether every worker of `rt` is parked (or on its way: past the last recheck).
fn all_parked(rt: &Runtime) -> bool {
    let stats = rt.stats();
    stats.workers.iter().all(|w| w.parks > w.unparks)
}

fn outside_wake_into(parked: bool) {
    let rt = Arc::new(runtime(2, 2));
    let events: Vec<Arc<Event>> = (0..2).map(|_| Arc::default()).collect();
    let handles: Vec<_> = events
        .iter()
        .enumerate()
        .map(|(i, event)| {
            let wait = event.wait();
            rt.spawn(async move {
                wait.await;
                i
            })
        })
        .collect();
    let waker = {
        let rt = rt.clone();
        shuttle::thread::spawn(move || {
            for event in events {
                while parked && !all_parked(&rt) {
                    shuttle::thread::yield_now();
                }
                event.fire();
            }
        })
    };
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.join().unwrap(), i);
    }
    waker.join().unwrap();
    drop(rt);
}

/// Two tasks hand a baton back and forth, each waking the other from inside the pool (the
/// LIFO slot path, and its rescue by a thief), while a third task competes for the workers.
fn lifo_ping_pong() {
    const ROUNDS: usize = 3;
    let rt = runtime(2, 2);
    // (whose turn, the waiting task's waker), turns 0 and 1.
    let baton = Arc::new(Mutex::new((0usize, [None::<Waker>, None])));
    let player = |me: usize| {
        let baton = baton.clone();
        rt.spawn(async move {
            for _ in 0..ROUNDS {
                std::future::poll_fn(|cx| {
                    let mut b = baton.lock().unwrap();
                    if b.0 == me {
                        Poll::Ready(())
                    } else {
                        b.1[me] = Some(cx.waker().clone());
                        Poll::Pending
                    }
                })
                .await;
                let other = {
                    let mut b = baton.lock().unwrap();
                    b.0 = 1 - me;
                    b.1[1 - me].take()
                };
                if let Some(waker) = other {
                    waker.wake();
                }
            }
        })
    };
    let ping = player(0);
    let pong = player(1);
    let busy = rt.spawn(async {
        for _ in 0..2 {
            magpie::task::yield_now().await;
        }
    });
    ping.join().unwrap();
    pong.join().unwrap();
    busy.join().unwrap();
    assert_eq!(baton.lock().unwrap().0, 0);
    drop(rt);
}

/// Changing the worker count while closures run and queue on the retiring workers: every
/// closure runs exactly once, and `wait_idle` sees them all.
fn active_workers() {
    let rt = runtime(2, 3);
    let ran = Arc::new(AtomicUsize::new(0));
    let submit = |n: usize| {
        for i in 0..n {
            let ran = ran.clone();
            let job = move || {
                ran.fetch_add(1, SeqCst);
            };
            drop(rt.submit_to(i % 3, job).unwrap());
        }
    };
    submit(3);
    rt.set_active_workers(3).unwrap();
    submit(3);
    rt.set_active_workers(1).unwrap();
    submit(3);
    rt.set_active_workers(2).unwrap();
    rt.wait_idle();
    assert_eq!(ran.load(SeqCst), 9);
    assert_eq!(rt.stats().tasks_alive, 0);
    drop(rt);
}

/// Shrinking the pool while a scope's jobs spawn more jobs (issue 17, item 6): a job that a
/// scope job spawns lands on the deque of the worker running it, and that worker may be
/// switched off right then, by the job itself. The scope must still complete: the retiring
/// worker hands its deque on (and thieves may take from it meanwhile). Before the fix it
/// was stranded, which shuttle reports as a deadlock.
fn shrink_during_nested_scope() {
    let rt = Arc::new(runtime(3, 3));
    let ran = AtomicUsize::new(0);
    let control = rt.clone();
    rt.install(|| {
        magpie::scope(|s| {
            for shrink_to in [1, 2] {
                let ran = &ran;
                let control = &control;
                s.spawn(move |s| {
                    s.spawn(move |_| {
                        let (a, b) = magpie::join(|| fib(3), || fib(2));
                        ran.fetch_add((a + b) as usize, SeqCst);
                    });
                    control.set_active_workers(shrink_to).unwrap();
                    ran.fetch_add(1, SeqCst);
                });
            }
        });
    });
    // Two spawning jobs (1 each) and two nested joins (fib(3) + fib(2) = 3 each).
    assert_eq!(ran.load(SeqCst), 8);
    rt.set_active_workers(3).unwrap();
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
    drop(control);
    drop(Arc::into_inner(rt));
}

/// Closures queued on one worker's mailbox while that worker is busy waiting for one of
/// them: another worker must steal it (or the first would wait forever), so this checks that
/// queued work wakes a worker that can run it.
fn submit_to_and_steal() {
    let rt = runtime(2, 2);
    let flag = Arc::new(AtomicBool::new(false));
    let seen = flag.clone();
    let waiter = rt
        .submit_to(0, move || {
            // A busy-wait with a yield point, as any spin under shuttle needs.
            while !seen.load(SeqCst) {
                shuttle::thread::yield_now();
            }
            magpie::current_worker_index()
        })
        .unwrap();
    let setter = rt
        .submit_to(0, move || {
            flag.store(true, SeqCst);
            magpie::current_worker_index()
        })
        .unwrap();
    let others: Vec<_> = (0..2)
        .map(|i| rt.submit_to(0, move || i).unwrap())
        .collect();
    let waited_on = waiter.join().unwrap();
    let set_on = setter.join().unwrap();
    // Whoever ran first, the two ran on different workers or in order on one.
    assert!(waited_on.is_some() && set_on.is_some());
    for (i, handle) in others.into_iter().enumerate() {
        assert_eq!(handle.join().unwrap(), i);
    }
    drop(rt);
}

/// `wait_idle` while closures spawn tasks that spawn tasks: it returns only when every one
/// has finished.
fn wait_idle() {
    let rt = runtime(2, 2);
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let done = done.clone();
        drop(rt.submit(move || {
            let inner = done.clone();
            drop(magpie::spawn(async move {
                let innermost = inner.clone();
                drop(magpie::spawn(async move {
                    innermost.fetch_add(1, SeqCst);
                }));
                inner.fetch_add(1, SeqCst);
            }));
            done.fetch_add(1, SeqCst);
        }));
    }
    rt.wait_idle();
    assert_eq!(done.load(SeqCst), 6);
    drop(rt);
}

/// A stream of submissions from outside into a parked pool of four workers that assumes
/// four CPUs, so that R1c (sleep/README.md) wakes a worker for a task queued behind others
/// while another worker searches, as on a large machine (on the 2-CPU test machines it never
/// fires). Whatever the interleaving of those wakes with the workers' searches and parks,
/// every task runs exactly once and `wait_idle` returns; a lost wakeup would leave every
/// thread blocked, which shuttle reports as a deadlock.
fn stream_into_parked_pool() {
    let rt = Runtime::builder()
        .worker_threads(4)
        .assume_cpus(4)
        .thread_name("shuttle")
        .build()
        .expect("a shuttle runtime");
    while !all_parked(&rt) {
        shuttle::thread::yield_now();
    }
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..5).map(|_| AtomicUsize::new(0)).collect());
    for i in 0..5 {
        let runs = runs.clone();
        drop(rt.submit(move || runs[i].fetch_add(1, SeqCst)));
    }
    rt.wait_idle();
    for (i, count) in runs.iter().enumerate() {
        assert_eq!(count.load(SeqCst), 1, "task {i}");
    }
    drop(rt);
}

/// Scoped jobs that borrow from the caller's stack, on four workers, with a task spawned
/// from inside a job.
fn scope_on_four_workers() {
    let rt = runtime(4, 4);
    let mut out = [0u64; 3];
    let task = rt.install(|| {
        let (a, rest) = out.split_at_mut(1);
        let (b, c) = rest.split_at_mut(1);
        let mut task = None;
        magpie::scope(|s| {
            s.spawn(|_| a[0] = fib(3));
            s.spawn(|_| b[0] = fib(4));
            s.spawn(|_| c[0] = fib(2));
            task = Some(magpie::spawn(async { 5 }));
        });
        task.unwrap()
    });
    assert_eq!(out, [2, 3, 1]);
    assert_eq!(task.join().unwrap(), 5);
    drop(rt);
}

/// Tasks await closures' handles and closures run `join`: tasks and closures wake each
/// other across workers, and an outside `block_on` waits for them all.
fn handles_across_kinds() {
    let rt = runtime(3, 3);
    let sum = rt.block_on(async {
        let closure = magpie::submit(|| 20);
        let task = magpie::spawn(async move { closure.await.unwrap() + 1 });
        let other = magpie::submit(|| magpie::join(|| 10, || 11));
        let (x, y) = other.await.unwrap();
        task.await.unwrap() + x + y
    });
    assert_eq!(sum, 42);
    drop(rt);
}

/// A task waits for readiness while every worker is parked, one of them in the driver (D1);
/// a thread outside the pool fires the source once the whole pool is parked. The event must
/// end the driver's wait and reach the task (a turn, then the task's waker on the driver's
/// worker).
fn io_readiness_into_parked_pool() {
    let rt = Arc::new(runtime(2, 2));
    let source = rt.block_on(async { Arc::new(FakeSource::new().expect("a fake source")) });
    let reader = {
        let source = source.clone();
        rt.spawn(async move { source.readable().await })
    };
    let firer = {
        let rt = rt.clone();
        shuttle::thread::spawn(move || {
            while !all_parked(&rt) {
                shuttle::thread::yield_now();
            }
            source.fire();
        })
    };
    reader
        .join()
        .unwrap()
        .expect("readiness, not a shut-down driver");
    firer.join().unwrap();
    let stats = rt.stats();
    let blocking: u64 = stats.workers.iter().map(|w| w.driver_polls_blocking).sum();
    assert!(blocking > 0, "no worker parked in the driver");
    assert_eq!(stats.io_sources, 0, "the source was dropped: deregistered");
    drop(rt);
}

/// The driver hand-off (D4; tokio#4730): task A waits for its source's readiness, then spins
/// inside that one poll until task B's read completes; B waits for readiness on another
/// source. An outside thread fires A's source at once, and B's once A spins and the other
/// worker is parked. The worker running A does not hold the driver role, so the other one
/// must wait in the driver: either it took the role when it parked (D1), or A's worker woke
/// it to take the role over (`Registry::hand_off_driver`) when it left the role to run A.
///
/// The shape is what makes the hand-off necessary in some schedules. A woken by its event
/// (not by a token) lets the role's holder wake plain, not as a searcher, so the last
/// searcher's notification (R3) is not there to wake the other worker instead; firing A's
/// source at once, rather than into a parked pool, lets the other worker be the searcher
/// that absorbs A's notification (R1 sees it searching and wakes nobody), and then park
/// while the holder still holds the role (its `try_drive` fails) but after the holder has
/// taken A (its recheck, R5, finds nothing). Only the hand-off wakes it then. With every
/// worker parked before the first fire, R1 or R3 wakes it anyway: with the hand-off planted
/// out, shuttle found no failing schedule in 20,000 of that shape, and finds one of this
/// shape within a few thousand (sleep/README.md, "The driver role").
///
/// Nothing is queued from outside the pool (`submit_to`, and `spawn` on a worker), so that
/// under `--cfg magpie_shuttle_broken` the other planted bug (a remote push that wakes
/// nobody) plays no part, and only the hand-off is missing.
fn driver_hand_off_to_parked_worker() {
    let rt = Arc::new(runtime(2, 2));
    let (source_a, source_b) = rt.block_on(async {
        let source = || Arc::new(FakeSource::new().expect("a fake source"));
        (source(), source())
    });
    let done = Arc::new(AtomicBool::new(false));
    // The worker running A's long poll, plus one; 0 until then.
    let stuck_on = Arc::new(AtomicUsize::new(0));
    let stuck = {
        let source = source_a.clone();
        let done = done.clone();
        let stuck_on = stuck_on.clone();
        rt.submit_to(0, move || {
            magpie::spawn(async move {
                source.readable().await.expect("readiness");
                stuck_on.store(magpie::current_worker_index().unwrap() + 1, SeqCst);
                // One long poll: a busy-wait with a yield point, as any spin under shuttle
                // needs.
                while !done.load(SeqCst) {
                    shuttle::thread::yield_now();
                }
            })
        })
        .unwrap()
    };
    let reader = {
        let source = source_b.clone();
        let done = done.clone();
        rt.submit_to(1, move || {
            magpie::spawn(async move {
                let ready = source.readable().await;
                done.store(true, SeqCst);
                ready
            })
        })
        .unwrap()
    };
    let firer = {
        let rt = rt.clone();
        shuttle::thread::spawn(move || {
            source_a.fire();
            let other = loop {
                match stuck_on.load(SeqCst) {
                    0 => shuttle::thread::yield_now(),
                    on => break 2 - on,
                }
            };
            loop {
                let stats = rt.stats();
                let w = &stats.workers[other];
                if w.parks > w.unparks {
                    break;
                }
                shuttle::thread::yield_now();
            }
            source_b.fire();
        })
    };
    let reader = reader.join().unwrap();
    reader
        .join()
        .unwrap()
        .expect("readiness, not a shut-down driver");
    stuck.join().unwrap().join().unwrap();
    firer.join().unwrap();
    drop(rt);
}

/// Every worker busy (one worker, and a task that yields until the read completes): nobody
/// parks, so readiness comes only from the busy worker's non-blocking turn at maintenance
/// (D3).
fn io_readiness_into_busy_pool() {
    let rt = Arc::new(runtime(1, 1));
    let source = rt.block_on(async { Arc::new(FakeSource::new().expect("a fake source")) });
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let spinner = {
        let done = done.clone();
        let started = started.clone();
        rt.spawn(async move {
            started.store(true, SeqCst);
            while !done.load(SeqCst) {
                // The task yields to the worker; the worker, to shuttle, which sees no other
                // yield point in this loop (PCT would never let the firer run).
                shuttle::thread::yield_now();
                magpie::task::yield_now().await;
            }
        })
    };
    let reader = {
        let source = source.clone();
        rt.spawn(async move {
            let ready = source.readable().await;
            done.store(true, SeqCst);
            ready
        })
    };
    let firer = shuttle::thread::spawn(move || {
        // Once the spinner runs, the worker does not park until the read completes.
        while !started.load(SeqCst) {
            shuttle::thread::yield_now();
        }
        source.fire();
    });
    reader
        .join()
        .unwrap()
        .expect("readiness, not a shut-down driver");
    spinner.join().unwrap();
    firer.join().unwrap();
    let nonblocking = rt.stats().workers[0].driver_polls_nonblocking;
    assert!(nonblocking > 0, "the busy worker never turned the driver");
    drop(rt);
}

/// `Runtime::tasks` taken from outside while tasks spawn, run, park and finish on two
/// workers (issue 15: "the dump's states are consistent under concurrent spawns"). Every
/// dump lists each task once; a running task names a worker of the pool, and no worker runs
/// two tasks at once; a task's poll count never goes back between two dumps; the task that
/// waits for an event is in every dump until it is fired; once every handle is joined, the
/// dump is empty.
fn task_dump_under_concurrent_spawns() {
    use magpie::task::{Id, TaskState};
    use std::collections::HashMap;

    let rt = Arc::new(
        Runtime::builder()
            .worker_threads(2)
            .thread_name("shuttle")
            .task_insight(true)
            .build()
            .expect("a shuttle runtime"),
    );
    let gate = Arc::new(Event::default());
    let waiter = rt.spawn({
        let gate = gate.clone();
        async move { gate.wait().await }
    });
    let waiter_id = waiter.id();
    let spawner = rt.spawn(async {
        let children: Vec<_> = (0..3u64).map(|i| magpie::spawn(async move { i })).collect();
        let mut sum = 0;
        for child in children {
            sum += child.await.unwrap();
        }
        sum
    });
    let dumper = shuttle::thread::spawn({
        let rt = rt.clone();
        move || {
            let mut polls: HashMap<Id, u64> = HashMap::new();
            for _ in 0..2 {
                let dump = rt.tasks();
                let mut running_on = [false; 2];
                let mut seen = HashMap::new();
                for task in &dump {
                    assert!(
                        seen.insert(task.id, ()).is_none(),
                        "{} listed twice",
                        task.id
                    );
                    if let TaskState::Running { worker } = task.state {
                        assert!(worker < 2, "task {} on worker {worker}", task.id);
                        assert!(!running_on[worker], "two tasks running on worker {worker}");
                        running_on[worker] = true;
                    }
                    let now = task.counters.as_ref().expect("task insight is on").polls;
                    let before = polls.insert(task.id, now).unwrap_or(0);
                    assert!(
                        now >= before,
                        "task {}: {before} polls, then {now}",
                        task.id
                    );
                }
                assert!(
                    seen.contains_key(&waiter_id),
                    "the waiting task left the dump"
                );
            }
        }
    });
    dumper.join().unwrap();
    gate.fire();
    waiter.join().unwrap();
    assert_eq!(spawner.join().unwrap(), 3);
    let left = rt.tasks();
    assert!(left.is_empty(), "finished tasks still listed: {left:?}");
    drop(rt);
}

#[test]
fn shuttle_nested_spawn() {
    check(nested_spawn, 10_000, 10_000);
}

#[test]
fn shuttle_join_in_tasks() {
    check(join_in_tasks, 10_000, 10_000);
}

#[test]
fn shuttle_abort() {
    check(abort, 10_000, 10_000);
}

#[test]
fn shuttle_panics() {
    check(panics, 10_000, 10_000);
}

#[test]
fn shuttle_shutdown_with_pending_work() {
    check(shutdown_with_pending_work, 10_000, 10_000);
}

#[test]
fn shuttle_outside_wake() {
    check(outside_wake, 10_000, 10_000);
}

#[test]
// The negative control: with `--cfg magpie_shuttle_broken` a remote push wakes nobody, and
// shuttle must find the pool parked for good (scripts/shuttle.sh runs both ways).
#[cfg_attr(magpie_shuttle_broken, should_panic(expected = "deadlock"))]
fn shuttle_outside_wake_into_parked_pool() {
    check(outside_wake_into_parked_pool, 2_000, 2_000);
}

#[test]
fn shuttle_lifo_ping_pong() {
    check(lifo_ping_pong, 10_000, 10_000);
}

#[test]
fn shuttle_active_workers() {
    check(active_workers, 10_000, 10_000);
}

#[test]
fn shuttle_submit_to_and_steal() {
    check(submit_to_and_steal, 10_000, 10_000);
}

#[test]
fn shuttle_wait_idle() {
    check(wait_idle, 10_000, 10_000);
}

#[test]
fn shuttle_stream_into_parked_pool() {
    check(stream_into_parked_pool, 2_000, 2_000);
}

#[test]
fn shuttle_scope_on_four_workers() {
    check(scope_on_four_workers, 10_000, 10_000);
}

#[test]
fn shuttle_handles_across_kinds() {
    check(handles_across_kinds, 10_000, 10_000);
}

#[test]
fn shuttle_shrink_during_nested_scope() {
    check(shrink_during_nested_scope, 5_000, 5_000);
}

#[test]
fn shuttle_io_readiness_into_parked_pool() {
    check(io_readiness_into_parked_pool, 10_000, 10_000);
}

#[test]
// The negative control of the driver hand-off: with `--cfg magpie_shuttle_broken`
// `Registry::hand_off_driver` does nothing, and shuttle must find a schedule where the worker
// that could serve the read sleeps on its parker while A's worker, which left the role, spins
// until the step bound (scripts/shuttle.sh runs both ways).
#[cfg_attr(
    magpie_shuttle_broken,
    should_panic(expected = "exceeded max_steps bound")
)]
fn shuttle_driver_hand_off_to_parked_worker() {
    check(driver_hand_off_to_parked_worker, 10_000, 10_000);
}

#[test]
fn shuttle_io_readiness_into_busy_pool() {
    check(io_readiness_into_busy_pool, 10_000, 10_000);
}

#[test]
fn shuttle_task_dump_under_concurrent_spawns() {
    check(task_dump_under_concurrent_spawns, 5_000, 5_000);
}
