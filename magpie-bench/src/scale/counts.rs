//! The counts printed beside each magpie time: what one sample did inside the runtime, from
//! two [`magpie::Runtime::stats`] snapshots of the runtime that timed it.
//!
//! The first snapshot is taken just before the sample starts; the second once the pool has
//! gone idle again ([`settle`]): no task left ([`magpie::Runtime::wait_idle`]) and every
//! worker parked. Waiting for the parks matters for one count: a worker copies its heavy
//! barrier count (a thread-local count of `membarrier` calls) into the statistics only when
//! it parks or at its periodic maintenance, so a snapshot taken while a worker still
//! searches would miss the barriers of its last steals. The difference therefore includes
//! the parks that end the sample, which every sample pays.

use std::thread;
use std::time::{Duration, Instant};

use magpie::{Runtime, Stats, WorkerStats};
use serde::Serialize;

use crate::harness::{median_f64, OrderedObject};

/// How long [`settle`] waits for every worker to park before it gives up.
const SETTLE_LIMIT: Duration = Duration::from_secs(1);

/// What one magpie sample did, summed over the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Jobs and tasks taken from another worker ([`Stats::steals`]).
    pub(crate) steals: u64,
    /// Searches that visited every other worker and found nothing
    /// ([`WorkerStats::failed_steals`]).
    pub(crate) failed_steals: u64,
    /// Steal operations that found a non-empty deque, successful or not
    /// ([`WorkerStats::steal_attempts`]).
    pub(crate) steal_attempts: u64,
    /// `membarrier` calls ([`WorkerStats::heavy_barriers`]).
    pub(crate) heavy_barriers: u64,
    /// The heavy barriers of steal passes ([`WorkerStats::steal_heavy_barriers`]).
    pub(crate) steal_heavy_barriers: u64,
    /// Times a worker went to sleep ([`WorkerStats::parks`]).
    pub(crate) parks: u64,
    /// Times a worker woke up ([`WorkerStats::unparks`]).
    pub(crate) unparks: u64,
    /// Tasks spawned, on workers and from outside ([`Stats::tasks_spawned`]).
    pub(crate) spawns: u64,
    /// Acquisitions of a global inject queue's lock
    /// ([`Stats::inject_lock_acquisitions`]).
    pub(crate) inject_locks: u64,
    /// Acquisitions of a live-task list shard's lock
    /// ([`Stats::live_list_lock_acquisitions`]).
    pub(crate) list_locks: u64,
}

/// A field of [`Counts`]: its name in JSON and its reader.
pub(crate) type Field = (&'static str, fn(&Counts) -> u64);

/// Every field, in table order.
pub(crate) const FIELDS: [Field; 10] = [
    ("steals", |c| c.steals),
    ("failed_steals", |c| c.failed_steals),
    ("steal_attempts", |c| c.steal_attempts),
    ("heavy_barriers", |c| c.heavy_barriers),
    ("steal_heavy_barriers", |c| c.steal_heavy_barriers),
    ("parks", |c| c.parks),
    ("unparks", |c| c.unparks),
    ("spawns", |c| c.spawns),
    ("inject_locks", |c| c.inject_locks),
    ("list_locks", |c| c.list_locks),
];

impl Counts {
    /// `after - before`. A counter that went down (it should not) counts 0, not a
    /// wrapped-around 18 quintillion.
    pub(crate) fn between(before: &Stats, after: &Stats) -> Counts {
        let workers = |read: fn(&WorkerStats) -> u64| -> u64 {
            after
                .workers
                .iter()
                .zip(&before.workers)
                .map(|(a, b)| read(a).saturating_sub(read(b)))
                .sum()
        };
        Counts {
            steals: workers(WorkerStats::steals),
            failed_steals: workers(|w| w.failed_steals),
            steal_attempts: workers(|w| w.steal_attempts),
            heavy_barriers: workers(|w| w.heavy_barriers),
            steal_heavy_barriers: workers(|w| w.steal_heavy_barriers),
            parks: workers(|w| w.parks),
            unparks: workers(|w| w.unparks),
            spawns: after.tasks_spawned().saturating_sub(before.tasks_spawned()),
            inject_locks: after
                .inject_lock_acquisitions
                .saturating_sub(before.inject_lock_acquisitions),
            list_locks: after
                .live_list_lock_acquisitions
                .saturating_sub(before.live_list_lock_acquisitions),
        }
    }
}

impl Counts {
    /// One sample's counts from the object [`CountSummary::json`] writes for it (its
    /// `per_sample` entries), or `None` if a field is missing or not a count.
    pub(crate) fn from_json(value: &serde_json::Value) -> Option<Counts> {
        let field = |name: &str| value.get(name)?.as_u64();
        Some(Counts {
            steals: field("steals")?,
            failed_steals: field("failed_steals")?,
            steal_attempts: field("steal_attempts")?,
            heavy_barriers: field("heavy_barriers")?,
            steal_heavy_barriers: field("steal_heavy_barriers")?,
            parks: field("parks")?,
            unparks: field("unparks")?,
            spawns: field("spawns")?,
            inject_locks: field("inject_locks")?,
            list_locks: field("list_locks")?,
        })
    }
}

/// Waits until `rt` has no task left and every worker is parked (see the module doc).
/// Returns `false` if the workers were not all parked within [`SETTLE_LIMIT`]; the counts
/// taken next may then miss a few heavy barriers.
pub(crate) fn settle(rt: &Runtime) -> bool {
    rt.wait_idle();
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        // A worker's park is counted before it blocks and its unpark after it wakes.
        if rt.stats().workers.iter().all(|w| w.parks > w.unparks) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        // Sleep rather than spin: with more workers than CPUs, spinning here would delay
        // the very parks it waits for.
        thread::sleep(Duration::from_micros(50));
    }
}

