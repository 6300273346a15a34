//! Time: the runtime's notion of "later".
//!
//! Today this module holds only the data structure, [`wheel`]: a hierarchical timer wheel
//! (6 levels × 64 slots, 1 ms resolution) that files deadlines and hands back the expired
//! ones. It knows nothing of threads, wakers or clocks; the caller feeds it milliseconds.
//!
//! The async-task issue adds the rest on top of it: `sleep`, `timeout` and `interval`, and
//! the driver, which the worker that parks last takes so that it parks with a timeout to
//! [`wheel::Wheel::next_expiration`] and wakes the tasks whose timers expired (DESIGN.md,
//! "Timers").

#[allow(dead_code)] // Wired in by the async-task issue.
pub(crate) mod wheel;

#[cfg(all(test, not(loom)))]
mod tests_wheel;
