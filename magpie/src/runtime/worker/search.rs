//! Finding work: the worker's own queues, then stealing from the others (find-work steps 1,
//! 4 and 5 of the module docs of `worker`).

use crate::join::job::JobRef;
use crate::queue::chase_lev::Steal;
use crate::runtime::registry::Task;
use crate::stats::trace::Kind;
use crate::stats::{add, bump};
use crate::sync::atomic::Relaxed;

use super::idle::LIFO_STEAL_ROUND;
use super::{Work, WorkerThread};

impl WorkerThread {
    /// The find-work order of the main loop (see the module docs).
    pub(super) fn find_work(&self, search_round: u32) -> Option<Work> {
        if let Some(job) = self.pop() {
            return Some(Work::Job(job));
        }
        if let Some(task) = self.next_task() {
            return Some(Work::Task(task));
        }
        // The local queues ran dry: a snapshot taken from now on sees every poll so far.
        self.flush_counters();
        if let Some(work) = self.steal(search_round >= LIFO_STEAL_ROUND, true) {
            return Some(work);
        }
        if let Some(task) = self.pull_inject() {
            return Some(Work::Task(task));
        }
        self.registry.inject.pop().map(Work::Job)
    }

    /// The find-work order inside `join` after this worker's own deque (`pop`): jobs only
    /// (see `wait_until`), none of them part of the frames that wait here.
    pub(super) fn find_other_job(&self) -> Option<JobRef> {
        if let Some(Work::Job(job)) = self.steal(false, false) {
            return Some(job);
        }
        self.registry.inject.pop()
    }

    /// One pass over every other worker: those of this worker's steal group first, then the
    /// others, each part from a random place. First the oldest job of any victim's deque,
    /// then (with `tasks`) from each victim half of its ring, its mailbox, and (with `lifo`)
    /// its LIFO slot.
    ///
    /// Workers switched off by `set_active_workers` are victims too. One may still be running
    /// the closure it had when it was switched off, with jobs and tasks queued behind it that
    /// it hands on only when that closure returns; a scope waiting for one of those jobs
    /// would wait as long (forever, if the closure waits for the scope). Stealing from it
    /// costs a few empty-queue loads per switched-off worker per search, and keeps what
    /// `Registry::has_visible_jobs`/`has_visible_tasks` count (every queue) equal to what a
    /// searcher may take, which the sleep protocol's recheck relies on (R5).
    pub(super) fn steal(&self, lifo: bool, tasks: bool) -> Option<Work> {
        let order = self.victim_order();
        if let Some(found) = self.steal_job(&order) {
            return Some(found);
        }
        if tasks {
            for (victim, near) in order.iter() {
                if let Some((work, count)) = self.steal_tasks_from(victim, lifo) {
                    return Some(self.stolen(victim, near, work, count));
                }
            }
        }
        bump(&self.counters.failed_steals);
        None
    }

