//! Inject-queue lock acquisitions per remote spawn: spawns 10,000 tasks from the main thread
//! (outside the pool, as magpie-bench's `spawn_many_remote` does) on a runtime of N workers
//! (first argument, default 2), waits for them, and prints `Stats::inject_lock_acquisitions`
//! per remote spawn, per round. With the lock-free task inject queue the pushes take no lock;
//! what is left is the workers' pulls.
fn main() {
    let workers: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let rt = magpie::Runtime::builder()
        .worker_threads(workers)
        .build()
        .unwrap();
    const SPAWNS: u64 = 10_000;
    for round in 0..5 {
        let before = rt.stats();
        let handles: Vec<_> = (0..SPAWNS)
            .map(|i| rt.spawn(async move { std::hint::black_box(i) }))
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let after = rt.stats();
        let locks = after.inject_lock_acquisitions - before.inject_lock_acquisitions;
        let remote = after.tasks_spawned_remote - before.tasks_spawned_remote;
        assert_eq!(remote, SPAWNS);
        println!(
            "round {round}: {workers} workers, {remote} remote spawns, {locks} inject lock \
             acquisitions, {:.3} per spawn",
            locks as f64 / remote as f64
        );
    }
}
