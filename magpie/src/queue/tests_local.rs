//! Tests of the task ring on real threads: sequential behaviour (FIFO, overflow, steal half,
//! refusal, `u32` wrap-around), exact drop accounting (the ring owns no item), and stress runs
//! that check every item is taken exactly once.
//!
//! The loom models of the same races are in `loom_local.rs`.

use std::ptr::NonNull;

use super::inject::Inject;
use super::local::{self, Local, Steal, CAPACITY};
use super::test_items::{handles, leak_counted, reclaim, take, value, Counted, SetOnDrop};
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicBool, AtomicUsize};

/// Items pushed by each stress run; more when optimised.
/// Miri interprets ~100x slower than a debug build: a few thousand items still wrap the ring
/// and overflow it many times.
const STRESS_ITEMS: usize = if cfg!(miri) {
    2_000
} else if cfg!(debug_assertions) {
    50_000
} else {
    1_000_000
};

const HALF: usize = CAPACITY / 2;

/// Pops every queued item's value.
fn drain(local: &Local<usize>) -> Vec<usize> {
    std::iter::from_fn(|| local.pop()).map(value).collect()
}

/// Pops every value in the inject queue.
fn drain_inject(inject: &Inject<NonNull<usize>>) -> Vec<usize> {
    std::iter::from_fn(|| inject.pop()).map(value).collect()
}

// ---- Sequential behaviour ----

#[test]
fn pop_is_fifo() {
    let values: Vec<usize> = (0..10).collect();
    let inject = Inject::new();
    let (local, _steal) = local::local();
    for item in handles(&values) {
        local.push_back(item, &inject);
    }
    assert_eq!(drain(&local), (0..10).collect::<Vec<_>>());
    assert_eq!(local.pop(), None);
    assert!(inject.is_empty());
}

#[test]
fn len_and_remaining_slots_count_items() {
    let values: Vec<usize> = (0..CAPACITY).collect();
    let inject = Inject::new();
    let (local, steal) = local::local();
    assert!(local.is_empty() && !local.has_tasks() && steal.is_empty());
    assert_eq!(local.remaining_slots(), CAPACITY);
    for (n, item) in handles(&values).into_iter().enumerate() {
        local.push_back(item, &inject);
        assert_eq!(local.len(), n + 1);
        assert_eq!(local.remaining_slots(), CAPACITY - n - 1);
    }
    assert_eq!(steal.len(), CAPACITY);
    assert!(local.has_tasks());
    local.pop().unwrap();
    assert_eq!((local.len(), steal.len()), (CAPACITY - 1, CAPACITY - 1));
    assert_eq!(local.remaining_slots(), 1);
    drain(&local);
    assert!(local.is_empty() && steal.is_empty());
    assert_eq!(local.remaining_slots(), CAPACITY);
}

#[test]
fn full_ring_overflows_half_and_the_new_item_in_order() {
    let values: Vec<usize> = (0..CAPACITY + 1).collect();
    let items = handles(&values);
    let inject = Inject::new();
    let (local, _steal) = local::local();
    for &item in &items[..CAPACITY] {
        local.push_back(item, &inject);
    }
    assert!(inject.is_empty(), "overflowed before the ring was full");
    local.push_back(items[CAPACITY], &inject);
    // The oldest half, then the new item, in one batch; the newer half stays.
    let expected: Vec<usize> = (0..HALF).chain([CAPACITY]).collect();
    assert_eq!(inject.len(), HALF + 1);
    assert_eq!(drain_inject(&inject), expected);
    assert_eq!(local.len(), HALF);
    assert_eq!(drain(&local), (HALF..CAPACITY).collect::<Vec<_>>());
}

#[test]
fn a_batch_fills_the_free_slots_and_overflows_the_rest_as_single_pushes_would() {
    // Three items already queued, then a batch one longer than the room left: the batch
    // fills the ring, and its last item overflows the oldest half, as `push_back` would.
    let values: Vec<usize> = (0..CAPACITY + 1).collect();
    let items = handles(&values);
    let inject = Inject::new();
    let (local, _steal) = local::local_starting_at(u32::MAX - 1);
    for &item in &items[..3] {
        local.push_back(item, &inject);
    }
    local.push_back_batch(items[3..].iter().copied(), &inject);
    let expected: Vec<usize> = (0..HALF).chain([CAPACITY]).collect();
    assert_eq!(drain_inject(&inject), expected);
    assert_eq!(drain(&local), (HALF..CAPACITY).collect::<Vec<_>>());

    // A batch that fits is queued whole, in order, after what was there.
    let (local, _steal) = local::local();
    local.push_back(items[0], &inject);
    local.push_back_batch(items[1..4].iter().copied(), &inject);
    local.push_back_batch(std::iter::empty(), &inject);
    assert!(inject.is_empty());
    assert_eq!(local.len(), 4);
    assert_eq!(drain(&local), [0, 1, 2, 3]);
}

