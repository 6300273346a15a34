//! Small helpers with no concurrency of their own.

#[cfg(all(test, loom))]
pub(crate) mod loom_support;
pub(crate) mod rand;
pub(crate) mod unwind;

pub(crate) use crossbeam_utils::CachePadded;
