//! `Builder::build_global`: configuring the global runtime that `join` and `scope` use
//! outside any worker, and refusing to configure it twice.
//!
//! One test only, alone in its binary: the global runtime is per process, and the order of
//! `build_global` and the first use is the point.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Barrier, Mutex};

use magpie::{BuildError, Runtime};

#[test]
fn build_global_configures_the_free_functions() {
    // A bad configuration fails and leaves the global runtime unset.
    let err = Runtime::builder()
        .worker_threads(0)
        .build_global()
        .expect_err("zero workers");
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");

    Runtime::builder()
        .worker_threads(3)
        .thread_name("global")
        .build_global()
        .expect("first build_global");

    assert_eq!(magpie::current_num_workers(), 3);
    assert_eq!(magpie::current_worker_index(), None);

    // Both halves of a join from outside run on the global workers, in parallel (the barrier
    // needs both).
    let barrier = Barrier::new(2);
    let (a, b) = magpie::join(
        || {
            barrier.wait();
            std::thread::current().name().unwrap().to_owned()
        },
        || {
            barrier.wait();
            std::thread::current().name().unwrap().to_owned()
        },
    );
    assert_ne!(a, b);
    for name in [&a, &b] {
        assert!(name.starts_with("global-"), "{name}");
    }

    // Scope spawns reach every one of the three workers.
    let barrier = Barrier::new(3);
    let names = Mutex::new(BTreeSet::new());
    let count = AtomicUsize::new(0);
    magpie::scope(|s| {
        for _ in 0..3 {
            s.spawn(|_| {
                barrier.wait();
                names
                    .lock()
                    .unwrap()
                    .insert(std::thread::current().name().unwrap().to_owned());
                count.fetch_add(1, SeqCst);
            });
        }
    });
    assert_eq!(count.load(SeqCst), 3);
    let expected: BTreeSet<String> = (0..3).map(|i| format!("global-{i}")).collect();
    assert_eq!(names.into_inner().unwrap(), expected);

    // Once set, the global runtime cannot be configured again.
    let err = Runtime::builder()
        .worker_threads(2)
        .build_global()
        .expect_err("second build_global");
    assert!(
        matches!(err, BuildError::GlobalAlreadyInitialized),
        "{err:?}"
    );
    assert_eq!(magpie::current_num_workers(), 3);
}
