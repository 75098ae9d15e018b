//! What a bounded write's child (conda, and the link scripts of what it installs) cannot
//! do besides writing outside its places: change the mode, owner, times or extended
//! attributes of a file outside, make a device node, hard-link a file of elsewhere into
//! its environment, signal a process outside its run, connect to a unix socket outside;
//! it holds no capability and writes its temporary files in a directory of its own,
//! removed after the run (`host::sandbox::walls`, `bound`). conda writing through a hard
//! link the agent planted in its environment (an entry point, conda/gateways/disk/
//! create.py:137-160) is refused before anything runs, asked or not; conda's own links
//! from its package cache are not. An environment created under the bound is registered
//! (`~/.conda/environments.txt` made when missing), so the next confirmed write into it
//! can be asked. On real conda 26.7 with a local channel (`tests/fixtures/
//! bound_channel.py`), the server as the user running the tests (root in CI).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::binding::{Asking, Real, Revision, text};
use crate::support;

const REVISION: Revision = Revision::Handshake("2025-11-25");

struct Setup {
    real: Real,
    project: PathBuf,
    outside: PathBuf,
    channel: String,
}

impl Setup {
    fn new() -> Setup {
        Setup::with_outside("outside")
    }

    /// The files the link scripts aim at in `outside` (relative to the setup).
    fn with_outside(outside: &str) -> Setup {
        let real = Real::new();
        let project = std::fs::canonicalize(real.path("project")).unwrap();
        let outside = real.path(outside);
        std::fs::create_dir_all(&outside).unwrap();
        let outside = std::fs::canonicalize(outside).unwrap();
        for name in ["plain", "victim", "bashrc"] {
            let path = outside.join(name);
            std::fs::write(&path, format!("{name} original\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let channel = project.join("chan");
        let status = std::process::Command::new(support::python())
            .arg(support::repo().join("tests/fixtures/bound_channel.py"))
            .arg(&channel)
            .arg(&outside)
            .arg(real.path("pkgs"))
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let channel = format!("file://{}", channel.display());
        Setup {
            real,
            project,
            outside,
            channel,
        }
    }

    fn env(&self) -> PathBuf {
        self.project.join("env")
    }

    /// A private copy of the real conda in the setup (its root prefix, and its `conda`).
    fn copy_of_real_conda(&self) -> (PathBuf, PathBuf) {
        let stock = support::real_conda()
            .parent()
            .and_then(|bin| bin.parent())
            .unwrap()
            .to_path_buf();
        let copy = self.real.path("conda");
        let conda = crate::kit::prefix::copy(&stock, &copy);
        (copy, conda)
    }

    fn server(&self, confirm: bool) -> Asking {
        let allowed = self.project.display().to_string();
        let scope = self.env().display().to_string();
        let mut args = vec![
            "--allow-write",
            "--allow-paths",
            &allowed,
            "--write-envs",
            &scope,
        ];
        if confirm {
            args.push("--confirm-writes");
        }
        self.real.server_with(REVISION, &args)
    }

    fn arguments(&self, packages: &[&str]) -> Value {
        // In the project: a package name that names an entry of the server's working
        // directory (the repository's `python/`) would be judged as a path.
        json!({"prefix": self.env().display().to_string(), "packages": packages,
            "channel": [self.channel], "override_channels": true, "yes": true,
            "ccm_cwd": self.project.display().to_string()})
    }

    /// A server with `--allow-paths` the project alone (no `--write-envs`).
    fn server_paths_only(&self) -> Asking {
        let allowed = self.project.display().to_string();
        self.real
            .server_with(REVISION, &["--allow-write", "--allow-paths", &allowed])
    }

    /// The operator makes `prefix` with plain conda (outside ccm) from the shared package
    /// cache: its files are hard links to the cache's.
    fn operator_create(&self, prefix: &std::path::Path, packages: &[&str]) {
        let output = std::process::Command::new(support::real_conda())
            .args([
                "create",
                "-y",
                "-q",
                "--offline",
                "--override-channels",
                "-c",
            ])
            .arg(&self.channel)
            .arg("-p")
            .arg(prefix)
            .args(packages)
            .envs(self.real.env())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    }

    /// Every file below the operator's package cache, with its bytes.
    fn cache_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(dir: &std::path::Path, found: &mut Vec<(PathBuf, Vec<u8>)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_dir() {
                    walk(&path, found);
                } else {
                    found.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
                }
            }
        }
        let mut found = Vec::new();
        walk(&self.real.path("pkgs"), &mut found);
        found.sort();
        found
    }

    /// Mode, owner, modification time and bytes of each file of `outside`.
    fn outside_files(&self) -> Vec<(String, u32, u32, i64, Vec<u8>)> {
        ["plain", "victim", "bashrc"]
            .iter()
            .map(|name| {
                let path = self.outside.join(name);
                let meta = std::fs::metadata(&path).unwrap();
                let bytes = std::fs::read(&path).unwrap();
                (
                    name.to_string(),
                    meta.mode(),
                    meta.uid(),
                    meta.mtime(),
                    bytes,
                )
            })
            .collect()
    }
}

/// A link script under the bound: each attempt fails, nothing outside changes (no byte,
/// mode, owner or time), the listener outside hears nothing; the script held no
/// capability, had `no_new_privs`, and its `TMPDIR` was a directory of its own in the
/// server's, gone after the run.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_link_scripts_are_walled_in() {
    let setup = Setup::new();
    let listener = std::os::unix::net::UnixListener::bind(setup.outside.join("svc.sock")).unwrap();
    listener.set_nonblocking(true).unwrap();
    let before = setup.outside_files();
    let mut server = setup.server(false);
    let created = server.unasked("conda_create", setup.arguments(&["python"]));
    assert_eq!(created["isError"], false, "{created}");
    let installed = server.unasked("conda_install", setup.arguments(&["probe"]));
    assert_eq!(installed["isError"], false, "{installed}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(setup.env().join("report.json")).unwrap()).unwrap();
    for attempt in [
        "write_outside",
        "chmod_outside",
        "chown_outside",
        "utime_outside",
        "setxattr_outside",
        "mknod_in_env",
        "link_outside_into_env",
        "signal_outside",
        "unix_connect_outside",
        "remove_outside",
        "rename_outside",
    ] {
        assert_ne!(report[attempt], "ok", "{attempt}: {report}");
    }
    // Attack 5 V7: no tracing of a process of the run's own user and domain (EACCES).
    assert_eq!(report["ptrace_parent"], "errno 13", "{report}");
    assert_eq!(setup.outside_files(), before, "{report}");
    assert!(listener.accept().is_err(), "{report}");
    assert!(!setup.env().join("victim").exists(), "{report}");
    for set in ["CapEff", "CapPrm", "CapBnd"] {
        assert_eq!(report[set], "0000000000000000", "{set}: {report}");
    }
    assert_eq!(report["NoNewPrivs"], "1", "{report}");
    let tmpdir = PathBuf::from(report["tmpdir"].as_str().unwrap());
    let server_tmp = setup.real.path("tmp");
    assert_eq!(tmpdir.parent(), Some(server_tmp.as_path()), "{report}");
    assert!(
        tmpdir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("ccm-write-"),
        "{report}"
    );
    assert_eq!(report["write_tmpdir"], "ok", "{report}");
    assert!(!tmpdir.exists(), "the run's TMPDIR outlived it: {report}");
}

/// A new environment's link script writes beside it (attack 17 A17-1, A17-2; attack 19
/// F1-F3): the probe's post-link aims at `DIR/envs/other`, an environment out of the
/// `--write-envs` scope beside the new `DIR/envs/proj-x` (the bound granted the nearest
/// existing directory, `DIR/envs`, whole); at `OTHER` itself from `OTHER/new/envs/proj`
/// before `OTHER/new` existed, from `OTHER/proj`, asked and accepted, and from
/// `OTHER/upd`, made by `env update` (the new environment's parent, which holds files);
/// and under `--allow-paths` alone, from `-n proj-x` in the operator's `~/.conda/envs` (a
/// place then) at `~/.conda/envs/other` beside it. Each create succeeds, no file there
/// changes (bytes, mode, owner, time; a hard-linked one keeps its inode: the server
/// copies no file out of the scope), nothing there can be made, removed or renamed. A
/// `rename` to a new name in the scope (which makes no new target) writes nothing there,
/// nor an `env create` naming its environment in its file (attack 20 G1); a create that
/// fails leaves none of the directories the server made for it (G3).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_new_environment_writes_nothing_beside_it() {
    use std::os::unix::fs::MetadataExt;
    let setup = Setup::with_outside("project/envs/other");
    std::fs::hard_link(
        setup.outside.join("victim"),
        setup.project.join("victim-link"),
    )
    .unwrap();
    let victim = std::fs::metadata(setup.outside.join("victim"))
        .unwrap()
        .ino();
    let envs = setup.project.join("envs");
    let (new, deep) = (envs.join("proj-x"), setup.outside.join("new/envs/proj"));
    let (upd, renamed) = (setup.outside.join("upd"), setup.outside.join("renamed"));
    let gone = setup.outside.join("gone/a/b");
    let scope = [&new, &deep, &upd, &renamed, &gone].map(|p| p.display().to_string());
    let before = setup.outside_files();
    let mut server = setup.real.server_with(
        REVISION,
        &["--allow-write", "--write-envs", &scope.join(",")],
    );
    for target in [&new, &deep] {
        let mut arguments = setup.arguments(&["probe"]);
        arguments["prefix"] = json!(target);
        let created = server.unasked("conda_create", arguments);
        assert_eq!(created["isError"], false, "{created}");
        nothing_beside(&setup, &before, target);
    }
    assert!(setup.outside.join("new/envs").is_dir());
    let file = setup.project.join("environment.yml");
    let yml = format!(
        "channels:\n  - {}\ndependencies:\n  - probe\n",
        setup.channel
    );
    std::fs::write(&file, yml).unwrap();
    let arguments = json!({"prefix": upd, "file": file, "ccm_cwd": setup.project});
    let updated = server.unasked("conda_env_update", arguments);
    assert_eq!(updated["isError"], false, "{updated}");
    nothing_beside(&setup, &before, &upd);
    let arguments = json!({"prefix": new, "destination": renamed, "yes": true});
    let refused = server.unasked("conda_rename", arguments);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        !renamed.exists() && new.join("report.json").is_file(),
        "{refused}"
    );
    // A create that fails leaves none of the directories the server made (attack 20 G3).
    let mut arguments = setup.arguments(&["nosuchpackage"]);
    arguments["prefix"] = json!(gone);
    let failed = server.unasked("conda_create", arguments);
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(!setup.outside.join("gone").exists(), "{failed}");
    let beside = setup.outside.join("proj");
    let scope = beside.display().to_string();
    let mut asking = setup.real.server_with(
        REVISION,
        &["--allow-write", "--write-envs", &scope, "--confirm-writes"],
    );
    let mut arguments = setup.arguments(&["probe"]);
    arguments["prefix"] = json!(beside);
    let (question, created) = asking.ask("conda_create", arguments, "accept", |_| {});
    assert_eq!(created["isError"], false, "{question}\n{created}");
    nothing_beside(&setup, &before, &beside);
    let now = std::fs::metadata(setup.outside.join("victim")).unwrap();
    assert_eq!((now.ino(), now.nlink()), (victim, 2));

    let setup = Setup::with_outside("home/.conda/envs/other");
    let condarc = setup.real.path("condarc");
    let mut text = std::fs::read_to_string(&condarc).unwrap();
    let envs = setup.outside.parent().unwrap().display().to_string();
    text.push_str(&format!("envs_dirs:\n  - {envs}\n"));
    std::fs::write(&condarc, text).unwrap();
    let before = setup.outside_files();
    let mut server = setup.server_paths_only();
    let mut arguments = setup.arguments(&["probe"]);
    arguments.as_object_mut().unwrap().remove("prefix");
    arguments["name"] = json!("proj-x");
    let created = server.unasked("conda_create", arguments);
    assert_eq!(created["isError"], false, "{created}");
    nothing_beside(&setup, &before, &setup.outside.with_file_name("proj-x"));
    // Its environment named in a file: no target the gate resolved, and no envs directory
    // granted whole either (attack 20 G1): the create is refused where conda writes it.
    let file = setup.project.join("environment.yml");
    let yml = format!(
        "name: fromfile\nchannels:\n  - {}\ndependencies:\n  - probe\n",
        setup.channel
    );
    std::fs::write(&file, yml).unwrap();
    let arguments = json!({"file": [file], "yes": true, "ccm_cwd": setup.project});
    let created = server.unasked("conda_env_create", arguments);
    assert_eq!(created["isError"], true, "{created}");
    let fromfile = setup.outside.with_file_name("fromfile");
    assert!(!fromfile.join("report.json").exists(), "{created}");
    assert_eq!(setup.outside_files(), before, "{created}");
    assert!(!setup.outside.join("created").exists(), "{created}");
}