    /// The victims of one pass, in order: this worker's group from a random place, then the
    /// others from a random place.
    fn victim_order(&self) -> VictimOrder<'_> {
        let mut rng = self.rng.get();
        let mut start = |victims: &[usize]| {
            if victims.is_empty() {
                0
            } else {
                rng.below(victims.len() as u32) as usize
            }
        };
        let order = VictimOrder {
            near: &self.victims_near,
            near_start: start(&self.victims_near),
            far: &self.victims_far,
            far_start: start(&self.victims_far),
        };
        self.rng.set(rng);
        order
    }

    /// Takes the oldest job of the first victim that has one, paying one heavy barrier for
    /// up to [`STEAL_BATCH`] victims instead of one per victim (or per attempt): the deque's
    /// steal needs a barrier between its loads of `top` and `bottom`, and one barrier after
    /// the loads of `top` of several deques serves them all (`Stealer::steal_begin`).
    ///
    /// A steal that loses its race (to the owner's pop of its last job, or to another thief)
    /// has paid its barrier for nothing. In the asymmetric mode that barrier took microseconds
    /// (13-14 µs on this project's 2-CPU machines, 2-11 µs on a 16-CPU one), and the owner
    /// that won had finished everything above the job in that time: the deque is draining,
    /// and racing for it again at once mostly loses again (about 30% of fib's and tree_sum's
    /// steal barriers were lost races, at the tail of each run). So after a lost race we let
    /// that victim be until its oldest job has stayed put for as long as the lost barrier
    /// took: a job that survives that long is one the owner is not about to reach, and worth
    /// the barrier. Other victims, and this one's next job, are taken as before. This took
    /// fib's steal barriers per steal from 1.4 to 1.2 at 2-16 workers (BENCHMARKS.md).
    ///
    /// Most steals need no barrier at all: a deque whose `top` its owner wrote (its CAS for
    /// its last job, whenever it drains) is stolen from at once (chase_lev.rs invariant 7).
    fn steal_job(&self, order: &VictimOrder<'_>) -> Option<Work> {
        let registry = &*self.registry;
        let counters = &self.counters;
        let barrier = registry.sleep.barrier();
        let mut begun = [(0usize, false, 0isize); STEAL_BATCH];
        loop {
            let mut lost_race = false;
            let mut victims = order.iter().peekable();
            while victims.peek().is_some() {
                // The victims whose deques look non-empty and need a barrier, and their
                // `top`s. One whose owner wrote its `top` needs none (chase_lev.rs
                // invariant 7): its steal is finished at once.
                let mut n = 0;
                for (victim, near) in victims.by_ref() {
                    let Some(attempt) = registry.stealers[victim].steal_begin() else {
                        continue;
                    };
                    if !attempt.needs_barrier {
                        match self.steal_end(victim, near, attempt.top, None) {
                            Ok(work) => return Some(work),
                            Err(lost) => lost_race |= lost,
                        }
                        continue;
                    }
                    if !self.may_race(victim, attempt.top) {
                        continue;
                    }
                    begun[n] = (victim, near, attempt.top);
                    n += 1;
                    if n == STEAL_BATCH {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
                // The deques and the sleep coordinator share the runtime's mode.
                debug_assert_eq!(registry.stealers[begun[0].0].barrier(), barrier);
                // The barrier's time and end, for a race it loses (`lost`).
                let paid = if barrier.is_asymmetric() {
                    let before = registry.uptime_ns();
                    barrier.heavy();
                    bump(&counters.steal_heavy_barriers);
                    let after = registry.uptime_ns();
                    (after.saturating_sub(before), after)
                } else {
                    barrier.heavy();
                    (0, 0)
                };
                for &(victim, near, top) in &begun[..n] {
                    match self.steal_end(victim, near, top, Some(paid)) {
                        Ok(work) => return Some(work),
                        Err(lost) => lost_race |= lost,
                    }
                }
            }
            if !lost_race {
                return None;
            }
            // Another thief (or the owner) took a job we aimed at: the deque may hold more.
        }
    }

    /// Finishes a steal from `victim`'s deque begun at `top`, after the heavy barrier
    /// `paid` (its time and end, `None` if the steal needed none). Returns the job, or
    /// whether the race for it was lost (the deque may hold more).
    fn steal_end(
        &self,
        victim: usize,
        near: bool,
        top: isize,
        paid: Option<(u64, u64)>,
    ) -> Result<Work, bool> {
        let counters = &self.counters;
        match self.registry.stealers[victim].steal_end(top) {
            Steal::Success(ptr) => {
                bump(&counters.steal_attempts);
                bump(&counters.jobs_stolen);
                self.lost_races[victim].set(None);
                // SAFETY: only `JobRef::as_ptr` values are pushed.
                let job = unsafe { JobRef::from_ptr(ptr) };
                Ok(self.stolen(victim, near, Work::Job(job), 1))
            }
            Steal::Empty => {
                if let Some(paid) = paid {
                    self.lost(victim, top, paid);
                }
                Err(false)
            }
            Steal::Retry => {
                bump(&counters.steal_attempts);
                if let Some(paid) = paid {
                    self.lost(victim, top, paid);
                }
                Err(true)
            }
        }
    }

    /// Whether to pay a heavy barrier for the job at `top` of `victim`'s deque: always,
    /// unless we lost a race there and its oldest job has not yet stayed put as long as that
    /// race's barrier took (`steal_job`).
    fn may_race(&self, victim: usize, top: isize) -> bool {
        let slot = &self.lost_races[victim];
        let Some(lost) = slot.get() else {
            return true;
        };
        let now = self.registry.uptime_ns();
        if lost.top != top {
            // A new oldest job: it must stay put from now on.
            slot.set(Some(LostRace {
                top,
                since_ns: now,
                ..lost
            }));
            return false;
        }
        now.saturating_sub(lost.since_ns) >= lost.wait_ns
    }

    /// Records a lost race for the job at `top` of `victim`'s deque, whose barrier took
    /// `paid.0` ns and ended at `paid.1` (0 in the symmetric mode, which has no barrier to
    /// save).
    fn lost(&self, victim: usize, top: isize, (paid_ns, paid_at): (u64, u64)) {
        // Not under the checkers: their schedules must not depend on the real clock.
        if paid_ns > 0 && cfg!(not(any(loom, shuttle))) {
            self.lost_races[victim].set(Some(LostRace {
                top,
                since_ns: paid_at,
                wait_ns: paid_ns,
            }));
        }
    }

    /// Counts and traces a successful steal from `victim`; returns the work.
    fn stolen(&self, victim: usize, near: bool, work: Work, count: u64) -> Work {
        let counters = &self.counters;
        bump(if near {
            &counters.steals_in_group
        } else {
            &counters.steals_across_groups
        });
        if let Some(trace) = self.tracer() {
            let kind = match work {
                Work::Job(_) => Kind::StealJobs,
                Work::Task(_) => Kind::StealTasks,
            };
            trace.record(
                self.registry.uptime_ns(),
                kind,
                (victim as u64) << 32 | count,
            );
        }
        work
    }

    /// Tries to take tasks from one victim: half its ring, else its mailbox, else (with
    /// `lifo`) its LIFO slot. Returns the first task and how many moved.
    fn steal_tasks_from(&self, victim: usize, lifo: bool) -> Option<(Work, u64)> {
        let registry = &*self.registry;
        let counters = &self.counters;
        let slots = &registry.task_slots[victim];
        if !slots.ring.is_empty() {
            let before = self.ring.len();
            if let Some(ptr) = slots.ring.steal_into(&self.ring) {
                let moved = self.ring.len().saturating_sub(before) as u64 + 1;
                if moved > 1 {
                    // The rest of the half is in this ring now, and may be newer than the
                    // inject queue's tasks (`TaskState::holds_local`).
                    self.tasks.holds_local.set(true);
                }
                bump(&counters.steal_operations);
                add(&counters.tasks_stolen, moved);
                // SAFETY: rings hold Notified pointers.
                return Some((Work::Task(unsafe { Task::from_header(ptr) }), moved));
            }
        }
        if let Some(ptr) = slots.mailbox.pop() {
            bump(&counters.steal_operations);
            bump(&counters.tasks_stolen);
            // SAFETY: mailboxes hold Notified pointers.
            return Some((Work::Task(unsafe { Task::from_header(ptr) }), 1));
        }
        if lifo && !slots.lifo.is_empty() {
            // Taken only from an owner stuck in one poll (tokio#4941).
            if !self.lifo_stranded(victim) {
                return None;
            }
            if let Some(ptr) = slots.lifo.take() {
                bump(&counters.steal_operations);
                bump(&counters.tasks_stolen);
                bump(&counters.lifo_steals);
                // SAFETY: LIFO slots hold Notified pointers.
                return Some((Work::Task(unsafe { Task::from_header(ptr) }), 1));
            }
        }
        None
    }
}

/// What this idle stretch's looks at the other workers' LIFO slots found
/// (`WorkerThread::lifo_stranded`; `IdleLoop::spin` resets it at the stretch's start and
/// reads it when the stretch reaches its limit).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LifoLooks {
    /// Some look of this stretch found an occupied slot.
    pub(super) looked: bool,
    /// A look found an owner's poll count moved since an earlier look of this stretch.
    pub(super) progress: bool,
    /// The last look found a slot whose owner has begun no poll since an earlier look, but
    /// for less than [`LIFO_STRANDED_NS`].
    pub(super) pending: bool,
}

