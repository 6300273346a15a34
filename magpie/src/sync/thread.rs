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
//! loom never runs the runtime (`lib.rs` compiles it out under `cfg(loom)`), so loom builds
//! use the `std` names here.
//!
//! [shuttle]: https://docs.rs/shuttle

#[cfg(not(shuttle))]
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
