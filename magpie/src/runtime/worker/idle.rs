//! A worker without work: spin, yield, then park through the sleep protocol, and drive the
//! timers while parked (find-work step 6 of the module docs of `worker`).

use crate::runtime::registry::VisibleTasks;
use crate::sleep::{Wake, WATCH_FIRST, WATCH_INTERVAL};
#[cfg(not(loom))]
use crate::stats::add;
use crate::stats::bump;
use crate::stats::trace::Kind;
use crate::sync::thread::{self};

use super::WorkerThread;

/// How many looks a LIFO watcher makes at most before it stops watching and parks on
/// (`IdleLoop::watch`): as many as it takes in a real build; under shuttle, whose scenarios
/// must end, two. (Loom's runtime models run without the watch, which has a model of its
/// own in `sleep/loom_sleep.rs`.)
const WATCH_LOOKS: u32 = if cfg!(shuttle) { 2 } else { u32::MAX };

/// Whether a worker about to park, while another worker is unparked, becomes the LIFO
/// watcher (R7 in `sleep/README.md`), given what its recheck sees now and whether a look of
/// its idle stretch found a LIFO slot occupied (`LifoLooks::looked`).
///
/// Only where slots are being filled: a pool whose tasks are woken by I/O or from outside
/// fills none, and its parks pay nothing for the watch (an echo server's parks as watchers
/// cost it a fifth of its requests a second on 2 vCPUs). A slot occupied now says so; so
/// does one that a look of the stretch found occupied and that is empty now, with nothing
/// else queued: a chain's slot is empty between its owner's take and the next fill, most of
/// the time, and a worker that parked without watching there was woken by the next fill,
/// searched again and parked again, paying a heavy barrier while the chain ran (a 1,000-spawn
/// chain on 2 workers: 1.5 parks of the second worker per chain instead of 1.0, and 20–35 µs
/// more before the thread waiting for the chain got its answer). Work queued elsewhere is
/// R5's to wake for, so its worker does not watch.
fn parks_as_watcher(visible: VisibleTasks, stretch_saw_a_filled_slot: bool) -> bool {
    match visible {
        VisibleTasks::LifoOnly => true,
        VisibleTasks::None => stretch_saw_a_filled_slot,
        VisibleTasks::Queued => false,
    }
}

/// Rounds of unsuccessful searching spent spinning before yielding, and before parking.
/// Spinning briefly catches the next job of a fork-join computation without a futex round
/// trip (the Blitz seed uses 64 spins, 128 yields); we search every victim once per round,
/// so rounds are longer than the seed's single attempts and we use fewer.
#[cfg(not(any(loom, shuttle)))]
const SPIN_ROUNDS: u32 = 16;
#[cfg(not(any(loom, shuttle)))]
const YIELD_ROUNDS: u32 = 32;
// Under shuttle every spin and yield is a scheduling point of the checker: a few of each
// exercise the spin → yield → park progression without drowning the schedule in them.
#[cfg(shuttle)]
const SPIN_ROUNDS: u32 = 2;
#[cfg(shuttle)]
const YIELD_ROUNDS: u32 = 2;
// Under loom every round is dozens of explored atomic operations: a searcher looks once,
// then parks (the rounds only repeat that look).
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 0;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 0;
/// A yield that kept us off the CPU this long means another runnable thread shares it: the
/// rest of the yield rounds are skipped. An uncontended `sched_yield` returns in about a
/// microsecond; a contended one in a scheduler time slice (milliseconds). Before this
/// check, a task spinning on the CPU of an idle worker turned that worker's 32 yields into
/// ~48 ms during which it neither ran the tasks woken meanwhile nor waited in the driver
/// (BENCHMARKS.md, "blocked worker").
#[cfg(not(any(loom, shuttle)))]
const CONTENDED_YIELD: std::time::Duration = std::time::Duration::from_micros(200);
// The checkers' schedules must not depend on the real clock (shuttle replays a failing
// schedule from its seed), and loom has no yield rounds at all.
#[cfg(any(loom, shuttle))]
const CONTENDED_YIELD: std::time::Duration = std::time::Duration::MAX;

