//! The stall monitor: a thread per runtime that notices a worker stuck in one unit of work
//! (a task poll, a job, a submitted closure) for longer than the stall threshold, reports it
//! once, and moves the work queued behind it to where the other workers will find it.
//!
//! ARCHITECTURE.md, "Stall detection: the monitor", gives the why; this is the how.
//!
//! # Detection
//!
//! Three words of each worker's counters say what it runs; the worker writes each with plain
//! Relaxed stores, and none of them costs a task poll anything it did not already pay:
//!
//! - `tasks_polled`, the statistics' poll count, which the worker bumps before every poll;
//! - `polling`, the id of the task it runs now (0 between runs), which is also its "inside a
//!   task" flag and what `Runtime::tasks` and `task::id` read (task/id.rs, "The current
//!   task");
//! - the *activity word* (`WorkerCounters::activity`), for the units of work that are not
//!   task polls: a count of the jobs it started from its main loop or while it waits inside
//!   `join` (`WorkerThread::begin_unit`), with a *busy* bit set from such a start until the
//!   worker runs out of work (`WorkerThread::end_unit`, on the idle path only), and a
//!   *waiting* bit set while what it runs waits without stalling: parked inside `join` for a
//!   stolen half, or inside `block_in_place` (`WorkerThread::wait_unit`), until the next
//!   start. `join`'s inline path stores nothing, so a fork-join computation that its worker
//!   runs inline is one unit however many `join`s it makes.
//!
//! A worker *runs something* when it is not waiting and either polls a task or is busy. Every
//! sample period (a quarter of the threshold) the monitor loads the three words of every
//! worker. A worker that runs something, and whose activity word and poll count have not
//! changed since the sample that first saw them, for at least the threshold, is stalled: it
//! has run one poll or one job all that time. The stall is reported once (the words stay the
//! same for as long as it lasts), and it ends at the first sample where they differ or the
//! worker runs nothing. The start is the first sample that saw the words, so a stall is
//! reported between one threshold and one threshold plus a period after the unit began (two
//! periods if a sample read the words across a change), and its measured length is up to a
//! period short.
//!
//! Before 2026-11-26 every task poll stored a new activity word too; counting polls through
//! `tasks_polled` saved those four instructions per poll (BENCHMARKS.md, "Task identity and
//! stall detection on against off").
//!
//! # Parking with the pool
//!
//! The monitor samples only while some worker is unparked. After enough samples in a row that
//! found every worker parked (`Sleep`'s unparked count at 0), it sleeps on its bell without a
//! timeout; the claim that raises the unparked count from 0 rings it. The protocol and its
//! Dekker pair are in `sleep/bell.rs`. `Runtime::drop` rings it after setting the
//! terminating flag, and joins the thread.
//!
//! *Enough* adapts to how soon the pool wakes again ([`idle_samples_after_sleep`]): two
//! samples at first; twice as many, up to [`MAX_IDLE_SAMPLES_BEFORE_SLEEP`], after a sleep
//! that a ring ended within one period; two again after a sleep of four periods or more. A
//! sleep shorter than a period saved no sample and cost two wake-ups: the ring's, and the
//! sample a period later that finds the pool idle again. On a VM each wake-up of a thread
//! from a timed or untimed wait costs it about 20–25 µs of CPU, and the ring's coincides
//! with the wake of the worker that runs the work, which then competes with the monitor
//! for a CPU. A pool fed a request every millisecond (`magpie-bench`'s `lone_request`) was
//! rung about every 50 ms, three wake-ups a cycle; now the monitor samples it without
//! sleeping, one wake-up a period, and a request no longer wakes two threads (BENCHMARKS.md,
//! "2026-12-03, eighth"). A pool that wakes seldom keeps sleeping after two idle samples.
//!
//! Workers switched off by `set_active_workers` stay counted as unparked (`sleep/mod.rs`,
//! `park_retired`), so while some are off the monitor keeps sampling: a wake-up per period,
//! about 40 a second at the default threshold.
//!
//! # The hand-off
//!
//! While a worker is stalled, at every sample, and already at the sample a period before the
//! stall can be reported (`Verdict::HandOff`: the unit began at most a period before the
//! sample that first saw it, so this is the last sample before the unit's own threshold
//! passes), the monitor moves the tasks queued on it (its
//! LIFO slot, its ring, its mailbox) to the task inject queue, which every worker pulls at
//! maintenance, busy ones included, and wakes a parked worker for them if nobody searches
//! (`notify_task_outside`). It uses only the operations a thread other than the owner may
//! call: the slot's `take` (a swap), the ring's `steal_all` (a thief's claim, copy and
//! release, `queue/local.rs`), the mailbox's `pop` (under its lock). So if the worker was
//! not stalled after all and runs again meanwhile, it and the monitor race as a worker and a
//! thief do, and every task is taken once. Jobs stay on the deque, where any worker can
//! steal them; if the deque is not empty the monitor wakes a worker for them
//! (`notify_work_outside`).
//!
//! Timers and I/O are not held up by a stall: no worker holds the driver role while it runs
//! a task or a job (D4 in `sleep/README.md`), so the others, busy or parked, drive them.
//!
//! When every active worker is stalled and work is queued, nobody would run it: then the
//! monitor starts a *compensation worker*, if the runtime allows any, and retires them once
//! a stall ends (`compensate` below; the slots are `runtime/compensation.rs`).

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::registry::Registry;
use super::stall::{DefaultReporter, StallHook, StallInfo};
use crate::sleep::Bell;
use crate::stats::trace::StallSpan;
use crate::stats::{add, ACTIVITY_BUSY, ACTIVITY_WAITING};
use crate::sync::atomic::*;
use crate::sync::{lock, AtomicBool, Mutex, StatAtomicU64 as AtomicU64};
use crate::task::id::polled_id;
use crate::task::raw::Header;

