//! Ecosystem futures run unchanged on magpie's tasks: `futures`' channels, combinators and
//! streams, and `async-channel`. They know nothing of magpie: they only see `Waker`s, so each
//! test here is a check that magpie's wakers wake (from workers, from other tasks and from
//! plain threads) and that nothing is lost under contention.

mod async_support;

use std::sync::Arc;

use async_support::{runtime, watchdog, Slots};
use futures::channel::{mpsc, oneshot};
use futures::future::{self, Either};
use futures::stream::{self, FuturesUnordered, StreamExt};
use futures::{FutureExt, SinkExt};
use magpie::task::{JoinError, JoinHandle};

/// Waits on this thread for `handle`'s result, outside any runtime.
fn wait<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures::executor::block_on(handle)
}

// ---------------------------------------------------------------------------------------------
// futures::channel
// ---------------------------------------------------------------------------------------------

#[test]
fn mpsc_many_producers_one_consumer() {
    let _guard = watchdog("mpsc_many_producers_one_consumer");
    let rt = runtime(2);
    const PRODUCERS: usize = 16;
    const PER_PRODUCER: usize = 1000;
    // Capacity 1 (plus one slot per sender): producers wait for the consumer all the time.
    let (tx, mut rx) = mpsc::channel::<(usize, usize)>(1);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let mut tx = tx.clone();
            rt.spawn(async move {
                for i in 0..PER_PRODUCER {
                    tx.send((p, i)).await.unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = rt.spawn(async move {
        let seen = Slots::new(PRODUCERS * PER_PRODUCER);
        let mut next = [0usize; PRODUCERS];
        while let Some((p, i)) = rx.next().await {
            // Each producer's items arrive in its order.
            assert_eq!(i, next[p], "producer {p} out of order");
            next[p] += 1;
            seen.bump(p * PER_PRODUCER + i);
        }
        seen
    });
    for producer in producers {
        wait(producer).unwrap();
    }
    wait(consumer).unwrap().assert_all(1, "items received");
}

#[test]
fn unbounded_mpsc_from_plain_threads_into_a_task() {
    let _guard = watchdog("unbounded_mpsc_from_plain_threads_into_a_task");
    let rt = runtime(2);
    let (tx, rx) = mpsc::unbounded::<usize>();
    let consumer = rt.spawn(rx.fold(0usize, |sum, v| async move { sum + v }));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..1000 {
                    tx.unbounded_send(t * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(wait(consumer).unwrap(), (0..4000).sum::<usize>());
}

#[test]
fn oneshot_ping_pong_between_tasks() {
    let _guard = watchdog("oneshot_ping_pong_between_tasks");
    const ROUNDS: u64 = 2000;
    for workers in [1, 2] {
        let rt = runtime(workers);
        // Each ping carries a fresh oneshot sender for its pong: every round is two wakeups,
        // one each way.
        let (mut ping_tx, mut ping_rx) = mpsc::channel::<(u64, oneshot::Sender<u64>)>(0);
        let ponger = rt.spawn(async move {
            let mut answered = 0u64;
            while let Some((v, reply)) = ping_rx.next().await {
                reply.send(v + 1).unwrap();
                answered += 1;
            }
            answered
        });
        let pinger = rt.spawn(async move {
            let mut v = 0;
            for _ in 0..ROUNDS {
                let (reply_tx, reply_rx) = oneshot::channel();
                ping_tx.send((v, reply_tx)).await.unwrap();
                v = reply_rx.await.unwrap();
            }
            v
        });
        assert_eq!(wait(pinger).unwrap(), ROUNDS, "{workers} workers");
        assert_eq!(wait(ponger).unwrap(), ROUNDS, "{workers} workers");
    }
}

#[test]
fn oneshot_from_a_plain_thread_wakes_a_task() {
    let _guard = watchdog("oneshot_from_a_plain_thread_wakes_a_task");
    let rt = runtime(2);
    let mut senders = Vec::new();
    let handles: Vec<_> = (0..1000u32)
        .map(|_| {
            let (tx, rx) = oneshot::channel::<u32>();
            senders.push(tx);
            rt.spawn(async move { rx.await.unwrap() * 2 })
        })
        .collect();
    let thread = std::thread::spawn(move || {
        for (i, tx) in senders.into_iter().enumerate() {
            tx.send(i as u32).unwrap();
        }
    });
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(wait(handle).unwrap(), i as u32 * 2);
    }
    thread.join().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Combinators
// ---------------------------------------------------------------------------------------------

#[test]
fn join_all_of_join_handles_and_of_plain_futures() {
    let _guard = watchdog("join_all_of_join_handles_and_of_plain_futures");
    let rt = runtime(2);
    let total = wait(rt.spawn(async {
        let handles: Vec<_> = (0..1000u64)
            .map(|i| magpie::spawn(async move { i }))
            .collect();
        let spawned: u64 = future::join_all(handles)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .sum();
        let plain: u64 = future::join_all((0..1000u64).map(|i| async move {
            magpie::task::yield_now().await;
            i
        }))
        .await
        .into_iter()
        .sum();
        let (a, b) = future::join(async { 1 }, magpie::spawn(async { 2 })).await;
        spawned + plain + a + b.unwrap()
    }))
    .unwrap();
    assert_eq!(total, 2 * 999 * 1000 / 2 + 3);
}

#[test]
fn try_join_all_stops_at_the_first_error() {
    let _guard = watchdog("try_join_all_stops_at_the_first_error");
    let rt = runtime(2);
    let result = wait(rt.spawn(future::try_join_all((0..10).map(|i| async move {
        if i == 7 {
            Err(i)
        } else {
            Ok(i)
        }
    }))))
    .unwrap();
    assert_eq!(result, Err(7));
}

#[test]
fn select_picks_the_finished_side_and_returns_the_other() {
    let _guard = watchdog("select_picks_the_finished_side_and_returns_the_other");
    let rt = runtime(2);
    let (tx_a, rx_a) = oneshot::channel::<&'static str>();
    let (tx_b, rx_b) = oneshot::channel::<&'static str>();
    let handle = rt.spawn(async move {
        match future::select(rx_a, rx_b).await {
            Either::Left(_) => panic!("a was never sent"),
            Either::Right((b, pending_a)) => {
                // The loser is handed back, still usable.
                let a = pending_a.await;
                (b.unwrap(), a.unwrap())
            }
        }
    });
    tx_b.send("b").unwrap();
    // Sent only after `b`: if select had picked `a`, the task would have panicked first.
    let sender = rt.spawn(async move { tx_a.send("a").unwrap() });
    wait(sender).unwrap();
    assert_eq!(wait(handle).unwrap(), ("b", "a"));

    // select! over a JoinHandle and a channel, and select_ok / select_all over handles.
    let rt2 = runtime(1);
    let (tx, rx) = oneshot::channel::<u8>();
    let out = wait(rt2.spawn(async move {
        let mut task = magpie::spawn(async { 3u8 });
        let mut rx = rx;
        let first = futures::select_biased! {
            r = rx => r.unwrap(),
            t = (&mut task).fuse() => t.unwrap(),
        };
        drop(tx);
        let handles: Vec<_> = (0..5u8).map(|i| magpie::spawn(async move { i })).collect();
        let (r, _index, rest) = future::select_all(handles).await;
        let rest_sum: u8 = future::join_all(rest)
            .await
            .into_iter()
            .map(Result::unwrap)
            .sum();
        (first, r.unwrap() + rest_sum)
    }))
    .unwrap();
    assert_eq!(out, (3, 10));
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

#[test]
fn stream_combinators_with_spawned_work() {
    let _guard = watchdog("stream_combinators_with_spawned_work");
    let rt = runtime(2);
    let (evens, concurrent_sum, unordered_sum) = wait(rt.spawn(async {
        // map / filter / then / collect, with a task per element.
        let evens: Vec<u64> = stream::iter(0..200u64)
            .filter(|v| future::ready(v % 2 == 0))
            .then(|v| async move { magpie::spawn(async move { v * 10 }).await.unwrap() })
            .map(|v| v / 10)
            .collect()
            .await;
        // buffer_unordered: up to 16 spawned tasks in flight.
        let mut concurrent: Vec<u64> = stream::iter(0..500u64)
            .map(|v| magpie::spawn(async move { v }))
            .buffer_unordered(16)
            .map(Result::unwrap)
            .collect()
            .await;
        concurrent.sort_unstable();
        assert_eq!(concurrent, (0..500).collect::<Vec<_>>());
        // FuturesUnordered of handles.
        let unordered: FuturesUnordered<_> = (0..300u64)
            .map(|v| magpie::spawn(async move { v }))
            .collect();
        let unordered_sum: u64 = unordered
            .map(Result::unwrap)
            .fold(0, |a, v| async move { a + v })
            .await;
        (evens, concurrent.iter().sum::<u64>(), unordered_sum)
    }))
    .unwrap();
    assert_eq!(evens, (0..200).step_by(2).collect::<Vec<u64>>());
    assert_eq!(concurrent_sum, (0..500).sum::<u64>());
    assert_eq!(unordered_sum, (0..300).sum::<u64>());
}

#[test]
fn for_each_concurrent_over_a_channel() {
    let _guard = watchdog("for_each_concurrent_over_a_channel");
    let rt = runtime(2);
    let seen = Slots::new(2000);
    let s = seen.clone();
    let (mut tx, rx) = mpsc::channel::<usize>(8);
    let consumer = rt.spawn(async move {
        rx.for_each_concurrent(32, |i| {
            let s = s.clone();
            async move {
                magpie::task::yield_now().await;
                s.bump(i);
            }
        })
        .await
    });
    let producer = rt.spawn(async move {
        for i in 0..2000 {
            tx.send(i).await.unwrap();
        }
    });
    wait(producer).unwrap();
    wait(consumer).unwrap();
    seen.assert_all(1, "items handled");
}

// ---------------------------------------------------------------------------------------------
// async-channel
// ---------------------------------------------------------------------------------------------

#[test]
fn async_channel_many_producers_many_consumers() {
    let _guard = watchdog("async_channel_many_producers_many_consumers");
    for workers in [1, 2, 4] {
        let rt = runtime(workers);
        const PRODUCERS: usize = 8;
        const CONSUMERS: usize = 8;
        const PER_PRODUCER: usize = 2000;
        let (tx, rx) = async_channel::bounded::<usize>(4);
        let seen = Slots::new(PRODUCERS * PER_PRODUCER);
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let (rx, seen) = (rx.clone(), seen.clone());
                rt.spawn(async move {
                    let mut received = 0usize;
                    while let Ok(item) = rx.recv().await {
                        seen.bump(item);
                        received += 1;
                    }
                    received
                })
            })
            .collect();
        drop(rx);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let tx = tx.clone();
                rt.spawn(async move {
                    for i in 0..PER_PRODUCER {
                        tx.send(p * PER_PRODUCER + i).await.unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for producer in producers {
            wait(producer).unwrap();
        }
        let received: usize = consumers.into_iter().map(|c| wait(c).unwrap()).sum();
        assert_eq!(received, PRODUCERS * PER_PRODUCER, "{workers} workers");
        seen.assert_all(1, &format!("items received on {workers} workers"));
    }
}

#[test]
fn async_channel_between_a_plain_thread_and_tasks() {
    let _guard = watchdog("async_channel_between_a_plain_thread_and_tasks");
    let rt = runtime(2);
    let (tx, rx) = async_channel::bounded::<u64>(1);
    let (done_tx, done_rx) = async_channel::unbounded::<u64>();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (rx, done_tx) = (rx.clone(), done_tx.clone());
            rt.spawn(async move {
                while let Ok(v) = rx.recv().await {
                    done_tx.send(v * v).await.unwrap();
                }
            })
        })
        .collect();
    drop((rx, done_tx));
    // A plain thread feeds the tasks with blocking sends.
    let feeder = std::thread::spawn(move || {
        for v in 0..1000u64 {
            tx.send_blocking(v).unwrap();
        }
    });
    let mut sum = 0;
    while let Ok(v) = done_rx.recv_blocking() {
        sum += v;
    }
    feeder.join().unwrap();
    for worker in workers {
        wait(worker).unwrap();
    }
    assert_eq!(sum, (0..1000u64).map(|v| v * v).sum::<u64>());
}

#[test]
fn a_futures_mutex_under_contention() {
    let _guard = watchdog("a_futures_mutex_under_contention");
    let rt = runtime(2);
    let counter = Arc::new(futures::lock::Mutex::new(0u64));
    let handles: Vec<_> = (0..100)
        .map(|_| {
            let counter = counter.clone();
            rt.spawn(async move {
                for _ in 0..100 {
                    let mut guard = counter.lock().await;
                    let v = *guard;
                    // Hold the lock across a yield: the others must queue and be woken.
                    magpie::task::yield_now().await;
                    *guard = v + 1;
                }
            })
        })
        .collect();
    for handle in handles {
        wait(handle).unwrap();
    }
    assert_eq!(*futures::executor::block_on(counter.lock()), 10_000);
}