/// From this search round on, a thief also takes the task in a victim's LIFO slot (see
/// "the stranded LIFO task" in `schedule_local`), if the victim has begun no poll since the
/// thief's previous look found the slot occupied (`search.rs`, `steal_tasks_from`). Earlier
/// rounds leave it to its owner, which runs it next unless it is stuck in a long poll. That
/// previous look may be in an earlier stretch: the thief's memory of each victim's count
/// outlives its parks, so the worker that wakes itself on a stranded task in its recheck
/// takes it at its next look.
///
/// It must not exceed the rounds a searcher makes before it parks (`SPIN_ROUNDS +
/// YIELD_ROUNDS`), or no searcher ever takes a stranded LIFO task: the worker that finds it
/// in its recheck before parking wakes itself, searches again without reaching this round,
/// and so on for as long as the owner's poll lasts. The loom model
/// `loom_runtime_last_searcher_vs_notification` found exactly that when loom's build cut the
/// rounds; taking the smaller keeps the two constants tied.
pub(super) const LIFO_STEAL_ROUND: u32 = if SPIN_ROUNDS + YIELD_ROUNDS < 4 {
    SPIN_ROUNDS + YIELD_ROUNDS
} else {
    4
};

/// The fewest rounds an idle stretch of the main loop searches before it parks, once the
/// stretches before it parked without finding work (see [`IdleBudget`]). Not below
/// [`LIFO_STEAL_ROUND`], so that a searcher still reaches the round that rescues a stranded
/// LIFO task.
const MIN_IDLE_ROUNDS: u32 = if SPIN_ROUNDS + YIELD_ROUNDS < 8 {
    SPIN_ROUNDS + YIELD_ROUNDS
} else {
    8
};
const _: () = assert!(MIN_IDLE_ROUNDS >= LIFO_STEAL_ROUND);

/// How many rounds the idle stretches of a worker's main loop search before they park:
/// all of them ([`SPIN_ROUNDS`] spinning, then [`YIELD_ROUNDS`] yielding) while searching
/// pays, fewer while it does not.
///
/// Every stretch that parks halves the rounds of the next (the yield rounds go first), down
/// to [`MIN_IDLE_ROUNDS`]; a stretch that finds work after searching at least once, or a
/// park that is over sooner than a whole stretch would have lasted (so that whole stretch
/// would have found the work), brings back all of them. A pool busy with fork-join work or a
/// steady flow of tasks so searches as long as it always did, and the thief of a `join` is
/// found spinning; a pool that serves a request now and then spends far less CPU between
/// them. Waits inside `join` (on a latch) always use every round: they are the critical path
/// of the computation that waits.
///
/// Why: on the 2-vCPU test machine a request into an idle pool (the probe of
/// `lone_request`, one request per millisecond, process CPU) cost 73–85 µs of CPU, of which
/// the worker's 48 rounds before it parked again were 30–40, against tokio's 32–47 in all
/// (tokio parks after one search); with this budget 36–39 µs, at the same 7–8 µs latency
/// (tokio's 14). `magpie-bench async --only lone_request_cpu` measures it against the peers.
#[derive(Debug)]
pub(super) struct IdleBudget {
    /// Rounds before parking, `MIN_IDLE_ROUNDS..=FULL_IDLE_ROUNDS`.
    limit: u32,
    /// How long the last stretch that made every round lasted, in ns (0: none measured
    /// yet), and when the current one began if it is such a stretch.
    full_stretch_ns: u64,
    stretch_start_ns: Option<u64>,
}

/// Every round: the spinning ones, then the yielding ones.
const FULL_IDLE_ROUNDS: u32 = SPIN_ROUNDS + YIELD_ROUNDS;

impl IdleBudget {
    pub(super) const fn new() -> IdleBudget {
        IdleBudget {
            limit: FULL_IDLE_ROUNDS,
            full_stretch_ns: 0,
            stretch_start_ns: None,
        }
    }

    /// Rounds before parking.
    pub(super) fn limit(&self) -> u32 {
        self.limit
    }

