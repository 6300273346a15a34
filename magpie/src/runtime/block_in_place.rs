//! `magpie::task::block_in_place`: blocking code on a worker, without holding up the work
//! queued behind it. The worker's side is `worker/block.rs`.

use super::worker::WorkerThread;

/// Runs the blocking closure `f` on the current thread, first handing the tasks queued on
/// this worker to the other workers, so that none of them waits for `f`.
///
/// Use it where a task (or a `join` half, a `scope` body, a submitted closure) must call
/// blocking code (a synchronous library, a lock held across I/O, `magpie::block_on`) and
/// cannot use [`spawn_blocking`](crate::spawn_blocking), because `f` borrows from the
/// caller's stack or is not `'static`.
///
/// On a worker thread, before `f` runs:
///
/// * the tasks queued on this worker (its LIFO slot, its local queue, the closures
///   [`submit_to`](crate::Runtime::submit_to) it) move to the runtime's global queue, where
///   every other worker takes them, busy ones included, and a sleeping worker is woken;
/// * the fork-join jobs this worker offers (second halves of its `join`s, `scope` spawns)
///   stay stealable where they are, and a sleeping worker is woken for them.
///
/// While `f` runs, tasks it spawns or wakes, and closures submitted to this worker, also go
/// to the global queue. `f` runs *here*, on this thread and as this worker: unlike tokio's
/// `block_in_place`, the worker is not replaced by another thread, so `block_in_place` is
/// sound anywhere, including inside [`join`](fn@crate::join) and [`scope`](crate::scope),
/// whose frames hold borrowed data that must not change thread. A `join` or `scope` inside
/// `f` runs on this worker as usual (its halves are offered to the others), and `f` may
/// call [`block_on`](fn@crate::block_on) and [`JoinHandle::join`](crate::JoinHandle::join),
/// which are refused elsewhere on a worker. Calls nest.
///
/// With a single worker, or while every other worker is busy, nobody runs the handed-off
/// tasks until `f` returns: they wait as they would have waited in this worker's queues.
/// (tokio panics on its current-thread runtime instead.) So `f` must not wait for the
/// runtime's tasks unless another worker is free to run them. The same holds for timers and
/// sockets: the workers fire them, so a `block_on` on a thread outside the pool that awaits a
/// `sleep` or a read waits while every worker is inside `block_in_place`. (A `block_on`
/// *inside* `block_in_place` drives its runtime's timers and sockets itself while it waits.)
/// A worker that waits inside `join` or `scope` for halves or spawns that others took is
/// not free in that sense: it runs jobs while it waits, never tasks. On 2 workers, a
/// `scope` spawn that blocks here waiting for a task it spawned waits for good if the other
/// worker is the one running the `scope` body.
///
/// Outside a worker thread, `block_in_place` just calls `f`.
///
/// # Panics
///
/// A panic in `f` propagates to the caller unchanged; the worker is left as it was before
/// the call, and keeps running tasks.
///
/// # Examples
///
/// A task that calls blocking code borrowing from its own stack, while the task it spawned
/// runs on another worker:
///
/// ```
/// use std::sync::mpsc;
///
/// let rt = magpie::Runtime::builder().worker_threads(2).build().unwrap();
/// let total = rt.block_on(rt.spawn(async {
///     let data = vec![1, 2, 3];
///     let (tx, rx) = mpsc::channel();
///     // Queued on this worker: handed to the other one by `block_in_place`.
///     let helper = magpie::spawn(async move { tx.send(10).unwrap() });
///     let sum: i32 = magpie::task::block_in_place(|| {
///         // Blocking, and borrowing `data`: no `spawn_blocking` could take this closure.
///         data.iter().sum::<i32>() + rx.recv().unwrap()
///     });
///     helper.await.unwrap();
///     sum
/// }));
/// assert_eq!(total.unwrap(), 16);
///
/// // Outside the pool it just runs the closure.
/// assert_eq!(magpie::task::block_in_place(|| 7), 7);
/// ```
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    // SAFETY: a non-null current worker is live while its thread runs work, which includes
    // this whole call.
    match unsafe { WorkerThread::current().as_ref() } {
        Some(worker) => worker.block_in_place(f),
        None => f(),
    }
}
