//! Watching and steering a running runtime: statistics, the active worker count, the trace.

use std::fmt;
use std::io;
use std::path::Path;

use crate::stats::{histogram_bounds_ns, trace, Stats, WorkerContext};
use crate::sync::atomic::*;

use super::Runtime;

impl Runtime {
    /// A snapshot of the statistics: per worker, and for the whole pool.
    ///
    /// Each counter is read on its own, without stopping the workers, so counters may be a
    /// few events apart from each other; each is exact as of the moment it was read. After
    /// [`Runtime::wait_idle`] returns, the task counts include every finished task.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// rt.install(|| magpie::join(|| (), || ()));
    /// assert!(rt.stats().jobs_executed() >= 1);
    /// ```
    pub fn stats(&self) -> Stats {
        let registry = &*self.registry;
        let uptime_ns = registry.uptime_ns();
        let clock = || registry.uptime_ns();
        let active = registry.active_workers();
        let compensation_on = registry.compensation.on();
        Stats {
            workers: registry
                .counters
                .iter()
                .zip(registry.task_slots.iter())
                .enumerate()
                .map(|(index, (counters, slots))| {
                    counters.snapshot(WorkerContext {
                        local_queue_depth: slots.ring.len(),
                        mailbox_depth: slots.mailbox.len(),
                        clock: &clock,
                        steal_group: registry.groups.of(index),
                        // Each slot's own count, as the workers read them (read once
                        // above, so the flags agree with the counts below).
                        active: if registry.is_compensation(index) {
                            index - registry.num_workers() < compensation_on
                        } else {
                            index < active
                        },
                        compensation: registry.is_compensation(index),
                    })
                })
                .collect(),
            tasks_alive: registry.owned.len() as u64,
            inject_queue_depth: registry.task_inject.len() as u64,
            timers_pending: registry.timers.pending() as u64,
            io_sources: registry.io_live() as u64,
            blocking_threads: registry.blocking.threads() as u64,
            blocking_queue_depth: registry.blocking.queue_depth() as u64,
            blocking_idle_threads: registry.blocking.idle_threads() as u64,
            active_workers: active as u64,
            compensation_workers_active: compensation_on as u64,
            compensation_workers_started: registry.compensation.started(),
            steal_groups: registry.groups.count() as u64,
            // Relaxed: statistics.
            tasks_spawned_remote: registry.tasks_spawned_remote.load(Relaxed),
            remote_schedules: registry.remote_schedules.load(Relaxed),
            barrier_mode: registry.sleep.barrier().mode(),
            inject_lock_acquisitions: registry.inject.lock_acquisitions()
                + registry.task_inject.lock_acquisitions(),
            live_list_lock_acquisitions: registry.owned.lock_acquisitions(),
            poll_time_histogram_enabled: registry.poll_time_histogram,
            poll_time_histogram_bounds_ns: histogram_bounds_ns(),
            trace_events: registry.traces.iter().flatten().map(|r| r.recorded()).sum(),
            monitor_samples: registry.monitor.as_ref().map_or(0, |m| m.samples()),
            uptime_ns,
        }
    }

    /// Whether the stall monitor sleeps now, waiting for the pool to wake (false with stall
    /// detection off). For the tests of its idle cost.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().stall_threshold(None).build().unwrap();
    /// assert!(!rt.stall_monitor_sleeping());
    /// ```
    #[doc(hidden)]
    pub fn stall_monitor_sleeping(&self) -> bool {
        self.registry.monitor.as_ref().is_some_and(|m| m.sleeping())
    }

    /// The barrier mode the workers use: [`BarrierMode::Asymmetric`](crate::BarrierMode::Asymmetric) or
    /// [`BarrierMode::Symmetric`](crate::BarrierMode::Symmetric), as [`Builder::barrier`](crate::Builder::barrier) (or
    /// `MAGPIE_BARRIER`, or the cost model of [`BarrierMode::Auto`](crate::BarrierMode::Auto)) chose it, and as this
    /// machine allows.
    ///
    /// # Examples
    ///
    /// ```
    /// use magpie::BarrierMode;
    ///
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// assert_ne!(rt.barrier_mode(), BarrierMode::Auto);
    /// ```
    pub fn barrier_mode(&self) -> crate::BarrierMode {
        self.registry.sleep.barrier().mode()
    }

    /// The number of ordinary workers taking work now (set by
    /// [`Runtime::set_active_workers`]); compensation workers
    /// ([`Builder::max_compensation_workers`](crate::Builder::max_compensation_workers)) are
    /// counted apart, in [`Stats::compensation_workers_active`].
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(3).build().unwrap();
    /// assert_eq!(rt.active_workers(), 3);
    /// ```
    pub fn active_workers(&self) -> usize {
        self.registry.active_workers()
    }

