//! The three schedules without stealing that `magpie compare` measures work stealing against,
//! on plain std threads.
//!
//! - **Round-robin**: task `i` is assigned to thread `i % n` when it arrives; a thread runs
//!   only its own tasks.
//! - **Static partition**: each arriving batch is cut into `n` contiguous runs of (nearly)
//!   equal count, one per thread.
//! - **Central queue**: one `Mutex<VecDeque>` that every thread pops from, a task at a time;
//!   balanced by construction, at the price of one lock round trip per task.
//!
//! The threads start, and block, before the clock starts (the submitter waits for them to
//! say so; magpie's run waits for its workers to park the same way); the submitter hands
//! each batch over, sits out the batch's pause, and after the last batch the clock stops
//! once every thread has finished and been joined. The assignment of tasks to threads is computed before
//! timing, so the makespan holds only the work, the hand-over and the waiting.
//!
//! **What is handed over is a [`Job`]**, a boxed closure that the submitter makes in the timed
//! part, as a user of any thread pool makes one per task and as magpie's run makes a task per
//! closure: the strategies then differ in how they schedule, not in what a task is. (Until
//! November 2026 the baselines moved the bare durations, so their makespan left out the
//! allocation, the indirect call and the cross-thread free that every pool pays per task:
//! up to 0.7 ms on the central queue's 100 ms for 4,000 tasks on the 2-CPU machine, about
//! the size of the gap between it and stealing there; BENCHMARKS.md has the runs.)
//!
//! If the OS refuses a thread, the threads already started are stopped and joined, and the
//! run fails with the OS's error.

use std::collections::VecDeque;
use std::io;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::workload::{pause, spin, Workload};

/// One task as the baselines run it: the closure a user would submit to a thread pool.
type Job = Box<dyn FnOnce() + Send>;

/// The job that spins for `d`, made by the submitter inside the timed part.
fn job(d: Duration) -> Job {
    Box::new(move || spin(d))
}

/// A schedule without stealing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Baseline {
    RoundRobin,
    CentralQueue,
    StaticPartition,
}

impl Baseline {
    pub(crate) const ALL: [Baseline; 3] = [
        Baseline::RoundRobin,
        Baseline::CentralQueue,
        Baseline::StaticPartition,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Baseline::RoundRobin => "round-robin",
            Baseline::CentralQueue => "central queue",
            Baseline::StaticPartition => "static partition",
        }
    }

    /// Runs `workload` on `threads` fresh threads and returns the makespan: from the first
    /// hand-over to the moment the last thread is done.
    ///
    /// # Errors
    ///
    /// The OS's error if it refused a thread (`magpie compare --workers 65536` on a machine
    /// with a lower thread limit); the threads already started have been joined.
    pub(crate) fn run(self, workload: &Workload, threads: usize) -> io::Result<Duration> {
        self.run_with(workload, threads, os_spawn)
    }

    fn run_with(self, workload: &Workload, threads: usize, spawn: Spawn) -> io::Result<Duration> {
        match self {
            Baseline::RoundRobin => run_assigned(workload, threads, round_robin, spawn),
            Baseline::StaticPartition => run_assigned(workload, threads, partition, spawn),
            Baseline::CentralQueue => run_central(workload, threads, spawn),
        }
    }
}

/// Starts baseline thread `index` running `body`: [`os_spawn`], or in tests one that fails.
type Spawn = fn(usize, Box<dyn FnOnce() + Send>) -> io::Result<JoinHandle<()>>;

/// A plain OS thread; `thread::Builder` rather than `thread::spawn`, which panics when the
/// OS refuses.
fn os_spawn(_index: usize, body: Box<dyn FnOnce() + Send>) -> io::Result<JoinHandle<()>> {
    thread::Builder::new().spawn(body)
}

/// Each batch cut into one list per thread, by arrival index: `assign(batch, first, n)`
/// returns the per-thread lists of a batch whose first task has global index `first`.
type Assign = fn(&[Duration], usize, usize) -> Vec<Vec<Duration>>;

fn round_robin(batch: &[Duration], first: usize, n: usize) -> Vec<Vec<Duration>> {
    let mut lists = vec![Vec::with_capacity(batch.len() / n + 1); n];
    for (i, &d) in batch.iter().enumerate() {
        lists[(first + i) % n].push(d);
    }
    lists
}

fn partition(batch: &[Duration], _first: usize, n: usize) -> Vec<Vec<Duration>> {
    let len = batch.len();
    (0..n)
        .map(|t| batch[t * len / n..(t + 1) * len / n].to_vec())
        .collect()
}

/// Round-robin and static partition: every thread has a channel of its own, and receives
/// its share of each batch as one message.
fn run_assigned(
    workload: &Workload,
    threads: usize,
    assign: Assign,
    spawn: Spawn,
) -> io::Result<Duration> {
    let mut first = 0;
    let plan: Vec<(Vec<Vec<Duration>>, Duration)> = workload
        .batches
        .iter()
        .map(|b| {
            let lists = assign(&b.durations, first, threads);
            first += b.durations.len();
            (lists, b.pause_after)
        })
        .collect();

    let mut senders = Vec::with_capacity(threads);
    let mut handles = Vec::with_capacity(threads);
    // Each thread says it has started before it blocks on its channel.
    let (started_tx, started) = mpsc::channel::<()>();
    for index in 0..threads {
        let (tx, rx) = mpsc::channel::<Vec<Job>>();
        let started_tx = started_tx.clone();
        let body = move || {
            // The submitter is waiting: this cannot fail.
            let _ = started_tx.send(());
            drop(started_tx);
            for list in rx {
                list.into_iter().for_each(|job| job());
            }
        };
        match spawn(index, Box::new(body)) {
            Ok(handle) => {
                senders.push(tx);
                handles.push(handle);
            }
            Err(err) => {
                // Hanging up ends the threads already started.
                drop(senders);
                join_all(handles);
                return Err(err);
            }
        }
    }

    drop(started_tx);
    // Every thread sends once, and the last sender goes with the last thread's send.
    for _ in started.iter() {}
    let start = Instant::now();
    for (lists, pause_after) in plan {
        for (tx, list) in senders.iter().zip(lists) {
            let jobs: Vec<Job> = list.into_iter().map(job).collect();
            tx.send(jobs).expect("a baseline thread hung up");
        }
        pause(pause_after);
    }
    drop(senders);
    join_all(handles);
    Ok(start.elapsed())
}

