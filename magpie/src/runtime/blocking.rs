//! The blocking pool: separate threads for closures that block (file I/O, a synchronous
//! library call), so that they never hold up a worker.
//!
//! Threads are started on demand, up to a cap (default 512, as tokio), and an idle thread
//! exits after a keep-alive (default 10 s). A blocking task is an ordinary task (one
//! allocation, a `JoinHandle`), polled exactly once by a pool thread, so the closure's panic
//! reaches the handle as a `JoinError` like any task's.
//!
//! Shutdown: queued closures that have not started are cancelled (their handles resolve to
//! cancelled); running ones are waited for (up to `shutdown_timeout`), since a thread cannot
//! be interrupted.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::ptr;
use std::time::{Duration, Instant};

use crate::sync::thread::thread_local;
use crate::sync::{lock, thread, wait_until, Condvar, Mutex};
use crate::task::notified::{new_task, Notified, Schedule};
use crate::task::raw::{Identity, RawTask};

use super::task_hooks::TaskHooks;
use crate::task::JoinHandle;
use std::sync::Arc;

thread_local! {
    /// The pool whose thread this is (its `Inner`), or null. Only compared, never followed.
    static POOL: Cell<*const ()> = const { Cell::new(ptr::null()) };
}

/// Default cap on blocking threads.
pub(crate) const DEFAULT_MAX_THREADS: usize = 512;
/// Default time an idle blocking thread waits for work before exiting.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// A task that runs on the blocking pool.
type BlockingTask = Notified<BlockingSchedule>;

/// The blocking pool's scheduler: a woken blocking task goes back to the pool's queue.
/// (In practice a blocking task is queued once, at spawn: it completes in its first poll.)
pub(crate) struct BlockingSchedule {
    pool: Arc<Inner>,
    /// The runtime's task hooks, if it has any: a blocking task's spawn and end are told to
    /// them as a worker task's are. (Its unhandled panic is not: the default
    /// `Schedule::unhandled_panic` drops it, as tokio's blocking pool does.)
    hooks: Option<Arc<TaskHooks>>,
}

impl Schedule for BlockingSchedule {
    fn schedule(&self, task: BlockingTask) {
        // A failure to start a thread cancelled the task with the rest of the queue; its
        // handle reports that (a reschedule has no caller to tell).
        let _ = self.pool.push(task);
    }

    fn release(&self, task: RawTask) -> bool {
        if let Some(hooks) = &self.hooks {
            // SAFETY: the completer holds a reference to `task`.
            hooks.terminated(unsafe { task.header() });
        }
        false
    }
}

/// A handle to the pool, held by the registry.
pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<PoolState>,
    /// Signalled when a task is queued or on shutdown.
    work: Condvar,
    /// Signalled when the last thread exits after shutdown.
    exited: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    stack_size: Option<usize>,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<BlockingTask>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting for work.
    idle: usize,
    /// Wakeups sent to idle threads and not yet consumed.
    notified: usize,
    shutdown: bool,
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        thread_name: String,
        stack_size: Option<usize>,
    ) -> BlockingPool {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(PoolState::default()),
                work: Condvar::new(),
                exited: Condvar::new(),
                max_threads: max_threads.max(1),
                keep_alive,
                thread_name,
                stack_size,
            }),
        }
    }

    /// Runs `f` on a blocking thread, as the task `identity`.
    pub(crate) fn spawn<F, T>(
        &self,
        f: F,
        identity: Identity,
        hooks: Option<Arc<TaskHooks>>,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let scheduler = BlockingSchedule {
            pool: self.inner.clone(),
            hooks: hooks.clone(),
        };
        let closure = crate::task::closure::Closure::new(f);
        let (task, handle) = new_task(closure, scheduler, identity);
        if let Some(hooks) = hooks {
            // SAFETY: the Notified holds a reference to the task.
            hooks.spawned(unsafe { task.raw().header() });
        }
        self.inner.push(task)?;
        Ok(handle)
    }

    /// Threads alive now.
    /// Whether the calling thread is one of this pool's (then shutdown must not wait for
    /// it: see `Runtime::shutdown`).
    pub(crate) fn is_current_thread(&self) -> bool {
        // `with` cannot fail: a `Cell` of a pointer has no destructor, so the thread-local is
        // never torn down.
        POOL.with(|pool| ptr::eq(pool.get(), Arc::as_ptr(&self.inner).cast()))
    }

    pub(crate) fn threads(&self) -> usize {
        lock(&self.inner.state).threads
    }

    /// Threads waiting for work.
    pub(crate) fn idle_threads(&self) -> usize {
        lock(&self.inner.state).idle
    }

    /// Tasks queued and not yet started.
    pub(crate) fn queue_depth(&self) -> usize {
        lock(&self.inner.state).queue.len()
    }

    /// Cancels what has not started, and waits until every thread has exited or `deadline`
    /// passes. Returns whether every thread exited.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) -> bool {
        let cancelled = {
            let mut state = lock(&self.inner.state);
            state.shutdown = true;
            self.inner.work.notify_all();
            std::mem::take(&mut state.queue)
        };
        // Outside the lock: cancelling drops closures, user code.
        for task in cancelled {
            task.shutdown();
        }
        let mut state = lock(&self.inner.state);
        while state.threads > 0 {
            if deadline.is_some_and(|d| crate::sync::time::now() >= d) {
                return false;
            }
            state = wait_until(&self.inner.exited, state, deadline);
        }
        true
    }
}

