//! The four implementations behind one fork-join interface.
//!
//! Every workload is written once, generic over [`Fork`]; the implementations differ only in
//! what `Fork::join` does and in how the computation enters the pool ([`Pools::run`]).

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// One of the implementations under comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Impl {
    /// Plain recursion on the calling thread, no pool.
    Sequential,
    /// `magpie::join` inside `Runtime::install`.
    Magpie,
    /// `rayon::join` inside `ThreadPool::install`.
    Rayon,
    /// `chili::Scope::join` on a scope of a `chili::ThreadPool`.
    Chili,
}

impl Impl {
    /// All four, sequential first.
    pub(crate) const ALL: [Impl; 4] = [Impl::Sequential, Impl::Magpie, Impl::Rayon, Impl::Chili];
    /// The three pools.
    pub(crate) const POOLS: [Impl; 3] = [Impl::Magpie, Impl::Rayon, Impl::Chili];

    /// The name used in tables and JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Impl::Sequential => "sequential",
            Impl::Magpie => "magpie",
            Impl::Rayon => "rayon",
            Impl::Chili => "chili",
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A way to run two closures, potentially in parallel.
///
/// `Ctx` is whatever the implementation threads through the recursion: nothing for magpie,
/// rayon and the sequential baseline, the current `chili::Scope` for chili. It is a generic
/// associated type because chili hands each half a scope of its own (shorter) lifetime.
pub(crate) trait Fork {
    /// The per-call context passed down the recursion.
    type Ctx<'a>;

    /// Runs `a` and `b`, returning both results.
    fn join<A, B, RA, RB>(ctx: &mut Self::Ctx<'_>, a: A, b: B) -> (RA, RB)
    where
        A: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RA + Send,
        B: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RB + Send,
        RA: Send,
        RB: Send;
}

/// Runs `a` then `b` on the calling thread.
#[derive(Debug)]
pub(crate) enum SeqFork {}

impl Fork for SeqFork {
    type Ctx<'a> = ();

    #[inline]
    fn join<A, B, RA, RB>(ctx: &mut (), a: A, b: B) -> (RA, RB)
    where
        A: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RA + Send,
        B: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        let ra = a(ctx);
        let rb = b(ctx);
        (ra, rb)
    }
}

/// `magpie::join`.
#[derive(Debug)]
pub(crate) enum MagpieFork {}

impl Fork for MagpieFork {
    type Ctx<'a> = ();

    #[inline]
    fn join<A, B, RA, RB>(_: &mut (), a: A, b: B) -> (RA, RB)
    where
        A: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RA + Send,
        B: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        magpie::join(|| a(&mut ()), || b(&mut ()))
    }
}

/// `rayon::join`.
#[derive(Debug)]
pub(crate) enum RayonFork {}

impl Fork for RayonFork {
    type Ctx<'a> = ();

    #[inline]
    fn join<A, B, RA, RB>(_: &mut (), a: A, b: B) -> (RA, RB)
    where
        A: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RA + Send,
        B: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        rayon::join(|| a(&mut ()), || b(&mut ()))
    }
}

/// `chili::Scope::join`.
#[derive(Debug)]
pub(crate) enum ChiliFork {}

impl Fork for ChiliFork {
    type Ctx<'a> = chili::Scope<'a>;

    #[inline]
    fn join<A, B, RA, RB>(ctx: &mut chili::Scope<'_>, a: A, b: B) -> (RA, RB)
    where
        A: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RA + Send,
        B: for<'c> FnOnce(&mut Self::Ctx<'c>) -> RB + Send,
        RA: Send,
        RB: Send,
    {
        ctx.join(a, b)
    }
}

/// A computation written once for every [`Fork`].
pub(crate) trait Task: Send {
    /// What the computation returns.
    type Output: Send;

    /// Runs the computation with `F`'s join, starting from `ctx`.
    fn call<F: Fork>(&mut self, ctx: &mut F::Ctx<'_>) -> Self::Output;
}

/// The three pools, built once with the same worker count.
pub(crate) struct Pools {
    workers: usize,
    pub(crate) magpie: magpie::Runtime,
    pub(crate) rayon: rayon::ThreadPool,
    pub(crate) chili: chili::ThreadPool,
}

impl fmt::Debug for Pools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pools")
            .field("workers", &self.workers)
            .field("magpie", &self.magpie)
            .finish_non_exhaustive()
    }
}