/// The central queue's state, all behind its one lock.
#[derive(Default)]
struct Central {
    queue: VecDeque<Job>,
    /// Set after the last batch: threads that find the queue empty then exit.
    closed: bool,
    /// Threads that have started: each counts itself under the lock, which it releases
    /// only by waiting on the queue's condition variable (or by taking a job).
    started: usize,
}

fn run_central(workload: &Workload, threads: usize, spawn: Spawn) -> io::Result<Duration> {
    let shared = Arc::new((
        Mutex::new(Central::default()),
        Condvar::new(),
        Condvar::new(),
    ));
    let (lock, ready, all_started) = &*shared;
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        let shared = Arc::clone(&shared);
        let body = move || {
            let (lock, ready, all_started) = &*shared;
            let mut central = lock.lock().expect("central queue poisoned");
            central.started += 1;
            all_started.notify_one();
            loop {
                if let Some(job) = central.queue.pop_front() {
                    drop(central);
                    job();
                    central = lock.lock().expect("central queue poisoned");
                } else if central.closed {
                    return;
                } else {
                    central = ready.wait(central).expect("central queue poisoned");
                }
            }
        };
        match spawn(index, Box::new(body)) {
            Ok(handle) => handles.push(handle),
            Err(err) => {
                // Closing the empty queue ends the threads already started.
                lock.lock().expect("central queue poisoned").closed = true;
                ready.notify_all();
                join_all(handles);
                return Err(err);
            }
        }
    }

    // Seen under the lock: every thread has counted itself and released the lock since,
    // which with an empty queue it does only by waiting for work.
    let mut central = lock.lock().expect("central queue poisoned");
    while central.started < threads {
        central = all_started.wait(central).expect("central queue poisoned");
    }
    drop(central);
    let start = Instant::now();
    for batch in &workload.batches {
        // Made before the lock is taken, as a pool's user makes each closure before
        // submitting it.
        let jobs: Vec<Job> = batch.durations.iter().copied().map(job).collect();
        lock.lock()
            .expect("central queue poisoned")
            .queue
            .extend(jobs);
        ready.notify_all();
        pause(batch.pause_after);
    }
    lock.lock().expect("central queue poisoned").closed = true;
    ready.notify_all();
    join_all(handles);
    Ok(start.elapsed())
}

fn join_all(handles: Vec<thread::JoinHandle<()>>) {
    for h in handles {
        if let Err(panic) = h.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    /// Starts threads 0 and 1, refuses thread 2 as an OS at its limit would.
    fn refuse_the_third(
        index: usize,
        body: Box<dyn FnOnce() + Send>,
    ) -> io::Result<JoinHandle<()>> {
        if index == 2 {
            Err(io::Error::new(io::ErrorKind::WouldBlock, "no more threads"))
        } else {
            os_spawn(index, body)
        }
    }

    #[test]
    fn a_thread_the_os_refuses_fails_the_run() {
        // `thread::spawn` panicked ("failed to spawn thread"). The two threads started must
        // be stopped, or this test would hang joining them.
        let workload = Workload::generate(crate::workload::Pattern::Burst, 20, 1);
        for baseline in Baseline::ALL {
            let err = baseline
                .run_with(&workload, 4, refuse_the_third)
                .expect_err(baseline.name());
            assert_eq!(err.to_string(), "no more threads");
            let ok = baseline.run_with(&workload, 2, refuse_the_third);
            assert!(ok.is_ok(), "{}", baseline.name());
        }
    }

    #[test]
    fn every_baseline_runs_all_the_work() {
        // Each job spins for at least its duration, so a run that skipped or lost jobs could
        // finish under the total work spread perfectly over the threads; one that ran them
        // all cannot.
        let workload = Workload::generate(crate::workload::Pattern::Mixed, 200, 3);
        for threads in [1, 3] {
            let floor = workload.total_work() / threads as u32;
            for baseline in Baseline::ALL {
                let makespan = baseline
                    .run(&workload, threads)
                    .unwrap_or_else(|e| panic!("{}: {e}", baseline.name()));
                assert!(
                    makespan >= floor,
                    "{} on {threads} threads: {makespan:?} < {floor:?}",
                    baseline.name()
                );
            }
        }
    }

    #[test]
    fn round_robin_continues_across_batches() {
        let lists = round_robin(&us(&[1, 2, 3]), 1, 2);
        assert_eq!(lists, vec![us(&[2]), us(&[1, 3])]);
    }

    #[test]
    fn partition_is_contiguous_and_complete() {
        let lists = partition(&us(&[1, 2, 3, 4, 5]), 0, 2);
        assert_eq!(lists, vec![us(&[1, 2]), us(&[3, 4, 5])]);
    }
}
