//! Resource limits for the tests that make system calls fail: `RLIMIT_NPROC` (no thread can
//! start) and `RLIMIT_NOFILE`. Each runs in a child process (`child_test`), since the limits
//! and the user id are process-wide.

use std::sync::{mpsc, Arc, Mutex};

use super::thread_count;

/// Sets the soft limit of `resource` to `soft` (at most the hard limit).
pub(crate) fn set_limit(resource: libc::__rlimit_resource_t, soft: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut limit) }, 0);
    limit.rlim_cur = soft.min(limit.rlim_max) as libc::rlim_t;
    // SAFETY: a valid pointer to an initialised rlimit.
    let rc = unsafe { libc::setrlimit(resource, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// The hard limit of `resource`.
pub(crate) fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut limit) }, 0);
    limit.rlim_max
}

/// Drops root (the limit does not bind a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN),
/// so that `RLIMIT_NPROC` counts this process's threads. Each child takes a user id of its
/// own (`uid`), since the limit counts every thread of the user and the children run at
/// once. Returns false where it cannot.
pub(crate) fn become_unprivileged(uid: u32) -> bool {
    // SAFETY: plain system calls; glibc applies them to every thread.
    unsafe {
        if libc::geteuid() != 0 {
            return true;
        }
        libc::setresgid(uid, uid, uid) == 0 && libc::setresuid(uid, uid, uid) == 0
    }
}

/// Sets `RLIMIT_NPROC` so that exactly `extra` more threads can start, calibrated by
/// starting threads until the OS refuses (other processes of the same user would shift the
/// count).
///
/// The calibration holds only while no thread of this user exits: a thread that a test
/// joined (or a pool let go) may still be counted for a moment after it is gone, and leaves
/// room behind when the kernel finally releases it. Wait for such threads first
/// ([`super::assert_thread_count_returns_to`]), or use [`no_more_threads`], which checks itself.
pub(crate) fn allow_more_threads(extra: usize) {
    let base = thread_count();
    set_limit(libc::RLIMIT_NPROC, (base + extra) as u64);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Arc::new(Mutex::new(release_rx));
    let mut started = Vec::new();
    loop {
        let rx = release_rx.clone();
        match std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let _ = rx.lock().unwrap().recv();
            }) {
            Ok(handle) => started.push(handle),
            Err(_) => break,
        }
        assert!(started.len() <= extra + 64, "RLIMIT_NPROC does not bind");
    }
    drop(release_tx);
    let got = started.len();
    for handle in started {
        handle.join().unwrap();
    }
    // The calibration threads are counted until the kernel releases them, which may be a
    // moment after `join` returns; wait for them (the count taken before they started).
    let mut now = thread_count();
    super::eventually(
        &format!("the calibration threads leave: {now} threads, {base} before them"),
        || {
            now = thread_count();
            now <= base
        },
    );
    // Shift the limit by what the calibration found: the user had `base + extra - got`
    // threads when the OS refused, and this process has lost `base - now` since.
    let shifted = (now + extra) as i64 + (extra as i64 - got as i64);
    set_limit(libc::RLIMIT_NPROC, shifted.max(0) as u64);
}

/// No new thread can start. Checked by trying one; if it starts (a thread of this user
/// left after the calibration and freed its room), the calibration runs again.
pub(crate) fn no_more_threads() {
    for _ in 0..100 {
        allow_more_threads(0);
        match std::thread::Builder::new().spawn(|| ()) {
            Err(_) => return,
            Ok(probe) => probe.join().unwrap(),
        }
    }
    panic!("a thread still starts after 100 calibrations");
}

/// Threads can start again (the soft limit back at the hard one).
pub(crate) fn all_threads_again() {
    set_limit(libc::RLIMIT_NPROC, hard_limit(libc::RLIMIT_NPROC));
}
