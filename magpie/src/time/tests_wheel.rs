//! Tests of the timer wheel: exact firing time at every level, cancellation and stale keys,
//! deadlines beyond the wheel's range (up to `u64::MAX`), large jumps of the clock, the
//! `next_expiration` bound, and a randomized run against a `BTreeMap` model that also walks
//! the wheel's invariants (`Wheel::check_invariants`).
//!
//! The randomized tests print their seed; `SEED=<n> cargo test -p magpie --lib time` replays it.

use std::collections::{BTreeMap, HashMap};

use super::wheel::{TimerKey, Wheel, RANGE_MS};

/// 64^n.
const fn pow64(n: u32) -> u64 {
    1 << (6 * n)
}

/// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators", 2016).
struct XorShift(u64);

impl XorShift {
    /// Seeded from `SEED` if set, else from the clock; prints the seed so a failure replays.
    fn from_env(test: &str) -> XorShift {
        let seed = match std::env::var("SEED") {
            Ok(s) => s.parse().expect("SEED must be a u64"),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1),
        };
        println!("{test}: SEED={seed}");
        // The all-zero state is xorshift's fixed point.
        XorShift(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `[0, n)`, `n >= 1` (the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A value below `64^(k + 1)` for `k` uniform in `[0, levels)`: spread over the levels.
    fn spread(&mut self, levels: u64) -> u64 {
        let k = self.below(levels) as u32;
        self.below(pow64(k + 1))
    }
}

/// Polls at `now` and returns the fired values, sorted.
fn poll(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
    let mut out = Vec::new();
    wheel.poll(now, &mut out);
    let mut values: Vec<u64> = out.into_iter().map(|(_, v)| v).collect();
    values.sort_unstable();
    values
}

/// Inserts one timer at `deadline` into a wheel whose clock reads `start`, then polls at a
/// ladder of times approaching the deadline (large jumps, then every ms of the last 130) and
/// checks that it fires exactly at the first poll with `now >= deadline`.
fn fires_exactly_at(start: u64, deadline: u64) {
    let mut wheel = Wheel::new();
    assert!(poll(&mut wheel, start).is_empty());
    wheel.insert(deadline, deadline);
    assert!(wheel.next_expiration().unwrap() <= deadline.max(start));
    let mut times: Vec<u64> = Vec::new();
    if deadline > start {
        let gap = deadline - start;
        for frac in [8, 4, 2] {
            times.push(start + gap / frac);
        }
        for back in [pow64(4), pow64(3), 4097, 130] {
            times.push(deadline.saturating_sub(back));
        }
        times.extend(deadline.saturating_sub(130)..deadline);
    }
    times.retain(|&t| t >= start);
    times.sort_unstable();
    for t in times {
        assert!(
            poll(&mut wheel, t).is_empty(),
            "deadline {deadline} (clock {start}) fired early at {t}"
        );
        assert!(wheel.next_expiration().unwrap() <= deadline);
    }
    assert_eq!(
        poll(&mut wheel, deadline.max(start)),
        [deadline],
        "deadline {deadline} (clock {start}) did not fire on time"
    );
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_expiration(), None);
}

#[test]
fn fires_exactly_on_time_at_every_level() {
    let mut deadlines = vec![0, 1, 2, 63, 64, 65, 127, 128, 4095, 4096, 4097];
    for level in 2..=6 {
        let p = pow64(level);
        deadlines.extend([p - 1, p, p + 5, 3 * p + 17]);
    }
    deadlines.push(pow64(3) + 5);
    for &deadline in &deadlines {
        fires_exactly_at(0, deadline);
        // The same from a clock that is not aligned on any slot boundary.
        let start = 12_345_678_901;
        fires_exactly_at(start, start + deadline);
    }
}

#[test]
fn every_ms_in_a_range() {
    // One timer per ms over several level-1 and level-2 slots, polled every ms: each fires at
    // exactly its own deadline, in the poll whose `now` equals it.
    let mut wheel = Wheel::new();
    // Under Miri (the wheel has no unsafe code; it checks the arithmetic) across one level-2
    // boundary only: the full range took 3.5 minutes there.
    let end = if cfg!(miri) {
        4096 + 100
    } else {
        3 * 4096 + 100
    };
    for d in 0..end {
        wheel.insert(d, d);
    }
    assert_eq!(wheel.len(), end as usize);
    for now in 0..end + 10 {
        let fired = poll(&mut wheel, now);
        if now < end {
            assert_eq!(fired, [now], "at {now}");
        } else {
            assert!(fired.is_empty());
        }
    }
    assert!(wheel.is_empty());
}

#[test]
fn already_expired_fires_at_next_poll() {
    let mut wheel = Wheel::new();
    assert!(poll(&mut wheel, 1000).is_empty());
    wheel.insert(1000, 1);
    wheel.insert(3, 2);
    wheel.insert(1001, 3);
    assert_eq!(wheel.next_expiration(), Some(1000));
    // An earlier `now` is a no-op, even for expired timers.
    assert!(poll(&mut wheel, 999).is_empty());
    assert_eq!(wheel.elapsed(), 1000);
    assert_eq!(poll(&mut wheel, 1000), [1, 2]);
    assert_eq!(wheel.next_expiration(), Some(1001));
    assert_eq!(poll(&mut wheel, 1001), [3]);
}

#[test]
fn drain_takes_every_timer_and_keeps_the_clock() {
    let mut wheel = Wheel::<u64>::new();
    wheel.poll(1000, &mut Vec::new());
    // One timer per level, one beyond the range, one already expired, one removed.
    let mut keys: Vec<TimerKey> = (0..6)
        .map(|level| wheel.insert(1000 + pow64(level) + 7, u64::from(level)))
        .collect();
    keys.push(wheel.insert(u64::MAX, 6));
    keys.push(wheel.insert(10, 7));
    let removed = wheel.insert(5000, 8);
    assert_eq!(wheel.remove(removed), Some(8));
    let mut out = Vec::new();
    wheel.drain(&mut out);
    let mut drained: Vec<_> = out.iter().map(|&(_, v)| v).collect();
    drained.sort_unstable();
    assert_eq!(drained, (0..8).collect::<Vec<_>>());
    assert!(wheel.is_empty());
    assert_eq!(wheel.elapsed(), 1000, "drain moved the clock");
    assert_eq!(wheel.next_expiration(), None);
    wheel.check_invariants();
    // Their keys are stale now, and the slab is reused.
    for key in keys {
        assert_eq!(wheel.remove(key), None);
    }
    let key = wheel.insert(1001, 9);
    assert_eq!(poll(&mut wheel, 1001), vec![9]);
    assert_eq!(wheel.remove(key), None);
}

#[test]
fn remove_before_and_after_fire() {
    let mut wheel = Wheel::new();
    let a = wheel.insert(100, 1);
    let b = wheel.insert(100, 2);
    let c = wheel.insert(5000, 3);
    assert_eq!(wheel.remove(a), Some(1));
    assert_eq!(wheel.remove(a), None);
    assert_eq!(wheel.len(), 2);
    assert_eq!(poll(&mut wheel, 100), [2]);
    // After firing, the key is stale.
    assert_eq!(wheel.remove(b), None);
    assert_eq!(wheel.remove(c), Some(3));
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_expiration(), None);
    assert!(poll(&mut wheel, 1_000_000).is_empty());
}