/// The counts of every timed magpie sample at one worker count.
#[derive(Clone, Debug, Default)]
pub(crate) struct CountSummary {
    /// One entry per timed sample, in the order they were taken.
    pub(crate) samples: Vec<Counts>,
    /// Samples after which the workers did not all park within [`SETTLE_LIMIT`].
    pub(crate) unsettled: usize,
}

impl CountSummary {
    /// Records one sample's counts.
    pub(crate) fn push(&mut self, counts: Counts, settled: bool) {
        self.samples.push(counts);
        self.unsettled += usize::from(!settled);
    }

    /// The median over the samples of `read`, or `None` without samples.
    pub(crate) fn median(&self, read: fn(&Counts) -> u64) -> Option<f64> {
        let values: Vec<f64> = self.samples.iter().map(|c| read(c) as f64).collect();
        (!values.is_empty()).then(|| median_f64(&values))
    }

    /// The sum over the samples of `read`.
    pub(crate) fn total(&self, read: fn(&Counts) -> u64) -> u64 {
        self.samples.iter().map(read).sum()
    }

    /// Heavy barriers of steal passes per steal, over all samples together (`None` without
    /// a steal). Parks' barriers are left out: they are paid per park, not per steal, and
    /// the `parks` column counts them.
    pub(crate) fn heavy_per_steal(&self) -> Option<f64> {
        self.per(|c| c.steal_heavy_barriers, |c| c.steals)
    }

    /// Unparks per spawned task, over all samples together (`None` without a spawn).
    pub(crate) fn unparks_per_spawn(&self) -> Option<f64> {
        self.per(|c| c.unparks, |c| c.spawns)
    }

    fn per(&self, num: fn(&Counts) -> u64, den: fn(&Counts) -> u64) -> Option<f64> {
        let den = self.total(den);
        (den > 0).then(|| self.total(num) as f64 / den as f64)
    }

    /// Medians, totals, ratios and every sample's counts, as JSON.
    pub(crate) fn json(&self) -> CountsJson {
        CountsJson {
            samples: self.samples.len(),
            unsettled: self.unsettled,
            median: by_field(|read| self.median(read)),
            total: by_field(|read| self.total(read)),
            heavy_barriers_per_steal: self.heavy_per_steal(),
            unparks_per_spawn: self.unparks_per_spawn(),
            per_sample: self
                .samples
                .iter()
                .map(|c| by_field(|read| read(c)))
                .collect(),
        }
    }
}

/// An object with one entry per field of [`FIELDS`], in its order: `value` of the field's
/// reader.
fn by_field<V>(value: impl Fn(fn(&Counts) -> u64) -> V) -> OrderedObject<&'static str, V> {
    OrderedObject(
        FIELDS
            .iter()
            .map(|&(name, read)| (name, value(read)))
            .collect(),
    )
}

/// A [`CountSummary`] as JSON; `None` is written as `null`.
#[derive(Debug, Serialize)]
pub(crate) struct CountsJson {
    /// How many samples were counted.
    samples: usize,
    /// Samples after which the workers did not all park in time.
    unsettled: usize,
    /// Per field, the median over the samples (`None` without samples).
    median: OrderedObject<&'static str, Option<f64>>,
    /// Per field, the sum over the samples.
    total: OrderedObject<&'static str, u64>,
    /// [`CountSummary::heavy_per_steal`].
    heavy_barriers_per_steal: Option<f64>,
    /// [`CountSummary::unparks_per_spawn`].
    unparks_per_spawn: Option<f64>,
    /// Every sample's counts, per field, in the order the samples were taken.
    per_sample: Vec<OrderedObject<&'static str, u64>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::json_check::{keys, parse, text};

