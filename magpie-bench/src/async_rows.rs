//! The `async` benchmark: spawning, waking and yielding tasks, magpie against tokio,
//! async-executor and the `futures` thread pool, plus one row that mixes async tasks with
//! fork-join work.
//!
//! The first five rows take their shapes from Tokio's scheduler benchmarks
//! (`benches/rt_multi_threaded.rs` in the tokio repository). Those benchmarks are written to
//! catch regressions in a scheduler's hot paths, not to model an application, and that is
//! how to read these rows too: each isolates one path and times a few thousand trips through
//! it. The sixth and seventh, `lone_request` and `lone_request_cpu`, are ours: the same
//! kind of isolated path, the wake of an idle pool, timed and costed.
//!
//! - `spawn_many_local`: one task spawns 10,000 tasks; each decrements a shared counter and
//!   the one that takes it to zero signals the bench thread. Stresses spawning from a worker
//!   (its local queue and the overflow to the inject queue) and the stealing of fresh tasks
//!   by the other workers. Tokio's version spawns from inside `block_on`, which on its
//!   multi-thread runtime runs on the calling thread, not on a worker; here the spawning loop
//!   runs in a spawned task, so every implementation spawns from one of its own threads.
//! - `spawn_many_remote`: the same 10,000 tasks, spawned by the bench thread from outside the
//!   runtime. Stresses the inject queue and the waking of parked workers. (Tokio's nearest
//!   row, `spawn_many_remote_idle`, awaits every `JoinHandle`; here the counter signals, as in
//!   the local row, so the two rows differ only in where the spawns come from.)
//! - `yield_many`: the bench thread spawns 200 tasks that each yield 1,000 times. Stresses
//!   the wake of a task that is still running and its requeueing behind the other runnable
//!   tasks.
//! - `ping_pong`: one task spawns 1,000 tasks; each spawns a partner, sends it a ping over a
//!   oneshot channel and awaits the pong on another. Stresses waking a task from another
//!   task, often on another worker. Every implementation uses `futures::channel::oneshot`,
//!   so the channel costs the same everywhere.
//! - `chained_spawn`: a chain of 1,000 tasks, each spawning the next. Only one task exists
//!   at a time, so this is the latency of a single spawn on an otherwise idle runtime, where
//!   a worker that searches, finds nothing and parks is most of the cost.
//! - `lone_request`: 50 requests one at a time into an idle pool: the bench thread spawns a
//!   task, which answers over a channel, then pauses 1 ms before the next, long enough for
//!   every worker to park. The time is the median request latency (spawn to answer
//!   received) times the request count, so that one late wake-up of a sample's fifty, which
//!   a VM's scheduler deals out now and then for milliseconds, does not decide it: what a
//!   lightly loaded server pays per request to wake a worker, and whatever else the wake
//!   sets off (a second worker woken to search, a barrier on its park).
//! - `lone_request_cpu`: the same requests, but what it reports is the CPU time the pool's
//!   own threads spent on them: the runs, and each worker's search, spin and park until the
//!   pool is idle again. What a lightly loaded server pays in CPU per request, where
//!   `lone_request` is what it pays in latency.
//! - `mixed`: an acceptor task spawns 64 "requests"; each handler computes fib(22) with a
//!   join at every call and reports the result. magpie runs `magpie::join` directly inside
//!   the async task, on the same workers. Its peer is what tokio users commonly do with CPU
//!   work: the handler hands it to a rayon pool with `ThreadPool::spawn` (the pool-scoped
//!   `rayon::spawn`) and awaits the answer on a `tokio::sync::oneshot`; the recursion then
//!   uses `rayon::join`. tokio and rayon get N threads each, so that peer runs on twice as
//!   many threads as magpie. Only these two take part in this row.
//!
//! Yielding: magpie and tokio use their own `yield_now`; async-executor and the futures pool
//! use `futures_lite::future::yield_now`, which wakes itself and returns `Pending` once. The
//! futures pool re-polls a task woken during its own poll on the same thread without
//! requeueing it, so there a yield lets no other task run.
//!
//! Method: as in `fork-join` (see `harness`), every runtime and pool is built once, before
//! any row, and lives for the whole run; warm-up rounds, then rounds that run every
//! implementation once in rotating order. Only the workload is timed: from just before the
//! first spawn until the bench thread receives the last completion signal. Each row checks
//! its outcome (counters at zero, every reply correct, every result right) after the clock
//! stops and panics if it is wrong, and every wait gives up with a panic after
//! [`WAIT_LIMIT`], so a broken runtime can neither post a fast number nor hang the run.

use std::fmt;
use std::fmt::Write as _;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use async_executor::Executor;
use futures::channel::oneshot;
use futures::executor::ThreadPool;
use serde::Serialize;

use crate::fork_join::fib;
use crate::harness::{
    fmt_ms, markdown_table, measure_rounds, median, ms, samples_json, SamplesJson,
};
use crate::idle::{process_cpu, threads_cpu_by_tid, threads_cpu_since};
use crate::pools::{MagpieFork, RayonFork};

