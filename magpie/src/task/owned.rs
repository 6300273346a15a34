//! The list of a runtime's live tasks, so that shutdown can reach every task, also the ones
//! that sit in no queue (waiting for a waker that may never fire).
//!
//! An intrusive doubly-linked list through each task's [`Header::owned`] links, split into
//! shards so that spawns and completions on different workers rarely meet on one lock
//! (tokio's `OwnedTasks` is sharded by task id for the same reason). A shard holds runs of
//! consecutive ids, not tasks scattered one by one, so that the tasks a thread spawns one
//! after another, and a worker later unlinks in one batch, share a lock
//! ([`OwnedTasks::shard_index`]).
//!
//! # Invariants
//!
//! 1. A task's `owned` links are read and written only under the lock of its shard
//!    ([`OwnedTasks::shard_index`] is a function of the task's id, which never changes, so
//!    a task always maps to the same shard).
//! 2. While a task is linked, the list holds one of its references (taken in
//!    [`OwnedTasks::bind`]), so a linked task is always allocated. Only its completer unlinks
//!    it, or the worker it handed the unlink to (a detached task's, later, in a batch:
//!    [`OwnedTasks::remove_batch`]), and takes that reference over ([`OwnedTasks::remove`]
//!    answers true); shutdown
//!    ([`OwnedTasks::close_and_take_all`]) leaves every task linked, and counted, until it
//!    completes.
//! 3. Once a shard is closed, `bind` refuses every task, so after
//!    [`OwnedTasks::close_and_take_all`] no task is ever linked again.
//! 4. A shard's [`ShardCount`] counts the tasks linked in it now (`live`) and ever
//!    (`linked`), and is written only under the shard's lock. There is no global count: one
//!    would be a line that every spawn and every completion on every worker writes (see
//!    [`all_idle`] for what `wait_idle` reads instead).

use std::ptr::NonNull;

use super::id::Id;
use super::raw::{Header, RawTask};
use crate::sync::atomic::*;
use crate::sync::{AtomicBool, AtomicUsize, CountedMutex};
use crate::util::CachePadded;

/// A task's links in its owner's list (invariant 1). Whether the task is linked is not
/// stored: it is when it has a predecessor or is its shard's head (see `is_linked`), which
/// keeps the header at 56 bytes (raw.rs, `Header`).
#[derive(Debug, Default)]
pub(crate) struct OwnedLink {
    prev: Option<NonNull<Header>>,
    next: Option<NonNull<Header>>,
}

/// One shard: the head of its list and whether it is closed.
#[derive(Debug, Default)]
struct Shard {
    head: Option<NonNull<Header>>,
    closed: bool,
}

// SAFETY: the shard holds task pointers, touched only under its mutex (invariant 1), and
// tasks are `Send` (their futures and outputs are, see `new_task`).
unsafe impl Send for Shard {}

/// A shard with its counts, on a line of its own.
#[derive(Debug, Default)]
struct Slot {
    /// The shard behind a lock that counts its acquisitions
    /// (`Stats::live_list_lock_acquisitions`), the count on the lock's line.
    shard: CountedMutex<Shard>,
    /// Beside the lock, whose line a spawn or completion has just taken, so writing the
    /// counts moves no other line.
    count: ShardCount,
}

/// One shard's task counts (invariant 4): written only by whoever holds the shard's lock,
/// read by anyone. `live` is a gauge for statistics (Relaxed) and, with `linked`, what
/// [`all_idle`] reads for `wait_idle`.
#[derive(Debug, Default)]
pub(crate) struct ShardCount {
    /// Tasks ever linked in the shard. It only grows, so a reader that reads it twice can
    /// tell that a task was linked in between (see [`all_idle`]).
    linked: AtomicUsize,
    /// Tasks linked in the shard now.
    live: AtomicUsize,
}

impl ShardCount {
    /// One more task linked. The caller holds the shard's lock.
    #[inline]
    pub(crate) fn link(&self) {
        // Relaxed: a spawn from outside that races with `wait_idle` is not ordered with it
        // anyway, and a spawn from a task is ordered before that task's own completion (a
        // SeqCst RMW of `live`, which `all_idle` reads). Loads and stores, not read-modify-
        // writes: every write holds the shard lock (invariant 4), so none can come between
        // them, and the spawn path saves two locked instructions.
        self.linked
            .store(self.linked.load(Relaxed).wrapping_add(1), Relaxed);
        self.live.store(self.live.load(Relaxed) + 1, Relaxed);
    }

