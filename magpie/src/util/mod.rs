//! Small helpers with no concurrency of their own.

pub(crate) mod rand;
pub(crate) mod unwind;

pub(crate) use crossbeam_utils::CachePadded;
