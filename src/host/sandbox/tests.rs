//! Unit tests of the sandbox: what a sandboxed child can and cannot write.

use super::probe::Unavailable;
use super::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn inputs(home: &Path, temp: &Path) -> Inputs {
    Inputs {
        home: Some(home.to_path_buf()),
        xdg_cache_home: None,
        conda_pkgs_dirs: None,
        conda_envs_dirs: Vec::new(),
        temp_dir: temp.to_path_buf(),
    }
}

fn sh(script: &str, plan: Option<Plan>) -> crate::host::exec::Spec {
    crate::host::exec::Spec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: None,
        stdin: None,
        timeout: Duration::from_secs(30),
        stdout_limit: 1 << 16,
        stderr_limit: 1 << 16,
        env_remove: Vec::new(),
        limits: crate::host::exec::Limits::none(),
        sandbox: plan,
    }
}

#[test]
fn applies_to_reads_and_exec_without_write() {
    let class = |read_only, requires_write, requires_exec| Classification {
        read_only,
        open_world: false,
        requires_write,
        requires_exec,
        reveals_credentials: false,
    };
    for allow_write in [false, true] {
        assert!(applies(&class(true, false, false), allow_write));
        assert!(!applies(&class(false, true, false), allow_write));
        assert!(!applies(&class(false, true, true), allow_write));
    }
    assert!(applies(&class(false, false, true), false));
    assert!(!applies(&class(false, false, true), true));
}

#[tokio::test]
async fn writes_fail_except_in_the_declared_places() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let root = temp.path().join("root");
    std::fs::create_dir_all(root.join("conda-meta")).unwrap();
    std::fs::write(root.join("conda-meta/history"), "old\n").unwrap();
    std::fs::create_dir_all(root.join("pkgs/cache")).unwrap();
    std::fs::create_dir_all(home.join(".conda")).unwrap();
    std::fs::write(home.join(".conda/environments.txt"), "").unwrap();
    let sandbox = Sandbox::probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let plan = sandbox.plan(Some(&root)).unwrap();
    let script = format!(
        "set -u
         touch {home}/x && echo home-written
         echo t > \"$TMPDIR/t\" && echo tmp-ok
         echo new >> {root}/conda-meta/history && echo meta-ok
         echo r > {root}/pkgs/cache/r.json && echo cache-ok
         echo n > {home}/.cache/conda/notices/n && echo notices-ok
         touch {root}/pkgs/urls.txt && echo pkgs-ok
         echo {root} >> {home}/.conda/environments.txt && echo registry-ok
         echo done",
        home = home.display(),
        root = root.display()
    );
    let out = crate::host::exec::run(&sh(&script, Some(plan)), &CancellationToken::new())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "tmp-ok\nmeta-ok\ncache-ok\nnotices-ok\npkgs-ok\nregistry-ok\ndone\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only file system"));
    // The home write failed, the overlay writes vanished, the caches persisted.
    assert!(!home.join("x").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("conda-meta/history")).unwrap(),
        "old\n"
    );
    assert!(!root.join("pkgs/urls.txt").exists());
    assert_eq!(
        std::fs::read_to_string(home.join(".conda/environments.txt")).unwrap(),
        ""
    );
    assert!(root.join("pkgs/cache/r.json").exists());
    assert!(home.join(".cache/conda/notices/n").exists());
    // The per-call tmpfs left nothing behind.
    let tmpdir = sandbox.plan(Some(&root)).unwrap().tmpdir().to_path_buf();
    assert!(!tmpdir.join("t").exists());
}

/// What a program run by `conda run` under `--allow-exec` alone might try: undo the
/// read-only mounts, directly or from a user namespace of its own, then write.
#[tokio::test]
async fn a_child_cannot_undo_the_sandbox() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let sandbox = Sandbox::probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let target = home.join("escaped");
    let script = format!(
        "t={target}
         mount -o remount,rw / ; echo a >> $t
         mount -o remount,bind,rw / ; echo b >> $t
         mount -o remount,rw {home} ; echo c >> $t
         umount -l /dev/shm ; echo d >> $t
         mount -t tmpfs tmpfs {home} ; echo e >> $t
         unshare -rm sh -c 'mount -o remount,rw /; mount -o remount,bind,rw /; echo f >> $0' $t
         unshare -rm sh -c 'umount -l /; echo g >> $0' $t
         echo done",
        target = target.display(),
        home = home.display()
    );
    let out = crate::host::exec::run(&sh(&script, sandbox.plan(None)), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        out.stdout,
        b"done\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!target.exists(), "{:?}", std::fs::read_to_string(&target));
    // Without the sandbox the same script writes (so the check above can fail).
    let out = crate::host::exec::run(
        &sh(&format!("echo x >> {}", target.display()), None),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(target.exists());
}

#[tokio::test]
async fn without_a_plan_nothing_changes() {
    let temp = tempfile::tempdir().unwrap();
    let file = temp.path().join("x");
    let script = format!("touch {}", file.display());
    let out = crate::host::exec::run(&sh(&script, None), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(file.exists());
}

#[test]
fn an_unavailable_or_disabled_sandbox_plans_nothing() {
    let unavailable = Sandbox::unavailable("no namespaces here");
    assert!(unavailable.plan(Some(Path::new("/"))).is_none());
    assert_eq!(
        unavailable.describe(None),
        json!({"state": "unavailable", "reason": "no namespaces here"})
    );
    let disabled = Sandbox::disabled();
    assert!(disabled.plan(None).is_none());
    assert_eq!(disabled.describe(None)["state"], "disabled");
}

#[test]
fn explanations_name_the_cause() {
    let explain = |code| Unavailable::SetUp(std::io::Error::from_raw_os_error(code)).to_string();
    let text = explain(libc::EPERM);
    assert!(
        text.starts_with("the sandbox could not be set up: "),
        "{text}"
    );
    assert!(text.contains("not permitted"), "{text}");
    let text = explain(libc::ENOSYS);
    assert!(text.contains("5.12"), "{text}");
}

/// A server that protects its memory (`PR_SET_DUMPABLE` 0) passes that on to the forked
/// child, whose /proc files then belong to root: writing its own uid_map must still
/// work (it matters when the server is not root).
#[tokio::test]
async fn works_when_the_server_is_not_dumpable() {
    // SAFETY: prctl with integer arguments only; affects this test process alone.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }, 0);
    let temp = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::probe(
        &inputs(temp.path(), temp.path()),
        Path::new("/bin/true"),
        &[],
    )
    .await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let out = crate::host::exec::run(
        &sh("echo ok", sandbox.plan(None)),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, b"ok\n");
}

#[test]
fn forced_read_only_is_off_by_default() {
    assert!(!forced_read_only("conda_behave"));
}