/// `conda doctor --fix` installs into its environment (conda/cli/install.py:78-105
/// `reinstall_packages`, from the consistency fixer) though the gate's table names no
/// target for it: under `--allow-paths` alone it got every envs directory and both
/// condarc files, and the link script of the dependency it installed wrote the
/// operator's `~/.conda/envs/other` (attack 21 H1). Its environment's record names
/// `probe` as a dependency of `pkga`; the fix installs `probe`, whose post-link finds
/// nothing beside it writable.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_doctor_fix_writes_nothing_beside_its_environment() {
    let setup = Setup::with_outside("home/.conda/envs/other");
    let envs = setup.outside.parent().unwrap().display().to_string();
    let condarc = format!("channels:\n  - {}\nenvs_dirs:\n  - {envs}\n", setup.channel);
    std::fs::write(setup.real.path("condarc"), condarc).unwrap();
    let before = setup.outside_files();
    let mut server = setup.server_paths_only();
    let created = server.unasked("conda_create", setup.arguments(&["pkga"]));
    assert_eq!(created["isError"], false, "{created}");
    let record = setup.env().join("conda-meta/pkga-1.0-0.json");
    let mut json: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    json["depends"] = json!(["probe"]);
    std::fs::write(&record, json.to_string()).unwrap();
    let arguments = json!({"prefix": setup.env(), "fix": true, "yes": true,
        "checks": ["consistency"], "ccm_cwd": setup.project});
    let fixed = server.unasked("conda_doctor", arguments);
    assert!(
        setup.env().join("report.json").is_file(),
        "the fix installed nothing: {fixed}"
    );
    nothing_beside(&setup, &before, &setup.env());
}

