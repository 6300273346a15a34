//! Stress: async tasks across worker counts, with exact accounting. Runs in debug with
//! `cargo test` and again in release (larger sizes) from `scripts/test.sh`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};

const WORKER_COUNTS: [usize; 5] = [1, 2, 3, 4, 8];

fn runtime(workers: usize) -> magpie::Runtime {
    magpie::Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("runtime")
}

fn scale(debug: usize, release: usize) -> usize {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// Counts its polls and its drop.
struct Counted {
    polls: Arc<AtomicUsize>,
    drops: Arc<AtomicUsize>,
    ready_after: usize,
    seen: usize,
}

impl Future for Counted {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls.fetch_add(1, SeqCst);
        self.seen += 1;
        if self.seen > self.ready_after {
            Poll::Ready(self.seen)
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// A tree of tasks spawning tasks: every task runs to completion exactly once, each future
/// is polled exactly as often as it asks, and each is dropped exactly once.
#[test]
fn spawn_trees_account_exactly_on_every_worker_count() {
    let width = scale(8, 16);
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let polls = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let (p, d) = (polls.clone(), drops.clone());
        let total = rt.block_on(async move {
            let mut outer = Vec::new();
            for i in 0..width {
                let (p, d) = (p.clone(), d.clone());
                outer.push(magpie::spawn(async move {
                    let inner: Vec<_> = (0..width)
                        .map(|j| {
                            magpie::spawn(Counted {
                                polls: p.clone(),
                                drops: d.clone(),
                                ready_after: (i + j) % 4,
                                seen: 0,
                            })
                        })
                        .collect();
                    let mut sum = 0;
                    for handle in inner {
                        sum += handle.await.unwrap();
                    }
                    sum
                }));
            }
            let mut sum = 0;
            for handle in outer {
                sum += handle.await.unwrap();
            }
            sum
        });
        let expected_polls: usize = (0..width)
            .flat_map(|i| (0..width).map(move |j| (i + j) % 4 + 1))
            .sum();
        assert_eq!(total, expected_polls, "{workers} workers");
        assert_eq!(polls.load(SeqCst), expected_polls, "{workers} workers");
        assert_eq!(drops.load(SeqCst), width * width, "{workers} workers");
        assert_eq!(rt.stats().tasks_alive, 0);
    }
}

/// Tasks woken from many foreign threads at once, over channels: every message arrives.
#[test]
fn foreign_wakes_from_many_threads_on_every_worker_count() {
    let messages = scale(200, 5_000);
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let senders = 4;
        let (tx, rx) = futures::channel::mpsc::unbounded::<usize>();
        let consumer = rt.spawn(async move {
            use futures::StreamExt;
            rx.fold(0usize, |sum, x| async move { sum + x }).await
        });
        let threads: Vec<_> = (0..senders)
            .map(|_| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..messages {
                        tx.unbounded_send(i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for thread in threads {
            thread.join().unwrap();
        }
        let sum = consumer.join().unwrap();
        assert_eq!(
            sum,
            senders * messages * (messages - 1) / 2,
            "{workers} workers"
        );
    }
}

/// Tasks that run fork-join code, spawned from outside in a burst, with more tasks than the
/// ring holds: all finish with the right answer.
#[test]
fn tasks_running_joins_on_every_worker_count() {
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    let tasks = scale(300, 2_000);
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let handles: Vec<_> = (0..tasks)
            .map(|i| rt.spawn(async move { fib(10 + (i % 5) as u64) }))
            .collect();
        for (i, handle) in handles.into_iter().enumerate() {
            let n = 10 + (i % 5) as u64;
            let expected = [55, 89, 144, 233, 377][(n - 10) as usize];
            assert_eq!(handle.join().unwrap(), expected, "{workers} workers");
        }
    }
}

/// Spawns a chain: each link spawns the next and then finishes, so the live tasks move
/// from one shard of the live list to another while `wait_idle` scans them.
fn spawn_chain(links: usize, done: Arc<AtomicUsize>) {
    if links == 0 {
        return;
    }
    drop(magpie::spawn(async move {
        spawn_chain(links - 1, done.clone());
        done.fetch_add(1, SeqCst);
    }));
}

/// `wait_idle` while chains of tasks hand their liveness from parent to child: it returns
/// only when every link of every chain has run, round after round. A scan of the live
/// counts that read each shard once could miss a child spawned into a shard it had
/// already read (see `task::owned::all_idle`). That window is a few nanoseconds wide and
/// this test did not hit it in 150,000 rounds against such a scan; the unit test
/// `all_idle_sees_a_child_linked_behind_the_scan` replays that interleaving, and shuttle's
/// `wait_idle` scenario and the loom model
/// `loom_idle_wait_scan_sees_a_child_spawned_across_shards` search for it. This one keeps
/// the behaviour covered on real threads.
#[test]
fn wait_idle_waits_for_spawn_chains_on_every_worker_count() {
    const LINKS: usize = 16;
    let rounds = scale(50, 500);
    for workers in WORKER_COUNTS {
        let rt = runtime(workers);
        let done = Arc::new(AtomicUsize::new(0));
        for round in 1..=rounds {
            for _ in 0..workers {
                let done = done.clone();
                drop(rt.spawn(async move { spawn_chain(LINKS, done) }));
            }
            rt.wait_idle();
            assert_eq!(
                done.load(SeqCst),
                round * workers * LINKS,
                "{workers} workers, round {round}"
            );
        }
    }
}

/// Runtimes dropped while tasks are pending, queued and running, many times over: every
/// future is dropped exactly once and every handle resolves.
#[test]
fn shutdown_under_load_on_every_worker_count() {
    let tasks = scale(500, 5_000);
    for workers in WORKER_COUNTS {
        for _ in 0..3 {
            let rt = runtime(workers);
            let drops = Arc::new(AtomicUsize::new(0));
            let handles: Vec<_> = (0..tasks)
                .map(|i| {
                    rt.spawn(Counted {
                        polls: Arc::new(AtomicUsize::new(0)),
                        drops: drops.clone(),
                        // Some finish, most keep yielding until the runtime goes away.
                        ready_after: if i % 10 == 0 { 1 } else { usize::MAX },
                        seen: 0,
                    })
                })
                .collect();
            drop(rt);
            assert_eq!(drops.load(SeqCst), tasks, "{workers} workers");
            for handle in handles {
                match handle.join() {
                    Ok(_) => {}
                    Err(err) => assert!(err.is_cancelled(), "{err:?}"),
                }
            }
        }
    }
}

/// Tasks that wake themselves a few times, from every submission path, while another
/// thread keeps changing the active worker count: each future is polled to completion and
/// dropped exactly once, and the statistics account for every task.
#[test]
fn active_worker_changes_under_load_lose_nothing() {
    for max in WORKER_COUNTS {
        let rt = magpie::Runtime::builder()
            .worker_threads(1)
            .max_workers(max)
            .build()
            .expect("runtime");
        let tasks = scale(2_000, 50_000);
        let polls = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut n = 0;
                while !done.load(SeqCst) {
                    rt.set_active_workers(1 + n % max).unwrap();
                    n += 1;
                    std::thread::yield_now();
                }
            });
            let handles: Vec<_> = (0..tasks)
                .map(|i| {
                    let future = Counted {
                        polls: polls.clone(),
                        drops: drops.clone(),
                        ready_after: i % 4,
                        seen: 0,
                    };
                    match i % 3 {
                        0 => rt.spawn(future),
                        1 => rt.spawn(async move {
                            // Spawned from a worker: its local queues.
                            magpie::spawn(future).await.unwrap()
                        }),
                        _ => {
                            // A closure submitted to a chosen (maybe retired) worker spawns
                            // it there.
                            let submitted = rt
                                .submit_to(i % max, move || magpie::spawn(future))
                                .unwrap();
                            rt.spawn(async move { submitted.await.unwrap().await.unwrap() })
                        }
                    }
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), i % 4 + 1, "task {i} on {max} workers");
            }
            done.store(true, SeqCst);
        });
        rt.wait_idle();
        let expected_polls: usize = (0..tasks).map(|i| i % 4 + 1).sum();
        assert_eq!(polls.load(SeqCst), expected_polls, "{max} workers");
        assert_eq!(drops.load(SeqCst), tasks, "{max} workers");
        let stats = rt.stats();
        // One task per future; one more for the spawner of every second kind, two more
        // (the submitted closure and the waiting task) for every third kind.
        let extra: usize = (0..tasks).map(|i| [0, 1, 2][i % 3]).sum();
        assert_eq!(
            stats.tasks_executed(),
            (tasks + extra) as u64,
            "{max} workers"
        );
        assert_eq!(stats.tasks_alive, 0);
    }
}
