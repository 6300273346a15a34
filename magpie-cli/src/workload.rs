//! Workloads: a small seeded PRNG, the four task-duration patterns of the task-pool seed, and
//! the CPU spin that stands in for real work.
//!
//! A workload is a list of `Batch`es of task durations. Every pattern but `burst` is one
//! batch that arrives all at once; `burst` is several batches with a pause after each, which
//! the submitter of every strategy sits out alike. Durations are drawn before any timing
//! starts, from `SplitMix64` seeded by `--seed`, so the same seed gives the same workload
//! for every strategy and every run.
//!
//! magpie-bench compiles this file into itself as well (`#[path]` in its
//! `scale/task_pool.rs`), so that its task-pool rows run these very durations: keep it free
//! of `crate::` paths and of dependencies beyond std, clap and serde.

use std::fmt;
use std::time::{Duration, Instant};

use clap::ValueEnum;

/// Sebastiano Vigna's SplitMix64: one 64-bit add and a mix per number, fine statistical
/// quality for picking durations, and any seed (zero included) is a good one.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`, from the top 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `mean` scaled by a uniform factor in `[1 - spread, 1 + spread)`.
    pub(crate) fn jitter(&mut self, mean: Duration, spread: f64) -> Duration {
        mean.mul_f64(1.0 - spread + 2.0 * spread * self.next_f64())
    }
}

/// How task durations are distributed (the seed's four workload patterns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Pattern {
    /// Every task spins 50 µs.
    Uniform,
    /// 90% of tasks about 10 µs, 10% about 200 µs (the imbalance workload of the design):
    /// every tenth task in arrival order is a long one, as in a stream of requests where
    /// one kind recurs regularly. A schedule that deals tasks out in turn then gives every
    /// long task to the same few workers (the seed's "round-robin creates hotspots").
    Mixed,
    /// Highly variable: log-uniform from 1 µs to 1 ms (mean about 145 µs).
    Variable,
    /// Mixed durations arriving in 10 bursts, each followed by a pause as long as its work.
    Burst,
}

impl Pattern {
    pub(crate) const ALL: [Pattern; 4] = [
        Pattern::Uniform,
        Pattern::Mixed,
        Pattern::Variable,
        Pattern::Burst,
    ];
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pattern::Uniform => "uniform",
            Pattern::Mixed => "mixed",
            Pattern::Variable => "variable",
            Pattern::Burst => "burst",
        })
    }
}

/// Tasks that arrive together, then a pause before the next batch arrives.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    pub(crate) durations: Vec<Duration>,
    pub(crate) pause_after: Duration,
}

/// A generated workload: its batches, in arrival order.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    pub(crate) batches: Vec<Batch>,
}

/// Bursts in the `burst` pattern.
const BURSTS: usize = 10;

impl Workload {
    /// `tasks` durations drawn from `pattern` with `seed`.
    pub(crate) fn generate(pattern: Pattern, tasks: usize, seed: u64) -> Workload {
        // One stream per pattern, so `--pattern mixed` draws the same durations as the mixed
        // row of a run over all four.
        let mut rng = SplitMix64::new(seed ^ (pattern as u64).wrapping_mul(0xA076_1D64_78BD_642F));
        let durations: Vec<Duration> = (0..tasks)
            .map(|i| match pattern {
                Pattern::Uniform => Duration::from_micros(50),
                Pattern::Mixed | Pattern::Burst => mixed(i, &mut rng),
                Pattern::Variable => variable(&mut rng),
            })
            .collect();
        let batches = if pattern == Pattern::Burst {
            split_into_bursts(durations)
        } else {
            vec![Batch {
                durations,
                pause_after: Duration::ZERO,
            }]
        };
        Workload { batches }
    }

    pub(crate) fn len(&self) -> usize {
        self.batches.iter().map(|b| b.durations.len()).sum()
    }

