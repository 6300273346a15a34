//! The traits that put `par_iter()`, `into_par_iter()`, `par_chunks()` and `par_sort*()` on
//! slices, `Vec`s and ranges: `use magpie::prelude::*;`, as with `rayon::prelude::*`.
//!
//! # Examples
//!
//! ```
//! use magpie::prelude::*;
//!
//! let mut v: Vec<u32> = (0..1000).rev().collect();
//! v.par_sort();
//! assert!(v.par_iter().zip(1..1000u32).all(|(&a, b)| a + 1 == b));
//! ```

pub use crate::iter::slice::{ParallelSlice, ParallelSliceMut};
pub use crate::iter::{
    FromParallelIterator, IndexedParallelIterator, IntoParallelIterator, IntoParallelRefIterator,
    IntoParallelRefMutIterator, ParallelIterator,
};
