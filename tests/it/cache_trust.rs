//! Caches by trust domain, on a real conda: nothing a sandboxed call (read-only, or exec
//! without write) writes to conda's caches is read by a later write call, and nothing it
//! leaves there is followed by an unsandboxed conda.
//!
//! Each test plays one attack from a sandboxed call, then has the operator run an
//! `--allow-write` create of `opkg` from the operator's own channel (served over http on
//! loopback, as a real channel is: conda trusts a cached http index until its
//! `Cache-Control: max-age` runs out, a `file://` one never), and checks that the operator's
//! package (1.0) was installed, not the attacker's (9.9, whose post-link would run), that
//! no cache directory holds a symlink or the attacker's index, and that nothing else in the
//! test's world changed (every file's content, mode and link target hashed around it).
//! Code runs in a sandboxed child through `--classify conda_run=read` (an operator's wrong
//! classification sends `conda_run` through the read-only path on a server that may also
//! write).
//! `tests/fixtures/cache_attack.py` serves channels, finds cache-key collisions and plants.
//! The last test: sandboxed calls work on a conda that has no package cache directory yet.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

/// A server that may write and run programs, with `conda_run` classified read.
const FLAGS: [&str; 5] = [
    "--allow-write",
    "--allow-exec",
    "--list-all",
    "--classify",
    "conda_run=read",
];