/// Tasks spawned by `spawn_many_local` and `spawn_many_remote` (tokio's `NUM_SPAWN`).
const NUM_SPAWN: usize = 10_000;
/// Tasks in `yield_many`, and the yields each makes (tokio's `TASKS` and `NUM_YIELD`).
const YIELD_TASKS: usize = 200;
const YIELDS_PER_TASK: usize = 1_000;
/// Ping-pong exchanges in `ping_pong` (tokio's `NUM_PINGS`).
const NUM_PINGS: usize = 1_000;
/// Links in the `chained_spawn` chain (tokio's `ITER`).
const CHAIN_LEN: usize = 1_000;
/// Requests in `lone_request`, and the pause before each, for the pool to go idle.
const LONE_REQUESTS: usize = 50;
const LONE_PAUSE: Duration = Duration::from_millis(1);
/// Requests in `mixed`, and the n of the fib(n) each computes.
const REQUESTS: usize = 64;
const REQUEST_FIB_N: u64 = 22;

/// How long the bench thread waits for a completion signal before it declares the
/// implementation broken. Every row takes milliseconds on a healthy runtime.
const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The name of the threads of `imp`'s runtime or pool of `workers` threads, without its
/// `-index` suffix: a tag (`am` magpie, `amo` magpie with stall detection off, `ami` with
/// task counters, `at` tokio, `ae` async-executor, `af` the futures pool, `ar` the rayon half
/// of `mixed`) and the worker count. `lone_request_cpu` counts the CPU of the threads whose
/// names start with it and a `-`, so that every runtime's threads are told apart from every
/// other's, the stall-off twin's and the other worker counts' included (`scale` holds the
/// pools of every worker count at once). Short: Linux keeps 15 bytes of a thread's name.
fn thread_name(imp: AsyncImpl, workers: usize) -> String {
    let tag = match imp {
        AsyncImpl::Magpie => "am",
        AsyncImpl::MagpieStallOff => "amo",
        AsyncImpl::MagpieInsight => "ami",
        AsyncImpl::Tokio => "at",
        AsyncImpl::AsyncExecutor => "ae",
        AsyncImpl::FuturesPool => "af",
        AsyncImpl::TokioRayon => "ar",
    };
    format!("{tag}{workers}")
}

// ---------------------------------------------------------------------------------------
// The implementations

/// One of the implementations under comparison.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AsyncImpl {
    /// `magpie::Runtime`: `Runtime::spawn` from outside, `magpie::spawn` inside a task.
    Magpie,
    /// tokio's multi-thread runtime: `Handle::spawn` from outside, `tokio::spawn` inside.
    Tokio,
    /// An `async_executor::Executor` run by N threads.
    AsyncExecutor,
    /// `futures::executor::ThreadPool`.
    FuturesPool,
    /// tokio for the async part, a rayon pool for the fork-join part (`mixed` only).
    TokioRayon,
    /// magpie with stall detection off (`Builder::stall_threshold(None)`): not a peer, the
    /// baseline of what the stall monitor costs. Its `magpie/this` ratio is on / off (the
    /// `magpie` row runs with the default threshold, 100 ms).
    #[value(name = "magpie-stall-off")]
    MagpieStallOff,
    /// magpie with per-task counters on (`Builder::task_insight(true)`): not a peer, what
    /// the counters of `Runtime::tasks` cost. The report prints counters on / off (the
    /// `magpie` row keeps them off, the default). Not in `scale`.
    #[value(name = "magpie-insight")]
    MagpieInsight,
}

impl AsyncImpl {
    /// All of them, in the order of the tables.
    pub(crate) const ALL: [AsyncImpl; 7] = [
        AsyncImpl::Magpie,
        AsyncImpl::Tokio,
        AsyncImpl::AsyncExecutor,
        AsyncImpl::FuturesPool,
        AsyncImpl::TokioRayon,
        AsyncImpl::MagpieStallOff,
        AsyncImpl::MagpieInsight,
    ];

    /// Whether this is a peer (another library), as opposed to magpie itself.
    fn is_peer(self) -> bool {
        !matches!(
            self,
            AsyncImpl::Magpie | AsyncImpl::MagpieStallOff | AsyncImpl::MagpieInsight
        )
    }

    /// The name used in tables and JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AsyncImpl::Magpie => "magpie",
            AsyncImpl::Tokio => "tokio",
            AsyncImpl::AsyncExecutor => "async-executor",
            AsyncImpl::FuturesPool => "futures ThreadPool",
            AsyncImpl::TokioRayon => "tokio+rayon",
            AsyncImpl::MagpieStallOff => "magpie (stall off)",
            AsyncImpl::MagpieInsight => "magpie (task counters)",
        }
    }
}

impl fmt::Display for AsyncImpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// What a row needs from an executor, so that each row is written once.
///
/// A value is a cheap handle that tasks can capture to spawn more tasks.
trait Exec: Clone + Send + Sync + 'static {
    /// Spawns `fut` from inside one of this executor's tasks, taking the local path where
    /// the executor has one, and detaches it.
    fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// Spawns `fut` from a thread outside the executor, and detaches it.
    fn spawn_remote<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// A future that gives the worker back to the scheduler once.
    fn yield_now() -> impl Future<Output = ()> + Send + 'static;
}

/// A handle on the magpie runtime.
#[derive(Clone, Debug)]
struct MagpieExec(Arc<magpie::Runtime>);

impl Exec for MagpieExec {
    fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(magpie::spawn(fut));
    }

    fn spawn_remote<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn(fut));
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        magpie::task::yield_now()
    }
}

