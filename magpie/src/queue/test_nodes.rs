//! Nodes for the tests and loom models of the linked inject queue (`tests_linked_inject.rs`,
//! `loom_linked_inject.rs`): leaked boxes with the queue's link, their own index, and a
//! payload that the pushing thread writes, standing for a task's contents.
//!
//! The test keeps its own list of the nodes and frees them from that list at the end, never
//! from what the queue returned, so a node taken twice shows as a failed assertion rather
//! than a double free.

use std::ptr::{self, NonNull};

use super::linked_inject::Linked;
use crate::sync::UnsafeCell;

pub(crate) struct Node {
    link: UnsafeCell<*mut Node>,
    index: usize,
    /// Written by whoever pushes the node ([`Nodes::fill`]), read by whoever takes it: under
    /// loom a read that the queue did not order after the write is a reported data race.
    payload: UnsafeCell<usize>,
}

// SAFETY: a node moves between the pushing and the taking thread as a task does: its link
// is the queue's (ordered by it), its payload is written before the push and read after the
// take, its index never changes.
unsafe impl Send for Node {}

// SAFETY: `link` is a field of the node, and only the queue touches it.
unsafe impl Linked for Node {
    fn queue_link(&self) -> &UnsafeCell<*mut Node> {
        &self.link
    }
}

/// The nodes of one test, by index.
pub(crate) struct Nodes {
    ptrs: Vec<NonNull<Node>>,
    /// `ptrs`, sorted, to recognise a node in logarithmic time (the stress runs take
    /// hundreds of thousands).
    sorted: Vec<NonNull<Node>>,
}

// SAFETY: the nodes are heap blocks that `Nodes` owns; `index` is immutable, and `link` and
// `payload` are written by one thread at a time, as the queue (and the tests' pushes and
// takes) order them, which is what the tests check.
unsafe impl Send for Nodes {}
// SAFETY: as above.
unsafe impl Sync for Nodes {}

impl Nodes {
    pub(crate) fn new(n: usize) -> Nodes {
        let ptrs: Vec<NonNull<Node>> = (0..n)
            .map(|index| {
                NonNull::from(Box::leak(Box::new(Node {
                    link: UnsafeCell::new(ptr::null_mut()),
                    index,
                    payload: UnsafeCell::new(usize::MAX),
                })))
            })
            .collect();
        let mut sorted = ptrs.clone();
        sorted.sort_unstable();
        Nodes { ptrs, sorted }
    }

    /// Node `i`, after writing its payload: call it on the thread that pushes the node, just
    /// before the push.
    pub(crate) fn fill(&self, i: usize) -> NonNull<Node> {
        let node = self.ptrs[i];
        // SAFETY: the node is live (freed only in `Drop`) and not queued: the caller is
        // about to push it, so nobody else touches the payload.
        unsafe { node.as_ref().payload.with_mut(|p| *p = payload_of(i)) };
        node
    }

    /// The index of a node a queue handed back, after checking it is one of ours and that
    /// its payload is the one its pusher wrote.
    pub(crate) fn index_of(&self, node: NonNull<Node>) -> usize {
        assert!(
            self.sorted.binary_search(&node).is_ok(),
            "took a node that was never pushed: {node:p}"
        );
        // SAFETY: the node is one of ours (live until `Drop`), and the caller took it from
        // the queue, which orders the pusher's payload write before this read.
        let (index, payload) = unsafe {
            let node = node.as_ref();
            (node.index, node.payload.with(|p| *p))
        };
        assert_eq!(
            payload,
            payload_of(index),
            "node {index}'s payload is unwritten"
        );
        index
    }

    /// Checks that `taken` (indices) holds each node at most once, and every node if `all`
    /// is set.
    pub(crate) fn check(&self, taken: &[usize], all: bool) {
        let mut sorted = taken.to_vec();
        sorted.sort_unstable();
        let before = sorted.len();
        sorted.dedup();
        assert_eq!(before, sorted.len(), "a node was taken twice: {taken:?}");
        if all {
            assert_eq!(
                sorted,
                (0..self.ptrs.len()).collect::<Vec<_>>(),
                "a node was lost"
            );
        }
    }
}

fn payload_of(index: usize) -> usize {
    index * 7 + 1
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for p in &self.ptrs {
            // SAFETY: each pointer came from `Box::leak` in `Nodes::new` and is freed only
            // here; the queue never frees nodes.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
}
