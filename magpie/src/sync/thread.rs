//! Threads, thread-locals and spin hints, from `std` or, under `cfg(shuttle)`, from [shuttle].
//!
//! The runtime spawns its workers and blocking threads, parks `block_on` callers, keeps its
//! current-worker pointer in a thread-local and spins while idle only through these names.
//! In the normal build they *are* the `std` items (re-exports, not wrappers), so they cost
//! exactly what the `std` calls cost. Under `--cfg shuttle` they are shuttle's: every worker
//! becomes a shuttle thread scheduled by the checker, each has its own thread-locals (shuttle
//! runs all its threads on one OS thread, so a `std` thread-local would be shared), and
//! [`spin_loop`] and [`yield_now`] are yield points, without which a spinning worker would
//! look like a livelock to shuttle.
//!
//! Under `--cfg loom` they are loom's, for the same reasons: the runtime-level loom models
//! (`runtime/loom_runtime.rs`) start real runtimes whose workers are loom threads.
//!
//! [shuttle]: https://docs.rs/shuttle

#[cfg(not(any(loom, shuttle)))]
pub(crate) use std::{
    hint::spin_loop,
    thread::{current, park, yield_now, Builder, JoinHandle, Thread},
    thread_local,
};

#[cfg(shuttle)]
pub(crate) use shuttle::{
    hint::spin_loop,
    thread::{current, park, yield_now, Builder, JoinHandle, Thread},
    thread_local,
};

#[cfg(loom)]
pub(crate) use loom::{
    hint::spin_loop,
    thread::{current, park, yield_now, Builder, JoinHandle, Thread},
};

/// `thread_local!` under loom: loom's macro predates `const { .. }` initializers, so this one
/// unwraps them (the value is then built on first access, which loom does anyway).
#[cfg(loom)]
macro_rules! loom_thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr };) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}
#[cfg(loom)]
pub(crate) use loom_thread_local as thread_local;
