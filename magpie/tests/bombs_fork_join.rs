//! Bombs: panic payloads, return values and captured values whose `Drop` panics, in every
//! fork-join entry point (`join`, `scope`, `install`, parallel iterators).
//!
//! The rules pinned down here (the `# Panics` sections of `join` and `scope` state them):
//!
//! * the panic reaches the caller of `join` / `scope` / `install` with the winning payload
//!   (`a`'s over `b`'s, the body's over a spawn's, the first recorded spawn's over later ones);
//! * what magpie discards (the losing payload of two panics, the result of the half that did
//!   not panic, the scope body's value when a spawn panicked) is dropped with its destructor's
//!   panic caught and thrown away: a bomb magpie drops goes off harmlessly;
//! * the winning payload reaches the caller intact, bomb and all: dropping it is the caller's
//!   business (here, [`caught`] defuses it).
//!
//! Every test checks that the process survives (a panic while unwinding would abort it), that
//! the panic reaches the caller, that every bomb is dropped exactly once, and that the runtime
//! still runs a `join` afterwards.
//!
//! Not tested, because Rust itself aborts there, whatever magpie does: a closure that panics
//! while a value it owns panics in its destructor during that unwind.

mod common;

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::deadline::Deadline;
use common::runtime;
use magpie::prelude::*;
use magpie::Runtime;

// ---------------------------------------------------------------------------------------------
// Bombs
// ---------------------------------------------------------------------------------------------

/// What a bomb panics with when it goes off.
const EXPLODED: &str = "a bomb went off";

/// Counts the bombs of one test: each must be dropped exactly once.
#[derive(Debug, Default)]
struct Ledger {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Ledger {
    fn new() -> Arc<Ledger> {
        Arc::new(Ledger::default())
    }

    fn bomb(self: &Arc<Ledger>) -> Bomb {
        self.made.fetch_add(1, SeqCst);
        Bomb {
            ledger: self.clone(),
            armed: true,
        }
    }

    /// Panics with a bomb as the payload.
    fn throw(self: &Arc<Ledger>) -> ! {
        panic::panic_any(self.bomb())
    }

    fn assert_all_dropped_once(&self) {
        assert_eq!(
            self.made.load(SeqCst),
            self.dropped.load(SeqCst),
            "bombs made vs dropped (a leak or a double drop)"
        );
    }
}

/// A value whose destructor panics unless it was defused.
#[derive(Debug)]
struct Bomb {
    ledger: Arc<Ledger>,
    armed: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.ledger.dropped.fetch_add(1, SeqCst);
        if self.armed {
            panic!("{EXPLODED}");
        }
    }
}

/// What reached the caller.
#[derive(Debug, PartialEq, Eq)]
enum Caught {
    /// A bomb as the payload (defused here).
    Bomb,
    /// A string payload.
    Message(String),
}

/// Runs `f`, which must panic, and says what its payload was; a bomb payload is defused.
fn caught<R>(f: impl FnOnce() -> R) -> Caught {
    let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) else {
        panic!("expected a panic");
    };
    describe(payload)
}

fn describe(payload: Box<dyn Any + Send>) -> Caught {
    let payload = match payload.downcast::<Bomb>() {
        Ok(mut bomb) => {
            bomb.armed = false;
            return Caught::Bomb;
        }
        Err(other) => other,
    };
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        Caught::Message((*s).to_owned())
    } else if let Some(s) = payload.downcast_ref::<String>() {
        Caught::Message(s.clone())
    } else {
        panic!("unexpected payload type")
    }
}

fn message(text: &str) -> Caught {
    Caught::Message(text.to_owned())
}

/// The runtime still runs fork-join work.
fn assert_works(rt: &Runtime) {
    assert_eq!(rt.install(|| magpie::join(|| 1, || 2)), (1, 2));
    assert_eq!(rt.install(|| common::fib(15)), 610);
}

/// `f` inside `depth` joins nested in first position, each with a no-op second half: past
/// the first few levels the worker's deque holds enough jobs that `join` runs both halves
/// inline, so the depths 0..6 reach both of `join`'s paths.
fn nested<R: Send>(depth: usize, f: &(dyn Fn() -> R + Sync)) -> R {
    if depth == 0 {
        f()
    } else {
        magpie::join(|| nested(depth - 1, f), || ()).0
    }
}

