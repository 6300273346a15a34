//! Tests of the Chase-Lev deque on real threads: sequential behaviour, exact drop accounting
//! (the deque owns no item), and stress runs that check every item is taken exactly once.
//!
//! The loom models of the same races are in `loom_chase_lev.rs`.

use std::ptr::NonNull;

use super::chase_lev::{self, Steal};
use super::test_items::{handles, leak_counted, reclaim, take, value, Counted, SetOnDrop};
use crate::sync::atomic::*;
use crate::sync::barrier::Barrier;
use crate::sync::{Arc, AtomicBool, AtomicUsize};

/// Items pushed by each stress test; 10^6 takes too long unoptimised on a small machine.
/// Miri interprets ~100x slower than a debug build: a few thousand items still make every
/// path (growth, the last-item CAS, the barrier) race many times.
const STRESS_ITEMS: usize = if cfg!(miri) {
    2_000
} else if cfg!(debug_assertions) {
    100_000
} else {
    1_000_000
};

/// Steals until the deque answers something other than `Retry`.
fn steal_one<T>(stealer: &chase_lev::Stealer<T>) -> Option<NonNull<T>> {
    loop {
        match stealer.steal() {
            Steal::Success(item) => return Some(item),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

// ---- Sequential behaviour ----

#[test]
fn pop_is_lifo() {
    let values: Vec<usize> = (0..10).collect();
    let (worker, _stealer) = chase_lev::new();
    for item in handles(&values) {
        worker.push(item);
    }
    let popped: Vec<usize> = std::iter::from_fn(|| worker.pop()).map(value).collect();
    assert_eq!(popped, (0..10).rev().collect::<Vec<_>>());
}

#[test]
fn steal_is_fifo() {
    let values: Vec<usize> = (0..10).collect();
    let (worker, stealer) = chase_lev::new();
    for item in handles(&values) {
        worker.push(item);
    }
    let stolen: Vec<usize> = std::iter::from_fn(|| steal_one(&stealer))
        .map(value)
        .collect();
    assert_eq!(stolen, (0..10).collect::<Vec<_>>());
}

#[test]
fn pop_and_steal_meet_in_the_middle() {
    let values: Vec<usize> = (0..6).collect();
    let (worker, stealer) = chase_lev::new();
    for item in handles(&values) {
        worker.push(item);
    }
    assert_eq!(worker.pop().map(value), Some(5));
    assert_eq!(steal_one(&stealer).map(value), Some(0));
    assert_eq!(worker.pop().map(value), Some(4));
    assert_eq!(steal_one(&stealer).map(value), Some(1));
    assert_eq!(worker.pop().map(value), Some(3));
    // The last item goes through the owner's CAS on `top`.
    assert_eq!(worker.pop().map(value), Some(2));
    assert_eq!(worker.pop(), None);
    assert_eq!(stealer.steal(), Steal::Empty);
}

#[test]
fn only_a_top_a_thief_wrote_needs_the_barrier() {
    // Chase_lev.rs invariant 7: the owner wrote `top` (initially, and by its CAS for the
    // last item), so a steal needs no barrier; after a thief's CAS it does, until the owner
    // drains the deque again.
    let values: Vec<usize> = (0..4).collect();
    let (worker, stealer) = chase_lev::new();
    let [a, b, c, d] = handles(&values)[..] else {
        unreachable!()
    };
    assert!(
        stealer.steal_begin().is_none(),
        "an empty deque looked non-empty"
    );
    worker.push(a);
    worker.push(b);
    assert!(!stealer.steal_begin().unwrap().needs_barrier);
    assert_eq!(steal_one(&stealer).map(value), Some(0));
    let begun = stealer.steal_begin().unwrap();
    assert!(begun.needs_barrier, "a thief wrote top, yet no barrier");
    // The owner's pop of its last item is the CAS that makes `top` its own again.
    assert_eq!(worker.pop().map(value), Some(1));
    // The steal begun before that pop lost the race for item 1.
    assert_eq!(stealer.steal_end(begun.top), Steal::Retry);
    worker.push(c);
    worker.push(d);
    let begun = stealer.steal_begin().unwrap();
    assert!(
        !begun.needs_barrier,
        "the owner drained the deque, yet a barrier"
    );
    assert_eq!(begun.top, 2);
    assert!(matches!(stealer.steal_end(begun.top), Steal::Success(item) if value(item) == 2));
    // A thief's steal of the last item leaves a `top` the owner never wrote.
    assert_eq!(steal_one(&stealer).map(value), Some(3));
    assert!(stealer.steal_begin().is_none());
    worker.push(c);
    assert!(stealer.steal_begin().unwrap().needs_barrier);
}

#[test]
fn empty_deque_gives_nothing() {
    let (worker, stealer) = chase_lev::new::<usize>();
    assert_eq!(worker.pop(), None);
    assert_eq!(stealer.steal(), Steal::Empty);
    // A failed pop must undo its reservation of `bottom`: the deque still works.
    assert_eq!(worker.pop(), None);
    assert_eq!(worker.len(), 0);
    let values = [7usize];
    worker.push(NonNull::from(&values[0]));
    assert_eq!(steal_one(&stealer).map(value), Some(7));
    assert_eq!(worker.pop(), None);
    assert_eq!(stealer.steal(), Steal::Empty);
}

#[test]
fn growth_keeps_every_item_in_order() {
    // Well past INITIAL_CAPACITY (64): the buffer doubles four times.
    let values: Vec<usize> = (0..1000).collect();
    let (worker, _stealer) = chase_lev::new();
    for item in handles(&values) {
        worker.push(item);
    }
    assert_eq!(worker.len(), 1000);
    let popped: Vec<usize> = std::iter::from_fn(|| worker.pop()).map(value).collect();
    assert_eq!(popped, (0..1000).rev().collect::<Vec<_>>());
}

#[test]
fn growth_after_steals_copies_the_live_range() {
    // Move `top` away from zero first, so that growth copies a range that wraps around the
    // old buffer's end.
    let values: Vec<usize> = (0..300).collect();
    let items = handles(&values);
    let (worker, stealer) = chase_lev::new();
    for &item in &items[..40] {
        worker.push(item);
    }
    for expected in 0..30 {
        assert_eq!(steal_one(&stealer).map(value), Some(expected));
    }
    for &item in &items[40..] {
        worker.push(item);
    }
    assert_eq!(worker.len(), 270);
    let stolen: Vec<usize> = std::iter::from_fn(|| steal_one(&stealer))
        .map(value)
        .collect();
    assert_eq!(stolen, (30..300).collect::<Vec<_>>());
}

#[test]
fn len_counts_items() {
    let values: Vec<usize> = (0..100).collect();
    let (worker, stealer) = chase_lev::new();
    assert!(worker.is_empty());
    assert!(stealer.is_empty());
    for (n, item) in handles(&values).into_iter().enumerate() {
        worker.push(item);
        assert_eq!(worker.len(), n + 1);
    }
    assert_eq!(stealer.len(), 100);
    worker.pop().unwrap();
    steal_one(&stealer).unwrap();
    assert_eq!(worker.len(), 98);
    assert_eq!(stealer.len(), 98);
    assert!(!stealer.is_empty());
    while worker.pop().is_some() {}
    assert!(worker.is_empty());
    assert_eq!(stealer.len(), 0);
}

#[test]
fn extra_stealers_share_the_deque() {
    let values: Vec<usize> = (0..3).collect();
    let (worker, first) = chase_lev::new();
    let second = worker.stealer();
    let third = first.clone();
    for item in handles(&values) {
        worker.push(item);
    }
    assert_eq!(steal_one(&second).map(value), Some(0));
    assert_eq!(steal_one(&third).map(value), Some(1));
    assert_eq!(steal_one(&first).map(value), Some(2));
    assert_eq!(second.steal(), Steal::Empty);
}

// ---- Destructors: the deque never owns, frees or duplicates an item ----

#[test]
fn every_item_taken_is_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (worker, stealer) = chase_lev::new();
    for _ in 0..200 {
        worker.push(leak_counted(&drops));
    }
    for _ in 0..50 {
        let item = steal_one(&stealer).unwrap();
        // SAFETY: the deque hands each item out at most once (its contract, which this
        // test checks by counting), and every item came from `leak_counted`.
        unsafe { reclaim(item) };
    }
    while let Some(item) = worker.pop() {
        // SAFETY: as above.
        unsafe { reclaim(item) };
    }
    assert_eq!(steal_one(&stealer).map(|_| ()), None);
    drop((worker, stealer));
    assert_eq!(drops.load(Relaxed), 200);
}

#[test]
fn dropping_the_deque_frees_no_item() {
    let drops = Arc::new(AtomicUsize::new(0));
    let items: Vec<NonNull<Counted>> = (0..100).map(|_| leak_counted(&drops)).collect();
    let (worker, stealer) = chase_lev::new();
    for &item in &items {
        worker.push(item);
    }
    // Take a few from each end, then drop both handles with 90 items still inside.
    let mut taken = Vec::new();
    for _ in 0..5 {
        taken.push(worker.pop().unwrap());
        taken.push(steal_one(&stealer).unwrap());
    }
    for &item in &taken {
        // SAFETY: each item came out of the deque once.
        unsafe { reclaim(item) };
    }
    drop(stealer);
    drop(worker);
    // The deque freed its buffers but none of the items in them.
    assert_eq!(drops.load(Relaxed), 10);
    // The items it still held are ours to free, once.
    for &item in &items[5..95] {
        // SAFETY: items 5..95 were never taken (the first five were stolen, the last five
        // popped), and the deque does not free items.
        unsafe { reclaim(item) };
    }
    assert_eq!(drops.load(Relaxed), 100);
}

#[test]
fn draining_before_drop_reclaims_everything() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (worker, stealer) = chase_lev::new();
    // Enough to grow, so that retired buffers are freed with the deque too.
    for _ in 0..300 {
        worker.push(leak_counted(&drops));
    }
    let mut reclaimed = 0;
    while let Some(item) = worker.pop() {
        // SAFETY: each item came out of the deque once.
        unsafe { reclaim(item) };
        reclaimed += 1;
    }
    assert_eq!(reclaimed, 300);
    drop(worker);
    drop(stealer);
    assert_eq!(drops.load(Relaxed), 300);
}

// ---- Stress: every item taken exactly once ----

/// Runs `owner` (which pushes a handle to every slot of `taken`, pops some, and returns how
/// many it popped) on this thread while `thieves` threads steal. Checks that every item is
/// taken exactly once.
fn stress<F>(thieves: usize, items: usize, owner: F)
where
    F: FnOnce(&chase_lev::Worker<AtomicUsize>, &[AtomicUsize]) -> usize,
{
    // The asymmetric mode where the kernel has it (membarrier); the loom models check the
    // symmetric one. Odd-numbered thieves always pay the barrier, the others only where a
    // thief wrote `top` (chase_lev.rs invariant 7), so both kinds race each other.
    let taken: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
    let done = AtomicBool::new(false);
    let (worker, stealer) = chase_lev::with_barrier::<AtomicUsize>(Barrier::best_available());

    let stolen: usize = std::thread::scope(|s| {
        let thief_threads: Vec<_> = (0..thieves)
            .map(|thief| {
                let stealer = stealer.clone();
                let done = &done;
                s.spawn(move || {
                    let mut count = 0usize;
                    loop {
                        let stolen = if thief % 2 == 1 {
                            stealer.steal_fenced()
                        } else {
                            stealer.steal()
                        };
                        match stolen {
                            Steal::Success(item) => {
                                take(item);
                                count += 1;
                            }
                            Steal::Retry => {}
                            Steal::Empty => {
                                // Acquire: pairs with the owner's Release store; after it the
                                // owner pushes nothing more and has drained the deque.
                                if done.load(Acquire) {
                                    return count;
                                }
                                std::thread::yield_now();
                            }
                        }
                    }
                })
            })
            .collect();

        // Release the thieves even if the owner panics (say, on a duplicate), so that the
        // scope's join reports the failure instead of hanging.
        let release_thieves = SetOnDrop(&done);
        let mut popped = owner(&worker, &taken);
        // Drain what is left; after this the deque is empty for good.
        while let Some(item) = worker.pop() {
            take(item);
            popped += 1;
        }
        assert!(worker.is_empty());
        drop(release_thieves);

        let stolen: usize = thief_threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(popped + stolen, items, "items lost or duplicated");
        stolen
    });

    let bad: Vec<usize> = (0..items)
        .filter(|&i| taken[i].load(Relaxed) != 1)
        .collect();
    assert!(
        bad.is_empty(),
        "{} items not taken exactly once, first {:?}; {stolen} stolen",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

/// An owner that pushes `burst` items at a time and pops back a varying share of each burst,
/// sometimes down to the last item, where it races the thieves with a CAS.
fn bursts(burst: usize) -> impl FnOnce(&chase_lev::Worker<AtomicUsize>, &[AtomicUsize]) -> usize {
    move |worker, taken| {
        let mut popped = 0;
        for (round, chunk) in taken.chunks(burst).enumerate() {
            for slot in chunk {
                worker.push(NonNull::from(slot));
            }
            // Every fourth round, give the thieves a chance to take half of what is queued,
            // so that they get a fair share even though each steal pays a heavy barrier.
            // This only shapes the load: the checks hold however much they take, and the
            // yields are bounded so that a thief that died cannot hang the owner.
            if round % 4 == 1 {
                let target = worker.len() / 2;
                for _ in 0..10_000 {
                    if worker.len() <= target {
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            let pops = match round % 4 {
                0 => 0,
                1 => burst,
                2 => burst / 2,
                _ => 1,
            };
            for _ in 0..pops {
                match worker.pop() {
                    Some(item) => {
                        take(item);
                        popped += 1;
                    }
                    None => break,
                }
            }
        }
        popped
    }
}

/// An owner that pushes one to three items and pops them straight back: the last pop of each
/// round is decided by the CAS on `top` whenever a thief got as far as reading `bottom`.
fn push_pop_few(worker: &chase_lev::Worker<AtomicUsize>, taken: &[AtomicUsize]) -> usize {
    let mut popped = 0;
    let mut rest = taken;
    let mut round = 0;
    while !rest.is_empty() {
        let (now, later) = rest.split_at(rest.len().min(round % 3 + 1));
        for slot in now {
            worker.push(NonNull::from(slot));
        }
        while let Some(item) = worker.pop() {
            take(item);
            popped += 1;
        }
        rest = later;
        round += 1;
    }
    popped
}

#[test]
fn stress_one_thief() {
    stress(1, STRESS_ITEMS, bursts(8));
}

#[test]
fn stress_three_thieves() {
    stress(3, STRESS_ITEMS, bursts(8));
}

#[test]
fn stress_seven_thieves() {
    stress(7, STRESS_ITEMS, bursts(8));
}

#[test]
fn stress_last_item_races() {
    stress(1, STRESS_ITEMS, push_pop_few);
    stress(3, STRESS_ITEMS, push_pop_few);
}

#[test]
fn stress_growth_under_contention() {
    // Bursts of 500 grow the 64-slot buffer while thieves read it.
    for _ in 0..4 {
        stress(3, STRESS_ITEMS / 4, bursts(500));
    }
}

#[test]
fn stress_many_fresh_deques_grow_while_stolen_from() {
    // Growth happens only in a deque's first bursts; run many short lives so that thieves
    // often hold a stale buffer pointer while the owner replaces it.
    // Fewer lives under Miri (see STRESS_ITEMS).
    for _ in 0..if cfg!(miri) { 5 } else { 200 } {
        stress(2, 600, bursts(300));
    }
}
