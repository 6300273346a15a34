//! Loom models of the Chase-Lev deque's races.
//!
//! Under loom the buffer starts with 2 slots (`INITIAL_CAPACITY`), so a third push grows it,
//! and both barriers are `fence(SeqCst)`: these models check the symmetric algorithm of Lê et
//! al., not the `membarrier` variant (which `tests_chase_lev.rs` stresses on real threads).
//! Every model runs twice ([`both`]): thieves stealing as the runtime does, with no barrier
//! where the owner wrote `top` (invariant 7 of `chase_lev.rs`), and thieves that always pay
//! the barrier (the classic algorithm).
//!
//! Every model checks exactly-once delivery: each item pushed is taken by at most one
//! `pop`/`steal`, every pointer taken is one that was pushed (and points at the right value),
//! and nothing is lost once the owner drains the deque. Items are leaked boxes; the test keeps
//! its own list of them and frees them from that list at the end, never from what the deque
//! returned, so a duplicated item shows as a failed assertion rather than a double free.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p magpie --lib --release loom`.
//! `LOOM_MAX_PREEMPTIONS` overrides each model's default preemption bound.

use std::ptr::NonNull;

use loom::thread;

use super::chase_lev::{self, Steal};
use crate::util::loom_support::{model, Items};

/// The default bound of the three-thread model: 4 explores about 30,000 executions in a
/// second or two; 5 about 57,000, 8 about 500,000 (half a minute).
const THREE_THREAD_BOUND: Option<usize> = Some(4);

/// An item's address, which (unlike `NonNull`) can leave a thread.
fn addr(item: NonNull<usize>) -> usize {
    item.as_ptr() as usize
}

/// One steal attempt; `Retry` counts as nothing taken. `fenced`: always pay the barrier.
fn steal_once(stealer: &chase_lev::Stealer<usize>, fenced: bool) -> Option<usize> {
    let stolen = if fenced {
        stealer.steal_fenced()
    } else {
        stealer.steal()
    };
    match stolen {
        Steal::Success(item) => Some(addr(item)),
        Steal::Empty | Steal::Retry => None,
    }
}

/// Checks `body` as a model twice: with thieves that skip the barrier where invariant 7
/// allows (`fenced` false), then with thieves that always pay it.
fn both<F>(bound: Option<usize>, body: F)
where
    F: Fn(bool) + Sync + Send + Clone + 'static,
{
    for fenced in [false, true] {
        let body = body.clone();
        model(bound, move || body(fenced));
    }
}

/// A thief thread that tries to steal twice, one attempt after the other.
fn steal_twice(
    stealer: chase_lev::Stealer<usize>,
    fenced: bool,
) -> thread::JoinHandle<(Option<usize>, Option<usize>)> {
    thread::spawn(move || {
        let first = steal_once(&stealer, fenced);
        let second = steal_once(&stealer, fenced);
        (first, second)
    })
}

/// The end of a model with a `steal_twice` thief: joins it, adds what it stole to what the
/// owner took, drains the deque into that, and checks that every item was taken once.
fn finish_two_steals(
    thief: thread::JoinHandle<(Option<usize>, Option<usize>)>,
    worker: &chase_lev::Worker<usize>,
    mut taken: Vec<usize>,
    items: &Items,
) {
    let (first, second) = thief.join().unwrap();
    taken.extend(first);
    taken.extend(second);
    drain(worker, &mut taken);
    items.check(&taken, true);
}

/// Pops until empty, appending the addresses to `taken`.
fn drain(worker: &chase_lev::Worker<usize>, taken: &mut Vec<usize>) {
    while let Some(item) = worker.pop() {
        taken.push(addr(item));
    }
}

