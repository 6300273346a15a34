//! The consumers that can stop early: `find_any` (and through it `any`, `all`,
//! `position_any`), `find_first` and `find_last` (and the `position_*` on top of them).
//!
//! Every piece asks, before it starts and between items, whether the answer is already
//! certain; the bridge asks too before it cuts a piece in two, so once it is, no new piece
//! starts.
//!
//! * `find_any`: certain as soon as any piece finds a match; one shared flag.
//! * `find_first`: a piece can stop once a match is known *to its left*. Each consumer owns
//!   a span `[lo, hi)` of the number line `0..usize::MAX`, and splitting gives the left half
//!   to the left consumer, so spans are ordered as the items are. A piece that finds a match
//!   lowers the shared `best` to its `lo`; a piece whose `lo` is above `best` stops. Only the
//!   pieces left of the best match so far keep running. The answer is still taken from the
//!   reduction, left before right, so the first match wins even when a piece to its right
//!   finished first.
//! * `find_last`: the mirror image, with `best` raised to `lo` and the right result winning.
//!
//! The spans halve at each split; after 64 levels they cannot halve any more and pieces
//! share a `lo`, which only means they cannot stop each other early. Every atomic here is
//! `Relaxed`: the flags only tell pieces to stop, and the results travel back through
//! `join`, which orders them.

use std::cell::Cell;

use crate::iter::plumbing::{Consumer, Folder, Reducer, UnindexedConsumer};
use crate::iter::ParallelIterator;
use crate::sync::atomic::Relaxed;
use crate::sync::{AtomicBool, AtomicUsize};

pub(crate) fn find_any<I, P>(iter: I, predicate: &P) -> Option<I::Item>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync,
{
    let found = AtomicBool::new(false);
    iter.drive_unindexed(FindAnyConsumer {
        predicate,
        found: &found,
    })
}

struct FindAnyConsumer<'f, P> {
    predicate: &'f P,
    found: &'f AtomicBool,
}

impl<'f, P> Clone for FindAnyConsumer<'f, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<'f, P> Copy for FindAnyConsumer<'f, P> {}

impl<'f, T, P> Consumer<T> for FindAnyConsumer<'f, P>
where
    T: Send,
    P: Fn(&T) -> bool + Sync,
{
    type Folder = FindAnyFolder<'f, P, T>;
    type Reducer = FirstSome;
    type Result = Option<T>;

    fn split_at(self, _index: usize) -> (Self, Self, FirstSome) {
        (self, self, FirstSome)
    }

    fn into_folder(self) -> Self::Folder {
        FindAnyFolder {
            predicate: self.predicate,
            found: self.found,
            item: None,
        }
    }

    fn full(&self) -> bool {
        self.found.load(Relaxed)
    }

    fn splits_cheaply(&self) -> bool {
        // Any match will do, wherever the pieces fall.
        true
    }
}

impl<'f, T, P> UnindexedConsumer<T> for FindAnyConsumer<'f, P>
where
    T: Send,
    P: Fn(&T) -> bool + Sync,
{
    fn split_off_left(&self) -> Self {
        *self
    }

    fn to_reducer(&self) -> FirstSome {
        FirstSome
    }
}

struct FindAnyFolder<'f, P, T> {
    predicate: &'f P,
    found: &'f AtomicBool,
    item: Option<T>,
}

impl<'f, T, P> Folder<T> for FindAnyFolder<'f, P, T>
where
    P: Fn(&T) -> bool,
{
    type Result = Option<T>;

    fn consume(mut self, item: T) -> Self {
        if (self.predicate)(&item) {
            self.found.store(true, Relaxed);
            self.item = Some(item);
        }
        self
    }

    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        let found = self.found;
        self.item = search_until(iter, self.predicate, || found.load(Relaxed));
        if self.item.is_some() {
            found.store(true, Relaxed);
        }
        self
    }

    fn complete(self) -> Option<T> {
        self.item
    }

    fn full(&self) -> bool {
        self.item.is_some() || self.found.load(Relaxed)
    }
}

