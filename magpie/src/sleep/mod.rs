//! The idle coordinator: who is searching for work, who is asleep, and whom to wake.
//!
//! The protocol, its rules and the argument that no wakeup is lost are in `README.md` beside
//! this file; the numbered rules there are cited in the code as (R1)..(R5).
//!
//! State lives in two places:
//!
//! * `state`, one atomic word: the number of *searching* workers (low 32 bits) and of
//!   *unparked* workers (high 32 bits). A worker is unparked from the time it is woken (or
//!   starts) until it registers as parked.
//! * `idle`, a bitmap, one `AtomicU64` per 64 workers: bit `i` is set while worker `i` is
//!   registered as parked and nobody has claimed its wakeup yet. Waking someone means
//!   clearing a set bit (found with `trailing_zeros`) by CAS; whoever clears a bit owns that
//!   worker's wakeup and its increment of `state`.

mod bell;
mod parker;

use std::time::Duration;

/// How long a LIFO watcher (R7 in README.md) waits before its first look at the LIFO slots;
/// each wait after doubles, up to [`WATCH_INTERVAL`].
pub(crate) const WATCH_FIRST: Duration = Duration::from_micros(100);

/// How long a LIFO watcher waits between looks at the LIFO slots, at most: a task stranded
/// in one behind a long poll waits about this long, at most, for the watcher to take it.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(1);

pub(crate) use bell::Bell;
pub(crate) use parker::DriverUnpark;
use parker::Parker;

/// How a worker is counted after [`Sleep::park`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A notifier woke it for new work and counted it as unparked and searching.
    Searching,
    /// It woke for its own reasons (timeout, a latch, shutdown): unparked, not searching.
    Plain,
}

use crate::sync::atomic::*;
use crate::sync::barrier::Barrier;
use crate::sync::{AtomicU64, AtomicUsize};
use crate::util::CachePadded;

const SEARCHING_ONE: u64 = 1;
const SEARCHING_MASK: u64 = (1 << 32) - 1;
const UNPARKED_ONE: u64 = 1 << 32;

/// A copy of the state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdleState(u64);

impl IdleState {
    pub(crate) fn searching(self) -> usize {
        (self.0 & SEARCHING_MASK) as usize
    }

    pub(crate) fn unparked(self) -> usize {
        (self.0 >> 32) as usize
    }
}

/// The idle coordinator of one runtime.
pub(crate) struct Sleep {
    state: CachePadded<AtomicU64>,
    idle: Box<[CachePadded<AtomicU64>]>,
    /// Bit `i` is set while worker `i` waits inside `join` for a stolen half, where it runs
    /// only jobs: waking it for a task would be wasted (R6 in the README). Written only by
    /// worker `i`, Relaxed: a reader that saw `i`'s idle bit (Acquire, pairing with the
    /// Release `fetch_or` in `register_parked`) sees the value `i` had when it parked.
    join_waiting: Box<[CachePadded<AtomicU64>]>,
    parkers: Box<[CachePadded<Parker>]>,
    /// Ends the wait of a worker parked in the driver (`parker.rs`, "Parking in the
    /// driver"); `None` without a driver to park in.
    driver_unpark: Option<DriverUnpark>,
    num_workers: usize,
    /// The runtime's barrier mode (`sync/barrier.rs`): light on the publishers' side, heavy
    /// on the parkers'.
    barrier: Barrier,
    /// The stall monitor's bell, rung when a claim raises the unparked count from 0
    /// (`bell.rs`); `None` without a monitor.
    bell: Option<crate::sync::Arc<Bell>>,
    /// The LIFO watcher (R7 in README.md): 0, or 1 + the index of the parked worker that
    /// watches the busy workers' LIFO slots, so that a fill of an empty slot need not wake
    /// anyone. Set by the watcher with a CAS from 0, cleared by it alone.
    watcher: CachePadded<AtomicUsize>,
    /// The CPUs the process may run on (`set_cpus`): R1b keeps no more workers awake.
    cpus: usize,
    /// Workers awake inside `join` (or a scope) that found nothing to run in their last round
    /// and look again: with the searchers, the workers that a long piece of a parallel
    /// iterator is cut for (`iter/plumbing/bridge.rs`, rule 5). Each such worker adds itself
    /// once and takes itself off when it finds work, parks, or its wait ends
    /// (`WorkerThread::wait_until`). A hint: written and read Relaxed, it orders nothing.
    starving_waiters: CachePadded<AtomicUsize>,
    /// Whether long pieces of parallel iterators are cut for starving workers at all
    /// (`set_split_on_demand`; on by default, when the pool has more than one worker).
    split_on_demand: bool,
    /// How many jobs a worker's deque may hold before a split of a parallel iterator stops
    /// offering its second half to the pool: the depth of a computation's split spine on
    /// this pool (`set_offer_every_split`; 0 when off, leaving `join`'s own reserve).
    split_reserve: usize,
    /// A test's pool (`Builder::starving_always`): every look of rule 5 finds a starving
    /// worker, and `starving_answers` counts the looks.
    #[cfg(test)]
    starving_always: bool,
    #[cfg(test)]
    starving_answers: AtomicUsize,
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("state", &self.load())
            .field("num_workers", &self.num_workers)
            .field("parks_in_driver", &self.driver_unpark.is_some())
            .finish_non_exhaustive()
    }
}

impl Sleep {
    /// A coordinator for `num_workers` workers, all counted as unparked and not searching.
    #[allow(dead_code)] // The tests and the models; runtimes use `with_driver`.
    pub(crate) fn new(num_workers: usize) -> Sleep {
        Sleep::with_driver(num_workers, None, Barrier::SYMMETRIC)
    }

