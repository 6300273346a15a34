//! A worker thread: its private state, its main loop, and the find-work order (policy; the
//! queues themselves are mechanism, in `crate::queue`).
//!
//! Find-work order, cheapest first:
//!
//! 1. the worker's own deque, LIFO: the job it forked last is hot in cache and, in
//!    fork-join code, the smallest piece, which keeps the stack shallow;
//! 2. a steal from the deque of a random victim (FastRand + Lemire), trying every other
//!    worker once starting there: the top of a deque is the oldest and largest piece;
//! 3. the inject queue: work from outside the pool (`install`, a `join` called from outside);
//! 4. spin, then yield, then park through the sleep protocol (`crate::sleep`).
//!
//! The inject queue comes after stealing because in fork-join code the jobs already in the
//! pool are what the threads blocked in `install` are waiting for; finishing them first
//! shortens everyone's wait. The async side (see DESIGN.md) adds its task queues between
//! steps 1 and 2.

use std::cell::Cell;
use std::ptr;
use std::time::Duration;

use crate::join::job::{JobHeader, JobRef};
use crate::join::latch::SpinLatch;
use crate::queue::chase_lev::{self, Steal};
use crate::sleep::Wake;
use crate::stats::{bump, WorkerCounters};
use crate::sync::Arc;
use crate::util::rand::FastRand;
use crate::util::unwind::AbortIfPanic;
use crate::util::CachePadded;

use super::registry::Registry;

/// Rounds of unsuccessful searching spent spinning before yielding, and before parking.
/// Spinning briefly catches the next job of a fork-join computation without a futex round
/// trip (the Blitz seed uses 64 spins, 128 yields); we search every victim once per round,
/// so rounds are longer than the seed's single attempts and we use fewer.
const SPIN_ROUNDS: u32 = 16;
const YIELD_ROUNDS: u32 = 32;

/// The longest a worker parks without being woken. Only a safety net: the sleep protocol
/// does not lose wakeups (sleep/README.md). One wakeup per second per idle worker costs a few
/// microseconds of CPU, far below the idle budget of rayon#642.
const PARK_SAFETY_NET: Duration = Duration::from_secs(1);

/// How many stealable jobs a worker keeps offering before `join` stops publishing its second
/// halves (see `WorkerThread::should_publish`). Thieves take the oldest, so the reserve holds
/// the largest pieces; a few are enough, since every steal makes the owner publish again at
/// its next `join`. chili publishes while its queue holds fewer than 3 jobs (and one `join`
/// in 64 otherwise). Measured in magpie-bench `fork-join` (fib, tree_sum); see BENCHMARKS.md.
const STEAL_RESERVE: usize = 3;

thread_local! {
    /// The worker running on this thread, or null.
    static CURRENT: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

/// A worker's private state. Lives on the worker thread's stack for the thread's lifetime;
/// other threads reach only its shared parts, through the registry.
#[derive(Debug)]
pub(crate) struct WorkerThread {
    index: usize,
    registry: Arc<Registry>,
    /// This worker's entry of `registry.counters`, one pointer away.
    counters: Arc<CachePadded<WorkerCounters>>,
    deque: chase_lev::Worker<JobHeader>,
    rng: Cell<FastRand>,
}

impl WorkerThread {
    /// The worker running on this thread, or null off the pool.
    #[inline]
    pub(crate) fn current() -> *const WorkerThread {
        CURRENT.with(Cell::get)
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The publication policy of `join`: whether its second half should be made stealable.
    ///
    /// Yes while this worker offers fewer than [`STEAL_RESERVE`] stealable jobs, so that a
    /// thief always finds the oldest (largest) pieces of this worker's computation, and every
    /// steal makes the owner publish again at its next `join`. Otherwise the second half runs
    /// inline, at the cost of a function call. That is where fork-join overhead goes to almost
    /// nothing (ARCHITECTURE.md, "Why this join design").
    #[inline]
    pub(crate) fn should_publish(&self) -> bool {
        self.deque.len() < STEAL_RESERVE
    }

    /// Pushes a job onto this worker's deque and wakes a sleeper if nobody is searching.
    #[inline]
    pub(crate) fn push(&self, job: JobRef) {
        self.deque.push(job.as_ptr());
        self.registry.sleep.notify_work();
    }

    /// Pops the newest job of this worker's deque.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef> {
        // SAFETY: only `JobRef::as_ptr` values are pushed (see `push`).
        self.deque.pop().map(|ptr| unsafe { JobRef::from_ptr(ptr) })
    }

    /// Runs a job taken from a queue, counting it.
    #[inline]
    pub(crate) fn execute(&self, job: JobRef) {
        self.count_job();
        // SAFETY: a job taken out of a queue is owned by whoever took it, executed once here;
        // its memory is live until its latch is set (JobRef's contract).
        unsafe { job.execute() }
    }

    /// Counts one job run on this worker.
    #[inline]
    pub(crate) fn count_job(&self) {
        bump(&self.counters.jobs_executed);
    }

    /// Steps 1-3 of the find-work order.
    fn find_work(&self) -> Option<JobRef> {
        self.pop()
            .or_else(|| self.steal())
            .or_else(|| self.registry.inject.pop())
    }

    /// One pass over every other worker, starting at a random one.
    fn steal(&self) -> Option<JobRef> {
        let stealers = &self.registry.stealers;
        let n = stealers.len();
        if n <= 1 {
            return None;
        }
        let counters = &self.counters;
        let mut rng = self.rng.get();
        let start = rng.below(n as u32) as usize;
        self.rng.set(rng);
        for offset in 0..n {
            let victim = (start + offset) % n;
            if victim == self.index {
                continue;
            }
            loop {
                match stealers[victim].steal() {
                    Steal::Success(ptr) => {
                        bump(&counters.steal_attempts);
                        bump(&counters.jobs_stolen);
                        // SAFETY: only `JobRef::as_ptr` values are pushed.
                        return Some(unsafe { JobRef::from_ptr(ptr) });
                    }
                    Steal::Empty => break,
                    Steal::Retry => bump(&counters.steal_attempts),
                }
            }
        }
        None
    }

    /// Waits, without idling while work exists, until `latch` is set: the `join` whose second
    /// half was stolen. Runs jobs (its own, stolen ones, injected ones) meanwhile, and parks
    /// if there are none.
    #[inline]
    pub(crate) fn wait_until(&self, latch: &SpinLatch) {
        if !latch.probe() {
            self.wait_until_cold(latch);
        }
    }

    #[cold]
    fn wait_until_cold(&self, latch: &SpinLatch) {
        let mut idle = IdleLoop::new(self);
        while !latch.probe() {
            if let Some(job) = self.find_work() {
                idle.found_work();
                self.execute(job);
                continue;
            }
            if !idle.spin() {
                // Sleep on the latch: announce it, so the setter wakes us (latch.rs).
                if latch.start_sleeping() {
                    idle.park();
                    latch.stop_sleeping();
                }
            }
        }
        idle.found_work();
    }

    /// The main loop: find work, run it, park when there is none, until terminated.
    fn main_loop(&self) {
        let mut idle = IdleLoop::new(self);
        loop {
            if let Some(job) = self.find_work() {
                idle.found_work();
                self.execute(job);
                continue;
            }
            if self.registry.is_terminating() {
                break;
            }
            if !idle.spin() {
                idle.park();
            }
        }
        idle.found_work();
    }
}

/// The spin → yield → park progression of one idle stretch, and the searching bookkeeping
/// of the sleep protocol (R3, R4).
struct IdleLoop<'w> {
    worker: &'w WorkerThread,
    rounds: u32,
    searching: bool,
}

