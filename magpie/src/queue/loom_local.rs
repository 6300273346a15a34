//! Loom models of the task ring's races.
//!
//! Under loom the ring has 4 slots (`CAPACITY`), so a steal takes at most 2 and an overflow
//! moves 2 plus the new item. Every thief steals into a ring of its own and drains it, as a
//! worker would.
//!
//! Every model checks exactly-once delivery: each item pushed is taken by at most one `pop`,
//! steal or overflow, every pointer taken is one that was pushed (and points at the right
//! value), and nothing is lost once the owner drains the ring and the inject queue. Items
//! are leaked boxes; the test keeps its own list of them and frees them from that list at the
//! end, never from what the ring returned, so a duplicated item shows as a failed assertion
//! rather than a double free.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p magpie --lib --release loom_local`.
//! Each model is exhaustive unless `LOOM_MAX_PREEMPTIONS` sets a preemption bound.

use std::ptr::NonNull;

use loom::thread;

use super::inject::Inject;
use super::local::{self, Local, Steal};
use crate::util::loom_support::{model, Items};

/// An item's address, which (unlike `NonNull`) can leave a thread.
fn addr(item: NonNull<usize>) -> usize {
    item.as_ptr() as usize
}

/// Pops until empty, appending the addresses to `taken`.
fn drain(local: &Local<usize>, taken: &mut Vec<usize>) {
    while let Some(item) = local.pop() {
        taken.push(addr(item));
    }
}

/// Empties the inject queue, appending the addresses to `taken`.
fn drain_inject(inject: &Inject<NonNull<usize>>, taken: &mut Vec<usize>) {
    while let Some(item) = inject.pop() {
        taken.push(addr(item));
    }
}

/// A thief: one steal into a fresh ring of its own, which it then drains. Returns the
/// addresses it took, the directly returned item first.
fn spawn_thief(steal: Steal<usize>) -> thread::JoinHandle<Vec<usize>> {
    thread::spawn(move || {
        let (own, _) = local::local();
        let mut taken: Vec<usize> = steal.steal_into(&own).map(addr).into_iter().collect();
        drain(&own, &mut taken);
        taken
    })
}

/// The checks of a thief racing the owner's pushes into a ring that never fills: the thief
/// claims from the head, so whatever it got is a prefix of push order; nothing overflowed;
/// with the owner's drain, every item is taken exactly once.
fn check_steal_of_pushes(
    items: &Items,
    thief: thread::JoinHandle<Vec<usize>>,
    inject: &Inject<NonNull<usize>>,
    local: &Local<usize>,
) {
    let stolen = thief.join().unwrap();
    let mut indices: Vec<usize> = stolen.iter().map(|&a| items.index_of(a)).collect();
    indices.sort_unstable();
    assert_eq!(
        indices,
        (0..stolen.len()).collect::<Vec<_>>(),
        "stole out of order"
    );
    assert!(inject.is_empty(), "overflowed a ring that was never full");
    let mut taken = stolen;
    drain(local, &mut taken);
    items.check(&taken, true);
}

#[test]
fn loom_steal_half_races_push() {
    // Every item is pushed while the thief runs, so whatever it claims was published only by
    // the Release store of `tail` (invariant 4).
    model(None, || {
        let items = Items::new(4);
        let inject = Inject::new();
        let (local, steal) = local::local();
        let thief = spawn_thief(steal);

        // The ring never holds more than its 4 slots, so nothing overflows.
        for i in 0..4 {
            local.push_back(items.get(i), &inject);
        }

        check_steal_of_pushes(&items, thief, &inject, &local);
    });
}

#[test]
fn loom_steal_half_races_a_batch_push() {
    // As `loom_steal_half_races_push`, with the items pushed as batches (`push_back_batch`,
    // the inject queue's way into a ring): one store of `tail` publishes each batch, and a
    // thief may claim part of the first while the second is written.
    model(None, || {
        let items = Items::new(4);
        let inject = Inject::new();
        let (local, steal) = local::local_starting_at(u32::MAX - 1);
        let thief = spawn_thief(steal);

        local.push_back_batch([items.get(0), items.get(1)], &inject);
        local.push_back_batch([items.get(2), items.get(3)], &inject);

        check_steal_of_pushes(&items, thief, &inject, &local);
    });
}