/// How long a victim must have begun no poll, with its LIFO slot occupied, before a thief
/// takes the slot's task (`WorkerThread::lifo_stranded`). A poll that runs longer than this
/// after filling the slot holds its task up by more than a thief's wake-up would; one that
/// runs shorter, or an owner that was off its CPU for less, is waited for. Under the
/// checkers, whose clocks do not run (loom) or must not matter (shuttle), the count alone
/// decides: it must be unchanged since the previous look.
pub(super) const LIFO_STRANDED_NS: u64 = if cfg!(any(loom, shuttle)) { 0 } else { 50_000 };

impl WorkerThread {
    /// Whether the task in `victim`'s LIFO slot, which the caller has just seen occupied, is
    /// stranded behind a long poll: the victim's poll count (`tasks_polled`, bumped before
    /// every poll) has not moved for [`LIFO_STRANDED_NS`] since this worker first saw it.
    /// The victim fills its slot only inside a poll, so an unchanged count means the poll
    /// that filled it still runs; a count that moved means the victim gets through its
    /// polls and will take the task itself: a chain of spawns, each handed on through the
    /// slot, stays on its worker instead of being pulled to the thief's CPU at every look.
    fn lifo_stranded(&self, victim: usize) -> bool {
        let registry = &*self.registry;
        // Relaxed: a hint; the victim writes it with plain stores.
        let polled = registry.counters[victim].tasks_polled.load(Relaxed);
        let (seen, since) = self.lifo_seen[victim].get();
        let mut looks = self.lifo_looks.get();
        if seen != polled {
            let now = if LIFO_STRANDED_NS == 0 {
                0
            } else {
                registry.uptime_ns()
            };
            self.lifo_seen[victim].set((polled, now));
            // A count that moved since an earlier look of this stretch: an owner getting
            // through its polls (a chain of spawns).
            looks.progress |= looks.looked;
            looks.looked = true;
            self.lifo_looks.set(looks);
            return false;
        }
        // Under the checkers the bound is 0 and the first test decides; the second, always
        // true there, is what clippy's lint sees in that build.
        #[allow(clippy::absurd_extreme_comparisons)]
        if LIFO_STRANDED_NS == 0 || registry.uptime_ns().saturating_sub(since) >= LIFO_STRANDED_NS {
            return true;
        }
        looks.looked = true;
        looks.pending = true;
        self.lifo_looks.set(looks);
        false
    }