/// Samples in a row that must find the pool idle before the monitor sleeps, at first and after
/// a long sleep. Two, so that a pool that parks between two bursts a period apart does not make
/// the monitor sleep and be rung on every burst: each ring costs the claiming worker a futex
/// wake.
const IDLE_SAMPLES_BEFORE_SLEEP: u32 = 2;

/// The most idle samples in a row the monitor waits for before it sleeps, after sleeps that
/// rings cut short (module docs, "Parking with the pool"): 1.6 s at the default threshold.
const MAX_IDLE_SAMPLES_BEFORE_SLEEP: u32 = 64;

/// The shortest sample period: a threshold below 4 ms samples every millisecond.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The most stall spans kept for the trace; older ones are dropped.
const MAX_TRACED_STALLS: usize = 4096;

/// The monitor's configuration and shared state, in the registry.
#[derive(Debug)]
pub(crate) struct Monitor {
    threshold: Duration,
    /// The time between two samples: a quarter of the threshold.
    period: Duration,
    /// Rung by the claim that wakes an idle pool, and by shutdown.
    pub(crate) bell: crate::sync::Arc<Bell>,
    /// Samples taken; read by `Runtime::stats`.
    samples: AtomicU64,
    /// Set while the monitor is blocked on its bell without a timeout (for the tests:
    /// `Runtime::stall_monitor_sleeping`).
    sleeping: AtomicBool,
    /// The `on_stall` hook, or `None` for the default reporter.
    hook: Option<StallHook>,
    /// Stall spans for the trace, when tracing is on.
    traced: Option<Mutex<VecDeque<StallSpan>>>,
}

impl Monitor {
    pub(crate) fn new(threshold: Duration, hook: Option<StallHook>, traced: bool) -> Monitor {
        Monitor {
            threshold,
            period: (threshold / 4).max(MIN_PERIOD),
            bell: crate::sync::Arc::new(Bell::new()),
            samples: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            hook,
            traced: traced.then(|| Mutex::new(VecDeque::new())),
        }
    }

    /// Samples taken so far.
    pub(crate) fn samples(&self) -> u64 {
        // Relaxed: a statistic.
        self.samples.load(Relaxed)
    }

    /// Whether the monitor sleeps on its bell now, untimed.
    pub(crate) fn sleeping(&self) -> bool {
        // Relaxed: a snapshot for the tests.
        self.sleeping.load(Relaxed)
    }

    /// The stall spans recorded for the trace, the ones still running ending at `now_ns`.
    pub(crate) fn traced_stalls(&self, now_ns: u64) -> Vec<StallSpan> {
        self.traced.as_ref().map_or_else(Vec::new, |traced| {
            lock(traced)
                .iter()
                .map(|span| StallSpan {
                    end_ns: span.end_ns.or(Some(now_ns)),
                    ..span.clone()
                })
                .collect()
        })
    }
}

