//! Asymmetric memory barriers: a free [`light`](Barrier::light) side for hot paths and an
//! expensive [`heavy`](Barrier::heavy) side for the rare path that must be ordered against
//! them.
//!
//! Two places in magpie have the store-then-load ("Dekker") shape that normally needs a full
//! fence on *both* sides:
//!
//! * the Chase-Lev deque: the owner's `pop` stores `bottom` then loads `top`, a thief loads
//!   `top` then `bottom` (Lê et al., PPoPP 2013, put a `seq_cst` fence in both);
//! * the sleep protocol: a worker publishing a job stores it then loads the idle state, a
//!   worker going to sleep stores the idle state then loads every queue.
//!
//! In both, one side runs on every published `join` (up to millions of times a second) and the other only when
//! a worker steals or parks. On Linux we make the frequent side a compiler-only fence and the
//! rare side a `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` system call, which returns only
//! after every running thread of this process has executed a full memory barrier. So for any
//! pair (light on thread A, heavy on thread B), A's barrier point falls either before or after
//! the heavy call, which gives the same "one of the two loads sees the other's store"
//! guarantee as a pair of `SeqCst` fences. This is the technique of Linux's liburcu, folly's
//! `asymmetricHeavyBarrier` and .NET's `FlushProcessWriteBuffers`; see `membarrier(2)`.
//!
//! # Modes
//!
//! Each runtime picks its mode once, before its workers start ([`Barrier::resolve`]), and
//! its deques and sleep coordinator keep a copy ([`BarrierMode`] is the public face):
//!
//! * **asymmetric**: the light side is a compiler fence, the heavy side `membarrier` plus a
//!   fence. Needs Linux 4.14+ and the process's registration, done once, the first time a
//!   runtime chooses it; where that fails the runtime is symmetric.
//! * **symmetric**: both sides `fence(SeqCst)`, the classic algorithm, and what the loom
//!   models check (under loom and shuttle every runtime is symmetric; shuttle runs every
//!   thread on one OS thread and treats every atomic as SeqCst, and its fences are no-ops in
//!   its model, which is sound for this algorithm).
//!
//! Two runtimes of one process may differ: each pair of barriers that must meet belongs to
//! one runtime (its deques, its sleep state), and a `membarrier` covers every thread of the
//! process anyway. Should the heavy side's call fail after registration (`ENOMEM`, a seccomp
//! filter installed later), the process aborts with a message: the light barriers already
//! passed were compiler-only, so no later switch of mode could order them, and an owner and a
//! thief could both take the last job of a deque.
//!
//! # The cost model
//!
//! Neither mode wins everywhere. The symmetric mode pays two fences per *published* job (the
//! push's wake check and the pop; most `join`s publish nothing and pay neither). The
//! asymmetric one pays per heavy barrier, that is per steal and per park: the caller's
//! `membarrier`, which waits for an interrupt on every CPU running one of our threads, and
//! on each of those CPUs the interrupt itself (a VM exit under a hypervisor). So, with `k`
//! CPUs running workers:
//!
//! ```text
//! asymmetric wins  ⇔  heavy_per_job(k) × (membarrier(k) + (k − 1) × interrupt)  <  2 × fence
//! ```
//!
//! The inputs, measured ([`model`] holds the values):
//!
//! | input | 16-CPU Xeon (KVM) | this project's 2-CPU VM |
//! |---|---|---|
//! | `membarrier(k)` | 2.2–2.9 µs (k = 1), 4.1 (3), 7.3 (7), 8.6–11 (15); 33–50 µs with 31 and 63 threads. Re-measured on a lent 16-CPU Xeon (KVM) on 2026-12-04: 2.0 (1), 3.1 (2), 3.4 (3), 4.8 (7), 7.5 (15), 7.6 (31), and with 63 threads 33.6 µs of wall time but 9.3 of the caller's CPU | 0.35 µs alone, 8.3–8.4 µs with one busy thread, two runs in three (0.5 µs in the others) |
//! | `fence` | 9–10 ns in a store–fence–load loop (8.5–11 on 2026-12-04) | 2 ns |
//! | heavy barriers per published job | | fib(30): 2.7e-3 at 2 workers; quicksort: 8e-2 |
//!
//! Oversubscribed (more busy threads than CPUs) every CPU runs one of our threads, and a
//! `membarrier` also waits behind the threads the scheduler has to preempt: on the 2-CPU VM
//! 8.4 µs of the caller's CPU but 126 µs (31 threads) and 328 µs (63) of wall time
//! (`cargo run --release -p magpie --example barrier_cost`).
//!
//! With `heavy_per_job(k) = 2.7e-3 × k / 2` (each thief steals at about the same rate),
//! `membarrier(k) = 2 + 0.55 k µs`, an interrupt at 1.5 µs and a fence at 25 ns (the
//! fence in `join`'s publish and pop drains a store buffer holding the job's frame; 25 ns
//! is what makes the model agree with the 2-worker timings), the asymmetric side costs 12 ns
//! per published job at k = 2, 47 at k = 4 and 182 at k = 8, against 50 ns for the symmetric
//! one. [`BarrierMode::Auto`] therefore picks asymmetric on up to
//! [`AUTO_ASYMMETRIC_MAX_CPUS`] = 4 CPUs and symmetric above, where `k` is the smaller of the
//! worker count and the CPUs the process may run on (its affinity mask and cgroup quota, as
//! `std::thread::available_parallelism` reads them, not the host's count). That matches the
//! 16-CPU measurements: asymmetric 30% faster on fib(35) at 2 workers, no difference at 4,
//! symmetric 13–24% faster at 8 and 2.2× at 16.
//!
//! # Fewer heavy barriers
//!
//! A thief pays one heavy barrier per pass over up to 32 victims, not one per victim or per
//! attempt: the deque's steal needs the barrier between its loads of `top` and `bottom`, so
//! the search loads the `top` of every deque that looks non-empty, issues one barrier, then
//! finishes each steal (`Stealer::steal_begin`, `Stealer::steal_end`). A deque whose `top`
//! its owner wrote (it does whenever the deque drains) needs no barrier at all (`chase_lev.rs`
//! invariant 7): most fork-join steals are of that kind.
//!
//! That took the model's third input at 2 workers from 2.7e-3 to about 6e-4 heavy barriers
//! per published job (fib(30): 9 heavy barriers per run to 2, now mostly parks). With it the
//! model would move the crossover from between 4 and 5 CPUs to between 8 and 9. The 16-CPU
//! timings behind "symmetric from 8 CPUs" were taken before that change, and the one 16-CPU
//! table taken since (BENCHMARKS.md, "twelfth") ran `Auto` only, with no A/B of the modes
//! at 8 workers, so [`model::HEAVY_PER_JOB_AT_2`] keeps the old figure and `Auto` its old
//! choice until such a run (BENCHMARKS.md, "Fourth pass"). That table's 8- and 16-worker
//! fork-join rows, symmetric, met their targets against chili.

