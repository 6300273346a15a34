//! The cost model's inputs (`sync/barrier.rs`): one `membarrier(PRIVATE_EXPEDITED)` with `k`
//! other threads of the process spinning, against one `fence(SeqCst)` between a store and a
//! load. Linux only.
//!
//! ```text
//! cargo run --release -p magpie --example barrier_cost [-- THREADS...]
//! ```
//!
//! With more spinning threads than CPUs, the figure grows: each call waits for an
//! interrupt on every CPU that runs one of our threads (all of them, then), and the
//! threads the scheduler preempts still cost the caller the run-queue bookkeeping.

#[cfg(target_os = "linux")]
fn main() {
    use std::hint::black_box;
    use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    let membarrier = |cmd: libc::c_long| {
        // SAFETY: membarrier takes integer arguments and touches no memory of ours.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    };
    if membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) != 0 {
        eprintln!("membarrier(PRIVATE_EXPEDITED) is not available here");
        std::process::exit(1);
    }
    let counts: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if args.is_empty() {
            vec![0, 1, 2, 3, 7, 15, 31, 63]
        } else {
            args
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // This thread's CPU time: with more threads than CPUs, wall time would count the time
    // the spinners had our CPU.
    let cpu_now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
    };
    println!("{cpus} CPUs available; medians of 7 runs");
    println!(
        "{:>14} {:>22} {:>22} {:>16}",
        "busy threads", "membarrier wall (µs)", "membarrier CPU (µs)", "fence CPU (ns)"
    );
    for &k in &counts {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..k)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = black_box(x.wrapping_add(1));
                    }
                })
            })
            .collect();
        // Let the spinners get onto CPUs.
        std::thread::yield_now();
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let calls = 2_000;
        let runs: Vec<(f64, f64)> = (0..7)
            .map(|_| {
                let start = Instant::now();
                let cpu = cpu_now();
                for _ in 0..calls {
                    membarrier(CMD_PRIVATE_EXPEDITED);
                }
                (
                    start.elapsed().as_secs_f64() * 1e6 / f64::from(calls),
                    (cpu_now() - cpu) / 1e3 / f64::from(calls),
                )
            })
            .collect();
        let heavy_wall = median(runs.iter().map(|r| r.0).collect());
        let heavy_cpu = median(runs.iter().map(|r| r.1).collect());
        let cell = AtomicU64::new(0);
        let other = AtomicU64::new(0);
        let fences = 10_000_000u32;
        let light = median(
            (0..7)
                .map(|_| {
                    let start = cpu_now();
                    for i in 0..fences {
                        cell.store(u64::from(i), Ordering::Relaxed);
                        fence(Ordering::SeqCst);
                        black_box(other.load(Ordering::Relaxed));
                    }
                    (cpu_now() - start) / f64::from(fences)
                })
                .collect(),
        );
        stop.store(true, Ordering::Relaxed);
        for spinner in spinners {
            spinner.join().unwrap();
        }
        println!("{k:>14} {heavy_wall:>22.2} {heavy_cpu:>22.2} {light:>16.2}");
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("membarrier is Linux-only");
}