/// A binary tree of joins, `depth` levels deep, whose every leaf panics with a bomb.
fn bomb_tree(depth: u32, ledger: &Arc<Ledger>) {
    if depth == 0 {
        ledger.throw();
    }
    magpie::join(
        || bomb_tree(depth - 1, ledger),
        || bomb_tree(depth - 1, ledger),
    );
}

// ---------------------------------------------------------------------------------------------
// join
// ---------------------------------------------------------------------------------------------

#[test]
fn join_both_halves_panic_with_bombs() {
    for workers in [1, 2, 3] {
        let rt = runtime(workers);
        let ledger = Ledger::new();
        for depth in 0..6 {
            let got = caught(|| rt.install(|| nested(depth, &|| bomb_tree(1, &ledger))));
            assert_eq!(got, Caught::Bomb, "{workers} workers, depth {depth}");
        }
        // Leaves everywhere: the losers of 63 joins go off inside magpie.
        assert_eq!(
            caught(|| rt.install(|| bomb_tree(6, &ledger))),
            Caught::Bomb
        );
        ledger.assert_all_dropped_once();
        assert_works(&rt);
    }
}

#[test]
fn join_bombs_from_outside_the_pool() {
    // `magpie::join` on a plain thread: the global runtime, through the inject queue.
    let ledger = Ledger::new();
    assert_eq!(
        caught(|| magpie::join(|| ledger.throw(), || ledger.throw())),
        Caught::Bomb
    );
    assert_eq!(caught(|| bomb_tree(5, &ledger)), Caught::Bomb);
    ledger.assert_all_dropped_once();
    assert_eq!(magpie::join(|| 1, || 2), (1, 2));
}

#[test]
fn join_drops_a_bomb_returned_by_the_half_that_did_not_panic() {
    for workers in [1, 2] {
        let rt = runtime(workers);
        let ledger = Ledger::new();
        for depth in 0..6 {
            // `a` returns a bomb, `b` panics: `a`'s value is thrown away.
            let got = caught(|| {
                rt.install(|| nested(depth, &|| magpie::join(|| ledger.bomb(), || panic!("b"))))
            });
            assert_eq!(got, message("b"), "a's bomb, depth {depth}");
            // `b` returns a bomb, `a` panics: `b`'s value is thrown away, `a`'s panic wins.
            let got = caught(|| {
                rt.install(|| nested(depth, &|| magpie::join(|| panic!("a"), || ledger.bomb())))
            });
            assert_eq!(got, message("a"), "b's bomb, depth {depth}");
            // Both panic, `b` with a bomb: `a`'s message wins, `b`'s bomb goes off quietly.
            let got = caught(|| {
                rt.install(|| nested(depth, &|| magpie::join(|| panic!("a"), || ledger.throw())))
            });
            assert_eq!(got, message("a"), "b's payload, depth {depth}");
        }
        ledger.assert_all_dropped_once();
        assert_works(&rt);
    }
}

/// Runs `join(a, b)` on a two-worker runtime with `b` certainly stolen: `a` waits until `b`
/// has started on the other worker.
fn join_with_stolen_b<RA: Send, RB: Send>(
    rt: &Runtime,
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    let _deadline = Deadline::new("join_with_stolen_b", Duration::from_secs(20));
    let b_started = AtomicBool::new(false);
    rt.install(|| {
        magpie::join(
            || {
                while !b_started.load(SeqCst) {
                    std::thread::yield_now();
                }
                a()
            },
            || {
                b_started.store(true, SeqCst);
                b()
            },
        )
    })
}

