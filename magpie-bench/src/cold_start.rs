//! The `cold-start` probe: how soon this machine lets a second thread run in parallel when
//! work arrives after the CPUs have been idle. No runtime takes part; the figure says how
//! far the machine itself distorts short samples that begin on a quiet pool.
//!
//! Two threads, the bench thread and a helper parked on a barrier, each run the same fixed
//! piece of arithmetic (about `--work-us` long on one thread). Each round, after `pause` of
//! sleep, the bench thread times the piece alone ("one"); after the same pause again, it
//! wakes the helper through the barrier, runs its own piece, and waits for the helper's
//! ("two"). With a second CPU ready at once, two takes about one's time plus a wake-up;
//! when the pair runs one after the other, twice it.
//!
//! On the project's 2-CPU virtual machines (Firecracker, AMD EPYC, Linux 6.18), two / one
//! back to back is 1.14 for pieces of 0.35 ms, 1.06 for 1 ms and 1.02 for 3 ms; after a
//! pause of 1 ms or more it is 2.06-2.09 for 0.35 ms and 2.03 for 1 ms (the pieces ran one
//! after the other), but 1.04 for 3 ms. The woken helper starts on its waker's CPU (190-200
//! of 200 wakes in a separate probe), and moving it away at once with `sched_setaffinity`
//! (which returned in 50-80 µs) did not make a pair of 1.1 ms pieces finish sooner, so the
//! other vCPU itself is slow to take work after it idled: a property of the host, which no
//! runtime can schedule around. `scale` pauses 3 ms before every sample
//! (`harness::SCALE_COOL_DOWN`), so its rows shorter than a few milliseconds carry that
//! delay whenever they need the second CPU, for every runtime alike; its header prints this
//! probe's figure at that pause. On a bare-metal machine the ratio should stay near 1.

use std::hint::black_box;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{fmt_ms, markdown_table, median_f64};

/// One pause's result: medians over the rounds, in ms.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) pause: Duration,
    pub(crate) one_ms: f64,
    pub(crate) two_ms: f64,
}

impl Row {
    /// Two threads' time over one thread's: 1 when the second CPU joins at once, 2 when the
    /// two pieces ran one after the other.
    pub(crate) fn ratio(&self) -> f64 {
        self.two_ms / self.one_ms
    }
}

/// The piece of work: `iters` rounds of dependent integer arithmetic on registers, so that
/// it needs no memory and its length depends only on the CPU it gets.
fn piece(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

/// The iteration count that makes [`piece`] last about `target` on this thread, taken from
/// the fastest of a few timed runs (so that a preemption does not inflate it).
fn calibrate(target: Duration) -> u64 {
    const PROBE: u64 = 100_000;
    let fastest = (0..5)
        .map(|_| {
            let start = Instant::now();
            black_box(piece(PROBE));
            start.elapsed()
        })
        .fold(Duration::MAX, Duration::min)
        .max(Duration::from_nanos(1));
    let iters = PROBE as f64 * target.as_secs_f64() / fastest.as_secs_f64();
    (iters as u64).max(1)
}

/// The helper thread, parked on `go` between rounds.
struct Helper {
    go: Arc<Barrier>,
    done: Arc<Barrier>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Helper {
    fn start(iters: u64) -> Helper {
        let go = Arc::new(Barrier::new(2));
        let done = Arc::new(Barrier::new(2));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (go, done, stop) = (Arc::clone(&go), Arc::clone(&done), Arc::clone(&stop));
            thread::Builder::new()
                .name("cold-start".to_owned())
                .spawn(move || loop {
                    go.wait();
                    // Relaxed: the barrier orders the store before this load.
                    if stop.load(Relaxed) {
                        return;
                    }
                    black_box(piece(iters));
                    done.wait();
                })
                .expect("spawning the cold-start helper thread")
        };
        Helper {
            go,
            done,
            stop,
            thread: Some(thread),
        }
    }

    /// Runs a piece here and one on the helper, and returns when both are done.
    fn run_pair(&self, iters: u64) {
        self.go.wait();
        black_box(piece(iters));
        self.done.wait();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Relaxed: the barrier below orders it before the helper's load.
        self.stop.store(true, Relaxed);
        self.go.wait();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Measures every pause in `pauses` for `rounds` rounds, each piece about `work` long.
pub(crate) fn run(pauses: &[Duration], rounds: usize, work: Duration) -> Vec<Row> {
    let iters = calibrate(work);
    let helper = Helper::start(iters);
    let rounds = rounds.max(1);
    pauses
        .iter()
        .map(|&pause| {
            let mut one = Vec::with_capacity(rounds);
            let mut two = Vec::with_capacity(rounds);
            for _ in 0..rounds {
                thread::sleep(pause);
                let start = Instant::now();
                black_box(piece(iters));
                one.push(start.elapsed().as_secs_f64() * 1e3);
                thread::sleep(pause);
                let start = Instant::now();
                helper.run_pair(iters);
                two.push(start.elapsed().as_secs_f64() * 1e3);
            }
            Row {
                pause,
                one_ms: median_f64(&one),
                two_ms: median_f64(&two),
            }
        })
        .collect()
}

/// The rows as a markdown table.
pub(crate) fn render(rows: &[Row], work: Duration) -> String {
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            vec![
                fmt_ms(row.pause.as_secs_f64() * 1e3),
                format!("{:.3}", row.one_ms),
                format!("{:.3}", row.two_ms),
                format!("{:.2}", row.ratio()),
            ]
        })
        .collect();
    format!(
        "{}\nEach piece about {} ms of arithmetic; medians over the rounds. two / one: 1.00 \
         when a second CPU runs the helper's piece at once, 2.00 when the two pieces ran one \
         after the other.\n",
        markdown_table(
            &[
                "pause before",
                "one thread ms",
                "two threads ms",
                "two / one"
            ],
            &[false, true, true, true],
            &table,
        ),
        fmt_ms(work.as_secs_f64() * 1e3),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_scales_with_the_target() {
        let short = calibrate(Duration::from_micros(20));
        let long = calibrate(Duration::from_micros(2_000));
        assert!(short >= 1);
        assert!(
            long > short,
            "{long} iterations for 2 ms, {short} for 20 µs"
        );
    }

    #[test]
    fn one_row_per_pause_and_the_helper_stops() {
        let pauses = [Duration::ZERO, Duration::from_micros(100)];
        let rows = run(&pauses, 3, Duration::from_micros(50));
        assert_eq!(rows.len(), pauses.len());
        for (row, pause) in rows.iter().zip(pauses) {
            assert_eq!(row.pause, pause);
            assert!(row.one_ms > 0.0 && row.two_ms > 0.0, "{row:?}");
            assert!(row.ratio().is_finite());
        }
        // `run` returned, so the helper's drop woke it to stop and joined it.
        let table = render(&rows, Duration::from_micros(50));
        assert_eq!(table.matches("\n|").count(), 1 + pauses.len(), "{table}");
    }
}
