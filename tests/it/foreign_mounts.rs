//! A working directory on a mount of another mount namespace (attack 16, A16-1/A16-2).
//!
//! A child enters its working directory as the server, before its sandbox exists; a
//! directory named through `/proc/<pid>/root` of a process in another mount namespace
//! (a container, a service's private `/tmp`, another call's tmpfs) is that namespace's
//! mount, which the sandbox's read-only remount of its own tree never reaches. A
//! sandboxed `conda run` (`--allow-exec` alone) wrote the host through it, and a bounded
//! write's link script changed the mode of files outside its places. Such a directory is
//! refused before anything runs, named directly or through a symlink, cold and warm;
//! a child that is started in one anyway (swapped in after the check) fails to start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kit::users::home;
use crate::mcp::{Session, structured};
use crate::support;

/// A process in a mount namespace of its own (a copy of the tests' mounts), ended on drop.
struct Other(Child);

impl Other {
    fn start() -> Other {
        Other::running(&["sleep", "600"])
    }

    /// `program` in a mount namespace of its own.
    fn running(program: &[&str]) -> Other {
        let flags: &[&str] = if support::is_root() {
            &["-m", "--propagation", "private"]
        } else {
            &["-Urm", "--propagation", "private"]
        };
        let child = Command::new("unshare")
            .args(flags)
            .args(program)
            .spawn()
            .expect("unshare");
        let other = Other(child);
        let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        for _ in 0..200 {
            let theirs = std::fs::read_link(format!("/proc/{}/ns/mnt", other.0.id()));
            if theirs.is_ok_and(|ns| ns != ours) {
                return other;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("the other process got no mount namespace of its own");
    }

    /// `dir` as the other namespace sees it, through `/proc/<pid>/root`.
    fn through(&self, dir: &Path) -> PathBuf {
        Path::new(&format!("/proc/{}/root", self.0.id())).join(dir.strip_prefix("/").unwrap())
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A program that writes into its own working directory and into every ancestor's
/// (`/proc/<pid>/cwd`: conda's own, which a real `conda run` keeps while the program
/// starts elsewhere), then exits 0.
const WRITER: &str = "echo x > pwned-self 2>/dev/null; p=$$; \
     while [ \"$p\" -gt 1 ]; do echo x > /proc/$p/cwd/pwned-$p 2>/dev/null; \
     p=$(cut -d' ' -f4 /proc/$p/stat); done; true";

fn planted(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pwned"))
        .collect()
}

/// The response of a call (its `result`, or its protocol `error`).
fn respond(s: &mut Session, tool: &str, arguments: Value) -> Value {
    s.request("tools/call", json!({"name": tool, "arguments": arguments}))
}

fn check(conda: &Path) {
    let home = home();
    let dir = home.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    let other = Other::start();
    let foreign = other.through(&dir);
    // The path leads to a writable directory: the test writes through it.
    std::fs::write(foreign.join("reachable"), "").unwrap();
    assert!(dir.join("reachable").exists());
    let link = home.path().join("innocent-project");
    std::os::unix::fs::symlink(&foreign, &link).unwrap();
    for warm in [false, true] {
        let args = ["--allow-exec", if warm { "--warm" } else { "--no-warm" }];
        let home_text = home.path().to_str().unwrap();
        let mut s = Session::start_with(conda, &args, &[("HOME", home_text)]);
        if warm {
            crate::warm::wait_ready(&mut s);
        }
        for cwd in [&foreign, &link] {
            let calls = [
                (
                    "conda_execute",
                    json!({"argv": ["run", "sh", "-c", WRITER], "cwd": cwd}),
                ),
                (
                    "conda_run",
                    json!({"executable_call": ["sh", "-c", WRITER], "ccm_cwd": cwd}),
                ),
            ];
            for (tool, arguments) in calls {
                let response = respond(&mut s, tool, arguments);
                let what = format!("warm {warm}, {tool} in {cwd:?}");
                assert_eq!(planted(&dir), Vec::<String>::new(), "{what}: {response}");
                assert_eq!(response["error"]["code"], -32602, "{what}: {response}");
                let message = response["error"]["message"].as_str().unwrap();
                assert!(
                    message.contains("another mount namespace") && !message.contains("/proc/1"),
                    "{what}: {message}"
                );
            }
        }
        // The directory by its own name runs (read-only: nothing is written).
        let result = s.call(
            "conda_execute",
            json!({"argv": ["run", "sh", "-c", WRITER], "cwd": dir}),
        );
        assert_eq!(structured(&result)["exit_code"], 0, "warm {warm}: {result}");
        assert_eq!(planted(&dir), Vec::<String>::new(), "warm {warm}");
    }
    // A bounded write (A16-2: its link scripts would run in the other namespace's mount).
    let allowed = format!("--allow-paths={}", home.path().display());
    let home_text = home.path().to_str().unwrap();
    let mut s = Session::start_with(conda, &["--allow-write", &allowed], &[("HOME", home_text)]);
    let prefix = dir.join("env");
    let arguments = json!({"prefix": prefix, "packages": ["x"], "ccm_cwd": link});
    let response = respond(&mut s, "conda_create", arguments);
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(!prefix.exists(), "{response}");
}

#[test]
fn a_working_directory_in_another_mount_namespace_is_refused() {
    check(&support::fixture().conda);
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_working_directory_in_another_mount_namespace_is_refused() {
    check(&support::real_conda());
}

/// The directory a bounded write judged, swapped after the last check (the debug-build
/// hold) for a symlink to a directory of another mount namespace whose mount is itself
/// read-only and `nodev` (its `..` climbs that namespace's writable mounts): the child
/// never starts there (attack 18 A18-1: by path it did, and its link script changed the
/// mode of a file outside its places).
#[test]
fn a_working_directory_swapped_after_the_check_is_not_entered() {
    let home = home();
    let (proj, foreign_dir, hold) = (
        home.path().join("proj"),
        home.path().join("foreign"),
        home.path().join("hold"),
    );
    for dir in [&proj, &foreign_dir.join("mnt"), &hold] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mnt = foreign_dir.join("mnt");
    let script = format!(
        "mount -t tmpfs -o nodev tmpfs {m} && mkdir {m}/x && mount -o remount,ro,nodev {m} \
         && touch {ready} && exec sleep 600",
        m = mnt.display(),
        ready = foreign_dir.join("ready").display()
    );
    let other = Other::running(&["sh", "-c", &script]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !foreign_dir.join("ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the other namespace's mount was not made"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = other.through(&mnt.join("x"));
    let allowed = format!("--allow-paths={}", home.path().display());
    let args = crate::kit::classify::with(&crate::kit::classify::BEHAVE_WRITE, &[&allowed]);
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("CCM_TEST_HOLD_BOUNDED_WRITES", hold.to_str().unwrap()),
    ];
    let mut s = Session::start_with(&support::fixture().conda, &args, &env);
    let arguments = json!({"cwd": true, "ccm_cwd": proj});
    let id = s.send(
        "tools/call",
        json!({"name": "conda_behave", "arguments": arguments}),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !hold.join("held").exists() {
        assert!(Instant::now() < deadline, "the call was never held");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::rename(&proj, proj.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(&target, &proj).unwrap();
    std::fs::write(hold.join("go"), b"").unwrap();
    let response = s.wait(id, Duration::from_secs(120)).expect("no response");
    assert_eq!(response["error"]["code"], -32603, "{response}");
    assert_eq!(
        response["error"]["message"], "conda could not be started",
        "{response}"
    );
}
