//! Tests of the linked inject queue: sequential behaviour (FIFO across the stack and the
//! consumers' list, the length, closing, refusals, the lock count) and stress runs on real
//! threads that check every node is taken exactly once, also while `close` races the pushes.
//!
//! The loom models of the same races are in `loom_linked_inject.rs`.

use std::ptr::NonNull;

use super::linked_inject::{LinkedInject, Refused};
use super::test_nodes::{Node, Nodes};
use crate::sync::atomic::*;
use crate::sync::{AtomicBool, AtomicUsize};

/// Pushes node `i` (filled) and expects it to be accepted.
fn push(q: &LinkedInject<Node>, nodes: &Nodes, i: usize) {
    // SAFETY: each test pushes each node at most once until it is taken back, and `nodes`
    // outlives the queue's use of it.
    unsafe { q.push(nodes.fill(i)) }.unwrap();
}

/// Pushes nodes `range` (filled) as one batch and expects it to be accepted.
fn push_batch(q: &LinkedInject<Node>, nodes: &Nodes, range: std::ops::Range<usize>) {
    let batch: Vec<NonNull<Node>> = range.map(|i| nodes.fill(i)).collect();
    // SAFETY: as in `push`.
    unsafe { q.push_batch(batch) }.unwrap();
}

fn pop(q: &LinkedInject<Node>, nodes: &Nodes) -> Option<usize> {
    q.pop().map(|node| nodes.index_of(node))
}

fn pop_batch(q: &LinkedInject<Node>, nodes: &Nodes, max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let n = q.pop_batch(max, &mut out);
    assert_eq!(n, out.len(), "pop_batch miscounted");
    out.into_iter().map(|node| nodes.index_of(node)).collect()
}

// ---- Sequential behaviour ----

#[test]
fn fifo_across_push_batch_and_the_consumer_list() {
    let nodes = Nodes::new(7);
    let q = LinkedInject::new();
    assert!(q.is_empty());
    push(&q, &nodes, 0);
    push_batch(&q, &nodes, 1..4);
    assert_eq!(q.len(), 4);
    // The pop moves the whole stack into the consumers' list.
    assert_eq!(pop(&q, &nodes), Some(0));
    assert_eq!(q.len(), 3);
    // 4 goes on the (now empty) stack, behind 1..4 in the list.
    push(&q, &nodes, 4);
    assert_eq!(pop_batch(&q, &nodes, 2), vec![1, 2]);
    push_batch(&q, &nodes, 5..7);
    assert_eq!(q.len(), 4);
    // The list's 3 first, then the stack reversed.
    assert_eq!(pop_batch(&q, &nodes, 10), vec![3, 4, 5, 6]);
    assert!(q.is_empty());
    assert_eq!(q.len(), 0);
    assert_eq!(pop(&q, &nodes), None);
    assert!(pop_batch(&q, &nodes, 10).is_empty());
}

#[test]
fn pop_batch_takes_at_most_max_and_zero_takes_nothing() {
    let nodes = Nodes::new(5);
    let q = LinkedInject::new();
    push_batch(&q, &nodes, 0..5);
    assert!(pop_batch(&q, &nodes, 0).is_empty());
    assert_eq!(pop_batch(&q, &nodes, 3), vec![0, 1, 2]);
    assert_eq!(q.len(), 2);
    assert_eq!(pop_batch(&q, &nodes, 3), vec![3, 4]);
    assert!(q.is_empty());
}

#[test]
fn empty_batch_is_accepted_and_counts_nothing() {
    let q: LinkedInject<Node> = LinkedInject::new();
    // SAFETY: no node at all.
    unsafe { q.push_batch(std::iter::empty()) }.unwrap();
    assert!(q.is_empty());
    assert_eq!(q.pop(), None);
}

#[test]
fn close_returns_the_list_then_the_stack_in_order() {
    let nodes = Nodes::new(5);
    let q = LinkedInject::new();
    push_batch(&q, &nodes, 0..3);
    assert_eq!(pop(&q, &nodes), Some(0)); // 1 and 2 now in the list
    push(&q, &nodes, 3);
    push(&q, &nodes, 4); // on the stack
    let all: Vec<usize> = q.close().into_iter().map(|n| nodes.index_of(n)).collect();
    assert_eq!(all, vec![1, 2, 3, 4]);
    assert!(q.is_empty());
    assert_eq!(q.len(), 0);
    assert_eq!(q.pop(), None);
    assert!(q.close().is_empty(), "a closed queue only shrinks");
}

