//! The read-only sandbox end to end: children of read-only calls (and of calls admitted
//! by `--allow-exec` alone) cannot write outside the declared places.
//!
//! A writing command reaches the read-only path as an operator's wrong classification
//! would send it there: `--classify conda_behave=read` (the fixture's `behave --pid-file
//! PATH` writes PATH).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

use crate::kit::classify::{self, BEHAVE_READ};
use crate::kit::users::home;

fn conda() -> &'static Path {
    &support::fixture().conda
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
fn a_writing_command_classified_read_runs_sandboxed_and_cannot_write() {
    let home = home();
    let target = home.path().join("written-by-a-read");
    let arguments = json!({"pid_file": target});

    // Not classified, the default read-only server refuses the call outright.
    let mut plain = start(&[], &[], home.path());
    let (code, _) = plain.call_error("conda_behave", arguments.clone());
    assert_eq!(code, -32600);

    // Classified read: it runs, in the sandbox, and cannot write.
    let mut s = start(&BEHAVE_READ, &[], home.path());
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

    // The same call with the sandbox turned off writes: the sandbox stopped it.
    let mut off = start(
        &classify::with(&BEHAVE_READ, &["--no-sandbox"]),
        &[],
        home.path(),
    );
    assert_eq!(off.capabilities()["sandbox"]["state"], "disabled");
    let result = off.call("conda_behave", arguments);
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(target.exists());
}

#[test]
fn tmpdir_is_a_private_tmpfs() {
    let home = home();
    let mut s = start(&BEHAVE_READ, &[], home.path());
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
    // Undoing the read-only mounts first does not help.
    let undo = format!("mount -o remount,rw / ; mount -o remount,bind,rw / ; {script}");
    let result = s.call("conda_run", json!({"executable_call": ["sh", "-c", undo]}));
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

/// The audit log in a directory the sandbox overlays (a package cache's repodata cache):
/// a sandboxed program that appends to it (without naming it in the argv) writes the
/// call's copy, never the log.
#[test]
fn the_audit_log_in_a_cache_is_never_written_by_a_child() {
    let home = home();
    let cache = home.path().join(".conda/pkgs/cache");
    std::fs::create_dir_all(&cache).unwrap();
    let log = cache.join("audit.jsonl");
    let mut s = start(
        &["--allow-exec", "--audit-log", log.to_str().unwrap()],
        &[],
        home.path(),
    );
    // The line written ("FORGED") does not appear in the argv the log records.
    let script = format!(
        "cd {} && printf '%s%s\\n' FORG ED >> audit.jsonl && cat audit.jsonl",
        cache.display()
    );
    let result = s.call(
        "conda_run",
        json!({"executable_call": ["sh", "-c", script]}),
    );
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(
        structured(&result)["stdout"]
            .as_str()
            .unwrap()
            .ends_with("FORGED\n"),
        "{result}"
    );
    drop(s);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("FORGED"), "{text}");
    assert!(text.contains("conda_run"), "{text}");
    // Without the sandbox the same call appends to the log (the check above can fail).
    let mut off = start(
        &[
            "--allow-exec",
            "--no-sandbox",
            "--audit-log",
            log.to_str().unwrap(),
        ],
        &[],
        home.path(),
    );
    off.call(
        "conda_run",
        json!({"executable_call": ["sh", "-c", script]}),
    );
    drop(off);
    assert!(std::fs::read_to_string(&log).unwrap().contains("FORGED"));
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
    // The base's conda-meta and the envs directory (which holds t1) are overlays, or lie
    // in one: the fixture has no package cache directory yet, so the root prefix (where
    // conda would create `pkgs`) is one.
    let caps = inside.capabilities();
    let paths = writable_paths(&caps);
    let prefix = &support::fixture().prefix;
    for dir in [prefix.join("conda-meta"), prefix.join("envs")] {
        assert!(
            paths
                .iter()
                .any(|(path, kind)| kind == "overlay" && dir.starts_with(path)),
            "{} in {paths:?}",
            dir.display()
        );
    }
    assert!(!prefix.join("pkgs").exists());
}

