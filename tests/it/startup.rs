//! Instant start from a baked snapshot: the fixture's stamp matches the baked fixture
//! snapshot, so tools are served before live discovery ends, and live discovery confirms
//! (or contradicts) them afterwards.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

/// Read the capabilities until live discovery has had its say.
pub(crate) fn settled(session: &mut Session) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let caps = session.capabilities();
        if caps["startup"]["confirmation"] != "pending" {
            return caps;
        }
        assert!(Instant::now() < deadline, "live discovery never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn matching_target_starts_from_the_snapshot_and_is_confirmed() {
    let mut s = Session::start(&support::fixture().conda, &[]);
    let tools = s.tools();
    let caps = settled(&mut s);
    assert_eq!(caps["startup"]["path"], "snapshot");
    assert_eq!(
        caps["startup"]["reason"],
        "stamp matched the baked snapshot conda-0.99.json"
    );
    assert_eq!(caps["startup"]["confirmation"], "confirmed");
    assert_eq!(caps["restart"]["required"], false);
    // The snapshot's tools are the live catalog's tools.
    let found = support::fixture_discovery();
    let live = support::listed(
        &found.catalog,
        &found.plugins,
        Default::default(),
        s.sandboxed(),
    );
    assert_eq!(Value::Array(tools), Value::Array(live));
    // Calls run at once, with the baked compilers.
    assert!(all_baked(&caps), "{}", caps["compilers"]);
    let r = s.call("conda_list", json!({"json": true}));
    assert_eq!(structured(&r)["restart_required"], false);
}

/// Whether every tool of the capabilities document uses a baked compiler.
fn all_baked(caps: &Value) -> bool {
    caps["compilers"]
        .as_object()
        .unwrap()
        .values()
        .all(|c| c == "baked")
}

#[test]
fn a_parser_change_behind_the_stamp_requires_a_restart() {
    let fixture = support::build_fixture(&[]);
    let site = fixture.site_packages().join("conda/cli/main_info.py");
    let source = std::fs::read_to_string(&site).unwrap();
    let changed = source.replacen(
        "    p.add_argument(\"--base\"",
        "    p.add_argument(\"--brand-new\", action=\"store_true\", help=\"New.\")\n    p.add_argument(\"--base\"",
        1,
    );
    assert_ne!(changed, source);
    std::fs::write(&site, changed).unwrap();
    let mut s = Session::start(&fixture.conda, &[]);
    let tools = s.tools();
    let caps = settled(&mut s);
    assert_eq!(
        caps["startup"]["path"], "snapshot",
        "same version and plugins: same stamp"
    );
    assert_eq!(caps["startup"]["confirmation"], "differs");
    assert_eq!(caps["restart"]["required"], true);
    let reason = caps["restart"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("command `info`: argument `brand_new` is new"),
        "{reason}"
    );
    // The tool list never changes in place; every result says restart.
    assert_eq!(s.tools(), tools);
    let r = s.call("conda_list", json!({"json": true}));
    assert_eq!(structured(&r)["restart_required"], true);
}

#[test]
fn other_plugins_or_no_snapshot_start_live() {
    let fixture = support::build_fixture(&["--with-plugin", "extra"]);
    // An unreviewed plugin's command needs every grant: listed with --list-all.
    let mut s = Session::start(&fixture.conda, &["--list-all"]);
    let names: Vec<String> = s
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"conda_extra".to_owned()));
    let caps = s.capabilities();
    assert_eq!(caps["startup"]["path"], "live");
    assert_eq!(
        caps["startup"]["reason"],
        "plugins differ from the baked snapshot conda-0.99.json"
    );
    assert_eq!(caps["startup"]["confirmation"], Value::Null);

    let mut s = Session::start(&support::fixture().conda, &["--no-snapshot"]);
    s.tools();
    let caps = s.capabilities();
    assert_eq!(caps["startup"]["path"], "live");
    assert_eq!(caps["startup"]["reason"], "--no-snapshot");
    // Baked compilers are still used on the live path where signatures match.
    assert!(all_baked(&caps), "{}", caps["compilers"]);
}

