//! Nothing waits behind a long poll (issue 15, part 4): while a worker is stuck in one poll
//! (a task that blocks its thread without `block_in_place`), the runnable work queued on that
//! worker, in its LIFO slot, its ring, its mailbox or its deque, is taken by the others.
//!
//! Each test blocks a worker's poll on a std channel until the queued work has run. If the
//! work stayed behind the poll, the poll would wait forever: the channel's timeout
//! ([`DEADLINE`], a minute) only turns that hang into a failure, and no test measures time
//! (the latency is magpie-bench's `stall` command).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};

use common::{runtime, DEADLINE};

/// Where the task that the long poll waits for is queued, on the blocked worker.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Spawned from the poll: the worker's LIFO slot.
    LifoSpawn,
    /// An idle task woken from the poll: the LIFO slot too, through its waker.
    LifoWake,
    /// Displaced from the LIFO slot by a second spawn: the ring.
    Ring,
    /// `submit_to` the blocked worker itself: its mailbox.
    Mailbox,
    /// A `join` whose first half blocks: the second half, on the worker's deque.
    Job,
}

const SHAPES: [Shape; 5] = [
    Shape::LifoSpawn,
    Shape::LifoWake,
    Shape::Ring,
    Shape::Mailbox,
    Shape::Job,
];

/// A future that stays pending until `Signal::fire`, which wakes it.
#[derive(Default)]
struct Signal {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// Told once the waiting task has filed its waker (it is idle, waiting to be woken).
    registered: Mutex<Option<mpsc::Sender<()>>>,
}

impl Signal {
    fn fire(&self) {
        self.fired.store(true, SeqCst);
        if let Some(waker) = self.waker.lock().unwrap().take() {
            waker.wake();
        }
    }

    fn wait(self: Arc<Self>) -> impl Future<Output = ()> {
        SignalFuture(self)
    }
}

struct SignalFuture(Arc<Signal>);