/// A handle on the tokio runtime.
#[derive(Clone, Debug)]
struct TokioExec(tokio::runtime::Handle);

impl Exec for TokioExec {
    fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(tokio::spawn(fut));
    }

    fn spawn_remote<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn(fut));
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        tokio::task::yield_now()
    }
}

/// A handle on the async-executor, which has one spawn path for every caller.
#[derive(Clone, Debug)]
struct ExecutorExec(Arc<Executor<'static>>);

impl Exec for ExecutorExec {
    fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn(fut).detach();
    }

    fn spawn_remote<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn(fut).detach();
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

/// A handle on the futures thread pool, which has one spawn path for every caller.
#[derive(Clone, Debug)]
struct FuturesExec(ThreadPool);

impl Exec for FuturesExec {
    fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn_ok(fut);
    }

    fn spawn_remote<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn_ok(fut);
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

/// An `async_executor::Executor` and the threads that run it.
///
/// Each thread blocks in `block_on(executor.run(stop))`, the setup the crate documents for a
/// multi-threaded executor; dropping the pool completes every `stop` future and joins the
/// threads.
#[derive(Debug)]
struct ExecutorPool {
    exec: ExecutorExec,
    stop: Vec<oneshot::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl ExecutorPool {
    fn new(workers: usize) -> ExecutorPool {
        let executor = Arc::new(Executor::new());
        let mut stop = Vec::with_capacity(workers);
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let executor = Arc::clone(&executor);
            let thread = thread::Builder::new()
                .name(format!(
                    "{}-{i}",
                    thread_name(AsyncImpl::AsyncExecutor, workers)
                ))
                .spawn(move || {
                    futures_lite::future::block_on(executor.run(async {
                        // Err(Canceled) when the sender is dropped: that is the signal too.
                        let _ = stop_rx.await;
                    }));
                })
                .expect("could not start an async-executor thread");
            stop.push(stop_tx);
            threads.push(thread);
        }
        ExecutorPool {
            exec: ExecutorExec(executor),
            stop,
            threads,
        }
    }
}

impl Drop for ExecutorPool {
    fn drop(&mut self) {
        self.stop.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Every runtime and pool of the benchmark, built once with the same worker count.
#[derive(Debug)]
pub(crate) struct AsyncPools {
    workers: usize,
    magpie: MagpieExec,
    /// The same, with stall detection off.
    magpie_stall_off: MagpieExec,
    /// The same as `magpie`, with per-task counters on; built when first asked for.
    magpie_insight: OnceLock<MagpieExec>,
    tokio: tokio::runtime::Runtime,
    executor: ExecutorPool,
    futures: FuturesExec,
    /// The fork-join half of `tokio+rayon`.
    rayon: Arc<rayon::ThreadPool>,
}

/// The stall threshold of the magpie runtimes that detect stalls (the default, set
/// explicitly).
const STALL_THRESHOLD: Duration = Duration::from_millis(100);

/// The magpie runtime of `imp` (one of the three magpie variants) with `workers` workers:
/// stall detection off for the twin, per-task counters on for the insight variant. The
/// threshold is explicit, so that `MAGPIE_STALL_THRESHOLD_MS` cannot make two the same.
fn magpie_runtime(imp: AsyncImpl, workers: usize) -> magpie::Runtime {
    let threshold = (imp != AsyncImpl::MagpieStallOff).then_some(STALL_THRESHOLD);
    crate::pools::magpie_builder(workers)
        .thread_name(thread_name(imp, workers))
        .stall_threshold(threshold)
        .task_insight(imp == AsyncImpl::MagpieInsight)
        .build()
        .expect("could not build the magpie runtime")
}

impl AsyncPools {
    /// Builds every runtime and pool with `workers` threads each.
    pub(crate) fn new(workers: usize) -> AsyncPools {
        let magpie = magpie_runtime(AsyncImpl::Magpie, workers);
        let magpie_stall_off =
            MagpieExec(Arc::new(magpie_runtime(AsyncImpl::MagpieStallOff, workers)));
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name(format!("{}-", thread_name(AsyncImpl::Tokio, workers)))
            .build()
            .expect("could not build the tokio runtime");
        let futures = ThreadPool::builder()
            .pool_size(workers)
            .name_prefix(format!("{}-", thread_name(AsyncImpl::FuturesPool, workers)))
            .create()
            .expect("could not build the futures thread pool");
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(move |i| format!("{}-{i}", thread_name(AsyncImpl::TokioRayon, workers)))
            .build()
            .expect("could not build the rayon pool");
        AsyncPools {
            workers,
            magpie: MagpieExec(Arc::new(magpie)),
            magpie_stall_off,
            magpie_insight: OnceLock::new(),
            tokio,
            executor: ExecutorPool::new(workers),
            futures: FuturesExec(futures),
            rayon: Arc::new(rayon),
        }
    }

    /// The worker count every runtime and pool was built with.
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// The magpie runtime.
    pub(crate) fn magpie(&self) -> &magpie::Runtime {
        &self.magpie.0
    }

    /// The tokio runtime.
    pub(crate) fn tokio(&self) -> &tokio::runtime::Runtime {
        &self.tokio
    }

    /// The async-executor (run by its N threads).
    pub(crate) fn executor(&self) -> &Executor<'static> {
        &self.executor.exec.0
    }

    /// The rayon pool (the fork-join half of `tokio+rayon`).
    pub(crate) fn rayon(&self) -> &rayon::ThreadPool {
        &self.rayon
    }

    /// The magpie runtime with per-task counters, built on first use.
    fn magpie_insight(&self) -> &MagpieExec {
        self.magpie_insight.get_or_init(|| {
            MagpieExec(Arc::new(magpie_runtime(
                AsyncImpl::MagpieInsight,
                self.workers,
            )))
        })
    }

    /// Runs `row` once with `imp` and returns the time the workload took.
    pub(crate) fn sample(&self, row: Row, imp: AsyncImpl) -> Duration {
        let tokio = TokioExec(self.tokio.handle().clone());
        // Each row is generic over `Exec`; this picks the instance.
        macro_rules! with_exec {
            ($row_fn:ident $(, $arg:expr)*) => {
                match imp {
                    AsyncImpl::Magpie => $row_fn(&self.magpie $(, $arg)*),
                    AsyncImpl::MagpieStallOff => $row_fn(&self.magpie_stall_off $(, $arg)*),
                    AsyncImpl::MagpieInsight => $row_fn(self.magpie_insight() $(, $arg)*),
                    AsyncImpl::Tokio => $row_fn(&tokio $(, $arg)*),
                    AsyncImpl::AsyncExecutor => $row_fn(&self.executor.exec $(, $arg)*),
                    AsyncImpl::FuturesPool => $row_fn(&self.futures $(, $arg)*),
                    AsyncImpl::TokioRayon => unreachable!("tokio+rayon only runs `mixed`"),
                }
            };
        }
        match row {
            Row::SpawnManyLocal => with_exec!(spawn_many_local),
            Row::SpawnManyRemote => with_exec!(spawn_many_remote),
            Row::YieldMany => with_exec!(yield_many),
            Row::PingPong => with_exec!(ping_pong),
            Row::ChainedSpawn => with_exec!(chained_spawn),
            Row::LoneRequest => with_exec!(lone_request),
            Row::LoneRequestCpu => {
                let threads = format!("{}-", thread_name(imp, self.workers));
                with_exec!(lone_request_cpu, &threads)
            }
            Row::Mixed => match imp {
                AsyncImpl::Magpie => mixed_magpie(&self.magpie),
                AsyncImpl::MagpieStallOff => mixed_magpie(&self.magpie_stall_off),
                AsyncImpl::MagpieInsight => mixed_magpie(self.magpie_insight()),
                AsyncImpl::TokioRayon => mixed_tokio_rayon(&tokio, &self.rayon),
                other => unreachable!("{other} does not run `mixed`"),
            },
        }
    }
}

// ---------------------------------------------------------------------------------------
// The rows

/// One row of the benchmark.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    #[value(name = "spawn_many_local")]
    SpawnManyLocal,
    #[value(name = "spawn_many_remote")]
    SpawnManyRemote,
    #[value(name = "yield_many")]
    YieldMany,
    #[value(name = "ping_pong")]
    PingPong,
    #[value(name = "chained_spawn")]
    ChainedSpawn,
    #[value(name = "lone_request")]
    LoneRequest,
    #[value(name = "lone_request_cpu")]
    LoneRequestCpu,
    #[value(name = "mixed")]
    Mixed,
}

impl Row {
    /// All rows, in the order they run.
    pub(crate) const ALL: [Row; 8] = [
        Row::SpawnManyLocal,
        Row::SpawnManyRemote,
        Row::YieldMany,
        Row::PingPong,
        Row::ChainedSpawn,
        Row::LoneRequest,
        Row::LoneRequestCpu,
        Row::Mixed,
    ];

    /// The name used in tables and JSON (tokio's bench names).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Row::SpawnManyLocal => "spawn_many_local",
            Row::SpawnManyRemote => "spawn_many_remote",
            Row::YieldMany => "yield_many",
            Row::PingPong => "ping_pong",
            Row::ChainedSpawn => "chained_spawn",
            Row::LoneRequest => "lone_request",
            Row::LoneRequestCpu => "lone_request_cpu",
            Row::Mixed => "mixed",
        }
    }

    /// One line on what the row does, for the table's heading.
    pub(crate) fn describe(self) -> String {
        match self {
            Row::SpawnManyLocal => format!("{NUM_SPAWN} tasks spawned from a task"),
            Row::SpawnManyRemote => format!("{NUM_SPAWN} tasks spawned from outside"),
            Row::YieldMany => format!("{YIELD_TASKS} tasks × {YIELDS_PER_TASK} yields"),
            Row::PingPong => format!("{NUM_PINGS} spawned ping-pong pairs"),
            Row::ChainedSpawn => format!("a chain of {CHAIN_LEN} spawns"),
            Row::LoneRequest => {
                format!("{LONE_REQUESTS} requests one at a time into an idle pool")
            }
            Row::LoneRequestCpu => format!(
                "CPU time of the pool's threads for {LONE_REQUESTS} requests one at a time \
                 into an idle pool"
            ),
            Row::Mixed => {
                format!("{REQUESTS} request tasks, each a fork-join fib({REQUEST_FIB_N})")
            }
        }
    }

    /// What a reader must know to read the row's numbers, if anything.
    fn caveat(self) -> Option<&'static str> {
        match self {
            Row::YieldMany => Some(
                "futures ThreadPool polls a task that wakes itself during its poll again at \
                 once, on the same thread, so its yields let no other task run: its number is \
                 a loop of polls, not a round through the scheduler.",
            ),
            Row::Mixed => {
                Some("tokio+rayon runs on twice the threads: N tokio workers plus N rayon threads.")
            }
            _ => None,
        }
    }

    /// The implementations that take part in this row.
    pub(crate) fn impls(self) -> &'static [AsyncImpl] {
        match self {
            Row::Mixed => &[
                AsyncImpl::Magpie,
                AsyncImpl::TokioRayon,
                AsyncImpl::MagpieStallOff,
                AsyncImpl::MagpieInsight,
            ],
            _ => &[
                AsyncImpl::Magpie,
                AsyncImpl::Tokio,
                AsyncImpl::AsyncExecutor,
                AsyncImpl::FuturesPool,
                AsyncImpl::MagpieStallOff,
                AsyncImpl::MagpieInsight,
            ],
        }
    }
}