/// What the probe's post-link in `target` tried beside it failed, and changed nothing.
fn nothing_beside(
    setup: &Setup,
    before: &[(String, u32, u32, i64, Vec<u8>)],
    target: &std::path::Path,
) {
    let report: Value =
        serde_json::from_slice(&std::fs::read(target.join("report.json")).unwrap()).unwrap();
    for attempt in [
        "write_outside",
        "chmod_outside",
        "utime_outside",
        "create_outside",
        "remove_outside",
        "rename_outside",
    ] {
        assert_ne!(
            report[attempt], "ok",
            "{attempt} beside {target:?}: {report}"
        );
    }
    assert_eq!(setup.outside_files(), before, "beside {target:?}: {report}");
    assert!(!setup.outside.join("created").exists(), "{report}");
}

/// The agent hard-links its environment's `bin/evilcmd` to a file outside (the user's
/// shell start-up file), then installs a `noarch: python` package whose entry point is
/// `evilcmd`: refused before anything runs, unasked, and asked with the link planted
/// while the question is open; the file outside keeps its bytes. Without the planted
/// link the same install works (conda's own hard links from its package cache, in the
/// environment since the create, are accepted) and writes the entry point.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_foreign_hard_links_in_the_target_are_refused() {
    let setup = Setup::new();
    let bashrc = setup.outside.join("bashrc");
    let evilcmd = setup.env().join("bin/evilcmd");
    let mut unasked = setup.server(false);
    let created = unasked.unasked("conda_create", setup.arguments(&["python"]));
    assert_eq!(created["isError"], false, "{created}");
    std::fs::create_dir_all(evilcmd.parent().unwrap()).unwrap();
    std::fs::hard_link(&bashrc, &evilcmd).unwrap();
    let refused = unasked.unasked("conda_install", setup.arguments(&["evilpy"]));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("other links"), "{refused}");
    assert_eq!(std::fs::read(&bashrc).unwrap(), b"bashrc original\n");
    std::fs::remove_file(&evilcmd).unwrap();
    let mut asked = setup.server(true);
    let (_, refused) = asked.ask(
        "conda_install",
        setup.arguments(&["evilpy"]),
        "accept",
        |_| {
            std::fs::hard_link(&bashrc, &evilcmd).unwrap();
        },
    );
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(std::fs::read(&bashrc).unwrap(), b"bashrc original\n");
    std::fs::remove_file(&evilcmd).unwrap();
    let installed = unasked.unasked("conda_install", setup.arguments(&["evilpy"]));
    assert_eq!(installed["isError"], false, "{installed}");
    let script = std::fs::read_to_string(&evilcmd).unwrap();
    assert!(script.contains("from evilpy import main"), "{script}");
    assert_eq!(std::fs::read(&bashrc).unwrap(), b"bashrc original\n");
}

