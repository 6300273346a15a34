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
//! timing too, so the makespan holds only the work, the hand-over and the waiting.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
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
    pub(crate) fn run(self, workload: &Workload, threads: usize) -> Duration {
        match self {
            Baseline::RoundRobin => run_assigned(workload, threads, round_robin),
            Baseline::StaticPartition => run_assigned(workload, threads, partition),
            Baseline::CentralQueue => run_central(workload, threads),
        }
    }
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
fn run_assigned(workload: &Workload, threads: usize, assign: Assign) -> Duration {
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

    let (senders, handles): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| {
            let (tx, rx) = mpsc::channel::<Vec<Duration>>();
            let handle = thread::spawn(move || {
                for list in rx {
                    list.into_iter().for_each(spin);
                }
            });
            (tx, handle)
        })
        .unzip();

    let start = Instant::now();
    for (lists, pause_after) in plan {
        for (tx, list) in senders.iter().zip(lists) {
            tx.send(list).expect("a baseline thread hung up");
        }
        pause(pause_after);
    }
    drop(senders);
    join_all(handles);
    start.elapsed()
}

/// The central queue's state, all behind its one lock.
#[derive(Debug, Default)]
struct Central {
    queue: VecDeque<Duration>,
    /// Set after the last batch: threads that find the queue empty then exit.
    closed: bool,
}

fn run_central(workload: &Workload, threads: usize) -> Duration {
    let shared = Arc::new((Mutex::new(Central::default()), Condvar::new()));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
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
            })
        })
        .collect();

    let (lock, ready) = &*shared;
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
    start.elapsed()
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