/// Waits for the next completion signal on `rx`; panics naming `row` after [`WAIT_LIMIT`].
pub(crate) fn wait<T>(rx: &Receiver<T>, row: &str) -> T {
    match rx.recv_timeout(WAIT_LIMIT) {
        Ok(value) => value,
        Err(err) => panic!("{row}: no completion signal within {WAIT_LIMIT:?} ({err})"),
    }
}

/// Panics if a second completion signal has arrived on `rx`: the counter passed zero twice,
/// so some task ran more than once.
fn assert_no_second_signal<T>(rx: &Receiver<T>, row: &str) {
    match rx.try_recv() {
        Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
        Ok(_) => panic!("{row}: completion signalled twice"),
    }
}

/// A task that decrements `remaining` and, if it took it to zero, signals `done`.
///
/// The ordering of the decrement does not matter: the signal travels over the channel,
/// which orders everything the tasks did before the bench thread's checks.
async fn countdown(remaining: Arc<AtomicUsize>, done: SyncSender<()>) {
    if remaining.fetch_sub(1, Relaxed) == 1 {
        done.send(()).expect("the bench thread stopped waiting");
    }
}

/// `spawn_many_local`: one task spawns [`NUM_SPAWN`] countdown tasks.
fn spawn_many_local<E: Exec>(exec: &E) -> Duration {
    let remaining = Arc::new(AtomicUsize::new(NUM_SPAWN));
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let spawner = exec.clone();
    let counter = Arc::clone(&remaining);
    let start = Instant::now();
    exec.spawn_remote(async move {
        for _ in 0..NUM_SPAWN {
            spawner.spawn(countdown(Arc::clone(&counter), done_tx.clone()));
        }
    });
    wait(&done_rx, "spawn_many_local");
    let elapsed = start.elapsed();
    assert_eq!(remaining.load(Relaxed), 0, "spawn_many_local: counter");
    assert_no_second_signal(&done_rx, "spawn_many_local");
    elapsed
}