impl<'w> IdleLoop<'w> {
    fn new(worker: &'w WorkerThread) -> IdleLoop<'w> {
        IdleLoop {
            worker,
            rounds: 0,
            searching: false,
        }
    }

    /// Work was found: stop searching, and if we were the last searcher, wake another
    /// worker, since where there was one job there may be more (R3).
    fn found_work(&mut self) {
        self.rounds = 0;
        if self.searching {
            self.searching = false;
            if self.worker.registry.sleep.stop_searching() {
                self.worker.registry.sleep.notify_work();
            }
        }
    }

    /// One unsuccessful round: spin or yield. Returns false when it is time to park.
    fn spin(&mut self) -> bool {
        if !self.searching {
            // R4: join the searchers if fewer than about half the workers search.
            self.searching = self.worker.registry.sleep.try_start_searching();
        }
        self.rounds += 1;
        if self.rounds <= SPIN_ROUNDS {
            for _ in 0..(1 << self.rounds.min(6)) {
                std::hint::spin_loop();
            }
            true
        } else if self.rounds <= SPIN_ROUNDS + YIELD_ROUNDS {
            std::thread::yield_now();
            true
        } else {
            false
        }
    }

    /// Parks through the sleep protocol (R2, R5) until woken, then resumes as the wake says.
    fn park(&mut self) {
        let worker = self.worker;
        let registry = &*worker.registry;
        let counters = &worker.counters;
        let _ = registry.sleep.register_parked(worker.index, self.searching);
        self.searching = false;
        // R5: recheck every queue after the heavy barrier in `register_parked`. If a job is
        // visible, make sure someone (possibly us) is woken for it.
        // (Our own bit is set, so this always wakes somebody, perhaps us.)
        if registry.has_visible_work() {
            registry.sleep.wake_any_cold();
        }
        bump(&counters.parks);
        match registry.sleep.park(worker.index, Some(PARK_SAFETY_NET)) {
            Wake::Searching => self.searching = true,
            Wake::Plain => {}
        }
        bump(&counters.unparks);
        self.rounds = 0;
    }
}

/// Everything a new worker thread needs.
pub(crate) struct WorkerSeed {
    pub(crate) index: usize,
    pub(crate) registry: Arc<Registry>,
    pub(crate) deque: chase_lev::Worker<JobHeader>,
}

/// The body of a worker thread.
pub(crate) fn run(seed: WorkerSeed) {
    let worker = WorkerThread {
        index: seed.index,
        counters: seed.registry.counters[seed.index].clone(),
        rng: Cell::new(FastRand::for_worker(seed.index)),
        registry: seed.registry,
        deque: seed.deque,
    };
    CURRENT.with(|c| c.set(&worker));
    // Jobs catch their users' panics; a panic escaping here is a bug in magpie.
    let guard = AbortIfPanic;
    worker.main_loop();
    std::mem::forget(guard);
    debug_assert!(
        worker.deque.is_empty(),
        "worker exited with jobs in its deque"
    );
    CURRENT.with(|c| c.set(ptr::null()));
}