impl Inner {
    /// Queues `task` and makes sure a thread will run it. Fails only when no thread is
    /// running and the OS refuses a new one: then nothing can run the queue, and `task` and
    /// whatever waited with it are cancelled (see `start_thread`).
    fn push(self: &Arc<Inner>, task: BlockingTask) -> io::Result<()> {
        let mut state = lock(&self.state);
        if state.shutdown {
            drop(state);
            task.shutdown();
            return Ok(());
        }
        state.queue.push_back(task);
        if state.idle > state.notified {
            state.notified += 1;
            self.work.notify_one();
        } else if state.threads < self.max_threads {
            state.threads += 1;
            let index = state.threads;
            drop(state);
            return self.start_thread(index);
        }
        // Otherwise every thread is busy and the cap is reached: the task waits its turn.
        Ok(())
    }

    fn start_thread(self: &Arc<Inner>, index: usize) -> io::Result<()> {
        let pool = self.clone();
        let mut builder =
            thread::Builder::new().name(format!("{}-blocking-{index}", self.thread_name));
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
        if let Err(err) = builder.spawn(move || pool.run()) {
            // No thread: the queued task waits for a running thread, or for the next spawn
            // (which tries again).
            let mut state = lock(&self.state);
            state.threads -= 1;
            // A shutdown may be waiting for the count to reach zero (`BlockingPool::shutdown`).
            self.exited.notify_all();
            if state.threads == 0 {
                // Nobody is left to run what is queued. Running it here would block the
                // spawner, which may be a worker (and the closure may wait for the tasks
                // queued behind it) or a caller that goes on only once `spawn_blocking`
                // returns. So the spawn fails, and the closures queued with it are dropped:
                // their handles report cancellation.
                let queued = std::mem::take(&mut state.queue);
                drop(state);
                for task in queued {
                    task.shutdown();
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// A blocking thread's loop.
    fn run(&self) {
        POOL.with(|pool| pool.set(ptr::from_ref(self).cast()));
        let mut state = lock(&self.state);
        loop {
            if let Some(task) = state.queue.pop_front() {
                drop(state);
                let _ = task.run();
                state = lock(&self.state);
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (guard, timeout) = match self.work.wait_timeout(state, self.keep_alive) {
                Ok((guard, result)) => (guard, result.timed_out()),
                Err(poisoned) => {
                    let (guard, result) = poisoned.into_inner();
                    (guard, result.timed_out())
                }
            };
            state = guard;
            state.idle -= 1;
            if state.notified > 0 {
                state.notified -= 1;
            } else if timeout && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
        if state.threads == 0 {
            self.exited.notify_all();
        }
    }
}

impl fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("BlockingPool")
            .field("threads", &state.threads)
            .field("idle", &state.idle)
            .field("queued", &state.queue.len())
            .field("max_threads", &self.inner.max_threads)
            .finish()
    }
}
