//! Scheduling behaviour of async tasks that users can observe: the stranded-LIFO rescue
//! (tokio#4941), a `join` waiting for a stolen half never running tasks, the LIFO slot and
//! its cap, and the counters that describe all of it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{runtime, DEADLINE};

/// Spins until `flag` is set or the deadline passes; returns whether it was set. The deadline
/// only turns a hang into a failure.
fn spin_until(flag: &AtomicBool) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while !flag.load(SeqCst) {
        if Instant::now() > deadline {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// A task that wakes (here: spawns) another and then keeps its worker busy must not strand
/// the other one in its LIFO slot: an idle worker takes it. In tokio this test hangs.
#[test]
fn a_task_in_the_lifo_slot_is_not_stranded_behind_a_long_poll() {
    for round in 0..20 {
        // The rescue must be the scheduler's: past the threshold the stall monitor would hand
        // the LIFO slot to the inject queue itself (no `lifo_steals`).
        let rt = common::runtime_without_monitor(2);
        let ran = Arc::new(AtomicBool::new(false));
        let ran_in_task = ran.clone();
        let outcome = rt.block_on(rt.spawn(async move {
            let me = magpie::current_worker_index();
            let flag = ran_in_task.clone();
            // Spawned from inside a poll: goes to this worker's LIFO slot.
            let child = magpie::spawn(async move {
                flag.store(true, SeqCst);
                magpie::current_worker_index()
            });
            // A long poll: block this worker until the child has run somewhere else.
            let rescued = spin_until(&ran_in_task);
            (me, rescued, child)
        }));
        let (me, rescued, child) = outcome.unwrap();
        assert!(rescued, "round {round}: the child stayed in the LIFO slot");
        let child_worker = rt.block_on(child).unwrap();
        assert_ne!(
            child_worker, me,
            "round {round}: the child cannot have run on the blocked worker"
        );
        assert!(ran.load(SeqCst));
        assert!(
            rt.stats()
                .workers
                .iter()
                .map(|w| w.lifo_steals)
                .sum::<u64>()
                >= 1
        );
    }
}

/// One link of a chain of spawns that runs until `strand` is set: then the link spawns a
/// child into its LIFO slot and blocks its worker until the child has run elsewhere, and
/// sends its worker and whether the child ran.
fn link(strand: Arc<AtomicBool>, ran: Arc<AtomicBool>, tx: mpsc::Sender<(Option<usize>, bool)>) {
    if !strand.load(SeqCst) {
        drop(magpie::spawn(async move { link(strand, ran, tx) }));
        return;
    }
    let flag = ran.clone();
    drop(magpie::spawn(async move { flag.store(true, SeqCst) }));
    let rescued = spin_until(&ran);
    tx.send((magpie::current_worker_index(), rescued)).unwrap();
}

/// While a chain of spawns runs on one worker, the other parks as the LIFO watcher (R7 in
/// the sleep protocol): the chain's fills of the LIFO slot wake nobody. A task stranded in
/// the slot then (its owner blocked in the poll that spawned it) is still taken by the
/// watcher, at one of its looks.
#[test]
fn a_task_stranded_while_a_worker_watches_the_lifo_slots_is_rescued() {
    for round in 0..10 {
        let rt = common::runtime_without_monitor(2);
        let strand = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let chain = (strand.clone(), ran.clone());
        drop(rt.spawn(async move { link(chain.0, chain.1, tx) }));
        // The other worker parks as the watcher while the chain runs, and looks.
        let deadline = Instant::now() + DEADLINE;
        let watch_looks = |rt: &magpie::Runtime| {
            rt.stats()
                .workers
                .iter()
                .map(|w| w.watch_looks)
                .sum::<u64>()
        };
        while watch_looks(&rt) == 0 {
            assert!(
                Instant::now() < deadline,
                "round {round}: no worker watched"
            );
            std::thread::yield_now();
        }
        strand.store(true, SeqCst);
        let (blocked, rescued) = rx.recv_timeout(DEADLINE).unwrap();
        assert!(rescued, "round {round}: the child stayed in the LIFO slot");
        assert!(ran.load(SeqCst));
        assert!(blocked.is_some());
        let stats = rt.stats();
        assert!(
            stats.workers.iter().map(|w| w.lifo_steals).sum::<u64>() >= 1,
            "round {round}: {stats:?}"
        );
    }
}

/// A worker waiting inside `join` for a stolen half runs only jobs: a task queued on it
/// meanwhile runs elsewhere, or on it after the `join` returns, never inside the wait.
#[test]
fn a_worker_waiting_in_join_runs_no_tasks() {
    for _ in 0..10 {
        let rt = runtime(2);
        let join_returned = Arc::new(AtomicBool::new(false));
        let spawned = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let flags = (join_returned.clone(), spawned.clone());
        let handle = rt.spawn(async move {
            let (join_returned, spawned) = flags;
            let waiter = magpie::current_worker_index().unwrap();
            let seen = join_returned.clone();
            magpie::join(
                || {
                    // Queue a task on this worker while the other half runs elsewhere.
                    drop(magpie::spawn(async move {
                        tx.send((magpie::current_worker_index().unwrap(), seen.load(SeqCst)))
                            .unwrap();
                    }));
                    spawned.store(true, SeqCst);
                },
                || {
                    // Keep the stolen half busy for a while, so the waiter does wait.
                    if spin_until(&spawned) {
                        let until = Instant::now() + Duration::from_millis(20);
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                },
            );
            join_returned.store(true, SeqCst);
            waiter
        });
        let waiter = rt.block_on(handle).unwrap();
        let (ran_on, join_had_returned) = rx.recv_timeout(DEADLINE).unwrap();
        assert!(
            ran_on != waiter || join_had_returned,
            "the task ran on worker {waiter} while it waited inside join"
        );
    }
}

/// Two tasks that wake each other run back to back through the LIFO slot, and the slot
/// never runs more than 3 in a row: a third task queued behind them still gets its turns.
#[test]
fn ping_pong_uses_the_lifo_slot_without_starving_the_ring() {
    let rt = runtime(1);
    let rounds = 1_000;
    let bystander_turns = Arc::new(AtomicUsize::new(0));
    let turns = bystander_turns.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_bystander = stop.clone();
    let bystander = rt.spawn(async move {
        while !stop_bystander.load(SeqCst) {
            turns.fetch_add(1, SeqCst);
            magpie::task::yield_now().await;
        }
    });
    let played = rt.block_on(rt.spawn(async move {
        for _ in 0..rounds {
            let (tx, rx) = futures::channel::oneshot::channel();
            drop(magpie::spawn(async move { tx.send(()).unwrap() }));
            rx.await.unwrap();
        }
        rounds
    }));
    stop.store(true, SeqCst);
    rt.block_on(bystander).unwrap();
    assert_eq!(played.unwrap(), rounds);
    common::quiesce(&rt);
    let stats = rt.stats();
    assert!(stats.workers[0].lifo_hits >= rounds as u64 / 2, "{stats:?}");
    // The bystander yields to the back of the ring; with at most 3 LIFO polls in a row it
    // gets a turn at least every few rounds.
    assert!(
        bystander_turns.load(SeqCst) >= rounds / 4,
        "the ring starved behind the LIFO slot: {} turns",
        bystander_turns.load(SeqCst)
    );
}

/// Tasks spawned from outside go through the inject queue and are counted as pulls; tasks
/// spawned in bursts on one worker are stolen by the other.
#[test]
fn counters_describe_where_tasks_came_from() {
    let rt = runtime(2);
    let handles: Vec<_> = (0..1_000).map(|i| rt.spawn(async move { i })).collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.join().unwrap(), i);
    }
    common::quiesce(&rt);
    let stats = rt.stats();
    assert!(stats.workers.iter().map(|w| w.inject_pulls).sum::<u64>() >= 1);
    assert_eq!(stats.tasks_executed(), 1_000, "{stats:?}");
    assert!(stats.tasks_polled() >= 1_000);
    for w in &stats.workers {
        assert!((8..=255).contains(&w.global_queue_interval), "{w:?}");
    }
    assert_eq!(stats.tasks_alive, 0);
}

/// A burst larger than the ring (256) overflows half of it to the inject queue, and every
/// task still runs exactly once.
#[test]
fn a_burst_overflows_the_ring_and_nothing_is_lost() {
    let rt = runtime(1);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    rt.block_on(rt.spawn(async move {
        let handles: Vec<_> = (0..5_000)
            .map(|_| {
                let c = c.clone();
                magpie::spawn(async move {
                    c.fetch_add(1, SeqCst);
                })
            })
            .collect();
        for handle in handles {
            handle.await.unwrap();
        }
    }))
    .unwrap();
    assert_eq!(count.load(SeqCst), 5_000);
    assert!(rt.stats().workers[0].overflows >= 1);
}

/// A worker whose idle stretches keep parking without finding work searches fewer rounds
/// before it parks (`IdleBudget` in `runtime/worker/idle.rs`): 48 while searching pays, down
/// to 8. Requests one at a time into a parked pool, far apart, cost one stretch each; the
/// failed searches of the last requests' stretches show how many rounds they made (one per
/// round, and one before the first: 49 a stretch without the budget, 9 with it).
///
/// The gap between requests is the workload's shape, not a synchronization: each round
/// waits for every worker to park whatever the gap. But it must be longer than any whole
/// stretch lasted, since a park shorter than one brings every round back (that whole
/// stretch would have found the request). A stretch lasts microseconds in a plain build and
/// can last tens of milliseconds under valgrind on a loaded machine (CI ran five valgrind
/// processes on 2 CPUs and saw resets with a fixed 20 ms gap), so the gap is twice the
/// longest time any earlier request took from its spawn until every worker parked again,
/// which contains every stretch that request caused.
#[test]
fn a_pool_that_wakes_for_lone_requests_searches_less_before_it_parks() {
    const REQUESTS: usize = 12;
    const MEASURED: usize = 4;
    let rt = runtime(2);
    let parked = |rt: &magpie::Runtime| rt.stats().workers.iter().all(|w| w.parks > w.unparks);
    let failed_steals =
        |rt: &magpie::Runtime| -> u64 { rt.stats().workers.iter().map(|w| w.failed_steals).sum() };
    let mut per_request = Vec::new();
    let mut longest_settle = Duration::ZERO;
    for i in 0..REQUESTS {
        std::thread::sleep(Duration::from_millis(20).max(2 * longest_settle));
        // Not a sleep: a wait for a state, which the watchdog of `eventually` bounds.
        common::eventually("every worker parks", || parked(&rt));
        let before = failed_steals(&rt);
        let (tx, rx) = mpsc::channel();
        let spawned = std::time::Instant::now();
        drop(rt.spawn(async move { tx.send(i).unwrap() }));
        assert_eq!(rx.recv_timeout(DEADLINE), Ok(i));
        common::eventually("every worker parks again", || parked(&rt));
        longest_settle = longest_settle.max(spawned.elapsed());
        per_request.push(failed_steals(&rt) - before);
    }
    let last: u64 = per_request[REQUESTS - MEASURED..].iter().sum();
    // 9 a request at the floor; twice that allows a request that woke both workers.
    assert!(
        last <= 18 * MEASURED as u64,
        "failed searches per request: {per_request:?} (longest settle {longest_settle:?})"
    );
}

/// One worker with a backlog from outside runs it in arrival order, and pulls it from the
/// inject queue only when its ring runs dry, in batches of half the ring. Its periodic
/// fairness turn used to pull too, every 8 tasks of this length, with a full ring: a few
/// tasks a pull, 207 pulls for this backlog in one run.
#[test]
fn one_worker_runs_a_backlog_from_outside_in_order_in_few_pulls() {
    const TASKS: usize = 2_000;
    // Without the stall monitor, which would hand a held worker's queued tasks on.
    let rt = common::runtime_without_monitor(1);
    // Hold the worker until the whole backlog is queued, so the test does not depend on
    // how fast this thread submits.
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    rt.execute(move || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    started_rx.recv_timeout(DEADLINE).unwrap();
    let before = rt.stats().workers[0].inject_pulls;
    let order = Arc::new(std::sync::Mutex::new(Vec::with_capacity(TASKS)));
    rt.execute_batch((0..TASKS).map(|i| {
        let order = order.clone();
        move || {
            // Long enough that the adaptive interval falls to its floor of 8 tasks.
            std::thread::sleep(Duration::from_micros(100));
            order.lock().unwrap().push(i);
        }
    }));
    release_tx.send(()).unwrap();
    rt.wait_idle();
    let order = order.lock().unwrap();
    assert_eq!(*order, (0..TASKS).collect::<Vec<_>>());
    let pulls = rt.stats().workers[0].inject_pulls - before;
    // A pull takes at most half the ring (128 tasks): 16 for the backlog; pulls of half
    // that size would be 32.
    assert!(
        pulls <= TASKS.div_ceil(64) as u64,
        "{pulls} pulls for {TASKS} tasks"
    );
}