use super::atomic::*;

/// How a runtime orders the two sides of its store-then-load pairs: a worker popping its
/// deque against a thief, a worker publishing a job against one going to sleep.
///
/// The symmetric mode puts a `fence(SeqCst)` on both sides. The asymmetric mode makes the
/// frequent side (publishing and popping jobs) a compiler fence and the rare side (steals,
/// parks) a `membarrier` system call, which interrupts every CPU running a thread of the
/// process. Which is cheaper depends on the machine: per published job the symmetric mode
/// pays two fences, the asymmetric one its share of steals and parks, each costing a
/// `membarrier` that grows with the CPUs it interrupts (2.5 µs on one CPU, ~10 µs on 15 of a
/// 16-CPU VM). [`BarrierMode::Auto`] decides by that cost model (its inputs are in
/// ARCHITECTURE.md) from the CPUs the process may run on; see
/// [`Builder::barrier`](crate::Builder::barrier).
///
/// # Examples
///
/// ```
/// use magpie::BarrierMode;
///
/// let rt = magpie::Runtime::builder()
///     .worker_threads(2)
///     .barrier(BarrierMode::Symmetric)
///     .build()
///     .unwrap();
/// assert_eq!(rt.barrier_mode(), BarrierMode::Symmetric);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum BarrierMode {
    /// Chosen by the cost model in this module's docs from the CPUs the process may run on:
    /// asymmetric on up to [`AUTO_ASYMMETRIC_MAX_CPUS`] CPUs, symmetric above. The
    /// environment variable `MAGPIE_BARRIER` (`auto`, `asymmetric` or `symmetric`) replaces
    /// this default; a mode set on the builder wins over the variable.
    #[default]
    Auto,
    /// A compiler fence on the hot side, a `membarrier` system call on the rare side
    /// (steals, parks). Falls back to [`Symmetric`](BarrierMode::Symmetric) where
    /// `membarrier` is unavailable (not Linux, kernels before 4.14, seccomp filters).
    Asymmetric,
    /// A `fence(SeqCst)` on both sides: what rayon and crossbeam pay.
    Symmetric,
}