/// A server started by another, unprivileged user with this `HOME` and working directory.
fn start_as_other_user(conda: &Path, home: &Path, cwd: &Path) -> Session {
    let mut command = support::as_other_user(Path::new(env!("CARGO_BIN_EXE_ccm")), home);
    command
        .arg("--conda-exe")
        .arg(conda)
        .arg("--allow-exec")
        .current_dir(cwd)
        .env_remove("CONDA_EXE")
        .env_remove("CCM_LOG");
    Session::spawn_initialized(command)
}

/// Directories owned by the unprivileged user (when the tests can give them away).
fn make_dirs(dirs: &[&Path]) {
    for dir in dirs {
        std::fs::create_dir_all(dir).unwrap();
        if support::is_root() {
            std::os::unix::fs::chown(dir, Some(support::NOBODY), Some(support::NOBODY)).unwrap();
        }
    }
}

/// The snapshot was captured with another home and working directory: a start under any
/// user's home, with the home inside the working directory or the other way round, still
/// serves the snapshot and is confirmed (no restart required).
#[test]
fn a_snapshot_start_is_confirmed_for_another_user_home_and_working_directory() {
    let fixture = support::build_fixture_for_others(&[]);
    let place = crate::kit::users::home();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let work = place.path().join("work");
    let home_in_work = work.join("home");
    let home = place.path().join("home");
    let work_in_home = home.join("src").join("project");
    make_dirs(&[&work, &home_in_work, &home, &work_in_home]);
    for (home, cwd) in [(&home_in_work, &work), (&home, &work_in_home)] {
        let mut s = start_as_other_user(&fixture.conda, home, cwd);
        let tools = s.tools();
        let caps = settled(&mut s);
        let context = format!("HOME={} cwd={}", home.display(), cwd.display());
        assert_eq!(caps["startup"]["path"], "snapshot", "{context}: {caps}");
        assert_eq!(
            caps["startup"]["confirmation"], "confirmed",
            "{context}: {caps}"
        );
        assert_eq!(caps["restart"]["required"], false, "{context}");
        assert!(!tools.is_empty());
        let r = s.call("conda_list", json!({"json": true}));
        assert_eq!(structured(&r)["restart_required"], false, "{context}");
        // The server really ran as that user, in that directory, with that home.
        let r = s.call(
            "conda_run",
            json!({"executable_call": ["sh", "-c", "id -u; pwd; echo $HOME"]}),
        );
        let stdout = structured(&r)["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let expected_uid = if support::is_root() {
            support::NOBODY.to_string()
        } else {
            // SAFETY: geteuid has no preconditions and cannot fail.
            unsafe { libc::geteuid() }.to_string()
        };
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            [
                expected_uid.as_str(),
                cwd.to_str().unwrap(),
                home.to_str().unwrap()
            ],
            "{context}: {r}"
        );
    }
}

/// Real conda under a foreign home: the shipped snapshot serves the start and live
/// discovery confirms it (the capture machine's home appeared in conda's help texts).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_snapshot_start_is_confirmed_under_a_foreign_home() {
    let conda = support::real_conda();
    let home = tempfile::Builder::new()
        .prefix("ccm-foreign-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let found = support::real_discovery();
    let baked = support::snapshot(support::REAL);
    let mut s = Session::start_with(&conda, &[], &[("HOME", home.path().to_str().unwrap())]);
    let caps = settled(&mut s);
    assert_eq!(caps["restart"]["required"], false, "{caps}");
    if found.fingerprint() != baked.discovery_fingerprint {
        // A conda with optional plugins has no baked snapshot: it starts live.
        assert_eq!(caps["startup"]["path"], "live", "{caps}");
        assert_eq!(
            caps["startup"]["reason"],
            "plugins differ from the baked snapshot conda-26.7.json"
        );
    } else {
        assert_eq!(caps["startup"]["path"], "snapshot", "{caps}");
        assert_eq!(caps["startup"]["confirmation"], "confirmed", "{caps}");
        let r = s.call("conda_list", json!({"json": true}));
        assert_eq!(structured(&r)["restart_required"], false);
    }
}