    /// As [`Sleep::new`], for a runtime whose driver-holder parks in the driver: `unpark`
    /// ends that wait (`parker.rs`, "Parking in the driver").
    pub(crate) fn with_driver(
        num_workers: usize,
        unpark: Option<DriverUnpark>,
        barrier: Barrier,
    ) -> Sleep {
        assert!(
            num_workers > 0 && num_workers < (1 << 31),
            "worker count out of range"
        );
        Sleep {
            state: CachePadded::new(AtomicU64::new(num_workers as u64 * UNPARKED_ONE)),
            idle: (0..num_workers.div_ceil(64))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            join_waiting: (0..num_workers.div_ceil(64))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            parkers: (0..num_workers)
                .map(|_| CachePadded::new(Parker::new()))
                .collect(),
            driver_unpark: unpark,
            num_workers,
            barrier,
            bell: None,
            watcher: CachePadded::new(AtomicUsize::new(0)),
            cpus: num_workers,
            starving_waiters: CachePadded::new(AtomicUsize::new(0)),
            split_on_demand: num_workers > 1,
            split_reserve: spine_depth(num_workers),
            #[cfg(test)]
            starving_always: false,
            #[cfg(test)]
            starving_answers: AtomicUsize::new(0),
        }
    }

    /// Tells the coordinator how many CPUs the process may run on (before any worker
    /// starts): R1b wakes nobody while that many workers are awake. Without it, R1b counts
    /// one CPU per worker.
    pub(crate) fn set_cpus(&mut self, cpus: usize) {
        self.cpus = cpus.max(1);
    }

    /// Gives the coordinator the stall monitor's bell (before any worker starts).
    pub(crate) fn set_bell(&mut self, bell: crate::sync::Arc<Bell>) {
        self.bell = Some(bell);
    }

    /// A claim raised the unparked count from `prev`: if from 0, the pool was idle and the
    /// stall monitor may be asleep (`bell.rs`).
    #[inline]
    fn claimed(&self, prev: u64) {
        if IdleState(prev).unparked() == 0 {
            if let Some(bell) = &self.bell {
                bell.ring_if_asleep();
            }
        }
    }

    /// The state word's value when every worker is unparked and none is searching: the pool
    /// is saturated and a newly pushed job needs nobody woken.
    pub(crate) fn saturated_state(&self) -> u64 {
        self.num_workers as u64 * UNPARKED_ONE
    }

    /// A snapshot of the counts.
    #[allow(dead_code)]
    pub(crate) fn load(&self) -> IdleState {
        IdleState(self.state.load(SeqCst))
    }

    /// Tries to count the calling worker as searching. Refused when about half the workers
    /// already search (R4), to bound the contention of many idle thieves.
    pub(crate) fn try_start_searching(&self) -> bool {
        // SeqCst: searching counts take part in the total order the proof relies on (R2).
        let state = IdleState(self.state.load(SeqCst));
        if 2 * state.searching() >= self.num_workers {
            return false;
        }
        self.state.fetch_add(SEARCHING_ONE, SeqCst);
        true
    }

    /// Stops counting the calling worker as searching; returns whether it was the last
    /// searcher, in which case it must call [`Sleep::notify_work`] (R3).
    #[must_use]
    pub(crate) fn stop_searching(&self) -> bool {
        // SeqCst: see try_start_searching.
        let prev = IdleState(self.state.fetch_sub(SEARCHING_ONE, SeqCst));
        debug_assert!(prev.searching() > 0);
        prev.searching() == 1
    }

    /// The last searcher found work (R3): publishers that saw it searching woke nobody, so it
    /// wakes a worker for what they published, if anything is left.
    ///
    /// In the symmetric mode the heavy barrier is one fence, far cheaper than a wake: it pairs
    /// with the publishers' light barriers, so `jobs` and `tasks` (loads of every queue) see
    /// whatever a publisher that skipped its wake because of us pushed, and a worker is woken
    /// only for work that is there. In the asymmetric mode it would be a `membarrier`, which
    /// costs about what the wake it might save does, so we wake as if we had published, as
    /// tokio does, with one difference: a worker parked outside `join` is woken first, since
    /// it runs anything a publisher left, and a worker inside `join` only for a job we can
    /// see, since it runs nothing else (R6). Before, the lowest parked bit was woken whoever
    /// it was: with a join-waiter the only one parked, that was a wasted wake per task the
    /// other workers found, and on the woken side two heavy barriers (its shed and its park
    /// again). Skipping that wake loses no work: we are free and unparked ourselves, and our
    /// own next search or park (R5) sees what the publishers left (sleep/README.md, "Why no
    /// wakeup is lost", case 2). Either way one worker at most: the one woken applies R3 in
    /// turn if it finds work while it is the last searcher, so wakes chain only while work
    /// is left.
    ///
    /// **Alone in the asymmetric mode.** When every other worker is parked, the asymmetric
    /// mode looks first, after a plain `fence(SeqCst)`, and wakes only for work it sees, as
    /// the symmetric mode does (R3a in sleep/README.md). No `membarrier` is needed then: a
    /// worker that published with a light barrier and skipped its wake because of us has
    /// parked since (our load of `state` reads its R2 decrement, which follows its
    /// publication), and its own recheck (R5) sees what it published; every other publisher
    /// is outside the pool and publishes behind a SeqCst fence or a SeqCst read-modify-write
    /// of the queue's count, which our fence pairs with. In a pool fed one request at a time
    /// this is the common case, and the wake it saves cost the woken worker's search and
    /// park, and the waker's futex call, on the request's path: a chain of 1,000 spawns into
    /// a parked 2-worker pool took 221–284 µs with the wake and 183–222 without, one request
    /// 65–77 µs and 13.5–19.5 (medians; BENCHMARKS.md, "2026-12-03, fourth").
    pub(crate) fn last_searcher_found_work(
        &self,
        jobs: impl FnOnce() -> bool,
        tasks: impl FnOnce() -> bool,
    ) {
        if self.barrier.is_asymmetric() {
            // SeqCst: read after our `stop_searching` (a SeqCst RMW of this word), so it
            // shows every R2 decrement ordered before that RMW.
            let state = IdleState(self.state.load(SeqCst));
            if state.unparked() > 1 {
                // As in `notify_work`.
                self.barrier.light();
                // Acquire: as in `notify_work`.
                let Some(state) = self.unsaturated(Acquire) else {
                    return;
                };
                if self.wake_wanted(state) && !self.wake_free_cold() && jobs() {
                    // Only workers inside `join` are parked, and a job is queued.
                    self.wake_any_cold();
                }
                return;
            }
            // Alone (see above). SeqCst: pairs with the SeqCst fence or RMW of an outside
            // publisher, so that either its load of `state` sees our `stop_searching` and it
            // woke a worker itself, or the loads of the queues below see its push.
            fence(SeqCst);
        } else {
            self.barrier.heavy();
        }
        if jobs() {
            self.notify_work();
        } else if tasks() {
            self.notify_task();
        }
    }