/// `spawn_many_remote`: the bench thread spawns [`NUM_SPAWN`] countdown tasks.
fn spawn_many_remote<E: Exec>(exec: &E) -> Duration {
    let remaining = Arc::new(AtomicUsize::new(NUM_SPAWN));
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let start = Instant::now();
    for _ in 0..NUM_SPAWN {
        exec.spawn_remote(countdown(Arc::clone(&remaining), done_tx.clone()));
    }
    wait(&done_rx, "spawn_many_remote");
    let elapsed = start.elapsed();
    assert_eq!(remaining.load(Relaxed), 0, "spawn_many_remote: counter");
    assert_no_second_signal(&done_rx, "spawn_many_remote");
    elapsed
}

/// `yield_many`: the bench thread spawns [`YIELD_TASKS`] tasks that each yield
/// [`YIELDS_PER_TASK`] times and then report how many yields they made.
fn yield_many<E: Exec>(exec: &E) -> Duration {
    let (done_tx, done_rx) = mpsc::sync_channel(YIELD_TASKS);
    let start = Instant::now();
    for _ in 0..YIELD_TASKS {
        let done_tx = done_tx.clone();
        exec.spawn_remote(async move {
            let mut yields = 0;
            for _ in 0..YIELDS_PER_TASK {
                E::yield_now().await;
                yields += 1;
            }
            done_tx
                .send(yields)
                .expect("the bench thread stopped waiting");
        });
    }
    let total: usize = (0..YIELD_TASKS).map(|_| wait(&done_rx, "yield_many")).sum();
    let elapsed = start.elapsed();
    assert_eq!(
        total,
        YIELD_TASKS * YIELDS_PER_TASK,
        "yield_many: yields made"
    );
    elapsed
}

