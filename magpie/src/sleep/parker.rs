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
//! Under loom timeouts never fire, so a lost wakeup in the protocol shows up as a deadlock.
//! Under shuttle [`Parker::park`] ignores its timeout (shuttle does not model time, and a
//! real-time deadline would only turn a lost wakeup into a pause): same effect.

use std::time::Duration;

use crate::sync::{lock, wait_until, Condvar, Mutex};

#[derive(Debug, Default)]
struct Tokens {
    plain: bool,
    searching: bool,
}

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

    /// Blocks until any token is present or `timeout` passes. Consumes nothing.
    pub(crate) fn park(&self, timeout: Option<Duration>) {
        // The safety net (and a timer deadline) is real time, which shuttle does not control.
        #[cfg(shuttle)]
        let timeout: Option<Duration> = timeout.and(None);
        let deadline = timeout.map(|t| crate::sync::time::now() + t);
        let mut tokens = lock(&self.tokens);
        while !tokens.plain && !tokens.searching {
            if deadline.is_some_and(|d| crate::sync::time::now() >= d) {
                return;
            }
            tokens = wait_until(&self.condvar, tokens, deadline);
        }
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

    pub(crate) fn unpark_plain(&self) {
        let mut tokens = lock(&self.tokens);
        tokens.plain = true;
        // Notify under the lock, so the wait cannot slip between check and sleep.
        self.condvar.notify_one();
    }

    pub(crate) fn unpark_searching(&self) {
        let mut tokens = lock(&self.tokens);
        debug_assert!(!tokens.searching, "two claimers of one idle bit");
        tokens.searching = true;
        self.condvar.notify_one();
    }
}
