//! A confirmed write runs and deletes only what the target's packages put there (attack 23
//! F1): an environment in the agent's project is a directory the agent's other tools may
//! write, and conda runs `bin/.<name>-pre-unlink.sh`, `…-post-unlink.sh` and
//! `…-post-link.sh` from the target whenever such a file exists, and deletes whatever an
//! installed record lists. A script planted there, before the question or while it is
//! open, never runs; a record edited to list a path outside the environment deletes
//! nothing; the packages' own scripts still run. On real conda, with local channels.
//!
//! What the checks cannot cover — the environment's activation scripts, programs and
//! interpreter, which conda runs too — the question names: a target in the server's
//! working directory (or a client's root, or beneath a directory another user can
//! change) gets a caution under its line, under every revision that asks.

use std::path::Path;

use std::time::Duration;

use serde_json::{Value, json};

use crate::binding::{ASKING, Asking, REAL_ASKING, Real, Revision, assert_changed, text};
use crate::kit::tree::walkdir_names;
use crate::mcp::Session;
use crate::support;

/// The start of the caution under a target in the server's working directory `dir`.
fn caution(dir: &Path) -> String {
    format!(
        "\n  Caution: this environment lies inside the server's working directory {}, where \
         the agent can change files. Its own programs and scripts (bin/, etc/conda/activate.d/, \
         its Python) run as ",
        dir.display()
    )
}

/// A server's working directory, flags and environment, and the end of the caution it
/// shows (`None`: no caution).
type Case<'a> = (
    &'a Path,
    &'a [&'a str],
    &'a [(&'a str, &'a str)],
    Option<&'a str>,
);

/// On the fixture conda, under every revision that asks: the environment conda changes
/// (`t1` in the fixture's own prefix) is named with the caution by a server working in
/// the directory that holds it, and without by one working elsewhere; the caution says
/// whether the run's writes are bound (`--allow-paths`, where the kernel has Landlock).
#[test]
fn the_question_names_a_target_the_agent_can_change() {
    let conda = &support::fixture().conda;
    // The fixture's prefix (`<prefix>/bin/conda`).
    let prefix = std::fs::canonicalize(conda.parent().unwrap().parent().unwrap()).unwrap();
    let holder = prefix.parent().unwrap();
    let allowed = holder.display().to_string();
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(elsewhere.path()).unwrap();
    const FREE: &str = "nothing limits what they read or write.\n";
    const BOUND: &str = "their writes stay within the places this call may write.\n";
    let landlock = ccm::host::sandbox::bound::support().is_ok();
    let bounded = if landlock { BOUND } else { FREE };
    for revision in ASKING {
        // Over HTTP the working directory is the default scope (`--allow-paths`).
        let http = matches!(revision, Revision::SessionLess);
        let cases: [Case; 4] = [
            (holder, &[], &[], Some(if http { bounded } else { FREE })),
            (&elsewhere, &[], &[], None),
            (holder, &["--allow-paths", &allowed], &[], Some(bounded)),
            (
                holder,
                &["--allow-paths", &allowed],
                &[("CCM_TEST_NO_WRITE_BOUND", "1")],
                Some(FREE),
            ),
        ];
        for (cwd, flags, env, expected) in cases {
            let context = format!("{revision:?} in {} {flags:?} {env:?}", cwd.display());
            let mut args = vec!["--allow-write", "--confirm-writes"];
            args.extend(flags);
            let mut server = Asking::start_in(revision, conda, &args, env, Some(cwd));
            let arguments = json!({"name": "t1", "packages": ["fixture-pkg"]});
            let (question, result) = server.ask("conda_install", arguments, "decline", |_| {});
            let env = prefix.join("envs/t1");
            let line = format!("\nTarget environment: {}\n", env.display());
            assert!(question.contains(&line), "{context}: {question}");
            let shown = format!("{line}{}", &caution(holder)[1..]);
            match expected {
                Some(limit) => {
                    let start = question.find(&shown).map(|at| at + line.len());
                    let caution = &question[start.expect(&context)..];
                    let caution = &caution[..=caution.find('\n').unwrap()];
                    assert!(caution.ends_with(limit), "{context}: {caution}");
                }
                None => assert!(!question.contains("Caution"), "{context}: {question}"),
            }
            assert!(
                text(&result).starts_with("declined_by_user"),
                "{context}: {result}"
            );
        }
    }
}

/// A stdio session of a client that declares roots and can be asked, of a server on the
/// fixture conda working in `cwd`.
fn with_roots(cwd: &Path) -> Session {
    let mut command = support::ccm();
    command.current_dir(cwd);
    command.arg("--conda-exe").arg(&support::fixture().conda);
    command.args(["--allow-write", "--confirm-writes"]);
    let mut s = Session::spawn(command);
    s.initialize = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25",
            "capabilities": {"roots": {}, "elicitation": {"form": {}}},
            "clientInfo": {"name": "ccm-tests", "version": "1"}}),
    );
    s.notify("notifications/initialized", json!({}));
    s
}

/// Call `tool`, answering `roots/list` with `roots` and declining the question: the
/// question's text.
fn question_with_roots(s: &mut Session, tool: &str, arguments: Value, roots: &[&Path]) -> String {
    let id = s.send("tools/call", json!({"name": tool, "arguments": arguments}));
    let roots: Vec<Value> = roots
        .iter()
        .map(|r| json!({"uri": format!("file://{}", r.display())}))
        .collect();
    let mut question = None;
    loop {
        let message = s
            .next(Duration::from_secs(60))
            .expect("the call's messages");
        let result = match message["method"].as_str() {
            Some("roots/list") => json!({"roots": roots}),
            Some("elicitation/create") => {
                question = message["params"]["message"].as_str().map(str::to_owned);
                json!({"action": "decline", "content": {}})
            }
            _ if message["id"] == id => break,
            _ => continue,
        };
        let reply = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
        s.write_raw(format!("{reply}\n").as_bytes());
    }
    question.expect("a question")
}