    fn counts(steals: u64, heavy: u64, unparks: u64, spawns: u64) -> Counts {
        Counts {
            steals,
            heavy_barriers: heavy + 1,
            steal_heavy_barriers: heavy,
            unparks,
            spawns,
            ..Counts::default()
        }
    }

    #[test]
    fn a_samples_counts_read_back_from_the_json() {
        let mut s = CountSummary::default();
        let sample = Counts {
            failed_steals: 5,
            steal_attempts: 6,
            parks: 7,
            inject_locks: 8,
            list_locks: 9,
            ..counts(1, 2, 3, 4)
        };
        s.push(sample, true);
        let v = parse(&text(s.json()));
        assert_eq!(Counts::from_json(&v["per_sample"][0]), Some(sample));
        let mut missing = v["per_sample"][0].clone();
        missing.as_object_mut().unwrap().remove("parks");
        assert_eq!(Counts::from_json(&missing), None);
    }

    #[test]
    fn ratios_are_over_totals() {
        let mut s = CountSummary::default();
        assert_eq!(s.median(|c| c.steals), None);
        assert_eq!(s.heavy_per_steal(), None);
        s.push(counts(1, 4, 0, 0), true);
        s.push(counts(3, 0, 6, 3), false);
        s.push(counts(0, 2, 0, 0), true);
        assert_eq!(s.median(|c| c.steals), Some(1.0));
        assert_eq!(s.heavy_per_steal(), Some(1.5));
        assert_eq!(s.unparks_per_spawn(), Some(2.0));
        assert_eq!(s.unsettled, 1);
    }

    #[test]
    fn the_json_has_medians_totals_ratios_and_every_sample_by_field() {
        let mut s = CountSummary::default();
        s.push(counts(1, 4, 0, 0), true);
        s.push(counts(3, 0, 6, 3), false);
        s.push(counts(0, 2, 0, 0), true);
        let json = text(s.json());
        let v = parse(&json);
        assert_eq!(v["samples"], 3);
        assert_eq!(v["unsettled"], 1);
        assert_eq!(v["median"]["steals"].as_f64(), Some(1.0));
        assert_eq!(v["median"]["heavy_barriers"].as_f64(), Some(3.0));
        assert!(v["total"]["steals"].is_u64(), "{json}");
        assert_eq!(v["total"]["steals"], 4);
        assert_eq!(v["total"]["heavy_barriers"], 9);
        assert_eq!(v["heavy_barriers_per_steal"].as_f64(), Some(1.5));
        assert_eq!(v["unparks_per_spawn"].as_f64(), Some(2.0));
        let per_sample = v["per_sample"].as_array().expect("per_sample is an array");
        assert_eq!(per_sample.len(), 3);
        assert!(per_sample[1]["spawns"].is_u64(), "{json}");
        assert_eq!(per_sample[1]["spawns"], 3);
        assert_eq!(per_sample[1]["unparks"], 6);
        assert_eq!(per_sample[2]["steal_heavy_barriers"], 2);
        let names: Vec<&str> = FIELDS.iter().map(|&(name, _)| name).collect();
        let mut expected = vec!["samples", "unsettled", "median"];
        expected.extend(&names);
        expected.push("total");
        expected.extend(&names);
        expected.extend([
            "heavy_barriers_per_steal",
            "unparks_per_spawn",
            "per_sample",
        ]);
        for _ in 0..3 {
            expected.extend(&names);
        }
        assert_eq!(keys(&json), expected);
    }

    #[test]
    fn without_samples_the_medians_and_ratios_are_null() {
        let json = text(CountSummary::default().json());
        let v = parse(&json);
        assert_eq!(v["samples"], 0);
        for &(name, _) in &FIELDS {
            assert!(v["median"][name].is_null(), "{name}: {json}");
            assert_eq!(v["total"][name], 0, "{name}: {json}");
        }
        assert!(v["heavy_barriers_per_steal"].is_null(), "{json}");
        assert!(v["unparks_per_spawn"].is_null(), "{json}");
        assert_eq!(v["per_sample"], serde_json::json!([]));
    }

    #[test]
    fn a_settled_pool_counts_what_its_sample_did() {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        assert!(settle(&rt));
        let before = rt.stats();
        let handles: Vec<_> = (0..100).map(|i| rt.submit(move || i)).collect();
        drop(handles);
        assert!(settle(&rt));
        let c = Counts::between(&before, &rt.stats());
        assert_eq!(c.spawns, 100);
        assert!(c.parks >= 1 && c.inject_locks >= 1, "{c:?}");
        // One lock per spawn to join the list, and at least one more to leave it.
        assert!(c.list_locks > 100, "{c:?}");
        assert_eq!(Counts::between(&rt.stats(), &before).spawns, 0);
    }
}
