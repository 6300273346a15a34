//! Loom models of the sleep protocol (`README.md` beside this file): work published while
//! every other worker is going to sleep is always run.
//!
//! Under loom timeouts never fire (every `park` here has none), so a lost wakeup leaves every
//! thread blocked, which loom reports as a deadlock. Both barriers are `fence(SeqCst)` under
//! loom: these models check the symmetric protocol; `tests.rs` stresses the `membarrier` one.
//!
//! The queue is a count of pending jobs. The workers follow `runtime::worker::IdleLoop`
//! without its spinning: look for a job, else register as parked (R2), recheck the queue
//! (R5), park. The model `loom_without_recheck_work_is_stranded` drops R5 and must deadlock.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p magpie --lib --release loom`.
//! `LOOM_MAX_PREEMPTIONS` overrides each model's default preemption bound.

use std::mem::ManuallyDrop;

use loom::thread::{self, JoinHandle};

use super::*;
use crate::sync::{Arc, AtomicBool, AtomicUsize};
use crate::util::loom_support::model;

/// A pool: the coordinator, a queue of identical jobs, a shutdown flag, and a latch.
struct Pool {
    sleep: Sleep,
    /// Jobs queued.
    jobs: AtomicUsize,
    /// Jobs run.
    ran: AtomicUsize,
    /// Set by whoever runs the last job; the other workers then exit.
    done: AtomicBool,
    /// A latch one worker may wait on (`wait_on_latch`): `UNSET`, `SLEEPING` or `SET`.
    latch: AtomicUsize,
}

/// Runs `f` with a new pool of `workers` workers, shared through a loom `Arc`.
///
/// Every handle to the pool is a `ManuallyDrop`, dropped only on the way out of a thread that
/// did not panic. Loom reports a deadlock by panicking on the thread that blocked last; a loom
/// `Arc` dropped while that thread unwinds calls back into loom, which has no running thread
/// by then and panics again, and the double panic aborts the whole test binary instead of
/// failing the one model. A failed execution leaks its pool; a passing one frees it and lets
/// loom check the `Arc` for leaks.
fn with_pool(workers: usize, f: impl FnOnce(&Arc<Pool>)) {
    let pool = ManuallyDrop::new(Arc::new(Pool {
        sleep: Sleep::new(workers),
        jobs: AtomicUsize::new(0),
        ran: AtomicUsize::new(0),
        done: AtomicBool::new(false),
        latch: AtomicUsize::new(UNSET),
    }));
    f(&pool);
    drop(ManuallyDrop::into_inner(pool));
}

/// Runs `f` on a new loom thread with its own handle to `pool` (see [`with_pool`]).
fn spawn<R, F>(pool: &Arc<Pool>, f: F) -> JoinHandle<R>
where
    R: Send + 'static,
    F: FnOnce(&Pool) -> R + Send + 'static,
{
    let pool = ManuallyDrop::new(pool.clone());
    thread::spawn(move || {
        let result = f(&pool);
        drop(ManuallyDrop::into_inner(pool));
        result
    })
}

impl Pool {
    /// Queues a job and applies R1.
    fn publish(&self) {
        // Relaxed: like a deque push followed by `notify_work`, the barrier in
        // `notify_work` orders it before the load of `state`.
        self.jobs.fetch_add(1, Relaxed);
        self.sleep.notify_work();
    }

    fn has_jobs(&self) -> bool {
        // Relaxed, like `Stealer::is_empty` in the runtime's recheck: ordered by the heavy
        // barrier in `register_parked`.
        self.jobs.load(Relaxed) > 0
    }