/// `push` reports how many nodes were counted before its own: 0 into an empty queue, the
/// backlog otherwise, across batches and pops.
#[test]
fn push_reports_the_count_before_it() {
    let nodes = Nodes::new(6);
    let q = LinkedInject::new();
    // SAFETY: as in `push` (each node is pushed once, and `nodes` outlives the queue).
    let push_counting = |i| unsafe { q.push(nodes.fill(i)) };
    assert_eq!(push_counting(0), Ok(0));
    assert_eq!(push_counting(1), Ok(1));
    push_batch(&q, &nodes, 2..4);
    assert_eq!(push_counting(4), Ok(4));
    assert_eq!(pop_batch(&q, &nodes, 5), vec![0, 1, 2, 3, 4]);
    assert_eq!(push_counting(5), Ok(0));
}

#[test]
fn closed_queue_refuses_a_push() {
    let nodes = Nodes::new(2);
    let q = LinkedInject::new();
    push(&q, &nodes, 0);
    assert_eq!(q.close().len(), 1);
    let node = nodes.fill(1);
    // SAFETY: as in `push`.
    assert_eq!(unsafe { q.push(node) }, Err(node));
    assert!(q.is_empty());
    assert_eq!(q.len(), 0, "a refused push left its count behind");
    assert_eq!(q.pop(), None);
}

#[test]
fn closed_queue_gives_a_batch_back_untouched() {
    let nodes = Nodes::new(3);
    let q = LinkedInject::new();
    assert!(q.close().is_empty());
    let batch: Vec<NonNull<Node>> = (0..3).map(|i| nodes.fill(i)).collect();
    let advanced = AtomicUsize::new(0);
    let items = batch.iter().copied().inspect(|_| {
        // Relaxed: one thread.
        advanced.fetch_add(1, Relaxed);
    });
    // SAFETY: as in `push`.
    let refused = unsafe { q.push_batch(items) }.unwrap_err();
    assert!(matches!(refused, Refused::Untouched(_)), "{refused:?}");
    assert_eq!(
        advanced.load(Relaxed),
        0,
        "the refused iterator was advanced"
    );
    let back: Vec<usize> = refused.map(|n| nodes.index_of(n)).collect();
    assert_eq!(back, vec![0, 1, 2]);
    assert!(q.is_empty());
    assert_eq!(q.pop(), None);
}

#[test]
fn pushes_take_no_lock_and_empty_pops_take_none() {
    let nodes = Nodes::new(4);
    let q = LinkedInject::new();
    assert_eq!(q.pop(), None);
    push(&q, &nodes, 0);
    push_batch(&q, &nodes, 1..4);
    assert_eq!(q.lock_acquisitions(), 0);
    assert_eq!(pop(&q, &nodes), Some(0));
    assert_eq!(pop_batch(&q, &nodes, 2), vec![1, 2]);
    assert_eq!(q.lock_acquisitions(), 2);
    assert_eq!(q.close().len(), 1);
    assert_eq!(q.lock_acquisitions(), 3);
}

// ---- Stress ----

/// Nodes each producer pushes in a stress run; more when optimised.
/// Fewer under Miri, which interprets ~100x slower than a debug build.
const PER_PRODUCER: usize = if cfg!(miri) {
    500
} else if cfg!(debug_assertions) {
    20_000
} else {
    200_000
};

/// A consumer's takes, in order, as node indices.
fn consume(q: &LinkedInject<Node>, nodes: &Nodes, done: &AtomicBool, batch: usize) -> Vec<usize> {
    let mut taken = Vec::new();
    let mut out = Vec::new();
    loop {
        // Read `done` before looking, so that "done and then empty" means drained.
        // Acquire: pairs with the Release store after the producers finished.
        let finished = done.load(Acquire);
        let n = if batch == 1 {
            usize::from(q.pop().map(|node| out.push(node)).is_some())
        } else {
            q.pop_batch(batch, &mut out)
        };
        taken.extend(out.drain(..).map(|node| nodes.index_of(node)));
        if n == 0 {
            if finished {
                return taken;
            }
            std::thread::yield_now();
        }
    }
}

/// Checks that within one consumer's takes, each producer's nodes come in push order
/// (node `p * PER_PRODUCER + k` is producer `p`'s `k`-th).
fn check_per_producer_order(taken: &[usize], per_producer: usize) {
    let mut last: Vec<Option<usize>> = Vec::new();
    for &index in taken {
        let producer = index / per_producer;
        if last.len() <= producer {
            last.resize(producer + 1, None);
        }
        if let Some(previous) = last[producer] {
            assert!(
                previous < index,
                "producer {producer}'s node {index} came out after {previous}"
            );
        }
        last[producer] = Some(index);
    }
}

