//! The parallel sorts are sound for every element type and every comparator (issue 17).
//!
//! Every public sort (`par_sort`, `par_sort_by`, `par_sort_by_key` and their `_unstable`
//! twins) runs on lengths either side of the cutoffs (up to 4,096: sequential; from 8,192
//! and 16,384: one and two merge levels on 2 workers) and well into the parallel path, on
//! pools of 1 to 4 workers, with elements that notice what a sort does to them:
//!
//! * **Interior mutability** ([`Counted`]): each comparison (or key call) increments a `Cell`
//!   counter in the element it looks at. Every element must come out as the last version the
//!   comparator saw, so the counters add up to the number of looks: twice the comparator
//!   calls. A sort that compares an element after bit-copying it, and keeps the copy, loses
//!   updates (issue 17: the two-ended merge did).
//! * **Ownership through a `Cell`** ([`Boxed`]): each look replaces the element's
//!   `Box<u64>` with a new one and frees the old. A stale copy kept in the output owns a freed
//!   box: the values read back are garbage, and the drop is a double free (with the default
//!   allocator, the process aborts).
//! * **A comparator that panics** at its k-th call: the panic reaches the caller with its
//!   payload, and the slice still holds every element exactly once, each the last version
//!   the comparator saw (as `std`'s sorts guarantee); each element is dropped exactly once.
//! * **No order at all** (random answers): no crash; the sorts may panic (as `std`'s do when
//!   they notice), and the slice is still a permutation, each element dropped once.
//!
//! `MAGPIE_SORT_CASES` sets the cases per property (default 16, each running all six sorts on
//! both element types).

mod common;

use std::cell::Cell;
use std::cmp::Ordering;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Once, OnceLock};

use magpie::prelude::*;
use magpie::Runtime;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Pools and configuration
// ---------------------------------------------------------------------------------------------

/// The pool of `workers` workers (1 to 4), built once for the whole test binary.
fn pool(workers: usize) -> &'static Runtime {
    static POOLS: OnceLock<Vec<Runtime>> = OnceLock::new();
    &POOLS.get_or_init(|| (1..=4).map(common::runtime).collect())[workers - 1]
}

/// Cases per property: `MAGPIE_SORT_CASES`, else 16 (each case runs all six sorts).
fn config() -> ProptestConfig {
    let cases = std::env::var("MAGPIE_SORT_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    ProptestConfig {
        failure_persistence: None,
        max_shrink_iters: 256,
        ..ProptestConfig::with_cases(cases)
    }
}

/// Lengths at and around the cutoffs, and some past them, that the strategy picks half the
/// time.
const EDGE_LENGTHS: [usize; 14] = [
    0, 1, 2, 3, 31, 4095, 4096, 4097, 8191, 8192, 8193, 16383, 16385, 40_009,
];

fn length() -> impl Strategy<Value = usize> {
    prop_oneof![prop::sample::select(EDGE_LENGTHS.to_vec()), 0..=40_000usize]
}

/// Keys below this: 1 (all equal) to `u32::MAX` (nearly distinct).
fn modulus() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![1u32, 2, 16, 1000, u32::MAX])
}

/// The shape of the input: which paths of the sorts it takes.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Random,
    Sorted,
    Reversed,
    /// Ascending runs of 97: many short runs to merge.
    Sawtooth,
}

fn shape() -> impl Strategy<Value = Shape> {
    prop::sample::select(vec![
        Shape::Random,
        Shape::Random,
        Shape::Sorted,
        Shape::Reversed,
        Shape::Sawtooth,
    ])
}

/// `n` keys of `shape` below `modulus`.
fn keys(shape: Shape, n: usize, modulus: u32, seed: u64) -> Vec<u32> {
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    };
    let n32 = n as u32;
    match shape {
        Shape::Random => (0..n).map(|_| next() % modulus).collect(),
        Shape::Sorted => (0..n32).map(|i| i % modulus).collect(),
        Shape::Reversed => (0..n32).rev().map(|i| i % modulus).collect(),
        Shape::Sawtooth => (0..n32).map(|i| (i % 97) % modulus).collect(),
    }
}

/// The payload of the comparator's planned panic.
#[derive(Debug)]
struct ComparatorPanic;

/// Keeps the planned panics (and `std`'s complaints about the random order) out of the
/// test output; any other panic is reported as usual.
fn quiet_planned_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let planned = payload.is::<ComparatorPanic>()
                || payload
                    .downcast_ref::<&str>()
                    .is_some_and(|s| s.contains("total order"))
                || payload
                    .downcast_ref::<String>()
                    .is_some_and(|s| s.contains("total order"));
            if !planned {
                previous(info);
            }
        }));
    });
}

