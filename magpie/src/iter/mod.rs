//! Parallel iterators and parallel sorting: Rayon's data-parallel API on magpie's pool.
//!
//! Code written against `rayon::prelude::*` moves over by changing the import to
//! [`magpie::prelude::*`](crate::prelude):
//!
//! ```
//! use magpie::prelude::*;
//!
//! let v: Vec<u64> = (0..100_000).collect();
//! let sum_of_squares: u64 = v.par_iter().map(|&x| x * x).sum();
//! assert_eq!(sum_of_squares, v.iter().map(|&x| x * x).sum());
//!
//! let mut words = vec!["pear", "fig", "apple"];
//! words.par_sort_unstable();
//! assert_eq!(words, ["apple", "fig", "pear"]);
//! ```
//!
//! # A tour
//!
//! * **Sources**: `par_iter()` / `par_iter_mut()` on slices, `Vec`s and arrays;
//!   `into_par_iter()` on a `Vec` (moving the items out) and on integer ranges;
//!   [`par_chunks`](slice::ParallelSlice::par_chunks) /
//!   [`par_chunks_mut`](slice::ParallelSliceMut::par_chunks_mut).
//! * **Adapters** ([`ParallelIterator`]): `map`, `inspect`, `copied`, `cloned`, `filter`,
//!   `filter_map`, `flat_map`, `flat_map_iter`, `flatten`, `flatten_iter`, `chain`, `fold`;
//!   and on [`IndexedParallelIterator`]s (those that know their length): `enumerate`, `zip`,
//!   `with_min_len`, `with_max_len`.
//! * **Consumers**: `for_each`, `reduce`, `reduce_with`, `sum`, `product`, `count`, `min`,
//!   `max`, `min_by`, `max_by`, `min_by_key`, `max_by_key`, `collect` (into a `Vec`, in
//!   order), `collect_into_vec`; and the ones that stop early: `any`, `all`, `find_any`,
//!   `find_first`, `find_last`, `position_any`, `position_first`, `position_last`.
//! * **Sorting** ([`slice::ParallelSliceMut`]): `par_sort`, `par_sort_by`,
//!   `par_sort_by_key` (stable: parallel merge sort) and `par_sort_unstable`,
//!   `par_sort_unstable_by`, `par_sort_unstable_by_key` (parallel pattern-defeating
//!   quicksort).
//!
//! # How the work is split
//!
//! A consumer cuts its input into about twice as many pieces as there are workers, and cuts
//! a piece again whenever another worker steals it (its owner was busy, so the load is
//! uneven). Tiny inputs and huge ones, cheap items and costly ones, need no tuning; an input
//! too short to cut runs on the calling thread without touching the pool.
//! [`with_min_len`](IndexedParallelIterator::with_min_len) and
//! [`with_max_len`](IndexedParallelIterator::with_max_len) bound the pieces when you know
//! better. [`plumbing`] has the traits underneath, and `iter/plumbing/README.md` the design.
//!
//! # Where it runs
//!
//! On the current runtime, as [`join`](fn@crate::join) does: the worker's runtime on a worker
//! (inside `join`, `scope`, `install`, or an async task: a parallel iterator in a task is
//! fine, and its pieces run as jobs on the same pool), the runtime whose `block_on` runs on
//! this thread, else the global one. The calling thread waits until every piece is done.

mod adapters;
mod consume;
mod indexed;
mod into;
mod par_iter;
pub mod plumbing;
pub mod range;
pub mod slice;
pub(crate) mod sort;
pub mod vec;

pub use adapters::{
    Chain, Cloned, Copied, Enumerate, Filter, FilterMap, FlatMap, FlatMapIter, Flatten,
    FlattenIter, Fold, Inspect, Map, MaxLen, MinLen, Zip,
};
pub use indexed::IndexedParallelIterator;
pub use into::{
    FromParallelIterator, IntoParallelIterator, IntoParallelRefIterator, IntoParallelRefMutIterator,
};
pub use par_iter::ParallelIterator;
