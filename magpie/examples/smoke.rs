//! Profiling aid: fib through `join` on a runtime with `MAGPIE_WORKER_THREADS` workers;
//! prints each run's time and how many jobs each worker stole.
fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = magpie::join(|| fib(n - 1), || fib(n - 2));
    a + b
}
fn main() {
    let rt = magpie::Runtime::new().unwrap();
    let n = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let runs: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut times = Vec::new();
    for _ in 0..runs {
        let before = rt.stats();
        let t = std::time::Instant::now();
        std::hint::black_box(rt.install(|| fib(n)));
        let took = t.elapsed();
        let after = rt.stats();
        let per: Vec<(u64, u64)> = after
            .workers
            .iter()
            .zip(&before.workers)
            .map(|(a, b)| {
                (
                    a.jobs_executed - b.jobs_executed,
                    a.jobs_stolen - b.jobs_stolen,
                )
            })
            .collect();
        println!(
            "{:>8.3} ms  (jobs, stolen) per worker: {per:?}",
            took.as_secs_f64() * 1e3
        );
        times.push(took);
    }
    times.sort();
    println!(
        "fib({n}) median {:?} on {} workers",
        times[runs / 2],
        rt.num_workers()
    );
}
