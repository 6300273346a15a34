//! The adapters: parallel iterators built on other parallel iterators.
//!
//! Each file holds one adapter (or two that differ only in their closure): the iterator type
//! users see, and the producer (for indexed adapters) and consumer (for all) it wraps around
//! its base's.

mod chain;
mod cloned;
mod enumerate;
mod filter;
mod flat_map;
mod fold;
mod len;
mod map;
mod zip;

pub use chain::Chain;
pub use cloned::{Cloned, Copied};
pub use enumerate::Enumerate;
pub use filter::{Filter, FilterMap};
pub use flat_map::{FlatMap, FlatMapIter, Flatten, FlattenIter};
pub use fold::Fold;
pub use len::{MaxLen, MinLen};
pub use map::{Inspect, Map};
pub use zip::Zip;
