//! Helpers shared by the async-task integration tests (`tasks.rs`, `shutdown.rs`, `time.rs`,
//! `compat.rs`; `mod async_support;` in each): a hang guard, exact drop and poll accounting,
//! futures with a fixed behaviour, and a waker that reports to a channel.
//!
//! Not a test binary of its own: Cargo only builds `tests/*.rs`.

// Each test binary uses only some of these.
#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use magpie::Runtime;

pub(crate) mod bomb;

/// How long a test may run before [`Watchdog`] aborts the process. Not a timing assertion:
/// every test is expected to finish in well under a second or two, and the deadline only
/// turns a hang (a lost wakeup, a handle that never resolves) into a failure with a message.
pub(crate) const HANG_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("could not build the runtime")
}

pub(crate) fn named_runtime(workers: usize, name: &str) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .thread_name(name)
        .build()
        .expect("could not build the runtime")
}

/// Aborts the process with a message if the test that armed it is still running after
/// [`HANG_DEADLINE`]. Dropping it (at the end of the test, or while unwinding from a failed
/// assertion) disarms it. A hung test would otherwise stall the whole test binary without
/// saying which test hung.
#[derive(Debug)]
pub(crate) struct Watchdog {
    _disarm: mpsc::Sender<()>,
}

pub(crate) fn watchdog(what: &'static str) -> Watchdog {
    watchdog_for(what, HANG_DEADLINE)
}

/// As [`watchdog`], with a deadline of its own (a test that would hang on a regression, and
/// should say so sooner than the default).
pub(crate) fn watchdog_for(what: &'static str, deadline: Duration) -> Watchdog {
    let (disarm, armed) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name(format!("watchdog: {what}"))
        .spawn(move || {
            // Nothing is ever sent: the sender's drop disconnects the channel.
            if let Err(mpsc::RecvTimeoutError::Timeout) = armed.recv_timeout(deadline) {
                eprintln!(
                    "watchdog: `{what}` still running after {deadline:?}; \
                     a lost wakeup or a handle that never resolves. Aborting."
                );
                std::process::abort();
            }
        })
        .expect("could not start the watchdog thread");
    Watchdog { _disarm: disarm }
}

/// A shared event counter.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub(crate) fn new() -> Counter {
        Counter::default()
    }

    pub(crate) fn bump(&self) {
        self.0.fetch_add(1, SeqCst);
    }

    pub(crate) fn get(&self) -> usize {
        self.0.load(SeqCst)
    }

    /// A guard that bumps this counter when it is dropped.
    pub(crate) fn on_drop(&self) -> DropCount {
        DropCount(self.clone())
    }
}

/// Bumps its [`Counter`] when dropped.
#[derive(Debug)]
pub(crate) struct DropCount(Counter);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.bump();
    }
}

/// One counter per task, so that a failure names the task that ran (or dropped) twice or
/// never, instead of only a wrong total.
#[derive(Debug)]
pub(crate) struct Slots(Box<[AtomicU32]>);

impl Slots {
    pub(crate) fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots((0..n).map(|_| AtomicU32::new(0)).collect()))
    }

    pub(crate) fn bump(&self, index: usize) {
        self.0[index].fetch_add(1, SeqCst);
    }

    pub(crate) fn get(&self, index: usize) -> u32 {
        self.0[index].load(SeqCst)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Panics, naming the first offending slot, unless every slot counted exactly `expected`.
    #[track_caller]
    pub(crate) fn assert_all(&self, expected: u32, what: &str) {
        let wrong: Vec<(usize, u32)> = (0..self.len())
            .map(|i| (i, self.get(i)))
            .filter(|&(_, n)| n != expected)
            .collect();
        assert!(
            wrong.is_empty(),
            "{what}: {} of {} slots differ from {expected}; first (index, count): {:?}",
            wrong.len(),
            self.len(),
            &wrong[..wrong.len().min(5)]
        );
    }
}

/// Bumps slot `index` of its [`Slots`] when dropped. Moved into a task's future, it counts
/// that future's drop: an `async move` block drops its captures whether it was never polled,
/// cancelled mid-way, or ran to the end.
#[derive(Debug)]
pub(crate) struct DropSlot {
    slots: Arc<Slots>,
    index: usize,
}

impl DropSlot {
    pub(crate) fn new(slots: &Arc<Slots>, index: usize) -> DropSlot {
        DropSlot {
            slots: slots.clone(),
            index,
        }
    }
}

impl Drop for DropSlot {
    fn drop(&mut self) {
        self.slots.bump(self.index);
    }
}

/// A future that is never ready and never wakes anybody: it can only be cancelled. Counts its
/// polls and drops, and reports its first poll on `started` if given one.
#[derive(Debug)]
pub(crate) struct Forever {
    polls: Counter,
    _drop: DropCount,
    started: Option<mpsc::Sender<()>>,
}

impl Forever {
    pub(crate) fn new(polls: &Counter, drops: &Counter) -> Forever {
        Forever {
            polls: polls.clone(),
            _drop: drops.on_drop(),
            started: None,
        }
    }

    pub(crate) fn reporting(
        polls: &Counter,
        drops: &Counter,
        started: mpsc::Sender<()>,
    ) -> Forever {
        Forever {
            started: Some(started),
            ..Forever::new(polls, drops)
        }
    }
}

impl Future for Forever {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        self.polls.bump();
        if let Some(started) = self.started.take() {
            let _ = started.send(());
        }
        Poll::Pending
    }
}

/// A waker that sends on a channel each time it is woken: lets a plain thread wait for a
/// `JoinHandle` (or any future) to become ready without polling in a loop.
struct ChannelWake(mpsc::Sender<()>);

impl Wake for ChannelWake {
    fn wake(self: Arc<Self>) {
        let _ = self.0.send(());
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let _ = self.0.send(());
    }
}

pub(crate) fn channel_waker() -> (Waker, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    (Waker::from(Arc::new(ChannelWake(tx))), rx)
}

/// Polls `future` once with `waker`.
pub(crate) fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn payload_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("<payload neither &str nor String>")
    }
}

/// A small deterministic generator (xorshift64*), for "random" durations that are the same in
/// every run.
#[derive(Debug)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `low..=high`.
    pub(crate) fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}