    /// `n` tasks unlinked. The caller holds the shard's lock.
    #[inline]
    pub(crate) fn unlink(&self, n: usize) {
        // SeqCst: pairs with `IdleWait::wait`'s increment (runtime/idle_wait.rs); and a
        // release that `all_idle`'s loads acquire, carrying the links of the tasks this one
        // spawned.
        self.live.fetch_sub(n, SeqCst);
    }

    /// Tasks linked now (Relaxed: a gauge).
    pub(crate) fn live(&self) -> usize {
        self.live.load(Relaxed)
    }
}

/// True when no shard of `counts` has a task linked, read in the SeqCst order that
/// `IdleWait` relies on (runtime/idle_wait.rs). For `wait_idle`, and for a finishing task
/// while someone is inside it.
///
/// **The counts are read at different instants, and a task moves work between shards**: a
/// task in shard 1 spawns a child that lands in shard 0, then finishes. One pass could read
/// shard 0 before the child's link and shard 1 after the parent's unlink, and see every
/// count at 0 while the child lives (shuttle's `wait_idle` scenario found this). So the
/// scan reads each shard's `linked` and then its `live`, and then every `linked` again,
/// and answers true only if nothing was linked in between. It need not store the first
/// pass's values: each `linked` only grows, and a later read of it by this thread returns
/// the same write or a later one (read-read coherence), so the second pass's sum equals
/// the first pass's only if every count is unchanged (barring 2^64 links, or 2^32 on a
/// 32-bit target, during one scan). In the example, reading the parent's unlink (a SeqCst
/// RMW, a release that this SeqCst load acquires) makes the child's link, which came
/// before it on the parent's thread, visible to the second read of shard 0's `linked`.
///
/// Why several `live` counts lose no wake-up where one did not: the last task of each shard
/// to finish decrements its count (SeqCst) and then reads `IdleWait::waiters` (SeqCst); a
/// waiter increments `waiters` and then reads the counts. For each shard, either the
/// waiter reads its count after the decrement, or that finisher reads `waiters` after
/// the increment and runs this check itself. Of the finishers that run it, the one whose
/// decrement is last in the SeqCst order reads every other shard's count after that
/// shard's decrement, and no link comes after it (a later link would be a task that
/// finishes later still), so it sees all of them at 0 and notifies. A finisher reads the
/// shards only while someone is inside `wait_idle`; otherwise it pays one load.
pub(crate) fn all_idle<'a, I>(counts: I) -> bool
where
    I: IntoIterator<Item = &'a ShardCount>,
    I::IntoIter: Clone,
{
    let counts = counts.into_iter();
    let mut before = 0usize;
    for count in counts.clone() {
        // Acquire: keeps every later read of this scan (this shard's `live`, the next
        // shards', the second pass) after this one, so that the first pass's `linked` is
        // not read late, after an unlink that published a newer link.
        before = before.wrapping_add(count.linked.load(Acquire));
        // SeqCst: the second operation of the waiter's side of the Dekker pair; also an
        // acquire of the unlink it reads (see above).
        if count.live.load(SeqCst) != 0 {
            return false;
        }
    }
    // The negative control of `loom_idle_wait_scan_sees_a_child_spawned_across_shards`:
    // one pass, which that model must catch.
    if cfg!(all(loom, magpie_loom_broken)) {
        return true;
    }
    let after = counts.fold(0usize, |sum, count| {
        // Relaxed: the SeqCst `live` loads above are acquires, so these reads come after
        // them, and coherence makes each return a link they published or a later one.
        sum.wrapping_add(count.linked.load(Relaxed))
    });
    after == before
}

/// How many consecutive task ids share a shard (see [`OwnedTasks::shard_index`]): as many
/// as a batched unlink takes at most (`MAX_DEFERRED_UNLINKS`).
const RUN: u64 = 64;

/// Every live task of one runtime.
#[derive(Debug)]
pub(crate) struct OwnedTasks {
    shards: Box<[CachePadded<Slot>]>,
    /// `64 - log2(shards.len())`: a key's shard is the top bits of its hash. The length
    /// is a power of two.
    shift: u32,
    /// Set by `close_and_take_all`; lets `bind` fail fast. The shard flags are the truth.
    closed: AtomicBool,
}

