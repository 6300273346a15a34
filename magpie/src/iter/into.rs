//! The conversions into parallel iterators, and `collect`'s target trait.

use super::ParallelIterator;

/// Converts a value into a parallel iterator: `Vec<T>`, `&[T]`, `&mut [T]`, `&Vec<T>`,
/// `&mut Vec<T>`, arrays by reference, integer ranges `a..b` (not `a..=b`), and every
/// parallel iterator itself.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let total: u32 = (1..5u32).into_par_iter().sum();
/// assert_eq!(total, 10);
/// let strings: Vec<String> = vec![1, 2].into_par_iter().map(|i| i.to_string()).collect();
/// assert_eq!(strings, ["1", "2"]);
/// ```
pub trait IntoParallelIterator {
    /// The items.
    type Item: Send;
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;

    /// Converts `self` into a parallel iterator.
    fn into_par_iter(self) -> Self::Iter;
}

impl<I: ParallelIterator> IntoParallelIterator for I {
    type Item = I::Item;
    type Iter = I;

    fn into_par_iter(self) -> I {
        self
    }
}

/// `par_iter()`: a parallel iterator over references into a collection.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let v = vec![1, 2, 3];
/// let sum: i32 = v.par_iter().sum();
/// assert_eq!(sum, 6);
/// ```
pub trait IntoParallelRefIterator<'data> {
    /// The items (references).
    type Item: Send + 'data;
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;

    /// A parallel iterator over `&self`'s items.
    fn par_iter(&'data self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefIterator<'data> for I
where
    &'data I: IntoParallelIterator,
{
    type Item = <&'data I as IntoParallelIterator>::Item;
    type Iter = <&'data I as IntoParallelIterator>::Iter;

    fn par_iter(&'data self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// `par_iter_mut()`: a parallel iterator over mutable references into a collection.
///
/// # Examples
///
/// ```
/// use magpie::prelude::*;
///
/// let mut v = vec![1, 2, 3];
/// v.par_iter_mut().for_each(|x| *x *= 10);
/// assert_eq!(v, [10, 20, 30]);
/// ```
pub trait IntoParallelRefMutIterator<'data> {
    /// The items (mutable references).
    type Item: Send + 'data;
    /// The parallel iterator.
    type Iter: ParallelIterator<Item = Self::Item>;

    /// A parallel iterator over `&mut self`'s items.
    fn par_iter_mut(&'data mut self) -> Self::Iter;
}

impl<'data, I: 'data + ?Sized> IntoParallelRefMutIterator<'data> for I
where
    &'data mut I: IntoParallelIterator,
{
    type Item = <&'data mut I as IntoParallelIterator>::Item;
    type Iter = <&'data mut I as IntoParallelIterator>::Iter;

    fn par_iter_mut(&'data mut self) -> Self::Iter {
        self.into_par_iter()
    }
}

/// A collection that [`ParallelIterator::collect`] can build: `Vec<T>`, in order.
///
/// # Examples
///
/// ```
/// use magpie::iter::FromParallelIterator;
/// use magpie::prelude::*;
///
/// let v = Vec::from_par_iter((0..4u8).into_par_iter());
/// assert_eq!(v, [0, 1, 2, 3]);
/// ```
pub trait FromParallelIterator<T: Send> {
    /// Builds the collection from the items of `iter`.
    fn from_par_iter<I>(iter: I) -> Self
    where
        I: IntoParallelIterator<Item = T>;
}