    /// Of those, the spinning ones (the rest yield).
    pub(super) fn spin_rounds(&self) -> u32 {
        SPIN_ROUNDS.min(self.limit)
    }

    /// A stretch begins, at `now_ns()`, if it is to make every round (only those are
    /// timed, one clock read each).
    pub(super) fn begin_stretch(&mut self, now_ns: impl FnOnce() -> u64) {
        self.stretch_start_ns = (self.limit == FULL_IDLE_ROUNDS).then(now_ns);
    }

    /// The stretch cannot tell how long a whole one lasts: a yield was kept off the CPU.
    pub(super) fn untimed(&mut self) {
        self.stretch_start_ns = None;
    }

    /// Work found after `rounds` unsuccessful rounds of the current stretch.
    #[inline]
    pub(super) fn found(&mut self, rounds: u32) {
        if rounds != 0 {
            self.limit = FULL_IDLE_ROUNDS;
        }
    }

    /// The stretch found nothing and parks at `now_ns`.
    pub(super) fn parking(&mut self, now_ns: u64) {
        if let Some(start) = self.stretch_start_ns.take() {
            self.full_stretch_ns = now_ns.saturating_sub(start);
        }
        self.limit = (self.limit / 2).max(MIN_IDLE_ROUNDS);
    }

    /// Back from a park that lasted `parked_ns`.
    pub(super) fn woken(&mut self, parked_ns: u64) {
        if parked_ns < self.full_stretch_ns {
            self.limit = FULL_IDLE_ROUNDS;
        }
    }
}

/// The spin → yield → park progression of one idle stretch, and the searching bookkeeping
/// of the sleep protocol (R3, R4).
pub(super) struct IdleLoop<'w> {
    pub(super) worker: &'w WorkerThread,
    pub(super) rounds: u32,
    pub(super) searching: bool,
    /// Waiting inside `join`: never counts as a searcher and never drives the timers (R6).
    pub(super) join_wait: bool,
    /// Whether this stretch began with a wakeup, and whether work was found since (for the
    /// `noops` count).
    pub(super) woken: bool,
    pub(super) worked: bool,
    /// This worker held the driver role in its last park and gave it up on waking: if it
    /// now runs work, a parked worker must take the role over (`hand_off_driver`).
    pub(super) left_driver: bool,
    /// How many rounds to search before parking (always all of them inside `join`).
    budget: IdleBudget,
}