impl OwnedTasks {
    /// A list with enough shards for `workers` workers to rarely collide.
    pub(crate) fn new(workers: usize) -> OwnedTasks {
        // Under loom, one shard: a task's shard depends on its id (or address), which differs
        // from one execution of a model to the next, and loom needs every execution of a
        // schedule to touch the same objects.
        let n = if cfg!(loom) {
            1
        } else {
            (workers * 4).next_power_of_two().clamp(4, 256)
        };
        OwnedTasks {
            shards: (0..n).map(|_| CachePadded::new(Slot::default())).collect(),
            shift: 64 - n.trailing_zeros(),
            closed: AtomicBool::new(false),
        }
    }

    /// # Safety
    ///
    /// The caller holds a reference to `task`.
    unsafe fn shard_of(&self, task: RawTask) -> &Slot {
        // SAFETY: the caller's contract.
        &self.shards[unsafe { self.shard_index(task) }]
    }

    /// The index of the shard of `task`: the one of its run of [`RUN`] consecutive ids.
    ///
    /// **Why runs, not single tasks.** A thread hands out ids one after another from a
    /// block of its own (task/id.rs), so the tasks it spawns in a row form runs; a worker
    /// pulls a stretch of the inject queue, or steals half a ring, so the tasks it completes
    /// together mostly come from one or two runs too. Its batched unlink
    /// ([`remove_batch`](Self::remove_batch)) then takes one or two locks for up to 64
    /// tasks, at every worker count, and a submitter binding a batch keeps one shard's line
    /// for 64 binds. When a task's shard was a hash of its address, a batch met as many
    /// shards as it had room for: 7.5 locks a batch at 2 workers (8 shards), 14 at 4, 22 at
    /// 8 and 28-30 at 16 (64 shards), against 1.4-2.1 with runs (BENCHMARKS.md, "2026-12-02,
    /// fifth"). Runs were tried once before, when a completion unlinked its own task: a
    /// worker spawning while a thief completed the newest tasks one at a time then met the
    /// thief on one shard at every spawn and every completion (`spawn_many_local` 13%
    /// slower), so they were reverted; with the unlink batched, the thief takes that lock
    /// once per batch.
    ///
    /// # Safety
    ///
    /// The caller holds a reference to `task`.
    unsafe fn shard_index(&self, task: RawTask) -> usize {
        if cfg!(magpie_no_insight) {
            // The measurement build gives every task the same id: spread them by address
            // (heap blocks of at least 64 bytes), as the list did before runs.
            self.key_index(task.as_ptr().as_ptr() as u64 >> 6)
        } else {
            // SAFETY: the caller's reference keeps the task allocated; the id never changes.
            self.id_shard(unsafe { task.header() }.identity.id.as_u64())
        }
    }

    /// The index of the shard of the task whose id is `id`, outside the measurement build.
    fn id_shard(&self, id: u64) -> usize {
        self.key_index(id / RUN)
    }

