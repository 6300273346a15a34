//! Fork-join work that reaches a runtime after (or while) its workers exit: a blocking closure
//! of the runtime calling `join` or `scope` while `Runtime::drop` runs. The work either runs
//! or the call panics with "the runtime has shut down"; either way the drop returns (it waits
//! for running blocking closures, so a job nobody runs would hang it).
//!
//! Coordination is by channels only: a task's future, dropped in the first step of shutdown,
//! says that the drop has begun; a thread-local destructor on the only worker says that the
//! worker thread is gone.

mod common;

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use common::deadline::Deadline;
use common::runtime;
use magpie::Runtime;

/// The panic message of fork-join work refused by a runtime whose workers have exited.
const SHUT_DOWN: &str = "the runtime has shut down";

/// Sends on its channel when dropped.
struct SignalOnDrop(mpsc::Sender<()>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

thread_local! {
    /// Set on a worker thread: its destructor runs when the thread exits.
    static ON_THREAD_EXIT: RefCell<Option<SignalOnDrop>> = const { RefCell::new(None) };
}

/// The fork-join calls a late blocking closure makes.
#[derive(Debug, Clone, Copy)]
enum Call {
    Join,
    Scope,
    ParIter,
}

/// Makes `call` on the current runtime: `Ok` with a checked result, or the panic message.
fn make(call: Call) -> Result<(), String> {
    panic::catch_unwind(AssertUnwindSafe(|| match call {
        Call::Join => assert_eq!(magpie::join(|| 1, || 2), (1, 2)),
        Call::Scope => {
            let mut v = [0u32; 8];
            magpie::scope(|s| {
                for (i, x) in v.iter_mut().enumerate() {
                    s.spawn(move |_| *x = i as u32);
                }
            });
            assert_eq!(v, [0, 1, 2, 3, 4, 5, 6, 7]);
        }
        Call::ParIter => {
            use magpie::prelude::*;
            assert_eq!((0..1000u64).into_par_iter().sum::<u64>(), 499_500);
        }
    }))
    .map_err(|payload| common::payload_text(&*payload))
}

/// Sends when the first step of `rt`'s shutdown begins: a pending task's future is dropped.
fn signal_when_shutdown_begins(rt: &Runtime) -> mpsc::Receiver<()> {
    let (begun_tx, begun_rx) = mpsc::channel();
    let (polled_tx, polled_rx) = mpsc::channel();
    rt.spawn(async move {
        let _signal = SignalOnDrop(begun_tx);
        let _ = polled_tx.send(());
        std::future::pending::<()>().await
    });
    polled_rx.recv().unwrap();
    begun_rx
}

#[test]
fn fork_join_after_the_workers_exited_panics_and_the_drop_returns() {
    for call in [Call::Join, Call::Scope, Call::ParIter] {
        let _deadline = Deadline::new(
            "a late join kept Runtime::drop waiting",
            Duration::from_secs(20),
        );
        let rt = runtime(1);
        // The only worker signals when its thread exits.
        let (gone_tx, gone_rx) = mpsc::channel();
        rt.install(|| {
            ON_THREAD_EXIT.with(|slot| *slot.borrow_mut() = Some(SignalOnDrop(gone_tx)));
        });
        let (started_tx, started_rx) = mpsc::channel();
        let late = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            gone_rx.recv().unwrap();
            make(call)
        });
        started_rx.recv().unwrap();
        drop(rt);
        let outcome = late.join().expect("the blocking closure itself panicked");
        match outcome {
            Err(msg) => assert!(msg.contains(SHUT_DOWN), "{call:?}: unexpected panic: {msg}"),
            Ok(()) => panic!("{call:?} ran on a runtime whose workers had exited"),
        }
    }
}

#[test]
fn fork_join_racing_the_workers_exit_runs_or_panics_and_the_drop_returns() {
    // The call races the workers' exit: it lands before they stop (it runs), after the
    // last one closed the job queue (it panics), or in between (the last worker out runs it).
    let mut ran = 0;
    let mut refused = 0;
    for round in 0..300 {
        let call = [Call::Join, Call::Scope, Call::ParIter][round % 3];
        let _deadline = Deadline::new(
            "a late join kept Runtime::drop waiting",
            Duration::from_secs(20),
        );
        let rt = runtime(1 + round % 3);
        let begun = signal_when_shutdown_begins(&rt);
        // Running before the drop begins: queued blocking closures are cancelled instead.
        let (started_tx, started_rx) = mpsc::channel();
        let late = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            begun.recv().unwrap();
            make(call)
        });
        started_rx.recv().unwrap();
        drop(rt);
        match late.join().expect("the blocking closure itself panicked") {
            Ok(()) => ran += 1,
            Err(msg) => {
                assert!(msg.contains(SHUT_DOWN), "{call:?}: unexpected panic: {msg}");
                refused += 1;
            }
        }
    }
    eprintln!("late fork-join calls: {ran} ran, {refused} refused");
}