impl<'w> IdleLoop<'w> {
    pub(super) fn new(worker: &'w WorkerThread, join_wait: bool) -> IdleLoop<'w> {
        IdleLoop {
            worker,
            rounds: 0,
            searching: false,
            join_wait,
            woken: false,
            worked: false,
            left_driver: false,
            budget: IdleBudget::new(),
        }
    }

    /// Work was found: stop searching, and if we were the last searcher, wake another
    /// worker if work is left for it (R3).
    ///
    /// Called before every piece of work a worker runs; inline, so that the common case, a
    /// busy worker that neither searched nor held the driver, is two stores and a test.
    #[inline]
    pub(super) fn found_work(&mut self) {
        self.budget.found(self.rounds);
        self.rounds = 0;
        self.worked = true;
        if self.left_driver | self.searching | self.worker.owes_driver.get() {
            self.found_work_after_idling();
        }
    }

    /// The rest of [`IdleLoop::found_work`], for a worker that searched or held the driver.
    #[cold]
    #[inline(never)]
    fn found_work_after_idling(&mut self) {
        // A timer filed here with the role free, by the poll before this work (D5a), owes
        // the same hand-off.
        let owed = self.worker.owes_driver.replace(false);
        if self.left_driver | owed {
            // About to run work, so no longer a candidate for the role: no busy worker holds
            // the driver (sleep/README.md, "The driver role").
            self.left_driver = false;
            if self.worker.registry.hand_off_driver() {
                bump(&self.worker.counters.driver_handoffs);
            }
        }
        if self.searching {
            self.searching = false;
            let registry = &*self.worker.registry;
            if registry.sleep.stop_searching() {
                registry.sleep.last_searcher_found_work(
                    || registry.has_visible_jobs(),
                    || registry.has_visible_tasks(),
                );
            }
        }
    }

    /// One unsuccessful round: spin or yield. Returns false when it is time to park.
    pub(super) fn spin(&mut self) -> bool {
        if !self.searching && !self.join_wait {
            // R4: join the searchers if fewer than about half the workers search.
            self.searching = self.worker.registry.sleep.try_start_searching();
        }
        if self.rounds == 0 && !self.join_wait {
            let registry = &*self.worker.registry;
            self.budget.begin_stretch(|| registry.uptime_ns());
            self.worker.lifo_looks.take();
        }
        self.rounds += 1;
        if self.rounds <= self.budget.spin_rounds() {
            for _ in 0..(1 << self.rounds.min(6)) {
                thread::spin_loop();
            }
            true
        } else if self.rounds <= self.budget.limit() || self.pending_lifo_task() {
            let before = crate::sync::time::now();
            // Not under shuttle: with these turns in, shuttle found no schedule in 120,000
            // where `shuttle_driver_hand_off_to_parked_worker` needs the hand-off (its
            // negative control found one at once without them); we did not find out why, and
            // keep the scenarios able to check D4. The turn itself is the maintenance turn,
            // which `shuttle_io_readiness_into_busy_pool` checks.
            if !self.join_wait && !cfg!(shuttle) {
                // Until we park, nobody may be waiting in the driver: the role is free
                // while every other worker is busy or parked on its futex. Turn the drivers
                // between yields, as a busy worker does at maintenance (sleep/README.md, D3').
                // We look at our ring again next round: the first task it wakes needs no
                // notification (`wake_quietly`).
                self.worker
                    .wake_quietly(|| self.worker.poll_drivers(before));
            }
            thread::yield_now();
            if crate::sync::time::now().duration_since(before) >= CONTENDED_YIELD {
                // Another thread had our CPU for a time slice: yielding again hands it
                // another, while parking lets the scheduler run us as soon as work (or
                // readiness, if we park in the driver) arrives. Search once more, then park.
                self.rounds = self.budget.limit();
                self.budget.untimed();
            }
            true
        } else {
            false
        }
    }

    /// Whether this stretch should search on past its limit: its last round saw a LIFO task
    /// that may be stranded behind its owner's poll (`LifoLooks::pending`), and no owner it
    /// looked at got through a poll during the stretch (`LifoLooks::progress`: a chain of
    /// spawns, whose owner is merely off its CPU for a moment, is left to the watcher). It
    /// takes that task when it has waited `LIFO_STRANDED_NS` (at most that long of yielding
    /// rounds), at once instead of at the first look of a LIFO watcher (R7), which would
    /// come a wait and a heavy barrier later (`magpie-bench stall`, LIFO row: 0.08 ms at the median instead of
    /// 1.2, the watcher's wait in `epoll_wait` counting in milliseconds). Inside `join`
    /// tasks are not ours to take.
    fn pending_lifo_task(&self) -> bool {
        let mut looks = self.worker.lifo_looks.get();
        let wants_more = looks.pending && !looks.progress;
        looks.pending = false;
        self.worker.lifo_looks.set(looks);
        wants_more && !self.join_wait
    }

    /// Parks through the sleep protocol (R2, R5) until woken, then resumes as the wake says.
    /// The first worker to park while nobody drives the timers drives them: it parks no
    /// longer than the next deadline and fires what is due when it wakes. Any other park
    /// (and the driver's, with no timer filed) has no timeout, unless the debugging option
    /// `Builder::park_safety_net` set one: the protocol loses no wakeup (sleep/README.md),
    /// and a periodic wake would cost every idle worker CPU for nothing.
    pub(super) fn park(&mut self) {
        let worker = self.worker;
        let registry = &*worker.registry;
        let counters = &worker.counters;
        // While another worker is awake and fills LIFO slots, a worker outside `join` parks
        // as the LIFO watcher if there is none yet (R7; `watch`): the fills that follow wake
        // nobody. It takes the role before it registers, so that no fill can claim it for a
        // slot's task in between: its recheck below leaves tasks seen only in LIFO slots to
        // their owners (each slot's task is its owner's next, filled by a poll that still
        // runs or has just returned), and its watch looks at them. `parks_as_watcher` says
        // when the slots are being filled.
        let watching = !cfg!(any(loom, magpie_loom_broken))
            && !self.join_wait
            && registry.sleep.load().unparked() > 1
            && parks_as_watcher(registry.visible_tasks(), worker.lifo_looks.get().looked)
            && registry.sleep.try_watch(worker.index);
        let _ = registry.sleep.register_parked(worker.index, self.searching);
        self.searching = false;
        // After `register_parked`, not before: a worker giving the driver role up without
        // parking (one switched off, see `retire`) wakes a parked worker to take it over, and
        // either it finds our bit in the idle state or we find the role free here (both
        // sides are SeqCst read-modify-writes or behind SeqCst fences).
        let driving = !self.join_wait && registry.timers.try_drive(worker.index);
        // A hand-off owed for a timer filed with the role free (D5a): settled by taking the
        // role; inside `join`, where we cannot, a free worker takes it. (Outside `join` a
        // failed `try_drive` means somebody holds the role: `hand_off_driver` then does
        // nothing.)
        if worker.owes_driver.replace(false) && !driving {
            let _ = registry.hand_off_driver();
        }
        // R5: recheck every queue after the heavy barrier in `register_parked`. If work is
        // visible, make sure someone who can run it is woken (possibly us: our bit is set).
        // Tasks wake only workers outside `join` (R6). With `--cfg magpie_loom_broken` the
        // task recheck is gone: a negative control that the runtime-level loom models must
        // catch (the lost wakeup of tokio#4383).
        let jobs = registry.has_visible_jobs();
        if jobs {
            registry.sleep.wake_any_cold();
        }
        if !cfg!(magpie_loom_broken) {
            match registry.visible_tasks() {
                VisibleTasks::None => {}
                VisibleTasks::LifoOnly if watching => {}
                VisibleTasks::LifoOnly | VisibleTasks::Queued => {
                    registry.sleep.wake_free_cold();
                }
            }
        }
        // Inside `join` a worker does not take the role for its park (the latch wakes it,
        // and the tasks readiness would wake could not run here before the `join` returns).
        // But it may be the only one left to turn the drivers (the others blocked, or busy
        // in one long poll, or the holder gone to run work): it parks no longer than the
        // next deadline (and, while nobody holds the role, than sources need), and turns
        // them when it wakes (D5; `Registry::wake_to_drive` wakes it for an earlier timer
        // filed meanwhile).
        let driving_timeout = if self.join_wait {
            registry.driving_timeout()
        } else {
            None
        };
        let timer = if driving {
            registry.timers.park_timeout()
        } else {
            driving_timeout
        };
        let timeout = match (timer, registry.park_safety_net) {
            (Some(timer), Some(net)) => Some(timer.min(net)),
            (timer, net) => timer.or(net),
        };
        worker.flush_counters();
        bump(&counters.parks);
        if self.woken && !self.worked {
            // Woken last time, and found nothing to do since.
            bump(&counters.noops);
        }
        // Parks are rare next to tasks and jobs: two clock reads each are affordable.
        let parked_at = counters.begin_park(|| registry.uptime_ns());
        if !self.join_wait {
            self.budget.parking(parked_at);
        }
        // A park in the driver is its own span kind: the timeline shows when a worker sat in
        // `epoll_wait`.
        let park_kind = if driving && cfg!(not(loom)) {
            Kind::DriverPark
        } else {
            Kind::Park
        };
        worker.trace_event(park_kind, 0);
        let (wake, io_wakers) = if watching {
            self.watch(driving, timeout)
        } else if driving {
            self.park_in_driver(timeout)
        } else {
            (
                registry.sleep.park(worker.index, timeout),
                crate::io::WakeList::default(),
            )
        };
        let now = counters.end_park(|| registry.uptime_ns());
        self.budget.woken(now.saturating_sub(parked_at));
        worker.tasks.clock_ns.set(now);
        worker.trace_event(Kind::Unpark, 0);
        bump(&counters.unparks);
        self.woken = true;
        self.worked = false;
        if driving {
            // The readiness the turn found wakes its waiters now, back from the park (user
            // code must not run while we count as parked: `io::WakeList`), and so do the
            // timers due. Their tasks land in our ring, where we look next: published (R1)
            // only if there is more than one (`wake_quietly`).
            worker.wake_quietly(|| {
                io_wakers.wake_all();
                registry.timers.fire_due();
            });
            registry.timers.release();
            self.left_driver = true;
        } else if driving_timeout.is_some() {
            // A turn only if a deadline passed, or sources wait and the role is free
            // (`poll_drivers` checks both): a latch's wake while a holder is in place, the
            // common case, costs a clock read (and, with sources registered, a failed
            // `try_drive`), not an `epoll_wait`.
            worker.poll_drivers(crate::sync::time::now());
        }
        match wake {
            Wake::Searching if self.join_wait => self.shed_searching(),
            Wake::Searching => self.searching = true,
            Wake::Plain => {}
        }
        self.rounds = 0;
        // Time parked is not task time.
        worker.tasks.batch_start.set(None);
    }

    /// Parks as the LIFO watcher (R7 in `sleep/README.md`), registered as parked: waits in
    /// growing steps ([`WATCH_FIRST`], doubling up to [`WATCH_INTERVAL`]; in the driver if
    /// it holds the role), and after each wait looks at the other workers' LIFO slots. It
    /// stops watching when a token arrives (a notifier claimed it, a latch, shutdown), the
    /// driver found readiness, the timeout passed, every other worker has parked, or one
    /// slot's task is stranded (`lifo_stranded`: its owner has begun no poll for a while).
    /// Then it clears the watcher word, runs the heavy barrier and rechecks every queue; if
    /// anything is visible it claims its own wakeup as a searcher (and takes a stranded task
    /// at its first look: it remembers the owner's poll count). If the others parked and
    /// nothing is visible, it parks on as any worker does.
    ///
    /// Why: a task that wakes or spawns one other task per poll (a chain of spawns, a
    /// ping-pong over a channel) fills its worker's empty LIFO slot at every poll. Each fill
    /// used to notify (R1): a parked worker woke, searched, found only the slot (its owner
    /// runs it next), parked, and was woken by the next fill, or by its own recheck, which
    /// saw the slot: a second CPU kept busy, a heavy barrier at each of its parks (a
    /// `membarrier` that interrupts the chain's CPU), and on a 2-vCPU machine a CPU taken
    /// from the thread that waits for the chain. Now one worker sleeps through it, looking
    /// about once a millisecond.
    fn watch(
        &mut self,
        driving: bool,
        timeout: Option<std::time::Duration>,
    ) -> (Wake, crate::io::WakeList) {
        let worker = self.worker;
        let registry = &*worker.registry;
        let sleep = &registry.sleep;
        let deadline = crate::sync::time::deadline_after(timeout);
        let mut wakers = crate::io::WakeList::default();
        let mut step = WATCH_FIRST;
        // Whether to park on after the watch: unless it ended for a reason to run (a token,
        // readiness, the timeout, a stranded task), or, under shuttle, at its last look.
        let mut park_on = true;
        for _ in 0..WATCH_LOOKS {
            let left = deadline.map(|d| d.saturating_duration_since(crate::sync::time::now()));
            if left.is_some_and(|left| left.is_zero()) {
                park_on = false;
                break;
            }
            let wait = left.map_or(step, |left| left.min(step));
            step = (step * 2).min(WATCH_INTERVAL);
            if cfg!(shuttle) {
                // Shuttle models no time: a timed wait would wait for a token.
                thread::yield_now();
            } else if driving {
                // In `epoll_wait`, which returns at once on readiness; it counts its timeout
                // in milliseconds, so a watcher that drives looks once a millisecond.
                self.turn_while_parked(Some(wait), &mut wakers);
            } else {
                sleep.wait(worker.index, Some(wait));
            }
            if wakers.len() != 0 {
                park_on = false;
                break;
            }
            if sleep.has_token(worker.index) {
                park_on = false;
                break;
            }
            bump(&worker.counters.watch_looks);
            if !sleep.others_unparked() {
                break;
            }
            if worker.lifo_task_stranded() {
                park_on = false;
                break;
            }
        }
        if sleep.has_searching_token(worker.index) {
            // Claimed by a notifier: we search when the park settles, and park through R2
            // and R5 after, so a stranded task is found, or watched again, then.
            sleep.end_watch_claimed(worker.index);
            return (sleep.settle(worker.index), wakers);
        }
        sleep.end_watch(worker.index);
        // R5 again: a fill that left its wake to us is visible now.
        if registry.has_visible_jobs() || registry.has_visible_tasks() {
            sleep.claim_own_wakeup(worker.index);
        } else if park_on {
            let left = deadline.map(|d| d.saturating_duration_since(crate::sync::time::now()));
            if driving {
                self.turn_while_parked(left, &mut wakers);
            } else {
                sleep.wait(worker.index, left);
            }
        }
        (sleep.settle(worker.index), wakers)
    }

    /// One turn of the driver while this worker, holding the role, is registered as parked:
    /// it returns on readiness (collected into `wakers`), `timeout`, or a wake of this
    /// worker.
    #[cfg(not(loom))]
    fn turn_while_parked(
        &self,
        timeout: Option<std::time::Duration>,
        wakers: &mut crate::io::WakeList,
    ) {
        let worker = self.worker;
        let registry = &*worker.registry;
        bump(&worker.counters.driver_polls_blocking);
        let mut delivered = 0;
        registry.sleep.wait_driving(worker.index, || {
            delivered = registry.io.turn(timeout, wakers);
        });
        add(&worker.counters.io_events, delivered as u64);
    }

    /// Without an I/O driver, the holder waits on its parker.
    #[cfg(loom)]
    fn turn_while_parked(
        &self,
        timeout: Option<std::time::Duration>,
        _wakers: &mut crate::io::WakeList,
    ) {
        self.worker.registry.sleep.wait(self.worker.index, timeout);
    }

    /// Parks as the holder of the driver role: in the I/O driver's `epoll_wait`, which
    /// returns on readiness, the timeout (the next timer's deadline, if any), or a
    /// wake of this worker (`sleep/parker.rs`, "Parking in the driver"). Returns the wakers
    /// of the readiness found there, for the caller to wake once the park has settled.
    fn park_in_driver(&self, timeout: Option<std::time::Duration>) -> (Wake, crate::io::WakeList) {
        let mut wakers = crate::io::WakeList::default();
        self.turn_while_parked(timeout, &mut wakers);
        (self.worker.registry.sleep.settle(self.worker.index), wakers)
    }

    /// A worker waiting inside `join` was woken as a searcher. It never counts as one (R6),
    /// so it gives the count back at once, and if it was the last searcher, it hands any
    /// visible work on, as a searcher that parks would (R5): a publisher may have skipped
    /// waking anyone because of our count.
    pub(super) fn shed_searching(&mut self) {
        let registry = &*self.worker.registry;
        if registry.sleep.stop_searching() {
            registry.sleep.barrier().heavy();
            if registry.has_visible_jobs() {
                registry.sleep.notify_work();
            }
            if registry.has_visible_tasks() {
                registry.sleep.notify_task();
            }
        }
    }
}

#[cfg(all(test, not(loom), not(shuttle)))]
mod tests {
    use super::{parks_as_watcher, IdleBudget, FULL_IDLE_ROUNDS, MIN_IDLE_ROUNDS, SPIN_ROUNDS};
    use crate::runtime::registry::VisibleTasks;

