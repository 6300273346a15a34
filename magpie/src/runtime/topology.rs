//! Steal groups: which workers a thief tries first.
//!
//! Workers are divided into groups of consecutive indices. A thief visits the other workers
//! of its own group first, from a random one, then every other worker, from a random one, so
//! that work moves between cores that share a cache (or a memory node) before it crosses to
//! a farther one: the seed's hierarchical stealing (`task-pool-go.md`), at the cost of
//! nothing when there is one group.
//!
//! The groups come from [`Builder::steal_groups`](crate::Builder::steal_groups), or on Linux
//! from the machine (sysfs): one group per NUMA node with CPUs if there are several, else one
//! per distinct last-level cache if there are several, else one. Groups read from the
//! machine also keep each worker on its group's CPUs (intersected with the CPUs the process
//! may use), since a group means nothing if the OS moves its workers elsewhere.

/// How the workers are grouped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Groups {
    /// The group of each worker.
    of_worker: Vec<usize>,
    /// Per group, the CPUs its workers are kept on; empty when groups are not tied to CPUs.
    cpus: Vec<Vec<usize>>,
}

impl Groups {
    /// `groups` groups of consecutive workers, as even as possible, not tied to CPUs.
    pub(crate) fn even(workers: usize, groups: usize) -> Groups {
        debug_assert!((1..=workers).contains(&groups));
        Groups {
            of_worker: (0..workers).map(|w| w * groups / workers).collect(),
            cpus: Vec::new(),
        }
    }

    /// The machine's groups (see the module doc), or one group.
    pub(crate) fn from_machine(workers: usize) -> Groups {
        // Under loom every worker is a coroutine on the test's one OS thread: nothing to pin.
        if cfg!(loom) {
            return Groups::even(workers, 1);
        }
        match machine_cpu_sets() {
            Some(sets) if sets.len() > 1 && workers >= sets.len() => Groups {
                of_worker: (0..workers).map(|w| w * sets.len() / workers).collect(),
                cpus: sets,
            },
            _ => Groups::even(workers, 1),
        }
    }

    /// Adds `extra` workers after those grouped so far (the compensation slots), each in
    /// the group of worker `k % workers`, the `k`-th of them: they spread over the groups as
    /// the ordinary workers are spread, and the ordinary workers keep their groups.
    pub(crate) fn with_extra(mut self, extra: usize) -> Groups {
        let workers = self.of_worker.len();
        if workers == 0 {
            return self;
        }
        for k in 0..extra {
            let group = self.of_worker[k % workers];
            self.of_worker.push(group);
        }
        self
    }

    pub(crate) fn count(&self) -> usize {
        // Not the last worker's group plus one: compensation slots (`with_extra`) need not
        // be in the last group.
        self.of_worker.iter().max().map_or(1, |&g| g + 1)
    }

    pub(crate) fn of(&self, worker: usize) -> usize {
        self.of_worker[worker]
    }

    /// The workers a thief at `worker` visits: first those of its own group, then the rest,
    /// each in index order (the thief starts each part at a random place).
    pub(crate) fn victims(&self, worker: usize) -> (Box<[usize]>, Box<[usize]>) {
        let mine = self.of(worker);
        let near = (0..self.of_worker.len())
            .filter(|&v| v != worker && self.of_worker[v] == mine)
            .collect();
        let far = (0..self.of_worker.len())
            .filter(|&v| self.of_worker[v] != mine)
            .collect();
        (near, far)
    }

    /// Keeps the calling thread, worker `worker`, on its group's CPUs, if groups are tied to
    /// CPUs. Best effort: a refusal by the OS leaves the thread where it may run.
    pub(crate) fn pin_current_thread(&self, worker: usize) {
        if let Some(cpus) = self.cpus.get(self.of(worker)) {
            pin_current_thread(cpus);
        }
    }
}

/// Parses a sysfs CPU list such as `0-3,8-11,16`.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// The CPU sets of the machine's NUMA nodes, or else of its last-level caches, restricted to
/// the CPUs this process may use; `None` if unknown.
#[cfg(target_os = "linux")]
fn machine_cpu_sets() -> Option<Vec<Vec<usize>>> {
    let allowed = allowed_cpus();
    let restrict = |sets: Vec<Vec<usize>>| -> Vec<Vec<usize>> {
        sets.into_iter()
            .map(|set| match &allowed {
                Some(allowed) => set.into_iter().filter(|c| allowed.contains(c)).collect(),
                None => set,
            })
            .filter(|set: &Vec<usize>| !set.is_empty())
            .collect()
    };
    let nodes = restrict(numa_nodes());
    if nodes.len() > 1 {
        return Some(nodes);
    }
    let caches = restrict(last_level_caches());
    (caches.len() > 1).then_some(caches)
}