/// What the monitor knows of one worker.
#[derive(Debug, Default)]
struct Sample {
    /// The activity word last seen.
    word: u64,
    /// The worker's poll count last seen.
    polls: u64,
    /// When that word was first seen.
    since: Option<Instant>,
    /// Whether the unit of that word is a reported stall.
    stalled: bool,
}

/// The body of the monitor thread.
pub(crate) fn run(registry: Arc<Registry>) {
    let monitor = registry
        .monitor
        .as_ref()
        .expect("the monitor thread of a runtime without one");
    // Every slot, compensation ones included: a task that stalls the worker that took over
    // from stalled ones is a stall like any other.
    let mut seen: Vec<Sample> = (0..registry.num_slots())
        .map(|_| Sample::default())
        .collect();
    let mut reporter = DefaultReporter::default();
    let mut idle_samples = 0;
    let mut idle_samples_to_sleep = IDLE_SAMPLES_BEFORE_SLEEP;
    let mut compensating = false;
    loop {
        // A ring here (a claim, shutdown) only ends the period early.
        monitor.bell.wait(Some(monitor.period));
        if registry.is_terminating() {
            break;
        }
        // Relaxed: a statistic; the monitor is its only writer.
        monitor
            .samples
            .store(monitor.samples.load(Relaxed) + 1, Relaxed);
        let now = Instant::now();
        let stalled = sample_all(&registry, monitor, &mut seen, &mut reporter, now);
        compensating = compensate(&registry, stalled, compensating);
        if registry.sleep.load().unparked() != 0 {
            idle_samples = 0;
            continue;
        }
        idle_samples += 1;
        if idle_samples < idle_samples_to_sleep {
            continue;
        }
        // The pool is idle: sleep until the claim that wakes it rings (`sleep/bell.rs`).
        monitor.bell.going_to_sleep();
        // After the fence in `going_to_sleep`: the second half of our side of the bell's
        // pair (`sleep/bell.rs`).
        if registry.sleep.load().unparked() == 0 && !registry.is_terminating() {
            // Relaxed: see `sleeping`.
            monitor.sleeping.store(true, Relaxed);
            let asleep_at = Instant::now();
            monitor.bell.wait(None);
            monitor.sleeping.store(false, Relaxed);
            idle_samples_to_sleep = idle_samples_after_sleep(
                idle_samples_to_sleep,
                asleep_at.elapsed(),
                monitor.period,
            );
        }
        monitor.bell.awake();
        idle_samples = 0;
        // Nothing ran for a stall while we slept; start afresh (a unit that began during the
        // sleep is seen from the next sample).
        for (index, sample) in seen.iter_mut().enumerate() {
            end_stall(&registry, monitor, index, sample, now);
            *sample = Sample::default();
        }
    }
}

/// How many idle samples in a row the monitor waits for before its next sleep, given how many
/// it waited for before the last one and how long that sleep lasted (module docs, "Parking
/// with the pool").
fn idle_samples_after_sleep(before: u32, slept: Duration, period: Duration) -> u32 {
    if slept < period {
        // Rung again within a period: the sleep cost more wake-ups than it saved.
        before.saturating_mul(2).min(MAX_IDLE_SAMPLES_BEFORE_SLEEP)
    } else if slept >= period.saturating_mul(4) {
        // The pool rests for a while between bursts: sleep early again.
        IDLE_SAMPLES_BEFORE_SLEEP
    } else {
        before
    }
}

