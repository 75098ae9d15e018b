//! A server run as `nobody` (when the tests run as root): a copy of the binary in a
//! directory that user can reach, a HOME it can write, and the command that starts the
//! copy through `setpriv`; `as_nobody` adds a fixture conda that user can run, and
//! `Unprivileged` a server that is not root whoever runs the tests.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::mcp::Session;
use crate::support;

/// Where an unprivileged server runs from (removed on drop).
pub(crate) struct Nobody {
    base: tempfile::TempDir,
    ccm: PathBuf,
    /// A HOME `nobody` can write.
    pub home: PathBuf,
}

impl Nobody {
    pub(crate) fn new() -> Nobody {
        let base = tempfile::Builder::new()
            .prefix("ccm-unprivileged-")
            .tempdir()
            .unwrap();
        let open = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        open(base.path(), 0o755);
        let ccm = base.path().join("ccm");
        std::fs::copy(env!("CARGO_BIN_EXE_ccm"), &ccm).unwrap();
        let home = base.path().join("home");
        std::fs::create_dir(&home).unwrap();
        open(&home, 0o777);
        Nobody { base, ccm, home }
    }

    /// A launcher of the copied `ccm` as `nobody` (uid and gid 65534, no supplementary
    /// groups), in the base directory; it outlives this borrow (the directory must still
    /// exist when it is called).
    pub(crate) fn launcher(&self) -> impl Fn() -> Command + use<> {
        let (ccm, dir) = (self.ccm.clone(), self.base.path().to_path_buf());
        move || {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(&ccm)
                .current_dir(&dir);
            c
        }
    }
}

/// A server that is not root: as `nobody` when the tests run as root, else as the tests'
/// user; the copied binary, a fixture conda that user can run, a HOME it can write. Such
/// a server has no per-execution cgroups (it cannot create them) and no privileged
/// sandbox.
pub(crate) struct Unprivileged {
    nobody: Nobody,
    fixture: support::Fixture,
    root: bool,
}

impl Unprivileged {
    pub(crate) fn new() -> Unprivileged {
        Unprivileged {
            fixture: support::build_fixture_for_others(&[]),
            nobody: Nobody::new(),
            root: support::is_root(),
        }
    }

    /// Its HOME.
    pub(crate) fn home(&self) -> &Path {
        &self.nobody.home
    }

    /// A server on its fixture conda with `args`, initialized.
    pub(crate) fn server(&self, args: &[&str]) -> Session {
        self.server_with(args, &[])
    }

    /// The same with `envs` set for the server.
    pub(crate) fn server_with(&self, args: &[&str], envs: &[(&str, &std::path::Path)]) -> Session {
        let mut command = if self.root {
            self.nobody.launcher()()
        } else {
            Command::new(&self.nobody.ccm)
        };
        command
            .arg("--conda-exe")
            .arg(&self.fixture.conda)
            .args(args)
            .env_remove("CONDA_EXE")
            .env_remove("CCM_LOG")
            .env("HOME", self.home())
            .envs(envs.iter().copied());
        Session::spawn_initialized(command)
    }
}

/// As `nobody` (the tests run as root): a launcher of a copy of the binary, a fixture on
/// a system interpreter, a HOME it can reach, and the directory that holds them.
pub(crate) fn as_nobody() -> (
    impl Fn() -> Command + use<>,
    support::Fixture,
    PathBuf,
    Nobody,
) {
    let others = support::build_fixture_for_others(&[]);
    let nobody = Nobody::new();
    (nobody.launcher(), others, nobody.home.clone(), nobody)
}