    /// Changes how many workers take work, between 1 and [`Runtime::num_workers`] (see
    /// [`Builder::max_workers`](crate::Builder::max_workers)); workers `0..n` stay active.
    ///
    /// Shrinking lets each surplus worker finish what it is running, hand the tasks queued
    /// on it (its LIFO slot, ring and mailbox) to the inject queue, where the active workers
    /// find them, and park until it is needed again: no task is lost or run twice. A
    /// `submit_to` naming a parked worker queues the closure for any active worker.
    /// Growing wakes the workers that become active. The call returns at once; the change
    /// takes effect on each worker at its next unit of work. Compensation workers
    /// ([`Builder::max_compensation_workers`](crate::Builder::max_compensation_workers)) are
    /// neither counted nor touched: those running go on running.
    ///
    /// # Errors
    ///
    /// [`ActiveWorkersError`] if `n` is 0 or above the number of workers; nothing changes.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(4).build().unwrap();
    /// rt.set_active_workers(1).unwrap();
    /// let handles: Vec<_> = (0..100).map(|i| rt.submit(move || i)).collect();
    /// let sum: i32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 4950);
    /// assert!(rt.set_active_workers(0).is_err());
    /// assert!(rt.set_active_workers(5).is_err());
    /// ```
    pub fn set_active_workers(&self, n: usize) -> Result<(), ActiveWorkersError> {
        let max = self.num_workers();
        if n == 0 || n > max {
            return Err(ActiveWorkersError { requested: n, max });
        }
        self.registry.set_active_workers(n);
        Ok(())
    }

    /// Writes the events recorded so far as Chrome trace JSON to `path`, for Perfetto
    /// (<https://ui.perfetto.dev>) or `chrome://tracing`: one track per worker, task polls
    /// and jobs as spans, parked time as "parked" spans, a worker's wait in `join` or a scope
    /// for work another worker took as a "waiting" span (what it ran or parked meanwhile lies
    /// inside), steals (with victim and count) and inject-queue pulls as instant events. Each worker keeps its newest events (see
    /// [`Builder::trace_capacity`](crate::Builder::trace_capacity)); the file says how many
    /// were lost. The workers keep running while it is written.
    ///
    /// # Errors
    ///
    /// An error of kind [`io::ErrorKind::Unsupported`] if tracing is off (see
    /// [`Builder::trace`](crate::Builder::trace)), or the error of creating or writing the
    /// file (of the OS error's kind, such as [`io::ErrorKind::NotFound`] for a missing
    /// directory, with a message that names the path).
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).trace(true).build().unwrap();
    /// rt.install(|| magpie::join(|| 1, || 2));
    /// let path = std::env::temp_dir().join(format!("magpie-trace-{}.json", std::process::id()));
    /// rt.trace_export(&path).unwrap();
    /// let text = std::fs::read_to_string(&path).unwrap();
    /// assert!(text.contains(r#""name":"job""#));
    /// # std::fs::remove_file(&path).unwrap();
    ///
    /// let untraced = magpie::Runtime::builder().worker_threads(1).trace(false).build().unwrap();
    /// assert!(untraced.trace_export(&path).is_err());
    /// ```
    pub fn trace_export(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let Some(traces) = &self.registry.traces else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "tracing is off: build the runtime with Builder::trace(true) or set MAGPIE_TRACE=1",
            ));
        };
        let events: Vec<_> = traces.iter().map(|ring| ring.events()).collect();
        let path = path.as_ref();
        // The OS error alone ("No such file or directory") does not say which file; the
        // kind is kept so that callers can still match on it.
        let named = |err: io::Error| {
            io::Error::new(
                err.kind(),
                format!("cannot write the trace to {}: {err}", path.display()),
            )
        };
        let file = std::fs::File::create(path).map_err(named)?;
        let now = self.registry.uptime_ns();
        let stalls = self
            .registry
            .monitor
            .as_ref()
            .map_or_else(Vec::new, |monitor| monitor.traced_stalls(now));
        trace::write_chrome_json(
            &mut io::BufWriter::new(file),
            &events,
            &stalls,
            self.registry.id,
            now,
        )
        .map_err(named)
    }
}

/// [`Runtime::set_active_workers`] was asked for 0 workers, or more than the runtime has.
///
/// # Examples
///
/// ```
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let err = rt.set_active_workers(3).unwrap_err();
/// assert_eq!((err.requested(), err.max()), (3, 2));
/// assert_eq!(err.to_string(), "3 active workers requested; use 1 to 2");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveWorkersError {
    requested: usize,
    max: usize,
}

impl ActiveWorkersError {
    /// The count asked for.
    ///
    /// # Examples
    ///
    /// ```
    /// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
    /// let err = rt.set_active_workers(0).unwrap_err();
    /// assert_eq!(err.requested(), 0);
    /// ```
    pub fn requested(&self) -> usize {
        self.requested
    }

    /// The most workers the runtime has.
    ///
    /// # Examples
    ///
    /// With [`Builder::max_workers`](crate::Builder::max_workers) the maximum, not the
    /// starting count, is the limit:
    ///
    /// ```
    /// let rt = magpie::Runtime::builder()
    ///     .worker_threads(2)
    ///     .max_workers(3)
    ///     .build()
    ///     .unwrap();
    /// let err = rt.set_active_workers(4).unwrap_err();
    /// assert_eq!(err.max(), 3);
    /// rt.set_active_workers(3).unwrap();
    /// ```
    pub fn max(&self) -> usize {
        self.max
    }
}

impl fmt::Display for ActiveWorkersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} active workers requested; use 1 to {}",
            self.requested, self.max
        )
    }
}

impl std::error::Error for ActiveWorkersError {}