// ---------------------------------------------------------------------------------------------
// Instrumented elements
// ---------------------------------------------------------------------------------------------

/// What the comparator does, and what it and the elements count.
struct Ctx {
    /// Comparator calls, key calls for the `_by_key` sorts.
    calls: AtomicUsize,
    /// Looks at an element by a comparator or key call: twice the comparisons.
    looks: AtomicUsize,
    /// The call that panics (counted from 1); 0 for none.
    panic_at: usize,
    /// Answer at random instead of by key.
    chaos: bool,
    /// How many times each element (by id) was dropped.
    drops: Vec<AtomicUsize>,
}

impl Ctx {
    fn new(n: usize, panic_at: usize, chaos: bool) -> Ctx {
        Ctx {
            calls: AtomicUsize::new(0),
            looks: AtomicUsize::new(0),
            panic_at,
            chaos,
            drops: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// Counts a call; panics if it is the planned one. Returns the call's number.
    fn call(&self) -> usize {
        let call = self.calls.fetch_add(1, Relaxed) + 1;
        if call == self.panic_at {
            panic::panic_any(ComparatorPanic);
        }
        call
    }

    /// A pseudo-random value from the call number: the answers of the random order.
    fn noise(call: usize, salt: u32) -> u32 {
        let x = (call as u64 ^ u64::from(salt) << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x >> 40) as u32
    }

    fn compare<'c>(&self, a: &impl Elem<'c>, b: &impl Elem<'c>) -> Ordering {
        let call = self.call();
        let (ka, kb) = (a.look(), b.look());
        if self.chaos {
            (Ctx::noise(call, 0) % 3).cmp(&1)
        } else {
            ka.cmp(&kb)
        }
    }

    fn key<'c>(&self, a: &impl Elem<'c>) -> u32 {
        let call = self.call();
        let k = a.look();
        if self.chaos {
            Ctx::noise(call, k)
        } else {
            k
        }
    }
}

/// An element whose comparisons go through a `Ctx` it borrows.
trait Elem<'c>: Ord + Send + Sized {
    fn new(key: u32, id: u32, ctx: &'c Ctx) -> Self;
    /// The key, as a comparison reads it: counted, and it changes the element.
    fn look(&self) -> u32;
    /// The key and the id, read for checking (not counted, no change).
    fn inspect(&self) -> (u32, u32);
    /// The element's own count of looks, if it keeps one.
    fn seen(&self) -> Option<usize>;
    fn ctx(&self) -> &'c Ctx;
}

/// An element that counts the looks at it in a `Cell`.
struct Counted<'c> {
    key: u32,
    id: u32,
    seen: Cell<usize>,
    ctx: &'c Ctx,
}

impl<'c> Elem<'c> for Counted<'c> {
    fn new(key: u32, id: u32, ctx: &'c Ctx) -> Self {
        Counted {
            key,
            id,
            seen: Cell::new(0),
            ctx,
        }
    }

    fn look(&self) -> u32 {
        self.seen.set(self.seen.get() + 1);
        self.ctx.looks.fetch_add(1, Relaxed);
        self.key
    }

    fn inspect(&self) -> (u32, u32) {
        (self.key, self.id)
    }

    fn seen(&self) -> Option<usize> {
        Some(self.seen.get())
    }

    fn ctx(&self) -> &'c Ctx {
        self.ctx
    }
}

/// An element whose value, `key << 32 | id`, lives in a box that every look replaces with a
/// new one (allocated before the old one is freed, so at another address).
struct Boxed<'c> {
    id: u32,
    slot: Cell<Option<Box<u64>>>,
    ctx: &'c Ctx,
}

impl Boxed<'_> {
    fn take(&self) -> Box<u64> {
        self.slot
            .take()
            .expect("an element's box is only out during a look")
    }
}