    #[test]
    fn a_worker_watches_where_slots_are_filled_and_nothing_else_is_queued() {
        // A slot occupied at the recheck.
        assert!(parks_as_watcher(VisibleTasks::LifoOnly, false));
        assert!(parks_as_watcher(VisibleTasks::LifoOnly, true));
        // A chain's slot, empty between its owner's take and the next fill, that a look of
        // the stretch found occupied.
        assert!(parks_as_watcher(VisibleTasks::None, true));
        // An idle pool, or one fed by I/O: no slot filled.
        assert!(!parks_as_watcher(VisibleTasks::None, false));
        // Queued work is R5's to wake for.
        assert!(!parks_as_watcher(VisibleTasks::Queued, false));
        assert!(!parks_as_watcher(VisibleTasks::Queued, true));
    }

    /// Parks `n` stretches that found nothing, each timed at `stretch_ns` if it is whole.
    fn park_empty(budget: &mut IdleBudget, n: usize, stretch_ns: u64, parked_ns: u64) {
        let mut now = 1_000;
        for _ in 0..n {
            budget.begin_stretch(|| now);
            now += stretch_ns;
            budget.parking(now);
            now += parked_ns;
            budget.woken(parked_ns);
        }
    }

    #[test]
    fn stretches_that_find_nothing_halve_the_rounds_down_to_the_floor() {
        let mut budget = IdleBudget::new();
        assert_eq!(budget.limit(), FULL_IDLE_ROUNDS);
        assert_eq!(budget.spin_rounds(), SPIN_ROUNDS);
        let mut expected = FULL_IDLE_ROUNDS;
        for _ in 0..10 {
            park_empty(&mut budget, 1, 50_000, 1_000_000);
            expected = (expected / 2).max(MIN_IDLE_ROUNDS);
            assert_eq!(budget.limit(), expected);
            assert!(budget.spin_rounds() <= budget.limit());
        }
        assert_eq!(budget.limit(), MIN_IDLE_ROUNDS);
        // The yield rounds went first.
        assert_eq!(budget.spin_rounds(), SPIN_ROUNDS.min(MIN_IDLE_ROUNDS));
    }