/// How many items [`search_until`] looks at between two questions to its `should_stop`.
const STOP_CHECK_ITEMS: usize = 4;

/// The first item of `iter` for which `predicate` holds, asking `should_stop` before every
/// [`STOP_CHECK_ITEMS`] items and giving up (`None`) once it says yes.
///
/// `should_stop` is one `Relaxed` load (and for `find_first` a compare). The shape of this
/// loop decides the full-scan rows of `magpie-bench iter`, and was measured three ways:
///
/// - A countdown that asked once every 512 items (this module's first version) cost 1.3-1.6
///   × rayon on a full scan of `any`: the branch per item of the countdown stayed.
/// - Asking before each item (`take_while` in front of `Iterator::find`, the shape rayon's
///   loop has) compiles to eight instructions and one taken branch per item. Its speed then
///   depends on where the linker puts it: across a 64-byte boundary it ran a 10M `u64`
///   scan at half speed on an AMD EPYC VM (10.5-12 ms against 6.2-6.7 sequential, the same
///   binary built with `-C llvm-args=-align-loops=64`), so the row went from 0.53 to 2.05
///   × rayon with the build (`release` against fat LTO), and rayon's the other way round.
/// - Asking once per four items, unrolled (this version), takes one taken branch per four
///   items. On one worker, where only the loop counts, the scan took 5.6 ms under `release`
///   and 4.6 under fat LTO (the per-item loop: 11.2 and 6.1), 0.85 and 0.52 × rayon, and it
///   kept its speed with aligned loops too (BENCHMARKS.md, "2026-12-03, fifth").
///
/// Stopping four items late at most costs nothing anyone can see: the flag is set by
/// another piece, which the search cannot wait for anyway.
fn search_until<I, P, S>(iter: I, predicate: &P, mut should_stop: S) -> Option<I::Item>
where
    I: IntoIterator,
    P: Fn(&I::Item) -> bool,
    S: FnMut() -> bool,
{
    let mut rest = iter.into_iter();
    let found = 'search: loop {
        if should_stop() {
            break None;
        }
        for _ in 0..STOP_CHECK_ITEMS {
            match rest.next() {
                None => break 'search None,
                Some(item) if predicate(&item) => break 'search Some(item),
                Some(_) => {}
            }
        }
    };
    // The rest of the piece drops before `found` is returned, so that a panic in one of its
    // destructors drops `found` too: dropped as a local after the result was moved out, it
    // would leak it (rust-lang/rust#47949).
    drop(rest);
    found
}

/// Keeps the left result if it has one: the reducer of `find_any` and `find_first`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FirstSome;

impl<T> Reducer<Option<T>> for FirstSome {
    fn reduce(self, left: Option<T>, right: Option<T>) -> Option<T> {
        left.or(right)
    }
}

/// Keeps the right result if it has one: the reducer of `find_last`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LastSome;

impl<T> Reducer<Option<T>> for LastSome {
    fn reduce(self, left: Option<T>, right: Option<T>) -> Option<T> {
        right.or(left)
    }
}

/// Which end `find_first` / `find_last` wants.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    First,
    Last,
}

pub(crate) fn find_first<I, P>(iter: I, predicate: &P) -> Option<I::Item>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync,
{
    find_end(iter, predicate, End::First)
}

pub(crate) fn find_last<I, P>(iter: I, predicate: &P) -> Option<I::Item>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync,
{
    find_end(iter, predicate, End::Last)
}

fn find_end<I, P>(iter: I, predicate: &P, end: End) -> Option<I::Item>
where
    I: ParallelIterator,
    P: Fn(&I::Item) -> bool + Sync,
{
    let best = AtomicUsize::new(match end {
        End::First => usize::MAX,
        End::Last => 0,
    });
    iter.drive_unindexed(FindEndConsumer {
        predicate,
        best: &best,
        end,
        lo: Cell::new(0),
        hi: usize::MAX,
    })
}