/// The operator's world: HOME (and the notices cache in it), two package cache
/// directories in use, the served channels, files an attacker would like rewritten.
struct World {
    dir: tempfile::TempDir,
    server: Option<Child>,
    base: String,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

fn attack_script() -> PathBuf {
    support::repo().join("tests/fixtures/cache_attack.py")
}

impl World {
    /// The world, its http server started (every answer with this `max-age`, if any).
    fn new(max_age: Option<u32>) -> World {
        let dir = tempfile::Builder::new()
            .prefix("ccm-cache-trust-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let mut world = World {
            dir,
            server: None,
            base: String::new(),
        };
        for sub in ["home/.cache/conda/notices", "victims", "served"] {
            std::fs::create_dir_all(world.path(sub)).unwrap();
        }
        // Package caches that have been used: `urls.txt` and the repodata cache exist.
        for pkgs in ["pkgs1", "pkgs2"] {
            std::fs::create_dir_all(world.path(pkgs).join("cache")).unwrap();
            std::fs::write(world.path(pkgs).join("urls.txt"), "").unwrap();
        }
        let mut command = Command::new(support::python());
        command
            .arg(attack_script())
            .arg("serve")
            .arg(world.path("served"))
            .args(max_age.map(|a| a.to_string()))
            .stdout(Stdio::piped());
        let mut server = command.spawn().expect("start the channel server");
        let stdout = server.stdout.take().unwrap();
        // Kept first, so that a failure below still ends it (`Drop`).
        world.server = Some(server);
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().expect("the server's port");
        world.base = format!("http://127.0.0.1:{port}");
        world
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Serve a channel `name` holding `opkg=<version>`; its URL.
    fn channel(&self, name: &str, version: &str) -> String {
        let out = Command::new(support::python())
            .arg(support::repo().join("tests/fixtures/make_channel.py"))
            .arg(self.path("served").join(name))
            .arg(format!("opkg={version}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        format!("{}/{name}", self.base)
    }

    /// `channel`'s noarch index, made to send conda to `packages` for its packages
    /// (repodata version 2, `base_url`: CEP-15), at `into`.
    fn redirected_index(&self, channel: &str, packages: &str, into: &Path) {
        let name = channel.rsplit('/').next().unwrap();
        let path = self.path("served").join(name).join("noarch/repodata.json");
        let mut index: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        index["repodata_version"] = json!(2);
        index["info"]["base_url"] = json!(format!("{packages}/noarch/"));
        std::fs::write(into, index.to_string()).unwrap();
    }

    /// A server on the real conda with this world's HOME and package caches.
    fn server(&self, flags: &[&str], env: &[(&str, &str)]) -> Session {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(support::real_conda())
            .args(["--timeout", "600"])
            .args(flags)
            .env("HOME", self.path("home"))
            .env(
                "CONDA_PKGS_DIRS",
                format!(
                    "{},{}",
                    self.path("pkgs1").display(),
                    self.path("pkgs2").display()
                ),
            )
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CONDARC")
            .envs(env.iter().copied());
        Session::spawn_initialized(command)
    }

    /// The repodata caches and the notices cache.
    fn caches(&self) -> [PathBuf; 3] {
        [
            self.path("pkgs1/cache"),
            self.path("pkgs2/cache"),
            self.path("home/.cache/conda/notices"),
        ]
    }

    /// Everything in the world but what the write legitimately writes (the environment,
    /// the package caches, conda's registry and notices cache, which `caches_hold_only`
    /// checks), and the real conda's own state.
    fn watched(&self) -> BTreeMap<PathBuf, String> {
        let skipped = [
            self.path("env"),
            self.path("pkgs1"),
            self.path("pkgs2"),
            self.path("home/.conda"),
            self.path("home/.cache/conda/notices"),
        ];
        let mut out = BTreeMap::new();
        tree(self.dir.path(), &skipped, &mut out);
        let prefix = support::real_discovery().prefix.clone().unwrap();
        for sub in ["conda-meta", ".condarc", "pkgs", "envs"] {
            tree(&prefix.join(sub), &[], &mut out);
        }
        out
    }

    /// No cache directory holds a symlink or anything naming `marker`.
    fn caches_hold_only(&self, marker: &str) {
        for dir in self.caches() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                assert!(
                    !meta.is_symlink(),
                    "a symlink was left in {}",
                    path.display()
                );
                if meta.is_file() {
                    let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                    assert!(!text.contains(marker), "{} holds {marker}", path.display());
                }
            }
        }
    }

    /// The operator's write: create an environment with `opkg` from `channel`; the name of
    /// what was installed.
    fn create(&self, s: &mut Session, channel: &str) -> String {
        let env = self.path("env");
        let id = s.send(
            "tools/call",
            json!({"name": "conda_create", "arguments": {
                "prefix": env, "yes": true, "override_channels": true,
                "channel": [channel], "packages": ["opkg"]}}),
        );
        let answer = s
            .wait(id, Duration::from_secs(600))
            .expect("the create answers");
        let result = &answer["result"];
        assert_eq!(structured(result)["exit_code"], 0, "{answer}");
        let names: Vec<String> = std::fs::read_dir(env.join("conda-meta"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("opkg-"))
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        names[0].trim_end_matches(".json").to_owned()
    }

    /// Run `cache_attack.py ARGS` under the real conda's interpreter in a sandboxed child;
    /// its stdout.
    fn sandboxed(&self, s: &mut Session, args: &[String]) -> String {
        let prefix = support::real_discovery().prefix.clone().unwrap();
        let mut call = vec![
            prefix.join("bin/python").display().to_string(),
            attack_script().display().to_string(),
        ];
        call.extend_from_slice(args);
        let result = s.call(
            "conda_run",
            json!({"prefix": prefix, "executable_call": call}),
        );
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
        structured(&result)["stdout"].as_str().unwrap().to_owned()
    }
}

/// Every file, directory and symlink under `root` (except `skipped`): content digest,
/// mode, link target.
fn tree(root: &Path, skipped: &[PathBuf], out: &mut BTreeMap<PathBuf, String>) {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    if skipped.iter().any(|s| s == root) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(root) else {
        return;
    };
    let mode = meta.permissions().mode();
    let value = if meta.is_symlink() {
        format!("link {:?}", std::fs::read_link(root).unwrap())
    } else if meta.is_dir() {
        let mut names: Vec<PathBuf> = std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        for name in &names {
            tree(name, skipped, out);
        }
        format!("dir {mode:o}")
    } else {
        let bytes = std::fs::read(root).unwrap_or_default();
        format!("file {mode:o} {:x}", Sha256::digest(&bytes))
    };
    out.insert(root.to_path_buf(), value);
}

/// The changed entries between two snapshots.
fn changed(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut keys: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{}: {:?} -> {:?}", k.display(), before.get(k), after.get(k)))
        .collect()
}

/// (a) Code in a sandboxed child writes an index for the operator's channel, under its
/// cache keys (`repodata.json`, `current_repodata.json`), in every repodata cache, trusted
/// for years (the index sends conda to the
/// attacker's package). The operator's next write installs the operator's package.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_repodata_written_in_the_sandbox_is_not_trusted_by_a_write() {
    let world = World::new(None);
    let operator = world.channel("chan", "1.0");
    let attacker = world.channel("evil", "9.9");
    let planted = world.path("planted.json");
    world.redirected_index(&attacker, &attacker, &planted);
    let mut s = world.server(&FLAGS, &[]);
    let before = world.watched();
    let mut args = vec![
        "plant".to_owned(),
        operator.clone(),
        planted.display().to_string(),
    ];
    args.extend(world.caches()[..2].iter().map(|c| c.display().to_string()));
    let out = world.sandboxed(&mut s, &args);
    // The code ran: it wrote (where its writes went is the sandbox's business).
    assert_eq!(out.matches("planted ").count(), 4, "{out}");
    assert_eq!(world.create(&mut s, &operator), "opkg-1.0-0");
    world.caches_hold_only("opkg-9.9");
    assert_eq!(changed(&before, &world.watched()), Vec::<String>::new());
}

/// (b) Without any code: a read-only `conda_search` of an attacker's http channel whose
/// URL has the operator channel's cache key, answered with a long `max-age`. The
/// operator's next write installs the operator's package.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_colliding_channel_searched_read_only_is_not_trusted_by_a_write() {
    let world = World::new(Some(86400));
    let out = Command::new(support::python())
        .arg(attack_script())
        .args(["collide", &world.base])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let names = String::from_utf8(out.stdout).unwrap();
    let (op, ev) = names.trim().split_once(' ').expect("two names");
    let operator = world.channel(op, "1.0");
    let attacker = world.channel(ev, "9.9");
    let index = world.path("served").join(ev).join("noarch/repodata.json");
    world.redirected_index(&attacker, &attacker, &index);
    let mut s = world.server(&["--allow-write", "--list-all"], &[]);
    let before = world.watched();
    let result = s.call(
        "conda_search",
        json!({"channel": [attacker], "override_channels": true, "match_spec": "opkg"}),
    );
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert!(
        structured(&result)["stdout"]
            .as_str()
            .unwrap()
            .contains("9.9"),
        "{result}"
    );
    assert_eq!(world.create(&mut s, &operator), "opkg-1.0-0");
    world.caches_hold_only("opkg-9.9");
    assert_eq!(changed(&before, &world.watched()), Vec::<String>::new());
}

/// (c) Code in a sandboxed child plants symlinks where conda opens, truncates and
/// rewrites: each repodata cache's state and index file for the operator's channel, the
/// notices cache's `notices.cache` and the channel's notices response. The operator's next
/// write follows none of them.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_symlinks_left_in_the_caches_are_not_followed_by_a_write() {
    let world = World::new(None);
    let operator = world.channel("chan", "1.0");
    // The channel has a notice, so the write fetches notices and caches the response.
    std::fs::write(
        world.path("served/chan/notices.json"),
        json!({"notices": [{"id": "n1", "message": "operator notice", "level": "info",
            "created_at": "2020-01-01T00:00:00+00:00",
            "expired_at": "2099-01-01T00:00:00+00:00", "interval": 1}]})
        .to_string(),
    )
    .unwrap();
    let victims = world.path("victims");
    for name in [
        "state0",
        "repodata0",
        "state1",
        "repodata1",
        "notices-viewed",
    ] {
        std::fs::write(victims.join(name), format!("precious {name}\n")).unwrap();
    }
    // A notices response conda can read (so that it goes on to rewrite it).
    std::fs::write(victims.join("notices-response"), "{\"notices\": []}").unwrap();
    // Old enough for the notices cache to count as expired (conda then fetches notices).
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800);
    for entry in std::fs::read_dir(&victims).unwrap().flatten() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.path())
            .unwrap();
        file.set_modified(old).unwrap();
    }
    let mut s = world.server(&FLAGS, &[]);
    let before = world.watched();
    let [cache1, cache2, notices] = world.caches().map(|c| c.display().to_string());
    let args = [
        "links".to_owned(),
        operator.clone(),
        victims.display().to_string(),
        cache1,
        cache2,
        "--".to_owned(),
        notices,
    ];
    let out = world.sandboxed(&mut s, &args);
    assert_eq!(out.matches("linked ").count(), 6, "{out}");
    assert_eq!(world.create(&mut s, &operator), "opkg-1.0-0");
    assert_eq!(changed(&before, &world.watched()), Vec::<String>::new());
    world.caches_hold_only("precious");
}