/// Thread names (Linux truncates them to 15 bytes); the idle benchmark attributes CPU time
/// to pools by these prefixes.
pub(crate) const MAGPIE_THREAD_PREFIX: &str = "bench-magpie";
pub(crate) const RAYON_THREAD_PREFIX: &str = "bench-rayon";

/// The CPU count the magpie pools of `scale --assume-cpus` count (0: the machine's;
/// [`A_CPU_PER_WORKER`]: as many as the pool has workers).
static ASSUMED_CPUS: AtomicUsize = AtomicUsize::new(0);

/// [`ASSUMED_CPUS`] for `scale --sleeping-tasks`: each pool counts one CPU per worker.
const A_CPU_PER_WORKER: usize = usize::MAX;

/// Makes the magpie pools built from now on count `cpus` CPUs in their wake rules
/// (`magpie::Builder::assume_cpus`, a testing aid of the runtime): `scale --assume-cpus`, so
/// that a small machine shows in the counts the wakes a large one makes.
pub(crate) fn assume_cpus(cpus: usize) {
    // Relaxed: set by the main thread before any pool is built.
    ASSUMED_CPUS.store(cpus, Relaxed);
}

/// Makes each magpie pool built from now on count one CPU per worker in its wake rules and
/// its barrier mode: `scale --sleeping-tasks`, whose tasks hold a worker and not a CPU, so
/// that the pools wake workers and fence as they would with a CPU each.
pub(crate) fn assume_a_cpu_per_worker() {
    assume_cpus(A_CPU_PER_WORKER);
}

/// A builder for a magpie pool of `workers` workers of this benchmark: the defaults, with
/// `--assume-cpus` (or `--sleeping-tasks`' CPU per worker) if given.
pub(crate) fn magpie_builder(workers: usize) -> magpie::Builder {
    // Relaxed: see `assume_cpus`.
    let builder = match ASSUMED_CPUS.load(Relaxed) {
        0 => magpie::Runtime::builder(),
        A_CPU_PER_WORKER => magpie::Runtime::builder().assume_cpus(workers),
        cpus => magpie::Runtime::builder().assume_cpus(cpus),
    };
    builder.worker_threads(workers)
}

impl Pools {
    /// Builds the three pools with `workers` threads of parallelism each.
    ///
    /// magpie and rayon start `workers` worker threads; the calling thread blocks in
    /// `install`. chili counts the thread that opens a scope as one of its `thread_count`
    /// threads, so it starts `workers - 1` worker threads (plus its heartbeat thread) and the
    /// calling thread works. All three thus run the computation on `workers` threads.
    pub(crate) fn new(workers: usize) -> Pools {
        let magpie = magpie_builder(workers)
            .thread_name(MAGPIE_THREAD_PREFIX)
            .build()
            .expect("could not build the magpie runtime");
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("{RAYON_THREAD_PREFIX}-{i}"))
            .build()
            .expect("could not build the rayon pool");
        let chili = chili::ThreadPool::with_config(chili::Config {
            thread_count: Some(NonZeroUsize::new(workers).expect("workers must be positive")),
            ..Default::default()
        });
        Pools {
            workers,
            magpie,
            rayon,
            chili,
        }
    }

    /// The worker count the pools were built with.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Runs `task` with implementation `imp`, entering its pool the way a user would.
    pub(crate) fn run<T: Task>(&self, imp: Impl, task: &mut T) -> T::Output {
        match imp {
            Impl::Sequential => task.call::<SeqFork>(&mut ()),
            Impl::Magpie => self.magpie.install(|| task.call::<MagpieFork>(&mut ())),
            Impl::Rayon => self.rayon.install(|| task.call::<RayonFork>(&mut ())),
            Impl::Chili => {
                let mut scope = self.chili.scope();
                task.call::<ChiliFork>(&mut scope)
            }
        }
    }
}
