//! Loom models of the linked inject queue's races (`linked_inject.rs`).
//!
//! Every model checks exactly-once delivery: each node pushed ends exactly once in a pop, in
//! `close`'s return, or refused back to its pusher; the order of what one consumer takes
//! keeps each producer's push order; and every node taken carries the payload its pusher
//! wrote before the push (a loom cell, so a take that the queue did not order after the
//! write is a reported race, as is a read of a link the pusher wrote).
//!
//! Negative control: `RUSTFLAGS="--cfg loom --cfg magpie_loom_broken"` weakens the push's
//! publishing CAS from Release to Relaxed, and
//! `loom_inject_two_producers_and_a_consumer` must then find the consumer reading a link and
//! a payload that nothing ordered before its read (scripts/loom.sh runs it both ways).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p magpie --lib --release loom_inject`.

use std::ptr::NonNull;

use loom::thread;

use super::linked_inject::{LinkedInject, Refused};
use super::test_nodes::{Node, Nodes};
use crate::sync::atomic::*;
use crate::sync::barrier::Barrier;
use crate::sync::{Arc, AtomicBool};
use crate::util::loom_support::model;

/// Pushes node `i`, filled by this thread; returns whether it was accepted.
fn push(q: &LinkedInject<Node>, nodes: &Nodes, i: usize) -> bool {
    // SAFETY: each model pushes each node once, and `nodes` outlives every use of the queue.
    unsafe { q.push(nodes.fill(i)) }.is_ok()
}

/// Pushes nodes `indices`, filled by this thread, as one batch; returns the refused ones.
fn push_batch(q: &LinkedInject<Node>, nodes: &Nodes, indices: &[usize]) -> Vec<usize> {
    let batch: Vec<NonNull<Node>> = indices.iter().map(|&i| nodes.fill(i)).collect();
    // SAFETY: as in `push`.
    match unsafe { q.push_batch(batch) } {
        Ok(()) => Vec::new(),
        Err(refused) => {
            if matches!(refused, Refused::Linked(_)) {
                // Relaxed: a tally of the model's executions, read after the model.
                RACED_BATCH_REFUSALS.fetch_add(1, Relaxed);
            }
            refused.map(|n| nodes.index_of(n)).collect()
        }
    }
}

/// Pops until empty, appending the indices to `taken`.
fn drain(q: &LinkedInject<Node>, nodes: &Nodes, taken: &mut Vec<usize>) {
    while let Some(node) = q.pop() {
        taken.push(nodes.index_of(node));
    }
}

/// Checks that `before` comes ahead of `after` in `taken` wherever both are there.
fn assert_before(taken: &[usize], before: usize, after: usize) {
    let at = |i| taken.iter().position(|&x| x == i);
    if let (Some(b), Some(a)) = (at(before), at(after)) {
        assert!(b < a, "{after} came out before {before}: {taken:?}");
    }
}

/// Executions in which `close` won the race between a batch's check and its CAS
/// (`Refused::Linked`): `loom_inject_push_races_close` checks that loom explored that path.
static RACED_BATCH_REFUSALS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

#[test]
// The negative control: with `--cfg magpie_loom_broken` the push's CAS is Relaxed, and this
// model must find the consumer's unordered read of a pushed node (scripts/loom.sh).
#[cfg_attr(magpie_loom_broken, should_panic(expected = "Causality violation"))]
fn loom_inject_two_producers_and_a_consumer() {
    // Two producers (two single pushes; a batch of two) race a consumer's pop and pop_batch,
    // which move the stack into the consumers' list while pushes land behind it.
    model(None, || {
        let nodes = Arc::new(Nodes::new(4));
        let q = Arc::new(LinkedInject::new());
        let singles = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || {
                assert!(push(&q, &nodes, 0));
                assert!(push(&q, &nodes, 1));
            })
        };
        let batch = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || assert!(push_batch(&q, &nodes, &[2, 3]).is_empty()))
        };

        let mut taken: Vec<usize> = q.pop().map(|n| nodes.index_of(n)).into_iter().collect();
        let mut out = Vec::new();
        q.pop_batch(2, &mut out);
        taken.extend(out.into_iter().map(|n| nodes.index_of(n)));

        singles.join().unwrap();
        batch.join().unwrap();
        drain(&q, &nodes, &mut taken);
        nodes.check(&taken, true);
        assert_before(&taken, 0, 1);
        assert_before(&taken, 2, 3);
        assert!(q.is_empty());
    });
}