/// A session whose client answers elicitations (revision 2025-11-25).
fn eliciting(command: Command) -> Session {
    let mut session = Session::spawn(command);
    session.initialize = session.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
               "clientInfo": {"name": "ccm-cache-trust", "version": "1"}}),
    );
    session.notify("notifications/initialized", json!({}));
    session
}

/// Sandboxed calls on a conda that has no package cache directory yet (no `<root>/pkgs`,
/// no `~/.conda`): a read-only search works, cold and `--warm`, and so does the dry-run
/// preview of `--confirm-writes` (the question lists the plan), and neither creates
/// anything in the operator's tree.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_sandboxed_calls_work_without_a_package_cache_directory() {
    let dir = tempfile::Builder::new()
        .prefix("ccm-no-pkgs-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let prefix = support::real_discovery().prefix.clone().unwrap();
    let conda = crate::kit::prefix::copy(&prefix, &dir.path().join("conda"));
    let root = dir.path().join("conda");
    let _ = std::fs::remove_dir_all(root.join("pkgs"));
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let channel = dir.path().join("chan");
    let made = Command::new(support::python())
        .arg(support::repo().join("tests/fixtures/make_channel.py"))
        .arg(&channel)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let channel = format!("file://{}", channel.display());
    let command = |flags: &[&str]| {
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(&conda)
            .args(flags)
            .env("HOME", &home)
            .env_remove("CONDA_PKGS_DIRS")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CONDARC");
        command
    };
    let search = json!({"channel": [channel], "override_channels": true, "match_spec": "pkga"});
    for flags in [&["--no-warm"][..], &["--warm"][..]] {
        let mut s = Session::spawn_initialized(command(flags));
        if flags.contains(&"--warm") {
            crate::warm::wait_ready(&mut s);
        }
        let result = s.call("conda_search", search.clone());
        assert_eq!(structured(&result)["exit_code"], 0, "{flags:?}: {result}");
        let stdout = structured(&result)["stdout"].as_str().unwrap();
        assert!(
            stdout.contains("pkga") && stdout.contains("1.0"),
            "{result}"
        );
    }
    // The preview of a confirmed write: the question shows the solved plan.
    let mut s = eliciting(command(&["--allow-write", "--confirm-writes"]));
    let env = dir.path().join("env");
    let call = s.send(
        "tools/call",
        json!({"name": "conda_create", "arguments": {"prefix": env, "yes": true,
            "override_channels": true, "channel": [channel], "packages": ["pkga"]}}),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let question = loop {
        let message = s.next(Duration::from_secs(1));
        if let Some(message) = message {
            if message["method"] == "elicitation/create" {
                break message;
            }
            assert!(
                message["id"] != json!(call),
                "answered without a question: {message}"
            );
        }
        assert!(std::time::Instant::now() < deadline, "no question");
    };
    let text = question["params"]["message"].as_str().unwrap();
    assert!(text.contains("Install (1):\n  pkga 1.0 0 ("), "{text}");
    let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}});
    s.write_raw(format!("{reply}\n").as_bytes());
    let answer = s.wait(call, Duration::from_secs(60)).unwrap();
    let said = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("declined_by_user"), "{answer}");
    // Nothing was made in the operator's tree.
    assert!(!root.join("pkgs").exists());
    assert!(!home.join(".conda").exists());
    assert!(!env.exists());
}
