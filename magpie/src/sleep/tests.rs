//! Tests of the idle coordinator on real threads: the state accounting of each operation,
//! token handling, the bitmap beyond one word, and a ping-pong stress of the whole protocol
//! (publish ∥ park) in the runtime's barrier mode.
//!
//! Timeouts passed to `park` below never decide an outcome: a parked worker either has a
//! token or an unclaimed bit, and `park` reports which, however long it waited. Where a park
//! has no timeout, a lost wakeup shows as a hung test. The loom models of the same races are
//! in `loom_sleep.rs`.

use super::*;
use crate::sync::{Arc, AtomicBool, AtomicUsize};

/// Short enough not to slow the suite; the outcome does not depend on it (see module doc).
const BRIEFLY: Option<Duration> = Some(Duration::from_millis(1));

fn counts(sleep: &Sleep) -> (usize, usize) {
    let state = sleep.load();
    (state.unparked(), state.searching())
}

/// A pool of `n` workers, every one registered as parked (none of them searching).
fn parked_pool(n: usize) -> Sleep {
    let sleep = Sleep::new(n);
    for worker in 0..n {
        assert!(!sleep.register_parked(worker, false));
    }
    sleep
}

#[test]
fn state_masks_are_disjoint() {
    assert_eq!(SEARCHING_ONE & !SEARCHING_MASK, 0);
    assert_eq!(UNPARKED_ONE & SEARCHING_MASK, 0);
    let state = IdleState(5 * UNPARKED_ONE + 3 * SEARCHING_ONE);
    assert_eq!(state.unparked(), 5);
    assert_eq!(state.searching(), 3);
}

#[test]
fn new_counts_every_worker_unparked() {
    for n in [1, 2, 4, 63, 64, 65, 130] {
        let sleep = Sleep::new(n);
        assert_eq!(counts(&sleep), (n, 0), "{n} workers");
        assert_eq!(sleep.num_workers(), n);
        assert_eq!(sleep.load(), IdleState(sleep.saturated_state()));
        // Nobody is parked, so nobody can be woken.
        assert!(!sleep.wake_any_cold());
        sleep.notify_work();
        assert_eq!(counts(&sleep), (n, 0));
    }
}

#[test]
#[should_panic(expected = "worker count out of range")]
fn zero_workers_is_refused() {
    let _ = Sleep::new(0);
}

#[test]
fn searchers_are_capped_at_half_the_workers() {
    let sleep = Sleep::new(4);
    assert!(sleep.try_start_searching());
    assert!(sleep.try_start_searching());
    assert!(!sleep.try_start_searching());
    assert!(!sleep.try_start_searching());
    assert_eq!(counts(&sleep), (4, 2));

    // In general ceil(n / 2), and at least one, so a lone worker can search.
    for n in 1..=9 {
        let sleep = Sleep::new(n);
        let mut admitted = 0;
        while sleep.try_start_searching() {
            admitted += 1;
            assert!(admitted <= n, "no cap with {n} workers");
        }
        assert_eq!(admitted, n.div_ceil(2), "{n} workers");
        assert_eq!(sleep.load().searching(), admitted);
    }
}

/// Parks each of `workers` (registered as parked) once, briefly, and returns how many found
/// their wakeup claimed by a notifier (they wake as searchers); the others settle their own
/// registration.
fn claimed_among(sleep: &Sleep, workers: std::ops::Range<usize>) -> usize {
    workers
        .filter(|&w| sleep.park(w, BRIEFLY) == Wake::Searching)
        .count()
}