    /// One look of a LIFO watcher at every other worker's LIFO slot: whether one holds a
    /// task stranded behind its owner's poll (`lifo_stranded`). It remembers each owner's
    /// poll count in `lifo_seen`, as a thief's look does (`steal_tasks_from`), so a thief's
    /// next look after the watch takes a stranded task at once.
    pub(super) fn lifo_task_stranded(&self) -> bool {
        self.registry
            .task_slots
            .iter()
            .enumerate()
            // Relaxed: hints, as in `steal_tasks_from`; the watcher's recheck when it stops
            // watching is what no publication can slip past (R7).
            .filter(|(victim, slots)| *victim != self.index && !slots.lifo.is_empty())
            .any(|(victim, _)| self.lifo_stranded(victim))
    }
}

/// A race for a victim's oldest job that this worker lost, and how long the victim's oldest
/// job must stay put before it races there again (`WorkerThread::steal_job`).
#[derive(Clone, Copy, Debug)]
pub(super) struct LostRace {
    /// The `top` of the deque's oldest job when we last looked.
    top: isize,
    /// When we first saw that job there (`Registry::uptime_ns`).
    since_ns: u64,
    /// How long the barrier of the lost race took.
    wait_ns: u64,
}

/// Victims whose deques one heavy barrier serves (`steal_job`). A pass over more workers
/// than this pays one barrier per this many non-empty deques.
const STEAL_BATCH: usize = 32;

/// The order of one pass over the victims (`WorkerThread::victim_order`).
struct VictimOrder<'a> {
    near: &'a [usize],
    near_start: usize,
    far: &'a [usize],
    far_start: usize,
}

impl VictimOrder<'_> {
    /// Each victim once, with whether it is in this worker's steal group.
    fn iter(&self) -> impl Iterator<Item = (usize, bool)> + '_ {
        fn rotate(victims: &[usize], start: usize) -> impl Iterator<Item = usize> + '_ {
            (0..victims.len()).map(move |offset| victims[(start + offset) % victims.len()])
        }
        rotate(self.near, self.near_start)
            .map(|victim| (victim, true))
            .chain(rotate(self.far, self.far_start).map(|victim| (victim, false)))
    }
}