#[test]
fn overflow_into_a_closed_inject_queue_frees_the_ring() {
    let values: Vec<usize> = (0..CAPACITY + 1).collect();
    let inject = Inject::new();
    inject.close();
    let (local, _steal) = local::local();
    for item in handles(&values) {
        local.push_back(item, &inject);
    }
    // The batch was refused and let go (see the `Overflow` impl); the ring still works.
    assert!(inject.is_empty());
    assert_eq!(drain(&local), (HALF..CAPACITY).collect::<Vec<_>>());
}

#[test]
fn steal_takes_half_rounded_up_and_returns_one() {
    for queued in [1, 2, 5, 100, CAPACITY] {
        let values: Vec<usize> = (0..queued).collect();
        let inject = Inject::new();
        let (victim, steal) = local::local();
        let (thief, _) = local::local();
        for item in handles(&values) {
            victim.push_back(item, &inject);
        }
        let taken = queued - queued / 2;
        let first = steal.steal_into(&thief).map(value);
        // The thief runs the newest of its batch at once; the rest wait in its ring, in order.
        assert_eq!(first, Some(taken - 1), "{queued} queued");
        assert_eq!(thief.len(), taken - 1, "{queued} queued");
        assert_eq!(steal.len(), queued - taken);
        assert_eq!(drain(&thief), (0..taken - 1).collect::<Vec<_>>());
        assert_eq!(drain(&victim), (taken..queued).collect::<Vec<_>>());
    }
}

#[test]
fn steal_all_takes_everything_in_order() {
    for queued in [0, 1, 2, 5, 100, CAPACITY] {
        let values: Vec<usize> = (0..queued).collect();
        let inject = Inject::new();
        let (victim, steal) = local::local_starting_at(u32::MAX - 3);
        for item in handles(&values) {
            victim.push_back(item, &inject);
        }
        let mut out = Vec::new();
        assert_eq!(steal.steal_all(&mut out), queued);
        assert_eq!(out.into_iter().map(value).collect::<Vec<_>>(), values);
        assert!(victim.is_empty() && steal.is_empty());
        // The owner goes on as before: the slots were given back.
        for item in handles(&values) {
            victim.push_back(item, &inject);
        }
        assert!(
            inject.is_empty(),
            "{queued} queued: the ring was not given back"
        );
        assert_eq!(drain(&victim), values);
    }
}

#[test]
fn steal_all_races_the_owner_without_loss_or_duplicates() {
    // The owner pushes and pops while another thread drains it with `steal_all`, as the
    // stall monitor does to a worker it thinks stalled: every item is taken exactly once.
    const ITEMS: usize = STRESS_ITEMS / 10;
    let values: Vec<usize> = (0..ITEMS).collect();
    let inject = Inject::new();
    let (owner, steal) = local::local();
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut out = Vec::new();
            while !done.load(Acquire) {
                out.clear();
                steal.steal_all(&mut out);
                got.extend(out.iter().map(|&p| value(p)));
            }
            out.clear();
            steal.steal_all(&mut out);
            got.extend(out.iter().map(|&p| value(p)));
            got
        })
    };
    let mut taken = Vec::new();
    for (i, item) in handles(&values).into_iter().enumerate() {
        owner.push_back(item, &inject);
        if i % 3 == 0 {
            taken.extend(owner.pop().map(value));
        }
    }
    taken.extend(drain(&owner));
    // Release: pairs with the monitor's Acquire load; it then drains what is left.
    done.store(true, Release);
    taken.extend(monitor.join().unwrap());
    taken.extend(drain_inject(&inject));
    taken.sort_unstable();
    assert_eq!(taken, values);
}

#[test]
fn steal_from_an_empty_ring_gives_nothing() {
    let (_victim, steal) = local::local::<usize>();
    let (thief, _) = local::local();
    assert_eq!(steal.steal_into(&thief), None);
    assert!(thief.is_empty());
}

