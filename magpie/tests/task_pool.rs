//! The task pool's submission API: `submit_balanced`, `submit_batch`, `execute` and
//! `execute_batch`, and `Runtime::wait_idle`.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier};

use magpie::Runtime;

mod common;

use common::deadline::Deadline;

/// Occupies every worker of `rt` with a task that holds it until the returned sender is
/// dropped; returns once all of them run.
fn occupy_all_workers(rt: &Runtime) -> (mpsc::Sender<()>, Vec<magpie::JoinHandle<()>>) {
    let n = rt.num_workers();
    let started = Arc::new(Barrier::new(n + 1));
    let (release, held) = mpsc::channel::<()>();
    let held = Arc::new(std::sync::Mutex::new(held));
    let handles = (0..n)
        .map(|worker| {
            let started = started.clone();
            let held = held.clone();
            rt.submit_to(worker, move || {
                started.wait();
                // Returns when the sender is dropped.
                let _ = held.lock().unwrap().recv();
            })
            .unwrap()
        })
        .collect();
    started.wait();
    (release, handles)
}

#[test]
fn submit_balanced_keeps_two_workers_within_one_task() {
    // Mailbox depths of held workers: the stall monitor would empty the mailboxes.
    let rt = common::runtime_without_monitor(2);
    let (release, blockers) = occupy_all_workers(&rt);
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..201)
        .map(|_| {
            let ran = ran.clone();
            rt.submit_balanced(move || {
                ran.fetch_add(1, SeqCst);
            })
        })
        .collect();
    // Both workers are busy, so every task still waits in a mailbox: with two workers the
    // two choices are both workers, and each task goes to the shorter mailbox.
    let depths: Vec<u64> = rt.stats().workers.iter().map(|w| w.mailbox_depth).collect();
    assert_eq!(depths.iter().sum::<u64>(), 201, "{depths:?}");
    assert!(depths[0].abs_diff(depths[1]) <= 1, "{depths:?}");
    drop(release);
    for h in blockers.into_iter().chain(handles) {
        h.join().unwrap();
    }
    assert_eq!(ran.load(SeqCst), 201);
}

#[test]
fn submit_balanced_spreads_over_many_workers() {
    // Mailbox depths of held workers: the stall monitor would empty the mailboxes.
    let rt = common::runtime_without_monitor(8);
    let (release, blockers) = occupy_all_workers(&rt);
    let handles: Vec<_> = (0..800).map(|i| rt.submit_balanced(move || i)).collect();
    let depths: Vec<u64> = rt.stats().workers.iter().map(|w| w.mailbox_depth).collect();
    assert_eq!(depths.iter().sum::<u64>(), 800, "{depths:?}");
    // The power of two choices keeps the maximum within a few tasks of the mean (100); all
    // tasks on one worker, or a round-robin gone wrong, would be far off.
    let (min, max) = (depths.iter().min().unwrap(), depths.iter().max().unwrap());
    assert!(max - min <= 20, "{depths:?}");
    drop(release);
    let results: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results, (0..800).collect::<Vec<u64>>());
    for h in blockers {
        h.join().unwrap();
    }
}

#[test]
fn wait_idle_waits_for_every_task_including_those_spawned_while_waiting() {
    for workers in [1, 2, 4] {
        let rt = Runtime::builder().worker_threads(workers).build().unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..500 {
            let done = done.clone();
            let task = move || {
                // Each task spawns a second one before it finishes, so the runtime is never
                // idle between the two.
                let done2 = done.clone();
                drop(magpie::submit(move || {
                    done2.fetch_add(1, SeqCst);
                }));
                done.fetch_add(1, SeqCst);
            };
            drop(match i % 3 {
                0 => rt.submit(task),
                1 => rt.submit_balanced(task),
                _ => rt.submit_to(i % workers, task).unwrap(),
            });
        }
        rt.wait_idle();
        assert_eq!(done.load(SeqCst), 1000, "{workers} workers");
        assert_eq!(rt.stats().tasks_alive, 0);
    }
}