/// A server that is not root gets a user namespace too. When the tests run as root, the
/// server runs as `nobody` (through `setpriv`); otherwise as the current user.
#[test]
fn an_unprivileged_server_gets_the_same_sandbox() {
    let root = support::is_root();
    let unprivileged = crate::kit::nobody::Unprivileged::new();
    let home = unprivileged.home();
    let target = home.join("written-by-a-read");
    let server = |args: &[&str]| unprivileged.server(&classify::with(&BEHAVE_READ, args));
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
    // conda would create its package cache in ~/.conda (the prefix is not this user's, and
    // there is no ~/.conda yet): in the sandbox it can, for the call only, while the rest
    // of HOME stays read-only (above).
    let created = home.join(".conda/pkgs");
    let result = s.call("conda_behave", json!({"pid_file": created}));
    if root {
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    }
    assert!(!home.join(".conda").exists());
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

/// Every file, directory and symlink under `root` with a digest of its content (an absent
/// root is an empty map).
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    use sha2::{Digest, Sha256};
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let key = path.strip_prefix(root).unwrap().to_path_buf();
        let value = if meta.is_symlink() {
            format!("link {:?}", std::fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap().flatten() {
                stack.push(entry.path());
            }
            "dir".to_owned()
        } else {
            let bytes = std::fs::read(&path).unwrap_or_default();
            format!("{:x}", Sha256::digest(&bytes))
        };
        out.insert(key, value);
    }
    out
}

/// The read-only tools of a real conda through the server with the sandbox: they succeed
/// and change nothing in HOME (.condarc and the working directory included), the prefix's
/// conda-meta or its rc file. `conda config` without `--show` (which rewrites the user's
/// rc file) is classified read (`--classify conda_config=read`) to show the sandbox stopping a real
/// conda write; the same call without the sandbox writes.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_read_only_tools_run_sandboxed_and_write_nothing() {
    let conda = support::real_conda();
    let prefix = support::real_discovery()
        .prefix
        .clone()
        .expect("the real conda's prefix");
    let home = home();
    let cwd = home.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::write(cwd.join("environment.yml"), "name: x\n").unwrap();
    let start_in = |args: &[&str]| {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(&conda)
            .args(args)
            .current_dir(&cwd)
            .env("HOME", home.path())
            .args(["--classify", "conda_config=read"]);
        Session::spawn_initialized(command)
    };
    // (--list-all: every form listed, whatever the classification.)
    let mut s = start_in(&["--list-all"]);
    assert_eq!(s.capabilities()["sandbox"]["state"], "active");
    let watched = || {
        (
            tree(home.path()),
            tree(&prefix.join("conda-meta")),
            tree(&prefix.join(".condarc")),
        )
    };
    let before = watched();
    for (tool, arguments) in [
        ("conda_info", json!({"json": true})),
        ("conda_info", json!({})),
        ("conda_list", json!({"json": true})),
        ("conda_config", json!({"show": []})),
        ("conda_config", json!({"show": [], "json": true})),
        ("conda_env_list", json!({"json": true})),
    ] {
        let result = s.call(tool, arguments.clone());
        assert_eq!(
            structured(&result)["exit_code"],
            0,
            "{tool} {arguments}: {result}"
        );
    }
    // conda's own write of the user's rc file, stopped.
    let rc = home.path().join(".condarc");
    s.call("conda_config", json!({}));
    assert!(!rc.exists(), "conda config wrote {rc:?} inside the sandbox");
    assert_eq!(before, watched(), "a read-only call changed the filesystem");
    // Without the sandbox the same call writes it: the check above can fail.
    let mut off = start_in(&["--no-sandbox", "--list-all"]);
    off.call("conda_config", json!({}));
    assert!(
        rc.exists(),
        "conda config did not write {rc:?} without the sandbox"
    );
}

