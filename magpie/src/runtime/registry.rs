//! The state one runtime's workers share: their deques' steal ends, the inject queue, the
//! idle coordinator, the per-worker counters and the shutdown flag.

use crate::join::job::{JobHeader, JobRef, StackJob};
use crate::join::latch::LockLatch;
use crate::queue::chase_lev::Stealer;
use crate::queue::inject::Inject;
use crate::sleep::Sleep;
use crate::stats::WorkerCounters;
use crate::sync::atomic::*;
use crate::sync::{Arc, AtomicBool};
use crate::util::CachePadded;

use super::worker::WorkerThread;

/// Shared by every worker of a runtime and by its `Runtime` handle.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) stealers: Box<[Stealer<JobHeader>]>,
    /// Jobs from threads outside the pool (`install`, `join` called from outside).
    pub(crate) inject: Inject<JobRef>,
    pub(crate) sleep: Sleep,
    /// Each worker's counters; the worker holds a second handle to its own.
    pub(crate) counters: Box<[Arc<CachePadded<WorkerCounters>>]>,
    /// Set once, by `Runtime::drop`; workers exit when they see it and find no work.
    terminating: AtomicBool,
    /// Distinguishes runtimes in thread names and debug output.
    pub(crate) id: usize,
}

impl Registry {
    pub(crate) fn new(stealers: Vec<Stealer<JobHeader>>, id: usize) -> Registry {
        let n = stealers.len();
        Registry {
            stealers: stealers.into_boxed_slice(),
            inject: Inject::new(),
            sleep: Sleep::new(n),
            counters: (0..n)
                .map(|_| Arc::new(CachePadded::new(WorkerCounters::default())))
                .collect(),
            terminating: AtomicBool::new(false),
            id,
        }
    }

    pub(crate) fn num_workers(&self) -> usize {
        self.stealers.len()
    }

    /// Whether any queue of this runtime holds a job (possibly stale: see the sleep README
    /// for why the sleepers' recheck is still sound).
    pub(crate) fn has_visible_work(&self) -> bool {
        !self.inject.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    pub(crate) fn is_terminating(&self) -> bool {
        // Acquire: pairs with the Release store in `terminate`.
        self.terminating.load(Acquire)
    }

    /// Tells every worker to exit once it runs out of work.
    pub(crate) fn terminate(&self) {
        // Release: pairs with the Acquire load in `is_terminating`.
        self.terminating.store(true, Release);
        for worker in 0..self.num_workers() {
            self.sleep.wake_worker(worker);
        }
    }

    /// Queues a job from outside the pool and wakes a worker for it.
    pub(crate) fn inject(&self, job: JobRef) {
        if self.inject.push(job).is_err() {
            unreachable!("the job inject queue is never closed");
        }
        self.sleep.notify_work();
    }

    /// Runs `op` on a worker of this registry, from a thread that is not one of them, and
    /// blocks until it is done. `op`'s panic is resumed here.
    #[cold]
    pub(crate) fn in_worker_cold<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        let job = StackJob::new(
            || {
                let worker = WorkerThread::current();
                // SAFETY: the job runs on a worker thread, whose `WorkerThread` is live and
                // registered for the whole time the worker runs jobs.
                let worker = unsafe { worker.as_ref() }.expect("injected job ran off a worker");
                op(worker)
            },
            LockLatch::new(),
        );
        self.inject(job.as_job_ref());
        job.latch.wait();
        // SAFETY: the latch was observed set by `wait` (under its mutex).
        unsafe { job.into_result() }
    }

    /// Runs `op` on a worker of this registry: right here if the current thread is one,
    /// otherwise by injecting it and blocking.
    pub(crate) fn in_worker<OP, R>(&self, op: OP) -> R
    where
        OP: FnOnce(&WorkerThread) -> R + Send,
        R: Send,
    {
        // SAFETY: a non-null current worker pointer is live for the duration of this call,
        // which runs on that worker's thread.
        match unsafe { WorkerThread::current().as_ref() } {
            Some(worker) if std::ptr::eq(worker.registry(), self) => op(worker),
            _ => self.in_worker_cold(op),
        }
    }
}