/// `producers` threads push (alternating single pushes and batches of up to 7) while
/// `consumers` threads pop (one with `pop`, the others with `pop_batch`).
fn stress(producers: usize, consumers: usize) {
    let nodes = Nodes::new(producers * PER_PRODUCER);
    let q = LinkedInject::new();
    let done = AtomicBool::new(false);
    let all: Vec<usize> = std::thread::scope(|s| {
        let takers: Vec<_> = (0..consumers)
            .map(|c| {
                let (q, nodes, done) = (&q, &nodes, &done);
                let batch = if c == 0 { 1 } else { 4 << c };
                s.spawn(move || consume(q, nodes, done, batch))
            })
            .collect();
        let pushers: Vec<_> = (0..producers)
            .map(|p| {
                let (q, nodes) = (&q, &nodes);
                s.spawn(move || {
                    let mut k = 0;
                    while k < PER_PRODUCER {
                        let len = (k % 8).min(PER_PRODUCER - k).max(1);
                        let base = p * PER_PRODUCER + k;
                        if len == 1 {
                            push(q, nodes, base);
                        } else {
                            push_batch(q, nodes, base..base + len);
                        }
                        k += len;
                    }
                })
            })
            .collect();
        for pusher in pushers {
            pusher.join().unwrap();
        }
        // Release: pairs with the consumers' Acquire load; every push is before it.
        done.store(true, Release);
        let mut all = Vec::new();
        for taker in takers {
            let taken = taker.join().unwrap();
            check_per_producer_order(&taken, PER_PRODUCER);
            all.extend(taken);
        }
        all
    });
    nodes.check(&all, true);
    assert!(q.is_empty());
}

#[test]
fn stress_four_producers_two_consumers() {
    stress(4, 2);
}

#[test]
fn stress_two_producers_four_consumers() {
    stress(2, 4);
}

/// Producers push and consumers pop while another thread closes the queue part way: every
/// node ends exactly once in a pop, in `close`'s return, or refused back to its producer.
fn stress_close(producers: usize, consumers: usize, close_after: usize) {
    let nodes = Nodes::new(producers * PER_PRODUCER);
    let q = LinkedInject::new();
    let done = AtomicBool::new(false);
    let pushed = AtomicUsize::new(0);
    let mut all: Vec<usize> = std::thread::scope(|s| {
        let takers: Vec<_> = (0..consumers)
            .map(|c| {
                let (q, nodes, done) = (&q, &nodes, &done);
                s.spawn(move || consume(q, nodes, done, if c == 0 { 1 } else { 16 }))
            })
            .collect();
        let pushers: Vec<_> = (0..producers)
            .map(|p| {
                let (q, nodes, pushed) = (&q, &nodes, &pushed);
                s.spawn(move || {
                    let mut refused = Vec::new();
                    let mut k = 0;
                    while k < PER_PRODUCER {
                        let len = (k % 5).min(PER_PRODUCER - k).max(1);
                        let base = p * PER_PRODUCER + k;
                        let batch: Vec<NonNull<Node>> =
                            (base..base + len).map(|i| nodes.fill(i)).collect();
                        // SAFETY: each node is pushed once; `nodes` outlives the scope.
                        if let Err(back) = unsafe { q.push_batch(batch) } {
                            refused.extend(back.map(|n| nodes.index_of(n)));
                        }
                        k += len;
                        // Relaxed: only paces the closer.
                        pushed.fetch_add(len, Relaxed);
                    }
                    refused
                })
            })
            .collect();
        let closer = s.spawn(|| {
            // Relaxed: pacing only; spinning with yields is bounded by the producers' work.
            while pushed.load(Relaxed) < close_after {
                std::thread::yield_now();
            }
            let closed: Vec<usize> = q.close().into_iter().map(|n| nodes.index_of(n)).collect();
            closed
        });
        let mut all = Vec::new();
        for pusher in pushers {
            let refused = pusher.join().unwrap();
            all.extend(refused);
        }
        let closed = closer.join().unwrap();
        assert!(q.close().is_empty(), "something landed after close");
        // Release: as in `stress`.
        done.store(true, Release);
        for taker in takers {
            let taken = taker.join().unwrap();
            check_per_producer_order(&taken, PER_PRODUCER);
            all.extend(taken);
        }
        all.extend(closed);
        all
    });
    all.sort_unstable();
    nodes.check(&all, true);
    assert_eq!(q.len(), 0, "counts left behind by refused pushes");
}

#[test]
fn stress_close_races_pushes() {
    stress_close(3, 2, PER_PRODUCER);
    stress_close(3, 0, PER_PRODUCER / 2);
}