    /// Called after publishing work: wakes one parked worker if nobody is searching (R1).
    ///
    /// The cost on the hot path is one compiler fence (asymmetric mode), one load and a
    /// compare; the cold path runs only when a worker is actually asleep.
    #[inline]
    pub(crate) fn notify_work(&self) {
        // Order the publication before the load of `state`: pairs with the heavy barrier in
        // `register_parked` (the sleeper's recheck).
        self.barrier.light();
        // Acquire: if we read a parker's decrement (R2), pairs with that RMW so that the idle
        // bit it set just before is visible to our scan in `wake_any_cold`. (Free on x86.)
        if let Some(state) = self.unsaturated(Acquire) {
            let _ = self.notify_work_cold(state);
        }
    }

    /// [`Sleep::notify_work`] for a job that a worker pushed onto its own deque, `backlog`
    /// saying whether the deque already held one (R1b). With a backlog, in the symmetric
    /// barrier mode, one parked worker is woken even while others search, as long as fewer
    /// than about half the workers search (R4's cap) and fewer workers are awake than the
    /// process has CPUs: the searchers left the older job where it was, so they are too few
    /// or too late for this one. A fork-join computation that enters a parked pool then
    /// reaches its workers in a few wake latencies, each woken thief publishing in turn,
    /// instead of the one latency per worker of R1 and R3 alone (the last searcher wakes the
    /// next). At 2 workers the two conditions are the same.
    ///
    /// Why: on the 16-CPU machine (BENCHMARKS.md, "twelfth"), parallel operations of about a
    /// millisecond at 16 workers took 30–50% less time with it in three of four runs
    /// (`par_sort_unstable` of sorted input, `position_first` with a match halfway), and a
    /// full `any` scan went from 1.40–1.42 to 1.08–1.25 × rayon's time. rayon wakes a
    /// sleeper on every push onto a non-empty deque, with no cap. The wake is extra to R1's,
    /// never instead of one, and follows the same barrier: no wakeup R1 makes is lost
    /// (`backlog_wakes_at_least_where_r1_wakes`).
    #[inline]
    pub(crate) fn notify_job(&self, backlog: bool) {
        // As in `notify_work`.
        self.barrier.light();
        // Acquire: as in `notify_work`.
        if let Some(state) = self.unsaturated(Acquire) {
            self.notify_job_cold(state, backlog);
        }
    }

    #[cold]
    fn notify_job_cold(&self, state: IdleState, backlog: bool) {
        let wanted = if backlog {
            self.backlog_wake_wanted(state)
        } else {
            self.wake_wanted(state)
        };
        if wanted {
            self.wake_any_cold();
        }
    }

    /// R1b's condition on a loaded `state`: R1's, or else, in the symmetric barrier mode,
    /// somebody is parked, another searcher would be admitted by R4 (fewer than about half
    /// the workers search), and fewer workers are awake than there are CPUs. Every wake R1
    /// makes, R1b makes too.
    ///
    /// Not in the asymmetric mode, which `Auto` picks on up to 4 CPUs: there a woken worker
    /// that finds nothing parks again through a `membarrier` that interrupts every busy CPU,
    /// the chain of wakes R1b shortens is at most 3 long, and R1b was measured only at 16
    /// workers in the symmetric mode.
    ///
    /// The CPU bound: on 2 CPUs, 8 workers woke up to 8 for a `position_first` whose match
    /// came early, and the worker with the answer then waited for a CPU behind them (0.14 →
    /// 5.7 ms at 8 workers, BENCHMARKS.md, "twelfth"). With as many workers awake as CPUs, an
    /// extra wake only takes a CPU from a worker that has work.
    #[inline]
    fn backlog_wake_wanted(&self, state: IdleState) -> bool {
        self.wake_wanted(state)
            || (!self.barrier.is_asymmetric()
                && 2 * state.searching() < self.num_workers
                && state.unparked() < self.num_workers.min(self.cpus))
    }