#[test]
fn wait_idle_waits_for_async_tasks() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let got = Arc::new(AtomicUsize::new(0));
    let got2 = got.clone();
    drop(rt.spawn(async move {
        got2.store(rx.await.unwrap() as usize, SeqCst);
    }));
    let sender = std::thread::spawn(move || tx.send(42).unwrap());
    rt.wait_idle();
    assert_eq!(got.load(SeqCst), 42);
    sender.join().unwrap();
}

#[test]
fn wait_idle_returns_at_once_when_idle() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    rt.wait_idle();
    assert_eq!(rt.stats().tasks_alive, 0);
}

#[test]
fn wait_idle_on_a_worker_panics() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let result = rt.install(|| panic::catch_unwind(AssertUnwindSafe(|| rt.wait_idle())));
    let payload = result.unwrap_err();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("wait for itself"), "{message}");
}

#[test]
fn tasks_all_submitted_to_worker_0_are_stolen_by_worker_1() {
    // Steals from a held worker: the stall monitor would hand its mailbox to the inject queue.
    let rt = common::runtime_without_monitor(2);
    let holder_index = Arc::new(AtomicUsize::new(usize::MAX));
    let ran_elsewhere = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(Barrier::new(2));
    let (index, flag, started2) = (holder_index.clone(), ran_elsewhere.clone(), started.clone());
    // Holds worker 0 until a task has run on worker 1.
    let holder = rt
        .submit_to(0, move || {
            index.store(magpie::current_worker_index().unwrap(), SeqCst);
            started2.wait();
            while !flag.load(SeqCst) {
                std::thread::yield_now();
            }
        })
        .unwrap();
    started.wait();
    // If worker 1 stole the holder, queue the rest on worker 1 instead: either way, they go
    // to the worker the holder blocks, and only a steal lets any of them run.
    let busy = holder_index.load(SeqCst);
    let others: Vec<_> = (0..100)
        .map(|_| {
            let flag = ran_elsewhere.clone();
            rt.submit_to(busy, move || {
                if magpie::current_worker_index() != Some(busy) {
                    flag.store(true, SeqCst);
                }
            })
            .unwrap()
        })
        .collect();
    holder.join().unwrap();
    for h in others {
        h.join().unwrap();
    }
    rt.wait_idle();
    let stats = rt.stats();
    assert_eq!(stats.tasks_executed(), 101);
    assert!(stats.workers[1 - busy].tasks_stolen > 0, "{stats:?}");
    assert!(stats.steal_rate() > 0.0);
    let per_worker: u64 = stats.workers.iter().map(|w| w.tasks_executed).sum();
    assert_eq!(per_worker, stats.tasks_executed());
}

#[test]
fn parked_time_counts_as_idle_time() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    // Wait (without sleeping) until both workers have parked at least once and been
    // credited with idle time: a worker parks only when it finds nothing to do.
    loop {
        let stats = rt.stats();
        if stats
            .workers
            .iter()
            .all(|w| w.parks > 0 && w.idle_time_ns > 0)
        {
            for w in &stats.workers {
                assert!((0.0..=1.0).contains(&w.utilization()));
                assert!(w.utilization() < 1.0);
            }
            break;
        }
        std::thread::yield_now();
    }
    // Busy and idle time add up to each worker's lifetime, read while the snapshot was
    // taken: after the snapshot's own uptime, before the next snapshot's.
    let stats = rt.stats();
    let next = rt.stats();
    for w in &stats.workers {
        let lifetime = w.busy_time_ns + w.idle_time_ns;
        assert!(
            (stats.uptime_ns..=next.uptime_ns).contains(&lifetime),
            "{lifetime} outside {}..={}",
            stats.uptime_ns,
            next.uptime_ns
        );
    }
}