    /// All durations, in arrival order.
    pub(crate) fn durations(&self) -> impl Iterator<Item = Duration> + '_ {
        self.batches
            .iter()
            .flat_map(|b| b.durations.iter().copied())
    }

    pub(crate) fn total_work(&self) -> Duration {
        self.durations().sum()
    }

    /// The shortest makespan any strategy could reach on `workers` workers with no overhead:
    /// the total work spread evenly, unless the pauses between bursts force more. Batch `k`
    /// cannot start before the pauses ahead of it are over, so the makespan is at least
    /// those pauses plus the work from batch `k` on, spread evenly; the bound is the largest
    /// of these. For a single batch it is `total work / workers`.
    pub(crate) fn ideal(&self, workers: usize) -> Duration {
        let mut best = Duration::ZERO;
        let mut pauses = Duration::ZERO;
        let mut remaining = self.total_work();
        for batch in &self.batches {
            best = best.max(pauses + remaining / workers as u32);
            remaining -= batch.durations.iter().sum::<Duration>();
            pauses += batch.pause_after;
        }
        best
    }
}

/// 90% short (10 µs), 10% long (200 µs), each ±20%.
/// Task `i` of the mixed pattern: long (about 200 µs) when `i` is a multiple of 10, else
/// short (about 10 µs).
fn mixed(i: usize, rng: &mut SplitMix64) -> Duration {
    let mean = if i % 10 == 0 {
        Duration::from_micros(200)
    } else {
        Duration::from_micros(10)
    };
    rng.jitter(mean, 0.2)
}

/// Log-uniform on [1 µs, 1 ms]: as many tasks between 1 and 10 µs as between 100 µs and 1 ms.
fn variable(rng: &mut SplitMix64) -> Duration {
    let exponent = 3.0 * rng.next_f64(); // 10^0 .. 10^3 microseconds
    Duration::from_secs_f64(10f64.powf(exponent) * 1e-6)
}

/// Splits `durations` into [`BURSTS`] batches of (nearly) equal count. The pause after each
/// burst but the last is as long as the burst's work: on two or more workers the burst is
/// done before the next arrives, so workers go idle and must wake up for every burst.
fn split_into_bursts(durations: Vec<Duration>) -> Vec<Batch> {
    let n = durations.len();
    let mut batches = Vec::with_capacity(BURSTS);
    let mut rest = durations.into_iter();
    for k in 0..BURSTS {
        let count = (k + 1) * n / BURSTS - k * n / BURSTS;
        let durations: Vec<Duration> = rest.by_ref().take(count).collect();
        let work: Duration = durations.iter().sum();
        let pause_after = if k + 1 < BURSTS { work } else { Duration::ZERO };
        batches.push(Batch {
            durations,
            pause_after,
        });
    }
    batches.retain(|b| !b.durations.is_empty());
    if let Some(last) = batches.last_mut() {
        last.pause_after = Duration::ZERO;
    }
    batches
}

/// Keeps the CPU busy for `duration`: spins on the clock, without sleeping or yielding.
pub(crate) fn spin(duration: Duration) {
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Sleeps through a pause between bursts; a zero pause returns at once.
pub(crate) fn pause(duration: Duration) {
    if !duration.is_zero() {
        std::thread::sleep(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_workload() {
        for pattern in Pattern::ALL {
            let a: Vec<_> = Workload::generate(pattern, 500, 7).durations().collect();
            let b: Vec<_> = Workload::generate(pattern, 500, 7).durations().collect();
            assert_eq!(a, b, "{pattern}");
            assert_eq!(a.len(), 500);
        }
    }

    #[test]
    fn mixed_is_mostly_short() {
        let w = Workload::generate(Pattern::Mixed, 10_000, 1);
        let long = w
            .durations()
            .filter(|d| *d > Duration::from_micros(100))
            .count();
        assert_eq!(long, 1000, "every tenth task is long");
    }

    #[test]
    fn variable_stays_in_range() {
        let w = Workload::generate(Pattern::Variable, 10_000, 3);
        assert!(w.durations().all(|d| d >= Duration::from_micros(1)
            && d <= Duration::from_micros(1000) + Duration::from_nanos(1)));
    }

    #[test]
    fn bursts_keep_every_task_and_bound_the_ideal() {
        let w = Workload::generate(Pattern::Burst, 1003, 5);
        assert_eq!(w.batches.len(), BURSTS);
        assert_eq!(w.len(), 1003);
        assert!(w.ideal(2) >= w.total_work() / 2);
        let one = Workload::generate(Pattern::Uniform, 100, 5);
        assert_eq!(one.ideal(4), Duration::from_micros(50 * 100 / 4));
    }
}