/// `ping_pong`: one task spawns [`NUM_PINGS`] tasks; each spawns a partner that answers
/// its ping `i` with `i + 1`.
fn ping_pong<E: Exec>(exec: &E) -> Duration {
    let remaining = Arc::new(AtomicUsize::new(NUM_PINGS));
    let good_replies = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let spawner = exec.clone();
    let (counter, replies) = (Arc::clone(&remaining), Arc::clone(&good_replies));
    let start = Instant::now();
    exec.spawn_remote(async move {
        for round in 0..NUM_PINGS {
            let partner_spawner = spawner.clone();
            let (counter, replies, done_tx) =
                (Arc::clone(&counter), Arc::clone(&replies), done_tx.clone());
            spawner.spawn(async move {
                let (ping_tx, ping_rx) = oneshot::channel::<usize>();
                let (pong_tx, pong_rx) = oneshot::channel::<usize>();
                partner_spawner.spawn(async move {
                    let ping = ping_rx.await.expect("the ping sender was dropped");
                    pong_tx
                        .send(ping + 1)
                        .expect("the pong receiver was dropped");
                });
                ping_tx.send(round).expect("the ping receiver was dropped");
                let pong = pong_rx.await.expect("the pong sender was dropped");
                if pong == round + 1 {
                    // Ordering does not matter: read after the channel signal below.
                    replies.fetch_add(1, Relaxed);
                }
                if counter.fetch_sub(1, Relaxed) == 1 {
                    done_tx.send(()).expect("the bench thread stopped waiting");
                }
            });
        }
    });
    wait(&done_rx, "ping_pong");
    let elapsed = start.elapsed();
    assert_eq!(remaining.load(Relaxed), 0, "ping_pong: counter");
    assert_eq!(
        good_replies.load(Relaxed),
        NUM_PINGS,
        "ping_pong: good replies"
    );
    assert_no_second_signal(&done_rx, "ping_pong");
    elapsed
}

/// One link of the `chained_spawn` chain: spawns the next link, or at the end reports the
/// chain's length.
fn chain_link<E: Exec>(exec: E, links_left: usize, links_done: usize, done: SyncSender<usize>) {
    if links_left == 0 {
        done.send(links_done)
            .expect("the bench thread stopped waiting");
    } else {
        let next = exec.clone();
        exec.spawn(async move { chain_link(next, links_left - 1, links_done + 1, done) });
    }
}

/// `chained_spawn`: a task starts a chain of [`CHAIN_LEN`] tasks, each spawning the next.
fn chained_spawn<E: Exec>(exec: &E) -> Duration {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let spawner = exec.clone();
    let start = Instant::now();
    exec.spawn_remote(async move { chain_link(spawner, CHAIN_LEN, 0, done_tx) });
    let links = wait(&done_rx, "chained_spawn");
    let elapsed = start.elapsed();
    assert_eq!(links, CHAIN_LEN, "chained_spawn: links");
    elapsed
}

/// `lone_request`: [`LONE_REQUESTS`] tasks spawned from outside one at a time, each after a
/// pause of [`LONE_PAUSE`] (untimed) and each answering over a channel before the next is
/// spawned. Returns their median latency, spawn to answer received, times their count.
fn lone_request<E: Exec>(exec: &E) -> Duration {
    let mut latencies = lone_requests(exec);
    latencies.sort_unstable();
    latencies[LONE_REQUESTS / 2] * LONE_REQUESTS as u32
}

/// `lone_request_cpu`: the requests of `lone_request`; returns the CPU time the executor's
/// own threads (whose names start with `threads`) spent from the first pause to the last
/// answer: running each request, and whatever each wake sets off until the pool is idle
/// again (searching, spinning, a second worker woken). The bench thread's share (the
/// spawns, its sleeps and waits) is left out: it is the same loop for every executor. Where
/// the threads cannot be told apart (not Linux), the whole process's CPU time.
fn lone_request_cpu<E: Exec>(exec: &E, threads: &str) -> Duration {
    let own = |name: &str| name.starts_with(threads);
    let before = threads_cpu_by_tid(own);
    let process_before = process_cpu();
    let _latencies = lone_requests(exec);
    match (before, threads_cpu_by_tid(own)) {
        (Some(before), Some(after)) => threads_cpu_since(&before, &after),
        _ => process_cpu().saturating_sub(process_before),
    }
}

/// The requests of `lone_request`; returns their latencies.
fn lone_requests<E: Exec>(exec: &E) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(LONE_REQUESTS);
    for i in 0..LONE_REQUESTS {
        thread::sleep(LONE_PAUSE);
        let (tx, rx) = mpsc::sync_channel(1);
        let start = Instant::now();
        exec.spawn_remote(async move {
            tx.send(black_box(i))
                .expect("the bench thread stopped waiting");
        });
        let answer = wait(&rx, "lone_request");
        latencies.push(start.elapsed());
        assert_eq!(answer, i, "lone_request: answer");
    }
    latencies
}

