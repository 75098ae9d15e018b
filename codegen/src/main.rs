//! `cargo run -p codegen`: the maintainers' generator.
//!
//! * `capture [--conda-exe PATH]` runs live discovery (the server's own code) against a
//!   reference conda and writes the normalized snapshot `snapshots/conda-<M>.<m>.json`.
//! * render (the default) turns every snapshot into generated Rust; `--check` fails when a
//!   checked-in file is stale.
//!
//! Capture needs a conda; render is pure and is what tests and CI run.

mod capture;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "codegen",
    about = "Capture conda snapshots and render typed compilers"
)]
struct Cli {
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
        /// Where snapshots live.
        #[arg(long, value_name = "DIR", default_value_os_t = snapshots_dir())]
        out: PathBuf,
    },
}

/// The repository's `snapshots/` directory.
pub fn snapshots_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("snapshots")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Capture { conda_exe, out }) => capture::run(conda_exe.as_deref(), &out),
        None => Err("rendering is not available yet; use `capture`".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("codegen: error: {message}");
            ExitCode::FAILURE
        }
    }
}
