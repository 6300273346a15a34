//! A worker's cache of freed task cells, which its next spawns reuse
//! ([`Schedule::reuse_cell`](super::notified::Schedule::reuse_cell) and
//! [`Schedule::keep_cell`](super::notified::Schedule::keep_cell), implemented by the runtime's
//! registry for its own workers).
//!
//! **Why.** A worker unlinks the completed tasks that have no `JoinHandle` in batches of up
//! to 64 (`WorkerThread::defer_unlink`), and then frees their cells one after the other.
//! glibc's per-thread cache (tcache) keeps 7 chunks of each size, so 57 of every 64 frees
//! took its slower path (a fastbin push, a locked instruction in a process with threads),
//! and so did most of the next spawns' allocations, which found the tcache empty. In a
//! chain of 1,000 spawns on one worker (fat LTO, callgrind) a free cost 123 instructions and
//! an allocation 83, where the `futures` thread pool, which frees each task as it
//! completes, paid 66 and 41; with glibc's tcache raised to 127 chunks
//! (`GLIBC_TUNABLES=glibc.malloc.tcache_count=127`) the chain ran 13–30 % faster on 1 and 2
//! workers. Kept here, a freed cell is the memory of a later spawn on the same worker, and
//! neither end calls the allocator.
//!
//! **Bounds.** The cache holds cells of one layout at a time (that of the first cell kept
//! while it is empty), of at most [`MAX_CELL_SIZE`] bytes, and at most [`MAX_CELLS`] of
//! them: at most 64 KiB per worker, given back when the worker exits
//! ([`CellCache::release`]). Cells freed on other threads, larger ones, and those of another
//! layout while the cache holds some go to the allocator as before.
//!
//! **Checkers.** Memory that is reused instead of freed hides a use after free from
//! AddressSanitizer, so `--cfg magpie_no_cell_cache` (set by `scripts/asan.sh`) keeps
//! nothing; loom keeps nothing either. Miri runs with the cache, to check the reuse itself.

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::ptr::NonNull;

/// The most cells a worker keeps: a whole batch of deferred unlinks.
pub(crate) const MAX_CELLS: usize = 64;

/// The largest cell a worker keeps, in bytes.
pub(crate) const MAX_CELL_SIZE: usize = 1024;

/// Freed task cells of one layout, for the next spawns on this thread (module docs).
#[derive(Debug)]
pub(crate) struct CellCache {
    /// The layout of every cell in `cells`; meaningless while it is empty.
    layout: Cell<Layout>,
    /// The layout of the last spawn that found the cache holding cells of another layout:
    /// the next cell of this layout freed here replaces them.
    wanted: Cell<Layout>,
    /// Allocated by the global allocator with `layout`, holding nothing live, ours to free.
    /// Its capacity is [`MAX_CELLS`] from the start, so keeping a cell never allocates.
    cells: RefCell<Vec<NonNull<u8>>>,
}

impl CellCache {
    pub(crate) fn new() -> CellCache {
        CellCache {
            layout: Cell::new(Layout::new::<u8>()),
            wanted: Cell::new(Layout::new::<u8>()),
            cells: RefCell::new(Vec::with_capacity(if Self::ENABLED {
                MAX_CELLS
            } else {
                0
            })),
        }
    }

    pub(crate) const ENABLED: bool = !cfg!(any(loom, magpie_no_cell_cache));

    /// Memory for a cell of `layout`, if the cache holds one: allocated by the global
    /// allocator with `layout`, holding nothing, and the caller's.
    #[inline]
    pub(crate) fn take(&self, layout: Layout) -> Option<NonNull<u8>> {
        if !Self::ENABLED {
            return None;
        }
        if self.layout.get() != layout {
            self.wanted.set(layout);
            return None;
        }
        self.cells.borrow_mut().pop()
    }

    /// Keeps the memory of a freed cell for a later [`take`](Self::take). Returns false, and
    /// keeps nothing, if the cache is full, holds cells of another layout that no spawn
    /// missed since, or the cell is larger than [`MAX_CELL_SIZE`]: the caller frees it then.
    ///
    /// The cache follows what is spawned: a cell of the layout a spawn last missed replaces
    /// the cells held (freeing them). Without that, one cell of a task spawned once (a
    /// chain's root, spawned from outside and freed on the worker first) held the cache to
    /// its layout, and it refused every cell of the chain of spawns that followed.
    ///
    /// # Safety
    ///
    /// `memory` was allocated by the global allocator with `layout`, holds nothing live, and
    /// is the caller's to free; if this returns true the caller must not touch it again.
    #[inline]
    pub(crate) unsafe fn keep(&self, memory: NonNull<u8>, layout: Layout) -> bool {
        if !Self::ENABLED || layout.size() > MAX_CELL_SIZE {
            return false;
        }
        if self.layout.get() != layout {
            if layout == self.wanted.get() {
                self.release();
            } else if !self.cells.borrow().is_empty() {
                return false;
            }
            self.layout.set(layout);
        }
        let mut cells = self.cells.borrow_mut();
        if cells.len() == MAX_CELLS {
            return false;
        }
        cells.push(memory);
        true
    }