/// No `~/.conda` yet: a confirmed create registers its environment (the bound makes the
/// registry conda would make), so the next confirmed install into it is asked and runs.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_environment_created_under_the_bound_is_registered() {
    let setup = Setup::new();
    let home = setup.real.path("home");
    assert!(!home.join(".conda").exists());
    let mut server = setup.server(true);
    let (_, created) = server.ask(
        "conda_create",
        setup.arguments(&["python"]),
        "accept",
        |_| {},
    );
    assert_eq!(created["isError"], false, "{created}");
    let registry = std::fs::read_to_string(home.join(".conda/environments.txt")).unwrap();
    let env = setup.env().display().to_string();
    assert!(registry.lines().any(|l| l == env), "{registry}");
    let (question, installed) = server.ask(
        "conda_install",
        setup.arguments(&["evilpy"]),
        "accept",
        |_| {},
    );
    assert!(question.contains("evilpy"), "{question}");
    assert_eq!(installed["isError"], false, "{installed}");
    assert!(setup.env().join("bin/evilcmd").is_file());
}

/// The report a `poke` post-link script left in `env`.
/// The `ccm-plant.pth` files the `plant` package's post-link left in `prefix`.
fn planted_in_site_packages(prefix: &std::path::Path) -> Vec<PathBuf> {
    std::fs::read_dir(prefix.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages/ccm-plant.pth"))
        .filter(|p| p.exists())
        .collect()
}

fn poke_report(env: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(env.join("poke.json")).unwrap()).unwrap()
}

