//! The global default runtime, created on first use.

use std::sync::OnceLock;

use super::builder::{BuildError, Builder};
use super::registry::Registry;
use super::Runtime;
use std::sync::Arc;

static GLOBAL: OnceLock<Runtime> = OnceLock::new();

/// Builds the global runtime from `builder`, unless it exists already.
pub(super) fn init(builder: Builder) -> Result<(), BuildError> {
    if GLOBAL.get().is_some() {
        return Err(BuildError::GlobalAlreadyInitialized);
    }
    let rt = builder.build()?;
    // Lost a race with another initializer: ours is dropped (its workers joined).
    GLOBAL
        .set(rt)
        .map_err(|_| BuildError::GlobalAlreadyInitialized)
}

/// The global runtime, started with the defaults if nobody configured it.
pub(crate) fn runtime() -> &'static Runtime {
    GLOBAL.get_or_init(|| {
        Builder::new()
            .build()
            .unwrap_or_else(|err| panic!("magpie: could not start the global runtime: {err}"))
    })
}

pub(crate) fn registry() -> &'static Arc<Registry> {
    &runtime().registry
}