#[test]
fn remove_from_expired_list_and_mid_slot() {
    let mut wheel = Wheel::new();
    assert!(poll(&mut wheel, 10).is_empty());
    let expired = wheel.insert(5, 1);
    // Three in one slot: removing the middle one keeps the others linked.
    let keys: Vec<TimerKey> = (0..3).map(|i| wheel.insert(200, 10 + i)).collect();
    assert_eq!(wheel.remove(expired), Some(1));
    assert_eq!(wheel.remove(keys[1]), Some(11));
    assert_eq!(wheel.next_expiration().map(|t| t <= 200), Some(true));
    assert_eq!(poll(&mut wheel, 200), [10, 12]);
}

#[test]
fn stale_key_does_not_remove_reused_entry() {
    let mut wheel = Wheel::new();
    let old = wheel.insert(10, 1);
    assert_eq!(wheel.remove(old), Some(1));
    // The slab reuses the freed entry for the next insert.
    let new = wheel.insert(20, 2);
    assert_ne!(old, new);
    assert_eq!(wheel.remove(old), None);
    assert_eq!(wheel.len(), 1);
    // Same after the reused entry's predecessor fired rather than was removed.
    assert_eq!(poll(&mut wheel, 20), [2]);
    let newer = wheel.insert(30, 3);
    assert_eq!(wheel.remove(new), None);
    assert_eq!(wheel.remove(old), None);
    assert_eq!(wheel.remove(newer), Some(3));
}