    /// The index of the shard of `key`: a run of ids, or in the measurement build an
    /// address.
    fn key_index(&self, key: u64) -> usize {
        // The top bits of a multiplicative (Fibonacci) hash: consecutive runs land evenly
        // over the shards, and the runs of different id blocks on unrelated ones. One
        // shard (loom) shifts by 64: no bits, shard 0.
        let hash = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        hash.checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Links a new task, taking a reference for the list (invariant 2). Returns false, and
    /// takes nothing, if the list is closed: the runtime is shutting down.
    ///
    /// # Safety
    ///
    /// The caller holds a reference to `task`, which has never been linked, and which no
    /// other thread can reach yet: it was never queued, no waker of it exists, and its
    /// `JoinHandle` has not left the caller's thread (a new task, before it is scheduled).
    pub(crate) unsafe fn bind(&self, task: RawTask) -> bool {
        // Relaxed: only a shortcut; the shard's flag, read under its lock, decides.
        if self.closed.load(Relaxed) {
            return false;
        }
        // SAFETY: the caller holds a reference (this function's contract).
        let slot = unsafe { self.shard_of(task) };
        let mut shard = slot.shard.lock();
        if shard.closed {
            return false;
        }
        // SAFETY: the caller's reference keeps the task alive, and no other thread can reach
        // its state word (the caller's contract): the new reference is the list's (invariant
        // 2), taken without a locked instruction. Whoever reaches the task later does so
        // through the unlock below or the queue push that follows it (both Release).
        unsafe { task.state().ref_inc_unpublished() };
        let old_head = shard.head;
        // SAFETY: invariant 1: we hold the shard lock; the task is not linked yet.
        unsafe {
            task.header().owned.with_mut(|link| {
                *link = OwnedLink {
                    prev: None,
                    next: old_head,
                }
            });
            if let Some(head) = old_head {
                head.as_ref()
                    .owned
                    .with_mut(|link| (*link).prev = Some(task.as_ptr()));
            }
        }
        shard.head = Some(task.as_ptr());
        slot.count.link();
        true
    }

    /// Unlinks `task` if it is linked. Returns true if it was, in which case the caller now
    /// holds the list's reference (invariant 2).
    ///
    /// # Safety
    ///
    /// The caller holds a reference to `task`.
    pub(crate) unsafe fn remove(&self, task: RawTask) -> bool {
        // SAFETY: the caller holds a reference (this function's contract).
        let slot = unsafe { self.shard_of(task) };
        let mut shard = slot.shard.lock();
        // SAFETY: invariant 1 (the lock); the caller's reference keeps the task alive.
        let unlinked = unsafe { Self::unlink(&mut shard, task.as_ptr()) };
        if unlinked {
            slot.count.unlink(1);
        }
        unlinked
    }

    /// Unlinks every task of `tasks` that is linked, taking each shard's lock once for all
    /// of its tasks, and returns which were: bit `i` for `tasks[i]`. For each bit set the
    /// caller now holds the list's reference to that task (invariant 2), as from
    /// [`remove`](Self::remove).
    ///
    /// # Safety
    ///
    /// The caller holds a reference to every task of `tasks`, which holds at most 64.
    pub(crate) unsafe fn remove_batch(&self, tasks: &[RawTask]) -> u64 {
        assert!(tasks.len() <= 64);
        // Each task's shard, computed once; then a pass per shard met, over what is left (at
        // most 64 tasks, and as many passes as shards among them: cheaper than sorting).
        let mut shard_of = [0usize; 64];
        for (index, &task) in shard_of.iter_mut().zip(tasks) {
            // SAFETY: the caller holds a reference to every task (this function's contract).
            *index = unsafe { self.shard_index(task) };
        }
        let shard_of = &shard_of[..tasks.len()];
        // A bit per task not yet unlinked.
        let mut left = u64::MAX.checked_shr(64 - tasks.len() as u32).unwrap_or(0);
        let mut linked = 0u64;
        while left != 0 {
            let index = shard_of[left.trailing_zeros() as usize];
            let slot = &self.shards[index];
            let mut shard = slot.shard.lock();
            let mut unlinked = 0;
            for (i, &task) in tasks.iter().enumerate() {
                if left & (1 << i) == 0 || shard_of[i] != index {
                    continue;
                }
                left &= !(1 << i);
                // SAFETY: invariant 1 (the lock); the caller's reference keeps the task
                // alive.
                if unsafe { Self::unlink(&mut shard, task.as_ptr()) } {
                    linked |= 1 << i;
                    unlinked += 1;
                }
            }
            if unlinked != 0 {
                slot.count.unlink(unlinked);
            }
        }
        linked
    }

    /// # Safety
    ///
    /// `shard` is the locked shard of `task`, which is allocated.
    unsafe fn unlink(shard: &mut Shard, task: NonNull<Header>) -> bool {
        // SAFETY: the caller's contract; linked neighbours are allocated (invariant 2).
        unsafe {
            // Linked: it has a predecessor, or it is the head. (Unlinking clears both links,
            // and a task is linked at most once: `bind` is called once per task.)
            let linked =
                task.as_ref().owned.with(|link| (*link).prev.is_some()) || shard.head == Some(task);
            if !linked {
                return false;
            }
            let link = task
                .as_ref()
                .owned
                .with_mut(|link| std::mem::take(&mut *link));
            match link.prev {
                Some(prev) => prev.as_ref().owned.with_mut(|l| (*l).next = link.next),
                None => shard.head = link.next,
            }
            if let Some(next) = link.next {
                next.as_ref().owned.with_mut(|l| (*l).prev = link.prev);
            }
        }
        true
    }

    /// Closes the list (invariant 3) and hands the caller a reference of its own to every
    /// task linked now, for the shutdown to cancel each. The tasks stay linked, and counted:
    /// each leaves the list as any task does, in its completion (`Schedule::release`), so a
    /// `wait_idle` during a shutdown of the tasks (an unhandled panic under
    /// `UnhandledPanic::ShutdownRuntime` leaves the runtime running) returns only once their
    /// cancelled futures are dropped and their terminate hooks have run. When this unlinked
    /// them and zeroed the counts at once, `wait_idle` could return before (found in the
    /// review of issue 19).
    pub(crate) fn close_and_take_all(&self) -> Vec<RawTask> {
        // Relaxed: see `bind`.
        self.closed.store(true, Relaxed);
        let mut tasks = Vec::new();
        for slot in self.shards.iter() {
            let mut shard = slot.shard.lock();
            shard.closed = true;
            // The raw links, not `linked`'s `&Header`s: a pointer made from a `&Header`
            // may reach only the header, read-only outside its cells, while the shutdown
            // reaches the whole task cell (the future, the output) through it. Miri found
            // it (Stacked Borrows, in a runtime dropped with a task still linked).
            for task in Self::linked_ptrs(&shard) {
                // SAFETY: a linked header is a task's, allocated while the lock is held
                // (invariant 2); the reference taken here keeps it after.
                unsafe { task.as_ref() }.state.ref_inc();
                // SAFETY: as above; `task` is the list's own pointer to the task's cell,
                // with the provenance of the whole allocation.
                tasks.push(unsafe { RawTask::from_ptr(task) });
            }
        }
        tasks
    }

    /// Calls `f` with the task whose id is `id`, under its shard's lock, if it is linked;
    /// `None` otherwise. For the stall monitor, which knows a stalled task by the id in its
    /// worker's polling word. Walks the id's shard (in the measurement build, where every id
    /// is the same, every shard) until it finds the task (a stall is reported once, so this
    /// runs once per stall, not per sample); `f` is magpie's own code, never user code
    /// (STYLE.md rule 16).
    pub(crate) fn with_task<R>(&self, id: Id, f: impl FnOnce(&Header) -> R) -> Option<R> {
        let slots: &[CachePadded<Slot>] = if cfg!(magpie_no_insight) {
            &self.shards
        } else {
            std::slice::from_ref(&self.shards[self.id_shard(id.as_u64())])
        };
        for slot in slots {
            let shard = slot.shard.lock();
            let found = Self::linked(&shard).find(|h| h.identity.id == id);
            if let Some(header) = found {
                return Some(f(header));
            }
        }
        None
    }

    /// The tasks linked in `shard`, borrowed for as long as `shard` is. A `Shard` lives only
    /// inside its mutex, so a `&Shard` borrows the guard of its lock: invariant 2 keeps the
    /// tasks allocated, and linked, while it is held, and invariant 1 lets us read their
    /// links under it.
    fn linked(shard: &Shard) -> impl Iterator<Item = &Header> {
        // SAFETY: see above: each pointer is a task linked in the locked shard.
        Self::linked_ptrs(shard).map(|task| unsafe { &*task.as_ptr() })
    }

    /// The list's own pointers to the tasks linked in `shard` (each with the provenance of
    /// its whole task cell), for a caller that makes a `RawTask` of one; valid to read while
    /// `shard`'s lock is held (invariant 2).
    fn linked_ptrs(shard: &Shard) -> impl Iterator<Item = NonNull<Header>> + '_ {
        std::iter::successors(shard.head, |task| {
            // SAFETY: `task` is linked in the locked shard (invariant 2 keeps it allocated,
            // invariant 1 lets us read its links under the lock).
            unsafe { task.as_ref().owned.with(|link| (*link).next) }
        })
    }