    /// [`Sleep::notify_work`] for a publisher that is not a running worker of this runtime
    /// (an `install` from another thread, a remote spawn, a mailbox push, a worker handing
    /// its queue on as it is switched off): a full fence in place of the light barrier, so
    /// that it pairs with the fence of a worker that parks last and skips its heavy barrier
    /// (R2'). Outside publications already pay a shared RMW (a CAS or a lock), next to which
    /// the fence is small.
    pub(crate) fn notify_work_outside(&self) {
        // SeqCst: pairs with the fence (or heavy barrier) after the decrement in
        // `register_parked`.
        fence(SeqCst);
        // Acquire: as in `notify_work`.
        if let Some(state) = self.unsaturated(Acquire) {
            let _ = self.notify_work_cold(state);
        }
    }

    /// [`Sleep::notify_work_outside`] for the job of a blocking entry from outside the pool
    /// (`install`, and `join` or `scope` called off the workers): if it wakes a worker, it
    /// wakes a second one too, when one is parked. Returns how many it woke.
    ///
    /// Why two: the caller blocks right after this, so the job's runner is alone until it
    /// forks, and then wakes the thief itself (R1). That wake comes from a busy CPU, and
    /// Linux often queues the wakee behind its waker there (wake-affine placement) instead of
    /// on the CPU the caller is leaving, where it then waits for the next load balance, a few
    /// milliseconds, while that CPU idles (`perf sched timehist` shows the thief queued on
    /// the runner's CPU). On the 2-CPU test machine, fib(30) split by `join` down to fib(20),
    /// each of 60 installs after 3 ms of sleep: in 35–41 of them the thief shared the
    /// runner's CPU or never ran, and the install took the sequential time (1.9 ms for 0.95);
    /// rayon's pool did the same in 50–53. Woken from here, by the thread about to block, the
    /// thief gets the other CPU: 1–5 of 60. This does not help when the caller computed right
    /// up to the call: both wakees then queue on the one CPU the caller is not on (33–49 of
    /// 60 either way; rayon 42–49). It costs less than it saves even for a job that does not
    /// fork: the runner used to wake the thief anyway, as the last searcher to find work
    /// (R3), before it ran the job; now the thief already searches. An empty `install` into
    /// a parked 2-worker pool returned in 53–56 µs (median of 400) instead of 69–72, and the
    /// process spent 210–217 µs of CPU on it instead of 241–252 (the woken workers' searches
    /// included).
    pub(crate) fn notify_entry_outside(&self) -> usize {
        // SeqCst: as in `notify_work_outside`.
        fence(SeqCst);
        // Acquire: as in `notify_work`.
        match self.unsaturated(Acquire) {
            // R1 woke the runner; a second wake for its thief.
            Some(state) if self.notify_work_cold(state) => 1 + usize::from(self.wake_any_cold()),
            _ => 0,
        }
    }

    /// [`Sleep::notify_task`] for a publisher that is not a running worker of this runtime,
    /// as [`Sleep::notify_work_outside`] is for jobs.
    pub(crate) fn notify_task_outside(&self) {
        // SeqCst: as in `notify_work_outside`.
        fence(SeqCst);
        // Acquire: as in `notify_work`.
        if let Some(state) = self.unsaturated(Acquire) {
            self.notify_task_cold(state);
        }
    }

    /// [`Sleep::notify_task_outside`] for a publisher whose publication was a SeqCst
    /// read-modify-write of the very word a parker's recheck reads (the task inject queue's
    /// count, `queue/linked_inject.rs`): a SeqCst load of the state then suffices, without
    /// a fence. By the C++ rules for SeqCst operations and fences, either the parker's fence
    /// comes first in the single total order, and our load sees its decrement, or our RMW
    /// does, and its recheck after the fence sees our count (R2' in README.md). On x86 this
    /// is one plain load, where the fence would be an `mfence` on every remote spawn.
    ///
    /// `queued_before` is how many tasks the queue's count held before this one (the push's
    /// own read-modify-write returns it). Where R1 wakes nobody, a task queued behind at least
    /// as many tasks as there are workers awake still wakes one more (R1c,
    /// [`Sleep::queue_outruns_workers`]).
    pub(crate) fn notify_task_after_seqcst_push(&self, queued_before: usize) {
        // loom models SeqCst loads and RMWs as AcqRel (a documented limitation), which would
        // make it report lost wakeups this pairing rules out; its SeqCst fences are exact.
        if cfg!(loom) {
            fence(SeqCst);
        }
        // SeqCst: see above; pairs with the SeqCst decrement and fence in `register_parked`.
        if let Some(state) = self.unsaturated(SeqCst) {
            self.notify_queued_task_cold(state, queued_before);
        }
    }

    /// R1 or R1c for a task queued behind `queued_before` others: wakes a worker that may run
    /// tasks. Behind none, R1c asks for a wake only with nobody awake, where R1 does too.
    #[cold]
    fn notify_queued_task_cold(&self, state: IdleState, queued_before: usize) {
        if self.wake_wanted(state) || self.queue_outruns_workers(state, queued_before) {
            self.wake_free_cold();
        }
    }