#[cfg(not(target_os = "linux"))]
fn machine_cpu_sets() -> Option<Vec<Vec<usize>>> {
    None
}

#[cfg(target_os = "linux")]
fn numa_nodes() -> Vec<Vec<usize>> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut nodes: Vec<(usize, Vec<usize>)> = dir
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let id = name.strip_prefix("node")?.parse().ok()?;
            let list = std::fs::read_to_string(entry.path().join("cpulist")).ok()?;
            Some((id, parse_cpu_list(&list)?))
        })
        .filter(|(_, cpus)| !cpus.is_empty())
        .collect();
    nodes.sort();
    nodes.into_iter().map(|(_, cpus)| cpus).collect()
}

/// Distinct CPU sets sharing the highest cache level, in order of their first CPU.
#[cfg(target_os = "linux")]
fn last_level_caches() -> Vec<Vec<usize>> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return Vec::new();
    };
    let mut best_level = 0;
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for entry in dir.filter_map(Result::ok) {
        let is_cpu = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("cpu"))
            .is_some_and(|id| id.parse::<usize>().is_ok());
        if !is_cpu {
            continue;
        }
        let Ok(caches) = std::fs::read_dir(entry.path().join("cache")) else {
            continue;
        };
        for cache in caches.filter_map(Result::ok) {
            let read = |file: &str| std::fs::read_to_string(cache.path().join(file)).ok();
            let Some(level) = read("level").and_then(|l| l.trim().parse::<u32>().ok()) else {
                continue;
            };
            let Some(cpus) = read("shared_cpu_list").and_then(|l| parse_cpu_list(&l)) else {
                continue;
            };
            if level > best_level {
                best_level = level;
                sets.clear();
            }
            if level == best_level && !cpus.is_empty() && !sets.contains(&cpus) {
                sets.push(cpus);
            }
        }
    }
    sets.sort();
    sets
}

/// The CPUs this process may run on, if the OS says.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: `cpu_set_t` is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of_val(&set);
    // SAFETY: `cpu` is below the set's capacity in bits.
    Some(
        (0..max)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect(),
    )
}

#[cfg(target_os = "linux")]
fn pin_current_thread(cpus: &[usize]) {
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of_val(&set);
    for &cpu in cpus.iter().filter(|&&c| c < max) {
        // SAFETY: `cpu` is below the set's capacity in bits.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is the calling thread.
    let _ = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpus: &[usize]) {}

/// The calling thread's OS id (`gettid`), 0 where there is none to report.
pub(crate) fn current_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        u64::try_from(tid).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_sysfs_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8-9,12\n"),
            Some(vec![0, 1, 2, 3, 8, 9, 12])
        );
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list("\n"), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    #[test]
    fn even_groups_are_consecutive_and_balanced() {
        let groups = Groups::even(10, 3);
        let of: Vec<usize> = (0..10).map(|w| groups.of(w)).collect();
        assert_eq!(of, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(groups.count(), 3);
        let (near, far) = groups.victims(5);
        assert_eq!(&*near, &[4, 6]);
        assert_eq!(&*far, &[0, 1, 2, 3, 7, 8, 9]);
    }

    #[test]
    fn extra_workers_join_the_groups_in_turn_and_leave_the_others_as_they_were() {
        let groups = Groups::even(4, 2).with_extra(3);
        let of: Vec<usize> = (0..7).map(|w| groups.of(w)).collect();
        assert_eq!(of, [0, 0, 1, 1, 0, 0, 1]);
        // The last slot's group is not the highest: the count looks at every worker.
        assert_eq!(Groups::even(4, 2).with_extra(1).count(), 2);
        // Ordinary workers steal from the extra ones, and the extra ones from everybody.
        let (near, far) = groups.victims(0);
        assert_eq!((&*near, &*far), (&[1, 4, 5][..], &[2, 3, 6][..]));
        let (near, far) = groups.victims(6);
        assert_eq!((&*near, &*far), (&[2, 3][..], &[0, 1, 4, 5][..]));
        // None extra: the same groups.
        assert_eq!(Groups::even(4, 2).with_extra(0), Groups::even(4, 2));
    }

    #[test]
    fn one_group_has_no_far_victims() {
        let groups = Groups::even(4, 1);
        let (near, far) = groups.victims(0);
        assert_eq!(&*near, &[1, 2, 3]);
        assert!(far.is_empty());
    }

    #[test]
    fn machine_groups_cover_every_worker() {
        for workers in [1, 2, 7, 64] {
            let groups = Groups::from_machine(workers);
            assert!((1..=workers).contains(&groups.count()));
            for w in 0..workers {
                assert!(groups.of(w) < groups.count());
            }
        }
    }
}
