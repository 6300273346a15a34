//! A closure as a future that completes in its first poll: how `submit` and `spawn_blocking`
//! make a task of a plain function.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs its closure on the first poll.
pub(crate) struct Closure<F> {
    f: Option<F>,
}

impl<F> Closure<F> {
    pub(crate) fn new(f: F) -> Closure<F> {
        Closure { f: Some(f) }
    }
}

// The closure is moved out, never pinned.
impl<F> Unpin for Closure<F> {}

impl<F: FnOnce() -> T, T> Future for Closure<F> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<T> {
        let f = self
            .f
            .take()
            .expect("a closure task polled after it completed");
        Poll::Ready(f())
    }
}
