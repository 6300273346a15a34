//! Finding work: the worker's own queues, then stealing from the others (find-work steps 1,
//! 4 and 5 of the module docs of `worker`).

use crate::join::job::JobRef;
use crate::queue::chase_lev::Steal;
use crate::runtime::registry::Task;
use crate::stats::trace::Kind;
use crate::stats::{add, bump};

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

    /// The find-work order inside `join`: jobs only (see `wait_until`).
    pub(super) fn find_job(&self) -> Option<JobRef> {
        if let Some(job) = self.pop() {
            return Some(job);
        }
        if let Some(Work::Job(job)) = self.steal(false, false) {
            return Some(job);
        }
        self.registry.inject.pop()
    }

    /// One pass over every other worker: those of this worker's steal group first, then the
    /// others, each part from a random place. From each victim: its deque's oldest job, then
    /// (with `tasks`) half of its ring, its mailbox, and (with `lifo`) its LIFO slot.
    ///
    /// Workers switched off by `set_active_workers` are victims too. One may still be running
    /// the closure it had when it was switched off, with jobs and tasks queued behind it that
    /// it hands on only when that closure returns; a scope waiting for one of those jobs
    /// would wait as long (forever, if the closure waits for the scope). Stealing from it
    /// costs a few empty-queue loads per switched-off worker per search, and keeps what
    /// `Registry::has_visible_jobs`/`has_visible_tasks` count (every queue) equal to what a
    /// searcher may take, which the sleep protocol's recheck relies on (R5).
    pub(super) fn steal(&self, lifo: bool, tasks: bool) -> Option<Work> {
        for (victims, near) in [(&*self.victims_near, true), (&*self.victims_far, false)] {
            if victims.is_empty() {
                continue;
            }
            let mut rng = self.rng.get();
            let start = rng.below(victims.len() as u32) as usize;
            self.rng.set(rng);
            for offset in 0..victims.len() {
                let victim = victims[(start + offset) % victims.len()];
                if let Some((work, count)) = self.steal_from(victim, lifo, tasks) {
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
                    return Some(work);
                }
            }
        }
        bump(&self.counters.failed_steals);
        None
    }

    /// Tries to take work from one victim; returns it and how many items moved.
    pub(super) fn steal_from(&self, victim: usize, lifo: bool, tasks: bool) -> Option<(Work, u64)> {
        let registry = &*self.registry;
        let counters = &self.counters;
        loop {
            match registry.stealers[victim].steal() {
                Steal::Success(ptr) => {
                    bump(&counters.steal_attempts);
                    bump(&counters.jobs_stolen);
                    // SAFETY: only `JobRef::as_ptr` values are pushed.
                    return Some((Work::Job(unsafe { JobRef::from_ptr(ptr) }), 1));
                }
                Steal::Empty => break,
                Steal::Retry => bump(&counters.steal_attempts),
            }
        }
        if !tasks {
            return None;
        }
        let slots = &registry.task_slots[victim];
        if !slots.ring.is_empty() {
            let before = self.ring.len();
            if let Some(ptr) = slots.ring.steal_into(&self.ring) {
                let moved = self.ring.len().saturating_sub(before) as u64 + 1;
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
        if lifo {
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