#[test]
fn join_bombs_with_a_stolen_half() {
    let rt = runtime(2);
    let ledger = Ledger::new();
    for _ in 0..20 {
        let got = caught(|| join_with_stolen_b(&rt, || ledger.throw(), || ledger.throw()));
        assert_eq!(got, Caught::Bomb, "both panic");
        let got = caught(|| join_with_stolen_b(&rt, || ledger.bomb(), || panic!("b")));
        assert_eq!(got, message("b"), "a returns a bomb, b panics");
        let got = caught(|| join_with_stolen_b(&rt, || panic!("a"), || ledger.bomb()));
        assert_eq!(got, message("a"), "a panics, b returns a bomb");
        let got = caught(|| join_with_stolen_b(&rt, || panic!("a"), || ledger.throw()));
        assert_eq!(got, message("a"), "a panics, b throws a bomb");
    }
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

#[test]
fn join_halves_that_own_bombs() {
    // Each half owns a bomb and drops it when it returns: that drop is the half's panic.
    let rt = runtime(2);
    let ledger = Ledger::new();
    for depth in 0..6 {
        let got = caught(|| {
            rt.install(|| {
                nested(depth, &|| {
                    let (x, y) = (ledger.bomb(), ledger.bomb());
                    magpie::join(move || drop(x), move || drop(y))
                })
            })
        });
        assert_eq!(got, message(EXPLODED), "depth {depth}");
    }
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

// ---------------------------------------------------------------------------------------------
// scope
// ---------------------------------------------------------------------------------------------

#[test]
fn scope_spawns_panic_with_bombs() {
    for workers in [1, 2, 3] {
        let rt = runtime(workers);
        let ledger = Ledger::new();
        for spawns in [1, 2, 10, 100] {
            let got = caught(|| {
                rt.install(|| {
                    magpie::scope(|s| {
                        for _ in 0..spawns {
                            s.spawn(|s| {
                                s.spawn(|_| ledger.throw());
                                ledger.throw()
                            });
                        }
                    })
                })
            });
            // The first recorded payload reaches the caller; the others go off inside.
            assert_eq!(got, Caught::Bomb, "{workers} workers, {spawns} spawns");
        }
        ledger.assert_all_dropped_once();
        assert_works(&rt);
    }
}

#[test]
fn scope_body_panic_wins_over_spawned_bombs() {
    let rt = runtime(2);
    let ledger = Ledger::new();
    for spawns in [1, 2, 10] {
        let got = caught(|| {
            rt.install(|| {
                magpie::scope(|s| {
                    for _ in 0..spawns {
                        s.spawn(|_| ledger.throw());
                    }
                    panic!("body")
                })
            })
        });
        assert_eq!(got, message("body"), "{spawns} spawns");
    }
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

#[test]
fn scope_body_bomb_value_is_dropped_when_a_spawn_panics() {
    let rt = runtime(2);
    let ledger = Ledger::new();
    for depth in 0..4 {
        let got = caught(|| {
            rt.install(|| {
                nested(depth, &|| {
                    magpie::scope(|s| {
                        s.spawn(|_| panic!("spawn"));
                        ledger.bomb()
                    })
                })
            })
        });
        assert_eq!(got, message("spawn"), "depth {depth}");
    }
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

#[test]
fn scope_spawns_from_outside_the_pool_panic_with_bombs() {
    // A thread that is no worker spawns on the scope: the jobs go through the inject queue.
    let rt = runtime(2);
    let ledger = Ledger::new();
    let got = caught(|| {
        rt.install(|| {
            magpie::scope(|s| {
                std::thread::scope(|threads| {
                    for _ in 0..4 {
                        threads.spawn(|| {
                            for _ in 0..10 {
                                s.spawn(|_| ledger.throw());
                            }
                        });
                    }
                });
            })
        })
    });
    assert_eq!(got, Caught::Bomb);
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

#[test]
fn scope_from_outside_the_pool_with_bombs() {
    // `magpie::scope` on a plain thread: the global runtime.
    let ledger = Ledger::new();
    let got = caught(|| {
        magpie::scope(|s| {
            for _ in 0..10 {
                s.spawn(|_| ledger.throw());
            }
        })
    });
    assert_eq!(got, Caught::Bomb);
    let got = caught(|| {
        magpie::scope(|s| {
            s.spawn(|_| ledger.throw());
            panic!("body")
        })
    });
    assert_eq!(got, message("body"));
    ledger.assert_all_dropped_once();
    assert_eq!(magpie::join(|| 1, || 2), (1, 2));
}

#[test]
fn nested_scopes_with_bombs() {
    let rt = runtime(3);
    let ledger = Ledger::new();
    let got = caught(|| {
        rt.install(|| {
            magpie::scope(|outer| {
                for _ in 0..4 {
                    outer.spawn(|outer| {
                        magpie::scope(|inner| {
                            for _ in 0..4 {
                                inner.spawn(|_| ledger.throw());
                            }
                            // A spawn on the outer scope from inside the inner one.
                            outer.spawn(|_| ledger.throw());
                        });
                    });
                }
                magpie::scope(|inner| {
                    inner.spawn(|_| ledger.throw());
                    ledger.throw()
                })
            })
        })
    });
    assert_eq!(got, Caught::Bomb);
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

#[test]
fn scope_spawns_that_own_bombs() {
    // Each spawn owns a bomb and drops it as it returns: that drop is the spawn's panic.
    let rt = runtime(2);
    let ledger = Ledger::new();
    let got = caught(|| {
        rt.install(|| {
            magpie::scope(|s| {
                for _ in 0..10 {
                    let bomb = ledger.bomb();
                    s.spawn(move |_| drop(bomb));
                }
            })
        })
    });
    assert_eq!(got, message(EXPLODED));
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

// ---------------------------------------------------------------------------------------------
// install
// ---------------------------------------------------------------------------------------------

#[test]
fn install_with_bombs() {
    let rt = runtime(2);
    let ledger = Ledger::new();
    // From outside the pool, then from inside it (runs in place).
    assert_eq!(caught(|| rt.install(|| ledger.throw())), Caught::Bomb);
    assert_eq!(
        caught(|| rt.install(|| rt.install(|| ledger.throw()))),
        Caught::Bomb
    );
    // A bomb as the value comes back whole.
    let mut bomb = rt.install(|| ledger.bomb());
    bomb.armed = false;
    drop(bomb);
    assert_eq!(
        caught(|| rt.install(|| magpie::join(|| ledger.throw(), || ledger.throw()))),
        Caught::Bomb
    );
    // From a blocking thread of the runtime.
    let got = rt
        .spawn_blocking({
            let ledger = ledger.clone();
            move || caught(|| magpie::join(|| ledger.throw(), || ledger.throw()))
        })
        .join()
        .unwrap();
    assert_eq!(got, Caught::Bomb);
    ledger.assert_all_dropped_once();
    assert_works(&rt);
}

// ---------------------------------------------------------------------------------------------
// Parallel iterators
// ---------------------------------------------------------------------------------------------

#[test]
fn par_iter_closures_panic_with_bombs() {
    for workers in [1, 2, 3] {
        let rt = runtime(workers);
        let ledger = Ledger::new();
        let got = caught(|| {
            rt.install(|| {
                (0..10_000u32).into_par_iter().for_each(|i| {
                    if i % 7 == 0 {
                        ledger.throw();
                    }
                })
            })
        });
        assert_eq!(got, Caught::Bomb, "for_each, {workers} workers");
        let got = caught(|| {
            rt.install(|| {
                (0..10_000u32)
                    .into_par_iter()
                    .map(|i| if i % 5 == 0 { ledger.throw() } else { i })
                    .collect::<Vec<_>>()
            })
        });
        assert_eq!(got, Caught::Bomb, "map + collect, {workers} workers");
        let v: Vec<u32> = (0..10_000).collect();
        let got = caught(|| {
            rt.install(|| {
                v.par_iter()
                    .map(|&i| {
                        if i % 3 == 0 {
                            ledger.throw()
                        } else {
                            u64::from(i)
                        }
                    })
                    .sum::<u64>()
            })
        });
        assert_eq!(got, Caught::Bomb, "map + sum, {workers} workers");
        ledger.assert_all_dropped_once();
        assert_works(&rt);
    }
}

#[test]
fn par_iter_bombs_from_outside_the_pool() {
    let ledger = Ledger::new();
    let got = caught(|| {
        (0..10_000u32)
            .into_par_iter()
            .map(|i| if i % 11 == 0 { ledger.throw() } else { i })
            .collect::<Vec<_>>()
    });
    assert_eq!(got, Caught::Bomb);
    ledger.assert_all_dropped_once();
    assert_eq!(magpie::join(|| 1, || 2), (1, 2));
}
