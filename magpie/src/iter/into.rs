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
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut v = vec![1, 2, 3];
    /// (&mut v).into_par_iter().for_each(|x| *x += 1);
    /// let total: i32 = (&v).into_par_iter().sum();
    /// assert_eq!(total, 9);
    /// // A parallel iterator converts into itself.
    /// let doubled = v.into_par_iter().map(|x| x * 2);
    /// assert_eq!(doubled.into_par_iter().len(), 3);
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let words = ["apple", "fig", "kiwi"];
    /// assert_eq!(words.par_iter().map(|w| w.len()).max(), Some(5));
    /// assert_eq!(words.len(), 3); // only borrowed
    /// ```
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
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::prelude::*;
    ///
    /// let mut grid = [[0u8; 4]; 3];
    /// grid.par_iter_mut()
    ///     .enumerate()
    ///     .for_each(|(row, cells)| cells.fill(row as u8));
    /// assert_eq!(grid[2], [2; 4]);
    /// ```
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
    ///
    /// # Examples
    ///
    /// What [`collect`](ParallelIterator::collect) calls:
    ///
    /// ```
    /// use magpie::iter::FromParallelIterator;
    /// use magpie::prelude::*;
    ///
    /// let lengths = Vec::from_par_iter(["a", "bb", "ccc"].par_iter().map(|s| s.len()));
    /// assert_eq!(lengths, [1, 2, 3]);
    /// ```
    fn from_par_iter<I>(iter: I) -> Self
    where
        I: IntoParallelIterator<Item = T>;
}