/// On the fixture conda, a client that declares roots (a handshake session; the
/// session-less revision has none): a target inside one of them is named with the
/// caution, the root named; a target outside them and the server's working directory is
/// not. (The server works elsewhere, so the working directory does not decide.)
#[test]
fn the_question_names_a_target_in_the_clients_roots() {
    let conda = &support::fixture().conda;
    let prefix = std::fs::canonicalize(conda.parent().unwrap().parent().unwrap()).unwrap();
    let holder = prefix.parent().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = std::fs::canonicalize(elsewhere.path()).unwrap();
    let line = format!(
        "\nTarget environment: {}\n",
        prefix.join("envs/t1").display()
    );
    let install = json!({"name": "t1", "packages": ["fixture-pkg"]});
    for (roots, cautioned) in [
        (vec![elsewhere.as_path(), holder], true),
        (vec![&elsewhere], false),
    ] {
        let mut s = with_roots(&elsewhere);
        let question = question_with_roots(&mut s, "conda_install", install.clone(), &roots);
        assert!(question.contains(&line), "{roots:?}: {question}");
        let caution = format!(
            "{line}  Caution: this environment lies inside the client's root {}, where the agent \
             can change files. ",
            holder.display()
        );
        assert_eq!(
            question.contains(&caution),
            cautioned,
            "{roots:?}: {question}"
        );
        assert_eq!(
            question.contains("Caution"),
            cautioned,
            "{roots:?}: {question}"
        );
    }
}

/// A script that, if conda ever ran it, would leave `marks/planted`.
fn plant(real: &Real, script: &str) {
    let path = real.path("project/env/bin").join(script);
    let mark = real.path("marks/planted");
    std::fs::write(&path, format!("#!/bin/sh\ntouch '{}'\n", mark.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The installed record of `name` in the project's environment.
fn record_path(real: &Real, name: &str) -> std::path::PathBuf {
    std::fs::read_dir(real.path("project/env/conda-meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{name}-")) && n.ends_with(".json"))
        })
        .unwrap_or_else(|| panic!("no record of {name}"))
}

fn installed(real: &Real) -> Vec<String> {
    let mut names: Vec<String> = real
        .installed("project/env")
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// An environment in the project (`project/env`, where the agent's file tools write),
/// made by the operator's conda: pkga (no scripts) and pkgd (its own pre-unlink script).
fn setup() -> Real {
    let real = Real::new();
    real.channel("conda-forge", "pkga=1.0", None);
    real.channel("conda-forge", "pkgc=1.0", None);
    let marks = real.path("marks").display().to_string();
    add_package(&real, &["--pre-unlink", &marks], "pkgd=1.0");
    // pkga and pkgc carry post-link scripts (`Real::channel`); pkgd a pre-unlink one.
    real.create(&real.path("project/env"), &["pkga", "pkgd"]);
    std::fs::remove_dir_all(real.path("marks")).unwrap();
    std::fs::create_dir(real.path("marks")).unwrap();
    real
}

/// `make_channel.py OPTIONS <conda-forge> SPEC`: one more package in the setup's channel.
fn add_package(real: &Real, options: &[&str], spec: &str) {
    let status = std::process::Command::new(support::python())
        .arg(support::repo().join("tests/fixtures/make_channel.py"))
        .args(options)
        .arg(real.path("conda-forge"))
        .arg(spec)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "make_channel.py {options:?} {spec}");
}