    /// R1c's condition (`README.md`): the task inject queue held at least as many tasks as
    /// there are workers awake when one more was queued, and the workers awake are fewer
    /// than the pool's and fewer than the process's CPUs less one, the one the submitting
    /// thread runs on. The workers awake cannot all be about to take the queued tasks, so
    /// one more is woken, whether or not somebody searches, and it finds a task unless the
    /// awake ones take them all first.
    ///
    /// Why: a stream of submissions from one thread into a parked pool otherwise reached
    /// its workers one wake-up latency at a time: R1 woke one, and each later one was woken
    /// by the last searcher as it found work (R3). On the 2-vCPU test machine the second of
    /// two workers began its first task 0.26–0.39 ms after the first submission, and
    /// 0.08–0.33 with R1c and the bound below lifted; rayon's 0.20–0.24 (`magpie-bench scale
    /// --only task-pool`, the "ramp" figure). On the 16-CPU machine the task pool reached
    /// 90.9% efficiency at 16 workers, rayon's 97.1%. rayon wakes a sleeping thread for
    /// every job injected into a queue that was not empty; this wakes one only while the
    /// queue is at least as long as the workers awake, so a worker that keeps up with the
    /// stream is not joined by idle ones.
    ///
    /// The submitter's CPU: bounded by all the CPUs, R1c woke the second worker of a
    /// 2-worker pool on 2 CPUs at the second remote spawn, where the submitter was still
    /// spawning, and spawn_many_remote took 1.31–1.37 × the best peer's time against
    /// 0.97–1.02 without R1c (alternated runs of one build). With as many workers awake as
    /// CPUs beside the submitter, a wake only takes a CPU from it or from them; the workers
    /// left are woken as before (R1, R3) once the submitter stops.
    #[inline]
    fn queue_outruns_workers(&self, state: IdleState, queued_before: usize) -> bool {
        let unparked = state.unparked();
        queued_before >= unparked && unparked < self.num_workers.min(self.cpus - 1)
    }

    /// After the `i`-th task of a batch (counted from 0) went into the task inject
    /// queue, the publisher having notified for it as for any task: wakes one more parked
    /// worker outside `join`, whether or not someone searches, while fewer than `i + 1`
    /// workers are unparked. A batch of `n` tasks so wakes up to `n` workers at once, where
    /// R1 alone wakes one and leaves the rest to the chain of R3 (each searcher that finds
    /// work wakes the next), one wake-up latency after another.
    ///
    /// Why: the first wakee is often queued on the submitter's CPU (wake-affine placement,
    /// see [`Sleep::notify_entry_outside`]) and runs only when the submission is over, and the
    /// worker it then wakes in turn waits for a CPU of its own again. On the 2-vCPU test
    /// machine, 4,000 closures of 50 µs by `submit_batch` into a parked 2-worker pool: the
    /// second worker started 0.44 to 4.3 ms after the batch began (the central queue of
    /// `magpie compare`, which wakes both of its threads at once, about 0.4). This wake is
    /// beyond what the protocol needs (the notification before it keeps every task found),
    /// so it takes no fence, and a wakee that finds nothing left parks again. (rayon's
    /// registry does the same for jobs injected from outside: it wakes as many sleeping
    /// threads as jobs arrived, up to the sleepers there are.)
    #[inline]
    pub(crate) fn notify_batch_task(&self, i: usize) {
        // The first task had R1's notification; past the pool's size there is nobody left.
        if i == 0 || i >= self.num_workers {
            return;
        }
        // Relaxed: only a hint; see above.
        if let Some(state) = self.unsaturated(Relaxed) {
            // `unparked <= i < num_workers`: someone is parked.
            if state.unparked() <= i {
                self.wake_free_cold();
            }
        }
    }

    /// The state, loaded with `order`, unless it shows every worker unparked and nobody
    /// searching (the saturated pool every notification leaves alone on its fast path).
    #[inline(always)]
    fn unsaturated(&self, order: std::sync::atomic::Ordering) -> Option<IdleState> {
        let state = self.state.load(order);
        (state != self.saturated_state()).then_some(IdleState(state))
    }

    #[cold]
    /// R1's decision on a loaded `state`: wakes one parked worker if nobody searches.
    /// Returns whether it woke one.
    fn notify_work_cold(&self, state: IdleState) -> bool {
        self.wake_wanted(state) && self.wake_any_cold()
    }

    /// R1's condition on a loaded `state`: nobody searches (a searcher would find the work)
    /// and somebody is parked.
    #[inline]
    fn wake_wanted(&self, state: IdleState) -> bool {
        state.searching() == 0 && state.unparked() < self.num_workers
    }

    /// Called after publishing a *task*: as [`Sleep::notify_work`], but wakes only a worker
    /// that may run tasks, one not waiting inside `join` (R6).
    #[inline]
    pub(crate) fn notify_task(&self) {
        // As in `notify_work`.
        self.barrier.light();
        // Acquire: as in `notify_work`.
        if let Some(state) = self.unsaturated(Acquire) {
            self.notify_task_cold(state);
        }
    }

    #[cold]
    fn notify_task_cold(&self, state: IdleState) {
        if self.wake_wanted(state) {
            self.wake_free_cold();
        }
    }

    /// Called after a running task filled its worker's empty LIFO slot: as
    /// [`Sleep::notify_task`], but wakes nobody while a LIFO watcher is parked (R7). The
    /// owner runs the task as soon as the poll that filled the slot returns; the watcher
    /// looks at the slots every [`WATCH_INTERVAL`] and rescues a task whose owner is stuck,
    /// and it rechecks every queue when it stops watching.
    #[inline]
    pub(crate) fn notify_lifo(&self) {
        // As in `notify_work`; the barrier also orders the fill before the load of `watcher`
        // (pairs with the heavy barrier in `end_watch`).
        self.barrier.light();
        // Acquire: as in `notify_work`.
        if let Some(state) = self.unsaturated(Acquire) {
            self.notify_lifo_cold(state);
        }
    }