#[test]
fn loom_inject_two_consumers_race_a_producer() {
    // One producer (a single push, then a batch of two) races two consumers (a pop and a
    // pop_batch each): the lock hands the stack to one consumer at a time, and a consumer
    // that finds the list empty while the other refills it comes back with nothing rather
    // than with a node twice.
    model(None, || {
        let nodes = Arc::new(Nodes::new(3));
        let q = Arc::new(LinkedInject::new());
        let producer = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || {
                assert!(push(&q, &nodes, 0));
                assert!(push_batch(&q, &nodes, &[1, 2]).is_empty());
            })
        };
        let consumer = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || {
                let mut out = Vec::new();
                q.pop_batch(2, &mut out);
                let mut taken: Vec<usize> = out.into_iter().map(|n| nodes.index_of(n)).collect();
                taken.extend(q.pop().map(|n| nodes.index_of(n)));
                taken
            })
        };

        let mut mine: Vec<usize> = q.pop().map(|n| nodes.index_of(n)).into_iter().collect();
        let mut out = Vec::new();
        q.pop_batch(2, &mut out);
        mine.extend(out.into_iter().map(|n| nodes.index_of(n)));

        producer.join().unwrap();
        let theirs = consumer.join().unwrap();
        // Each consumer's takes are a subsequence of one FIFO order.
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
        assert!(theirs.windows(2).all(|w| w[0] < w[1]), "{theirs:?}");
        let mut taken = mine;
        taken.extend(theirs);
        drain(&q, &nodes, &mut taken);
        nodes.check(&taken, true);
        assert!(q.is_empty());
    });
}

#[test]
fn loom_inject_push_races_close() {
    // A producer pushes one node and then a batch of two while the main thread pops once
    // and closes: every node is popped, returned by `close`, or refused, exactly once, and
    // nothing lands after the close.
    RACED_BATCH_REFUSALS.store(0, Relaxed);
    model(None, || {
        let nodes = Arc::new(Nodes::new(3));
        let q = Arc::new(LinkedInject::new());
        let producer = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || {
                let mut refused = Vec::new();
                if !push(&q, &nodes, 0) {
                    refused.push(0);
                }
                refused.extend(push_batch(&q, &nodes, &[1, 2]));
                refused
            })
        };

        let mut accepted: Vec<usize> = q.pop().map(|n| nodes.index_of(n)).into_iter().collect();
        accepted.extend(q.close().into_iter().map(|n| nodes.index_of(n)));

        let refused = producer.join().unwrap();
        // What the queue accepted came out in push order; a batch is all in or all out.
        assert!(accepted.windows(2).all(|w| w[0] < w[1]), "{accepted:?}");
        assert_eq!(
            refused.contains(&1),
            refused.contains(&2),
            "a batch was split: {refused:?}"
        );
        assert!(q.pop().is_none(), "a node landed after close");
        assert!(q.close().is_empty(), "a node landed after close");
        assert_eq!(q.len(), 0, "a refused push left its count behind");
        let mut all = accepted;
        all.extend(refused);
        nodes.check(&all, true);
    });
    // Relaxed: the model has finished.
    assert!(
        RACED_BATCH_REFUSALS.load(Relaxed) > 0,
        "loom never ran `close` between a batch's check and its CAS"
    );
}

#[test]
fn loom_inject_push_vs_sleep_recheck() {
    // The Dekker pair of the sleep protocol (sleep/README.md, R1 and R5) with this queue: a
    // producer pushes, passes the light barrier and looks for a sleeper (`notify_task`); a
    // worker registers as asleep, passes the heavy barrier and rechecks the queue
    // (`register_parked`, `has_visible_tasks`). One of them must see the other, or the node
    // would sit in the queue with every worker asleep. Under loom both barriers are
    // `fence(SeqCst)`. A second producer's push, taken by a consumer meanwhile, must not
    // hide the first (the recheck reads a count that consumers decrement).
    model(None, || {
        let nodes = Arc::new(Nodes::new(2));
        let q = Arc::new(LinkedInject::new());
        let asleep = Arc::new(AtomicBool::new(false));
        let producer = {
            let (q, nodes, asleep) = (q.clone(), nodes.clone(), asleep.clone());
            thread::spawn(move || {
                assert!(push(&q, &nodes, 0));
                Barrier::SYMMETRIC.light();
                // Relaxed: ordered by the barrier pair.
                asleep.load(Relaxed)
            })
        };
        let other = {
            let (q, nodes) = (q.clone(), nodes.clone());
            thread::spawn(move || {
                assert!(push(&q, &nodes, 1));
                q.pop().map(|n| nodes.index_of(n))
            })
        };

        // Relaxed: ordered by the barrier pair.
        asleep.store(true, Relaxed);
        Barrier::SYMMETRIC.heavy();
        let recheck_sees_work = !q.is_empty();

        let saw_sleeper = producer.join().unwrap();
        let other_took = other.join().unwrap();
        // (A node the running consumer took is not stranded.)
        assert!(
            saw_sleeper || recheck_sees_work || other_took == Some(0),
            "lost wakeup: the producer saw no sleeper and the recheck saw no node"
        );
        let mut taken: Vec<usize> = other_took.into_iter().collect();
        drain(&q, &nodes, &mut taken);
        nodes.check(&taken, true);
    });
}
