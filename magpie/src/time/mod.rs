//! Timers: [`sleep`](fn@sleep), [`sleep_until`], [`timeout`](fn@timeout),
//! [`interval`](fn@interval).
//!
//! Each runtime files its timers in a hierarchical timer wheel (`wheel`: 6 levels × 64
//! slots, 1 ms resolution, O(1) insert and cancel). There is no timer thread: the worker that
//! parks while nobody drives the wheel parks with a timeout to the next deadline and fires
//! what is due when it wakes, and busy workers fire due timers between tasks (`driver`).
//! Timers never fire early, and dropping a timer future removes its entry at once. A
//! runtime that shuts down wakes every timer still filed with it, and a timer polled again
//! moves to a runtime that still runs ([`Sleep`]). Wakers are user code: none runs under the
//! wheel's lock, and a waker that panics when woken or dropped is contained (`driver`).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use magpie::time::{sleep, timeout};
//!
//! let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
//! let answer = rt.block_on(async {
//!     let slow = async {
//!         sleep(Duration::from_secs(60)).await;
//!         1
//!     };
//!     timeout(Duration::from_millis(5), slow).await.unwrap_or(0)
//! });
//! assert_eq!(answer, 0);
//! ```

#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod driver;
mod interval;
mod sleep;
mod timeout;
// Some of the wheel's accessors serve only its tests.
#[cfg_attr(any(loom, not(test)), allow(dead_code))]
pub(crate) mod wheel;

pub use interval::{interval, interval_at, Interval};
pub use sleep::{sleep, sleep_until, Sleep};
pub use timeout::{timeout, timeout_at, Elapsed, Timeout};

#[cfg(all(test, not(loom)))]
mod tests_wheel;