struct FindEndConsumer<'f, P> {
    predicate: &'f P,
    /// The `lo` of the best match found so far (lowest for `First`, highest for `Last`).
    best: &'f AtomicUsize,
    end: End,
    /// This consumer's span, `[lo, hi)`; `lo` is a `Cell` because
    /// [`split_off_left`](UnindexedConsumer::split_off_left) gives away the left half of it
    /// through a shared reference.
    lo: Cell<usize>,
    hi: usize,
}

impl<'f, P> FindEndConsumer<'f, P> {
    fn with_span(&self, lo: usize, hi: usize) -> Self {
        FindEndConsumer {
            predicate: self.predicate,
            best: self.best,
            end: self.end,
            lo: Cell::new(lo),
            hi,
        }
    }

    fn mid(&self) -> usize {
        let lo = self.lo.get();
        lo + (self.hi - lo) / 2
    }
}

/// Whether a match at span start `best` makes one at `lo` irrelevant.
///
/// `#[inline]`: the search loops call it once per item, and they are generic, so they are
/// compiled in the user's crate, where this function (not generic) is otherwise reached by
/// a call per item: without LTO, `position_first` ran at 4.8 × the time of a sequential
/// `position` on one worker, and 2.5 × on two (BENCHMARKS.md, 2026-11-29).
#[inline]
fn beaten(end: End, best: &AtomicUsize, lo: usize) -> bool {
    match end {
        End::First => best.load(Relaxed) < lo,
        End::Last => best.load(Relaxed) > lo,
    }
}

impl<'f, T, P> Consumer<T> for FindEndConsumer<'f, P>
where
    T: Send,
    P: Fn(&T) -> bool + Sync,
{
    type Folder = FindEndFolder<'f, P, T>;
    type Reducer = FindEndReducer;
    type Result = Option<T>;

    fn split_at(self, _index: usize) -> (Self, Self, FindEndReducer) {
        let mid = self.mid();
        (
            self.with_span(self.lo.get(), mid),
            self.with_span(mid, self.hi),
            FindEndReducer(self.end),
        )
    }

    fn into_folder(self) -> Self::Folder {
        FindEndFolder {
            predicate: self.predicate,
            best: self.best,
            end: self.end,
            lo: self.lo.get(),
            item: None,
        }
    }

    fn full(&self) -> bool {
        beaten(self.end, self.best, self.lo.get())
    }

    fn splits_cheaply(&self) -> bool {
        // The piece reductions keep the match furthest to the wanted end.
        true
    }
}

