//! The runtime: a pool of worker threads and its handle, [`Runtime`].

mod builder;
mod global;
pub(crate) mod registry;
pub(crate) mod worker;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::thread::JoinHandle;

pub use builder::{BuildError, Builder, MAX_WORKERS};

use crate::queue::chase_lev;
use crate::stats::Stats;
use crate::sync::{barrier, lock, Arc, Mutex};
use registry::Registry;
use worker::{WorkerSeed, WorkerThread};

/// A pool of worker threads that runs fork-join jobs.
///
/// Dropping a `Runtime` stops its workers once they run out of work and joins their threads.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let (a, b) = rt.install(|| magpie::join(|| 1 + 1, || 2 + 2));
/// assert_eq!((a, b), (2, 4));
/// ```
pub struct Runtime {
    registry: Arc<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.registry.id)
            .field("workers", &self.num_workers())
            .finish_non_exhaustive()
    }
}

/// Numbers runtimes for their debug output.
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

impl Runtime {
    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A runtime with the defaults: `Runtime::builder().build()`.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::new().unwrap();
    /// assert!(rt.num_workers() >= 1);
    /// ```
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    fn start(builder: Builder) -> Result<Runtime, BuildError> {
        let n = builder.resolved_worker_threads();
        if n == 0 {
            return Err(BuildError::ZeroWorkers);
        }
        if n > MAX_WORKERS {
            return Err(BuildError::TooManyWorkers { requested: n });
        }
        let name = builder.thread_name.as_deref().unwrap_or("magpie-worker");
        if name.contains('\0') {
            return Err(BuildError::InvalidThreadName);
        }
        // Before any worker can run a light barrier (sync/barrier.rs).
        barrier::init();

        let (owners, stealers): (Vec<_>, Vec<_>) = (0..n).map(|_| chase_lev::new()).unzip();
        let id = NEXT_ID.fetch_add(1, Relaxed);
        let registry = Arc::new(Registry::new(stealers, id));

        let mut threads = Vec::with_capacity(n);
        for (index, deque) in owners.into_iter().enumerate() {
            let seed = WorkerSeed {
                index,
                registry: registry.clone(),
                deque,
            };
            let mut thread = std::thread::Builder::new().name(format!("{name}-{index}"));
            if let Some(bytes) = builder.stack_size {
                thread = thread.stack_size(bytes);
            }
            match thread.spawn(move || worker::run(seed)) {
                Ok(handle) => threads.push(handle),
                Err(source) => {
                    // Stop the ones already running before reporting the failure. The
                    // workers that never started count as unparked in the sleep state; that
                    // only makes notifiers skip waking, and nothing is left to notify.
                    registry.terminate();
                    for handle in threads {
                        let _ = handle.join();
                    }
                    return Err(BuildError::Spawn { index, source });
                }
            }
        }
        Ok(Runtime {
            registry,
            threads: Mutex::new(threads),
        })
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.registry.num_workers()
    }

    /// Runs `op` on one of this runtime's workers and returns its result.
    ///
    /// Inside `op`, [`join`](crate::join) and [`scope`](crate::scope) use this runtime.
    /// Called from one of this runtime's own workers, `op` simply runs in place. Called from
    /// any other thread (including a worker of another runtime), the thread blocks until `op`
    /// is done.
    ///
    /// # Panics
    ///
    /// A panic in `op` is resumed on the calling thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let on_worker = rt.install(|| magpie::current_worker_index().is_some());
    /// assert!(on_worker);
    /// ```
    pub fn install<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce() -> R + Send,
        R: Send,
    {
        self.registry.in_worker(|_| op())
    }

    /// A snapshot of the per-worker statistics.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| (), || ()));
    /// assert!(rt.stats().jobs_executed() >= 1);
    /// ```
    pub fn stats(&self) -> Stats {
        Stats {
            workers: self
                .registry
                .counters
                .iter()
                .map(|c| c.snapshot())
                .collect(),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.registry.terminate();
        let threads = std::mem::take(&mut *lock(&self.threads));
        // SAFETY: a non-null current worker is live during this call.
        let on_own_worker = unsafe { WorkerThread::current().as_ref() }
            .is_some_and(|w| std::ptr::eq(w.registry(), &*self.registry));
        if on_own_worker {
            // Joining our own thread would deadlock; the workers exit on their own.
            return;
        }
        for handle in threads {
            // Workers catch every user panic; an `Err` here means magpie itself aborted.
            let _ = handle.join();
        }
    }
}

/// The global default runtime, which the free functions ([`join`](crate::join),
/// [`scope`](crate::scope)) use on threads outside any worker. Created on first use with the
/// defaults of [`Builder::new`], unless [`Builder::build_global`] configured it first.
///
/// # Examples
///
/// ```
/// let rt = magpie::default_runtime();
/// assert_eq!(rt.num_workers(), magpie::current_num_workers());
/// let jobs_so_far = rt.stats().jobs_executed();
/// # let _ = jobs_so_far;
/// ```
pub fn default_runtime() -> &'static Runtime {
    global::runtime()
}

/// The registry that free functions use on a thread outside any worker.
pub(crate) fn current_registry() -> &'static Registry {
    global::registry()
}

/// The index of the worker running the calling thread, or `None` off the pool.
///
/// # Examples
///
/// ```
/// assert_eq!(magpie::current_worker_index(), None);
/// let rt = magpie::Runtime::builder().worker_threads(3).build().unwrap();
/// let index = rt.install(|| magpie::current_worker_index()).unwrap();
/// assert!(index < 3);
/// ```
pub fn current_worker_index() -> Option<usize> {
    // SAFETY: a non-null current worker is live during this call.
    unsafe { WorkerThread::current().as_ref() }.map(WorkerThread::index)
}

/// The number of workers of the runtime that [`join`](crate::join) would use from here: the
/// current worker's runtime, or the global one.
///
/// # Examples
///
/// ```
/// assert!(magpie::current_num_workers() >= 1);
/// ```
pub fn current_num_workers() -> usize {
    // SAFETY: a non-null current worker is live during this call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => worker.registry().num_workers(),
        None => current_registry().num_workers(),
    }
}