    #[cold]
    fn notify_lifo_cold(&self, state: IdleState) {
        // Relaxed: ordered after our fill by the light barrier above, which pairs with the
        // heavy barrier between the watcher's clearing store and its recheck (`end_watch`):
        // either we see the store and wake as R1 says, or the recheck sees our fill.
        if self.watcher.load(Relaxed) == 0 {
            self.notify_task_cold(state);
        }
    }

    /// Makes `worker`, registered as parked (R2), the LIFO watcher if there is none (R7).
    /// Returns whether it is now.
    pub(crate) fn try_watch(&self, worker: usize) -> bool {
        // Relaxed: the word carries no data, only whom a notifier may leave the work to;
        // what the watcher must see is ordered by the barrier pair of `end_watch`.
        self.watcher
            .compare_exchange(0, worker + 1, Relaxed, Relaxed)
            .is_ok()
    }

    /// Whether some worker other than the caller, which is registered as parked, is
    /// unparked: one that may fill its LIFO slot (R7).
    pub(crate) fn others_unparked(&self) -> bool {
        // SeqCst: part of the total order on `state`, like every access to it.
        IdleState(self.state.load(SeqCst)).unparked() > 0
    }

    /// `worker` stops watching (R7): clears the word, then runs the heavy barrier. After this
    /// the caller rechecks every queue as R5 says, and claims a wakeup for what it sees.
    pub(crate) fn end_watch(&self, worker: usize) {
        // SeqCst: the heavy barrier below orders it before the recheck (see
        // `notify_lifo_cold`).
        let prev = self.watcher.swap(0, SeqCst);
        debug_assert_eq!(prev, worker + 1, "worker {worker} was not the watcher");
        self.barrier.heavy();
    }

    /// `worker` stops watching (R7) because a notifier claimed it: clears the word without
    /// a barrier. It searches when its park settles, as a searcher, and parks through R2 and
    /// R5 after, so a fill that left its wake to it is seen then if nobody took the task
    /// before: its owner when the poll that filled it returned, a thief, or this worker.
    pub(crate) fn end_watch_claimed(&self, worker: usize) {
        // SeqCst: as in `end_watch`.
        let prev = self.watcher.swap(0, SeqCst);
        debug_assert_eq!(prev, worker + 1, "worker {worker} was not the watcher");
    }

    /// Whether a notifier claimed `worker`, registered as parked: its searching token is
    /// here or on its way (the claimer sets it right after the claim), so it is counted as
    /// unparked and searching.
    pub(crate) fn has_searching_token(&self, worker: usize) -> bool {
        let mask = 1u64 << (worker % 64);
        // Acquire: as in `settle`.
        self.idle[worker / 64].load(Acquire) & mask == 0
    }

    /// Whether `worker`, registered as parked, has a token waiting (woken by a notifier, a
    /// latch, shutdown).
    pub(crate) fn has_token(&self, worker: usize) -> bool {
        self.parkers[worker].has_token()
    }

    /// Claims `worker`'s own wakeup as a searcher, as a notifier would (R5's "possibly us"),
    /// for a worker that is still registered as parked and on its CPU: it counts as unparked
    /// and searching when its park settles. If a notifier claimed it first, it is counted so
    /// already.
    pub(crate) fn claim_own_wakeup(&self, worker: usize) {
        let word = &self.idle[worker / 64];
        let mask = 1u64 << (worker % 64);
        // AcqRel: as in `wake_cold`; exactly one claimer clears the bit.
        if word.fetch_and(!mask, AcqRel) & mask != 0 {
            self.count_claimed_searcher(worker);
        }
    }

    /// The rest of a claim, by whoever cleared `worker`'s idle bit to wake it as a searcher
    /// (`wake_cold`, `claim_own_wakeup`): counts it as unparked and searching, and hands it
    /// the searching token.
    fn count_claimed_searcher(&self, worker: usize) {
        // SeqCst: part of the total order on `state` (R1, R2), and of the monitor's bell
        // pair (`bell.rs`).
        let prev = self.state.fetch_add(UNPARKED_ONE + SEARCHING_ONE, SeqCst);
        self.parkers[worker].unpark_searching(self.driver_unpark.as_ref());
        // After the unpark: the worker that runs the work starts waking while this thread
        // rings, instead of after (the ring is a system call when the monitor sleeps). The
        // bell's pair needs only the RMW above before the ring's fence (`bell.rs`).
        self.claimed(prev);
    }

    /// Blocks `worker`, registered as parked, until a token arrives or `timeout` passes,
    /// without settling: the caller calls [`Sleep::settle`] (or waits again) after.
    pub(crate) fn wait(&self, worker: usize, timeout: Option<Duration>) {
        self.parkers[worker].park(timeout);
    }

    /// As [`Sleep::wait`], but blocks in the driver: `wait` is one driver turn that returns
    /// on an event, its timeout or the driver's unpark, which every wake of this worker
    /// calls while it waits there (`parker.rs`, "Parking in the driver"). The caller holds
    /// the driver role, and it may return with no token at all (an I/O event): its settle
    /// then claims its own bit back, as after a timeout.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))]
    pub(crate) fn wait_driving(&self, worker: usize, wait: impl FnOnce()) {
        self.parkers[worker].park_in(wait);
    }

    /// Wakes one parked worker as a searcher, if one is parked. Returns whether it did.
    #[cold]
    pub(crate) fn wake_any_cold(&self) -> bool {
        self.wake_cold(false)
    }

    /// Wakes one parked worker that is not waiting inside `join`, as a searcher, if there is
    /// one (R6). Returns whether it did.
    #[cold]
    pub(crate) fn wake_free_cold(&self) -> bool {
        self.wake_cold(true)
    }

