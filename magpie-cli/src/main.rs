//! `magpie`: shows the magpie scheduler at work.
//!
//! `magpie demo` runs fork-join workloads on the default runtime and prints what every
//! worker did.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

mod demo;

/// The magpie work-stealing runtime, at work on your machine.
#[derive(Debug, Parser)]
#[command(name = "magpie", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run fork-join workloads on the default runtime and show per-worker statistics.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    // clap exits with status 2 and a clear message on bad arguments.
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args, &mut std::io::stdout().lock()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // An empty message: the reader went away (a closed pipe); nothing to report.
        Err(message) if message.is_empty() => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("magpie: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `f` and returns its result and how long it took.
fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let start = Instant::now();
    let result = f();
    (result, start.elapsed())
}
