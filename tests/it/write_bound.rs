//! The write bound: a write nobody confirms, admitted under `--allow-paths` or
//! `--write-envs`, writes only where its gates admitted (and conda's own places) for the
//! run's whole life. The agent swaps a directory of a judged path for a symlink to a
//! place outside *after* the last check (the debug-build hold `CCM_TEST_HOLD_BOUNDED_WRITES`
//! stops the call between the bound and the child's start, where conda's start-up and
//! solve would be): nothing is written outside and the call fails saying a write was
//! refused. The same swap with the bound turned off (`CCM_TEST_NO_WRITE_BOUND`, as on a
//! kernel without Landlock) lands outside, which shows the hold puts the swap after
//! every check. The fixture proves the mechanism offline; `real_conda_*` prove it on
//! conda 26.7 creating an environment from a local channel.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binding::Real;
use crate::kit::classify::BEHAVE_WRITE;
use crate::mcp::Session;
use crate::support;

/// What a failed bounded run's summary says (`server::call::bound::REFUSED_WRITE`).
const REFUSED: &str = "a write outside the places this call may write was refused";

/// Replace the directory `dir` by a symlink to `target` (the old one kept beside it).
fn swap_for_link(dir: &Path, target: &Path) {
    std::fs::rename(dir, dir.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(target, dir).unwrap();
}

/// Call `tool` and, once the server holds the call after its bound is made, run `swap`
/// and let it go; the result.
fn call_swapping(
    session: &mut Session,
    hold: &Path,
    tool: &str,
    arguments: Value,
    swap: impl FnOnce(),
) -> Value {
    let id = session.send("tools/call", json!({"name": tool, "arguments": arguments}));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !hold.join("held").exists() {
        assert!(Instant::now() < deadline, "{tool} was never held");
        std::thread::sleep(Duration::from_millis(20));
    }
    swap();
    std::fs::write(hold.join("go"), b"").unwrap();
    let response = session
        .wait(id, Duration::from_secs(300))
        .unwrap_or_else(|| panic!("no response to {tool}"));
    response["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Offline: `conda behave --pid-file` (the operator classified it a write) under
/// `--allow-paths`, its output directory swapped for a symlink to a directory outside
/// after the last check. Bounded: the write fails (`isError`, the refused write named)
/// and nothing appears outside; unbounded: the pid file lands outside. A write inside
/// works, and the capabilities say the bound is active.
#[test]
fn a_directory_swapped_after_the_last_check_leads_no_write_outside() {
    for bounded in [true, false] {
        // Not under the temporary directory, which conda may write (`TMPDIR`).
        let dir = tempfile::Builder::new()
            .prefix("ccm-write-bound-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (allowed, outside, hold) = (
            base.join("allowed"),
            base.join("outside"),
            base.join("hold"),
        );
        for sub in [allowed.join("proj/out"), outside.clone(), hold.clone()] {
            std::fs::create_dir_all(sub).unwrap();
        }
        let allowed_text = allowed.display().to_string();
        let hold_text = hold.display().to_string();
        let mut env = vec![("CCM_TEST_HOLD_BOUNDED_WRITES", hold_text.as_str())];
        if !bounded {
            env.push(("CCM_TEST_NO_WRITE_BOUND", "1"));
        }
        let mut args = BEHAVE_WRITE.to_vec();
        args.extend(["--allow-paths", &allowed_text]);
        let mut s = Session::start_with(&support::fixture().conda, &args, &env);
        let bound = &s.capabilities()["write_bound"];
        assert_eq!(
            bound["state"],
            if bounded { "active" } else { "unavailable" },
            "{bound}"
        );
        let out = allowed.join("proj/out");
        let arguments = json!({"pid_file": out.join("pid").display().to_string()});
        let result = call_swapping(&mut s, &hold, "conda_behave", arguments, || {
            swap_for_link(&out, &outside)
        });
        if bounded {
            assert_eq!(result["isError"], true, "{result}");
            assert!(text(&result).contains(REFUSED), "{result}");
            assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        } else {
            assert_eq!(result["isError"], false, "{result}");
            assert!(
                outside.join("pid").exists(),
                "the control write did not land outside"
            );
        }
        // A write inside the allowed directory works.
        let inside = allowed.join("proj/inside-pid");
        let arguments = json!({"pid_file": inside.display().to_string()});
        let result = call_swapping(&mut s, &hold, "conda_behave", arguments, || {});
        assert_eq!(result["isError"], false, "{result}");
        assert!(inside.exists());
    }
}

/// A directory of the real setup, canonical.
fn canonical(real: &Real, sub: &str) -> PathBuf {
    let path = real.path(sub);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::canonicalize(path).unwrap()
}

/// Every file below `dir` (none when it does not exist).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(files_below(&path));
        }
        found.push(path);
    }
    found
}

