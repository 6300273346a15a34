//! The global default runtime, created on first use.
//!
//! Whoever comes first builds it: [`Builder::build_global`], or the first use through
//! [`try_default_runtime`] (which the free functions reach through [`runtime`]). Building
//! happens under the `BUILDING` lock, so two first users never both build one; once built,
//! the runtime is read from the `OnceLock` without the lock.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::builder::{BuildError, Builder};
use super::registry::Registry;
use super::Runtime;

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

/// Held while the global runtime is being built. A std `Mutex`, not the `crate::sync` one:
/// it must be a `static`, and nothing runs under it but `Builder::build`, which never takes
/// it again (workers run their own runtime's code, not the global one's).
static BUILDING: Mutex<()> = Mutex::new(());

/// Builds the global runtime from `builder`, unless it exists already.
pub(super) fn init(builder: Builder) -> Result<(), BuildError> {
    // Poisoned only if a build panicked; the lock guards no data, so carry on.
    let _building = BUILDING.lock().unwrap_or_else(PoisonError::into_inner);
    if GLOBAL.get().is_some() {
        return Err(BuildError::GlobalAlreadyInitialized);
    }
    let rt = builder.build()?;
    // Under the lock nobody else sets it.
    GLOBAL
        .set(rt)
        .map_err(|_| BuildError::GlobalAlreadyInitialized)
}

/// The global default runtime, started with the defaults of [`Builder::new`] on first use
/// unless [`Builder::build_global`] configured it first: [`default_runtime`] without the
/// panic.
///
/// [`default_runtime`]: crate::default_runtime
///
/// # Errors
///
/// If the runtime did not exist and could not be started, the [`BuildError`] that
/// [`Builder::build`] returned: say, [`BuildError::WorkerThreadsEnvTooLarge`] for
/// `MAGPIE_WORKER_THREADS=100000`. Nothing is kept then, and a later call tries again.
///
/// # Examples
///
/// ```
/// match magpie::try_default_runtime() {
///     Ok(rt) => assert_eq!(rt.num_workers(), magpie::current_num_workers()),
///     Err(err) => eprintln!("no default runtime: {err}"),
/// }
/// ```
///
/// A bad `MAGPIE_WORKER_THREADS` is an error here, where [`default_runtime`] would panic:
///
/// ```
/// // Run as `MAGPIE_WORKER_THREADS=100000 my-program`:
/// # std::env::set_var("MAGPIE_WORKER_THREADS", "100000");
/// let err = magpie::try_default_runtime().unwrap_err();
/// assert!(matches!(err, magpie::BuildError::WorkerThreadsEnvTooLarge { .. }));
/// ```
pub fn try_default_runtime() -> Result<&'static Runtime, BuildError> {
    match GLOBAL.get() {
        Some(rt) => Ok(rt),
        None => build_default_cold(),
    }
}

/// The first use of the global runtime: builds it with the defaults, unless another thread
/// did while this one waited for the lock.
#[cold]
fn build_default_cold() -> Result<&'static Runtime, BuildError> {
    let _building = BUILDING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(rt) = GLOBAL.get() {
        return Ok(rt);
    }
    let rt = Builder::new().build()?;
    // Under the lock nobody else sets it: this stores `rt`.
    Ok(GLOBAL.get_or_init(|| rt))
}

/// The global runtime, started with the defaults if nobody configured it.
///
/// # Panics
///
/// If it could not be started (see [`try_default_runtime`]).
pub(crate) fn runtime() -> &'static Runtime {
    try_default_runtime().unwrap_or_else(|err| {
        panic!(
            "magpie: could not start the default runtime: {err} (magpie::try_default_runtime \
             returns this error instead of panicking)"
        )
    })
}

pub(crate) fn registry() -> &'static Arc<Registry> {
    &runtime().registry
}