impl Future for SignalFuture {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.fired.load(SeqCst) {
            return Poll::Ready(());
        }
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        if let Some(tx) = self.0.registered.lock().unwrap().take() {
            let _ = tx.send(());
        }
        if self.0.fired.load(SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Runs one round: a task on some worker queues work of `shape` there, then blocks its
/// poll until that work has run. Returns the blocked worker and the one that ran the work.
fn round(rt: &Arc<magpie::Runtime>, shape: Shape) -> (usize, usize) {
    let (tx, rx) = mpsc::channel::<usize>();
    // For `LifoWake`: an idle task, waiting on a signal the long poll fires.
    let signal = Arc::new(Signal::default());
    let mut woken = None;
    if let Shape::LifoWake = shape {
        let (reg_tx, reg_rx) = mpsc::channel();
        *signal.registered.lock().unwrap() = Some(reg_tx);
        let tx = tx.clone();
        let wait = signal.clone().wait();
        woken = Some(rt.spawn(async move {
            wait.await;
            let _ = tx.send(magpie::current_worker_index().unwrap());
        }));
        reg_rx
            .recv_timeout(DEADLINE)
            .expect("the waiting task never ran");
    }
    let rt_in_task = rt.clone();
    let blocked = rt.spawn(async move {
        let me = magpie::current_worker_index().unwrap();
        let here = move || magpie::current_worker_index().unwrap();
        let ran = match shape {
            Shape::LifoSpawn => {
                let tx = tx.clone();
                drop(magpie::spawn(async move {
                    let _ = tx.send(here());
                }));
                rx.recv_timeout(DEADLINE)
            }
            Shape::LifoWake => {
                signal.fire();
                rx.recv_timeout(DEADLINE)
            }
            Shape::Ring => {
                let tx = tx.clone();
                drop(magpie::spawn(async move {
                    let _ = tx.send(here());
                }));
                // Displaces the first from the LIFO slot to the ring; waits for nothing.
                drop(magpie::spawn(async {}));
                rx.recv_timeout(DEADLINE)
            }
            Shape::Mailbox => {
                let tx = tx.clone();
                drop(rt_in_task.submit_to(me, move || {
                    let _ = tx.send(here());
                }));
                rx.recv_timeout(DEADLINE)
            }
            Shape::Job => {
                let (ran, ()) = magpie::join(
                    move || rx.recv_timeout(DEADLINE),
                    || {
                        let _ = tx.send(here());
                    },
                );
                ran
            }
        };
        drop(rt_in_task);
        (me, ran)
    });
    let (me, ran) = rt.block_on(blocked).unwrap();
    let ran = ran.unwrap_or_else(|_| panic!("{shape:?}: the queued work waited behind the poll"));
    if let Some(woken) = woken {
        rt.block_on(woken).unwrap();
    }
    (me, ran)
}

fn check(workers: usize) {
    let rt = Arc::new(runtime(workers));
    for shape in SHAPES {
        for _ in 0..20 {
            let (me, ran) = round(&rt, shape);
            assert_ne!(
                me, ran,
                "{shape:?}: ran on the blocked worker, during its poll?"
            );
        }
    }
}

#[test]
fn work_queued_behind_a_long_poll_runs_elsewhere_on_2_workers() {
    check(2);
}

#[test]
fn work_queued_behind_a_long_poll_runs_elsewhere_on_3_workers() {
    check(3);
}

/// The same, while the other workers are parked when the poll starts blocking: each round
/// waits until the pool is idle first, so the rescue needs a wake.
#[test]
fn work_queued_behind_a_long_poll_wakes_a_parked_worker() {
    for workers in [2, 3] {
        let rt = Arc::new(runtime(workers));
        for shape in SHAPES {
            for _ in 0..10 {
                rt.wait_idle();
                // Not a sleep: a wait for a state, which the watchdog of `eventually` bounds.
                common::eventually("every worker parks", || {
                    rt.stats().workers.iter().all(|w| w.parks > w.unparks)
                });
                let (me, ran) = round(&rt, shape);
                assert_ne!(me, ran, "{shape:?}");
            }
        }
    }
}

/// Two tasks spawned from outside into a parked pool, the first blocking its poll until the
/// second has run. The first spawn wakes a worker as a searcher; the second sees it searching
/// and wakes nobody, so the searcher, when it finds work, must wake the other worker for
/// what is left (R3). While it is the only worker awake it looks at the queues first, in
/// both barrier modes (R3a in sleep/README.md): a look that missed the second task would
/// leave it behind the blocked poll for good, since the stall monitor, which would rescue
/// it, is off here.
#[test]
fn a_task_spawned_behind_a_blocking_one_into_a_parked_pool_runs_elsewhere() {
    for mode in [
        magpie::BarrierMode::Asymmetric,
        magpie::BarrierMode::Symmetric,
    ] {
        let rt = magpie::Runtime::builder()
            .worker_threads(2)
            .stall_threshold(None)
            .barrier(mode)
            .build()
            .unwrap();
        for _ in 0..50 {
            rt.wait_idle();
            // Not a sleep: a wait for a state, which the watchdog of `eventually` bounds.
            common::eventually("every worker parks", || {
                rt.stats().workers.iter().all(|w| w.parks > w.unparks)
            });
            let (tx, rx) = mpsc::channel();
            let blocked = rt.spawn(async move { rx.recv_timeout(DEADLINE) });
            let second = rt.spawn(async move { tx.send(()).unwrap() });
            rt.block_on(blocked)
                .unwrap()
                .unwrap_or_else(|_| panic!("{mode:?}: the second task waited behind the first"));
            rt.block_on(second).unwrap();
        }
    }
}

/// Two tasks woken by the same timer tick in a parked pool, each blocking its poll until the
/// other has started: they must run on two workers at once. The worker that drives the timers
/// wakes both into its own ring without a notification for the first (it runs that one
/// itself: `wake_quietly`), so it must notify for the second, or the second waits behind the
/// blocked poll for good (nothing else wakes the other worker: no timer or source is left
/// to hand the driver role over for, and the stall monitor is off).
#[test]
fn two_tasks_woken_by_one_timer_tick_run_on_two_workers() {
    let rt = magpie::Runtime::builder()
        .worker_threads(2)
        .stall_threshold(None)
        .build()
        .unwrap();
    for _ in 0..20 {
        let (a_started, a_seen) = mpsc::channel();
        let (b_started, b_seen) = mpsc::channel();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(5);
        let a = rt.spawn(async move {
            magpie::time::sleep_until(deadline).await;
            a_started.send(()).unwrap();
            b_seen.recv_timeout(DEADLINE)
        });
        let b = rt.spawn(async move {
            magpie::time::sleep_until(deadline).await;
            b_started.send(()).unwrap();
            a_seen.recv_timeout(DEADLINE)
        });
        for task in [a, b] {
            rt.block_on(task)
                .unwrap()
                .expect("one task waited behind the other's poll");
        }
    }
}
