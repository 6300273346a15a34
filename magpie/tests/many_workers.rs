//! A runtime of 130 workers: more than two words of the sleep protocol's idle bitmap and of
//! its `join_waiting` map (64 workers each), and far more workers than CPUs (the suite runs on
//! two), so most workers are parked or preempted at any moment. Fork-join, tasks spawned from
//! inside and outside the pool, timers, switching workers off across the words' boundaries;
//! then the pool's rest: every worker parks, and stays parked, since no park has a timeout
//! but the timer driver's (issue 19).
//!
//! The rest is observed through the statistics (a parked worker has counted one more park
//! than unpark: `WorkerStats::parks` is bumped before it blocks, `unparks` after) and through
//! `/proc` (a parked worker's thread sleeps in the kernel), so the file is Linux's.

#![cfg(target_os = "linux")]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually, fib, fib_sequential, quiesce};
use magpie::{Runtime, Stats};

/// Two full words of the bitmap and two workers of a third.
const WORKERS: usize = 130;

/// How long a parked pool is watched for a worker that wakes on its own: longer than the
/// one-second safety net every park had before issue 19, so that net would be caught. Only an
/// observation window: what is asserted is a count of wakes, which is 0 however slow the
/// machine.
const QUIET: Duration = Duration::from_millis(1500);

fn runtime() -> Runtime {
    Runtime::builder()
        .worker_threads(WORKERS)
        .build()
        .expect("could not build the runtime")
}

/// The scheduler state of thread `tid` of this process: `S` while it sleeps in the kernel
/// (a futex, `epoll_wait`), `R` while it runs or waits for a CPU; `None` if unreadable.
fn thread_state(tid: u64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the thread's name, which is in parentheses and may hold anything.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The statistics of the pool if it is at rest now: every worker parked by its counters
/// (one more park than unpark), asleep in the kernel, and its counters unchanged across the
/// look at its thread.
///
/// The counters alone could catch a worker between counting a park and returning from it at
/// once: a plain wake that arrived while it was awake (a latch set after it had stopped
/// waiting, a timer re-arm aimed at it after it gave the driver role up) is kept and cuts
/// its next park short (sleep/README.md). Such a worker is running, or waiting for a CPU,
/// not asleep in the kernel; and if it has gone on, its counters have moved.
fn at_rest(rt: &Runtime) -> Option<Stats> {
    let before = rt.stats();
    let parked = |stats: &Stats| stats.workers.iter().all(|w| w.parks > w.unparks);
    if !parked(&before) {
        return None;
    }
    if !before
        .workers
        .iter()
        .all(|w| thread_state(w.thread_id) == Some('S'))
    {
        return None;
    }
    let after = rt.stats();
    let counts = |stats: &Stats| -> Vec<(u64, u64)> {
        stats.workers.iter().map(|w| (w.parks, w.unparks)).collect()
    };
    (counts(&after) == counts(&before)).then_some(after)
}

/// Fork-join from outside and from tasks, on whichever workers are active.
fn fork_join(rt: &Runtime) {
    assert_eq!(rt.install(|| fib(20)), fib_sequential(20));
    let handles: Vec<_> = (0..WORKERS as u64)
        .map(|i| rt.submit(move || fib(8 + i % 6)))
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.join().unwrap(), fib_sequential(8 + i as u64 % 6));
    }
}

