//! The `--classify` flag lists the end-to-end tests start servers with: the fixture's
//! `conda_behave` (a command no allow-list knows) classified by the operator.

/// `conda_behave` a write, and writes allowed: the server runs it.
pub const BEHAVE_WRITE: [&str; 3] = ["--allow-write", "--classify", "conda_behave=write"];
