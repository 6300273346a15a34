//! A parker: a worker blocks on it until a token arrives or a timeout passes.
//!
//! Two kinds of token, kept until consumed so that an unpark is never lost to the window
//! between "decided to sleep" and "asleep":
//!
//! * *searching*: a notifier claimed this worker's idle bit and counted it as unparked and
//!   searching. Only the claimer of the bit sets it, at most once per park.
//! * *plain*: "wake up and look around" (a latch you wait on was set; shutdown). It carries
//!   no accounting, so a stale one is harmless: it only cuts the next park short.
//!
//! *Parking in the driver.* The worker that holds the driver role parks inside the OS poller
//! (`epoll_wait`) instead of on the condvar ([`Parker::park_in`]); it marks itself `in_driver`
//! under the tokens' lock first, and every unpark that sets a token under that lock and finds
//! the mark calls the driver's unpark (a `mio::Waker`) instead of the condvar. Either the
//! unparker's token lands before the mark (the parker sees it and does not wait) or after it
//! (the unparker sees the mark and ends the wait, or the next one: the waker's event is kept
//! by the OS until a turn reads it). Both sides hold the same lock, so there is no third case.
//!
//! Under loom timeouts never fire, so a lost wakeup in the protocol shows up as a deadlock.
//! Under shuttle [`Parker::park`] ignores its timeout (shuttle does not model time, and a
//! real-time deadline would only turn a lost wakeup into a pause): same effect.

use std::time::Duration;

use crate::sync::{lock, wait_until, Condvar, Mutex};

#[derive(Debug, Default)]
struct Tokens {
    plain: bool,
    searching: bool,
    /// The worker waits in the driver, not on the condvar (module docs).
    in_driver: bool,
}

/// Ends a wait in the driver: the driver's `mio::Waker`, or a model of it under loom.
pub(crate) type DriverUnpark = Box<dyn Fn() + Send + Sync>;

/// Blocks one worker until a token arrives.
#[derive(Debug, Default)]
pub(crate) struct Parker {
    tokens: Mutex<Tokens>,
    condvar: Condvar,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker::default()
    }

    /// Parks in the driver: runs `wait` (a driver turn that blocks until an event, its
    /// timeout, or `unpark`) unless a token is here already. Consumes nothing. The caller
    /// passes the same `unpark` to every `unpark_*` call of this parker.
    #[cfg_attr(loom, allow(dead_code))] // No driver there but the models'.
    pub(crate) fn park_in(&self, wait: impl FnOnce()) {
        {
            let mut tokens = lock(&self.tokens);
            if tokens.plain || tokens.searching {
                return;
            }
            tokens.in_driver = true;
        }
        wait();
        lock(&self.tokens).in_driver = false;
    }

    /// Blocks until any token is present or `timeout` passes. Consumes nothing.
    pub(crate) fn park(&self, timeout: Option<Duration>) {
        // A timer deadline (or the debugging safety net, `Builder::park_safety_net`) is real
        // time, which shuttle does not control.
        #[cfg(shuttle)]
        let timeout: Option<Duration> = timeout.and(None);
        let deadline = crate::sync::time::deadline_after(timeout);
        let mut tokens = lock(&self.tokens);
        while !tokens.plain && !tokens.searching {
            if deadline.is_some_and(|d| crate::sync::time::now() >= d) {
                return;
            }
            tokens = wait_until(&self.condvar, tokens, deadline);
        }
    }

    /// Whether a token is present.
    pub(crate) fn has_token(&self) -> bool {
        let tokens = lock(&self.tokens);
        tokens.plain || tokens.searching
    }

    /// Blocks until the searching token is present, then consumes every token.
    pub(crate) fn take_searching(&self) {
        let mut tokens = lock(&self.tokens);
        while !tokens.searching {
            tokens = wait_until(&self.condvar, tokens, None);
        }
        *tokens = Tokens::default();
    }

    /// Consumes a plain token, if any. There can be no searching token: the caller owns its
    /// own idle bit, so nobody else claimed it.
    pub(crate) fn take_plain(&self) {
        let mut tokens = lock(&self.tokens);
        debug_assert!(!tokens.searching, "searching token without a claimed bit");
        tokens.plain = false;
    }

    pub(crate) fn unpark_plain(&self, driver: Option<&DriverUnpark>) {
        let mut tokens = lock(&self.tokens);
        tokens.plain = true;
        self.notify(tokens, driver);
    }

    pub(crate) fn unpark_searching(&self, driver: Option<&DriverUnpark>) {
        let mut tokens = lock(&self.tokens);
        debug_assert!(!tokens.searching, "two claimers of one idle bit");
        tokens.searching = true;
        self.notify(tokens, driver);
    }

    /// Ends the wait the token was set for: the condvar's or the driver's (module docs).
    /// Both after the lock is released.
    ///
    /// The condvar's notification cannot be lost there: the parker checks the tokens and
    /// starts waiting under the lock, so it is either still to check (and will see the token
    /// set under the lock) or already waiting when this notifies. Notifying under the lock
    /// instead woke the parker into a lock this thread still held: it blocked on it again
    /// and waited for the unlock's wake, two more context switches for about two in five
    /// wakes of a lone request on a 2-vCPU VM (BENCHMARKS.md, "2026-12-03, eighth").
    fn notify(&self, tokens: crate::sync::MutexGuard<'_, Tokens>, driver: Option<&DriverUnpark>) {
        let in_driver = tokens.in_driver;
        drop(tokens);
        match driver {
            // With `--cfg magpie_loom_broken` the mark is ignored: a negative control that
            // `loom_notification_reaches_a_worker_parked_in_the_driver` must catch.
            Some(unpark) if in_driver && !cfg!(magpie_loom_broken) => {
                // The waker is a system call, and a late one is harmless (it only ends the
                // holder's next turn early).
                unpark();
            }
            _ => self.condvar.notify_one(),
        }
    }
}