/// A server that writes with confirmation (stdio), whose runs hold where a test asks
/// (`meanwhile`): `CCM_TEST_HOLD_FETCHED` names the returned directory.
fn held_server(real: &Real) -> (Asking, std::path::PathBuf) {
    let hold = real.path("hold");
    std::fs::create_dir(&hold).unwrap();
    let mut env = real.env();
    env.push(("CCM_TEST_HOLD_FETCHED".into(), hold.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = Asking::start_in(
        REAL_ASKING[0],
        &support::real_conda(),
        &["--allow-write", "--confirm-writes"],
        &env,
        Some(&real.path("")),
    );
    (server, hold)
}

/// On a real conda: the planted scripts and the edited record stop the call (before the
/// question, or at the run when planted while it is open) and nothing of theirs runs; the
/// packages' own scripts run, and the environment is what the person agreed to. One way
/// of asking: the checks are made by the preview and the run, whichever way the person
/// was asked (the revisions are proven by `binding::`).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_code_planted_in_the_target_never_runs_in_a_confirmed_write() {
    let real = setup();
    let env = real.path("project/env").display().to_string();
    let victim = real.path("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let mut server: Asking =
        real.server_with(REAL_ASKING[0], &["--allow-write", "--confirm-writes"]);
    let remove_pkga = json!({"prefix": env, "package_names": ["pkga"]});

    // Planted before the question: the preview refuses, nobody is asked.
    plant(&real, ".pkga-pre-unlink.sh");
    let result = server.unasked("conda_remove", remove_pkga.clone());
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said
                .contains("pre-unlink script of pkga, and its package did not install that file"),
        "{result}"
    );
    std::fs::remove_file(real.path("project/env/bin/.pkga-pre-unlink.sh")).unwrap();

    // A post-link script waiting for a package to be installed.
    plant(&real, ".pkgc-post-link.sh");
    let result = server.unasked(
        "conda_install",
        json!({"prefix": env, "packages": ["pkgc"]}),
    );
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains(".pkgc-post-link.sh is in the target before pkgc is installed"),
        "{result}"
    );
    std::fs::remove_file(real.path("project/env/bin/.pkgc-post-link.sh")).unwrap();

    // Planted while the question is open: the run stops before the transaction.
    for (script, what) in [
        (".pkga-pre-unlink.sh", "pre-unlink script of pkga"),
        (".pkga-post-unlink.sh", "post-unlink script of pkga"),
    ] {
        let (_, result) = server.ask("conda_remove", remove_pkga.clone(), "accept", |_| {
            plant(&real, script)
        });
        assert_changed(&result, what, script);
        std::fs::remove_file(real.path("project/env/bin").join(script)).unwrap();
    }

    // The record of pkga edited while the question is open: a path outside the
    // environment added to what removing it deletes.
    let record = record_path(&real, "pkga");
    let original = std::fs::read(&record).unwrap();
    let (_, result) = server.ask("conda_remove", remove_pkga.clone(), "accept", |_| {
        let mut edited: Value = serde_json::from_slice(&original).unwrap();
        edited["files"]
            .as_array_mut()
            .unwrap()
            .push(json!("../../victim.txt"));
        std::fs::write(&record, edited.to_string()).unwrap();
    });
    assert_changed(
        &result,
        "'../../victim.txt', a path outside the environment",
        "record",
    );
    std::fs::write(&record, &original).unwrap();

    // A menu file planted and listed in the record (menuinst would delete the shortcuts
    // it names, wherever: attack 24 B6): not in pkga's package, so not asked.
    let mut edited: Value = serde_json::from_slice(&original).unwrap();
    edited["files"]
        .as_array_mut()
        .unwrap()
        .push(json!("Menu/pkga.json"));
    std::fs::write(&record, edited.to_string()).unwrap();
    std::fs::create_dir_all(real.path("project/env/Menu")).unwrap();
    std::fs::write(real.path("project/env/Menu/pkga.json"), "{}").unwrap();
    let result = server.unasked("conda_remove", remove_pkga.clone());
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains("as the menu file of pkga, and its package did not install"),
        "{result}"
    );
    std::fs::write(&record, &original).unwrap();
    std::fs::remove_dir_all(real.path("project/env/Menu")).unwrap();

    // conda hard-links the package cache's files into the environment: rewritten in
    // place there, the cache's copy changes with it (attack 26 G1, G2). pkgd's own
    // pre-unlink script rewritten: the removal is not asked (the package's record of the
    // file says otherwise); pkga's post-link script rewritten: a confirmed install of
    // pkga elsewhere (outside the project) stops before it links the cache's copy.
    let rewrite = |script: &str, text: &str| -> Vec<u8> {
        let path = real.path("project/env/bin").join(script);
        use std::os::unix::fs::MetadataExt;
        assert!(
            std::fs::metadata(&path).unwrap().nlink() > 1,
            "{script} is not linked"
        );
        let before = std::fs::read(&path).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        before
    };
    let planted = format!(
        "#!/bin/sh\ntouch '{}'\n",
        real.path("marks/planted").display()
    );
    let shipped = rewrite(".pkgd-pre-unlink.sh", &planted);
    let remove_pkgd = json!({"prefix": env, "package_names": ["pkgd"]});
    let result = server.unasked("conda_remove", remove_pkgd);
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains("pre-unlink script of pkgd, and its package did not install"),
        "{result}"
    );
    rewrite(
        ".pkgd-pre-unlink.sh",
        std::str::from_utf8(&shipped).unwrap(),
    );
    let shipped = rewrite(".pkga-post-link.sh", &planted);
    // A confirmed install of pkga into a new environment outside the project: stopped.
    let mut install_elsewhere = |name: &str, context: &str| {
        let prod = real.path("home").join(name).display().to_string();
        let (_, result) = server.ask(
            "conda_create",
            json!({"prefix": prod, "packages": ["pkga"]}),
            "accept",
            |_| {},
        );
        assert_changed(
            &result,
            "the package cache's copy of pkga changed since it was extracted: \
             bin/.pkga-post-link.sh is not the file the package holds",
            context,
        );
    };
    install_elsewhere("prod", "cache rewritten through the environment");
    // Rewritten, then its link in the environment removed: the cache's copy is the
    // rewritten file alone (attack 27 H1); the same install stops again.
    let linked = real.path("project/env/bin/.pkga-post-link.sh");
    let cached = real.path("pkgs/pkga-1.0-0/bin/.pkga-post-link.sh");
    std::fs::remove_file(&linked).unwrap();
    install_elsewhere("prod2", "cache rewritten, its link removed");
    std::fs::hard_link(&cached, &linked).unwrap();
    rewrite(".pkga-post-link.sh", std::str::from_utf8(&shipped).unwrap());
    assert!(
        !real.path("marks/planted").exists(),
        "a rewritten script ran"
    );

    // `conda-meta/state` made a symlink to a file outside: `env config vars set` would
    // rewrite that file (attack 27 H4). Not asked.
    let outside_state = real.path("outside-state.json");
    std::fs::write(&outside_state, "{\"keep\": \"me\"}").unwrap();
    let state = real.path("project/env/conda-meta/state");
    let _ = std::fs::remove_file(&state);
    std::os::unix::fs::symlink(&outside_state, &state).unwrap();
    let result = server.unasked(
        "conda_env_config_vars_set",
        json!({"prefix": env, "vars": ["A=1"]}),
    );
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains("conda-meta/state is a symlink: conda would write through it"),
        "{result}"
    );
    std::fs::remove_file(&state).unwrap();
    assert_eq!(
        std::fs::read_to_string(&outside_state).unwrap(),
        "{\"keep\": \"me\"}"
    );

    // `env update` of a file that names its environment, without --name or --prefix: the
    // target is the file's, known to conda only after the preview (attack 25 F1: the
    // question named the root prefix, the run changed the agent's environment). Not asked.
    let file = real.path("project/environment.yml");
    std::fs::write(&file, "name: victim\ndependencies:\n  - pkga\n").unwrap();
    let result = server.unasked(
        "conda_env_update",
        json!({"file": file.display().to_string()}),
    );
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains("`env update` without --name or --prefix updates the environment"),
        "{result}"
    );

    // A directory of the environment made a symlink to one outside (attack 24 B1): the
    // removal is not asked (its record's paths are known), the install stops when its
    // paths are (right before the transaction's first link), before anything is written.
    let outside = real.path("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), "keep me").unwrap();
    let share = real.path("project/env/share");
    std::fs::rename(share.join("pkga"), share.join("pkga.moved")).unwrap();
    std::os::unix::fs::symlink(&outside, share.join("pkga")).unwrap();
    let result = server.unasked("conda_remove", remove_pkga.clone());
    let said = text(&result);
    assert!(
        said.starts_with("confirmation_unavailable: the plan cannot be bound")
            && said.contains("whose directory leads outside the environment"),
        "{result}"
    );
    std::fs::remove_file(share.join("pkga")).unwrap();
    std::fs::rename(share.join("pkga.moved"), share.join("pkga")).unwrap();
    std::os::unix::fs::symlink(&outside, share.join("pkgc")).unwrap();
    let (_, result) = server.ask(
        "conda_install",
        json!({"prefix": env, "packages": ["pkgc"]}),
        "accept",
        |_| {},
    );
    assert_changed(&result, "/share/pkgc", "install");
    assert!(
        text(&result).contains(&format!("outside the environment {env}")),
        "{result}"
    );
    std::fs::remove_file(share.join("pkgc")).unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.join("data.txt")).unwrap(),
        "keep me"
    );

    assert!(!real.path("marks/planted").exists(), "a planted script ran");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(installed(&real), ["pkga", "pkgd"]);

    // The packages' own: pkgd's pre-unlink script (checked against the package cache)
    // runs, pkgc's post-link script too; pkga's removal deletes its own files. The
    // question says whose directory the environment lies in.
    let (question, result) = server.ask(
        "conda_remove",
        json!({"prefix": env, "package_names": ["pkga", "pkgd"]}),
        "accept",
        |_| {},
    );
    assert_eq!(result["isError"], false, "{result}");
    let setup = std::fs::canonicalize(real.path("")).unwrap();
    let shown = format!("\nTarget environment: {env}{}", caution(&setup));
    assert!(question.contains(&shown), "{question}");
    let (_, result) = server.ask(
        "conda_install",
        json!({"prefix": env, "packages": ["pkgc"]}),
        "accept",
        |_| {},
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(installed(&real), ["pkgc"]);
    assert_eq!(real.marks(), ["pkgc-1.0", "pkgd-1.0-pre-unlink"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

/// What the agent does while a confirmed run waits (`CCM_TEST_HOLD_FETCHED`, debug builds:
/// the run holds at `point` until the test is done): wait for the hold, do `change`, let
/// the run go on.
fn meanwhile(
    hold: &Path,
    point: &str,
    change: impl FnOnce() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (held, go) = (hold.join(point), hold.join("go"));
    let _ = std::fs::remove_file(&held);
    std::fs::write(hold.join(format!("{point}.wanted")), "").unwrap();
    std::thread::spawn(move || {
        for _ in 0..2400 {
            if held.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(held.exists(), "the run never reached {}", held.display());
        change();
        std::fs::write(go, "").unwrap();
    })
}

/// On a real conda: a post-link script planted once the packages are fetched — after the
/// transaction's first check, before its first script (a large package's download is
/// seconds: attack 24 B5) — stops the run before anything is linked; without a plant the
/// same install runs. So does a target named through a symlink turned once the packages
/// are fetched (attack 25 F2), and a directory above a target turned into a symlink once
/// `remove --all` has removed its packages, before conda deletes the target whole
/// (attack 26 G3). A package's file rewritten in the cache after the run's last check,
/// before the first link (attack 27 H2), changes nothing the run installs.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_change_after_the_fetch_or_before_the_deletion_stops_the_run() {
    let real = setup();
    // pkge: no script of its own; a file whose prefix conda replaces.
    add_package(&real, &["--prefix-file", "yes"], "pkge=1.0");
    let (mut server, hold) = held_server(&real);
    let env_dir = real.path("project/env").display().to_string();
    let install = json!({"prefix": env_dir, "packages": ["pkge"]});
    let planter = {
        let script = real.path("project/env/bin/.pkge-post-link.sh");
        let mark = real.path("marks/planted");
        meanwhile(&hold, "fetched", move || {
            std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\n", mark.display())).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        })
    };
    let (_, result) = server.ask("conda_install", install.clone(), "accept", |_| {});
    planter.join().unwrap();
    assert_changed(
        &result,
        ".pkge-post-link.sh is in the target before pkge is installed",
        "planted after the fetch",
    );
    assert!(
        text(&result).contains(
            "; nothing in the environment was linked, removed or run; the packages were \
             fetched into the package cache."
        ),
        "{result}"
    );
    assert!(
        !real.path("marks/planted").exists(),
        "the planted script ran"
    );
    assert_eq!(installed(&real), ["pkga", "pkgd"]);
    no_transaction_directory_left(&real);
    // Without the plant (the package is cached now: no fetch, no hold), it installs.
    // conda's transaction directory in the environment, `.condatmp`, is a symlink to a
    // directory outside: conda's verify wrote the file whose prefix it replaces there,
    // and its end-of-transaction deletion walks it (attack 28 I2, I3). The run uses a
    // transaction directory of its own: nothing is written or deleted there.
    std::fs::remove_file(real.path("project/env/bin/.pkge-post-link.sh")).unwrap();
    let elsewhere = real.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep.txt"), "keep me").unwrap();
    let condatmp = real.path("project/env/.condatmp");
    assert!(
        !condatmp.exists(),
        "conda made its transaction directory in the environment"
    );
    std::os::unix::fs::symlink(&elsewhere, &condatmp).unwrap();
    let (_, result) = server.ask("conda_install", install, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(installed(&real), ["pkga", "pkgd", "pkge"]);
    let left: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["keep.txt"], "written or deleted through .condatmp");
    std::fs::remove_file(&condatmp).unwrap();
    // Its prefix replaced in the run's checked copy (`stage_cached_packages`).
    assert_eq!(
        std::fs::read_to_string(real.path("project/env/etc/pkge.conf")).unwrap(),
        format!("prefix={}\n", real.path("project/env").display())
    );

    // The target named through a symlink the agent turns to its own environment once the
    // packages are fetched (attack 25 F2): the run stops before anything is linked.
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(real.path("project/env"))
        .arg(real.path("project/evil"))
        .status()
        .unwrap();
    assert!(status.success());
    let link = real.path("project/lnk");
    std::os::unix::fs::symlink(real.path("project/env"), &link).unwrap();
    let swapper = {
        let (link, evil) = (link.clone(), real.path("project/evil"));
        meanwhile(&hold, "fetched", move || {
            let turned = link.with_file_name("lnk.new");
            std::os::unix::fs::symlink(&evil, &turned).unwrap();
            std::fs::rename(&turned, &link).unwrap();
        })
    };
    let through = json!({"prefix": link.display().to_string(), "packages": ["pkgc"]});
    let (question, result) = server.ask("conda_install", through, "accept", |_| {});
    swapper.join().unwrap();
    assert!(
        question.contains("\n  Caution: this environment lies inside"),
        "{question}"
    );
    // Named through a symlink, it is shown with where it leads (attack 33 N3).
    assert!(
        question.contains(&format!(
            "\nTarget environment: {} (it leads to {})\n",
            link.display(),
            real.path("project/env").display()
        )),
        "{question}"
    );
    assert_changed(
        &result,
        &format!("the path {} now leads to ", link.display()),
        "target turned after the fetch",
    );
    let names = |env: &str| -> Vec<String> {
        let mut names: Vec<String> = real
            .installed(env)
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("project/evil"), ["pkga", "pkgd", "pkge"]);
    assert_eq!(installed(&real), ["pkga", "pkgd", "pkge"]);
    assert!(
        !real.marks().contains(&"pkgc-1.0".to_owned()),
        "{:?}",
        real.marks()
    );

    // `remove --all` of `project/a/gone`: once its packages are removed, `project/a` is
    // made a symlink to `victim`, which holds a `gone` of its own; conda would delete
    // `victim/gone` whole.
    let gone = real.path("project/a/gone");
    let (_, made) = server.ask(
        "conda_create",
        json!({"prefix": gone.display().to_string(), "packages": ["pkge"]}),
        "accept",
        |_| {},
    );
    assert_eq!(made["isError"], false, "{made}");
    std::fs::create_dir_all(real.path("victim/gone")).unwrap();
    std::fs::write(real.path("victim/gone/keep.txt"), "keep me").unwrap();
    let turner = {
        let (a, victim) = (real.path("project/a"), real.path("victim"));
        meanwhile(&hold, "deleting", move || {
            std::fs::rename(&a, a.with_file_name("a.moved")).unwrap();
            std::os::unix::fs::symlink(&victim, &a).unwrap();
        })
    };
    let all = json!({"prefix": gone.display().to_string(), "all": true, "yes": true});
    let (_, result) = server.ask("conda_remove", all, "accept", |_| {});
    turner.join().unwrap();
    assert_changed(
        &result,
        &format!("the path {} now leads to ", gone.display()),
        "a directory above the target turned before the deletion",
    );
    // The packages were removed by then: the result says so (attack 27 H6).
    assert!(
        text(&result).contains(
            "; the transaction ran, its packages' scripts included; the environment's \
             directory was not deleted."
        ),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(real.path("victim/gone/keep.txt")).unwrap(),
        "keep me"
    );

    // A directory of the environment swapped for a symlink to a directory elsewhere
    // after the run's last checks. conda creates the package's files there by path
    // (attack 30 K1: an entry point created in a cron directory, which root ran; K2:
    // another environment's files overwritten) and deletes what is in their way by path
    // (attack 29 J5; J2 and J4 reach the same deletion through the history's copy and
    // the rollback). The run creates and deletes through descriptors: the install fails
    // and rolls back, and nothing there is created, changed or deleted.
    let swap_at_linking = |victim: std::path::PathBuf| {
        let dir = real.path("project/env/share/pkgc");
        meanwhile(&hold, "linking", move || {
            std::fs::rename(&dir, dir.with_file_name("pkgc.old")).unwrap();
            std::os::unix::fs::symlink(&victim, &dir).unwrap();
        })
    };
    let listing = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = walkdir_names(dir);
        names.sort();
        names
    };
    let install_pkgc = json!({"prefix": env_dir, "packages": ["pkgc"]});
    for (victim, in_the_way) in [("victim3", false), ("victim2", true)] {
        let share = real.path("project/env/share/pkgc");
        let _ = std::fs::remove_dir_all(real.path("project/env/share/pkgc.old"));
        std::fs::create_dir_all(&share).unwrap();
        if in_the_way {
            std::fs::create_dir_all(share.join("data.txt")).unwrap();
            std::fs::write(share.join("data.txt/junk"), "junk").unwrap();
        }
        let victim = real.path(victim);
        std::fs::create_dir_all(victim.join("data.txt")).unwrap();
        std::fs::write(victim.join("data.txt/keep.txt"), "keep me").unwrap();
        if !in_the_way {
            std::fs::remove_dir_all(victim.join("data.txt")).unwrap();
            std::fs::write(victim.join("keep.txt"), "keep me").unwrap();
        }
        let before = listing(&victim);
        let swapper = swap_at_linking(victim.clone());
        let (_, result) = server.ask("conda_install", install_pkgc.clone(), "accept", |_| {});
        swapper.join().unwrap();
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            listing(&victim),
            before,
            "created or deleted elsewhere: {result}"
        );
        std::fs::remove_file(&share).unwrap();
    }
    assert!(!real.marks().contains(&"pkgc-1.0".to_owned()));

    // Once installed, a removal renames each file aside by path before it deletes it
    // (attack 30 K3): the package's directory swapped for a symlink at the `linking`
    // hold had another directory's file renamed. The run renames through descriptors:
    // the removal fails and rolls back, and nothing there is renamed.
    std::fs::remove_dir_all(real.path("project/env/share/pkgc.old")).unwrap();
    let (_, result) = server.ask("conda_install", install_pkgc.clone(), "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    let victim = real.path("victim4");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("data.txt"), "keep me").unwrap();
    let before = listing(&victim);
    let swapper = swap_at_linking(victim.clone());
    let remove_pkgc = json!({"prefix": env_dir, "package_names": ["pkgc"]});
    let (_, result) = server.ask("conda_remove", remove_pkgc, "accept", |_| {});
    swapper.join().unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(listing(&victim), before, "renamed elsewhere: {result}");
    assert_eq!(
        std::fs::read_to_string(victim.join("data.txt")).unwrap(),
        "keep me"
    );
    let share = real.path("project/env/share/pkgc");
    std::fs::remove_file(&share).unwrap();
    std::fs::rename(share.with_file_name("pkgc.old"), &share).unwrap();

    // `conda-meta/state` swapped for a symlink to another environment's state right when
    // conda reads it, after the run's checks (attack 28 I4: `env config vars set` then
    // rewrote that file, whose values that environment's activation runs): the run
    // stops; the other environment's state is untouched.
    let victim = real.path("prod-state/conda-meta/state");
    std::fs::create_dir_all(victim.parent().unwrap()).unwrap();
    std::fs::write(&victim, "{\"env_vars\": {\"KEEP\": \"me\"}}").unwrap();
    let swapper = {
        let (state, victim) = (real.path("project/env/conda-meta/state"), victim.clone());
        meanwhile(&hold, "state", move || {
            let _ = std::fs::remove_file(&state);
            std::os::unix::fs::symlink(&victim, &state).unwrap();
        })
    };
    let set = json!({"prefix": env_dir, "vars": ["B=2"]});
    let (_, result) = server.ask("conda_env_config_vars_set", set, "accept", |_| {});
    swapper.join().unwrap();
    assert_changed(
        &result,
        "conda-meta/state, or a directory above it, is a symlink or a file with other links now",
        "state swapped after the checks",
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "{\"env_vars\": {\"KEEP\": \"me\"}}"
    );
    std::fs::remove_file(real.path("project/env/conda-meta/state")).unwrap();

    // pkga's post-link script in the package cache, rewritten through the link the
    // project's environment keeps to it after the run's last check, right before the
    // first link (attack 27 H2: the agent sees the check read it by its access time). The
    // run links its own copies, checked as they were made: the package's own script
    // runs, and the environment made holds no link to the cache.
    let linked = real.path("project/env/bin/.pkga-post-link.sh");
    use std::os::unix::fs::MetadataExt;
    assert!(
        std::fs::metadata(&linked).unwrap().nlink() > 1,
        "not linked"
    );
    let shipped = std::fs::read(&linked).unwrap();
    let rewriter = {
        let (linked, mark) = (linked.clone(), real.path("marks/planted"));
        meanwhile(&hold, "linking", move || {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&linked)
                .unwrap();
            let text = format!("#!/bin/sh\ntouch '{}'\n", mark.display());
            std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        })
    };
    let prod = real.path("home/prod");
    let create = json!({"prefix": prod.display().to_string(), "packages": ["pkga"]});
    let (_, result) = server.ask("conda_create", create, "accept", |_| {});
    rewriter.join().unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        !real.path("marks/planted").exists(),
        "the script rewritten in the cache ran"
    );
    assert!(
        real.marks().contains(&"pkga-1.0".to_owned()),
        "{:?}",
        real.marks()
    );
    let script = prod.join("bin/.pkga-post-link.sh");
    assert_eq!(std::fs::read(&script).unwrap(), shipped);
    assert_eq!(std::fs::metadata(&script).unwrap().nlink(), 1);
    assert!(
        !prod.join(".condatmp").exists(),
        "the run's copies are left"
    );
    no_transaction_directory_left(&real);
}

/// The runs' own transaction directories (in the package cache) are gone, whether the
/// run ended or stopped.
fn no_transaction_directory_left(real: &Real) {
    let left: Vec<_> = std::fs::read_dir(real.path("pkgs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".ccm-transaction-"))
        .collect();
    assert!(left.is_empty(), "left in the package cache: {left:?}");
}

/// On a real conda: a package's `Menu/*.json`, once linked into an environment the agent
/// may write, is handed to menuinst at the end of the transaction; menuinst runs a menu
/// item's `precreate` as shell code. The agent's own menu file renamed over it a
/// millisecond after it appears had root run that code (attack 31 L3). The run reads the
/// menu file through descriptors, checks it against its package, and hands menuinst its
/// own copy: nothing of the agent's runs. An untouched menu installs and is removed.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_menu_file_swapped_once_linked_runs_nothing() {
    let real = setup();
    add_package(&real, &["--menu", "yes"], "pkgm=1.0");
    let mut server = real.server_with(REAL_ASKING[0], &["--allow-write", "--confirm-writes"]);

    // Untouched, in an environment of its own: menuinst is handed the run's copy of the
    // package's menu (an item for no platform: menuinst, which as root writes
    // system-wide, makes nothing), and the removal too.
    let plain = real.path("project/plain");
    real.create(&plain, &["pkga"]);
    let prefix = plain.display().to_string();
    let install = json!({"prefix": prefix, "packages": ["pkgm"]});
    let (_, result) = server.ask("conda_install", install, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert!(plain.join("Menu/pkgm.json").is_file());
    let remove = json!({"prefix": prefix, "package_names": ["pkgm"]});
    let (_, result) = server.ask("conda_remove", remove, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert!(!plain.join("Menu/pkgm.json").exists());

    // Swapped for the agent's own once linked.
    let ran = real.path("victim/PRECREATE_RAN");
    std::fs::create_dir_all(real.path("victim")).unwrap();
    std::fs::create_dir_all(real.path("project/env/Menu")).unwrap();
    let schema = "https://schemas.conda.io/menuinst-1.schema.json";
    let evil = json!({
        "$schema": schema, "$id": schema, "menu_name": "pkgm",
        "menu_items": [{"name": "pkgm", "description": "pkgm", "command": ["/bin/true"],
            "precreate": format!("id > '{}'", ran.display()),
            "platforms": {"linux": {}}}]
    });
    let planted = real.path("project/env/Menu/.evil.json");
    std::fs::write(&planted, evil.to_string()).unwrap();
    let watched = real.path("project/env/Menu/pkgm.json");
    let racer = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(240) {
            if std::fs::symlink_metadata(&watched).is_ok() {
                std::thread::sleep(Duration::from_millis(1));
                std::fs::rename(&planted, &watched).unwrap();
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    });
    let env_dir = real.path("project/env").display().to_string();
    let install = json!({"prefix": env_dir, "packages": ["pkgm"]});
    let (_, result) = server.ask("conda_install", install, "accept", |_| {});
    assert!(
        racer.join().unwrap(),
        "the menu file never appeared: {result}"
    );
    assert!(
        !ran.exists(),
        "the agent's precreate ran: {:?}; {result}",
        std::fs::read_to_string(&ran)
    );
    // Read before the swap, menuinst had the package's own menu; after, the action
    // stopped and conda rolled the install back.
    assert!(
        result["isError"] == false || text(&result).contains("menu file"),
        "stopped for another reason: {result}"
    );
}

/// On a real conda: `conda config --prefix ENV` reads `ENV/.condarc` and writes it back
/// by path after the run's checks. In an environment the agent may write, the file
/// swapped for a symlink once conda read it had root overwrite the file it led to with
/// the agent's YAML (attack 31 L4). The run reads and writes the file the question named
/// through descriptors: the write fails and the other file is untouched; untouched, the
/// file is written.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_config_file_swapped_while_conda_works_is_not_written_through() {
    let real = setup();
    let (mut server, hold) = held_server(&real);
    let victim = real.path("victim/secret");
    std::fs::create_dir_all(real.path("victim")).unwrap();
    std::fs::write(&victim, "root's secret\n").unwrap();
    let rc = real.path("project/env/.condarc");
    std::fs::write(&rc, "channels:\n  - defaults\n").unwrap();
    let prefix = real.path("project/env").display().to_string();
    let set = |value: &str| json!({"prefix": prefix, "set": [["auto_update_conda", value]]});
    let (_, result) = server.ask("conda_config", set("false"), "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    let written = std::fs::read_to_string(&rc).unwrap();
    assert!(
        written.contains("channels:\n  - defaults\n")
            && written.contains("auto_update_conda: false"),
        "{written}"
    );

    let swapper = {
        let (rc, victim) = (rc.clone(), victim.clone());
        meanwhile(&hold, "config", move || {
            let turned = rc.with_file_name(".condarc.new");
            std::os::unix::fs::symlink(&victim, &turned).unwrap();
            std::fs::rename(&turned, &rc).unwrap();
        })
    };
    let (_, result) = server.ask("conda_config", set("true"), "accept", |_| {});
    swapper.join().unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("condarc"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root's secret\n",
        "{result}"
    );

    // `--write-default` writes a new file with main_config's own `open`: a dangling
    // symlink put in its place once the run checked it would have had root create the
    // file it names.
    std::fs::remove_file(&rc).unwrap();
    let created = real.path("victim/created");
    let swapper = {
        let (rc, created) = (rc.clone(), created.clone());
        meanwhile(&hold, "config", move || {
            std::os::unix::fs::symlink(&created, &rc).unwrap();
        })
    };
    let default = json!({"prefix": prefix, "write_default": true});
    let (_, result) = server.ask("conda_config", default, "accept", |_| {});
    swapper.join().unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert!(!created.exists(), "created through the symlink: {result}");
    std::fs::remove_file(&rc).unwrap();
    let default = json!({"prefix": prefix, "write_default": true});
    let (_, result) = server.ask("conda_config", default, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert!(std::fs::read_to_string(&rc).unwrap().contains("channels"));
}

/// On a real conda: a target named by an environment file's `prefix:` (no `-n`/`-p`) is
/// the real path the question showed. Made a symlink to another environment while the
/// question was open, `create` deleted that environment whole (attack 33 N2); made one
/// once the packages were fetched, the install went there (N1). Each stops the run, and
/// nothing in the other environment changes.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_target_named_by_an_environment_file_is_where_the_question_showed() {
    let real = setup();
    let (mut server, hold) = held_server(&real);
    let victim = real.path("victimenv");
    real.create(&victim, &["pkga"]);
    std::fs::write(victim.join("keep.txt"), "keep me").unwrap();
    let listing = |dir: &Path| {
        let mut names = walkdir_names(dir);
        names.sort();
        names
    };
    let before = listing(&victim);
    let newenv = real.path("project/newenv");
    let file = real.path("project/environment.yml");
    let yml = format!("prefix: {}\ndependencies:\n  - pkgc\n", newenv.display());
    std::fs::write(&file, yml).unwrap();
    let create = json!({"file": [file.display().to_string()]});

    let (_, result) = server.ask("conda_env_create", create.clone(), "accept", |_| {
        std::os::unix::fs::symlink(&victim, &newenv).unwrap();
    });
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(listing(&victim), before, "{result}");
    std::fs::remove_file(&newenv).unwrap();

    let swapper = {
        let (newenv, victim) = (newenv.clone(), victim.clone());
        meanwhile(&hold, "fetched", move || {
            if newenv.is_dir() {
                std::fs::rename(&newenv, newenv.with_extension("moved")).unwrap();
            }
            std::os::unix::fs::symlink(&victim, &newenv).unwrap();
        })
    };
    let (_, result) = server.ask("conda_env_create", create.clone(), "accept", |_| {});
    swapper.join().unwrap();
    assert_changed(&result, "now leads to", "swapped once fetched");
    assert_eq!(listing(&victim), before, "{result}");
    assert!(!real.marks().contains(&"pkgc-1.0".to_owned()));

    // Without the sandbox the preview sees only conda's parse (no dry run), so no
    // transaction recorded the file's target and the question showed conda's default
    // prefix: a `prefix:` leading elsewhere had the install go there (attack 34 P1).
    let outside = real.path("victimdir");
    std::fs::create_dir(&outside).unwrap();
    std::fs::remove_file(&newenv).unwrap();
    std::os::unix::fs::symlink(&outside, &newenv).unwrap();
    let flags = ["--allow-write", "--confirm-writes", "--no-sandbox"];
    let mut unsandboxed = real.server_with(REAL_ASKING[0], &flags);
    let (_, result) = unsandboxed.ask("conda_env_create", create, "accept", |_| {});
    assert_changed(&result, "which the question did not show", "not previewed");
    assert!(walkdir_names(&outside).is_empty(), "{result}");
    assert!(!real.marks().contains(&"pkgc-1.0".to_owned()));
}

/// On a real conda: the file `export --file` names is written by conda by path once it has
/// read the target's records, after the run checked the path. Made a symlink to a file
/// elsewhere in between, root overwrote that file with the export (attack 35 Q3: the agent
/// sizes the window by the records it puts in the target). The run opens the file through
/// descriptors from its real path as the question showed it: a symlink there, or the
/// directory above it swapped for one, fails the export, and the other file keeps its
/// bytes; untouched, the export is written.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_output_file_swapped_once_checked_is_not_written_through() {
    let real = setup();
    let (mut server, hold) = held_server(&real);
    let victims = real.path("victim");
    // Named as conda's exporter wants it (the format follows from the name).
    let victim = victims.join("environment.yml");
    std::fs::create_dir_all(&victims).unwrap();
    std::fs::write(&victim, "root's secret\n").unwrap();
    let out_dir = real.path("project/out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("environment.yml");
    let export = json!({"prefix": real.path("project/env").display().to_string(),
        "file": out.display().to_string()});
    let unchanged = |result: &Value| {
        assert_eq!(result["isError"], true, "{result}");
        let now = std::fs::read_to_string(&victim).unwrap();
        assert_eq!(now, "root's secret\n", "{result}");
    };

    let swapper = {
        let (out, victim) = (out.clone(), victim.clone());
        meanwhile(&hold, "written", move || {
            std::os::unix::fs::symlink(&victim, &out).unwrap();
        })
    };
    let (_, result) = server.ask("conda_export", export.clone(), "accept", |_| {});
    swapper.join().unwrap();
    unchanged(&result);
    std::fs::remove_file(&out).unwrap();

    let aside = real.path("project/out.aside");
    let swapper = {
        let (out_dir, aside, victims) = (out_dir.clone(), aside.clone(), victims.clone());
        meanwhile(&hold, "written", move || {
            std::fs::rename(&out_dir, &aside).unwrap();
            std::os::unix::fs::symlink(&victims, &out_dir).unwrap();
        })
    };
    let (_, result) = server.ask("conda_export", export.clone(), "accept", |_| {});
    swapper.join().unwrap();
    unchanged(&result);
    std::fs::remove_file(&out_dir).unwrap();
    std::fs::rename(&aside, &out_dir).unwrap();

    let (_, result) = server.ask("conda_export", export, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("pkga"), "{written}");
    assert_eq!(walkdir_names(&victims), ["environment.yml"]);

    // A directory on the way that is the agent's symlink before the question (attack 37
    // S2): the question shows where the file leads.
    let linked = real.path("project/linked");
    std::os::unix::fs::symlink(&victims, &linked).unwrap();
    // Each asked with the line that says where it leads, declined, nothing written.
    let leads = std::fs::canonicalize(&victim).unwrap();
    let mut declined = |file: String| {
        let export = json!({"prefix": real.path("project/env").display().to_string(),
            "file": file});
        let (question, result) = server.ask("conda_export", export, "decline", |_| {});
        let line = format!("\nPath: {file} (it leads to {})\n", leads.display());
        assert!(question.contains(&line), "{line} not in {question}");
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's secret\n");
    };
    declined(linked.join("environment.yml").display().to_string());

    // A path that reads like a URL (`out:` a directory, here the agent's symlink): a
    // path to conda, so to the question and the run too (attack 39 U1).
    std::os::unix::fs::symlink(&victims, real.path("project/out:")).unwrap();
    declined(format!(
        "{}://environment.yml",
        real.path("project/out").display()
    ));

    // The same with a scheme conda fetches, `https:` the agent's symlink in the working
    // directory: conda opens the value as written (attack 40 V1).
    std::os::unix::fs::symlink(&victims, real.path("https:")).unwrap();
    declined("https://environment.yml".to_owned());
    std::fs::remove_file(real.path("https:")).unwrap();

    // A `$VAR` the run expands, where conda would have opened the text (attack 38 T1):
    // the question says where it leads, and the accepted run writes there.
    std::fs::create_dir_all(real.path("home")).unwrap();
    let export = json!({"prefix": real.path("project/env").display().to_string(),
        "file": "$HOME/environment.yml"});
    let (question, result) = server.ask("conda_export", export, "accept", |_| {});
    let home = std::fs::canonicalize(real.path("home")).unwrap();
    let line = format!(
        "\nPath: $HOME/environment.yml (it leads to {})\n",
        home.join("environment.yml").display()
    );
    assert!(question.contains(&line), "{line} not in {question}");
    assert_eq!(result["isError"], false, "{result}");
    assert!(home.join("environment.yml").is_file(), "{result}");
}

/// On a real conda: an input file named by a `file://` URL with a host or `%XX` escapes
/// is the file conda's `url_to_path` reads (the local host dropped, the escapes decoded):
/// the question names it and binds its bytes. Read as the text after `://`, it was shown
/// as a file of the working directory that does not exist, "read at run time, not
/// bound", while conda read a file outside the project (attack 42 X1).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_input_file_url_names_the_file_conda_reads() {
    let real = setup();
    let (mut server, _hold) = held_server(&real);
    let victims = real.path("victim");
    std::fs::create_dir_all(&victims).unwrap();
    let spec = "dependencies:\n  - pkgc\n";
    std::fs::write(victims.join("env.yml"), spec).unwrap();
    let env = real.path("project/env").display().to_string();
    let abs = victims.join("env.yml").display().to_string();
    let project = real.path("project").display().to_string();
    let urls = [
        (format!("file://localhost{abs}"), abs.clone()),
        (
            format!("file://{project}/%2e%2e/victim/env.yml"),
            format!("{project}/../victim/env.yml"),
        ),
    ];
    for (url, path) in &urls {
        let args = json!({"prefix": env, "file": [url]});
        let (question, result) = server.ask("conda_install", args, "decline", |_| {});
        let line = format!(
            "Input file \"{url}\" ({path}): {} bytes, sha256 ",
            spec.len()
        );
        assert!(question.contains(&line), "{line} not in {question}");
        assert_eq!(result["isError"], true, "{result}");
    }
    let args = json!({"prefix": env, "file": [urls[0].0]});
    let (_, result) = server.ask("conda_install", args, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert!(installed(&real).contains(&"pkgc".to_owned()), "{result}");
}

/// On a real conda: a package (of the agent's local channel, say) that holds a symlink
/// leading outside the environment. conda copies an absolute one by reading through it,
/// as root: any file's bytes landed in the environment. A relative one that climbs out
/// had root's compile of a noarch package's sources write `.pyc` files through it
/// (attack 35 Q1). Either stops the run before anything is linked; a symlink that stays
/// inside installs as conda makes it.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_package_symlink_leading_outside_installs_nothing() {
    let real = setup();
    let victims = real.path("victim");
    std::fs::create_dir_all(&victims).unwrap();
    let secret = victims.join("secret");
    std::fs::write(&secret, "root's secret\n").unwrap();
    let absolute = format!("share/leak={}", secret.display());
    add_package(&real, &["--softlink", &absolute], "leaka=1.0");
    // From the environment's `lib/`: up to the environment, the project, the setup.
    add_package(
        &real,
        &["--softlink", "lib/__pycache__=../../../victim"],
        "leakb=1.0",
    );
    add_package(
        &real,
        &["--softlink", "share/alias=leakc/data.txt"],
        "leakc=1.0",
    );
    let mut server = real.server_with(REAL_ASKING[0], &["--allow-write", "--confirm-writes"]);
    let env = real.path("project/env");
    let install = |name: &str| json!({"prefix": env.display().to_string(), "packages": [name]});
    for (name, link) in [
        ("leaka", format!("share/leak to {}", secret.display())),
        ("leakb", "lib/__pycache__ to ../../../victim".to_owned()),
    ] {
        let (_, result) = server.ask("conda_install", install(name), "accept", |_| {});
        assert_changed(&result, &format!("holds a symlink {link}, outside"), name);
        assert_eq!(installed(&real), ["pkga", "pkgd"], "{name}");
    }
    assert!(!env.join("share/leak").exists() && !env.join("lib/__pycache__").exists());
    let (_, result) = server.ask("conda_install", install("leakc"), "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(installed(&real), ["leakc", "pkga", "pkgd"]);
    let alias = std::fs::read_link(env.join("share/alias")).unwrap();
    assert_eq!(alias, Path::new("leakc/data.txt"));
    assert_eq!(walkdir_names(&victims), ["secret"]);
}

/// On a real conda: `doctor --fix` reads the target's `conda-meta/pinned`, prints the lines
/// it drops and writes the rest back, by path. Made a symlink to a root-only file, it had
/// root print that file's lines to the agent and rewrite it (attack 36 R2). A symlink there
/// is refused before anyone is asked; swapped in once the run checked it, right before the
/// write, the write fails; untouched, the fix drops the spec of a package not installed.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_doctor_fix_reads_and_writes_only_the_targets_pinned_file() {
    let real = setup();
    let (mut server, hold) = held_server(&real);
    let victims = real.path("victim");
    std::fs::create_dir_all(&victims).unwrap();
    let victim = victims.join("secrets.conf");
    let secret = "# root's\nAPI_TOKEN=s3cr3t\n";
    std::fs::write(&victim, secret).unwrap();
    let pinned = real.path("project/env/conda-meta/pinned");
    std::os::unix::fs::symlink(&victim, &pinned).unwrap();
    let fix = json!({"prefix": real.path("project/env").display().to_string(), "fix": true,
        "yes": true, "checks": ["pinned"]});
    let result = server.unasked("conda_doctor", fix.clone());
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("pinned is a symlink"), "{result}");
    assert!(!result.to_string().contains("s3cr3t"), "{result}");

    std::fs::remove_file(&pinned).unwrap();
    std::fs::write(&pinned, "# pins\npkga\nnotinstalled\n").unwrap();
    let swapper = {
        let (pinned, victim) = (pinned.clone(), victim.clone());
        meanwhile(&hold, "written", move || {
            std::fs::remove_file(&pinned).unwrap();
            std::os::unix::fs::symlink(&victim, &pinned).unwrap();
        })
    };
    let (_, result) = server.ask("conda_doctor", fix.clone(), "accept", |_| {});
    swapper.join().unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        secret,
        "{result}"
    );

    std::fs::remove_file(&pinned).unwrap();
    std::fs::write(&pinned, "# pins\npkga\nnotinstalled\n").unwrap();
    let (_, result) = server.ask("conda_doctor", fix, "accept", |_| {});
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(std::fs::read_to_string(&pinned).unwrap(), "# pins\npkga\n");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), secret);
}