    /// Marks worker `worker` as waiting inside `join` (R6), or not.
    pub(crate) fn set_join_waiting(&self, worker: usize, waiting: bool) {
        let word = &self.join_waiting[worker / 64];
        let mask = 1u64 << (worker % 64);
        // Relaxed: see the field's docs; the worker's own `register_parked` publishes it.
        if waiting {
            word.fetch_or(mask, Relaxed);
        } else {
            word.fetch_and(!mask, Relaxed);
        }
    }

    fn wake_cold(&self, free_only: bool) -> bool {
        for (word_index, word) in self.idle.iter().enumerate() {
            // Acquire: pairs with the Release fetch_or in `register_parked`.
            let mut bits = word.load(Acquire);
            let allowed = if free_only {
                // Relaxed: ordered after the Acquire above (see the field's docs).
                !self.join_waiting[word_index].load(Relaxed)
            } else {
                !0
            };
            bits &= allowed;
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                let mask = 1u64 << bit;
                // Claim that worker's wakeup. AcqRel: pairs with the fetch_or that set the bit
                // and with the sleeper's own claim attempt in `park`.
                let prev = word.fetch_and(!mask, AcqRel);
                if prev & mask != 0 {
                    self.count_claimed_searcher(word_index * 64 + bit);
                    return true;
                }
                bits = prev & !mask & allowed;
            }
        }
        false
    }

    /// Wakes worker `worker` for its own reasons (a latch it sleeps on was set, shutdown).
    /// Touches no counts: the worker settles its own accounting when it wakes (see `park`).
    /// If it is not parked, the token is kept and only cuts its next park short.
    pub(crate) fn wake_worker(&self, worker: usize) {
        self.parkers[worker].unpark_plain(self.driver_unpark.as_ref());
    }

    /// Whether some worker outside `join` is parked with its wakeup unclaimed: one that could
    /// take the driver role if it were woken (`IdleLoop::hand_off_driver`). The caller orders
    /// this after its own release of the role with a SeqCst fence.
    pub(crate) fn has_parked_free(&self) -> bool {
        self.first_parked(|idle, join| idle & !join).is_some()
    }

    /// A worker parked inside `join` with its wakeup unclaimed, the lowest, if any: one that
    /// turns the drivers when it wakes without taking the role for its sleep (D5 in
    /// README.md). The caller orders this after its own store with a SeqCst fence.
    pub(crate) fn parked_join_waiter(&self) -> Option<usize> {
        self.first_parked(|idle, join| idle & join)
    }

    /// The lowest worker whose bit `pick` keeps, given a word of the idle bitmap and the
    /// same word of `join_waiting`: a scan of unclaimed wakeups, without claiming any.
    fn first_parked(&self, pick: impl Fn(u64, u64) -> u64) -> Option<usize> {
        self.idle
            .iter()
            .zip(self.join_waiting.iter())
            .enumerate()
            .find_map(|(word_index, (idle, join))| {
                // Acquire: as in `wake_cold`; Relaxed for `join_waiting`, read after it.
                let bits = pick(idle.load(Acquire), join.load(Relaxed));
                (bits != 0).then(|| word_index * 64 + bits.trailing_zeros() as usize)
            })
    }

    /// Registers `worker` as parked (R2): sets its idle bit and stops counting it as
    /// unparked (and as searching, if it was). Returns whether it was the last searcher.
    ///
    /// After this the caller must recheck every queue and call [`Sleep::notify_work`] if
    /// any holds work (R5), then call [`Sleep::park`]. The heavy barrier here is the one
    /// that pairs with the light barrier of every publisher.
    pub(crate) fn register_parked(&self, worker: usize, searching: bool) -> bool {
        let mask = 1u64 << (worker % 64);
        // Release: pairs with the Acquire/AcqRel in the wake functions.
        let prev_bits = self.idle[worker / 64].fetch_or(mask, Release);
        debug_assert_eq!(prev_bits & mask, 0, "worker {worker} registered twice");
        let dec = UNPARKED_ONE + if searching { SEARCHING_ONE } else { 0 };
        // SeqCst: part of the total order on `state`.
        let prev = IdleState(self.state.fetch_sub(dec, SeqCst));
        if prev.unparked() == 1 {
            // R2' (last to park): every other worker was parked before our decrement, so
            // whatever they published came before their own decrements, which our RMW reads
            // through (the RMWs on `state` form one release sequence). The only publishers
            // left are threads outside the pool, whose `notify_*_outside` fence pairs with
            // this one. In the asymmetric mode this saves the `membarrier` of every park
            // that leaves the pool idle: in a ping-pong or a request at a time, nearly all.
            fence(SeqCst);
        } else {
            // Pairs with `barrier::light` in `notify_work` and in the deque's `pop`: after
            // this, the caller's recheck sees every job published before a publisher's
            // barrier that did not see our decrement.
            self.barrier.heavy();
        }
        searching && prev.searching() == 1
    }

    /// Blocks `worker`, registered by [`Sleep::register_parked`], until a token arrives or
    /// `timeout` passes, then makes it unparked again. Returns how it is counted now:
    /// [`Wake::Searching`] if a notifier claimed it (and counted it as searching),
    /// [`Wake::Plain`] if it claimed its own idle bit back (counted as unparked only).
    pub(crate) fn park(&self, worker: usize, timeout: Option<Duration>) -> Wake {
        self.wait(worker, timeout);
        self.settle(worker)
    }

    /// [`Sleep::wait_driving`], then [`Sleep::settle`] (the models' shorthand; a worker
    /// may wait several turns before it settles, `IdleLoop::watch`).
    #[cfg(all(test, loom))]
    pub(crate) fn park_driving(&self, worker: usize, wait: impl FnOnce()) -> Wake {
        self.wait_driving(worker, wait);
        self.settle(worker)
    }

    /// After a park: makes `worker` unparked again and says how it is counted.
    pub(crate) fn settle(&self, worker: usize) -> Wake {
        let parker = &self.parkers[worker];
        let word = &self.idle[worker / 64];
        let mask = 1u64 << (worker % 64);
        // Try to take our own wakeup back. AcqRel: as in wake_any_cold; exactly one claimer
        // clears the bit.
        if word.fetch_and(!mask, AcqRel) & mask != 0 {
            // SeqCst: part of the total order on `state`, and of the monitor's bell pair
            // (`bell.rs`).
            let prev = self.state.fetch_add(UNPARKED_ONE, SeqCst);
            self.claimed(prev);
            parker.take_plain();
            Wake::Plain
        } else {
            // A notifier claimed us and counted us as searching; its token is on its way
            // (it sets it right after the claim), if it is not here already.
            parker.take_searching();
            Wake::Searching
        }
    }

    /// Parks a worker that `set_active_workers` took out of service until a plain wake
    /// ([`Sleep::wake_worker`]) or `timeout`. Its idle bit stays clear and it keeps counting
    /// as unparked, so notifiers never pick it for work (it would take none) and their
    /// saturation check stays exact for the active workers.
    pub(crate) fn park_retired(&self, worker: usize, timeout: Option<Duration>) {
        let parker = &self.parkers[worker];
        parker.park(timeout);
        parker.take_plain();
    }

    /// The barrier mode of the runtime (for the callers' own heavy barriers, which must pair
    /// with the same light barriers).
    pub(crate) fn barrier(&self) -> Barrier {
        self.barrier
    }

    #[allow(dead_code)]
    pub(crate) fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// Turns rule 5 of the parallel iterators' bridge on or off for this pool (before any
    /// worker starts); a pool of one worker keeps it off, with nobody to hand work to.
    pub(crate) fn set_split_on_demand(&mut self, on: bool) {
        self.split_on_demand = on && self.num_workers > 1;
    }

    /// Whether the parallel iterators' bridge offers every level of a computation's split
    /// spine to the pool (on: a reserve of [`spine_depth`] jobs), or only while the worker
    /// offers fewer than `join`'s reserve of jobs (off; an A/B aid).
    pub(crate) fn set_offer_every_split(&mut self, on: bool) {
        self.split_reserve = if on { spine_depth(self.num_workers) } else { 0 };
    }

    /// See [`Sleep::set_offer_every_split`]: 0 when off.
    #[inline]
    pub(crate) fn split_reserve(&self) -> usize {
        self.split_reserve
    }

    /// Makes [`Sleep::others_starve`] answer `true` whenever it is asked (a test's pool).
    #[cfg(test)]
    pub(crate) fn set_starving_always(&mut self, always: bool) {
        self.starving_always = always;
    }

    /// Whether this is a test's pool that starves always.
    #[cfg(test)]
    pub(crate) fn starves_always(&self) -> bool {
        self.starving_always
    }

    /// How many times [`Sleep::others_starve`] answered `true` in a pool that starves always.
    #[cfg(test)]
    pub(crate) fn starving_answers(&self) -> usize {
        self.starving_answers.load(Relaxed)
    }

    /// Whether long pieces of parallel iterators may be cut here for starving workers.
    #[inline]
    pub(crate) fn splits_on_demand(&self) -> bool {
        self.split_on_demand
    }

    /// Counts the calling worker among those waiting in `join` with nothing to run (`true`),
    /// or no longer (`false`); each `true` is followed by one `false`.
    pub(crate) fn set_starving_waiter(&self, starving: bool) {
        // Relaxed: a hint for `others_starve`, which orders nothing by it.
        if starving {
            self.starving_waiters.fetch_add(1, Relaxed);
        } else {
            self.starving_waiters.fetch_sub(1, Relaxed);
        }
    }

    /// Whether some worker is awake and finds nothing to run (a searcher, or a worker waiting
    /// in `join` that found nothing in its last round) while no more workers are awake than
    /// the process has CPUs: with more, the starving one shares a CPU with a busy one, and
    /// work handed to it runs no sooner (R1b's bound). A hint, possibly stale: a long piece
    /// of a parallel iterator asks it between chunks, to hand half of its rest to the pool.
    #[inline]
    pub(crate) fn others_starve(&self) -> bool {
        #[cfg(test)]
        if self.starving_always {
            // Relaxed: a count the test reads after the pool ran.
            self.starving_answers.fetch_add(1, Relaxed);
            return true;
        }
        // Relaxed: a stale answer costs one split too many or one chunk of delay; the job a
        // split publishes is found through the deque's own synchronization.
        let state = IdleState(self.state.load(Relaxed));
        state.unparked() <= self.cpus
            && (state.searching() > 0 || self.starving_waiters.load(Relaxed) > 0)
    }
}

/// The levels a parallel iterator's split budget of `workers` splits, halved per level,
/// lasts: `floor(log2(workers)) + 1` (16, 8, 4, 2, 1 for 16 workers: 5).
fn spine_depth(workers: usize) -> usize {
    (usize::BITS - workers.leading_zeros()) as usize
}

#[cfg(all(test, loom))]
mod loom_sleep;
#[cfg(all(test, not(loom)))]
mod tests;
