//! How a parallel iterator's input is cut at many workers: the pieces each worker folded,
//! for magpie and rayon on the same 10M-element scan.
//!
//! `cargo run --release -p magpie-bench --example pieces -- 16`
//!
//! Each piece's fold yields one accumulator (the items it saw), recorded with the index of
//! the worker that folded it. On a machine with fewer CPUs than workers, which workers got
//! how much only says how the OS ran the threads; the piece counts still compare the two
//! splitting rules.
use std::sync::Mutex;

fn report(name: &str, workers: usize, pieces: Vec<(usize, usize)>) {
    let mut per_worker = vec![(0usize, 0usize); workers + 1];
    for (w, n) in &pieces {
        per_worker[*w].0 += 1;
        per_worker[*w].1 += n;
    }
    let counts: Vec<_> = per_worker.iter().map(|p| p.0).collect();
    let items: Vec<_> = per_worker.iter().map(|p| p.1 / 1000).collect();
    println!(
        "{name:7} pieces {:4}  per worker {counts:?}  kitems {items:?}",
        pieces.len()
    );
}

/// The pieces of one scan of `$data` on `$pool`, with the caller's prelude in scope and
/// `$index` for the current worker (the last slot is "not a worker").
macro_rules! pieces {
    ($pool:expr, $index:expr, $data:expr, $workers:expr) => {{
        let seen = Mutex::new(Vec::new());
        $pool.install(|| {
            $data
                .par_iter()
                .fold(
                    || 0usize,
                    |n, x| {
                        std::hint::black_box(x);
                        n + 1
                    },
                )
                .for_each(|n| {
                    let w = $index.unwrap_or($workers);
                    seen.lock().unwrap().push((w, n));
                });
        });
        seen.into_inner().unwrap()
    }};
}

fn main() {
    let workers: usize = std::env::args().nth(1).map_or(16, |s| s.parse().unwrap());
    let data: Vec<u64> = (0..10_000_000).collect();
    let rt = magpie::Runtime::builder()
        .worker_threads(workers)
        .build()
        .unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap();
    for _ in 0..3 {
        {
            use magpie::prelude::*;
            let pieces = pieces!(rt, magpie::current_worker_index(), data, workers);
            report("magpie", workers, pieces);
        }
        {
            use rayon::prelude::*;
            let pieces = pieces!(pool, rayon::current_thread_index(), data, workers);
            report("rayon", workers, pieces);
        }
    }
}
