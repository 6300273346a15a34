//! How a parallel iterator's input is cut at many workers: pieces per worker for magpie and
//! rayon on the same sum, `cargo run --release -p magpie-bench --example pieces -- 16`.
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
        let seen = Mutex::new(Vec::new());
        rt.install(|| {
            use magpie::prelude::*;
            data.par_iter()
                .fold(
                    || 0usize,
                    |n, x| {
                        std::hint::black_box(x);
                        n + 1
                    },
                )
                .for_each(|n| {
                    let w = magpie::current_worker_index().unwrap_or(workers);
                    seen.lock().unwrap().push((w, n));
                });
        });
        report("magpie", workers, seen.into_inner().unwrap());
        let seen = Mutex::new(Vec::new());
        pool.install(|| {
            use rayon::prelude::*;
            data.par_iter()
                .fold(
                    || 0usize,
                    |n, x| {
                        std::hint::black_box(x);
                        n + 1
                    },
                )
                .for_each(|n| {
                    let w = rayon::current_thread_index().unwrap_or(workers);
                    seen.lock().unwrap().push((w, n));
                });
        });
        report("rayon", workers, seen.into_inner().unwrap());
    }
}