impl BarrierMode {
    /// Parses `auto`, `asymmetric` or `symmetric` (any case, spaces around ignored).
    pub(crate) fn parse(value: &str) -> Option<BarrierMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(BarrierMode::Auto),
            "asymmetric" => Some(BarrierMode::Asymmetric),
            "symmetric" => Some(BarrierMode::Symmetric),
            _ => None,
        }
    }
}

impl std::fmt::Display for BarrierMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BarrierMode::Auto => "auto",
            BarrierMode::Asymmetric => "asymmetric",
            BarrierMode::Symmetric => "symmetric",
        })
    }
}

/// The most CPUs on which [`BarrierMode::Auto`] picks the asymmetric mode, as the cost model
/// (ARCHITECTURE.md, "Barrier modes") puts it.
///
/// # Examples
///
/// ```
/// assert!(magpie::AUTO_ASYMMETRIC_MAX_CPUS < 8);
/// ```
pub const AUTO_ASYMMETRIC_MAX_CPUS: usize = 4;

/// The cost model's inputs; the module docs ("The cost model") say where each comes from.
mod model {
    /// What one `fence(SeqCst)` costs where the symmetric mode puts it, in nanoseconds: 9-10
    /// ns in a store-fence-load loop on the 16-CPU Xeon (2 ns on this project's 2-CPU
    /// machine), more in `join`'s publish and pop, where it drains a store buffer full of
    /// the job's frame. 25 ns makes the model agree with the 2-worker measurements.
    pub(super) const FENCE_NS: f64 = 25.0;
    /// One `membarrier(PRIVATE_EXPEDITED)` as its caller sees it, in nanoseconds, with `k`
    /// CPUs running threads of the process: 2.2-2.9 µs at k = 1, 4.1 at 3, 7.3 at 7, 8.6-11
    /// at 15 on the 16-CPU Xeon under KVM, about `2_000 + 550 * k`.
    pub(super) fn membarrier_ns(k: f64) -> f64 {
        2_000.0 + 550.0 * k
    }
    /// What each interrupted CPU loses to the inter-processor interrupt (an exit to the
    /// hypervisor and back under KVM), in nanoseconds.
    pub(super) const INTERRUPT_NS: f64 = 1_500.0;
    /// Heavy barriers (steals and parks) per published job on two workers, measured on
    /// fib(30), the row with the most joins per steal (`examples/barrier_cost.rs` gives the
    /// barrier figures; the counts come from `Stats`): 2.7e-3. Thieves steal at about the
    /// same rate each, so the ratio grows in proportion to the workers: `k / 2` times this.
    pub(super) const HEAVY_PER_JOB_AT_2: f64 = 2.7e-3;
}

/// The cost model: whether, with `k` CPUs running workers, the asymmetric mode's heavy
/// barriers cost less than the symmetric mode's fences would. Per published job, the
/// symmetric mode pays two fences (the push's notification, the pop); the asymmetric one pays
/// its share of heavy barriers, each costing its caller a `membarrier` and every other CPU
/// an interrupt.
pub(crate) fn asymmetric_pays_off(k: usize) -> bool {
    let k = k.max(1) as f64;
    let heavy_per_job = model::HEAVY_PER_JOB_AT_2 * k / 2.0;
    let asymmetric = heavy_per_job * (model::membarrier_ns(k) + (k - 1.0) * model::INTERRUPT_NS);
    let symmetric = 2.0 * model::FENCE_NS;
    asymmetric < symmetric
}

/// A runtime's resolved barrier mode. `Copy` and one byte, so that the deque and the sleep
/// coordinator keep their own copy beside the data they order, read with no indirection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Barrier {
    asymmetric: bool,
}

impl Barrier {
    /// Both sides `fence(SeqCst)`.
    pub(crate) const SYMMETRIC: Barrier = Barrier { asymmetric: false };