#[test]
fn beyond_range_never_fires_early() {
    let mut wheel = Wheel::new();
    for (i, deadline) in [
        u64::MAX,
        u64::MAX - 1,
        u64::MAX / 2,
        RANGE_MS * 1000,
        RANGE_MS * 5 + 3,
    ]
    .into_iter()
    .enumerate()
    {
        wheel.insert(deadline, i as u64);
    }
    // Five turns of the whole wheel, in jumps of a level-5 slot (and a bit, to stay off the
    // boundaries): nothing fires, and `next_expiration` always lies ahead.
    let mut now = 0;
    while now + pow64(5) + 7 < 5 * RANGE_MS {
        now += pow64(5) + 7;
        assert!(poll(&mut wheel, now).is_empty(), "fired at {now}");
        assert!(wheel.next_expiration().unwrap() > now);
    }
    assert_eq!(wheel.len(), 5);
    // The nearest of them still fires on time.
    assert!(poll(&mut wheel, RANGE_MS * 5 + 2).is_empty());
    assert_eq!(poll(&mut wheel, RANGE_MS * 5 + 3), [4]);
}

#[test]
fn just_beyond_range_fires_exactly() {
    for deadline in [RANGE_MS, RANGE_MS + 7, 2 * RANGE_MS - 1, 3 * RANGE_MS + 64] {
        fires_exactly_at(0, deadline);
    }
    // Close deadlines across a turn of the top level (the two differ above digit 5).
    for start in [RANGE_MS - 1, RANGE_MS - 64, 7 * RANGE_MS - 5] {
        for gap in [1, 2, 64, 4097, pow64(5) + 1] {
            fires_exactly_at(start, start + gap);
        }
    }
}

#[test]
fn near_u64_max() {
    let start = u64::MAX - 100;
    fires_exactly_at(start, u64::MAX);
    fires_exactly_at(start, u64::MAX - 1);
    let mut wheel = Wheel::new();
    assert!(poll(&mut wheel, u64::MAX).is_empty());
    wheel.insert(u64::MAX, 1);
    wheel.insert(0, 2);
    assert_eq!(wheel.next_expiration(), Some(u64::MAX));
    assert_eq!(poll(&mut wheel, u64::MAX), [1, 2]);
}

#[test]
fn large_jumps_fire_everything_due() {
    let mut rng = XorShift::from_env("large_jumps_fire_everything_due");
    let mut wheel = Wheel::new();
    let mut deadlines = HashMap::new();
    for i in 0..if cfg!(miri) { 2_000 } else { 20_000 } {
        let deadline = rng.below(pow64(5));
        deadlines.insert(i, deadline);
        wheel.insert(deadline, i);
    }
    let mut out = Vec::new();
    let mut prev = 0;
    let mut now = 0;
    // Under Miri in fewer, larger jumps: each poll walks the slots it passes.
    let jump = if cfg!(miri) { 50_000_000 } else { 1_000_000 };
    while !wheel.is_empty() {
        now += jump;
        out.clear();
        wheel.poll(now, &mut out);
        for &(_, i) in &out {
            let deadline = deadlines.remove(&i).expect("fired twice or unknown");
            assert!(deadline <= now, "early: {deadline} at {now}");
            assert!(deadline > prev, "late: {deadline} at {now}");
        }
        // Everything due by `now` has fired.
        assert!(deadlines.values().all(|&d| d > now));
        prev = now;
    }
    assert!(deadlines.is_empty());
}

#[test]
fn next_expiration_is_never_late() {
    let mut rng = XorShift::from_env("next_expiration_is_never_late");
    let mut wheel = Wheel::new();
    // Live timers by (deadline, id), and each id's deadline.
    let mut live: BTreeMap<(u64, u64), ()> = BTreeMap::new();
    let mut deadlines: HashMap<u64, u64> = HashMap::new();
    let mut now = 0;
    let mut out = Vec::new();
    for id in 0..if cfg!(miri) { 2_000u64 } else { 20_000 } {
        if rng.below(3) < 2 {
            let deadline = now + rng.spread(7);
            wheel.insert(deadline, id);
            live.insert((deadline, id), ());
            deadlines.insert(id, deadline);
        } else {
            now += rng.spread(4) / 8;
            out.clear();
            wheel.poll(now, &mut out);
            for &(_, fired) in &out {
                let deadline = deadlines.remove(&fired).unwrap();
                live.remove(&(deadline, fired)).unwrap();
            }
        }
        match live.keys().next() {
            Some(&(earliest, _)) => {
                let next = wheel.next_expiration().expect("timers but no expiration");
                // Already-expired timers are due at the clock, `now`.
                assert!(next <= earliest.max(now), "{next} after {earliest}");
            }
            None => assert_eq!(wheel.next_expiration(), None),
        }
    }
}

