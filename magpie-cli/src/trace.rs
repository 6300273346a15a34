//! `magpie trace`.
use std::io::Write;

use clap::Args;

use crate::report::Failure;

#[derive(Debug, Args)]
pub(crate) struct TraceArgs {}

pub(crate) fn run(_args: &TraceArgs, _out: &mut impl Write) -> Result<(), Failure> {
    Err(Failure::Run("not yet".into()))
}
