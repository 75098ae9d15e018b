//! `cargo run -p codegen`: the maintainers' generator.
//!
//! * `capture [--conda-exe PATH]` runs live discovery (the server's own code) against a
//!   reference conda and writes the normalized snapshot `snapshots/conda-<M>.<m>.json`.
//! * render (the default) turns every snapshot into typed Rust, `snapshots/conda_<M>_<m>.rs`,
//!   writing only files whose content changes; `--check` also prints each stale file's
//!   diff and, after rewriting it, fails naming the command to run.
//!
//! Capture needs a conda; render is pure and is what tests and CI run.

mod capture;

use std::path::PathBuf;

use codegen::{Mode, ensure, repo_root, snapshots_dir};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "codegen",
    about = "Capture conda snapshots and render typed compilers"
)]
struct Cli {
    /// Render, and fail (after printing the diff and rewriting it) if a generated file was stale.
    #[arg(long)]
    check: bool,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Discover a reference conda and write snapshots/conda-<major>.<minor>.json.
    Capture {
        /// The reference conda (default: CONDA_EXE, then conda on PATH).
        #[arg(long, value_name = "PATH")]
        conda_exe: Option<String>,
        /// Where the snapshot is written.
        #[arg(long, value_name = "DIR", default_value_os_t = snapshots_dir())]
        snapshots: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Capture {
            conda_exe,
            snapshots,
        }) => capture::run(conda_exe.as_deref(), &snapshots),
        None => ensure(
            &repo_root(),
            if cli.check { Mode::Check } else { Mode::Write },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("codegen: error: {message}");
            ExitCode::FAILURE
        }
    }
}