/// `fib(n)` by iteration, to check the requests' answers.
fn fib_reference(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// Collects the [`REQUESTS`] answers of `mixed` and checks them; returns the time elapsed
/// since `start` when the last arrived.
fn collect_answers(done_rx: &Receiver<u64>, start: Instant) -> Duration {
    let answers: Vec<u64> = (0..REQUESTS).map(|_| wait(done_rx, "mixed")).collect();
    let elapsed = start.elapsed();
    let expected = fib_reference(REQUEST_FIB_N);
    assert!(
        answers.iter().all(|&a| a == expected),
        "mixed: a request computed a wrong fib({REQUEST_FIB_N})"
    );
    elapsed
}

/// `mixed` on magpie: each request task calls `magpie::join` directly.
fn mixed_magpie(exec: &MagpieExec) -> Duration {
    let (done_tx, done_rx) = mpsc::sync_channel(REQUESTS);
    let spawner = exec.clone();
    let start = Instant::now();
    exec.spawn_remote(async move {
        for _ in 0..REQUESTS {
            let done_tx = done_tx.clone();
            spawner.spawn(async move {
                let answer = fib::<MagpieFork>(&mut (), black_box(REQUEST_FIB_N));
                done_tx
                    .send(answer)
                    .expect("the bench thread stopped waiting");
            });
        }
    });
    collect_answers(&done_rx, start)
}

/// `mixed` on tokio + rayon: each request task sends the computation to the rayon pool and
/// awaits the answer on a tokio oneshot, the usual way to keep CPU work off tokio's workers.
fn mixed_tokio_rayon(exec: &TokioExec, rayon: &Arc<rayon::ThreadPool>) -> Duration {
    let (done_tx, done_rx) = mpsc::sync_channel(REQUESTS);
    let spawner = exec.clone();
    let rayon = Arc::clone(rayon);
    let start = Instant::now();
    exec.spawn_remote(async move {
        for _ in 0..REQUESTS {
            let done_tx = done_tx.clone();
            let rayon = Arc::clone(&rayon);
            spawner.spawn(async move {
                let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
                rayon.spawn(move || {
                    let answer = fib::<RayonFork>(&mut (), black_box(REQUEST_FIB_N));
                    // The receiver only goes away if the runtime shuts down mid-row.
                    let _ = answer_tx.send(answer);
                });
                let answer = answer_rx.await.expect("the rayon job was dropped");
                done_tx
                    .send(answer)
                    .expect("the bench thread stopped waiting");
            });
        }
    });
    collect_answers(&done_rx, start)
}

// ---------------------------------------------------------------------------------------
// Measuring and reporting

/// Samples of one row for several implementations.
#[derive(Debug, Clone)]
pub(crate) struct RowMeasurement {
    /// The row.
    pub(crate) row: Row,
    /// The worker count of the runtimes.
    pub(crate) workers: usize,
    /// Per implementation, the samples in the order they were taken.
    pub(crate) results: Vec<(AsyncImpl, Vec<Duration>)>,
}

impl RowMeasurement {
    /// The median of `imp`'s samples.
    fn median(&self, imp: AsyncImpl) -> Option<Duration> {
        self.results
            .iter()
            .find(|(i, _)| *i == imp)
            .map(|(_, s)| median(s))
    }

    /// The peer with the lowest median, and that median.
    fn best_peer(&self) -> Option<(AsyncImpl, Duration)> {
        self.results
            .iter()
            .filter(|(imp, _)| imp.is_peer())
            .map(|(imp, s)| (*imp, median(s)))
            .min_by_key(|&(_, med)| med)
    }
}

/// Measures `row` with those of `impls` that take part in it: `warmup` rounds, then
/// `samples` timed rounds, each running every implementation once, first place rotating.
/// Returns `None` if none of `impls` takes part.
pub(crate) fn measure_row(
    row: Row,
    pools: &AsyncPools,
    impls: &[AsyncImpl],
    warmup: usize,
    samples: usize,
) -> Option<RowMeasurement> {
    let impls: Vec<AsyncImpl> = row
        .impls()
        .iter()
        .copied()
        .filter(|imp| impls.contains(imp))
        .collect();
    if impls.is_empty() {
        return None;
    }
    let label = format!("{} ({} workers)", row.name(), pools.workers);
    let results = measure_rounds(&label, &impls, warmup, samples, Duration::ZERO, |imp, _| {
        pools.sample(row, imp)
    });
    Some(RowMeasurement {
        row,
        workers: pools.workers,
        results,
    })
}

/// `a / b` with two decimals, or a dash where either is missing.
fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", ms(a) / ms(b)),
        _ => "–".to_owned(),
    }
}

/// The table of one row: median, min and max per implementation, and magpie's ratio to each.
pub(crate) fn render_row(m: &RowMeasurement) -> String {
    let magpie = m.median(AsyncImpl::Magpie);
    let rows: Vec<Vec<String>> = m
        .results
        .iter()
        .map(|(imp, samples)| {
            let med = median(samples);
            let min = samples.iter().copied().min().unwrap_or_default();
            let max = samples.iter().copied().max().unwrap_or_default();
            vec![
                imp.name().to_owned(),
                fmt_ms(ms(med)),
                fmt_ms(ms(min)),
                fmt_ms(ms(max)),
                ratio(magpie, Some(med)),
            ]
        })
        .collect();
    let samples = m.results.first().map_or(0, |(_, s)| s.len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### {} — {} — {} workers, {} samples\n",
        m.row.name(),
        m.row.describe(),
        m.workers,
        samples
    );
    out.push_str(&markdown_table(
        &[
            "implementation",
            "median (ms)",
            "min (ms)",
            "max (ms)",
            "magpie/this",
        ],
        &[false, true, true, true, true],
        &rows,
    ));
    if let Some((peer, best)) = m.best_peer() {
        let _ = writeln!(
            out,
            "\nmagpie / best peer ({peer}): {}",
            ratio(magpie, Some(best))
        );
    }
    if let Some(off) = m.median(AsyncImpl::MagpieStallOff) {
        let _ = writeln!(
            out,
            "\nstall detection on / off: {}",
            ratio(magpie, Some(off))
        );
    }
    if let Some(on) = m.median(AsyncImpl::MagpieInsight) {
        let _ = writeln!(out, "\ntask counters on / off: {}", ratio(Some(on), magpie));
    }
    if let Some(caveat) = m.row.caveat() {
        let _ = writeln!(out, "\nNote: {caveat}");
    }
    out
}