#[test]
fn loom_push_pop_and_steal() {
    both(None, |fenced| {
        let items = Items::new(2);
        let (worker, stealer) = chase_lev::new();
        let thief = thread::spawn(move || steal_once(&stealer, fenced));

        worker.push(items.get(0));
        worker.push(items.get(1));
        let mut taken: Vec<usize> = worker.pop().map(addr).into_iter().collect();

        let stolen = thief.join().unwrap();
        if let Some(a) = stolen {
            // The thief takes from the top, which only ever holds item 0 here: the owner
            // takes item 0 only by the CAS that would make the thief's CAS fail.
            assert_eq!(items.index_of(a), 0, "a thief took the newest item");
            taken.push(a);
        }
        drain(&worker, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_last_item_pop_races_steal() {
    both(None, |fenced| {
        let items = Items::new(1);
        let (worker, stealer) = chase_lev::new();
        let thief = thread::spawn(move || steal_once(&stealer, fenced));

        worker.push(items.get(0));
        let popped = worker.pop().map(addr);

        let stolen = thief.join().unwrap();
        assert!(
            popped.is_some() != stolen.is_some(),
            "the last item went to {} takers",
            if popped.is_some() { 2 } else { 0 }
        );
        let taken: Vec<usize> = popped.into_iter().chain(stolen).collect();
        items.check(&taken, true);
        // Both sides agree the deque is empty now.
        assert_eq!(worker.pop(), None);
        assert!(worker.is_empty());
    });
}

#[test]
fn loom_two_thieves_and_owner() {
    both(THREE_THREAD_BOUND, |fenced| {
        let items = Items::new(2);
        let (worker, stealer) = chase_lev::new();
        worker.push(items.get(0));
        worker.push(items.get(1));

        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let stealer = stealer.clone();
                thread::spawn(move || steal_once(&stealer, fenced))
            })
            .collect();
        drop(stealer);

        let mut taken: Vec<usize> = worker.pop().map(addr).into_iter().collect();
        for thief in thieves {
            taken.extend(thief.join().unwrap());
        }
        drain(&worker, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
fn loom_growth_races_steal() {
    // crossbeam#726 / RUSTSEC-2021-0093: a thief that read the old buffer pointer must not
    // return a value the owner is rewriting, and one that reads the new buffer must see the
    // copied slots.
    both(None, |fenced| {
        let items = Items::new(3);
        let (worker, stealer) = chase_lev::new();
        let thief = steal_twice(stealer, fenced);

        // Capacity 2 under loom: the third push grows the buffer unless the thief already
        // took item 0.
        for i in 0..3 {
            worker.push(items.get(i));
        }

        let (first, second) = thief.join().unwrap();
        // Steals are FIFO: whatever the thief got, it got in push order.
        let stolen: Vec<usize> = first.into_iter().chain(second).collect();
        let stolen_indices: Vec<usize> = stolen.iter().map(|&a| items.index_of(a)).collect();
        assert_eq!(
            stolen_indices,
            (0..stolen.len()).collect::<Vec<_>>(),
            "steals out of order"
        );
        let mut taken = stolen;
        drain(&worker, &mut taken);
        items.check(&taken, true);
    });
}

#[test]
// The negative control: with `--cfg magpie_loom_broken` a thief reads `bottom` with Relaxed,
// and skips the heavy barrier whoever wrote `top`; this model must find the stale slot the
// first makes it read, and the item taken twice the second allows (its second steal follows
// a thief's write of `top`), each alone (scripts/loom.sh runs both ways).
#[cfg_attr(magpie_loom_broken, should_panic)]
fn loom_pop_then_push_reuses_slot_while_stolen_from() {
    // The owner pops index 1 (no CAS: item 0 is below it), then pushes two more: the first
    // rewrites slot 1 of the same buffer, the second grows it (or, if the thief took item 0
    // meanwhile, wraps around into slot 0). A thief that read `bottom` = 2 before the pop
    // must not come back with the popped item.
    both(None, |fenced| {
        let items = Items::new(4);
        let (worker, stealer) = chase_lev::new();
        worker.push(items.get(0));
        worker.push(items.get(1));
        let thief = steal_twice(stealer, fenced);

        let taken: Vec<usize> = worker.pop().map(addr).into_iter().collect();
        worker.push(items.get(2));
        worker.push(items.get(3));

        finish_two_steals(thief, &worker, taken, &items);
    });
}

#[test]
fn loom_drop_with_items_left() {
    both(None, |fenced| {
        let items = Items::new(3);
        let (worker, stealer) = chase_lev::new();
        // The thief drops its handle when done; whichever handle goes last frees the buffers
        // (the live one and, after growth, the retired one).
        let thief = thread::spawn(move || steal_once(&stealer, fenced));

        for i in 0..3 {
            worker.push(items.get(i));
        }
        drop(worker);

        let stolen = thief.join().unwrap();
        if let Some(a) = stolen {
            assert_eq!(items.index_of(a), 0, "a thief took an item out of order");
        }
        // At most one item was taken; the other two were left inside and are freed by
        // `Items`, not by the deque (a double free would crash here).
        let taken: Vec<usize> = stolen.into_iter().collect();
        items.check(&taken, false);
    });
}

#[test]
fn loom_steal_after_the_owner_drained() {
    // The owner drains its deque (its last pop is the CAS that writes `top` = 1, so the next
    // steal needs no barrier), after popping index 1 without a CAS twice: once item 1, once
    // item 2 pushed into the same slot. A thief that skips the barrier must not read a
    // `bottom` from before the drain and take item 2 (or 1) again; then item 3 goes into
    // slot 1 and is the thief's or the owner's, once.
    both(None, |fenced| {
        let items = Items::new(4);
        let (worker, stealer) = chase_lev::new();
        let thief = steal_twice(stealer, fenced);

        worker.push(items.get(0));
        worker.push(items.get(1));
        let mut taken: Vec<usize> = worker.pop().map(addr).into_iter().collect();
        worker.push(items.get(2));
        taken.extend(worker.pop().map(addr));
        taken.extend(worker.pop().map(addr));
        worker.push(items.get(3));

        finish_two_steals(thief, &worker, taken, &items);
    });
}
