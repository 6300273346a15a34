//! The compensation slots' bookkeeping, through the registry: which slots exist, which are
//! switched on, and what the calls refuse. The behaviour of running compensation workers
//! (taking work, retiring, shutdown) is in `tests/compensation.rs`.

use crate::Runtime;

fn runtime(workers: usize, max_workers: usize, compensation: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .max_workers(max_workers)
        .max_compensation_workers(compensation)
        .build()
        .unwrap()
}

#[test]
fn no_compensation_allocates_no_slot() {
    let rt = runtime(2, 2, 0);
    let registry = rt.registry();
    assert_eq!((registry.num_workers(), registry.num_slots()), (2, 2));
    assert!(!registry.is_compensation(1));
    assert_eq!(registry.compensation_available(), 0);
    assert!(!registry.start_compensation_worker());
    assert_eq!(registry.compensation.on(), 0);
    assert_eq!(registry.compensation.started(), 0);
    // Retiring none changes nothing.
    registry.retire_compensation_workers();
    assert_eq!(rt.stats().workers.len(), 2);
}

#[test]
fn slots_come_after_the_ordinary_workers_and_max_workers() {
    let rt = runtime(2, 3, 2);
    let registry = rt.registry();
    assert_eq!((registry.num_workers(), registry.num_slots()), (3, 5));
    let kinds: Vec<bool> = (0..5).map(|w| registry.is_compensation(w)).collect();
    assert_eq!(kinds, [false, false, false, true, true]);
    // Every per-worker array has every slot.
    assert_eq!(registry.counters.len(), 5);
    assert_eq!(registry.task_slots.len(), 5);
    assert_eq!(registry.sleep.num_workers(), 5);
    // The ordinary count is what the iterators split for, on any worker.
    assert_eq!(rt.install(crate::current_num_workers), 3);
}

#[test]
fn each_kind_of_slot_follows_its_own_count() {
    let rt = runtime(2, 3, 2);
    let registry = rt.registry();
    let on = || -> Vec<bool> { (0..5).map(|w| registry.is_switched_on(w)).collect() };
    assert_eq!(on(), [true, true, false, false, false]);

    assert!(registry.start_compensation_worker());
    assert_eq!(on(), [true, true, false, true, false]);

    // `set_active_workers` moves the ordinary prefix only.
    rt.set_active_workers(3).unwrap();
    assert_eq!(on(), [true, true, true, true, false]);
    rt.set_active_workers(1).unwrap();
    assert_eq!(on(), [true, false, false, true, false]);
    // Its range is the ordinary workers.
    assert!(rt.set_active_workers(4).is_err());

    assert!(registry.start_compensation_worker());
    assert_eq!(on(), [true, false, false, true, true]);

    // Retiring switches every compensation slot off and leaves the ordinary ones alone.
    registry.retire_compensation_workers();
    assert_eq!(on(), [true, false, false, false, false]);
    assert_eq!(rt.active_workers(), 1);

    let stats = rt.stats();
    let flags: Vec<(bool, bool)> = stats
        .workers
        .iter()
        .map(|w| (w.active, w.compensation))
        .collect();
    assert_eq!(
        flags,
        [
            (true, false),
            (false, false),
            (false, false),
            (false, true),
            (false, true)
        ]
    );
    assert_eq!(
        (
            stats.active_workers,
            stats.compensation_workers_active,
            stats.compensation_workers_started
        ),
        (1, 0, 2)
    );
}

#[test]
fn starts_stop_at_the_maximum_and_retiring_frees_them() {
    let rt = runtime(1, 1, 2);
    let registry = rt.registry();
    assert_eq!(registry.compensation_available(), 2);
    assert!(registry.start_compensation_worker());
    assert_eq!(registry.compensation_available(), 1);
    assert!(registry.start_compensation_worker());
    assert_eq!(registry.compensation_available(), 0);
    assert!(!registry.start_compensation_worker());
    assert_eq!(registry.compensation.on(), 2);
    registry.retire_compensation_workers();
    assert_eq!(registry.compensation_available(), 2);
    assert!(registry.start_compensation_worker());
    // Refused starts are not counted.
    assert_eq!(registry.compensation.started(), 3);
}

#[test]
fn nothing_starts_once_the_runtime_shuts_down() {
    let rt = runtime(1, 1, 2);
    let registry = rt.registry().clone();
    assert!(registry.start_compensation_worker());
    drop(rt);
    assert!(registry.is_terminating());
    assert_eq!(registry.compensation_available(), 0);
    assert!(!registry.start_compensation_worker());
    assert_eq!(registry.compensation.started(), 1);
    // Harmless after shutdown: the threads are gone, a wake only sets a token.
    registry.retire_compensation_workers();
}

#[test]
fn starts_racing_each_other_never_pass_the_maximum() {
    let rt = runtime(1, 1, 3);
    let registry = rt.registry();
    let won: usize = std::thread::scope(|s| {
        let racers: Vec<_> = (0..8)
            .map(|_| s.spawn(|| usize::from(registry.start_compensation_worker())))
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    assert_eq!(won, 3);
    assert_eq!(registry.compensation.on(), 3);
    assert_eq!(registry.compensation.started(), 3);
}
