//! Unit tests of the sandbox: what a sandboxed child can and cannot write.

use super::probe::Unavailable;
use super::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::host::exec::{Executions, Limits};

/// The server's probe: one trial child of `program args` in the sandbox.
async fn probe(inputs: &Inputs, program: &Path, args: &[&str]) -> Sandbox {
    Sandbox::probe(inputs, |plan| async move {
        Executions::new(Limits::defaults())
            .trial(program, args, plan)
            .await
    })
    .await
}

/// One run of `spec` by executions of its own (the default limits).
async fn run_one(
    spec: &crate::host::exec::Spec,
    cancel: &CancellationToken,
) -> std::io::Result<crate::host::exec::Outcome> {
    Executions::new(Limits::defaults()).run(spec, cancel).await
}

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
        write_bound: None,
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
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
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
    let out = run_one(&sh(&script, Some(plan)), &CancellationToken::new())
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
    // The home write failed, the overlay writes vanished, the caches' writes too.
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
    assert!(!root.join("pkgs/cache/r.json").exists());
    assert!(!home.join(".cache/conda/notices/n").exists());
    // The per-call tmpfs left nothing behind.
    let tmpdir = sandbox.plan(Some(&root)).unwrap().tmpdir().to_path_buf();
    assert!(!tmpdir.join("t").exists());
}

