//! magpie: a work-stealing runtime for fork-join parallelism and async tasks, on one pool of
//! workers.
//!
//! One pool of worker threads runs fork-join code ([`join`](fn@join) two closures, or
//! [`scope`] any number of jobs that borrow from the stack), async tasks ([`spawn`],
//! [`block_on`](fn@block_on), [`JoinHandle`], [`time`]), and submitted closures
//! ([`Runtime::submit`], [`Runtime::submit_to`], or without handles [`Runtime::execute`]). An
//! async task may call `join` directly, and parallel code may spawn futures: both worlds
//! share the workers, the queues and the statistics. Closures that block go to a separate,
//! bounded pool ([`spawn_blocking`]). Sockets ([`net`], tokio's API) and descriptors of your own
//! ([`io::AsyncFd`]) wait on an I/O driver that the workers turn themselves; features
//! `tokio-io` and `futures-io` add the ecosystem's `AsyncRead` and `AsyncWrite` to the
//! streams.
//!
//! # A tour
//!
//! ```
//! use std::time::Duration;
//!
//! // The free functions use the global runtime (one worker per CPU) unless called on a
//! // worker of another runtime, or inside another runtime's `block_on`.
//! fn fib(n: u64) -> u64 {
//!     if n < 2 {
//!         return n;
//!     }
//!     let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
//!     a + b
//! }
//! assert_eq!(fib(20), 6765);
//!
//! // A runtime of your own, with its own workers and statistics.
//! let rt = magpie::Runtime::builder().worker_threads(2).build()?;
//! assert_eq!(rt.install(|| fib(20)), 6765);
//!
//! // Scoped jobs may borrow from the caller's stack.
//! let mut halves = [0u64; 2];
//! let (left, right) = halves.split_at_mut(1);
//! rt.install(|| {
//!     magpie::scope(|s| {
//!         s.spawn(|_| left[0] = fib(10));
//!         s.spawn(|_| right[0] = fib(11));
//!     })
//! });
//! assert_eq!(halves, [55, 89]);
//!
//! // Async tasks on the same workers; a task may run fork-join code directly.
//! let total = rt.block_on(async {
//!     let requests: Vec<_> = (20..25)
//!         .map(|n| magpie::spawn(async move { fib(n) }))
//!         .collect();
//!     magpie::time::sleep(Duration::from_millis(1)).await;
//!     let mut total = 0;
//!     for request in requests {
//!         total += request.await.unwrap();
//!     }
//!     total
//! });
//! assert_eq!(total, 6765 + 10946 + 17711 + 28657 + 46368);
//!
//! // Closures as tasks, on any worker or a chosen one; a panic comes back as a JoinError.
//! assert_eq!(rt.submit_to(1, || 6 * 7).unwrap().join().unwrap(), 42);
//! let failed = rt.submit(|| -> u32 { panic!("bad input") }).join().unwrap_err();
//! assert!(failed.is_panic());
//!
//! // Every worker counts what it did.
//! for (i, w) in rt.stats().workers.iter().enumerate() {
//!     println!(
//!         "worker {i}: {} jobs, {} tasks, {} stolen",
//!         w.jobs_executed, w.tasks_executed, w.jobs_stolen + w.tasks_stolen
//!     );
//! }
//! # Ok::<(), magpie::BuildError>(())
//! ```
//!
//! # A task pool you can watch and steer
//!
//! ```
//! // Two workers now, up to four later; every event recorded for a Perfetto trace.
//! let rt = magpie::Runtime::builder()
//!     .worker_threads(2)
//!     .max_workers(4)
//!     .trace(true)
//!     .build()?;
//! for i in 0..100u64 {
//!     // To the less loaded of two workers picked at random.
//!     drop(rt.submit_balanced(move || i * i));
//! }
//! rt.set_active_workers(4).expect("1 to 4");
//! rt.wait_idle(); // every task has finished
//! let stats = rt.stats();
//! assert_eq!(stats.tasks_executed(), 100);
//! println!("steal rate {:.2}, utilization {:.2}", stats.steal_rate(), stats.utilization());
//! let trace = std::env::temp_dir().join(format!("magpie-tour-{}.json", std::process::id()));
//! rt.trace_export(&trace).expect("writable"); // open it in ui.perfetto.dev
//! # std::fs::remove_file(&trace).unwrap();
//! # Ok::<(), magpie::BuildError>(())
//! ```
//!
//! # How it works
//!
//! Each worker owns a Chase-Lev deque of jobs. `join(a, b)` pushes `b`, runs `a`, then pops
//! `b` back and runs it, unless an idle worker stole it meanwhile. The owner's push and pop
//! cost no hardware fence: the thieves pay for synchronisation instead, with a process-wide
//! `membarrier`. Once a worker offers a few stealable jobs (its oldest, largest pieces of
//! work), deeper joins skip the deque and run both halves inline, which makes a `join` cost
//! about as much as two function calls.
//!
//! Tasks follow tokio's scheduler: a task woken by the task running on a worker goes to that
//! worker's LIFO slot and runs next; others queue in a 256-slot ring, FIFO, overflowing half
//! to a global inject queue, which each worker checks every 8 to 255 tasks depending on how
//! long its tasks take. Idle workers steal half a ring at a time, and, unlike tokio, also
//! rescue a task left in the LIFO slot of a worker stuck in a long poll. Idle workers spin
//! briefly, then park; a small protocol (searching count, idle bitmap) wakes exactly as many
//! as there is work for, and the last one to park drives the timers. ARCHITECTURE.md in the
//! repository tells the whole story.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(loom, allow(dead_code, unused_imports, unreachable_pub))]

pub mod io;
mod queue;
mod sleep;
mod sync;
pub mod task;
pub mod time;
mod util;

#[cfg(not(loom))]
pub mod iter;
mod join;
#[cfg(not(any(loom, shuttle)))]
pub mod net;
#[cfg(not(loom))]
pub mod prelude;
mod runtime;
mod stats;

pub use join::{join, scope, Scope};
pub use runtime::{
    block_on, current_num_workers, current_worker_index, default_runtime, execute, spawn,
    spawn_blocking, submit, try_default_runtime, ActiveWorkersError, BuildError, Builder, Runtime,
    StallInfo, SubmitError, UnhandledPanic, MAX_WORKERS, MIN_STACK_SIZE,
};
pub use stats::{Stats, WorkerStats};
pub use sync::barrier::{BarrierMode, AUTO_ASYMMETRIC_MAX_CPUS};
pub use task::{JoinError, JoinHandle};

/// What `magpie-bench bounds` measures of magpie's own algorithms: not part of magpie's API,
/// and free to change with them. Not under loom, which leaves the iterators out.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod __bench {
    pub use crate::iter::sort::timed_tree as par_sort_unstable_timed_tree;
}

/// Hooks for the shuttle scenarios (`tests/shuttle.rs`), only under `cfg(shuttle)`: not part
/// of magpie's API.
#[cfg(shuttle)]
#[doc(hidden)]
pub mod __shuttle {
    pub use crate::io::fake_driver::FakeSource;
}