#[test]
fn loom_steal_half_races_pop() {
    // The owner pushes and pops while the thief runs: a thief that sees a pop's new `real`
    // must also see the pushes before it, or it would claim slots past `tail`. Indices start
    // just short of `u32::MAX`, so the claim, the pops and the release all cross the
    // wrap-around (invariant 5).
    model(None, || {
        let items = Items::new(3);
        let inject = Inject::new();
        let (local, steal) = local::local_starting_at(u32::MAX - 1);
        local.push_back(items.get(0), &inject);
        let thief = spawn_thief(steal);

        // Our pops must skip a claimed batch, and the thief's release CAS must survive them.
        let mut taken: Vec<usize> = Vec::new();
        local.push_back(items.get(1), &inject);
        local.push_back(items.get(2), &inject);
        taken.extend(local.pop().map(addr));
        taken.extend(local.pop().map(addr));

        taken.extend(thief.join().unwrap());
        drain(&local, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_two_thieves_and_owner() {
    model(None, || {
        let items = Items::new(4);
        let inject = Inject::new();
        let (local, steal) = local::local();
        for i in 0..4 {
            local.push_back(items.get(i), &inject);
        }
        let thieves = [spawn_thief(steal.clone()), spawn_thief(steal)];

        let mut taken: Vec<usize> = local.pop().map(addr).into_iter().collect();
        for thief in thieves {
            taken.extend(thief.join().unwrap());
        }
        drain(&local, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_overflow_races_steal() {
    // The ring is full when the thief starts. The fifth push overflows (the oldest 2 and the
    // new item to `inject`), or finds a slot the thief released, or finds the thief copying
    // and sends the new item alone; the sixth then does whichever fits.
    model(None, || {
        let items = Items::new(6);
        let inject = Inject::new();
        let (local, steal) = local::local();
        for i in 0..4 {
            local.push_back(items.get(i), &inject);
        }
        let thief = spawn_thief(steal);

        local.push_back(items.get(4), &inject);
        local.push_back(items.get(5), &inject);

        let mut taken = thief.join().unwrap();
        drain(&local, &mut taken);
        drain_inject(&inject, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_steal_into_a_ring_being_stolen_from() {
    // A thief's own ring is a victim too: a second thief steals from it while the first
    // copies a batch in. The copied slots are published by the Release store of the first
    // thief's `tail`, exactly as the owner's pushes are (invariant 1).
    model(None, || {
        let items = Items::new(4);
        let inject = Inject::new();
        let (victim, steal) = local::local();
        for i in 0..4 {
            victim.push_back(items.get(i), &inject);
        }
        let (middle, middle_steal) = local::local::<usize>();
        let second = spawn_thief(middle_steal);

        // Both items of the batch: one returned, one left in `middle` for the second thief.
        let mut taken: Vec<usize> = steal.steal_into(&middle).map(addr).into_iter().collect();
        drain(&middle, &mut taken);
        taken.extend(second.join().unwrap());
        drain(&victim, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_steal_all_races_push_and_pop() {
    // The stall monitor's drain of a worker's ring (`Steal::steal_all`) while the owner,
    // which was not stalled after all, goes on pushing and popping: every item is taken
    // exactly once, by the owner, the monitor or the overflow.
    model(None, || {
        let items = Items::new(4);
        let inject = Inject::new();
        let (local, steal) = local::local_starting_at(u32::MAX - 1);
        local.push_back(items.get(0), &inject);
        local.push_back(items.get(1), &inject);
        let monitor = thread::spawn(move || {
            let mut out = Vec::new();
            steal.steal_all(&mut out);
            out.into_iter().map(addr).collect::<Vec<_>>()
        });
        let mut taken: Vec<usize> = Vec::new();
        local.push_back(items.get(2), &inject);
        taken.extend(local.pop().map(addr));
        local.push_back(items.get(3), &inject);
        taken.extend(monitor.join().unwrap());
        drain(&local, &mut taken);
        drain_inject(&inject, &mut taken);
        items.check(&taken, true);
    });
}