/// What a hostile child leaves in conda's caches for a later, more trusted call (a write
/// call, the operator's own conda) to follow or trust: a symlink where conda opens with
/// `a+`, a state file under an existing cache key, a replaced index. All of it vanishes
/// with the call; the caches hold what they held.
#[tokio::test]
async fn nothing_a_child_writes_in_the_caches_outlives_it() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let root = temp.path().join("root");
    let cache = root.join("pkgs/cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("0123abcd.json"), "operator\n").unwrap();
    std::fs::create_dir_all(home.join(".conda")).unwrap();
    let victim = temp.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let notices = home.join(".cache/conda/notices");
    let script = format!(
        "set -e
         ln -s {victim} {cache}/0123abcd.info.json
         echo planted > {cache}/0123abcd.json
         ln -s {victim} {notices}/notices.cache
         echo planted > {notices}/feed.json
         mkdir {cache}/sub && ln -s {victim} {cache}/sub/link
         cat {cache}/0123abcd.json",
        victim = victim.display(),
        cache = cache.display(),
        notices = notices.display(),
    );
    let before = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let (cache_before, notices_before) = (before(&cache), before(&notices));
    let plan = sandbox.plan(Some(&root)).unwrap();
    let out = run_one(&sh(&script, Some(plan)), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        out.stdout,
        b"planted\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(before(&cache), cache_before);
    assert_eq!(before(&notices), notices_before);
    assert_eq!(
        std::fs::read_to_string(cache.join("0123abcd.json")).unwrap(),
        "operator\n"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

/// A conda that has never cached a package: no `<root>/pkgs`, no `<root>/envs`, no
/// `~/.conda`. conda creates its package cache (and envs directory) on reads
/// (`PackageCacheData.first_writable`); in the sandbox it can, in the call's tmpfs, and
/// nothing appears in the operator's tree. The rest of the root prefix stays as it was:
/// read-only, with its `conda-meta` overlay carried over the union.
#[tokio::test]
async fn a_missing_package_cache_is_created_in_the_call_only() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let root = temp.path().join("root");
    std::fs::create_dir_all(root.join("conda-meta")).unwrap();
    std::fs::write(root.join("conda-meta/history"), "old\n").unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let caps = sandbox.describe(Some(&root));
    let made: Vec<&Value> = caps["writable"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| {
            w["kind"] == "tmpfs"
                && w["path"]
                    .as_str()
                    .unwrap()
                    .starts_with(root.to_str().unwrap())
        })
        .collect();
    assert_eq!(made.len(), 2, "{caps}");
    let script = format!(
        "set -e
         mkdir -p {root}/pkgs/cache && touch {root}/pkgs/urls.txt
         echo r > {root}/pkgs/cache/r.json && cat {root}/pkgs/cache/r.json
         mkdir -p {root}/envs && touch {root}/envs/.conda_envs_dir_test && echo envs
         echo new >> {root}/conda-meta/history && echo meta
         touch {root}/other 2>/dev/null || echo other-refused
         stat -c %a {root}/pkgs",
        root = root.display(),
    );
    let plan = sandbox.plan(Some(&root)).unwrap();
    let out = run_one(&sh(&script, Some(plan)), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "r\nenvs\nmeta\nother-refused\n755\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!root.join("pkgs").exists());
    assert!(!root.join("other").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("conda-meta/history")).unwrap(),
        "old\n"
    );
    assert!(!root.join("envs").exists());
    assert!(!home.join(".conda").exists());
    // Without the sandbox the same script creates them (so the checks above can fail).
    let out = run_one(&sh(&script, None), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(root.join("pkgs/cache/r.json").exists());
}

/// What a program run by `conda run` under `--allow-exec` alone might try: undo the
/// read-only mounts, directly or from a user namespace of its own, then write.
#[tokio::test]
async fn a_child_cannot_undo_the_sandbox() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
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
    let out = run_one(&sh(&script, sandbox.plan(None)), &CancellationToken::new())
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
    let out = run_one(
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
    let out = run_one(&sh(&script, None), &CancellationToken::new())
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
    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    // Affects this test process alone.
    assert_eq!(set_dumpable_behavior(DumpableBehavior::NotDumpable), Ok(()));
    let temp = tempfile::tempdir().unwrap();
    let sandbox = probe(
        &inputs(temp.path(), temp.path()),
        Path::new("/bin/true"),
        &[],
    )
    .await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let out = run_one(
        &sh("echo ok", sandbox.plan(None)),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, b"ok\n");
}

#[test]
fn mount_points_are_decoded() {
    assert_eq!(
        super::areas::unescape(br"/a\040b\011c\134d\012e\\x"),
        b"/a b\tc\\d\ne\\\\x"
    );
    assert_eq!(super::areas::unescape(br"/x\0"), b"/x\\0");
    // A mount point whose name is not UTF-8 costs no other its place (attack 13 L4).
    let text = b"22 1 0:21 / / rw - ext4 /dev/a rw\n\
        23 22 0:22 / /home/u/\xff rw - fuse x rw\n\
        24 22 0:23 / /home/v\\040w rw - tmpfs t rw\n";
    let points = super::areas::points(text);
    let expected = [&b"/"[..], b"/home/u/\xff", b"/home/v w"];
    use std::os::unix::ffi::OsStrExt;
    let expected: Vec<std::path::PathBuf> = expected
        .iter()
        .map(|p| std::ffi::OsStr::from_bytes(p).into())
        .collect();
    assert_eq!(points, expected);
}

/// Where a union may add a missing directory: not on `/`, not over a mount point or the
/// sandbox's own tmpfs.
#[test]
fn a_union_goes_only_where_nothing_would_be_hidden() {
    use super::areas::fits_union;
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let base = Path::new("/dev/shm");
    assert!(fits_union(&root, &[], base));
    // A mount point below it would vanish from the child's view; its own does not.
    assert!(!fits_union(&root, &[root.join("mnt")], base));
    assert!(fits_union(&root, std::slice::from_ref(&root), base));
    // Not over the sandbox's tmpfs, not over `/`.
    assert!(!fits_union(&root, &[], &root.join("base")));
    assert!(!fits_union(Path::new("/"), &[], base));
}

/// A write call may append to `environments.txt`: a thousand environments listed there
/// (attack 5 V4) give a call no more than [`areas::MAX_ENVIRONMENTS`] `conda-meta`
/// overlays outside the envs directories, the root prefix's first.
#[tokio::test]
async fn listed_environments_are_overlaid_up_to_the_cap() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    let root = temp.path().join("root");
    std::fs::create_dir_all(root.join("conda-meta")).unwrap();
    std::fs::create_dir_all(home.join(".conda")).unwrap();
    let mut listed = String::new();
    for i in 0..1000 {
        let env = temp.path().join(format!("flood/{i}"));
        std::fs::create_dir_all(env.join("conda-meta")).unwrap();
        listed.push_str(&format!("{}\n", env.display()));
    }
    std::fs::write(home.join(".conda/environments.txt"), listed).unwrap();
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let areas = sandbox.areas(Some(&root));
    let metas: Vec<&PathBuf> = areas
        .overlays
        .iter()
        .filter(|o| o.ends_with("conda-meta"))
        .collect();
    assert_eq!(metas.len(), areas::MAX_ENVIRONMENTS, "{metas:?}");
    assert_eq!(metas[0], &root.join("conda-meta"));
}

/// A sandboxed call's tmpfs is bounded (attack 5 V1: the kernel's default, half the
/// memory, let one call pin 12 GiB): its mount says so from inside (a union's entries
/// are made by the same `mount::tmpfs`).
#[tokio::test]
async fn the_calls_tmpfs_is_bounded() {
    let temp = tempfile::tempdir().unwrap();
    let home = temp.path().join("home");
    std::fs::create_dir_all(home.join(".conda")).unwrap();
    let sandbox = probe(&inputs(&home, temp.path()), Path::new("/bin/true"), &[]).await;
    assert_eq!(sandbox.state(), &State::Active, "{sandbox:?}");
    let plan = sandbox.plan(None).unwrap();
    let out = run_one(
        &sh("df -k \"$TMPDIR\"", Some(plan)),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let size: u64 = stdout
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("{stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(size, 2 * 1024 * 1024, "{stdout}");
}
