//! `cargo run -p codegen`: the maintainers' generator.
//!
//! * `capture [--conda-exe PATH]` runs live discovery (the server's own code) against a
//!   reference conda and writes the normalized snapshot `snapshots/conda-<M>.<m>.json`.
//! * render (the default) turns every snapshot into typed Rust, `snapshots/conda_<M>_<m>.rs`,
//!   writing only files whose content changes; `--check` writes nothing and fails with a
//!   diff and the command to run when a file is stale.
//!
//! Capture needs a conda; render is pure and is what tests and CI run.

mod capture;

use std::path::{Path, PathBuf};

use codegen::{diff, render_all, repo_root, snapshots_dir};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "codegen",
    about = "Capture conda snapshots and render typed compilers"
)]
struct Cli {
    /// Render: fail (and write nothing) if a generated file is stale.
    #[arg(long)]
    check: bool,

    /// Where snapshots live.
    #[arg(long, value_name = "DIR", default_value_os_t = snapshots_dir(), global = true)]
    snapshots: PathBuf,

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
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Capture { conda_exe }) => capture::run(conda_exe.as_deref(), &cli.snapshots),
        None => render(&repo_root(), cli.check),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("codegen: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn render(root: &Path, check: bool) -> Result<(), String> {
    let mut stale = Vec::new();
    for (path, content) in render_all(root)? {
        let file = root.join(&path);
        let current = std::fs::read_to_string(&file).unwrap_or_default();
        if current == content {
            eprintln!("Up-to-date: {path}");
            continue;
        }
        if check {
            eprintln!("{}", diff(&current, &content, &path));
            stale.push(path);
        } else {
            std::fs::write(&file, content).map_err(|e| format!("{}: {e}", file.display()))?;
            eprintln!("Updated: {path}");
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} is stale: run `cargo run -p codegen` and commit the result",
            stale.join(", ")
        ))
    }
}
