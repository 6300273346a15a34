//! The consumers behind [`ParallelIterator`](super::ParallelIterator)'s terminal methods.

pub(crate) mod collect;
pub(crate) mod find;
pub(crate) mod reduce;