    /// The mode a runtime of `workers` workers uses when asked for `mode`, on a machine
    /// whose process may run on `cpus` CPUs (the available parallelism, or
    /// `Builder::assume_cpus`). Registers the process for `membarrier` the first time the
    /// asymmetric mode is chosen; falls back to symmetric where it cannot.
    pub(crate) fn resolve(mode: BarrierMode, workers: usize, cpus: usize) -> Barrier {
        let asymmetric = match mode {
            BarrierMode::Symmetric => false,
            BarrierMode::Asymmetric => true,
            BarrierMode::Auto => asymmetric_pays_off(cpus.min(workers)),
        };
        // Miri: `membarrier` is a system call Miri cannot run, and a compiler fence is no
        // barrier in its memory model; the symmetric mode (two `fence(SeqCst)`) is the one
        // it can check.
        if asymmetric && !cfg!(miri) && imp::register() {
            Barrier { asymmetric: true }
        } else {
            Barrier::SYMMETRIC
        }
    }

    /// The asymmetric mode if this process can have it (for tests that stress it).
    #[cfg(test)]
    pub(crate) fn best_available() -> Barrier {
        Barrier::resolve(BarrierMode::Asymmetric, 1, 1)
    }

    /// Whether the heavy side is a `membarrier` (and the light side a compiler fence).
    pub(crate) fn is_asymmetric(self) -> bool {
        self.asymmetric
    }

    /// [`BarrierMode::Asymmetric`] or [`BarrierMode::Symmetric`].
    pub(crate) fn mode(self) -> BarrierMode {
        if self.asymmetric {
            BarrierMode::Asymmetric
        } else {
            BarrierMode::Symmetric
        }
    }

    /// The cheap side: orders this thread's earlier stores before its later loads *with
    /// respect to any thread that calls [`heavy`](Barrier::heavy) on the same mode*. A full
    /// `SeqCst` fence in the symmetric mode.
    #[inline(always)]
    pub(crate) fn light(self) {
        if self.asymmetric {
            // The heavy side's membarrier supplies the hardware barrier; we only need the
            // compiler to keep program order across this point.
            compiler_fence(SeqCst);
        } else {
            fence(SeqCst);
        }
    }

    /// The expensive side: after it returns, every store that any thread made before its
    /// last [`light`](Barrier::light) is visible to this thread, and this thread's earlier
    /// stores are visible to any load that follows a `light` that had not yet run.
    pub(crate) fn heavy(self) {
        if self.asymmetric {
            imp::membarrier_or_abort();
        }
        fence(SeqCst);
    }
}

#[cfg(all(target_os = "linux", not(loom), not(shuttle)))]
mod imp {
    use std::cell::Cell;
    use std::sync::OnceLock;

    // From <linux/membarrier.h>.
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// Whether this process registered for `membarrier`, decided once.
    static REGISTERED: OnceLock<bool> = OnceLock::new();

    thread_local! {
        /// `membarrier` calls made by this thread (`heavy_count`).
        static HEAVY_COUNT: Cell<u64> = const { Cell::new(0) };
    }

