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
//! The threads start, and block, before the clock starts; the submitter hands each batch
//! over, sits out the batch's pause, and after the last batch the clock stops once every
//! thread has finished and been joined. The assignment of tasks to threads is computed before
//! timing too, so the makespan holds only the work, the hand-over and the waiting. If the OS
//! refuses a thread, the threads already started are stopped and joined, and the run fails
//! with the OS's error.

use std::collections::VecDeque;
use std::io;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::workload::{pause, spin, Workload};

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
    for index in 0..threads {
        let (tx, rx) = mpsc::channel::<Vec<Duration>>();
        let body = move || {
            for list in rx {
                list.into_iter().for_each(spin);
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

    let start = Instant::now();
    for (lists, pause_after) in plan {
        for (tx, list) in senders.iter().zip(lists) {
            tx.send(list).expect("a baseline thread hung up");
        }
        pause(pause_after);
    }
    drop(senders);
    join_all(handles);
    Ok(start.elapsed())
}

/// The central queue's state, all behind its one lock.
#[derive(Debug, Default)]
struct Central {
    queue: VecDeque<Duration>,
    /// Set after the last batch: threads that find the queue empty then exit.
    closed: bool,
}

fn run_central(workload: &Workload, threads: usize, spawn: Spawn) -> io::Result<Duration> {
    let shared = Arc::new((Mutex::new(Central::default()), Condvar::new()));
    let (lock, ready) = &*shared;
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        let shared = Arc::clone(&shared);
        let body = move || {
            let (lock, ready) = &*shared;
            let mut central = lock.lock().expect("central queue poisoned");
            loop {
                if let Some(d) = central.queue.pop_front() {
                    drop(central);
                    spin(d);
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

    let start = Instant::now();
    for batch in &workload.batches {
        lock.lock()
            .expect("central queue poisoned")
            .queue
            .extend(&batch.durations);
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