    /// Calls `f` once per shard, under the shard's lock, with the headers of the tasks
    /// linked in it (invariant 2 keeps them allocated, and linked, while the lock is held).
    /// For the live-task dump: `f` is magpie's own code (it copies counters), never user
    /// code (STYLE.md rule 16); spawns and completions that hash to the shard being read
    /// wait for it.
    pub(crate) fn for_each_shard(&self, mut f: impl FnMut(&[&Header])) {
        for slot in self.shards.iter() {
            let shard = slot.shard.lock();
            // A list per shard: the references borrow this shard's guard.
            let headers: Vec<&Header> = Self::linked(&shard).collect();
            f(&headers);
        }
    }

    /// Times a shard's lock was taken, over every shard (`Stats::live_list_lock_acquisitions`).
    pub(crate) fn lock_acquisitions(&self) -> u64 {
        self.shards
            .iter()
            .map(|slot| slot.shard.acquisitions())
            .fold(0, u64::wrapping_add)
    }

    /// How many tasks are linked (a gauge: the shards are read one after the other, not at
    /// one instant).
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|slot| slot.count.live()).sum()
    }

    /// Whether the list is closed (the runtime shuts its tasks down). Relaxed, a shortcut as
    /// in `bind`: a thread that saw a shard closed under its lock (a `bind` that failed)
    /// sees this set too, since `close_and_take_all` sets it before it locks any shard.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// True when no task is linked, read in the SeqCst order that `IdleWait` relies on: see
    /// [`all_idle`].
    pub(crate) fn is_empty_seqcst(&self) -> bool {
        all_idle(self.shards.iter().map(|slot| &slot.count))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use super::{all_idle, OwnedTasks, ShardCount, RUN};

    /// Sets its flag when dropped: the runtime's shutdown dropped the future holding it.
    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }

    /// A runtime dropped while tasks are still linked (idle, never to be woken) cancels
    /// each through `close_and_take_all`, whose `RawTask`s reach the whole task cell to drop
    /// the futures. They were made from `&Header`s once, a pointer that may reach only the
    /// header: Miri reported it under Stacked Borrows (scripts/miri.sh runs this test).
    #[test]
    fn a_runtime_dropped_with_idle_tasks_drops_their_futures() {
        const TASKS: usize = 3;
        let rt = crate::Runtime::builder().worker_threads(1).build().unwrap();
        let (polled_tx, polled_rx) = mpsc::channel();
        let flags: Vec<_> = (0..TASKS)
            .map(|_| Arc::new(AtomicBool::new(false)))
            .collect();
        let handles: Vec<_> = flags
            .iter()
            .map(|flag| {
                let guard = SetOnDrop(flag.clone());
                let polled = polled_tx.clone();
                rt.spawn(async move {
                    let _guard = guard;
                    polled.send(()).unwrap();
                    std::future::pending::<()>().await;
                })
            })
            .collect();
        for _ in 0..TASKS {
            polled_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a task was never polled");
        }
        assert_eq!(rt.tasks().len(), TASKS, "every task is still linked");
        drop(rt);
        for flag in &flags {
            assert!(flag.load(SeqCst), "the shutdown left a future undropped");
        }
        drop(handles);
    }

    /// The ids of a run share a shard; consecutive runs spread over the shards, so that the
    /// runs of different workers rarely meet on a lock.
    #[test]
    fn a_run_of_ids_shares_a_shard_and_runs_spread_over_the_shards() {
        let list = OwnedTasks::new(16);
        assert_eq!(list.shards.len(), 64);
        let mut used = vec![0u32; 64];
        for run in 0..256 {
            let first = run * RUN;
            let shard = list.id_shard(first);
            for id in first..first + RUN {
                assert_eq!(list.id_shard(id), shard, "id {id} left its run's shard");
            }
            used[shard] += 1;
        }
        // 256 consecutive runs over 64 shards: the hash's top bits leave no shard unused
        // and none crowded.
        let unused = used.iter().filter(|&&n| n == 0).count();
        let most = used.iter().copied().max().unwrap();
        assert!(unused == 0 && most <= 8, "runs per shard: {used:?}");
    }

    fn shards(n: usize) -> Vec<ShardCount> {
        (0..n).map(|_| ShardCount::default()).collect()
    }

    /// The scan's answers without interference: idle only when every shard is empty.
    #[test]
    fn all_idle_reads_every_shard() {
        let counts = shards(4);
        assert!(all_idle(&counts));
        counts[3].link();
        assert!(!all_idle(&counts));
        counts[3].unlink(1);
        assert!(all_idle(&counts));
        assert_eq!(counts.iter().map(ShardCount::live).sum::<usize>(), 0);
    }

    /// The interleaving that shuttle found, replayed on one thread: between the scan's
    /// reads of shard 0 and shard 1, the parent (in shard 1) spawns a child into shard 0
    /// and finishes. Every `live` the first pass reads is 0; the second pass sees the link.
    #[test]
    fn all_idle_sees_a_child_linked_behind_the_scan() {
        let counts = shards(2);
        counts[1].link(); // the parent
        let raced = Cell::new(false);
        let scan = (0..2).map(|i| {
            if i == 1 && !raced.replace(true) {
                counts[0].link(); // the parent spawns the child...
                counts[1].unlink(1); // ...and finishes
            }
            &counts[i]
        });
        assert!(!all_idle(scan), "idle while the child lives");
        assert_eq!(counts[0].live(), 1);
        // The child finishes: now the pool is idle.
        counts[0].unlink(1);
        assert!(all_idle(&counts));
    }
}