/// One sample of every worker: detects stalls, reports the new ones, hands off the queues of
/// the stalled workers and of those about to be. Returns how many ordinary workers are
/// stalled now (what `compensate` weighs against the active count; compensation workers are
/// sampled and reported, not counted there).
fn sample_all(
    registry: &Registry,
    monitor: &Monitor,
    samples: &mut [Sample],
    reporter: &mut DefaultReporter,
    now: Instant,
) -> usize {
    let mut stalled = 0;
    for (index, sample) in samples.iter_mut().enumerate() {
        let counters = &registry.counters[index];
        // Relaxed, all three: their only meaning is whether they changed, and whether the
        // worker runs something now (see the module docs); a sample that reads them across
        // a change only starts the count a period later.
        let word = counters.activity.load(Relaxed);
        let polls = counters.tasks_polled.load(Relaxed);
        let polling = counters.polling.load(Relaxed) != 0;
        let busy = word & ACTIVITY_WAITING == 0 && (word & ACTIVITY_BUSY != 0 || polling);
        if !busy || word != sample.word || polls != sample.polls || sample.since.is_none() {
            end_stall(registry, monitor, index, sample, now);
            sample.word = word;
            sample.polls = polls;
            sample.since = busy.then_some(now);
            continue;
        }
        let since = sample.since.expect("checked above");
        let elapsed = now.saturating_duration_since(since);
        let verdict = judge(elapsed, monitor.threshold, monitor.period);
        if verdict == Verdict::Running {
            continue;
        }
        if verdict == Verdict::Stalled {
            if !registry.is_compensation(index) {
                stalled += 1;
            }
            if !sample.stalled {
                sample.stalled = true;
                begin_stall(registry, monitor, index, since, elapsed, reporter);
            }
            let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            // Relaxed: statistics; the monitor is their only writer.
            if elapsed_ns > counters.longest_stall_ns.load(Relaxed) {
                counters.longest_stall_ns.store(elapsed_ns, Relaxed);
            }
        }
        let moved = hand_off(registry, index);
        add(&counters.stall_handoffs, moved as u64);
    }
    stalled
}

/// What the monitor makes of a unit it has seen running, unchanged, for `elapsed` since the
/// first sample that saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Nothing to do yet.
    Running,
    /// Not a stall yet, but its queue moves now: the unit began at most a period before
    /// the sample that first saw it, so a hand-off here, a period before the threshold, is
    /// what makes the queued work move by the threshold (issue 15: "within 1 ms of the
    /// threshold") rather than up to a period after it. The unit has run for at least
    /// `threshold - period` (three quarters of the threshold), so the work leaves a worker
    /// that is, by any measure, not coming back soon.
    HandOff,
    /// A stall: at least `threshold` since the first sample that saw it, so the unit ran at
    /// least that long (never a false report). Reported once, and its queue handed off at
    /// every sample while it lasts.
    Stalled,
}

fn judge(elapsed: Duration, threshold: Duration, period: Duration) -> Verdict {
    if elapsed >= threshold {
        Verdict::Stalled
    } else if elapsed >= threshold.saturating_sub(period) {
        Verdict::HandOff
    } else {
        Verdict::Running
    }
}

/// A stall seen for the first time: count it, read who it is, record it for the trace, and
/// report it.
fn begin_stall(
    registry: &Registry,
    monitor: &Monitor,
    index: usize,
    since: Instant,
    elapsed: Duration,
    reporter: &mut DefaultReporter,
) {
    let counters = &registry.counters[index];
    add(&counters.stalls, 1);
    // Relaxed: which task the worker runs, by id (task/id.rs, "The current task"): the
    // live list gives the rest, if the task is still in it.
    let task = polled_id(counters.polling.load(Relaxed)).and_then(|id| {
        registry.owned.with_task(id, |header| {
            let identity = &header.identity;
            (
                identity.id,
                identity.name().map(str::to_owned),
                identity.location(),
            )
        })
    });
    let info = StallInfo::new(index, task, elapsed);
    if let Some(traced) = &monitor.traced {
        let mut traced = lock(traced);
        if traced.len() == MAX_TRACED_STALLS {
            traced.pop_front();
        }
        let start_ns = since.saturating_duration_since(registry.started).as_nanos() as u64;
        traced.push_back(StallSpan {
            worker: index,
            start_ns,
            end_ns: None,
            task: info.task().map(|id| id.as_u64()),
            name: info.name().map(str::to_owned),
            location: info.location().map(ToString::to_string),
        });
    }
    match &monitor.hook {
        Some(hook) => hook.call(&info),
        None => reporter.report(&info),
    }
}

/// The unit `sample` tracked has ended (or the monitor slept): closes its stall, if any.
fn end_stall(
    registry: &Registry,
    monitor: &Monitor,
    index: usize,
    sample: &mut Sample,
    now: Instant,
) {
    if !std::mem::take(&mut sample.stalled) {
        return;
    }
    if let Some(list) = &monitor.traced {
        let end_ns = now.saturating_duration_since(registry.started).as_nanos() as u64;
        // A worker has one open span at most: the newest of its own, if the list still
        // holds it.
        if let Some(span) = lock(list)
            .iter_mut()
            .rev()
            .find(|span| span.worker == index && span.end_ns.is_none())
        {
            span.end_ns = Some(end_ns);
        }
    }
}

