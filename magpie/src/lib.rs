//! magpie: a work-stealing runtime for fork-join parallelism.
//!
//! One pool of worker threads runs fork-join code: [`join`] two closures, or [`scope`] any
//! number of jobs that borrow from the stack. (Async tasks, parallel iterators and a task pool
//! come next on the same workers; see the project README.)
//!
//! # A tour
//!
//! ```
//! // The free functions use the global runtime (one worker per CPU) unless called on a
//! // worker of another runtime.
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
//! // Every worker counts what it did.
//! for (i, w) in rt.stats().workers.iter().enumerate() {
//!     println!("worker {i}: {} jobs, {} stolen", w.jobs_executed, w.jobs_stolen);
//! }
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
//! about as much as two function calls. Idle workers spin briefly, then park; a small
//! protocol (searching count, idle bitmap) wakes exactly as many as there is work for.
//! ARCHITECTURE.md in the repository tells the whole story.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(loom, allow(dead_code, unused_imports, unreachable_pub))]

mod queue;
mod sleep;
mod sync;
pub mod task;
pub mod time;
mod util;

#[cfg(not(loom))]
mod join;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod stats;

#[cfg(not(loom))]
pub use join::{join, scope, Scope};
#[cfg(not(loom))]
pub use runtime::{
    block_on, current_num_workers, current_worker_index, default_runtime, spawn, spawn_blocking,
    submit, BuildError, Builder, Runtime, SubmitError, MAX_WORKERS,
};
pub use task::{JoinError, JoinHandle};
#[cfg(not(loom))]
pub use stats::{Stats, WorkerStats};