    fn try_take(&self) -> bool {
        // Relaxed: a job here is only a count, with no data to publish.
        let mut n = self.jobs.load(Relaxed);
        while n > 0 {
            match self.jobs.compare_exchange(n, n - 1, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// One worker's life: run jobs until `jobs_total` have run, parking when there are none.
    /// `searching` says whether it starts counted as a searcher. With `recheck` false it skips
    /// R5, which is the bug the negative control checks for.
    fn worker(&self, index: usize, searching: bool, jobs_total: usize, recheck: bool) {
        self.worker_of(false, index, searching, jobs_total, recheck);
    }

    /// As [`Pool::worker`]; with `tasks`, the queue holds tasks and the worker follows the
    /// task flavour of the rules (R6): `notify_task` and `wake_free_cold`.
    fn worker_of(
        &self,
        tasks: bool,
        index: usize,
        mut searching: bool,
        jobs_total: usize,
        recheck: bool,
    ) {
        let notify = |sleep: &Sleep| {
            if tasks {
                sleep.notify_task()
            } else {
                sleep.notify_work()
            }
        };
        loop {
            if self.try_take() {
                // Relaxed: the final counts are read after joining the threads.
                let ran = self.ran.fetch_add(1, Relaxed) + 1;
                // R3.
                if searching {
                    searching = false;
                    if self.sleep.stop_searching() {
                        notify(&self.sleep);
                    }
                }
                if ran == jobs_total {
                    // Shut the pool down: the plain token is kept, so a worker between its
                    // check of `done` and its park still wakes.
                    // Release: pairs with the Acquire load below.
                    self.done.store(true, Release);
                    for other in 0..self.sleep.num_workers() {
                        if other != index {
                            self.sleep.wake_worker(other);
                        }
                    }
                }
                continue;
            }
            // Acquire: pairs with the Release store above.
            if self.done.load(Acquire) {
                break;
            }
            // R2.
            let _ = self.sleep.register_parked(index, searching);
            searching = false;
            // R5.
            if recheck && self.has_jobs() {
                if tasks {
                    self.sleep.wake_free_cold();
                } else {
                    self.sleep.wake_any_cold();
                }
            }
            if self.sleep.park(index, None) == Wake::Searching {
                searching = true;
            }
        }
        if searching {
            let _ = self.sleep.stop_searching();
        }
    }

    /// Queues a task and applies R1 in its task flavour (R6).
    fn publish_task(&self) {
        // Relaxed: as in `publish`.
        self.jobs.fetch_add(1, Relaxed);
        self.sleep.notify_task();
    }

    /// A worker waiting inside `join` (R6): it never runs tasks and never counts as a
    /// searcher; woken as one, it sheds the count and hands visible tasks on, as
    /// `IdleLoop::shed_searching` does. It parks until the pool is done.
    fn join_waiter(&self, index: usize) {
        self.sleep.set_join_waiting(index, true);
        // Acquire: pairs with the Release store of `done`.
        while !self.done.load(Acquire) {
            let _ = self.sleep.register_parked(index, false);
            // R5 for tasks: wake only a worker that may run them.
            if self.has_jobs() {
                self.sleep.wake_free_cold();
            }
            if self.sleep.park(index, None) == Wake::Searching && self.sleep.stop_searching() {
                self.sleep.barrier().heavy();
                if self.has_jobs() {
                    self.sleep.notify_task();
                }
            }
        }
        self.sleep.set_join_waiting(index, false);
    }

    /// Checks the end state: every job ran once, and every worker left the coordinator
    /// unparked and not searching, with no idle bit left behind.
    fn check_quiescent(&self, jobs_total: usize) {
        assert_eq!(
            self.ran.load(Relaxed),
            jobs_total,
            "a job was lost or ran twice"
        );
        assert_eq!(self.jobs.load(Relaxed), 0);
        let state = self.sleep.load();
        assert_eq!(state.unparked(), self.sleep.num_workers());
        assert_eq!(state.searching(), 0);
        assert!(!self.sleep.wake_any_cold(), "an idle bit was left set");
    }
}

#[test]
fn loom_publish_races_the_only_worker_going_to_sleep() {
    // One worker runs out of work and parks while an outside thread publishes a job: the
    // tight case, since the publisher wakes somebody only if it sees the worker parked.
    model(None, || {
        with_pool(1, |pool| {
            let publisher = spawn(pool, |pool| pool.publish());
            pool.worker(0, false, 1, true);
            publisher.join().unwrap();
            pool.check_quiescent(1);
        });
    });
}

#[test]
fn loom_publish_races_last_searcher_and_sleeper() {
    // tokio#4383: worker 0 is the last searcher and gives up at the moment a job arrives,
    // so the publisher sees a searcher and wakes nobody; worker 1 is going to sleep too.
    model(Some(3), || {
        with_pool(2, |pool| {
            assert!(pool.sleep.try_start_searching());
            let searcher = spawn(pool, |pool| pool.worker(0, true, 1, true));
            let sleeper = spawn(pool, |pool| pool.worker(1, false, 1, true));
            pool.publish();
            searcher.join().unwrap();
            sleeper.join().unwrap();
            pool.check_quiescent(1);
        });
    });
}

#[test]
fn loom_two_jobs_two_sleepers() {
    // Two publications racing two workers on their way to sleep: both jobs run, and the
    // second notification is not swallowed by the first wakeup. Bound 2: three threads that
    // all park make this the largest model (7 s at bound 2, 5 minutes at bound 3 on the
    // 2-vCPU VM). `LOOM_MAX_PREEMPTIONS` would replace the bound: `scripts/loom.sh` runs this
    // model without it, unless `--named-bound` says otherwise.
    model(Some(2), || {
        with_pool(2, |pool| {
            let first = spawn(pool, |pool| pool.worker(0, false, 2, true));
            let second = spawn(pool, |pool| pool.worker(1, false, 2, true));
            pool.publish();
            pool.publish();
            first.join().unwrap();
            second.join().unwrap();
            pool.check_quiescent(2);
        });
    });
}

#[test]
fn loom_task_published_while_a_join_waiter_and_a_free_worker_park() {
    // R6: worker 0 waits inside `join` and never runs tasks; worker 1 is free. A task
    // published while both go to sleep must wake worker 1, never strand behind worker 0.
    model(Some(2), || {
        with_pool(2, |pool| {
            let waiter = spawn(pool, |pool| pool.join_waiter(0));
            let free = spawn(pool, |pool| pool.worker_of(true, 1, false, 1, true));
            pool.publish_task();
            free.join().unwrap();
            waiter.join().unwrap();
            pool.check_quiescent(1);
        });
    });
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_without_recheck_work_is_stranded() {
    // Negative control: the worker skips R5. The publisher's notification reads `state`
    // before the worker registers (so it wakes nobody), and the worker's queue check came
    // before the push; nobody runs the job, and loom reports the deadlock. If this model
    // stops failing, the models above have stopped exploring that interleaving.
    model(None, || {
        with_pool(1, |pool| {
            let publisher = spawn(pool, |pool| pool.publish());
            pool.worker(0, false, 1, false);
            publisher.join().unwrap();
        });
    });
}

impl Pool {
    /// A searcher that takes one job, applies R3 through `last_searcher_found_work` (unless
    /// `r3` is false: the negative control), and then runs that job for good, as a task that
    /// blocks its worker does: it never looks at the queue again, so anything published
    /// meanwhile must be run by a worker that somebody woke.
    fn search_then_block(&self, r3: bool) {
        assert!(
            self.try_take(),
            "the job queued before the threads started is gone"
        );
        // Relaxed: the final counts are read after joining the threads.
        self.ran.fetch_add(1, Relaxed);
        if self.sleep.stop_searching() && r3 {
            self.sleep
                .last_searcher_found_work(|| false, || self.has_jobs());
        }
    }

    /// A task published from outside the pool, as a remote spawn does: a SeqCst
    /// read-modify-write of the queue's count, then `notify_task_after_seqcst_push`.
    fn publish_task_outside(&self) {
        // SeqCst: the remote spawn's push (`queue/linked_inject.rs`), which the notification
        // relies on.
        let before = self.jobs.fetch_add(1, SeqCst);
        self.sleep.notify_task_after_seqcst_push(before);
    }
}

/// R3a (sleep/README.md): worker 0 is the last searcher, with worker 1 parked, so it is
/// alone; it finds one task and blocks in it, while an outside thread publishes a second.
/// Either the publisher sees no searcher and wakes worker 1, or the searcher's look after its
/// fence sees the task and does. With `r3` false the searcher applies no rule, as a pool
/// that trusted "nobody else is awake, so nobody needs waking" would.
fn last_searcher_alone_vs_outside_publisher(r3: bool) {
    model(None, move || {
        with_pool(2, |pool| {
            assert!(!pool.sleep.register_parked(1, false));
            assert!(pool.sleep.try_start_searching());
            // Relaxed: before the threads start.
            pool.jobs.store(1, Relaxed);
            let searcher = spawn(pool, move |pool| pool.search_then_block(r3));
            let parked = spawn(pool, |pool| {
                let searching = pool.sleep.park(1, None) == Wake::Searching;
                pool.worker_of(true, 1, searching, 2, true);
            });
            pool.publish_task_outside();
            searcher.join().unwrap();
            parked.join().unwrap();
            pool.check_quiescent(2);
        });
    });
}

#[test]
fn loom_last_searcher_alone_vs_outside_publisher() {
    last_searcher_alone_vs_outside_publisher(true);
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_last_searcher_alone_that_skips_r3_strands_the_task() {
    // Negative control: the publisher saw the searcher and woke nobody, the searcher looked
    // at nothing, and worker 1 sleeps on with the task queued.
    last_searcher_alone_vs_outside_publisher(false);
}

/// Values of `Pool::latch`, as in `join::latch::SpinLatch`: the waiter announces it is going
/// to sleep, and the setter wakes it with a plain token if it did.
const UNSET: usize = 0;
const SLEEPING: usize = 1;
const SET: usize = 2;

impl Pool {
    /// The waiter's side: wait on the latch as worker `index`, running any job that shows up
    /// meanwhile (as `WorkerThread::wait_until_cold` does). Returns whether it ran a job.
    fn wait_on_latch(&self, index: usize) -> bool {
        let mut searching = false;
        let mut ran = false;
        // Acquire: pairs with the setter's swap.
        while self.latch.load(Acquire) != SET {
            if self.try_take() {
                self.ran.fetch_add(1, Relaxed);
                ran = true;
                if searching {
                    searching = false;
                    if self.sleep.stop_searching() {
                        self.sleep.notify_work();
                    }
                }
                continue;
            }
            // Acquire on both: pairs with the setter's swap.
            if self
                .latch
                .compare_exchange(UNSET, SLEEPING, Acquire, Acquire)
                .is_ok()
            {
                let _ = self.sleep.register_parked(index, searching);
                searching = false;
                if self.has_jobs() {
                    self.sleep.wake_any_cold();
                }
                if self.sleep.park(index, None) == Wake::Searching {
                    searching = true;
                }
                // Relaxed: see `SpinLatch::stop_sleeping`.
                let _ = self
                    .latch
                    .compare_exchange(SLEEPING, UNSET, Relaxed, Relaxed);
            }
        }
        if searching {
            let _ = self.sleep.stop_searching();
        }
        ran
    }

    /// The setter's side (`SpinLatch::set`).
    fn set_latch(&self, waiter: usize) {
        // AcqRel: Release publishes to the waiter's Acquire load; Acquire pairs with its CAS.
        if self.latch.swap(SET, AcqRel) == SLEEPING {
            self.sleep.wake_worker(waiter);
        }
    }
}

#[test]
fn loom_latch_set_races_park() {
    // A worker sleeps on a latch; another thread sets it and wakes it with a plain token.
    model(None, || {
        with_pool(1, |pool| {
            let setter = spawn(pool, |pool| pool.set_latch(0));
            assert!(!pool.wait_on_latch(0));
            setter.join().unwrap();
            pool.check_quiescent(0);
        });
    });
}

#[test]
fn loom_latch_set_races_notification() {
    // A worker sleeping on a latch is also a worker: a publisher may claim it for a job (a
    // searching token) while the latch setter sends a plain one. Consuming both at once must
    // neither strand the job nor leave the waiter asleep on a set latch.
    model(Some(3), || {
        with_pool(1, |pool| {
            let setter = spawn(pool, |pool| pool.set_latch(0));
            let publisher = spawn(pool, |pool| pool.publish());
            // Back in its main loop after the wait, the worker runs whatever the wait left.
            if !pool.wait_on_latch(0) {
                pool.worker(0, false, 1, true);
            }
            setter.join().unwrap();
            publisher.join().unwrap();
            pool.check_quiescent(1);
        });
    });
}

/// A model of the I/O driver's wait (`sleep/parker.rs`, "Parking in the driver"): `wait`
/// blocks until `unpark` (the `mio::Waker`) was called since the last wait returned. The OS
/// keeps a waker's event until a turn reads it, so an unpark that comes before the wait is
/// not lost; that is the one property of epoll the protocol relies on.
struct FakePoller {
    pending: crate::sync::Mutex<bool>,
    condvar: crate::sync::Condvar,
}

impl FakePoller {
    fn unpark(&self) {
        *crate::sync::lock(&self.pending) = true;
        self.condvar.notify_one();
    }

    fn wait(&self) {
        let mut pending = crate::sync::lock(&self.pending);
        while !*pending {
            pending = self.condvar.wait(pending).unwrap();
        }
        *pending = false;
    }
}

/// A coordinator for one worker whose parks are in the driver, the poller, and a flag the
/// waker sets before waking it. Kept in `ManuallyDrop`s for the reason [`with_pool`] gives.
fn with_driver_pool(f: impl FnOnce(&Arc<DriverPool>)) {
    let poller = Arc::new(FakePoller {
        pending: crate::sync::Mutex::new(false),
        condvar: crate::sync::Condvar::new(),
    });
    let unpark: DriverUnpark = {
        let poller = poller.clone();
        Box::new(move || poller.unpark())
    };
    let shared = ManuallyDrop::new(Arc::new((
        Sleep::with_driver(1, Some(unpark), Barrier::SYMMETRIC),
        poller,
        AtomicBool::new(false),
    )));
    f(&shared);
    drop(ManuallyDrop::into_inner(shared));
}

/// The coordinator, the poller its worker parks in, and the flag a waker sets.
type DriverPool = (Sleep, Arc<FakePoller>, AtomicBool);

/// The worker's side: park in the driver until the flag is set, rechecking it after
/// registering (R5), as `IdleLoop::park` does.
fn park_in_driver_until_set(shared: &DriverPool, plain: bool) {
    let (sleep, poller, flag) = shared;
    // Relaxed: a job count in the other models; here the heavy barrier orders it.
    while !flag.load(Relaxed) {
        let _ = sleep.register_parked(0, false);
        if flag.load(Relaxed) && !plain {
            sleep.wake_any_cold();
        }
        let _ = sleep.park_driving(0, || poller.wait());
    }
}

/// A publisher's notification reaches the worker parked in the driver: through the mio
/// waker when it waits there, through its token when it has not started waiting. With
/// `--cfg magpie_loom_broken` the parker ignores its `in_driver` mark and notifies its
/// condvar, where nobody waits, and this model must deadlock.
#[test]
#[cfg_attr(magpie_loom_broken, should_panic(expected = "deadlock"))]
fn loom_notification_reaches_a_worker_parked_in_the_driver() {
    model(None, || {
        with_driver_pool(|shared| {
            let publisher = {
                let shared = ManuallyDrop::new(shared.clone());
                thread::spawn(move || {
                    // Relaxed: `notify_work`'s barrier orders it (as `Pool::publish`).
                    shared.2.store(true, Relaxed);
                    shared.0.notify_work();
                    drop(ManuallyDrop::into_inner(shared));
                })
            };
            park_in_driver_until_set(shared, false);
            publisher.join().unwrap();
        });
    });
}

/// A plain wake (a latch set, shutdown, an earlier timer) reaches the worker parked in the
/// driver.
#[test]
fn loom_plain_wake_reaches_a_worker_parked_in_the_driver() {
    model(None, || {
        with_driver_pool(|shared| {
            let waker = {
                let shared = ManuallyDrop::new(shared.clone());
                thread::spawn(move || {
                    // SeqCst: the wake is the latch's; the parker rereads after its park.
                    shared.2.store(true, SeqCst);
                    shared.0.wake_worker(0);
                    drop(ManuallyDrop::into_inner(shared));
                })
            };
            park_in_driver_until_set(shared, true);
            waker.join().unwrap();
        });
    });
}

/// The stall monitor's bell (`bell.rs`): a pool of one worker that parks and is woken by an
/// outside publisher, and a monitor that sleeps on the bell whenever it sees the pool idle.
/// The monitor exits once it has seen the worker awake after its wake; if the claim that
/// raised the unparked count from 0 missed a sleeping monitor, the monitor blocks forever
/// and loom reports a deadlock. `recheck: false` is the negative control: the monitor reads
/// the count *before* it announces itself asleep, so the claimer's load may miss it.
fn bell_model(recheck: bool) {
    model(None, move || {
        let sleep = {
            let mut sleep = Sleep::new(1);
            sleep.set_bell(Arc::new(Bell::new()));
            sleep
        };
        let shared = ManuallyDrop::new(Arc::new((
            sleep,
            AtomicBool::new(false),
            AtomicBool::new(false),
        )));
        let publisher = {
            let shared = ManuallyDrop::new((*shared).clone());
            thread::spawn(move || {
                // Relaxed: `notify_work_outside`'s fence orders it.
                shared.1.store(true, Relaxed);
                shared.0.notify_work_outside();
                drop(ManuallyDrop::into_inner(shared));
            })
        };
        let worker = {
            let shared = ManuallyDrop::new((*shared).clone());
            thread::spawn(move || {
                let sleep = &shared.0;
                sleep.register_parked(0, false);
                // R5. Relaxed: ordered by the heavy barrier in `register_parked`.
                if shared.1.load(Relaxed) {
                    sleep.wake_any_cold();
                }
                let _ = sleep.park(0, None);
                // SeqCst: the monitor's exit test reads it with the count.
                shared.2.store(true, SeqCst);
                drop(ManuallyDrop::into_inner(shared));
            })
        };
        let sleep = &shared.0;
        let bell = sleep.bell.as_ref().unwrap();
        loop {
            // SeqCst: see the worker.
            if shared.2.load(SeqCst) {
                break;
            }
            if recheck {
                bell.going_to_sleep();
                if sleep.load().unparked() == 0 {
                    bell.wait(None);
                } else {
                    thread::yield_now();
                }
            } else {
                let idle = sleep.load().unparked() == 0;
                bell.going_to_sleep();
                if idle {
                    bell.wait(None);
                } else {
                    thread::yield_now();
                }
            }
            bell.awake();
        }
        publisher.join().unwrap();
        worker.join().unwrap();
        drop(ManuallyDrop::into_inner(shared));
    });
}

#[test]
fn loom_monitor_bell_is_rung_when_the_pool_wakes() {
    bell_model(true);
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_monitor_bell_without_recheck_is_missed() {
    // Negative control (see `bell_model`).
    bell_model(false);
}

/// R7 (sleep/README.md): worker 0, inside a poll, fills its empty LIFO slot (a job of the
/// model's queue), notifies as a fill does (`notify_lifo`), and never returns from that poll:
/// the task is stranded unless worker 1 takes it. Worker 1 parks as the LIFO watcher and
/// stops watching after one look, as a watcher does when the slot's owner seems stuck.
/// Either the fill's notification sees no watcher and claims worker 1, or worker 1's recheck
/// after it stops watching (the heavy barrier pairs with the fill's light one) sees the
/// task and claims its own wakeup. With `recheck` false worker 1 stops watching without
/// looking, as a watcher that trusted its looks alone would, and sleeps on beside the
/// stranded task.
fn lifo_fill_vs_watcher(recheck: bool) {
    model(None, move || {
        with_pool(2, |pool| {
            let watcher = spawn(pool, move |pool| {
                // As `IdleLoop::park`: the role first, then R2. The recheck (R5) leaves tasks
                // seen only in LIFO slots to the watch.
                assert!(pool.sleep.try_watch(1));
                assert!(!pool.sleep.register_parked(1, false));
                // As `IdleLoop::watch`, once its look found the slot's owner stuck.
                if pool.sleep.has_searching_token(1) {
                    pool.sleep.end_watch_claimed(1);
                } else {
                    pool.sleep.end_watch(1);
                    if recheck && pool.has_jobs() {
                        pool.sleep.claim_own_wakeup(1);
                    }
                }
                assert_eq!(pool.sleep.park(1, None), Wake::Searching);
                assert!(pool.try_take(), "woken, and the slot was empty");
                // Relaxed: the final counts are read after joining the threads.
                pool.ran.fetch_add(1, Relaxed);
                let _ = pool.sleep.stop_searching();
            });
            // Relaxed: a fill is a plain store, ordered by the light barrier in `notify_lifo`.
            pool.jobs.fetch_add(1, Relaxed);
            pool.sleep.notify_lifo();
            watcher.join().unwrap();
            pool.check_quiescent(1);
        });
    });
}

#[test]
fn loom_lifo_fill_races_the_watcher_that_stops_watching() {
    lifo_fill_vs_watcher(true);
}

#[test]
#[should_panic(expected = "deadlock")]
fn loom_watcher_that_stops_without_a_recheck_strands_the_task() {
    // Negative control: the fill saw the watcher and woke nobody, and the watcher stopped
    // watching without looking.
    lifo_fill_vs_watcher(false);
}