#[test]
fn steal_into_a_too_full_ring_is_refused() {
    let values: Vec<usize> = (0..2 * CAPACITY).collect();
    let items = handles(&values);
    let inject = Inject::new();
    let (victim, steal) = local::local();
    let (thief, _) = local::local();
    for &item in &items[..CAPACITY] {
        victim.push_back(item, &inject);
    }
    // More than half of the destination in use: refused, and the victim keeps everything.
    for &item in &items[CAPACITY..CAPACITY + HALF + 1] {
        thief.push_back(item, &inject);
    }
    assert_eq!(steal.steal_into(&thief), None);
    assert_eq!(steal.len(), CAPACITY);
    // Exactly half in use: room for a whole batch, and it is taken.
    thief.pop().unwrap();
    assert_eq!(thief.remaining_slots(), HALF);
    assert_eq!(steal.steal_into(&thief).map(value), Some(HALF - 1));
    assert_eq!(thief.len(), CAPACITY - 1);
    assert_eq!(steal.len(), HALF);
    assert!(inject.is_empty());
}

#[test]
fn clones_of_the_thief_handle_share_the_ring() {
    let values: Vec<usize> = (0..8).collect();
    let inject = Inject::new();
    let (victim, steal) = local::local();
    let other = steal.clone();
    let (thief, _) = local::local();
    for item in handles(&values) {
        victim.push_back(item, &inject);
    }
    assert_eq!(steal.steal_into(&thief).map(value), Some(3));
    assert_eq!(other.steal_into(&thief).map(value), Some(5));
    assert_eq!(other.len(), 2);
    assert_eq!(drain(&thief), vec![0, 1, 2, 4]);
}

#[test]
fn indices_wrap_around_u32_max() {
    // Start a few hundred short of the wrap, then run every operation across it a few times.
    for start in [u32::MAX - 3, u32::MAX - 300, u32::MAX - (CAPACITY as u32)] {
        let values: Vec<usize> = (0..4 * CAPACITY).collect();
        let items = handles(&values);
        let inject = Inject::new();
        let (victim, steal) = local::local_starting_at(start);
        let (thief, _) = local::local_starting_at(start.wrapping_add(7));
        let mut out = Vec::new();
        let mut next = 0;
        for round in 0..8 {
            for &item in &items[next..next + 100] {
                victim.push_back(item, &inject);
            }
            next += 100;
            if round % 2 == 0 {
                out.extend(steal.steal_into(&thief).map(value));
                out.extend(drain(&thief));
            }
            for _ in 0..60 {
                out.extend(victim.pop().map(value));
            }
            assert!(victim.len() <= CAPACITY);
        }
        // Fill past capacity so that the overflow claim crosses the wrap too.
        while next < items.len() {
            victim.push_back(items[next], &inject);
            next += 1;
        }
        out.extend(drain_inject(&inject));
        out.extend(drain(&victim));
        out.sort_unstable();
        assert_eq!(out, (0..items.len()).collect::<Vec<_>>(), "start {start}");
    }
}

#[test]
fn fifo_across_the_wrap() {
    let values: Vec<usize> = (0..CAPACITY).collect();
    let inject = Inject::new();
    let (local, steal) = local::local_starting_at(u32::MAX - 10);
    for item in handles(&values) {
        local.push_back(item, &inject);
    }
    assert_eq!(steal.len(), CAPACITY);
    assert_eq!(local.remaining_slots(), 0);
    assert_eq!(drain(&local), (0..CAPACITY).collect::<Vec<_>>());
    assert!(inject.is_empty());
}

// ---- Destructors: the ring never owns, frees or duplicates an item ----

#[test]
fn every_item_taken_is_dropped_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let inject = Inject::new();
    let (victim, steal) = local::local();
    let (thief, _thief_steal) = local::local();
    let total = 3 * CAPACITY;
    // Overflows twice into `inject`.
    for _ in 0..total {
        victim.push_back(leak_counted(&drops), &inject);
    }
    let taken = std::iter::from_fn(|| steal.steal_into(&thief))
        .take(3)
        .chain(std::iter::from_fn(|| thief.pop()))
        .chain(std::iter::from_fn(|| victim.pop()))
        .chain(std::iter::from_fn(|| inject.pop()));
    let mut n = 0;
    for item in taken {
        // SAFETY: the queues hand each item out at most once (their contract, which this
        // test checks by counting), and every item came from `leak_counted`.
        unsafe { reclaim(item) };
        n += 1;
    }
    assert_eq!(n, total);
    drop((victim, steal, thief));
    assert_eq!(drops.load(Relaxed), total);
}

