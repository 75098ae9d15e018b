//! The `--classify` flag lists the end-to-end tests start servers with: the fixture's
//! `conda_behave` (a command no allow-list knows, which writes the file it is given) and
//! `conda_tune` classified by the operator.

/// `conda_behave` a write, and writes allowed: the server runs it.
pub(crate) const BEHAVE_WRITE: [&str; 3] = ["--allow-write", "--classify", "conda_behave=write"];

/// `conda_behave` and `conda_tune` writes, and writes allowed.
pub(crate) const BEHAVE_TUNE_WRITE: [&str; 5] = [
    "--allow-write",
    "--classify",
    "conda_behave=write",
    "--classify",
    "conda_tune=write",
];

/// `conda_behave` classified read — wrongly, as an operator might: a read-only verdict,
/// so its child runs in the read-only sandbox, where what it writes proves the sandbox.
pub(crate) const BEHAVE_READ: [&str; 2] = ["--classify", "conda_behave=read"];

/// `flags` followed by `more`.
pub(crate) fn with<'a>(flags: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    flags.iter().chain(more).copied().collect()
}