/// Moves the tasks queued on the stalled worker `index` to the task inject queue, using only
/// thief-side operations (module docs), and wakes a worker for them and for its jobs.
/// Returns how many tasks moved.
fn hand_off(registry: &Registry, index: usize) -> usize {
    let slots = &registry.task_slots[index];
    let mut handed: Vec<NonNull<Header>> = Vec::new();
    // The order the owner would have run them in: the LIFO slot, the ring, the mailbox.
    handed.extend(slots.lifo.take());
    slots.ring.steal_all(&mut handed);
    handed.extend(std::iter::from_fn(|| slots.mailbox.pop()));
    let moved = handed.len();
    if moved != 0 {
        // Each pointer carries its task's Notified: the queue it came from held it, and the
        // thief-side operation that took it gave it to us alone.
        registry.inject_tasks(handed);
        registry.sleep.notify_task_outside();
    }
    if !registry.stealers[index].is_empty() {
        // Published jobs are stealable as they are: make sure someone is awake to steal.
        registry.sleep.notify_work_outside();
    }
    moved
}

/// Starts a compensation worker when every active worker is stalled and work is queued;
/// retires them when a stall ends. Returns whether compensation workers may be running.
fn compensate(registry: &Registry, stalled: usize, compensating: bool) -> bool {
    let active = registry.active_workers();
    if stalled < active {
        if compensating {
            registry.retire_compensation_workers();
        }
        return false;
    }
    let queued = !registry.task_inject.is_empty() || registry.has_visible_jobs();
    if queued && registry.compensation_available() > 0 {
        return registry.start_compensation_worker() || compensating;
    }
    compensating
}

#[cfg(test)]
mod tests {
    use super::{
        idle_samples_after_sleep, judge, Verdict, IDLE_SAMPLES_BEFORE_SLEEP,
        MAX_IDLE_SAMPLES_BEFORE_SLEEP,
    };
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_queue_moves_a_period_before_the_stall_is_reported() {
        let (threshold, period) = (100 * MS, 25 * MS);
        // Samples a period apart from the one that first saw the unit: the hand-off comes
        // at the last sample before the threshold, the report at the first one after it.
        let verdicts: Vec<Verdict> = (0..6)
            .map(|k| judge(period * k, threshold, period))
            .collect();
        use Verdict::*;
        assert_eq!(
            verdicts,
            [Running, Running, Running, HandOff, Stalled, Stalled]
        );
    }

    #[test]
    fn sleeps_that_rings_cut_short_make_the_monitor_sample_longer_before_the_next() {
        let period = 25 * MS;
        let mut to_sleep = IDLE_SAMPLES_BEFORE_SLEEP;
        let mut seen = vec![to_sleep];
        // A pool rung a millisecond after every sleep: the count doubles up to its cap.
        for _ in 0..8 {
            to_sleep = idle_samples_after_sleep(to_sleep, MS, period);
            seen.push(to_sleep);
        }
        assert_eq!(seen, [2, 4, 8, 16, 32, 64, 64, 64, 64]);
        assert_eq!(*seen.last().unwrap(), MAX_IDLE_SAMPLES_BEFORE_SLEEP);
        // Sleeps of one to four periods change nothing.
        assert_eq!(idle_samples_after_sleep(16, period, period), 16);
        assert_eq!(idle_samples_after_sleep(16, 4 * period - MS, period), 16);
        // A sleep of four periods or more starts again from two.
        assert_eq!(idle_samples_after_sleep(64, 4 * period, period), 2);
        assert_eq!(
            idle_samples_after_sleep(8, Duration::from_secs(3600), period),
            IDLE_SAMPLES_BEFORE_SLEEP
        );
    }

    #[test]
    fn a_threshold_no_longer_than_the_period_hands_off_at_first_sight() {
        assert_eq!(judge(Duration::ZERO, MS, MS), Verdict::HandOff);
        assert_eq!(judge(MS, MS, MS), Verdict::Stalled);
        // Never a report before the threshold, whatever the period.
        for elapsed in 0..100 {
            let elapsed = Duration::from_micros(elapsed * 37);
            if judge(elapsed, 2 * MS, MS) == Verdict::Stalled {
                assert!(elapsed >= 2 * MS);
            }
        }
    }
}