#[test]
fn submit_batch_runs_every_closure_and_keeps_the_order_of_the_handles() {
    for workers in [1, 2, 3] {
        let rt = Runtime::builder().worker_threads(workers).build().unwrap();
        let handles = rt.submit_batch((0..1000u64).map(|i| move || i * i));
        assert_eq!(handles.len(), 1000);
        let results: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(results, (0..1000u64).map(|i| i * i).collect::<Vec<_>>());
        // From a worker too (it queues the batch for everyone, not in its own ring).
        let handles = rt.install(|| rt.submit_batch((0..100u64).map(|i| move || i + 1)));
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, (1..=100u64).sum());
        // An empty batch is no batch.
        assert!(rt.submit_batch(Vec::<fn() -> u8>::new()).is_empty());
    }
}

#[test]
fn submit_batch_starts_the_first_closures_before_the_batch_is_built() {
    // The 17th closure is built only after one of the first 16 has run: a batch published
    // in one piece at its end would wait here for good (the timeout ends that hang). Each
    // closure is queued as soon as it is built (tests/wide_pools_and_batches.rs checks that
    // later ones are too).
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let (ran, first_ran) = mpsc::channel::<usize>();
    let closures = (0..2000usize).map(|i| {
        if i == 16 {
            let first = first_ran
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("none of the first 16 closures ran while the batch was being built");
            assert!(first < 16);
        }
        let ran = ran.clone();
        move || {
            // Sends after the batch is built find the receiver gone; that is fine.
            let _ = ran.send(i);
            i
        }
    });
    let handles = rt.submit_batch(closures);
    let results: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results, (0..2000).collect::<Vec<_>>());
}

/// An iterator whose lower bound promises more closures than it yields. A size hint is only
/// a hint: the batch sizes its blocks of task cells by it and gives back what it did not use.
struct Overpromises(std::ops::Range<u64>);

impl Iterator for Overpromises {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (1000, None)
    }
}

#[test]
fn submit_batch_survives_a_size_hint_that_overpromises_and_a_handle_kept_past_the_rest() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let mut handles = rt.submit_batch(Overpromises(0..5).map(|i| move || i * 7));
    // One handle outlives the others and the runtime's idle point: its task's block stays
    // until it goes, and its output is still there.
    let kept = handles.pop().unwrap();
    let outputs: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(outputs, [0, 7, 14, 21]);
    rt.wait_idle();
    let more = rt.submit_batch((0..200u64).map(|i| move || i));
    assert_eq!(
        more.into_iter().map(|h| h.join().unwrap()).sum::<u64>(),
        19_900
    );
    assert_eq!(kept.join().unwrap(), 28);
    assert_eq!(rt.stats().tasks_alive, 0);
}

/// The closures a batch's iterator yields before it panics at `fail_at`.
type Closures = Box<dyn Iterator<Item = Box<dyn FnOnce() + Send>>>;

/// A batch (`submit` hands it to the runtime) whose iterator panics after `fail_at`
/// closures: each was queued as it was built, so all of them run, and none is left live and
/// unqueued for `wait_idle` to wait on for good.
fn closures_built_before_the_iterator_panics_run(fail_at: usize, submit: fn(&Runtime, Closures)) {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let closures: Closures = Box::new((0..fail_at + 3).map(move |i| {
        if i == fail_at {
            panic!("the iterator fails");
        }
        let ran = counter.clone();
        Box::new(move || {
            ran.fetch_add(1, SeqCst);
        }) as Box<dyn FnOnce() + Send>
    }));
    let err = panic::catch_unwind(AssertUnwindSafe(|| submit(&rt, closures))).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"the iterator fails"));
    let guard = Deadline::new(
        "wait_idle after a batch whose iterator panicked",
        std::time::Duration::from_secs(60),
    );
    rt.wait_idle();
    drop(guard);
    assert_eq!(ran.load(SeqCst), fail_at);
    assert_eq!(rt.stats().tasks_alive, 0);
}

