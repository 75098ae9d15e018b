//! Who a sandbox check runs as: the fixture conda as the tests' user and, when the tests
//! run as root, as `nobody` ([`super::nobody`]); a real conda as the tests' user. Each run
//! gets a fresh HOME; `sandboxed_server` starts the server such a check drives.

use std::path::Path;
use std::process::Command;

use crate::mcp::Session;
use crate::support;

/// A check of servers started by a launcher: (launcher of `ccm`, conda, its prefix,
/// HOME, who runs it — for messages).
pub(crate) trait Check: Fn(&dyn Fn() -> Command, &Path, &Path, &Path, &str) {}

impl<F: Fn(&dyn Fn() -> Command, &Path, &Path, &Path, &str)> Check for F {}

/// A fresh, private HOME for a server (conda's caches live under it), under the target
/// directory (removed on drop).
pub(crate) fn home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ccm-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// A server for `conda` started by `launch` (the tests' user or `nobody`) with
/// `--allow-exec`, and `--warm` when asked (its zygote ready), under `home`; its sandbox
/// must be active.
pub(crate) fn sandboxed_server(
    mut launch: Command,
    conda: &Path,
    home: &Path,
    warm: bool,
) -> Session {
    launch
        .arg("--conda-exe")
        .arg(conda)
        .arg("--allow-exec")
        .args(if warm {
            &["--warm"][..]
        } else {
            &["--no-warm"][..]
        })
        .env_remove("CONDA_EXE")
        .env_remove("CCM_LOG")
        .env("HOME", home);
    let mut s = Session::spawn_initialized(launch);
    let caps = s.capabilities();
    assert_eq!(
        caps["sandbox"]["state"],
        "active",
        "{caps}: {}",
        s.stderr.lock().unwrap()
    );
    if warm {
        crate::warm::wait_ready(&mut s);
    }
    s
}

/// `check` on the shared fixture as the tests' user (root in CI), then, when the tests
/// run as root, on a fixture `nobody` can run, as `nobody`.
pub(crate) fn fixture_as_each_user(check: impl Check) {
    let fixture = support::fixture();
    let home = home();
    check(
        &support::ccm,
        &fixture.conda,
        &fixture.prefix,
        home.path(),
        "the tests' user",
    );
    if support::is_root() {
        let (nobody, others, home, _base) = super::nobody::as_nobody();
        check(&nobody, &others.conda, &others.prefix, &home, "nobody");
    }
}

/// `check` on the real conda `CCM_TEST_CONDA` names, as the tests' user (root in CI).
pub(crate) fn real_conda_as_the_tests_user(check: impl Check) {
    let conda = support::real_conda();
    let prefix = support::real_discovery()
        .prefix
        .clone()
        .expect("the target's prefix");
    let home = home();
    check(
        &support::ccm,
        &conda,
        &prefix,
        home.path(),
        "the tests' user",
    );
}