    /// How many cells the cache holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cells.borrow().len()
    }

    /// Frees every cell the cache holds.
    pub(crate) fn release(&self) {
        let layout = self.layout.get();
        for memory in self.cells.borrow_mut().drain(..) {
            // SAFETY: `keep`'s contract: allocated by the global allocator with `layout`
            // (every cell kept has the cache's layout), holding nothing, and ours; drained,
            // so freed once.
            unsafe { std::alloc::dealloc(memory.as_ptr(), layout) };
        }
    }
}

impl Drop for CellCache {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::alloc::Layout;
    use std::ptr::NonNull;

    use super::{CellCache, MAX_CELLS, MAX_CELL_SIZE};

    fn alloc(layout: Layout) -> NonNull<u8> {
        // SAFETY: the layouts used here are not zero-sized.
        NonNull::new(unsafe { std::alloc::alloc(layout) }).expect("out of memory")
    }

    /// Offers the cache a new cell of `layout`, freed here if refused. Returns whether it
    /// was kept.
    fn offer(cache: &CellCache, layout: Layout) -> bool {
        let memory = alloc(layout);
        // SAFETY: allocated with `layout`, holding nothing, ours.
        let kept = unsafe { cache.keep(memory, layout) };
        if !kept {
            // SAFETY: refused, so still ours, allocated with `layout`.
            unsafe { std::alloc::dealloc(memory.as_ptr(), layout) };
        }
        kept
    }

    #[test]
    fn a_kept_cell_is_taken_back_for_its_layout_only() {
        if !CellCache::ENABLED {
            return;
        }
        let cache = CellCache::new();
        let small = Layout::from_size_align(112, 8).unwrap();
        let other = Layout::from_size_align(128, 8).unwrap();
        let memory = alloc(small);
        // SAFETY: allocated with `small`, holding nothing, ours.
        assert!(unsafe { cache.keep(memory, small) });
        assert_eq!(cache.take(other), None);
        // A layout no spawn asked for is refused while the cache holds cells.
        assert!(!offer(&cache, Layout::from_size_align(256, 16).unwrap()));
        assert_eq!(cache.take(small), Some(memory));
        assert_eq!(cache.take(small), None);
        // Empty again: the next cell kept sets the layout.
        // SAFETY: taken back above, so ours again.
        assert!(unsafe { cache.keep(memory, small) });
        assert_eq!(cache.len(), 1);
        // Dropping the cache frees it (AddressSanitizer and valgrind see a leak otherwise).
    }

    #[test]
    fn a_cell_of_the_layout_a_spawn_missed_replaces_the_cells_held() {
        if !CellCache::ENABLED {
            return;
        }
        let cache = CellCache::new();
        let stray = Layout::from_size_align(112, 8).unwrap();
        let chain = Layout::from_size_align(120, 8).unwrap();
        assert!(offer(&cache, stray));
        let first = alloc(chain);
        // Nobody asked for `chain` yet: refused.
        // SAFETY: as above.
        assert!(!unsafe { cache.keep(first, chain) });
        // A spawn misses...
        assert_eq!(cache.take(chain), None);
        // ... and the next `chain` cell freed replaces the stray one (freed: a leak
        // otherwise, which valgrind and AddressSanitizer would report).
        // SAFETY: refused above, so still ours.
        assert!(unsafe { cache.keep(first, chain) });
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.take(stray), None);
        assert_eq!(cache.take(chain), Some(first));
        // SAFETY: taken back, so ours, allocated with `chain`.
        unsafe { std::alloc::dealloc(first.as_ptr(), chain) };
    }

    #[test]
    fn the_cache_keeps_at_most_its_bound() {
        if !CellCache::ENABLED {
            return;
        }
        let cache = CellCache::new();
        let layout = Layout::from_size_align(64, 16).unwrap();
        for _ in 0..MAX_CELLS {
            assert!(offer(&cache, layout));
        }
        assert!(!offer(&cache, layout));
        cache.release();
        assert_eq!(cache.len(), 0);
        // Too large even for an empty cache.
        assert!(!offer(
            &cache,
            Layout::from_size_align(MAX_CELL_SIZE + 8, 8).unwrap()
        ));
    }
}