    #[test]
    fn work_found_by_searching_brings_every_round_back() {
        let mut budget = IdleBudget::new();
        park_empty(&mut budget, 5, 50_000, 1_000_000);
        assert_eq!(budget.limit(), MIN_IDLE_ROUNDS);
        // Work found at once, without a round of searching (a busy worker, or one woken
        // for work), says nothing about searching.
        budget.found(0);
        assert_eq!(budget.limit(), MIN_IDLE_ROUNDS);
        budget.found(3);
        assert_eq!(budget.limit(), FULL_IDLE_ROUNDS);
    }

    #[test]
    fn a_park_shorter_than_a_whole_stretch_brings_every_round_back() {
        let mut budget = IdleBudget::new();
        // The first stretch makes every round and is timed: 50 µs.
        park_empty(&mut budget, 1, 50_000, 1_000_000);
        park_empty(&mut budget, 4, 10_000, 1_000_000);
        assert_eq!(budget.limit(), MIN_IDLE_ROUNDS);
        // A park of 1 ms: a whole stretch would not have caught the work either.
        budget.woken(1_000_000);
        assert_eq!(budget.limit(), MIN_IDLE_ROUNDS);
        // A park of 20 µs: a whole stretch (50 µs) would have.
        budget.woken(20_000);
        assert_eq!(budget.limit(), FULL_IDLE_ROUNDS);
    }

    #[test]
    fn a_stretch_cut_short_by_a_contended_yield_is_not_timed() {
        let mut budget = IdleBudget::new();
        budget.begin_stretch(|| 1_000);
        budget.untimed();
        // Kept off the CPU for 5 ms: not how long a whole stretch lasts.
        budget.parking(5_001_000);
        budget.woken(1_000_000);
        assert!(
            budget.limit() < FULL_IDLE_ROUNDS,
            "a 1 ms park is not short"
        );
        // Shorter stretches are not timed either: only whole ones say how long one lasts.
        let mut budget = IdleBudget::new();
        park_empty(&mut budget, 1, 40_000, 1_000_000);
        budget.begin_stretch(|| 2_000_000);
        budget.parking(2_900_000);
        budget.woken(100_000);
        assert!(
            budget.limit() < FULL_IDLE_ROUNDS,
            "100 µs is longer than a whole stretch"
        );
    }
}