    /// The system call: its non-negative result, or the `errno` it failed with.
    fn membarrier(cmd: libc::c_long) -> Result<libc::c_long, std::io::Error> {
        #[cfg(debug_assertions)]
        if let Some(result) = fail_injection::intercept(cmd) {
            return result;
        }
        // SAFETY: membarrier takes two integer arguments and touches no memory of ours.
        let result = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        if result < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(result)
        }
    }

    /// Failure injection, in debug builds only, for `tests/membarrier_failure.rs`: with
    /// `MAGPIE_TEST_FAIL_MEMBARRIER` set in the environment when the process first registers,
    /// registration succeeds (whatever the kernel offers) and every barrier command then
    /// fails with `ENOMEM`, as it can after registration.
    #[cfg(debug_assertions)]
    mod fail_injection {
        use super::*;
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

        /// Set by `arm`, inside the `OnceLock` initialisation that every reader of the
        /// registration synchronises with (hence Relaxed).
        static ARMED: AtomicBool = AtomicBool::new(false);

        pub(super) fn arm() {
            if std::env::var_os("MAGPIE_TEST_FAIL_MEMBARRIER").is_some() {
                ARMED.store(true, Relaxed);
            }
        }

        /// The injected result of command `cmd`, if failures are injected.
        pub(super) fn intercept(cmd: libc::c_long) -> Option<Result<libc::c_long, std::io::Error>> {
            if !ARMED.load(Relaxed) {
                return None;
            }
            Some(match cmd {
                MEMBARRIER_CMD_QUERY => Ok(
                    MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
                ),
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED => Ok(0),
                _ => Err(std::io::Error::from_raw_os_error(libc::ENOMEM)),
            })
        }
    }

    /// Registers the process for private expedited `membarrier`, once; whether it worked.
    /// A runtime is asymmetric only if this returned true before its workers started, so
    /// every light barrier of that runtime is ordered after the registration.
    pub(super) fn register() -> bool {
        *REGISTERED.get_or_init(|| {
            #[cfg(debug_assertions)]
            fail_injection::arm();
            let wanted =
                MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
            let supported =
                membarrier(MEMBARRIER_CMD_QUERY).is_ok_and(|cmds| cmds & wanted == wanted);
            supported && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED).is_ok()
        })
    }

    /// Returns after every running thread of the process passed a full barrier.
    pub(super) fn membarrier_or_abort() {
        HEAVY_COUNT.with(|count| count.set(count.get() + 1));
        if let Err(error) = membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
            membarrier_failed(&error);
        }
    }

    pub(super) fn heavy_count() -> u64 {
        HEAVY_COUNT.with(Cell::get)
    }

    /// The heavy barrier failed after registration (`ENOMEM`, a seccomp filter installed
    /// since): abort. Falling back to the symmetric mode now would not help: light barriers
    /// already passed as compiler fences may be racing this very call, and an owner and a
    /// thief could both take the last job of a deque.
    #[cold]
    #[inline(never)]
    fn membarrier_failed(error: &std::io::Error) -> ! {
        use std::io::Write;
        // Not `eprintln!`, which panics if stderr is closed; we are aborting either way.
        let _ = writeln!(
            std::io::stderr(),
            "magpie: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after the process \
             registered for it ({error}); the work-stealing deque and the sleep protocol \
             rely on it for memory ordering, so continuing could run a job twice or lose a \
             wakeup; aborting (MAGPIE_BARRIER=symmetric runs without membarrier)"
        );
        std::process::abort()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_model_picks_asymmetric_up_to_the_documented_cpu_count() {
        for k in 1..=256 {
            assert_eq!(
                asymmetric_pays_off(k),
                k <= AUTO_ASYMMETRIC_MAX_CPUS,
                "the model and AUTO_ASYMMETRIC_MAX_CPUS disagree at {k} CPUs"
            );
        }
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [
            BarrierMode::Auto,
            BarrierMode::Asymmetric,
            BarrierMode::Symmetric,
        ] {
            assert_eq!(BarrierMode::parse(&mode.to_string()), Some(mode));
        }
        assert_eq!(
            BarrierMode::parse(" Symmetric\n"),
            Some(BarrierMode::Symmetric)
        );
        assert_eq!(BarrierMode::parse("membarrier"), None);
        assert_eq!(BarrierMode::parse(""), None);
    }

    #[test]
    fn a_resolved_mode_is_never_auto() {
        for mode in [
            BarrierMode::Auto,
            BarrierMode::Asymmetric,
            BarrierMode::Symmetric,
        ] {
            for workers in [1, 2, 8, 130] {
                for cpus in [1, 2, 16] {
                    let resolved = Barrier::resolve(mode, workers, cpus).mode();
                    assert_ne!(resolved, BarrierMode::Auto);
                }
            }
        }
        assert_eq!(
            Barrier::resolve(BarrierMode::Symmetric, 2, 2).mode(),
            BarrierMode::Symmetric
        );
    }

    #[test]
    fn auto_counts_the_smaller_of_the_workers_and_the_cpus() {
        // Where the asymmetric mode is available, what Auto picks when it pays off.
        let available = Barrier::resolve(BarrierMode::Asymmetric, 1, 1).mode();
        let beyond = AUTO_ASYMMETRIC_MAX_CPUS + 1;
        for (workers, cpus, expected) in [
            (1, 1, available),
            (2, 2, available),
            (16, 2, available),
            (2, 16, available),
            (beyond, beyond, BarrierMode::Symmetric),
            (16, 16, BarrierMode::Symmetric),
            (130, 64, BarrierMode::Symmetric),
        ] {
            assert_eq!(
                Barrier::resolve(BarrierMode::Auto, workers, cpus).mode(),
                expected,
                "{workers} workers on {cpus} CPUs"
            );
        }
    }
}

#[cfg(any(not(target_os = "linux"), loom, shuttle))]
mod imp {
    pub(super) fn register() -> bool {
        false
    }

    pub(super) fn membarrier_or_abort() {
        unreachable!("the asymmetric mode is never chosen without membarrier")
    }

    pub(super) fn heavy_count() -> u64 {
        0
    }
}

/// The `membarrier` calls the calling thread has made so far. Workers copy it into their
/// statistics.
pub(crate) fn heavy_count() -> u64 {
    imp::heavy_count()
}