/// A bounded write's link script writes through the package cache (attack 3, H2): the
/// operator made `outside/openv` with plain conda from the shared cache (its files hard
/// links to the cache's). The agent's `poke` package, installed into its own environment,
/// appends to the cache's `pkga` data file, adds a post-link script to the extracted
/// package, changes its `info/paths.json`, plants repodata in the cache's `cache/`, and
/// writes a file in `/dev/shm` (H5). The operator's environment and cache keep every
/// byte, and nothing the script wrote in `/dev/shm` is on the host after the run; 80 MiB
/// there do not fit (attack 4 U8: the private tmpfs is bounded). Nor does it plant a
/// file or a symlink in conda's notices cache, which the operator's conda trusts and
/// rewrites later (attack 5 V2): the run's `XDG_CACHE_HOME` is its own; nor rewrite
/// conda's registry, which the server keeps for it (V6).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_link_script_writes_no_shared_package_cache_nor_the_hosts_shm() {
    let setup = Setup::new();
    let openv = setup.outside.join("openv");
    setup.operator_create(&openv, &["pkga"]);
    let data = openv.join("share/pkga/data.txt");
    assert!(std::fs::metadata(&data).unwrap().nlink() > 1);
    let (data_before, cache_before) = (std::fs::read(&data).unwrap(), setup.cache_files());
    // conda's notices cache and registry, as the operator's conda left them.
    let notices = setup.real.path("home/.cache/conda/notices");
    std::fs::create_dir_all(&notices).unwrap();
    let registry = setup.real.path("home/.conda/environments.txt");
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    std::fs::write(&registry, format!("{}\n", openv.display())).unwrap();
    let mut server = setup.server(false);
    let created = server.unasked("conda_create", setup.arguments(&["poke"]));
    assert_eq!(created["isError"], false, "{created}");
    let report = poke_report(&setup.env());
    // Attack 5 V2: nothing planted in the user cache; the run's own is writable.
    let planted: Vec<_> = std::fs::read_dir(&notices).unwrap().flatten().collect();
    assert!(planted.is_empty(), "{planted:?}: {report}");
    assert_eq!(report["own_user_cache"], "ok", "{report}");
    // Attack 5 V6: the registry is the server's to keep: the operator's environment
    // stays listed, the new one is added, nothing of the script's.
    let listed = std::fs::read_to_string(&registry).unwrap();
    let expected = format!("{}\n{}\n", openv.display(), setup.env().display());
    assert_eq!(listed, expected, "{report}");
    let shm = PathBuf::from(report["shm_name"].as_str().unwrap());
    let big = PathBuf::from(format!("{}-big", shm.display()));
    let on_host = shm.exists() || big.exists();
    let _ = std::fs::remove_file(&shm);
    let _ = std::fs::remove_file(&big);
    let mut failures = Vec::new();
    if std::fs::read(&data).unwrap() != data_before {
        failures.push("the operator's environment changed through the package cache");
    }
    if setup.cache_files() != cache_before {
        failures.push("the operator's package cache changed");
    }
    if setup.outside.join("pwned").exists() {
        failures.push("a script added to the cache ran");
    }
    if on_host {
        failures.push("the script's /dev/shm file is on the host");
    }
    assert!(failures.is_empty(), "{failures:?}: {report}");
    assert_eq!(report["shm"], "ok", "{report}");
    // The private `/dev/shm` is bounded (64 MiB): 80 MiB do not fit (ENOSPC).
    assert_eq!(report["shm_big"], "errno 28", "{report}");
    // The operator's next install of pkga from the same cache runs nothing added.
    setup.operator_create(&setup.outside.join("later"), &["pkga"]);
    assert!(!setup.outside.join("pwned").exists(), "{report}");
}

/// G1 through the package cache (attack 3, H2): the operator made `outside/openv` with
/// plain conda from the shared cache (its `bin/python3.11` a hard link to the cache's),
/// and the agent's own environment too (made outside ccm: all hard links, which the
/// foreign-link check accepts as conda's). The agent plants `bin/evilcmd` there as a hard
/// link to the cache's `bin/python3.11` and installs `evilpy`, whose entry point conda
/// writes in place. Unasked, then confirmed (the link planted again): the install
/// succeeds, the entry point is written to a file of the environment's own, and the
/// operator's interpreter and the cache keep their bytes. The question names none of the
/// run's private places.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_entry_point_linked_to_the_package_cache_writes_no_other_environment() {
    let setup = Setup::new();
    let openv = setup.outside.join("openv");
    setup.operator_create(&openv, &["python"]);
    setup.operator_create(&setup.env(), &["python"]);
    let python = openv.join("bin/python3.11");
    let before = std::fs::read(&python).unwrap();
    let cached = setup.real.path("pkgs/python-3.11.0-0/bin/python3.11");
    assert!(std::fs::metadata(&cached).unwrap().nlink() > 2);
    let evilcmd = setup.env().join("bin/evilcmd");
    let remove = json!({"prefix": setup.env().display().to_string(), "package_names": ["evilpy"],
        "yes": true, "ccm_cwd": setup.project.display().to_string()});
    let mut unasked = setup.server(false);
    std::fs::hard_link(&cached, &evilcmd).unwrap();
    let installed = unasked.unasked("conda_install", setup.arguments(&["evilpy"]));
    assert_eq!(std::fs::read(&python).unwrap(), before, "{installed}");
    assert_eq!(std::fs::read(&cached).unwrap(), before, "{installed}");
    assert_eq!(installed["isError"], false, "{installed}");
    let script = std::fs::read_to_string(&evilcmd).unwrap();
    assert!(script.contains("from evilpy import main"), "{script}");
    let removed = unasked.unasked("conda_remove", remove);
    assert_eq!(removed["isError"], false, "{removed}");
    let _ = std::fs::remove_file(&evilcmd);
    std::fs::hard_link(&cached, &evilcmd).unwrap();
    let mut asked = setup.server(true);
    let (question, installed) = asked.ask(
        "conda_install",
        setup.arguments(&["evilpy"]),
        "accept",
        |_| {},
    );
    assert_eq!(std::fs::read(&python).unwrap(), before, "{installed}");
    assert_eq!(std::fs::read(&cached).unwrap(), before, "{installed}");
    assert_eq!(installed["isError"], false, "{installed}");
    assert!(!question.contains("ccm-write-"), "{question}");
    assert!(!question.contains("CONDA_PKGS_DIRS"), "{question}");
}