impl<'c> Elem<'c> for Boxed<'c> {
    fn new(key: u32, id: u32, ctx: &'c Ctx) -> Self {
        Boxed {
            id,
            slot: Cell::new(Some(Box::new(u64::from(key) << 32 | u64::from(id)))),
            ctx,
        }
    }

    fn look(&self) -> u32 {
        let old = self.take();
        let value = *old;
        self.slot.set(Some(Box::new(value)));
        drop(old);
        self.ctx.looks.fetch_add(1, Relaxed);
        (value >> 32) as u32
    }

    fn inspect(&self) -> (u32, u32) {
        let boxed = self.take();
        let value = *boxed;
        self.slot.set(Some(boxed));
        ((value >> 32) as u32, value as u32)
    }

    fn seen(&self) -> Option<usize> {
        None
    }

    fn ctx(&self) -> &'c Ctx {
        self.ctx
    }
}

/// `Ord` through the `Ctx`: every comparison is a counted call that looks at both elements.
/// `par_sort` and `par_sort_unstable` call `lt`, which calls `partial_cmp`, which calls this.
macro_rules! ord_through_ctx {
    ($t:ident) => {
        impl PartialEq for $t<'_> {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == Ordering::Equal
            }
        }

        impl Eq for $t<'_> {}

        impl PartialOrd for $t<'_> {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $t<'_> {
            fn cmp(&self, other: &Self) -> Ordering {
                self.ctx.compare(self, other)
            }
        }

        impl Drop for $t<'_> {
            fn drop(&mut self) {
                self.ctx.drops[self.id as usize].fetch_add(1, Relaxed);
            }
        }
    };
}

ord_through_ctx!(Counted);
ord_through_ctx!(Boxed);

// ---------------------------------------------------------------------------------------------
// The sorts and the checks
// ---------------------------------------------------------------------------------------------

/// The public sorts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    Sort,
    SortBy,
    SortByKey,
    Unstable,
    UnstableBy,
    UnstableByKey,
}

const ENTRIES: [Entry; 6] = [
    Entry::Sort,
    Entry::SortBy,
    Entry::SortByKey,
    Entry::Unstable,
    Entry::UnstableBy,
    Entry::UnstableByKey,
];

impl Entry {
    fn stable(self) -> bool {
        matches!(self, Entry::Sort | Entry::SortBy | Entry::SortByKey)
    }

    fn sort<'c, E: Elem<'c>>(self, v: &mut [E]) {
        match self {
            Entry::Sort => v.par_sort(),
            Entry::SortBy => v.par_sort_by(|a, b| a.cmp(b)),
            Entry::SortByKey => v.par_sort_by_key(|a| a.ctx().key(a)),
            Entry::Unstable => v.par_sort_unstable(),
            Entry::UnstableBy => v.par_sort_unstable_by(|a, b| a.cmp(b)),
            Entry::UnstableByKey => v.par_sort_unstable_by_key(|a| a.ctx().key(a)),
        }
    }
}

/// One sort of one input.
#[derive(Clone, Copy, Debug)]
struct Case {
    entry: Entry,
    workers: usize,
    n: usize,
    shape: Shape,
    modulus: u32,
    seed: u64,
    /// The comparator (or key) call that panics; 0 for none.
    panic_at: usize,
    chaos: bool,
}

/// Sorts the case's input of `E`s on its pool and checks everything the module doc lists.
/// Returns how many comparator (or key) calls the sort made.
fn run_case<'c, E: Elem<'c>>(case: Case, ctx: &'c Ctx) -> Result<usize, TestCaseError> {
    quiet_planned_panics();
    let what = format!("{case:?}");
    let input = keys(case.shape, case.n, case.modulus, case.seed);
    let mut v: Vec<E> = input
        .iter()
        .enumerate()
        .map(|(id, &key)| E::new(key, id as u32, ctx))
        .collect();
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        pool(case.workers).install(|| case.entry.sort(&mut v))
    }));
    let calls = ctx.calls.load(Relaxed);
    match &result {
        Ok(()) => prop_assert!(
            case.chaos || case.panic_at == 0 || case.panic_at > calls,
            "no panic after {calls} calls: {what}"
        ),
        Err(payload) => {
            if !case.chaos {
                prop_assert!(
                    payload.is::<ComparatorPanic>(),
                    "another panic than the comparator's: {what}"
                );
            }
            prop_assert!(
                case.chaos || (1..=calls).contains(&case.panic_at),
                "unplanned panic: {what}"
            );
        }
    }

    // A permutation: every id once, each with its own key. (A stale `Boxed` copy would read
    // a freed box here: garbage, or an error under AddressSanitizer.)
    let mut ids = Vec::with_capacity(v.len());
    for e in &v {
        let (key, id) = e.inspect();
        prop_assert!(
            (id as usize) < input.len() && input[id as usize] == key,
            "an element with a wrong key or id ({key}, {id}): {what}"
        );
        ids.push(id);
    }
    ids.sort_unstable();
    prop_assert!(
        ids.iter().copied().eq(0..case.n as u32),
        "not a permutation: {what}"
    );

    // Every look kept: each element is the last version the comparator saw.
    let seen: Option<usize> = v.iter().map(|e| e.seen()).sum();
    if let Some(seen) = seen {
        let looks = ctx.looks.load(Relaxed);
        prop_assert_eq!(seen, looks, "looks lost by the sort: {}", what);
    }

    // Sorted (and stable) when nothing went wrong.
    if result.is_ok() && !case.chaos {
        let pairs: Vec<(u32, u32)> = v.iter().map(|e| e.inspect()).collect();
        let ordered = pairs.windows(2).all(|w| {
            w[0].0 < w[1].0 || (w[0].0 == w[1].0 && (!case.entry.stable() || w[0].1 < w[1].1))
        });
        prop_assert!(ordered, "not sorted (stably, for a stable sort): {what}");
    }

    drop(v);
    for (id, drops) in ctx.drops.iter().enumerate() {
        let drops = drops.load(Relaxed);
        prop_assert_eq!(drops, 1, "element {} dropped {} times: {}", id, drops, what);
    }
    Ok(calls)
}