/// Installing the `ccm-mcp` wheel adds ccm's own launcher (`conda ccm`, `conda mcp`) to
/// conda: a conda whose only extra entry point is that launcher still starts as it did
/// without it (from the baked snapshot, confirmed, no restart required; live where no
/// snapshot matches), with the same tools.
///
/// The launcher is installed into a fresh copy of the real prefix the way pip installs
/// the wheel's Python part: the `ccm_conda_plugin` package copied from `python/`, and a
/// `ccm_mcp-<version>.dist-info` whose `METADATA` (name, version) and `entry_points.txt`
/// (the `[conda]` section) are read from `pyproject.toml`, which maturin turns into the
/// wheel's own, plus its `RECORD` naming `bin/ccm` (`launcher::install_plugin_into`); conda
/// finds plugins through exactly these files. The wheel's binary is not needed for
/// discovery (a full maturin build takes minutes; `.ci/dist` installs the built wheel).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_with_ccm_launcher_installed_starts_as_without_it() {
    let original = support::real_discovery()
        .prefix
        .clone()
        .expect("the target's prefix");
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let prefix = scratch.path().join("conda");
    let conda = crate::kit::prefix::copy(&original, &prefix);
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let home = home.to_str().unwrap().to_owned();
    let start = |conda: &Path| {
        let mut s = Session::start_with(conda, &[], &[("HOME", home.as_str())]);
        let tools = s.tools();
        let caps = settled(&mut s);
        (tools, caps)
    };
    let (tools_before, before) = start(&conda);
    let site = std::fs::read_dir(prefix.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("site-packages");
    crate::launcher::install_plugin_into(&site, Some("bin/ccm"));
    // conda itself sees the launcher.
    let commands = std::process::Command::new(&conda)
        .arg("commands")
        .env("HOME", &home)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&commands.stdout);
    assert!(listed.lines().any(|l| l == "ccm"), "{listed}");
    let (tools_after, after) = start(&conda);
    eprintln!(
        "without the launcher: {}; with it: {}",
        before["startup"], after["startup"]
    );
    assert_eq!(after["startup"]["path"], before["startup"]["path"]);
    assert_eq!(after["startup"]["reason"], before["startup"]["reason"]);
    if before["startup"]["path"] == "snapshot" {
        assert_eq!(after["startup"]["confirmation"], "confirmed", "{after}");
    }
    assert_eq!(after["restart"]["required"], false, "{after}");
    assert_eq!(tools_after, tools_before);
}

/// A stdio session closed at once (`ccm … </dev/null`, a client that gives up, a
/// health check): the server ends its startup work, and says nothing false about it. The
/// sandbox probe's trial child and the confirming live discovery are ended by the
/// shutdown; neither is a finding about the sandbox or the snapshot.
fn closed_at_once(conda: &Path, flags: &[&str]) {
    for run in 0..5 {
        let output = support::ccm()
            .arg("--conda-exe")
            .arg(conda)
            .args(flags)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "run {run}: {err}");
        assert!(
            output.stdout.is_empty(),
            "run {run}: stdout is the protocol"
        );
        for line in err.lines() {
            assert!(
                !line.contains(" WARN ") && !line.contains(" ERROR "),
                "run {run}: a false warning at shutdown: {line}\n{err}"
            );
        }
    }
}

#[test]
fn a_session_closed_at_once_logs_no_false_warning() {
    // The fixture matches its baked snapshot: the snapshot start, with its confirmation.
    closed_at_once(&support::fixture().conda, &[]);
    closed_at_once(&support::fixture().conda, &["--warm"]);
    // Live discovery (no snapshot start).
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin("unbaked", "from conda.plugins import hookimpl\n");
    closed_at_once(&fixture.conda, &[]);
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_session_closed_at_once_logs_no_false_warning() {
    closed_at_once(&support::real_conda(), &[]);
    closed_at_once(&support::real_conda(), &["--warm"]);
}