/// Under `--allow-paths` alone (attack 3, H3): the agent plants `notes.txt` beside the
/// environment it creates, a hard link to the user's shell start-up file outside; the
/// `poke` package's post-link appends to it. The file outside keeps its bytes.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_hard_link_beside_the_target_under_allow_paths_is_not_written_through() {
    let setup = Setup::new();
    let bashrc = setup.outside.join("bashrc");
    std::fs::hard_link(&bashrc, setup.project.join("notes.txt")).unwrap();
    let mut server = setup.server_paths_only();
    let created = server.unasked("conda_create", setup.arguments(&["poke"]));
    let report = std::fs::read(setup.env().join("poke.json")).unwrap_or_default();
    let report = String::from_utf8_lossy(&report);
    assert_eq!(
        std::fs::read(&bashrc).unwrap(),
        b"bashrc original\n",
        "{created} {report}"
    );
}

/// Attack 4 U7: under `--allow-paths` the project alone, `conda create -p PROJ/newenv
/// plant` (a target that does not exist yet) on a private copy of the real conda: the
/// `plant` package's post-link writes a `.pth` file into the root prefix's
/// `site-packages`, which the next call's target helper (conda's interpreter, with
/// `site`) would run unsandboxed. The root prefix is not a place of the run: nothing is
/// planted, and after the next write call nothing planted ran.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_bounded_write_plants_nothing_in_the_root_prefix() {
    let setup = Setup::new();
    let (copy, conda) = setup.copy_of_real_conda();
    let plants = || planted_in_site_packages(&copy);
    let allowed = setup.project.display().to_string();
    let env = setup.real.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args = ["--allow-write", "--allow-paths", allowed.as_str()];
    let mut server = Asking::start(REVISION, &conda, &args, &env);
    let newenv = setup.project.join("newenv");
    let mut arguments = setup.arguments(&["plant"]);
    arguments["prefix"] = json!(newenv.display().to_string());
    let created = server.unasked("conda_create", arguments);
    let planted = plants();
    let mut arguments = setup.arguments(&["pkga"]);
    arguments["prefix"] = json!(newenv.display().to_string());
    let _ = server.unasked("conda_install", arguments);
    for plant in &planted {
        let _ = std::fs::remove_file(plant);
    }
    assert!(planted.is_empty(), "planted {planted:?}: {created}");
    assert!(!setup.outside.join("pwned").exists(), "{created}");
    // The post-link ran (and was refused in the root prefix): the run went.
    assert!(newenv.join("conda-meta").is_dir(), "{created}");
}