impl<'f, T, P> UnindexedConsumer<T> for FindEndConsumer<'f, P>
where
    T: Send,
    P: Fn(&T) -> bool + Sync,
{
    fn split_off_left(&self) -> Self {
        let mid = self.mid();
        let left = self.with_span(self.lo.get(), mid);
        self.lo.set(mid);
        left
    }

    fn to_reducer(&self) -> FindEndReducer {
        FindEndReducer(self.end)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct FindEndReducer(End);

impl<T> Reducer<Option<T>> for FindEndReducer {
    fn reduce(self, left: Option<T>, right: Option<T>) -> Option<T> {
        match self.0 {
            End::First => FirstSome.reduce(left, right),
            End::Last => LastSome.reduce(left, right),
        }
    }
}

struct FindEndFolder<'f, P, T> {
    predicate: &'f P,
    best: &'f AtomicUsize,
    end: End,
    lo: usize,
    item: Option<T>,
}

impl<'f, P, T> FindEndFolder<'f, P, T> {
    fn record(&self) {
        match self.end {
            End::First => self.best.fetch_min(self.lo, Relaxed),
            End::Last => self.best.fetch_max(self.lo, Relaxed),
        };
    }
}

impl<'f, T, P> Folder<T> for FindEndFolder<'f, P, T>
where
    P: Fn(&T) -> bool,
{
    type Result = Option<T>;

    fn consume(mut self, item: T) -> Self {
        let wanted = match self.end {
            // The first match of this piece is its answer; `full` stops it after that.
            End::First => self.item.is_none(),
            // The last match is: keep replacing.
            End::Last => true,
        };
        if wanted && (self.predicate)(&item) {
            self.item = Some(item);
            self.record();
        }
        self
    }

    fn consume_iter<I>(mut self, iter: I) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        let (end, best, lo) = (self.end, self.best, self.lo);
        let iter = iter.into_iter();
        match end {
            End::First => {
                if self.item.is_none() {
                    self.item = search_until(iter, self.predicate, || beaten(end, best, lo));
                }
            }
            End::Last => {
                // A loop with the match in a local, rather than `filter(..).last()`, whose
                // fold leaks the match when a later item's destructor panics (as above).
                let mut last = None;
                for item in iter {
                    if beaten(end, best, lo) {
                        break;
                    }
                    if (self.predicate)(&item) {
                        last = Some(item);
                    }
                }
                if last.is_some() {
                    self.item = last;
                }
            }
        }
        if self.item.is_some() {
            self.record();
        }
        self
    }

    fn complete(self) -> Option<T> {
        self.item
    }

    fn full(&self) -> bool {
        (self.end == End::First && self.item.is_some()) || beaten(self.end, self.best, self.lo)
    }
}

#[cfg(test)]
mod tests {
    use super::{search_until, STOP_CHECK_ITEMS};
    use std::cell::Cell;

    #[test]
    fn search_until_finds_the_first_match_and_stops_at_the_end() {
        let items = [3, 5, 8, 9, 10, 12, 14, 15, 16];
        for (target, expected) in [(8, Some(8)), (16, Some(16)), (3, Some(3)), (4, None)] {
            let found = search_until(items, &|&x: &i32| x == target, || false);
            assert_eq!(found, expected, "target {target}");
        }
        let empty: [i32; 0] = [];
        assert_eq!(search_until(empty, &|_: &i32| true, || false), None);
    }

    #[test]
    fn search_until_gives_up_within_one_check_of_being_told_to_stop() {
        // The stop flag rises after `asks` questions; no item matches.
        for asks in 0..5 {
            let looked_at = Cell::new(0usize);
            let questions = Cell::new(0usize);
            let found = search_until(
                0..1000,
                &|_: &i32| {
                    looked_at.set(looked_at.get() + 1);
                    false
                },
                || {
                    questions.set(questions.get() + 1);
                    questions.get() > asks
                },
            );
            assert_eq!(found, None);
            assert_eq!(questions.get(), asks + 1, "it stops at the first yes");
            assert_eq!(
                looked_at.get(),
                asks * STOP_CHECK_ITEMS,
                "items looked at before the stop was seen"
            );
        }
    }

    #[test]
    fn search_until_drops_every_item_it_takes_once() {
        use std::rc::Rc;
        let counted = Rc::new(());
        let items: Vec<Rc<()>> = (0..10).map(|_| Rc::clone(&counted)).collect();
        let found = search_until(items, &|_: &Rc<()>| false, || false);
        assert!(found.is_none());
        assert_eq!(Rc::strong_count(&counted), 1, "every item was dropped");
        let items: Vec<Rc<()>> = (0..10).map(|_| Rc::clone(&counted)).collect();
        let stop_after_first_check = Cell::new(false);
        let found = search_until(items, &|_: &Rc<()>| false, || {
            stop_after_first_check.replace(true)
        });
        assert!(found.is_none());
        assert_eq!(
            Rc::strong_count(&counted),
            1,
            "the items never looked at were dropped too"
        );
    }
}
