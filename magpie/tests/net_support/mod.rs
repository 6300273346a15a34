//! Helpers shared by the networking tests (`net_tcp.rs`, `net_udp.rs`, `net_unix.rs`,
//! `net_faults.rs`, `net_io_traits.rs`; `mod net_support;` in each): runtimes in an `Arc` for
//! the watchdog, a future that reports when it waits, a reset-on-close option, the process's
//! descriptor count.
//!
//! Not a test binary of its own: Cargo only builds `tests/*.rs`.

// Each test binary uses only some of these.
#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use magpie::Runtime;

pub(crate) fn runtime(workers: usize) -> Arc<Runtime> {
    Arc::new(
        Runtime::builder()
            .worker_threads(workers)
            .build()
            .expect("could not build the runtime"),
    )
}

/// Registered I/O sources of `rt` now.
pub(crate) fn io_sources(rt: &Runtime) -> u64 {
    rt.stats().io_sources
}

/// Wraps a future and raises `waiting` each time it returns `Pending`: a test can wait until
/// a task is really blocked (its waker stored with the driver) before it acts.
pub(crate) struct NoteWaiting<F> {
    inner: Pin<Box<F>>,
    waiting: Arc<AtomicBool>,
}

impl<F: Future> NoteWaiting<F> {
    pub(crate) fn new(inner: F, waiting: &Arc<AtomicBool>) -> NoteWaiting<F> {
        NoteWaiting {
            inner: Box::pin(inner),
            waiting: waiting.clone(),
        }
    }
}

impl<F: Future> Future for NoteWaiting<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let poll = self.inner.as_mut().poll(cx);
        if poll.is_pending() {
            self.waiting.store(true, Relaxed);
        }
        poll
    }
}

/// Counts its polls in `polls`.
pub(crate) struct CountPolls<F> {
    inner: Pin<Box<F>>,
    polls: Arc<AtomicU64>,
}

impl<F: Future> CountPolls<F> {
    pub(crate) fn new(inner: F, polls: &Arc<AtomicU64>) -> CountPolls<F> {
        CountPolls {
            inner: Box::pin(inner),
            polls: polls.clone(),
        }
    }
}

impl<F: Future> Future for CountPolls<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polls.fetch_add(1, Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's minimum Rust).
struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `future` once with a waker that does nothing.
pub(crate) fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    let waker = std::task::Waker::from(Arc::new(Noop));
    future.poll(&mut Context::from_waker(&waker))
}

/// Sets `SO_LINGER` to zero seconds: closing the socket then sends a reset (RST) instead of
/// a FIN, which is how a peer that crashed or gave up looks.
#[cfg(target_os = "linux")]
pub(crate) fn reset_on_close(socket: &impl std::os::unix::io::AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid descriptor, and a `linger` of the size passed, alive for the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(
        rc,
        0,
        "setsockopt(SO_LINGER): {}",
        std::io::Error::last_os_error()
    );
}

/// The process's open file descriptors (`/proc/self/fd`, less the one reading it).
#[cfg(target_os = "linux")]
pub(crate) fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
        - 1
}

/// Fills `buf` with a pattern that differs per `seed`, so a mixed-up echo is caught.
pub(crate) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