/// The same read-only documents from a real conda inside and outside the sandbox
/// (`tmp_dir` aside, and `env_vars` compared as a map).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_read_only_tools_print_the_same_inside_and_outside() {
    let conda = support::real_conda();
    let home = home();
    let env = [("HOME", home.path().to_str().unwrap())];
    let mut inside = Session::start_with(&conda, &[], &env);
    let mut outside = Session::start_with(&conda, &["--no-sandbox"], &env);
    let documents = |s: &mut Session| {
        let mut docs = read_only_documents(s);
        let info = docs.get_mut("info").unwrap().as_object_mut().unwrap();
        assert!(info.remove("tmp_dir").is_some());
        docs
    };
    let text = |s: &mut Session, tool: &str, arguments: Value| {
        let result = s.call(tool, arguments);
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
        structured(&result)["stdout"].as_str().unwrap().to_owned()
    };
    // As root, conda lists the environments of every home's registry, which the tests
    // running beside this one write: the sandbox's reading is compared with readings
    // outside it just before and just after, and a world that moved in between (the two
    // outside readings differ) is read again.
    let mut compared = 0;
    for attempt in 1..=5 {
        let before = documents(&mut outside);
        let a = documents(&mut inside);
        let after = documents(&mut outside);
        if before != after {
            eprintln!("attempt {attempt}: the environments changed while they were read");
            continue;
        }
        assert_eq!(a, after);
        compared += 1;
        break;
    }
    for (tool, arguments) in [
        ("conda_list", json!({})),
        ("conda_config", json!({"show": []})),
        ("conda_env_list", json!({})),
    ] {
        for attempt in 1..=5 {
            let before = text(&mut outside, tool, arguments.clone());
            let a = text(&mut inside, tool, arguments.clone());
            let after = text(&mut outside, tool, arguments.clone());
            if before != after {
                eprintln!("attempt {attempt}: {tool} changed while it was read");
                continue;
            }
            assert_eq!(a, after, "{tool} {arguments}");
            compared += 1;
            break;
        }
    }
    assert_eq!(
        compared, 4,
        "the world outside never held still for a comparison"
    );
}

/// Attack 8: the sandbox reads `~/.conda/environments.txt` of the server's home (and, as
/// root, of every user's) for each read-only call. Planted as a FIFO it held the call's
/// thread for good (no `--timeout` applies before anything runs); as a huge file it was
/// read whole. Either reads as no entries: the read-only call answers, again.
#[test]
fn a_registry_planted_as_a_fifo_or_a_huge_file_holds_no_call() {
    for planted in ["fifo", "huge"] {
        let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let registry = home.path().join(".conda/environments.txt");
        std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
        if planted == "fifo" {
            rustix::fs::mkfifoat(rustix::fs::CWD, &registry, 0o644.into()).unwrap();
        } else {
            std::fs::File::create(&registry)
                .unwrap()
                .set_len(1 << 30)
                .unwrap();
        }
        let home_dir = home.path().to_str().unwrap();
        let mut s = Session::start_with(conda(), &[], &[("HOME", home_dir)]);
        assert!(s.sandboxed(), "this claim is about the read-only sandbox");
        for _ in 0..3 {
            let result = s.call("conda_info", json!({}));
            assert_ne!(result["isError"], true, "{planted}: {result}");
        }
    }
}