/// Attack 4 U7, over HTTP with the default scope (the working directory, conda's root
/// prefix, `~/.conda/envs`): `conda create -n plantenv plant` on a private copy of the
/// real conda, the server working (a) in the project, (b) in the directory that holds
/// both the project and the root prefix. The default scope names the root prefix so that
/// calls may name its environments and caches, not so that a link script may write
/// conda's own installation: in neither case is anything planted, and the environment
/// is made. A target inside the root prefix (its `site-packages`) is refused, and so is
/// one whose nearest existing directory is the home directory of a server working there.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_over_http_the_default_scope_plants_nothing_in_the_root_prefix() {
    let setup = Setup::new();
    let (copy, conda) = setup.copy_of_real_conda();
    let plants = || planted_in_site_packages(&copy);
    let env = setup.real.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let holding_both = setup.project.parent().unwrap().to_path_buf();
    for (cwd, name) in [(&setup.project, "inproject"), (&holding_both, "inparent")] {
        let mut server = Asking::start_in(
            Revision::SessionLess,
            &conda,
            &["--allow-write"],
            &env,
            Some(cwd),
        );
        let mut arguments = setup.arguments(&["plant"]);
        arguments.as_object_mut().unwrap().remove("prefix");
        arguments["name"] = json!(name);
        let created = server.unasked("conda_create", arguments);
        let planted = plants();
        for plant in &planted {
            let _ = std::fs::remove_file(plant);
        }
        assert!(planted.is_empty(), "{name}: planted {planted:?}: {created}");
        assert!(!setup.outside.join("pwned").exists(), "{name}: {created}");
        // The post-link ran (and was refused in the root prefix): the run went.
        let made = copy.join("envs").join(name).join("conda-meta");
        assert!(made.is_dir(), "{name}: {created}");
    }
    // Attack 6: a target inside the root prefix (not in its `envs/`) is refused; its
    // nearest existing directory, `site-packages`, would have been the place.
    let mut server = Asking::start_in(
        Revision::SessionLess,
        &conda,
        &["--allow-write"],
        &env,
        Some(&setup.project),
    );
    let site = std::fs::read_dir(copy.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    let mut arguments = setup.arguments(&["plant"]);
    arguments["prefix"] = json!(site.join("zz").display().to_string());
    let refused = server.unasked("conda_create", arguments);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("root prefix"), "{refused}");
    assert!(plants().is_empty(), "{refused}");
    assert!(!site.join("zz").exists(), "{refused}");
    // Attack 6: a server working in the home directory: the home directory is no place
    // whole (its dotfiles, `~/.conda`, conda's user cache), so a target whose nearest
    // existing directory is it is refused.
    let home = setup.real.path("home");
    let mut server = Asking::start_in(
        Revision::SessionLess,
        &conda,
        &["--allow-write"],
        &env,
        Some(&home),
    );
    // The channel inside the scope (the working directory).
    let chan = home.join("chan");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(setup.project.join("chan"))
        .arg(&chan)
        .status()
        .unwrap();
    assert!(copied.success());
    let mut arguments = setup.arguments(&["pkga"]);
    arguments["prefix"] = json!(home.join("newenv").display().to_string());
    arguments["ccm_cwd"] = json!(home.display().to_string());
    arguments["channel"] = json!([format!("file://{}", chan.display())]);
    let refused = server.unasked("conda_create", arguments);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("home directory"), "{refused}");
    assert!(!home.join("newenv").exists(), "{refused}");
}

/// Attack 4 U6: a hard link the agent plants during the run is written through (a link
/// script can wait for it), so what it can reach is what the kernel lets the agent link:
/// with `fs.protected_hardlinks` (which the server checks before every bounded write)
/// only a file its planter owns or may read and write. Under `--allow-paths` the project,
/// `conda create -p PROJ/env hold`: while the post-link waits, the agent (`nobody`, its
/// file tools; the environment made writable to it) links a root-owned file of OUTSIDE
/// into the environment, refused by the kernel, and a file of its own, which the link
/// script then writes through. The root-owned file is untouched.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_link_planted_during_the_run_reaches_only_what_its_planter_may_write() {
    assert!(
        support::is_root(),
        "this test acts as another user (nobody): run it as root, as CI does"
    );
    let setup = Setup::new();
    let open = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // `nobody` reaches the project and OUTSIDE (the setup's directory is private).
    open(setup.project.parent().unwrap(), 0o711);
    open(&setup.project, 0o755);
    open(&setup.outside, 0o755);
    let mine = setup.outside.join("mine");
    std::fs::write(&mine, "mine original\n").unwrap();
    std::os::unix::fs::chown(&mine, Some(support::NOBODY), Some(support::NOBODY)).unwrap();
    // Writable to all: the run's child holds no capability, so it writes a file by its
    // permission bits alone (a nobody-owned `0644` file it could not write at all).
    open(&mine, 0o666);
    let env = setup.env();
    let (victim, outside) = (setup.outside.join("victim"), setup.outside.clone());
    let agent = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        while !env.join("ready").exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the post-link never ran"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        open(&env, 0o777);
        let ln = |file: &str, name: &str| {
            std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg("ln")
                .arg(outside.join(file))
                .arg(env.join(name))
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
        };
        let linked = (ln("victim", "planted-root"), ln("mine", "planted-mine"));
        std::fs::write(env.join("go"), b"").unwrap();
        linked
    });
    let mut server = setup.server_paths_only();
    let created = server.unasked("conda_create", setup.arguments(&["hold"]));
    let (linked_root, linked_own) = agent.join().unwrap();
    assert!(!linked_root, "nobody linked a root-owned file: {created}");
    assert!(linked_own, "{created}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "victim original\n",
        "{created}"
    );
    // The control: the link script did write through the link its planter could make.
    let mine = std::fs::read_to_string(&mine).unwrap();
    assert!(mine.contains("ESCAPED"), "{mine} {created}");
}