/// Runs `case` on [`Counted`] elements.
fn counted(case: Case) -> Result<usize, TestCaseError> {
    let ctx = Ctx::new(case.n, case.panic_at, case.chaos);
    run_case::<Counted<'_>>(case, &ctx)
}

/// Runs `case` on [`Boxed`] elements.
fn boxed(case: Case) -> Result<usize, TestCaseError> {
    let ctx = Ctx::new(case.n, case.panic_at, case.chaos);
    run_case::<Boxed<'_>>(case, &ctx)
}

/// Runs `case` with every sort on both element types.
fn all_sorts(case: Case) -> Result<(), TestCaseError> {
    for entry in ENTRIES {
        let case = Case { entry, ..case };
        counted(case)?;
        boxed(case)?;
    }
    Ok(())
}

/// A case for each sort, not panicking, in order; the strategies fill in the input.
fn case() -> impl Strategy<Value = Case> {
    (1..=4usize, length(), shape(), modulus(), any::<u64>()).prop_map(
        |(workers, n, shape, modulus, seed)| Case {
            entry: Entry::Sort,
            workers,
            n,
            shape,
            modulus,
            seed,
            panic_at: 0,
            chaos: false,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Every comparison's update to a `Cell` in the element survives, and every box is owned
    /// by exactly one element: with a valid total order, the result is sorted, stable for
    /// the stable sorts, and holds each element exactly once, as the comparator last saw it.
    #[test]
    fn interior_mutability_survives(case in case()) {
        all_sorts(case)?;
    }

    /// A comparator (or key function) that panics at its k-th call: the panic reaches the
    /// caller, and the slice holds each element once, as last seen; each is dropped once.
    /// `k` is a fraction of the calls that a run without the panic makes, from the first call
    /// to past the last (where no panic happens).
    #[test]
    fn panicking_comparator_leaves_a_permutation(case in case(), fraction in 0.0..1.05f64) {
        for entry in ENTRIES {
            let case = Case { entry, ..case };
            let calls = counted(case)?;
            let panic_at = ((calls as f64 * fraction) as usize).max(1);
            counted(Case { panic_at, ..case })?;
            boxed(Case { panic_at, ..case })?;
        }
    }

    /// A comparator that answers at random: no crash, a permutation, each element dropped
    /// once, every update kept.
    #[test]
    fn random_order_leaves_a_permutation(case in case()) {
        all_sorts(Case { chaos: true, ..case })?;
    }
}

/// The cutoffs on every pool, deterministically: the properties draw lengths at random, this
/// makes sure every run crosses the merge's and the quicksort's parallel paths.
#[test]
fn cutoffs_on_every_pool() {
    let inputs = [
        (Shape::Random, u32::MAX, false),
        (Shape::Sawtooth, 16, false),
        (Shape::Random, u32::MAX, true),
    ];
    for workers in [1, 2, 4] {
        for n in [4097, 8193, 16385, 33_001] {
            for (shape, modulus, chaos) in inputs {
                let case = Case {
                    entry: Entry::Sort,
                    workers,
                    n,
                    shape,
                    modulus,
                    seed: n as u64,
                    panic_at: 0,
                    chaos,
                };
                all_sorts(case).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