/// Attack 9 (A9-2, A9-3) and 10 (A10-1, A10-4): as root, conda reads the registry of
/// environments of every home of the password database itself, unbounded
/// (`list_all_known_prefixes`): another local user's sparse 64 GiB
/// `~/.conda/environments.txt` made each read-only call fail at the memory limit
/// (`CondaMemoryError`), 8 million lines of `/` held it for minutes, `~/.conda` as a
/// symlink to such a place did the same, and renaming new links to a sparse file over the
/// registry in a loop detached a copy attached over the file. Each sandboxed child reads
/// the server's bounded copy in its place: the calls answer, and an environment a
/// registry names is still listed (the server's own `~/.conda` symlinked elsewhere, as
/// home directories often have it, included), and attack 11's homes that were left out
/// (a home that is a mount point, one behind 70 other homes), and a user the password
/// database gets from another source than `/etc/passwd` (as LDAP's or sssd's; here
/// `extrausers`). Attack 13 (A13-1): conda reads files inside each environment it lists
/// (`conda-meta/created_at`), and another user's own environment with a FIFO there held
/// every `conda info` until its timeout: another user's environments are listed only
/// where root alone may change them. Attack 14 (A14-1): a home that is a symlink, and a
/// home root made whose `~/.conda` is its user's, got the copy attached over the file,
/// which the rename loop detached: both are overlaid now. The users exist in a private `/etc/passwd` (and `nsswitch.conf`)
/// of the server's own mount namespace. Without the sandbox the sparse file fails the
/// call (the check can fail).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_planted_registry_is_read_as_the_servers_bounded_copy() {
    use std::os::unix::fs::PermissionsExt;
    assert!(
        support::is_root(),
        "needs root: another user's home in /etc/passwd"
    );
    let conda = support::real_conda();
    for planted in [
        "sparse",
        "lines",
        "lines-cr",
        "linked",
        "renamed",
        "renamed-mounted",
        "renamed-crowded",
        "root-owned",
        "own-linked",
        "nss",
        "fifo",
        "renamed-root-home",
        "renamed-linked-home",
    ] {
        let (home, other) = (home(), home());
        // The planter's home is theirs (a home root owns gets the copy attached over the
        // file), readable by a root child without capabilities.
        if !matches!(planted, "root-owned" | "renamed-root-home") {
            std::os::unix::fs::chown(other.path(), Some(4242), Some(4242)).unwrap();
        }
        std::fs::set_permissions(other.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let holder = if planted == "own-linked" {
            home.path()
        } else {
            other.path()
        };
        let dot_conda = holder.join(".conda");
        let elsewhere = holder.join("elsewhere");
        let registry_dir = if planted.ends_with("linked") {
            std::fs::create_dir_all(&elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &dot_conda).unwrap();
            elsewhere
        } else {
            std::fs::create_dir_all(&dot_conda).unwrap();
            if planted == "renamed-root-home" {
                // A home root made, `~/.conda` handed over to its user (attack 14 A14-1).
                std::os::unix::fs::chown(&dot_conda, Some(4242), Some(4242)).unwrap();
            }
            dot_conda
        };
        // An environment outside every envs directory, known only from the registry, in
        // directories only root may change (another user's own environments are not
        // listed: conda reads files inside each, attack 13 A13-1).
        let held = tempfile::tempdir().unwrap();
        let listed = held.path().join("listed");
        std::fs::create_dir_all(listed.join("conda-meta")).unwrap();
        std::fs::write(listed.join("conda-meta/history"), "").unwrap();
        let registry = registry_dir.join("environments.txt");
        let sparse = |path: &Path| {
            let file = std::fs::File::create(path).unwrap();
            file.set_len(64 << 30).unwrap();
        };
        match planted {
            "lines" | "lines-cr" => {
                // (conda ends a line at `\r` too)
                let end: &[u8] = if planted == "lines" { b"\n" } else { b"\r" };
                let mut text = listed.as_os_str().as_encoded_bytes().to_vec();
                text.extend(end);
                text.extend([b"/", end].concat().repeat(8_000_000));
                std::fs::write(&registry, text).unwrap();
            }
            "own-linked" => std::fs::write(&registry, format!("{}\n", listed.display())).unwrap(),
            "fifo" => {
                // The planter's own environment, whose `conda-meta/created_at` (read by
                // `conda info` and `env list --json` for every environment listed) is a
                // FIFO: it held each such call until `--timeout`.
                let theirs = other.path().join("theirs");
                std::fs::create_dir_all(theirs.join("conda-meta")).unwrap();
                std::fs::write(theirs.join("conda-meta/history"), "").unwrap();
                let created = theirs.join("conda-meta/created_at");
                rustix::fs::mkfifoat(rustix::fs::CWD, &created, 0o644.into()).unwrap();
                std::fs::write(&registry, format!("{}\n", theirs.display())).unwrap();
            }
            _ => sparse(&registry),
        }
        let passwd = home.path().join("passwd");
        let mut users = String::new();
        for line in std::fs::read_to_string("/etc/passwd").unwrap().lines() {
            // root's home is the server's (its own registry then is one conda reads).
            match line.strip_prefix("root:") {
                Some(_) if planted == "own-linked" => {
                    users.push_str(&format!("root:x:0:0::{}:/bin/sh\n", home.path().display()))
                }
                _ => users.push_str(&format!("{line}\n")),
            }
        }
        // Seventy homes of other users who never used conda come first: the homes with a
        // `~/.conda` are overlaid first.
        let crowd = crate::kit::users::home();
        if planted == "renamed-crowded" {
            for n in 0..70u32 {
                let dir = crowd.path().join(format!("u{n}"));
                std::fs::create_dir(&dir).unwrap();
                std::os::unix::fs::chown(&dir, Some(5000 + n), Some(5000 + n)).unwrap();
                users.push_str(&format!(
                    "u{n}:x:{}:{}::{}:/bin/sh\n",
                    5000 + n,
                    5000 + n,
                    dir.display()
                ));
            }
        }
        // A home that is a symlink (homes moved to another disk), in root's directory, to
        // the user's own (attack 14 A14-1).
        let linked_home = held.path().join("linked-home");
        let passwd_home = if planted == "renamed-linked-home" {
            std::os::unix::fs::symlink(other.path(), &linked_home).unwrap();
            linked_home.as_path()
        } else {
            other.path()
        };
        let other_user = format!("other:x:4242:4242::{}:/bin/sh\n", passwd_home.display());
        // A user of another source of the password database (as LDAP or sssd users are),
        // not of `/etc/passwd`: `extrausers` (libnss-extrausers), named by a private
        // `/etc/nsswitch.conf`.
        let nss = home.path().join("nss");
        if planted == "nss" {
            assert!(
                Path::new("/var/lib/extrausers").is_dir(),
                "needs libnss-extrausers (apt-get install libnss-extrausers)"
            );
            std::fs::create_dir_all(nss.join("extrausers")).unwrap();
            std::fs::write(
                nss.join("nsswitch.conf"),
                "passwd: files extrausers\ngroup: files\nshadow: files\nhosts: files\n",
            )
            .unwrap();
            std::fs::write(nss.join("extrausers/passwd"), &other_user).unwrap();
            std::fs::write(nss.join("extrausers/group"), "").unwrap();
            std::fs::write(nss.join("extrausers/shadow"), "").unwrap();
        } else {
            users.push_str(&other_user);
        }
        std::fs::write(&passwd, users).unwrap();
        // The planter renames a new link to one of two sparse files over the registry, again
        // and again, while the calls run.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let renamer = planted.starts_with("renamed").then(|| {
            let (a, b, spare) = (
                registry_dir.join("a"),
                registry_dir.join("b"),
                registry_dir.join("spare"),
            );
            sparse(&a);
            sparse(&b);
            let (stop, registry) = (stop.clone(), registry.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for source in [&a, &b] {
                        let _ = std::fs::remove_file(&spare);
                        if std::fs::hard_link(source, &spare).is_ok() {
                            let _ = std::fs::rename(&spare, &registry);
                        }
                    }
                }
            })
        });
        let start = |extra: &[&str]| {
            let mut command = private_passwd_server(&passwd, &conda, home.path());
            command.args(extra);
            // The planter's home a mount point of its own (a per-user volume), in the
            // server's namespace.
            let own_mount = match planted {
                "renamed-mounted" => other.path().as_os_str(),
                _ => std::ffi::OsStr::new(""),
            };
            command.env("MOUNT_HOME", own_mount);
            let nss = if planted == "nss" {
                nss.as_os_str()
            } else {
                std::ffi::OsStr::new("")
            };
            command.env("NSS", nss);
            Session::spawn_initialized(command)
        };
        let mut s = start(&[]);
        assert!(s.sandboxed(), "this claim is about the read-only sandbox");
        let calls = if planted.starts_with("renamed") { 3 } else { 1 };
        for _ in 0..calls {
            let info = s.call("conda_info", json!({}));
            assert_eq!(structured(&info)["exit_code"], 0, "{planted}: {info}");
            let list = s.call("conda_env_list", json!({"json": true}));
            assert_eq!(structured(&list)["exit_code"], 0, "{planted}: {list}");
            let envs = &structured(&list)["parsed_json"]["envs"];
            let named = envs
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e == listed.to_str().unwrap());
            let expected = matches!(planted, "lines" | "lines-cr" | "own-linked");
            assert_eq!(named, expected, "{planted}: {envs}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(renamer) = renamer {
            renamer.join().unwrap();
        }
        if planted == "nss" {
            // conda itself lists the user: unsandboxed, their registry fails the call.
            let failed = start(&["--no-sandbox"]).call("conda_info", json!({}));
            assert_ne!(structured(&failed)["exit_code"], 0, "{failed}");
        }
        if planted == "sparse" {
            // Warm calls too (forked from the zygote into the call's namespace).
            let mut warm = start(&["--warm"]);
            crate::warm::wait_ready(&mut warm);
            let info = warm.call("conda_info", json!({}));
            assert_eq!(info["_meta"]["conda-cli-mcp/warm"], true, "{info}");
            assert_eq!(structured(&info)["exit_code"], 0, "warm: {info}");
            let failed = start(&["--no-sandbox"]).call("conda_info", json!({}));
            assert_ne!(structured(&failed)["exit_code"], 0, "{failed}");
        }
    }
}

