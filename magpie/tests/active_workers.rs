//! `Runtime::set_active_workers`: shrinking and growing under load, with exact accounting.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier};

use magpie::Runtime;

mod common;
use common::Ledger;

#[test]
fn out_of_range_counts_are_errors_and_change_nothing() {
    let rt = Runtime::builder()
        .worker_threads(2)
        .max_workers(3)
        .build()
        .unwrap();
    for bad in [0, 4, usize::MAX] {
        let err = rt.set_active_workers(bad).unwrap_err();
        assert_eq!((err.requested(), err.max()), (bad, 3));
        assert!(err.to_string().contains("use 1 to 3"), "{err}");
    }
    assert_eq!(rt.active_workers(), 2);
    assert_eq!(rt.stats().active_workers, 2);
}

#[test]
fn max_workers_below_worker_threads_is_a_build_error() {
    let err = Runtime::builder()
        .worker_threads(3)
        .max_workers(2)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            magpie::BuildError::MaxWorkersBelowWorkers { workers: 3, max: 2 }
        ),
        "{err:?}"
    );
}

#[test]
fn workers_beyond_the_active_count_take_no_work() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_workers(3)
        .build()
        .unwrap();
    let ledger = Ledger::new(300);
    for i in 0..300 {
        let ledger = ledger.clone();
        // Every way of submitting, including naming an inactive worker.
        let task = move || ledger.ran(i);
        drop(match i % 3 {
            0 => rt.submit(task),
            1 => rt.submit_balanced(task),
            _ => rt.submit_to(1 + i % 2, task).unwrap(),
        });
    }
    rt.install(|| magpie::join(|| (), || ()));
    rt.wait_idle();
    ledger.assert_each_once();
    let stats = rt.stats();
    assert_eq!(stats.active_workers, 1);
    assert!(stats.workers[0].active && !stats.workers[1].active && !stats.workers[2].active);
    assert_eq!(stats.workers[0].tasks_executed, 300);
    for w in &stats.workers[1..] {
        assert_eq!((w.tasks_executed, w.jobs_executed), (0, 0), "{w:?}");
    }
}

#[test]
fn growing_wakes_the_new_workers() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .max_workers(3)
        .build()
        .unwrap();
    rt.set_active_workers(3).unwrap();
    assert_eq!(rt.active_workers(), 3);
    // Three tasks that can only finish if three workers run them at the same time.
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let barrier = barrier.clone();
            rt.submit(move || {
                barrier.wait();
                magpie::current_worker_index().unwrap()
            })
        })
        .collect();
    let mut workers: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    workers.sort();
    assert_eq!(workers, [0, 1, 2]);
}

#[test]
fn shrinking_hands_queued_tasks_to_the_remaining_workers() {
    let rt = Runtime::builder().worker_threads(2).build().unwrap();
    let ledger = Ledger::new(2000);
    let started = Arc::new(Barrier::new(2));
    let (release, held) = mpsc::channel::<()>();
    // Worker 1 queues 1000 tasks on its own ring and LIFO slot and 1000 in its mailbox,
    // then is held until it has been told to retire.
    let spawner = {
        let ledger = ledger.clone();
        let started = started.clone();
        rt.submit_to(1, move || {
            for i in 0..1000 {
                let ledger = ledger.clone();
                drop(magpie::spawn(async move { ledger.ran(i) }));
            }
            started.wait();
            let _ = held.recv();
        })
        .unwrap()
    };
    started.wait();
    for i in 1000..2000 {
        let ledger = ledger.clone();
        // Some may land after worker 1 retired: they are forwarded.
        drop(rt.submit_to(1, move || ledger.ran(i)).unwrap());
    }
    rt.set_active_workers(1).unwrap();
    drop(release);
    spawner.join().unwrap();
    rt.wait_idle();
    ledger.assert_each_once();
    let stats = rt.stats();
    assert_eq!(stats.tasks_executed(), 2001);
    assert_eq!(stats.tasks_alive, 0);
    assert_eq!(stats.active_workers, 1);
}

#[test]
fn shrink_and_grow_repeatedly_under_load_loses_nothing() {
    for max in [2, 4] {
        let rt = Runtime::builder().worker_threads(max).build().unwrap();
        let ledger = Ledger::new(20_000);
        let spawned = Arc::new(AtomicUsize::new(0));
        let feeder = {
            let ledger = &ledger;
            let spawned = &spawned;
            let rt = &rt;
            move || {
                for chunk in 0..20 {
                    let base = chunk * 1000;
                    let spawner_ledger = ledger.clone();
                    let spawned = spawned.clone();
                    // A worker spawns half of each chunk (local queues), the rest come
                    // from outside (inject queue and mailboxes).
                    drop(rt.submit(move || {
                        for i in base..base + 500 {
                            let ledger = spawner_ledger.clone();
                            drop(magpie::spawn(async move {
                                magpie::task::yield_now().await;
                                ledger.ran(i);
                            }));
                            spawned.fetch_add(1, SeqCst);
                        }
                    }));
                    for i in base + 500..base + 1000 {
                        let ledger = ledger.clone();
                        drop(rt.submit_to(i % max, move || ledger.ran(i)).unwrap());
                    }
                }
            }
        };
        std::thread::scope(|s| {
            s.spawn(feeder);
            for round in 0..200 {
                rt.set_active_workers(1 + round % max).unwrap();
            }
        });
        rt.set_active_workers(1 + max / 2).unwrap();
        rt.wait_idle();
        ledger.assert_each_once();
        assert_eq!(spawned.load(SeqCst), 10_000);
        let stats = rt.stats();
        // 20 spawners + 20,000 tasks.
        assert_eq!(stats.tasks_executed(), 20_020, "{max} workers");
        assert_eq!(stats.tasks_alive, 0);
    }
}

#[test]
fn dropping_a_runtime_with_parked_workers_shuts_down() {
    let rt = Runtime::builder()
        .worker_threads(3)
        .max_workers(4)
        .build()
        .unwrap();
    rt.set_active_workers(1).unwrap();
    let pending = rt.spawn(std::future::pending::<()>());
    drop(rt);
    assert!(pending.join().unwrap_err().is_cancelled());
}