/// Attack 7 A7-1 and A7-3: a relative `envs_dirs` entry the agent appends to `~/.condarc`
/// is judged from the config call's working directory (inside the scope) but expanded by
/// conda from each later call's: `create -n` then resolved outside every scope directory,
/// the target's nearest existing directory became a place of the write bound, and a link
/// script wrote `~/.ssh/authorized_keys`. Such a target is refused before anything runs,
/// and the unsandboxed resolution creates nothing on the way (conda's envs-directory
/// probe made the missing directory and its `.conda_envs_dir_test`). Over HTTP with the
/// default scope (from `~/.conda/envs`, a default directory) and over stdio with
/// `--allow-paths` the project (from the project).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_relative_envs_dir_in_the_condarc_leads_no_write_outside() {
    let setup = Setup::new();
    let home = setup.real.path("home");
    let (dot_envs, ssh) = (home.join(".conda/envs"), home.join(".ssh"));
    let deep = setup.project.join("a/b/c");
    for dir in [&dot_envs, &ssh, &deep] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let env = setup.real.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let conda = support::real_conda();
    let nothing_made = |context: &str, result: &Value| {
        let made: Vec<PathBuf> = [ssh.join("k"), ssh.join(".conda_envs_dir_test")]
            .into_iter()
            .chain([home.join("made"), setup.real.path("victim")])
            .filter(|p| p.exists())
            .collect();
        assert!(made.is_empty(), "{context}: made {made:?}: {result}");
    };
    let cases: [(&str, Revision, Vec<&str>, PathBuf, &str); 3] = [
        (
            "HTTP default scope, into ~/.ssh",
            Revision::SessionLess,
            vec!["--allow-write"],
            dot_envs.clone(),
            "../../.ssh",
        ),
        (
            "HTTP default scope, a directory made by the resolution",
            Revision::SessionLess,
            vec!["--allow-write"],
            dot_envs.clone(),
            "../../made/by/helper",
        ),
        (
            "stdio, --allow-paths the project, beside it",
            REVISION,
            vec!["--allow-write", "--allow-paths"],
            setup.project.clone(),
            "../victim",
        ),
    ];
    let allowed = setup.project.display().to_string();
    for (context, revision, mut args, cwd, entry) in cases {
        if args.contains(&"--allow-paths") {
            args.push(&allowed);
        }
        // The operator's own condarc, which a bounded `conda config` may write.
        std::fs::write(home.join(".condarc"), "channels: []\n").unwrap();
        let mut server = Asking::start_in(revision, &conda, &args, &env, Some(&setup.project));
        let from = if cwd == setup.project {
            setup.project.join("a/b")
        } else {
            deep.clone()
        };
        let append = json!({"append": [["envs_dirs", entry]],
            "ccm_cwd": from.display().to_string()});
        let appended = server.unasked("conda_config", append);
        assert_ne!(appended["isError"], true, "{context}: {appended}");
        let condarc = std::fs::read_to_string(home.join(".condarc")).unwrap_or_default();
        assert!(condarc.contains(entry), "{context}: {condarc}");
        let mut arguments = setup.arguments(&["pkga"]);
        arguments.as_object_mut().unwrap().remove("prefix");
        arguments["name"] = json!("k");
        arguments["ccm_cwd"] = json!(cwd.display().to_string());
        let created = server.unasked("conda_create", arguments);
        assert_eq!(created["isError"], true, "{context}: {created}");
        // Refused as outside the scope: a target beside the home directory in the bound's
        // words (its nearest existing directory is the home directory), any other before
        // anything runs.
        assert!(
            text(&created).starts_with("outside_allowed_paths: "),
            "{context}: {created}"
        );
        nothing_made(context, &created);
        let _ = std::fs::remove_file(home.join(".condarc"));
    }
}

/// Attack 8 (observation): a bounded `conda config` on a home with no `~/.condarc` yet
/// failed ("Cannot write to condarc file"): the bound grants the file by name, and a
/// file that does not exist cannot be granted. It is made empty right before the run,
/// and the run writes it; nothing else in the home is made.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_bounded_config_makes_the_first_condarc() {
    let setup = Setup::new();
    let home = setup.real.path("home");
    let rc = home.join(".condarc");
    assert!(!rc.exists());
    let mut server = setup.server_paths_only();
    // (after the server made its own caches there)
    let before: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let added = server.unasked(
        "conda_config",
        json!({"prepend": [["channels", "first-chan"]]}),
    );
    assert_ne!(added["isError"], true, "{added}");
    let text = std::fs::read_to_string(&rc).unwrap_or_default();
    assert!(text.contains("first-chan"), "{text:?}: {added}");
    let mut after: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    after.retain(|n| n != ".condarc" && !before.contains(n));
    assert!(after.is_empty(), "made in the home: {after:?}");
}