#[test]
fn dropping_the_ring_frees_no_item() {
    let drops = Arc::new(AtomicUsize::new(0));
    let items: Vec<NonNull<Counted>> = (0..100).map(|_| leak_counted(&drops)).collect();
    let inject = Inject::new();
    let (local, steal) = local::local();
    for &item in &items {
        local.push_back(item, &inject);
    }
    for _ in 0..10 {
        // SAFETY: each item comes out of the ring once.
        unsafe { reclaim(local.pop().unwrap()) };
    }
    drop(steal);
    drop(local);
    // The ring freed its slots but none of the 90 items still in them.
    assert_eq!(drops.load(Relaxed), 10);
    for &item in &items[10..] {
        // SAFETY: items 10.. were never popped, and the ring does not free items.
        unsafe { reclaim(item) };
    }
    assert_eq!(drops.load(Relaxed), 100);
}

// ---- Stress: every item taken exactly once ----

/// Runs an owner on this thread, pushing a handle to every slot of `taken` in bursts of
/// `burst` (overflowing into an inject queue when the ring is full) and popping a varying
/// share of each, down to empty every fourth round, while `thieves` threads steal half at a time into their own rings and
/// drain them. The ring's indices start at `start`. Checks that every item is taken exactly
/// once.
fn stress(thieves: usize, items: usize, burst: usize, start: u32) {
    let taken: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
    let done = AtomicBool::new(false);
    let inject = Inject::new();
    let (local, steal) = local::local_starting_at::<AtomicUsize>(start);

    std::thread::scope(|s| {
        let thief_threads: Vec<_> = (0..thieves)
            .map(|t| {
                let steal: Steal<AtomicUsize> = steal.clone();
                let done = &done;
                s.spawn(move || {
                    let (own, _) = local::local_starting_at(start.wrapping_add(t as u32));
                    let mut count = 0usize;
                    loop {
                        match steal.steal_into(&own) {
                            Some(item) => {
                                take(item);
                                count += 1;
                                while let Some(item) = own.pop() {
                                    take(item);
                                    count += 1;
                                }
                            }
                            // Acquire: pairs with the owner's Release store; after it the
                            // owner pushes nothing more and has drained the ring.
                            None if done.load(Acquire) => return count,
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();

        // Release the thieves even if the owner panics (say, on a duplicate), so that the
        // scope's join reports the failure instead of hanging.
        let release_thieves = SetOnDrop(&done);
        let mut popped = 0;
        for (round, chunk) in taken.chunks(burst).enumerate() {
            // Every third round pushes its burst as one batch (`pull_inject`'s way).
            if round % 3 == 2 {
                local.push_back_batch(chunk.iter().map(NonNull::from), &inject);
            } else {
                for slot in chunk {
                    local.push_back(NonNull::from(slot), &inject);
                }
            }
            // Every fourth round, give the thieves a chance to take half of what is queued.
            // This only shapes the load: the checks hold however much they take, and the
            // yields are bounded so that a thief that died cannot hang the owner.
            if round % 4 == 1 {
                let target = local.len() / 2;
                for _ in 0..1_000 {
                    if local.len() <= target {
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            let pops = match round % 4 {
                0 => 0,
                1 => burst,
                2 => burst / 2,
                _ => usize::MAX,
            };
            for item in std::iter::from_fn(|| local.pop()).take(pops) {
                take(item);
                popped += 1;
            }
        }
        // Drain what is left; after this the ring is empty for good.
        while let Some(item) = local.pop() {
            take(item);
            popped += 1;
        }
        assert!(local.is_empty());
        drop(release_thieves);
        let mut overflowed = 0;
        while let Some(item) = inject.pop() {
            take(item);
            overflowed += 1;
        }

        let stolen: usize = thief_threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            popped + overflowed + stolen,
            items,
            "items lost or duplicated"
        );
    });

    let bad: Vec<usize> = (0..items)
        .filter(|&i| taken[i].load(Relaxed) != 1)
        .collect();
    assert!(
        bad.is_empty(),
        "{} items not taken exactly once, first {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

#[test]
fn stress_one_thief() {
    stress(1, STRESS_ITEMS, 8, 0);
    stress(1, STRESS_ITEMS, 300, 0);
}

#[test]
fn stress_three_thieves() {
    stress(3, STRESS_ITEMS, 8, 0);
    stress(3, STRESS_ITEMS, 300, 0);
}

#[test]
fn stress_seven_thieves() {
    stress(7, STRESS_ITEMS, 8, 0);
    stress(7, STRESS_ITEMS, 300, 0);
}

#[test]
fn stress_across_the_wrap() {
    // 2^32 - 10,000: the owner's and the thieves' indices all cross `u32::MAX` mid-run.
    // Under Miri's smaller STRESS_ITEMS, 500 before the wrap so that it still falls mid-run.
    let before_wrap = if cfg!(miri) { 500 } else { 10_000 };
    stress(3, STRESS_ITEMS, 40, u32::MAX - before_wrap);
}
