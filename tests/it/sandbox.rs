//! The read-only sandbox end to end: children of read-only calls (and of calls admitted
//! by `--allow-exec` alone) cannot write outside the declared places.
//!
//! A writing command is forced through the read-only path with the debug-build hook
//! `CCM_TEST_FORCE_READ_ONLY` (the fixture's `behave --pid-file PATH` writes PATH).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

const FORCE: (&str, &str) = ("CCM_TEST_FORCE_READ_ONLY", "conda_behave");

fn conda() -> &'static Path {
    &support::fixture().conda
}

/// A private HOME for the server (conda's caches live under it).
fn home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ccm-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn start(args: &[&str], env: &[(&str, &str)], home: &Path) -> Session {
    let mut all = env.to_vec();
    all.push(("HOME", home.to_str().unwrap()));
    Session::start_with(conda(), args, &all)
}

fn stderr_of(result: &Value) -> String {
    structured(result)["stderr"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn writable_paths(caps: &Value) -> Vec<(String, String)> {
    caps["sandbox"]["writable"]
        .as_array()
        .unwrap_or_else(|| panic!("no writable list: {}", caps["sandbox"]))
        .iter()
        .map(|w| {
            (
                w["path"].as_str().unwrap().to_owned(),
                w["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_writing_command_forced_through_the_read_only_path_cannot_write() {
    let home = home();
    let target = home.path().join("written-by-a-read");
    let arguments = json!({"pid_file": target});

    // Without the hook the default read-only server refuses the call outright.
    let mut plain = start(&[], &[], home.path());
    let (code, _) = plain.call_error("conda_behave", arguments.clone());
    assert_eq!(code, -32600);

    // Forced through the read-only path: it runs, in the sandbox, and cannot write.
    let mut s = start(&[], &[FORCE], home.path());
    let caps = s.capabilities();
    assert_eq!(
        caps["sandbox"]["state"], "active",
        "the sandbox must be active on Linux with namespaces: {}",
        caps["sandbox"]
    );
    let result = s.call("conda_behave", arguments.clone());
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        stderr_of(&result).contains("Read-only file system"),
        "{}",
        stderr_of(&result)
    );
    assert!(!target.exists(), "the read-only call wrote {target:?}");

    // The same forced call with the sandbox turned off writes: the sandbox stopped it.
    let mut off = start(&["--no-sandbox"], &[FORCE], home.path());
    assert_eq!(off.capabilities()["sandbox"]["state"], "disabled");
    let result = off.call("conda_behave", arguments);
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(target.exists());
}

#[test]
fn tmpdir_is_a_private_tmpfs() {
    let home = home();
    let mut s = start(&[], &[FORCE], home.path());
    let caps = s.capabilities();
    let (tmpdir, kind) = writable_paths(&caps).remove(0);
    assert_eq!(kind, "tmpfs");
    let result = s.call("conda_behave", json!({"env": ["TMPDIR"]}));
    assert_eq!(
        structured(&result)["parsed_json"],
        json!({"TMPDIR": tmpdir}),
        "{result}"
    );
    // Writable inside, invisible outside.
    let inside = PathBuf::from(&tmpdir).join("pid");
    let result = s.call("conda_behave", json!({"pid_file": inside}));
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(
        !inside.exists(),
        "{inside:?} leaked out of the call's tmpfs"
    );
}

#[test]
fn exec_without_write_runs_in_the_sandbox() {
    let home = home();
    let target = home.path().join("written-by-conda-run");
    let script = format!("echo x > {}", target.display());
    let arguments = json!({"executable_call": ["sh", "-c", script]});

    let mut s = start(&["--allow-exec"], &[], home.path());
    let result = s.call("conda_run", arguments.clone());
    assert_eq!(result["isError"], true, "{result}");
    assert!(!target.exists());
    // The raw tool takes the same path.
    let result = s.call(
        "conda_execute",
        json!({"argv": ["run", "sh", "-c", script]}),
    );
    assert_eq!(result["isError"], true, "{result}");
    assert!(!target.exists());

    // With --allow-write too, exec may write.
    let mut w = start(&["--allow-exec", "--allow-write"], &[], home.path());
    let result = w.call("conda_run", arguments);
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(target.exists());
}

/// `conda info --json` and `conda env list --json` with and without the sandbox.
fn read_only_documents(s: &mut Session) -> BTreeMap<&'static str, Value> {
    let mut out = BTreeMap::new();
    for (name, tool, arguments) in [
        ("info", "conda_info", json!({"json": true})),
        ("envs", "conda_env_list", json!({"json": true})),
    ] {
        let result = s.call(tool, arguments);
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
        out.insert(name, structured(&result)["parsed_json"].clone());
    }
    out
}

#[test]
fn read_only_tools_print_the_same_inside_and_outside() {
    let home = home();
    let mut inside = start(&[], &[], home.path());
    let mut outside = start(&["--no-sandbox"], &[], home.path());
    let mut a = read_only_documents(&mut inside);
    let mut b = read_only_documents(&mut outside);
    // The one documented difference: conda's temporary directory is the call's tmpfs.
    let tmp_a = a
        .get_mut("info")
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("tmp_dir");
    let tmp_b = b
        .get_mut("info")
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("tmp_dir");
    assert_ne!(tmp_a, tmp_b);
    assert_eq!(a, b);
    // The probes saw the truth: the fixture's base and t1 are writable.
    assert_eq!(a["info"]["root_writable"], true);
    for details in a["envs"]["envs_details"].as_object().unwrap().values() {
        assert_eq!(details["writable"], true, "{details}");
    }
    // The overlays of every environment's conda-meta are listed.
    let caps = inside.capabilities();
    let paths = writable_paths(&caps);
    let prefix = &support::fixture().prefix;
    for env in [prefix.clone(), prefix.join("envs/t1")] {
        let meta = env.join("conda-meta").to_string_lossy().into_owned();
        assert!(
            paths.contains(&(meta.clone(), "overlay".to_owned())),
            "{meta} in {paths:?}"
        );
    }
}

/// A server that is not root gets a user namespace too. When the tests run as root, the
/// server runs as `nobody` (through `setpriv`); otherwise as the current user.
#[test]
fn an_unprivileged_server_gets_the_same_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // Everything the unprivileged user needs, in a directory it can reach: the binary,
    // a fixture conda on a system interpreter, a HOME.
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
    let prefix = base.path().join("conda");
    let mut build = Command::new(support::python());
    build
        .arg(support::repo().join("tests/fixtures/build_fixture.py"))
        .arg(&prefix);
    if root {
        let system = Path::new("/usr/bin/python3");
        assert!(
            system.exists(),
            "running the server as nobody needs an interpreter nobody can run: /usr/bin/python3"
        );
        build.arg("--python").arg(system);
    }
    let built = build.output().unwrap();
    assert!(built.status.success(), "{built:?}");
    let conda = prefix.join("bin/conda");
    let home = base.path().join("home");
    std::fs::create_dir(&home).unwrap();
    open(&home, 0o777);
    let target = home.join("written-by-a-read");
    let server = |args: &[&str]| {
        let mut command = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(&ccm);
            c
        } else {
            Command::new(&ccm)
        };
        command
            .arg("--conda-exe")
            .arg(&conda)
            .args(args)
            .env_remove("CONDA_EXE")
            .env_remove("CCM_LOG")
            .env("HOME", &home)
            .env(FORCE.0, FORCE.1);
        let mut s = Session::spawn(command);
        s.initialize = s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "ccm-tests", "version": "1"}}),
        );
        s.notify("notifications/initialized", json!({}));
        s
    };
    let mut s = server(&[]);
    assert_eq!(
        s.capabilities()["sandbox"]["state"],
        "active",
        "{}",
        s.stderr.lock().unwrap()
    );
    let result = s.call("conda_behave", json!({"pid_file": target}));
    assert!(
        stderr_of(&result).contains("Read-only file system"),
        "{result}"
    );
    assert!(!target.exists());
    // Same documents inside and outside, also for a user who may not write the prefix.
    let mut a = read_only_documents(&mut s);
    let mut b = read_only_documents(&mut server(&["--no-sandbox"]));
    for docs in [&mut a, &mut b] {
        docs.get_mut("info")
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove("tmp_dir");
    }
    assert_eq!(a, b);
    assert_eq!(a["info"]["root_writable"], !root);
}