/// Attack 15 (A15-2): a home inside another user's home (a lab account's home that holds
/// its members' homes). The outer home's overlay was mounted after the inner home's and
/// covered it with the raw directory, so conda read the inner user's own sparse 64 GiB
/// registry and each listing call failed at the memory limit. Outer homes are overlaid
/// first now, and the inner home's overlay lands on the outer one. The users exist in a
/// private `/etc/passwd` of the server's own mount namespace.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_home_inside_another_home_is_read_as_the_servers_copy() {
    use std::os::unix::fs::PermissionsExt;
    assert!(
        support::is_root(),
        "needs root: two users' homes in /etc/passwd"
    );
    let conda = support::real_conda();
    let (server_home, nest) = (home(), home());
    let outer = nest.path().join("lab");
    let inner = outer.join("member");
    std::fs::create_dir_all(inner.join(".conda")).unwrap();
    for (dir, uid) in [
        (&outer, 4243),
        (&inner, 4242),
        (&inner.join(".conda"), 4242),
    ] {
        std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(nest.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let registry = std::fs::File::create(inner.join(".conda/environments.txt")).unwrap();
    registry.set_len(64 << 30).unwrap();
    let mut users = std::fs::read_to_string("/etc/passwd").unwrap();
    users.push_str(&format!(
        "member:x:4242:4242::{}:/bin/sh\n",
        inner.display()
    ));
    users.push_str(&format!("lab:x:4243:4243::{}:/bin/sh\n", outer.display()));
    let passwd = server_home.path().join("passwd");
    std::fs::write(&passwd, users).unwrap();
    let command = private_passwd_server(&passwd, &conda, server_home.path());
    let mut s = Session::spawn_initialized(command);
    assert!(s.sandboxed(), "this claim is about the read-only sandbox");
    for tool in ["conda_info", "conda_env_list"] {
        let result = s.call(tool, json!({"json": true}));
        assert_eq!(structured(&result)["exit_code"], 0, "{tool}: {result}");
    }
}

/// A root server for `conda` (memory limit 1 GiB, timeout 120 s) under `home`, in a mount
/// namespace of its own whose `/etc/passwd` is `passwd`; with `MOUNT_HOME` set, that
/// directory made a mount point of its own, and with `NSS` set, `$NSS/nsswitch.conf` and
/// `$NSS/extrausers` in the places of `/etc/nsswitch.conf` and `/var/lib/extrausers`.
fn private_passwd_server(passwd: &Path, conda: &Path, home: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("unshare");
    command
        .args(["-m", "--propagation", "private", "--", "sh", "-c"])
        .arg(
            r#"mount --bind "$0" /etc/passwd &&
            { [ -z "$MOUNT_HOME" ] || mount --bind "$MOUNT_HOME" "$MOUNT_HOME"; } &&
            { [ -z "$NSS" ] || { mount --bind "$NSS/nsswitch.conf" /etc/nsswitch.conf &&
                mount --bind "$NSS/extrausers" /var/lib/extrausers; }; } &&
            exec "$@""#,
        )
        .arg(passwd)
        .arg(env!("CARGO_BIN_EXE_ccm"))
        .env_remove("CONDA_EXE")
        .env_remove("CCM_LOG")
        .env_remove("MOUNT_HOME")
        .env_remove("NSS")
        .arg("--conda-exe")
        .arg(conda)
        .args(["--memory-limit", "1GiB", "--timeout", "120"])
        .env("HOME", home);
    command
}