#[test]
fn submit_batch_runs_the_closures_built_before_its_iterator_panics() {
    closures_built_before_the_iterator_panics_run(37, |rt, closures| {
        drop(rt.submit_batch(closures));
    });
}

#[test]
fn submit_batch_delivers_each_panic_to_its_own_handle() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let handles = rt.submit_batch((0..10u32).map(|i| {
        move || {
            if i % 3 == 0 {
                panic!("task {i}");
            }
            i
        }
    }));
    for (i, handle) in (0..10u32).zip(handles) {
        match handle.join() {
            Ok(v) => assert_eq!(v, i),
            Err(e) => {
                assert_eq!(i % 3, 0, "task {i} failed: {e}");
                assert!(e.is_panic());
            }
        }
    }
}

#[test]
fn execute_batch_runs_every_closure_once_and_wait_idle_waits_for_them() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    // Long enough for several shared blocks, and a length the iterator does not announce.
    let n = 1000;
    rt.execute_batch((0..n).filter(|_| true).map(|_| {
        let ran = ran.clone();
        move || {
            ran.fetch_add(1, SeqCst);
        }
    }));
    rt.wait_idle();
    assert_eq!(ran.load(SeqCst), n);
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 0);
    assert_eq!(stats.tasks_spawned(), n as u64);
}

#[test]
fn execute_from_a_worker_queues_locally_and_wait_idle_waits_for_it() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let outer = ran.clone();
    rt.execute(move || {
        assert!(magpie::current_worker_index().is_some());
        for _ in 0..100 {
            let ran = outer.clone();
            // On this task's runtime, from one of its workers.
            magpie::execute(move || {
                ran.fetch_add(1, SeqCst);
            });
        }
    });
    rt.wait_idle();
    assert_eq!(ran.load(SeqCst), 100);
    let stats = rt.stats();
    assert_eq!(stats.tasks_alive, 0);
    // The outer task came from outside; the hundred were spawned on a worker.
    assert_eq!(stats.tasks_spawned_remote, 1);
    assert_eq!(stats.tasks_spawned(), 101);
}

#[test]
fn execute_hands_a_panic_to_the_unhandled_panic_policy() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .unhandled_panic(magpie::UnhandledPanic::ShutdownRuntime)
        .build()
        .unwrap();
    rt.execute(|| panic!("an executed closure failed"));
    // Nobody holds a handle: the policy shuts the runtime down, and `block_on` resumes the
    // panic on its caller.
    let err = panic::catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(std::future::pending::<()>())
    }))
    .unwrap_err();
    assert_eq!(
        err.downcast_ref::<&str>(),
        Some(&"an executed closure failed")
    );
}

/// Counts its drops: a closure holding one is dropped exactly once, run or not.
struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn executed_closures_are_dropped_once_whether_they_ran_or_the_runtime_dropped_them() {
    // No stall monitor: it would start a replacement worker for the held ones.
    let rt = common::runtime_without_monitor(2);
    let (release, blockers) = occupy_all_workers(&rt);
    let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let n = 200;
    rt.execute_batch((0..n).map(|_| {
        let (ran, guard) = (ran.clone(), CountDrop(dropped.clone()));
        move || {
            let _guard = guard;
            ran.fetch_add(1, SeqCst);
        }
    }));
    // Every closure is queued behind the blockers; the runtime's drop cancels whatever has
    // not run by the time the blockers end.
    assert_eq!(ran.load(SeqCst), 0);
    drop(release);
    drop(blockers);
    drop(rt);
    assert_eq!(dropped.load(SeqCst), n);
    assert!(ran.load(SeqCst) <= n);
}

#[test]
fn execute_batch_runs_the_closures_built_before_its_iterator_panics() {
    closures_built_before_the_iterator_panics_run(21, |rt, closures| rt.execute_batch(closures));
}