#[test]
fn backlog_wakes_at_least_where_r1_wakes() {
    // R1b only adds wakes: in every state where R1 wakes, R1b does too, so a publisher
    // that takes R1b's path loses none of R1's wakeups. It adds them in the symmetric mode
    // alone, where R4 would admit one more searcher and a CPU has no worker awake.
    for barrier in [Barrier::SYMMETRIC, Barrier::best_available()] {
        for n in 1..=130 {
            for cpus in [1, 2, n, 2 * n] {
                let mut sleep = Sleep::with_driver(n, None, barrier);
                sleep.set_cpus(cpus);
                for unparked in 0..=n {
                    for searching in 0..=unparked {
                        let state = IdleState(
                            unparked as u64 * UNPARKED_ONE + searching as u64 * SEARCHING_ONE,
                        );
                        let r1 = sleep.wake_wanted(state);
                        let r1b = sleep.backlog_wake_wanted(state);
                        let at = format!(
                            "{barrier:?}, {n} workers, {cpus} CPUs, {unparked} unparked, \
                             {searching} searching"
                        );
                        assert!(!r1 || r1b, "{at}");
                        let extra =
                            !barrier.is_asymmetric() && unparked < n.min(cpus) && 2 * searching < n;
                        assert_eq!(r1b, r1 || extra, "{at}");
                        if n <= 2 {
                            // At 2 workers at most one searches: the rules agree.
                            assert_eq!(r1, r1b, "{at}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn backlog_wakes_one_more_while_fewer_than_half_search() {
    let sleep = Sleep::new(4);
    // Workers 2 and 3 parked; worker 1 searches; worker 0 publishes.
    assert!(!sleep.register_parked(2, false));
    assert!(!sleep.register_parked(3, false));
    assert!(sleep.try_start_searching());
    assert_eq!(counts(&sleep), (2, 1));
    // Without a backlog the searcher is enough (R1): nobody is woken.
    sleep.notify_job(false);
    assert_eq!(counts(&sleep), (2, 1));
    // With one, a parked worker is woken, as a searcher (R1b).
    sleep.notify_job(true);
    assert_eq!(counts(&sleep), (3, 2));
    // Now half the workers search: R4's cap, so no further wake.
    sleep.notify_job(true);
    assert_eq!(counts(&sleep), (3, 2));
    // Exactly one of the two parked workers was claimed: it wakes as a searcher, the
    // other settles its own registration.
    assert_eq!(claimed_among(&sleep, 2..4), 1);
    assert_eq!(counts(&sleep), (4, 2));
}

#[test]
fn backlog_wakes_nobody_while_every_cpu_has_a_worker_awake() {
    // 8 workers on 3 CPUs: one searches, another publishes, the other 6 are parked.
    let mut sleep = Sleep::new(8);
    sleep.set_cpus(3);
    for worker in 2..8 {
        assert!(!sleep.register_parked(worker, false));
    }
    assert!(sleep.try_start_searching());
    assert_eq!(counts(&sleep), (2, 1));
    // A CPU is free: the backlog wakes a worker for it, as a searcher.
    sleep.notify_job(true);
    assert_eq!(counts(&sleep), (3, 2));
    // Three awake on three CPUs: a fourth would only take a CPU from one of them, though
    // R4 would still admit another searcher.
    sleep.notify_job(true);
    assert_eq!(counts(&sleep), (3, 2));
    assert_eq!(claimed_among(&sleep, 2..8), 1);
    assert_eq!(counts(&sleep), (8, 2));
}

#[test]
fn a_queue_longer_than_the_workers_awake_wakes_one_more() {
    // Six workers on four CPUs, all parked; tasks arrive from outside the pool (a thread on
    // a CPU of its own), in either barrier mode (R1c does not depend on it).
    for barrier in [Barrier::SYMMETRIC, Barrier::best_available()] {
        let mut sleep = Sleep::with_driver(6, None, barrier);
        sleep.set_cpus(4);
        for worker in 0..6 {
            let _ = sleep.register_parked(worker, false);
        }
        // Into an empty queue, nobody searching: R1 wakes one.
        sleep.notify_task_after_seqcst_push(0);
        assert_eq!(counts(&sleep), (1, 1), "{barrier:?}");
        // Behind one task, with one worker awake: one more (R1c), though one searches.
        sleep.notify_task_after_seqcst_push(1);
        assert_eq!(counts(&sleep), (2, 2), "{barrier:?}");
        // Behind one task with two awake: they can take it, nobody more.
        sleep.notify_task_after_seqcst_push(1);
        assert_eq!(counts(&sleep), (2, 2), "{barrier:?}");
        // Behind two: one more.
        sleep.notify_task_after_seqcst_push(2);
        assert_eq!(counts(&sleep), (3, 3), "{barrier:?}");
        // Three awake, and the fourth CPU is the submitter's: however long the queue, a
        // fourth worker would only take a CPU from it or from them.
        sleep.notify_task_after_seqcst_push(100);
        assert_eq!(counts(&sleep), (3, 3), "{barrier:?}");
        // Each wake claimed one parked worker, which wakes as a searcher.
        assert_eq!(claimed_among(&sleep, 0..6), 3, "{barrier:?}");
    }
}

#[test]
fn a_queued_task_wakes_where_r1_or_r1c_says() {
    // Through the remote push's own path, from every state of small pools: a wake happens
    // exactly where R1 (nobody searches) or R1c (the queue at least as long as the workers
    // awake, fewer awake than CPUs beside the submitter's) asks, and somebody is parked. R1c only adds wakes, so
    // the push loses none of R1's wakeups (the proof of README.md covers R1).
    for n in 1..=6usize {
        for cpus in [1, 2, n, 2 * n] {
            for parked in 0..=n {
                let unparked = n - parked;
                for searching in 0..=unparked.min(n.div_ceil(2)) {
                    for queued_before in 0..=n + 1 {
                        let mut sleep = Sleep::new(n);
                        sleep.set_cpus(cpus);
                        for worker in 0..parked {
                            let _ = sleep.register_parked(worker, false);
                        }
                        for _ in 0..searching {
                            assert!(sleep.try_start_searching());
                        }
                        sleep.notify_task_after_seqcst_push(queued_before);
                        let woke = counts(&sleep).0 > unparked;
                        let r1 = searching == 0;
                        let r1c = queued_before > 0
                            && queued_before >= unparked
                            && unparked < n.min(cpus - 1);
                        assert_eq!(
                            woke,
                            parked > 0 && (r1 || r1c),
                            "{n} workers, {cpus} CPUs, {parked} parked, {searching} \
                             searching, {queued_before} queued before"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn stop_searching_reports_the_last_searcher() {
    let sleep = Sleep::new(4);
    assert!(sleep.try_start_searching());
    assert!(sleep.try_start_searching());
    assert!(!sleep.stop_searching());
    assert_eq!(counts(&sleep), (4, 1));
    assert!(sleep.stop_searching());
    assert_eq!(counts(&sleep), (4, 0));
    // A freed place can be taken again.
    assert!(sleep.try_start_searching());
    assert!(sleep.stop_searching());
}

#[test]
fn register_parked_updates_the_counts() {
    let sleep = Sleep::new(4);
    // Not searching: only the unparked count drops.
    assert!(!sleep.register_parked(0, false));
    assert_eq!(counts(&sleep), (3, 0));

    // Two searchers; the first to park is not the last searcher, the second is.
    assert!(sleep.try_start_searching());
    assert!(sleep.try_start_searching());
    assert!(!sleep.register_parked(1, true));
    assert_eq!(counts(&sleep), (2, 1));
    assert!(sleep.register_parked(2, true));
    assert_eq!(counts(&sleep), (1, 0));

    // Each registration is undone once: by the worker itself (Plain)...
    assert_eq!(sleep.park(0, BRIEFLY), Wake::Plain);
    assert_eq!(counts(&sleep), (2, 0));
    // ...or by a notifier, which counts it as searching.
    assert!(sleep.wake_any_cold());
    assert_eq!(counts(&sleep), (3, 1));
    assert_eq!(sleep.park(1, None), Wake::Searching);
    assert_eq!(sleep.park(2, BRIEFLY), Wake::Plain);
    assert_eq!(counts(&sleep), (4, 1));
}

#[test]
fn only_a_park_that_leaves_a_worker_unparked_pays_a_heavy_barrier() {
    let barrier = Barrier::best_available();
    let sleep = Sleep::with_driver(3, None, barrier);
    let heavy = || crate::sync::barrier::heavy_count();
    let before = heavy();
    let _ = sleep.register_parked(0, false);
    let _ = sleep.register_parked(1, false);
    let two_left_running = heavy() - before;
    // The last worker to park finds everyone else parked (R2').
    let _ = sleep.register_parked(2, false);
    let last = heavy() - before - two_left_running;
    assert_eq!(counts(&sleep), (0, 0));
    assert_eq!(last, 0, "the last park paid a heavy barrier");
    if barrier.is_asymmetric() {
        assert_eq!(two_left_running, 2);
    } else {
        assert_eq!(
            two_left_running, 0,
            "the symmetric mode counts no membarrier"
        );
    }
}

#[test]
fn notify_wakes_a_parked_worker() {
    let n = 3;
    let sleep = Arc::new(Sleep::new(n));
    let sleeper = {
        let sleep = sleep.clone();
        std::thread::spawn(move || {
            assert!(!sleep.register_parked(0, false));
            sleep.park(0, None)
        })
    };
    // Wait (on a condition, not a clock) until the worker has registered.
    while sleep.load().unparked() == n {
        std::thread::yield_now();
    }
    assert_eq!(counts(&sleep), (n - 1, 0));
    // Two workers still run, nobody searches: the notification must claim the sleeper. It
    // does so before returning, so check the counts first (a failure here leaves the sleeper
    // parked, but does not hang the test).
    sleep.notify_work();
    assert_eq!(counts(&sleep), (n, 1));
    assert_eq!(sleeper.join().unwrap(), Wake::Searching);
    assert_eq!(counts(&sleep), (n, 1));
    // The wakeup was claimed once: nobody is left to wake.
    assert!(!sleep.wake_any_cold());
}

#[test]
fn notify_wakes_nobody_while_someone_searches() {
    let sleep = Sleep::new(2);
    assert!(!sleep.register_parked(1, false));
    assert!(sleep.try_start_searching());
    sleep.notify_work();
    // The searcher will find the work; worker 1 stays parked.
    assert_eq!(counts(&sleep), (1, 1));
    // Once the last searcher stops, the same call wakes worker 1.
    assert!(sleep.stop_searching());
    sleep.notify_work();
    assert_eq!(counts(&sleep), (2, 1));
    assert_eq!(sleep.park(1, None), Wake::Searching);
}

#[test]
fn notify_wakes_one_worker_per_call() {
    let sleep = parked_pool(3);
    assert_eq!(counts(&sleep), (0, 0));
    sleep.notify_work();
    assert_eq!(counts(&sleep), (1, 1));
    // Somebody now searches, so a second notification wakes nobody else.
    sleep.notify_work();
    assert_eq!(counts(&sleep), (1, 1));
    // The lowest bit went first.
    assert_eq!(sleep.park(0, None), Wake::Searching);
    assert_eq!(sleep.park(1, BRIEFLY), Wake::Plain);
    assert_eq!(sleep.park(2, BRIEFLY), Wake::Plain);
    assert_eq!(counts(&sleep), (3, 1));
}

#[test]
fn an_entry_from_outside_wakes_a_runner_and_a_thief() {
    let sleep = parked_pool(3);
    assert_eq!(sleep.notify_entry_outside(), 2);
    assert_eq!(counts(&sleep), (2, 2));
    // Somebody searches now, so the next entry wakes nobody (R1).
    assert_eq!(sleep.notify_entry_outside(), 0);
    assert_eq!(counts(&sleep), (2, 2));
    assert_eq!(sleep.park(0, None), Wake::Searching);
    assert_eq!(sleep.park(1, None), Wake::Searching);
    assert_eq!(sleep.park(2, BRIEFLY), Wake::Plain);
    assert_eq!(counts(&sleep), (3, 2));
}

#[test]
fn an_entry_from_outside_wakes_what_is_parked() {
    // One of two parked: one woken.
    let sleep = Sleep::new(2);
    assert!(!sleep.register_parked(1, false));
    assert_eq!(sleep.notify_entry_outside(), 1);
    assert_eq!(counts(&sleep), (2, 1));
    assert_eq!(sleep.park(1, None), Wake::Searching);
    // A pool of one.
    let sleep = Sleep::new(1);
    assert!(!sleep.register_parked(0, false));
    assert_eq!(sleep.notify_entry_outside(), 1);
    assert_eq!(sleep.park(0, None), Wake::Searching);
    // Nobody parked: nobody woken.
    let sleep = Sleep::new(2);
    assert_eq!(sleep.notify_entry_outside(), 0);
    assert_eq!(counts(&sleep), (2, 0));
}

#[test]
fn park_times_out_as_plain_and_restores_the_counts() {
    let sleep = Sleep::new(2);
    assert!(sleep.try_start_searching());
    assert!(sleep.register_parked(0, true));
    assert_eq!(counts(&sleep), (1, 0));
    assert_eq!(sleep.park(0, BRIEFLY), Wake::Plain);
    // Unparked again, not searching (it did not stay a searcher through the park), and its
    // bit is gone: there is nobody to wake.
    assert_eq!(counts(&sleep), (2, 0));
    assert!(!sleep.wake_any_cold());
}

#[test]
fn wake_worker_token_is_kept_until_the_next_park() {
    let sleep = Sleep::new(2);
    // Woken after registering, before blocking: the park returns at once.
    assert!(!sleep.register_parked(0, false));
    sleep.wake_worker(0);
    assert_eq!(sleep.park(0, None), Wake::Plain);
    assert_eq!(counts(&sleep), (2, 0));

    // Woken before even registering: the token waits in the parker.
    sleep.wake_worker(1);
    assert!(!sleep.register_parked(1, false));
    assert_eq!(sleep.park(1, None), Wake::Plain);
    assert_eq!(counts(&sleep), (2, 0));
    assert!(!sleep.wake_any_cold());
}

#[test]
fn notifier_claim_wins_over_a_plain_token() {
    let sleep = Sleep::new(2);
    assert!(!sleep.register_parked(0, false));
    sleep.wake_worker(0);
    // A notifier claims the bit before the worker wakes: the worker is counted as a searcher,
    // so it must report Searching (or the count would leak), even with a plain token present.
    assert!(sleep.wake_any_cold());
    assert_eq!(sleep.park(0, None), Wake::Searching);
    assert_eq!(counts(&sleep), (2, 1));
}

#[test]
fn parking_worker_may_claim_its_own_bit() {
    // R5: the recheck after registering found work and woke "any" parked worker, which is the
    // rechecking worker itself when it is the only one parked.
    let sleep = Sleep::new(2);
    assert!(!sleep.register_parked(1, false));
    assert!(sleep.wake_any_cold());
    assert_eq!(counts(&sleep), (2, 1));
    assert_eq!(sleep.park(1, None), Wake::Searching);
    assert_eq!(counts(&sleep), (2, 1));
}

#[test]
fn bitmap_reaches_workers_past_the_first_word() {
    let n = 130;
    let sleep = Sleep::new(n);
    assert!(!sleep.register_parked(129, false));
    assert_eq!(counts(&sleep), (n - 1, 0));
    assert!(sleep.wake_any_cold());
    assert_eq!(counts(&sleep), (n, 1));
    assert_eq!(sleep.park(129, None), Wake::Searching);
    assert!(!sleep.wake_any_cold());

    // Workers in three different words are woken lowest first, one per call.
    for worker in [129, 64, 3] {
        assert!(!sleep.register_parked(worker, false));
    }
    assert_eq!(counts(&sleep), (n - 3, 1));
    assert!(sleep.wake_any_cold());
    assert_eq!(sleep.park(3, None), Wake::Searching);
    assert!(sleep.wake_any_cold());
    assert_eq!(sleep.park(64, None), Wake::Searching);
    assert_eq!(sleep.park(129, BRIEFLY), Wake::Plain);
    assert_eq!(counts(&sleep), (n, 3));

    // A plain wakeup reaches a high index too.
    assert!(!sleep.register_parked(128, false));
    sleep.wake_worker(128);
    assert_eq!(sleep.park(128, None), Wake::Plain);
    assert_eq!(counts(&sleep), (n, 3));
}

/// The workers of a 130-worker pool on either side of each boundary of the bitmap's words:
/// the last of word 0, the first and last of word 1, the first two of word 2.
const BOUNDARY: [usize; 5] = [63, 64, 127, 128, 129];

#[test]
fn a_130_worker_pool_claims_each_boundary_worker_once() {
    let n = 130;
    let sleep = Sleep::new(n);
    // Half of 130 may search (R4).
    let mut admitted = 0;
    while sleep.try_start_searching() {
        admitted += 1;
    }
    assert_eq!(admitted, 65);
    for _ in 0..admitted - 2 {
        assert!(!sleep.stop_searching());
    }
    assert_eq!(counts(&sleep), (n, 2));

    // Two of them park as searchers (63 and 128), the others not; the second searcher to
    // park is the last.
    for worker in BOUNDARY {
        let searching = worker == 63 || worker == 128;
        assert_eq!(sleep.register_parked(worker, searching), worker == 128);
    }
    assert_eq!(counts(&sleep), (n - 5, 0));
    assert!(sleep.has_parked_free());

    // Each claim takes the lowest set bit, across the words, and hands that worker (and only
    // it) a searching token; the worker's park reports it.
    for (k, worker) in BOUNDARY.into_iter().enumerate() {
        assert!(sleep.wake_any_cold(), "claim {k}");
        assert_eq!(counts(&sleep), (n - 4 + k, k + 1));
        assert_eq!(
            sleep.park(worker, BRIEFLY),
            Wake::Searching,
            "worker {worker}"
        );
        // Unchanged: the claim did the accounting, the park only consumed the token.
        assert_eq!(counts(&sleep), (n - 4 + k, k + 1));
    }
    // Each bit was claimed once: nothing is left to claim.
    assert!(!sleep.wake_any_cold());
    assert!(!sleep.has_parked_free());
    for k in 0..5 {
        assert_eq!(sleep.stop_searching(), k == 4);
    }
    assert_eq!(counts(&sleep), (n, 0));
    assert_eq!(sleep.load(), IdleState(sleep.saturated_state()));
}

/// R3a: a last searcher with every other worker parked looks at the queues before it wakes
/// anyone, in both modes: nobody for nothing, one worker for a task it sees. With another
/// worker awake, the asymmetric mode wakes one without looking, as before (R3).
#[test]
fn the_last_searcher_alone_wakes_only_for_work_it_sees() {
    for barrier in [Barrier::SYMMETRIC, Barrier::best_available()] {
        let mode = barrier.mode();
        // Workers 0 and 1 park; worker 2 searches, finds work and is alone.
        let sleep = Sleep::with_driver(3, None, barrier);
        assert!(!sleep.register_parked(0, false));
        assert!(!sleep.register_parked(1, false));
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || false);
        assert_eq!(counts(&sleep), (1, 0), "{mode:?}: a wake for nothing");
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || true);
        assert_eq!(counts(&sleep), (2, 1), "{mode:?}: nobody woken for a task");
        // Worker 0 wakes as the searcher and finds work; worker 2 is awake too.
        assert_eq!(sleep.park(0, BRIEFLY), Wake::Searching);
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || false);
        let woken = usize::from(barrier.is_asymmetric());
        assert_eq!(
            counts(&sleep),
            (2 + woken, woken),
            "{mode:?}: not alone, with nothing seen"
        );
        if barrier.is_asymmetric() {
            assert_eq!(sleep.park(1, BRIEFLY), Wake::Searching);
            assert!(sleep.stop_searching());
        }
    }
}

/// R3, the last searcher finding work: a worker parked inside `join` is woken only for a job
/// (R6: it runs nothing else), and a worker parked outside `join` before it, in both modes.
/// In the asymmetric mode the rule looks at no queue for tasks while another worker is awake
/// (its barrier would be a `membarrier`); until 2026-11-29 it woke the lowest parked bit, a
/// join-waiter included.
#[test]
fn the_last_searcher_wakes_a_join_waiter_only_for_a_job() {
    for barrier in [Barrier::SYMMETRIC, Barrier::best_available()] {
        let mode = barrier.mode();
        // Worker 0 waits inside `join`, parked; worker 2 searches and finds a task.
        let sleep = Sleep::with_driver(3, None, barrier);
        sleep.set_join_waiting(0, true);
        assert!(!sleep.register_parked(0, false));
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || true);
        assert_eq!(
            counts(&sleep),
            (2, 0),
            "{mode:?}: a join-waiter woken for a task"
        );
        // A job is queued: the join-waiter is woken for it.
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| true, || false);
        assert_eq!(counts(&sleep), (3, 1), "{mode:?}: nobody woken for a job");
        assert_eq!(sleep.park(0, BRIEFLY), Wake::Searching);
        assert!(sleep.stop_searching());
        // Worker 1 parks too, outside `join`, above the join-waiter's bit: it is the one
        // woken for a task (worker 2 is alone now, so both modes look first: R3a).
        assert!(!sleep.register_parked(0, false));
        assert!(!sleep.register_parked(1, false));
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || true);
        assert_eq!(counts(&sleep), (2, 1), "{mode:?}: nobody woken for a task");
        assert_eq!(sleep.park(1, BRIEFLY), Wake::Searching);
        assert!(sleep.stop_searching());
        // Nothing seen anywhere: the symmetric mode wakes nobody; the asymmetric one wakes a
        // worker outside `join` if one is parked (none is now), never the join-waiter.
        assert!(sleep.try_start_searching());
        assert!(sleep.stop_searching());
        sleep.last_searcher_found_work(|| false, || false);
        assert_eq!(counts(&sleep), (2, 0), "{mode:?}: a wake for nothing");
        assert_eq!(sleep.park(0, BRIEFLY), Wake::Plain);
        sleep.set_join_waiting(0, false);
        assert_eq!(counts(&sleep), (3, 0));
    }
}

#[test]
fn a_130_worker_pool_skips_join_waiters_across_words() {
    let n = 130;
    let sleep = Sleep::new(n);
    // 64 and 128, the first of words 1 and 2, wait inside `join` (R6).
    sleep.set_join_waiting(64, true);
    sleep.set_join_waiting(128, true);
    for worker in BOUNDARY {
        assert!(!sleep.register_parked(worker, false));
    }
    assert_eq!(counts(&sleep), (n - 5, 0));
    // A task's publisher, with nobody searching, claims the lowest worker outside `join`.
    sleep.notify_task();
    assert_eq!(counts(&sleep), (n - 4, 1));
    assert_eq!(sleep.park(63, BRIEFLY), Wake::Searching);
    // Then claims skip the join-waiters of words 1 and 2.
    assert!(sleep.wake_free_cold());
    assert_eq!(sleep.park(127, BRIEFLY), Wake::Searching);
    assert!(sleep.wake_free_cold());
    assert_eq!(sleep.park(129, BRIEFLY), Wake::Searching);
    assert!(!sleep.wake_free_cold());
    assert!(!sleep.has_parked_free());
    assert_eq!(counts(&sleep), (n - 2, 3));
    // A job's publisher may wake them, lowest first.
    assert!(sleep.wake_any_cold());
    assert_eq!(sleep.park(64, BRIEFLY), Wake::Searching);
    assert!(sleep.wake_any_cold());
    assert_eq!(sleep.park(128, BRIEFLY), Wake::Searching);
    assert!(!sleep.wake_any_cold());
    assert_eq!(counts(&sleep), (n, 5));
    for k in 0..5 {
        assert_eq!(sleep.stop_searching(), k == 4);
    }
    sleep.set_join_waiting(64, false);
    sleep.set_join_waiting(128, false);
    // No longer join-waiters: a task's claim reaches them again.
    assert!(!sleep.register_parked(128, false));
    assert!(sleep.wake_free_cold());
    assert_eq!(sleep.park(128, BRIEFLY), Wake::Searching);
    assert!(sleep.stop_searching());
    assert_eq!(counts(&sleep), (n, 0));
}

/// 130 parked threads, woken concurrently by notifiers (claims) and, for every third worker
/// and each boundary worker, by a plain wake as well: every registration is undone exactly
/// once, by a notifier (the worker reports `Searching`) or by the worker itself (`Plain`),
/// and the counts come back to 130 unparked with one searcher per claim. The parks have no
/// timeout: a lost wakeup hangs the test.
#[test]
fn a_130_worker_pool_undoes_every_registration_once() {
    const NOTIFIERS: usize = 3;
    let n = 130;
    let sleep = Sleep::with_driver(n, None, Barrier::best_available());
    let claims = AtomicUsize::new(0);
    let wakes: Vec<Wake> = std::thread::scope(|s| {
        let parked: Vec<_> = (0..n)
            .map(|worker| {
                let sleep = &sleep;
                s.spawn(move || {
                    assert!(!sleep.register_parked(worker, false));
                    sleep.park(worker, None)
                })
            })
            .collect();
        // Every worker registered (a condition, not a clock): from here on a notifier that
        // finds no bit set has nobody left to claim.
        while sleep.load().unparked() != 0 {
            std::thread::yield_now();
        }
        for _ in 0..NOTIFIERS {
            let (sleep, claims) = (&sleep, &claims);
            s.spawn(move || {
                while sleep.wake_any_cold() {
                    claims.fetch_add(1, Relaxed);
                }
            });
        }
        for worker in (0..n).filter(|w| w % 3 == 0 || BOUNDARY.contains(w)) {
            sleep.wake_worker(worker);
        }
        parked.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let searching = wakes.iter().filter(|&&w| w == Wake::Searching).count();
    assert_eq!(searching, claims.load(Relaxed));
    // Workers without a plain wake could only be claimed.
    for (worker, wake) in wakes.iter().enumerate() {
        if worker % 3 != 0 && !BOUNDARY.contains(&worker) {
            assert_eq!(*wake, Wake::Searching, "worker {worker}");
        }
    }
    assert_eq!(counts(&sleep), (n, searching));
    assert!(!sleep.wake_any_cold());
    for k in 0..searching {
        assert_eq!(sleep.stop_searching(), k + 1 == searching);
    }
    assert_eq!(counts(&sleep), (n, 0));
}

/// A pool of workers that follow the protocol of `runtime::worker::IdleLoop` (without the
/// spinning) around a queue that is just a count of pending jobs.
struct PingPong {
    sleep: Sleep,
    pending: AtomicUsize,
    executed: AtomicUsize,
    done: AtomicBool,
}

impl PingPong {
    fn try_take(&self) -> bool {
        // Relaxed: the count carries no data; the sleep protocol orders it by barriers.
        let mut n = self.pending.load(Relaxed);
        while n > 0 {
            match self
                .pending
                .compare_exchange_weak(n, n - 1, Relaxed, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    fn publish(&self, jobs: usize) {
        self.pending.fetch_add(jobs, Relaxed);
        // R1, from a thread outside the pool: the fence that pairs with a worker that parks
        // last and so skips its heavy barrier (R2').
        self.sleep.notify_work_outside();
    }

    fn worker(&self, index: usize) {
        let mut searching = false;
        loop {
            if self.try_take() {
                self.executed.fetch_add(1, Relaxed);
                // R3.
                if searching {
                    searching = false;
                    if self.sleep.stop_searching() {
                        self.sleep.notify_work();
                    }
                }
                continue;
            }
            // Acquire: pairs with the Release store in the test body.
            if self.done.load(Acquire) {
                break;
            }
            if !searching {
                searching = self.sleep.try_start_searching();
            }
            // R2, then R5.
            let _ = self.sleep.register_parked(index, searching);
            searching = false;
            if self.pending.load(Relaxed) > 0 {
                self.sleep.wake_any_cold();
            }
            if self.sleep.park(index, None) == Wake::Searching {
                searching = true;
            }
        }
        if searching {
            let _ = self.sleep.stop_searching();
        }
    }
}

#[test]
fn ping_pong_never_loses_a_wakeup() {
    // Under Miri a few dozen rounds per pool: 10,000 had not finished the first pools in
    // 8 minutes there.
    const ROUNDS: usize = if cfg!(miri) {
        30
    } else if cfg!(debug_assertions) {
        10_000
    } else {
        100_000
    };
    // Both barrier modes: membarrier on the parking side where the kernel has it.
    let modes = [Barrier::SYMMETRIC, Barrier::best_available()];
    for (workers, barrier) in [1, 2, 3].into_iter().flat_map(|w| modes.map(|b| (w, b))) {
        let pool = PingPong {
            sleep: Sleep::with_driver(workers, None, barrier),
            pending: AtomicUsize::new(0),
            executed: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        };
        let mut published = 0;
        std::thread::scope(|s| {
            for index in 0..workers {
                let pool = &pool;
                s.spawn(move || pool.worker(index));
            }
            for round in 0..ROUNDS {
                let jobs = round % 3 + 1;
                pool.publish(jobs);
                published += jobs;
                // Wait until the workers ran them, so that they go back to sleep before the
                // next round. A lost wakeup hangs here.
                while pool.executed.load(Relaxed) < published {
                    std::thread::yield_now();
                }
            }
            // Release: pairs with the workers' Acquire load; the plain tokens are kept, so a
            // worker between its check and its park still wakes.
            pool.done.store(true, Release);
            for index in 0..workers {
                pool.sleep.wake_worker(index);
            }
        });
        assert_eq!(pool.executed.load(Relaxed), published);
        assert_eq!(pool.pending.load(Relaxed), 0);
        // Every worker left unparked and not searching.
        assert_eq!(counts(&pool.sleep), (workers, 0), "{workers} workers");
        assert!(!pool.sleep.wake_any_cold());
    }
}

#[test]
fn a_batch_wakes_a_worker_per_task_where_a_single_task_wakes_one() {
    // Four parked workers; a batch of three tasks from outside the pool.
    let sleep = Sleep::new(4);
    for worker in 0..4 {
        let _ = sleep.register_parked(worker, false);
    }
    assert_eq!(counts(&sleep), (0, 0));
    // The first task's notification (R1) wakes one searcher.
    sleep.notify_task_after_seqcst_push(0);
    assert_eq!(counts(&sleep), (1, 1));
    // R1 alone wakes nobody more while that one searches (the searcher took the first task
    // already: no backlog)...
    sleep.notify_task_after_seqcst_push(0);
    assert_eq!(counts(&sleep), (1, 1));
    // ...but the batch's second and third tasks each wake one more.
    sleep.notify_batch_task(1);
    assert_eq!(counts(&sleep), (2, 2));
    sleep.notify_batch_task(2);
    assert_eq!(counts(&sleep), (3, 3));
    // No more than the batch's tasks: with three unparked, a repeat for task 2 wakes nobody.
    sleep.notify_batch_task(2);
    assert_eq!(counts(&sleep), (3, 3));
    // Never beyond the pool: all four unparked, nothing left to wake.
    sleep.notify_batch_task(3);
    sleep.notify_batch_task(3);
    assert_eq!(counts(&sleep), (4, 4));
    assert!(!sleep.wake_any_cold());
}

/// R7: while a parked worker watches the LIFO slots, a fill of an empty slot wakes nobody;
/// once it stops watching, fills wake as R1 says again. Other notifications never defer to
/// the watcher: it is parked, and they claim it like any sleeper.
#[test]
fn a_fill_wakes_nobody_while_a_worker_watches() {
    let sleep = Sleep::new(2);
    assert!(sleep.try_watch(1));
    assert!(!sleep.try_watch(0), "two watchers at once");
    assert!(!sleep.register_parked(1, false));
    sleep.notify_lifo();
    assert_eq!(counts(&sleep), (1, 0), "a fill woke the watcher");
    assert!(!sleep.has_searching_token(1));
    // A task anywhere else claims the watcher as it would claim any parked worker.
    sleep.notify_task();
    assert_eq!(counts(&sleep), (2, 1));
    assert!(sleep.has_searching_token(1));
    sleep.end_watch_claimed(1);
    assert_eq!(sleep.park(1, None), Wake::Searching);
    assert!(sleep.stop_searching());
    // No watcher now: a fill wakes a parked worker.
    assert!(!sleep.register_parked(1, false));
    sleep.notify_lifo();
    assert_eq!(
        counts(&sleep),
        (2, 1),
        "with no watcher a fill wakes as R1 says"
    );
    assert_eq!(sleep.park(1, None), Wake::Searching);
}

/// R7: a watcher that stops watching unclaimed and sees work in its recheck claims its own
/// wakeup, and its park settles as a searcher's; the watcher word is free again.
#[test]
fn a_watcher_claims_its_own_wakeup_for_what_its_recheck_sees() {
    let sleep = Sleep::new(2);
    assert!(sleep.try_watch(1));
    assert!(!sleep.register_parked(1, false));
    sleep.end_watch(1);
    assert!(sleep.try_watch(0), "the word was not cleared");
    sleep.end_watch(0);
    sleep.claim_own_wakeup(1);
    assert_eq!(counts(&sleep), (2, 1));
    // A second claim finds the bit gone and counts nothing twice.
    sleep.claim_own_wakeup(1);
    assert_eq!(counts(&sleep), (2, 1));
    assert_eq!(sleep.park(1, None), Wake::Searching);
    assert!(sleep.stop_searching());
    assert_eq!(counts(&sleep), (2, 0));
}