/// Tasks spawned from outside the pool and from inside it (each outside task spawns its own
/// children and awaits them), some of them asleep on timers; checks every result and that no
/// timer fired early.
fn tasks_and_timers(rt: &Runtime) {
    const OUTSIDE: u64 = 400;
    const CHILDREN: u64 = 10;
    let early = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..OUTSIDE)
        .map(|i| {
            let early = early.clone();
            rt.spawn(async move {
                let children: Vec<_> = (0..CHILDREN)
                    .map(|j| {
                        let early = early.clone();
                        magpie::spawn(async move {
                            if j % 4 == 0 {
                                let nap = Duration::from_millis((i + j) % 5);
                                let start = Instant::now();
                                magpie::time::sleep(nap).await;
                                if start.elapsed() < nap {
                                    early.fetch_add(1, Relaxed);
                                }
                            }
                            i * CHILDREN + j
                        })
                    })
                    .collect();
                let mut sum = 0;
                for child in children {
                    sum += child.await.unwrap();
                }
                sum
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let n = OUTSIDE * CHILDREN;
    assert_eq!(total, n * (n - 1) / 2);
    assert_eq!(early.load(Relaxed), 0, "a timer fired early");
    // A timer awaited from outside the pool.
    let start = Instant::now();
    rt.block_on(magpie::time::sleep(Duration::from_millis(3)));
    assert!(start.elapsed() >= Duration::from_millis(3));
}

#[test]
fn a_130_worker_pool_computes_then_parks_fully_and_stays_parked() {
    let rt = runtime();
    assert_eq!(rt.num_workers(), WORKERS);
    let start = rt.stats();

    fork_join(&rt);
    tasks_and_timers(&rt);
    // One job on every worker at once: all 130 are woken, across the three words.
    quiesce(&rt);

    // Switched off across both word boundaries (workers 63 to 129), then on again.
    rt.set_active_workers(63).unwrap();
    fork_join(&rt);
    tasks_and_timers(&rt);
    rt.set_active_workers(WORKERS).unwrap();
    // Every worker, the ones switched back on included, takes a job at once.
    quiesce(&rt);
    tasks_and_timers(&rt);

    // The rest: every worker parks, having parked more than it had before the work (each
    // ran a job in `quiesce`, so each parked again afterwards).
    let mut rest = None;
    eventually("every worker parks", || {
        rest = at_rest(&rt);
        rest.is_some()
    });
    let parked = rest.unwrap();
    for (i, (now, then)) in parked.workers.iter().zip(&start.workers).enumerate() {
        assert!(now.parks > then.parks, "worker {i}: {now:?}");
        assert_eq!(now.parks, now.unparks + 1, "worker {i}: {now:?}");
        assert_eq!(now.local_queue_depth, 0, "worker {i}");
        assert_eq!(now.mailbox_depth, 0, "worker {i}");
    }
    assert_eq!(parked.tasks_alive, 0);
    assert_eq!(parked.timers_pending, 0);
    assert_eq!(parked.inject_queue_depth, 0);

    // And stays parked: nobody wakes without a reason.
    std::thread::sleep(QUIET);
    let later = rt.stats();
    for (i, (now, then)) in later.workers.iter().zip(&parked.workers).enumerate() {
        assert_eq!(
            (now.parks, now.unparks),
            (then.parks, then.unparks),
            "worker {i} woke in a parked pool with nothing to do: {now:?}, before {then:?}"
        );
    }

    // A parked pool still wakes for work and for a timer filed into it.
    assert_eq!(rt.spawn(async { 7 }).join().unwrap(), 7);
    let start = Instant::now();
    assert_eq!(
        rt.spawn(async {
            magpie::time::sleep(Duration::from_millis(2)).await;
            8
        })
        .join()
        .unwrap(),
        8
    );
    assert!(start.elapsed() >= Duration::from_millis(2));
    assert_eq!(rt.install(|| fib(15)), fib_sequential(15));
    // Dropping the runtime wakes every worker to exit, and joins them.
    drop(rt);
}

/// The debugging option that brings back a periodic wake (`Builder::park_safety_net`, hidden
/// from the docs): with it, every worker of an idle pool wakes on its own, again and again.
/// Without it, nothing would wake them (the test above).
#[test]
fn the_park_safety_net_wakes_every_parked_worker_when_asked() {
    let rt = Runtime::builder()
        .worker_threads(WORKERS)
        .park_safety_net(Duration::from_millis(10))
        .build()
        .unwrap();
    let start = rt.stats();
    eventually("every worker wakes on its own twice", || {
        let now = rt.stats();
        now.workers
            .iter()
            .zip(&start.workers)
            .all(|(now, then)| now.unparks >= then.unparks + 2)
    });
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 0);
    assert_eq!(stats.jobs_executed(), 0, "nothing was run: {stats:?}");
}