#[test]
fn randomized_against_model() {
    let mut rng = XorShift::from_env("randomized_against_model");
    // Under Miri a few hundred: each op may walk every list of the wheel (3,000 ran past
    // 2.5 minutes there).
    let ops = if cfg!(miri) {
        400
    } else if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    let mut wheel = Wheel::new();
    // The reference: every live timer by (deadline, id), and each id's key and deadline.
    let mut model: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut keys: HashMap<u64, (TimerKey, u64)> = HashMap::new();
    let mut live_ids: Vec<u64> = Vec::new();
    let mut stale: Vec<TimerKey> = Vec::new();
    let mut now = 0u64;
    let mut next_id = 0u64;
    let mut out = Vec::new();
    for _ in 0..ops {
        match rng.below(100) {
            // Insert, at a deadline spread over every level, already expired, beyond the
            // range, or `u64::MAX`.
            0..=49 => {
                let deadline = match rng.below(20) {
                    0 => now.saturating_sub(rng.below(100)),
                    1 => u64::MAX - rng.below(2),
                    2 => now + RANGE_MS + rng.below(4 * RANGE_MS),
                    _ => now + rng.spread(6),
                };
                let id = next_id;
                next_id += 1;
                let key = wheel.insert(deadline, id);
                model.insert((deadline, id), id);
                keys.insert(id, (key, deadline));
                live_ids.push(id);
            }
            // Remove a live timer (it never fires), or try a stale key (nothing happens).
            50..=64 => {
                if rng.below(4) == 0 && !stale.is_empty() {
                    let key = stale[rng.below(stale.len() as u64) as usize];
                    assert_eq!(wheel.remove(key), None);
                } else {
                    // `live_ids` still holds ids that fired since; drop those as we meet them.
                    let mut id = None;
                    while !live_ids.is_empty() {
                        let i = rng.below(live_ids.len() as u64) as usize;
                        let candidate = live_ids.swap_remove(i);
                        if keys.contains_key(&candidate) {
                            id = Some(candidate);
                            break;
                        }
                    }
                    if let Some(id) = id {
                        let (key, deadline) = keys.remove(&id).unwrap();
                        assert_eq!(wheel.remove(key), Some(id));
                        assert_eq!(model.remove(&(deadline, id)), Some(id));
                        stale.push(key);
                    }
                }
            }
            // Poll, the clock moving mostly within level 2, sometimes by a few top-level
            // slots, rarely by whole turns of the wheel (re-filing clamped timers) or
            // backwards (which must do nothing).
            _ => {
                let target = match rng.below(1000) {
                    0..=49 => now.saturating_sub(rng.below(10)),
                    50 => now + rng.below(3 * RANGE_MS),
                    51..=70 => now + rng.below(3 * pow64(5)),
                    _ => now + rng.spread(3),
                };
                out.clear();
                wheel.poll(target, &mut out);
                if target < now {
                    // Time does not run backwards: nothing happens, expired timers included.
                    assert!(out.is_empty());
                } else {
                    now = target;
                    let mut fired: Vec<u64> = out.iter().map(|&(_, id)| id).collect();
                    fired.sort_unstable();
                    // The model's due timers: every (deadline, id) with deadline <= now.
                    let due: Vec<(u64, u64)> =
                        model.range(..=(now, u64::MAX)).map(|(&k, _)| k).collect();
                    let mut expected: Vec<u64> = due.iter().map(|&(_, id)| id).collect();
                    expected.sort_unstable();
                    assert_eq!(fired, expected, "at now = {now}");
                    for (deadline, id) in due {
                        model.remove(&(deadline, id));
                    }
                    // Each fired timer comes with the key `insert` gave it, now stale.
                    for &(key, id) in &out {
                        assert_eq!(keys.remove(&id).unwrap().0, key);
                        stale.push(key);
                    }
                }
                assert_eq!(wheel.elapsed(), now);
            }
        }
        if wheel.len() < 64 || rng.below(32) == 0 {
            wheel.check_invariants();
        }
        assert_eq!(wheel.len(), model.len());
        match model.keys().next() {
            Some(&(earliest, _)) => {
                let next = wheel.next_expiration().expect("timers but no expiration");
                assert!(next <= earliest.max(now), "{next} after {earliest}");
                assert!(next >= now, "{next} in the past");
            }
            None => assert_eq!(wheel.next_expiration(), None),
        }
        if stale.len() > 1000 {
            stale.drain(..500);
        }
    }
}