/// One real-conda case: a server with `flags` (and the hold), `create -p
/// project/envs/NAME barpkg` from the local channel with `project/envs` swapped for a
/// symlink to `outside` after the last check; bounded or not. Then, bounded, the same
/// create without a swap works.
fn real_case(flags: &dyn Fn(&Real, &Path) -> Vec<String>, bounded: bool) {
    let real = Real::new();
    let (project, outside, hold) = (
        canonical(&real, "project"),
        canonical(&real, "outside"),
        canonical(&real, "hold"),
    );
    let envs = project.join("envs");
    std::fs::create_dir_all(&envs).unwrap();
    let mut env = real.env();
    env.push((
        "CCM_TEST_HOLD_BOUNDED_WRITES".into(),
        hold.display().to_string(),
    ));
    if !bounded {
        env.push(("CCM_TEST_NO_WRITE_BOUND".into(), "1".into()));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args = flags(&real, &project);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut s = Session::start_with(&support::real_conda(), &args, &env);
    let context = format!("{args:?} bounded={bounded}");
    let prefix = envs.join("x").display().to_string();
    let arguments = json!({"prefix": prefix, "packages": ["barpkg"], "yes": true});
    let result = call_swapping(&mut s, &hold, "conda_create", arguments, || {
        swap_for_link(&envs, &outside)
    });
    if !bounded {
        assert_eq!(result["isError"], false, "{context}: {result}");
        assert!(outside.join("x/conda-meta").is_dir(), "{context}: {result}");
        return;
    }
    assert_eq!(result["isError"], true, "{context}: {result}");
    assert!(text(&result).contains(REFUSED), "{context}: {result}");
    assert_eq!(files_below(&outside), Vec::<PathBuf>::new(), "{context}");
    assert_eq!(real.marks(), Vec::<String>::new(), "{context}");
    // The same create, nobody swapping: an ordinary permitted write still works (from a
    // channel whose package has no post-link script: under `--write-envs` a script that
    // writes outside the target is refused too).
    std::fs::remove_file(&envs).unwrap();
    std::fs::rename(envs.with_extension("old"), &envs).unwrap();
    let arguments = json!({"prefix": envs.join("ok").display().to_string(),
        "packages": ["bazpkg"], "channel": [plain_url(&real)], "override_channels": true,
        "yes": true});
    let result = call_swapping(&mut s, &hold, "conda_create", arguments, || {});
    assert_eq!(result["isError"], false, "{context}: {result}");
    assert!(envs.join("ok/share/bazpkg/data.txt").is_file(), "{context}");
}

/// A local channel (`plain`) with `bazpkg 1.0`, which has no post-link script.
fn plain_channel(real: &Real) -> PathBuf {
    let channel = real.path("plain");
    if !channel.exists() {
        let status = std::process::Command::new(support::python())
            .arg(support::repo().join("tests/fixtures/make_channel.py"))
            .arg(&channel)
            .arg("bazpkg=1.0")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    std::fs::canonicalize(channel).unwrap()
}

fn plain_url(real: &Real) -> String {
    format!("file://{}", plain_channel(real).display())
}

/// `--allow-write --allow-paths DIR`: the allowed directories are the project, the local
/// channel and the directory the packages' post-link scripts mark (a script writing
/// anywhere else is held by the bound too).
fn allow_paths(real: &Real, project: &Path) -> Vec<String> {
    let allowed = format!(
        "{},{},{},{}",
        project.display(),
        real.path("conda-forge").display(),
        plain_channel(real).display(),
        std::fs::canonicalize(real.path("marks")).unwrap().display()
    );
    vec!["--allow-write".into(), "--allow-paths".into(), allowed]
}

/// `--allow-write --write-envs PATTERN`: the target prefixes in the project's envs
/// directory, by path.
fn write_envs(real: &Real, project: &Path) -> Vec<String> {
    plain_channel(real);
    let envs = project.join("envs");
    let scope = format!("{},{}", envs.join("x").display(), envs.join("ok").display());
    vec!["--allow-write".into(), "--write-envs".into(), scope]
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_allowed_paths_hold_for_the_whole_run() {
    real_case(&allow_paths, true);
    real_case(&allow_paths, false);
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_write_envs_hold_for_the_whole_run() {
    real_case(&write_envs, true);
    real_case(&write_envs, false);
}

/// A package cache named only in a condarc (`pkgs_dirs`, no `CONDA_PKGS_DIRS`): a
/// bounded create from the local channel succeeds, under `--allow-paths` and under
/// `--write-envs`, and extracts its package into the run's own package cache, not into
/// the operator's (`$CONDARC`'s), which is read-only to the run (a shared cache's files
/// are other environments' files). Hostile, under `--allow-paths` alone: `~/.condarc` —
/// which such a write may write (`conda config --append pkgs_dirs …`) — names a
/// directory outside as the only cache: nothing lands there either.
fn rc_cache_case(flags: &dyn Fn(&Real, &Path) -> Vec<String>, hostile: bool) {
    let real = Real::new();
    let (project, outside) = (canonical(&real, "project"), canonical(&real, "outside"));
    let rc_pkgs = canonical(&real, "rc-pkgs");
    let (rc, cache) = if hostile {
        (real.path("home/.condarc"), &outside)
    } else {
        (real.path("condarc"), &rc_pkgs)
    };
    let mut rc_text = std::fs::read_to_string(&rc).unwrap_or_default();
    rc_text.push_str(&format!("pkgs_dirs:\n  - {}\n", cache.display()));
    std::fs::write(&rc, rc_text).unwrap();
    let env: Vec<(String, String)> = real
        .env()
        .into_iter()
        .filter(|(k, _)| k != "CONDA_PKGS_DIRS")
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args = flags(&real, &project);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut s = Session::start_with(&support::real_conda(), &args, &env);
    let context = format!("{args:?} hostile={hostile}");
    let envs = project.join("envs");
    let arguments = json!({"prefix": envs.join("ok").display().to_string(),
        "packages": ["bazpkg"], "channel": [plain_url(&real)], "override_channels": true,
        "yes": true});
    let result = s.call("conda_create", arguments);
    assert_eq!(files_below(&outside), Vec::<PathBuf>::new(), "{context}");
    assert_eq!(files_below(&rc_pkgs), Vec::<PathBuf>::new(), "{context}");
    assert_eq!(result["isError"], false, "{context}: {result}");
    assert!(envs.join("ok/share/bazpkg/data.txt").is_file(), "{context}");
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_bounded_write_extracts_into_its_own_package_cache() {
    rc_cache_case(&allow_paths, true);
    rc_cache_case(&allow_paths, false);
    rc_cache_case(&write_envs, false);
}

/// Attack 4 U1, U2, U5 offline: under `--allow-paths`, the agent's files in the allowed
/// directory that a bounded write un-shares before its run: a 10 000-deep directory chain
/// refuses the call (too deep, never a stack overflow: the server answers the next call);
/// then a set-user-ID file of another user with two links is copied without the bit and
/// stays its owner's (root servers), and a 1 GiB sparse file with two links keeps its holes.
#[test]
fn unsharing_the_agents_files_grants_nothing_and_keeps_the_server_alive() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::Builder::new()
        .prefix("ccm-unshare-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let allowed = std::fs::canonicalize(dir.path()).unwrap().join("allowed");
    std::fs::create_dir_all(allowed.join("deep")).unwrap();
    let deep = allowed.join("deep");
    let depth = 10_000;
    {
        use rustix::fs::{Mode, OFlags, mkdirat, open, openat};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut at = open(&deep, flags, Mode::empty()).unwrap();
        for _ in 0..depth {
            mkdirat(&at, "d", Mode::from_raw_mode(0o755)).unwrap();
            at = openat(&at, "d", flags, Mode::empty()).unwrap();
        }
    }
    let allowed_text = allowed.display().to_string();
    let mut args = BEHAVE_WRITE.to_vec();
    args.extend(["--allow-paths", &allowed_text]);
    let mut s = Session::start_with(&support::fixture().conda, &args, &[]);
    let pid = allowed.join("pid").display().to_string();
    let (_, message) = s.call_error("conda_behave", json!({"pid_file": pid}));
    assert!(message.contains("nested too deep"), "{message}");
    assert!(!allowed.join("pid").exists());
    // The server is alive; the chain gone, the agent's shared files.
    {
        use rustix::fs::{AtFlags, Mode, OFlags, open, renameat, unlinkat};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let at = open(&deep, flags, Mode::empty()).unwrap();
        while renameat(&at, "d/d", &at, "x").is_ok() {
            unlinkat(&at, "d", AtFlags::REMOVEDIR).unwrap();
            renameat(&at, "x", &at, "d").unwrap();
        }
        unlinkat(&at, "d", AtFlags::REMOVEDIR).unwrap();
    }
    let tool = allowed.join("tool");
    std::fs::write(&tool, b"#!/bin/sh\n").unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        std::os::unix::fs::chown(&tool, Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let outside = dir.path().join("tool-elsewhere");
    std::fs::hard_link(&tool, &outside).unwrap();
    let big = allowed.join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    std::fs::hard_link(&big, dir.path().join("big-elsewhere")).unwrap();
    let result = s.call("conda_behave", json!({"pid_file": pid}));
    assert_eq!(result["isError"], false, "{result}");
    let meta = std::fs::metadata(&tool).unwrap();
    assert_eq!((meta.nlink(), meta.mode() & 0o7777), (1, 0o755));
    if root {
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
    assert_eq!(std::fs::metadata(&outside).unwrap().mode() & 0o7777, 0o6755);
    let meta = std::fs::metadata(&big).unwrap();
    assert_eq!((meta.nlink(), meta.len()), (1, 1 << 30));
    assert!(meta.blocks() < 64, "holes kept: {} blocks", meta.blocks());
}

/// A hard link the agent plants during a bounded run is written through, so the kernel
/// must keep it to files the agent may write itself (`fs.protected_hardlinks`): where the
/// setting reads off (through the debug builds' stand-in file), a bounded write is refused
/// before anything runs, with the setting named; where it reads on, the same call runs.
#[test]
fn a_kernel_without_protected_hardlinks_refuses_bounded_writes() {
    let dir = tempfile::Builder::new()
        .prefix("ccm-hardlinks-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let allowed = std::fs::canonicalize(dir.path()).unwrap().join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let sysctl = dir.path().join("protected_hardlinks");
    let sysctl_text = sysctl.display().to_string();
    let allowed_text = allowed.display().to_string();
    let mut args = BEHAVE_WRITE.to_vec();
    args.extend(["--allow-paths", &allowed_text]);
    let env = [("CCM_TEST_PROTECTED_HARDLINKS", sysctl_text.as_str())];
    let mut s = Session::start_with(&support::fixture().conda, &args, &env);
    let pid = allowed.join("pid");
    let arguments = json!({"pid_file": pid.display().to_string()});
    for off in ["0\n", ""] {
        std::fs::write(&sysctl, off).unwrap();
        let (_, message) = s.call_error("conda_behave", arguments.clone());
        assert!(
            message.contains("fs.protected_hardlinks is off"),
            "{message}"
        );
        assert!(!message.contains("--allow-paths"), "{message}");
        assert!(!pid.exists(), "the refused call ran");
    }
    std::fs::write(&sysctl, "1\n").unwrap();
    let result = s.call("conda_behave", arguments);
    assert_eq!(result["isError"], false, "{result}");
    assert!(pid.exists(), "{result}");
}

/// The entries of `tmp` that are a bounded write's own directory (`ccm-write-*`, not a
/// symlink).
fn write_dirs(tmp: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ccm-write-"))
                && p.is_dir()
                && !p.is_symlink()
        })
        .collect();
    found.sort();
    found
}

/// A server killed (SIGKILL) while it holds a bounded write leaves the write's own
/// directory (`TMPDIR`, private package cache) behind; the next server to start removes
/// it. A server started while the first still lives leaves it alone, and a symlink
/// planted under a dead server's name is not followed (what it leads to survives, the link
/// stays). `tool` with `arguments` is a bounded write under `args`.
fn killed_mid_call_leaves_nothing(conda: &Path, args: &[&str], tool: &str, arguments: Value) {
    let dir = tempfile::Builder::new()
        .prefix("ccm-scratch-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (tmp, hold, victim) = (base.join("tmp"), base.join("hold"), base.join("victim"));
    for sub in [&tmp, &hold, &victim] {
        std::fs::create_dir_all(sub).unwrap();
    }
    std::fs::write(victim.join("keep"), "").unwrap();
    let planted = tmp.join("ccm-write-1.1-planted");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let (tmp_text, hold_text) = (tmp.display().to_string(), hold.display().to_string());
    let env = [
        ("TMPDIR", tmp_text.as_str()),
        ("CCM_TEST_HOLD_BOUNDED_WRITES", hold_text.as_str()),
    ];
    let mut first = Session::start_with(conda, args, &env);
    let id = first.send("tools/call", json!({"name": tool, "arguments": arguments}));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !hold.join("held").exists() {
        assert!(Instant::now() < deadline, "{tool} was never held");
        if let Some(answer) = first.wait(id, Duration::from_millis(20)) {
            panic!("{tool} was answered, not held: {answer}");
        }
    }
    let held = write_dirs(&tmp);
    assert_eq!(held.len(), 1, "{held:?}");
    // Another server while the first lives: the first's directory stays.
    let mut second = Session::start_with(conda, &["--timeout", "30"], &env[..1]);
    second.tools();
    assert_eq!(
        write_dirs(&tmp),
        held,
        "a live server's directory was removed"
    );
    // SAFETY: signalling the server this test started.
    assert_eq!(unsafe { libc::kill(first.pid() as i32, libc::SIGKILL) }, 0);
    assert!(first.wait_exit(Duration::from_secs(30)).is_some());
    assert_eq!(
        write_dirs(&tmp),
        held,
        "nothing removes it but a new server"
    );
    let mut third = Session::start_with(conda, &["--timeout", "30"], &env[..1]);
    third.tools();
    assert_eq!(
        write_dirs(&tmp),
        Vec::<PathBuf>::new(),
        "a dead server's directory stayed"
    );
    assert!(planted.is_symlink(), "the planted symlink was removed");
    assert!(
        victim.join("keep").exists(),
        "the planted symlink was followed"
    );
    drop((second, third));
}

/// Offline, on the fixture: `conda behave --pid-file` under `--allow-paths`.
#[test]
fn a_killed_servers_write_directory_is_removed_by_the_next_server() {
    let allowed = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let allowed = std::fs::canonicalize(allowed.path()).unwrap();
    let allowed_text = allowed.display().to_string();
    let mut args = BEHAVE_WRITE.to_vec();
    args.extend(["--allow-paths", &allowed_text]);
    let pid = allowed.join("pid").display().to_string();
    killed_mid_call_leaves_nothing(
        &support::fixture().conda,
        &args,
        "conda_behave",
        json!({"pid_file": pid}),
    );
}

/// Real conda: `conda create -p <allowed>/env zlib` under `--allow-write --allow-paths`,
/// killed while held after its bound was made.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_killed_servers_write_directory_is_removed_by_the_next_server() {
    let conda = support::real_conda();
    let allowed = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let allowed = std::fs::canonicalize(allowed.path()).unwrap();
    let allowed_text = allowed.display().to_string();
    let args = [
        "--allow-write",
        "--allow-paths",
        &allowed_text,
        "--timeout",
        "300",
    ];
    let prefix = allowed.join("env").display().to_string();
    killed_mid_call_leaves_nothing(
        &conda,
        &args,
        "conda_create",
        json!({"prefix": prefix, "packages": ["zlib"], "offline": true}),
    );
}

/// What a bounded write whose targets are unknown is refused with
/// (`server::call::gates::UNJUDGED`).
const UNJUDGED: &str = "Operation's target environment could not be resolved, so it cannot be checked against the allowed directories (see --allow-paths). Nothing ran.";

/// Fail closed (issue 25): under `--allow-paths` alone a bounded write is judged with its
/// targets (where the bound lets it write, the hard-link gate, the registry it settles).
/// A target helper that fails — here it exits at once with no document, through a `.pth`
/// file planted in the fixture's site-packages after discovery that ends the `targets`
/// mode only — leaves them unknown: the write is refused, naming nothing, and nothing
/// runs. With the helper working again, the same write runs. An argv conda's context
/// refuses still reaches conda.
#[test]
fn a_bounded_write_whose_target_helper_fails_is_refused() {
    let fixture = support::build_fixture(&[]);
    let dir = tempfile::Builder::new()
        .prefix("ccm-unjudged-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let allowed = std::fs::canonicalize(dir.path()).unwrap().join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let allowed_text = allowed.display().to_string();
    let args = ["--allow-write", "--allow-paths", allowed_text.as_str()];
    let mut s = Session::start_with(&fixture.conda, &args, &[]);
    // An argv conda's context refuses (a name with a backslash, a path separator to
    // conda: the helper answers `unresolved`) is not refused here: it reaches conda, as
    // before (real conda refuses it there; the fixture's `install` checks no name).
    let reached = s.call(
        "conda_install",
        json!({"name": "bad\\name", "packages": ["zlib"], "offline": true, "yes": true}),
    );
    assert!(text(&reached).contains("conda command exited"), "{reached}");
    let pth = fixture.site_packages().join("zz-ccm-targets-fail.pth");
    let fail = "import sys; sys.argv[-1:] == ['targets'] and __import__('os')._exit(9)\n";
    std::fs::write(&pth, fail).unwrap();
    let prefix = allowed.join("env");
    let arguments = json!({"prefix": prefix.display().to_string(), "packages": ["zlib"],
        "offline": true, "yes": true});
    let (_, message) = s.call_error("conda_create", arguments.clone());
    assert_eq!(message, support::refused(UNJUDGED, "--allow-paths"));
    assert!(!prefix.exists(), "the refused write ran");
    std::fs::remove_file(&pth).unwrap();
    let result = s.call("conda_create", arguments);
    assert_eq!(result["isError"], false, "{result}");
}

/// What a path outside `--allow-paths`, or a target holding another's hard link, is
/// refused with (`server::call::gates::OUTSIDE_ALLOWED`).
const OUTSIDE_ALLOWED: &str =
    "Operation names a path outside the allowed directories (see --allow-paths)";

/// Issue 25, on real conda: the agent plants the server HOME's `~/.conda/environments.txt`
/// (read by conda's `list_all_known_prefixes` in the unsandboxed target helper; as root
/// conda reads every user's home instead, so a root server runs in a user namespace where
/// it is not root) as a 64 GiB sparse file or as 8 M lines of "/" in 16 MiB. The helper
/// read the first until it ran out of memory (4 GB, 67 s) and the second for minutes,
/// and its failure let the bounded write run with no target judged. Now a bounded
/// `install` into an environment of the project holding a hard link to a file outside is
/// refused by the hard-link gate, as on a clean HOME; with the link gone it runs (under
/// the sparse file conda's own run then fails: see below).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_planted_huge_registry_leaves_a_bounded_write_judged() {
    for planted in ["none", "sparse", "flood"] {
        planted_registry_case(planted);
    }
}

fn planted_registry_case(planted: &str) {
    let real = Real::new();
    let (project, outside) = (canonical(&real, "project"), canonical(&real, "outside"));
    let env = project.join("env");
    std::fs::create_dir_all(env.join("conda-meta")).unwrap();
    std::fs::write(env.join("conda-meta/history"), b"").unwrap();
    std::fs::write(outside.join("victim"), b"victim\n").unwrap();
    std::fs::hard_link(outside.join("victim"), env.join("linked")).unwrap();
    let registry = real.path("home/.conda/environments.txt");
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    match planted {
        "sparse" => std::fs::File::create(&registry)
            .unwrap()
            .set_len(64 << 30)
            .unwrap(),
        "flood" => std::fs::write(&registry, b"/\n".repeat(8 << 20)).unwrap(),
        _ => {}
    }
    // As root: in a user namespace of its own with no mapping, where the server's
    // `geteuid()` is 65534 (conda then reads the HOME's registry alone) while the kernel
    // still checks its file access as root's (the real conda's interpreter may live in
    // root's home).
    let mut command = if support::is_root() {
        let mut c = std::process::Command::new("unshare");
        c.args(["--user", "--"]).arg(env!("CARGO_BIN_EXE_ccm"));
        c
    } else {
        support::ccm()
    };
    let allowed = format!("{},{}", project.display(), plain_channel(&real).display());
    // conda reads the sparse registry until the memory limit stops it: 1 GiB (enough for
    // its runs, as in the sandbox's registry tests) gets there four times sooner than
    // the default 4 GiB.
    command
        .arg("--conda-exe")
        .arg(support::real_conda())
        .args(["--allow-write", "--allow-paths", &allowed])
        .args(["--memory-limit", "1GiB"])
        .envs(real.env())
        .env_remove("CONDA_EXE")
        .env_remove("CCM_LOG");
    let mut s = Session::spawn_initialized(command);
    let arguments = json!({"prefix": env.display().to_string(), "packages": ["bazpkg"],
        "channel": [plain_url(&real)], "override_channels": true, "yes": true});
    let (_, message) = s.call_error("conda_install", arguments.clone());
    assert_eq!(
        message,
        support::refused(OUTSIDE_ALLOWED, "--allow-paths"),
        "{planted}"
    );
    assert!(!env.join("share/bazpkg/data.txt").exists(), "{planted}");
    std::fs::remove_file(env.join("linked")).unwrap();
    // conda's own run reads the planted registry (see below): more than `call`'s minute
    // under load.
    let id = s.send(
        "tools/call",
        json!({"name": "conda_install", "arguments": arguments}),
    );
    let result = s.wait(id, Duration::from_secs(600)).expect("an answer")["result"].clone();
    let installed = env.join("share/bazpkg/data.txt").is_file();
    if planted == "sparse" {
        // conda's own run registers the environment: it reads the registry whole for that
        // (conda/core/envs_manager.py:65 `register_env`, through `yield_lines`), runs out
        // of memory and rolls the transaction back. The write fails; nothing of it stays.
        assert_eq!(result["isError"], true, "{planted}: {result}");
        assert!(text(&result).contains("memory"), "{planted}: {result}");
        assert!(!installed, "{planted}: {result}");
    } else {
        assert_eq!(result["isError"], false, "{planted}: {result}");
        assert!(installed, "{planted}: {result}");
    }
}
