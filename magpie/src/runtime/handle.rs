//! What the drivers know of a runtime.
//!
//! `time/` and `io/` (the timer wheel, the I/O driver, and the futures built on them: `Sleep`,
//! the sockets of `magpie::net`) need four things from the runtime they belong to: its timer
//! driver, its I/O driver, whether it is shutting down, and a way to wake a worker when a new
//! timer is due before the driver's deadline. [`DriverHandle`] is exactly that and nothing
//! else, so those modules do not reach into `Registry` (the queues, the workers, the sleep
//! state), and the scheduler can change without them noticing: the same split tokio makes
//! with its `scheduler::Handle`.

use std::sync::Arc;

use super::registry::Registry;
use super::{context, global};
use crate::time::driver::{Driver as TimerDriver, Rearm};

/// A runtime, as the timer and I/O drivers see it (module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct DriverHandle {
    registry: Arc<Registry>,
}

impl DriverHandle {
    /// The current runtime: the worker's, else the one whose `block_on` runs on this
    /// thread, else the global one (`context.rs`).
    pub(crate) fn current() -> DriverHandle {
        DriverHandle {
            registry: context::current_registry(),
        }
    }

    /// The global runtime's, which never shuts down.
    pub(crate) fn global() -> DriverHandle {
        DriverHandle {
            registry: global::registry().clone(),
        }
    }

    /// The runtime's timers.
    pub(crate) fn timers(&self) -> &TimerDriver {
        &self.registry.timers
    }

    /// Wakes whoever must see a timer filed earlier than the driver's deadline.
    pub(crate) fn rearm_timers(&self, rearm: Rearm) {
        self.registry.rearm_timers(rearm);
    }

    /// Whether the runtime is shutting down (its drivers close, or have closed).
    pub(crate) fn is_terminating(&self) -> bool {
        self.registry.is_terminating()
    }

    /// The runtime's I/O driver.
    #[cfg(not(loom))]
    pub(crate) fn io(&self) -> &crate::io::Handle {
        self.registry.io.handle()
    }
}