/// One line per row: every implementation's median and magpie's ratio to the best peer.
pub(crate) fn render_summary(measurements: &[RowMeasurement]) -> String {
    let rows: Vec<Vec<String>> = measurements
        .iter()
        .map(|m| {
            let mut row = vec![m.row.name().to_owned()];
            for imp in AsyncImpl::ALL {
                row.push(m.median(imp).map_or("–".to_owned(), |d| fmt_ms(ms(d))));
            }
            let best = m.best_peer();
            row.push(best.map_or("–".to_owned(), |(peer, _)| peer.name().to_owned()));
            row.push(ratio(m.median(AsyncImpl::Magpie), best.map(|(_, d)| d)));
            row
        })
        .collect();
    let mut headers = vec!["row"];
    headers.extend(AsyncImpl::ALL.iter().map(|imp| imp.name()));
    headers.extend(["best peer", "magpie/best"]);
    let right: Vec<bool> = (0..headers.len())
        .map(|i| i > 0 && i != headers.len() - 2)
        .collect();
    let mut out = String::from("### summary — medians in ms\n\n");
    out.push_str(&markdown_table(&headers, &right, &rows));
    out
}

/// One row's measurement as JSON: raw samples and summary per implementation, in ms.
#[derive(Debug, Serialize)]
pub(crate) struct RowJson {
    workload: &'static str,
    description: String,
    workers: usize,
    results: Vec<SamplesJson<'static>>,
}

/// All measurements as JSON, one [`RowJson`] each.
pub(crate) fn measurements_json(measurements: &[RowMeasurement]) -> Vec<RowJson> {
    measurements
        .iter()
        .map(|m| RowJson {
            workload: m.row.name(),
            description: m.row.describe(),
            workers: m.workers,
            results: m
                .results
                .iter()
                .map(|(imp, samples)| samples_json(imp.name(), samples))
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::json_check::{keys, parse, text};

    #[test]
    fn measurements_json_has_each_row_and_its_implementations() {
        let rows = [
            RowMeasurement {
                row: Row::ChainedSpawn,
                workers: 2,
                results: vec![
                    (AsyncImpl::Magpie, vec![Duration::from_millis(4)]),
                    (
                        AsyncImpl::Tokio,
                        vec![Duration::from_millis(5), Duration::from_millis(3)],
                    ),
                ],
            },
            RowMeasurement {
                row: Row::YieldMany,
                workers: 2,
                results: Vec::new(),
            },
        ];
        let json = text(measurements_json(&rows));
        let v = parse(&json);
        assert_eq!(v.as_array().map(Vec::len), Some(2), "{json}");
        assert_eq!(v[0]["workload"], "chained_spawn");
        assert_eq!(v[0]["description"], Row::ChainedSpawn.describe().as_str());
        assert!(v[0]["workers"].is_u64(), "{json}");
        assert_eq!(v[0]["workers"], 2);
        assert_eq!(v[0]["results"][0]["impl"], "magpie");
        assert_eq!(v[0]["results"][1]["impl"], "tokio");
        assert_eq!(v[0]["results"][1]["median_ms"].as_f64(), Some(4.0));
        assert_eq!(v[0]["results"][1]["min_ms"].as_f64(), Some(3.0));
        assert_eq!(v[1]["workload"], "yield_many");
        assert_eq!(v[1]["results"], serde_json::json!([]));
        let row = ["workload", "description", "workers", "results"];
        let samples = ["impl", "median_ms", "min_ms", "samples_ms"];
        let mut expected = row.to_vec();
        expected.extend(samples.repeat(2));
        expected.extend(row);
        assert_eq!(keys(&json), expected);
        assert_eq!(parse(&text(measurements_json(&[]))), serde_json::json!([]));
    }

    /// Each scheduler row checks its own outcome (counters at zero, every answer right) and
    /// panics if it is wrong; run them all once on a small magpie runtime so that a row that
    /// can no longer complete fails here, not in a benchmark session.
    #[test]
    fn the_scheduler_rows_complete_on_magpie() {
        let rt = Arc::new(
            magpie::Runtime::builder()
                .worker_threads(2)
                .thread_name(thread_name(AsyncImpl::Magpie, 2))
                .build()
                .expect("could not build the runtime"),
        );
        let exec = MagpieExec(rt);
        for (name, row) in [
            (
                "spawn_many_local",
                spawn_many_local::<MagpieExec> as fn(&_) -> _,
            ),
            ("spawn_many_remote", spawn_many_remote::<MagpieExec>),
            ("yield_many", yield_many::<MagpieExec>),
            ("ping_pong", ping_pong::<MagpieExec>),
            ("chained_spawn", chained_spawn::<MagpieExec>),
            ("lone_request", lone_request::<MagpieExec>),
        ] {
            assert!(row(&exec) > Duration::ZERO, "{name}: no time measured");
        }
        let threads = format!("{}-", thread_name(AsyncImpl::Magpie, 2));
        assert!(
            lone_request_cpu(&exec, &threads) > Duration::ZERO,
            "lone_request_cpu: no CPU time counted"
        );
    }
}
