//! [`Deadline`]: turns a hang into a failure of the whole test binary.

use std::io::Write;
use std::sync::mpsc;
use std::time::Duration;

/// Aborts the process with a message naming `what` unless dropped within `limit`. For tests
/// whose failure mode is a deadlock (a job nobody runs, a worker blocked for good), where
/// [`Watchdog`](super::Watchdog)'s progress counter has nothing to count. Not a timing
/// assertion: what is guarded takes milliseconds, and the limit only ends a hang.
#[derive(Debug)]
pub(crate) struct Deadline(Option<mpsc::Sender<()>>);

impl Deadline {
    pub(crate) fn new(what: &'static str, limit: Duration) -> Deadline {
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                // Straight to stderr: the test harness would capture `eprintln!` and lose it
                // in the abort.
                let _ = writeln!(
                    std::io::stderr(),
                    "deadline: {what} still running after {limit:?}; aborting"
                );
                std::process::abort();
            }
        });
        Deadline(Some(tx))
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        // Disconnecting the channel stops the thread.
        drop(self.0.take());
    }
}
