//! Hard links are names, not places: a file in an allowed directory may be another name of
//! a file outside every one (the user's `~/.condarc`, a shell start-up file), and conda
//! opening it writes or reads that file. What an agent with file tools in its project
//! plants or swaps: a hard link named by a call (`config --file`, `compare`), a hard link
//! where conda writes in place inside a target environment (`conda-meta/history`, which
//! every transaction appends to), each planted beforehand and swapped in while the
//! question is open. The fixture conda proves the refusals offline; `real_conda_*` prove
//! on conda 26.7 that nothing outside is written, unasked and confirmed.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::binding::{ASKING, Asking, Real, Revision, assert_changed, real_asking, text};
use crate::mcp::Session;
use crate::support;

const OUTSIDE: &str = "Operation names a path outside the allowed directories (see --allow-paths)";
const LINKED: &str = "Operation's target environment holds a file with other links that conda would write in place (--write-envs)";

const VICTIM: &str = "# the user's shell rc\n";

/// A project the agent's file tools reach, and a directory outside it holding the victim.
struct Place {
    _dir: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new() -> Place {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (project, outside) = (base.join("project"), base.join("outside"));
        std::fs::create_dir_all(project.join("env/conda-meta")).unwrap();
        std::fs::write(project.join("env/conda-meta/history"), "").unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim.sh"), VICTIM).unwrap();
        Place {
            _dir: dir,
            project,
            outside,
        }
    }

    /// `name` (in the project) made a hard link to the victim, replacing what was there.
    fn link(&self, name: &str) {
        link_victim(&self.outside, &self.project.join(name));
    }
}

fn link_victim(outside: &Path, path: &Path) {
    let fresh = path.with_extension("ccm-new");
    std::fs::hard_link(outside.join("victim.sh"), &fresh).unwrap();
    std::fs::rename(&fresh, path).unwrap();
}

/// `path` made a plain file holding `text` again (a new inode: writing through a hard
/// link would write the victim).
fn plain(path: &Path, text: &str) {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, text).unwrap();
}

fn refusal(fixed: &str, flags: &str) -> (i64, String) {
    (-32600, support::refused(fixed, flags))
}

/// `--allow-paths`, offline: a named hard link (bare word, relative, through a symlink,
/// read or written) and a target prefix whose history is a hard link are refused as paths
/// outside, never naming the path; the same names as plain files run.
#[test]
fn hard_links_in_an_allowed_directory_lead_outside() {
    let place = Place::new();
    place.link("x.yml");
    place.link("notes.yml");
    std::os::unix::fs::symlink("x.yml", place.project.join("to-link")).unwrap();
    std::fs::write(place.project.join("own.yml"), "channels: []\n").unwrap();
    let allowed = place.project.display().to_string();
    let mut s = Session::start(
        &support::fixture().conda,
        &["--allow-write", "--allow-paths", &allowed],
    );
    let set = json!([["channels", "https://attacker.example/chan"]]);
    let env = place.project.join("env").display().to_string();
    let calls = [
        (
            "conda_config",
            json!({"file": "x.yml", "append": set, "ccm_cwd": allowed}),
        ),
        (
            "conda_config",
            json!({"file": "./x.yml", "append": set, "ccm_cwd": allowed}),
        ),
        (
            "conda_config",
            json!({"file": "to-link", "append": set, "ccm_cwd": allowed}),
        ),
        (
            "conda_install",
            json!({"file": ["notes.yml"], "name": "t1", "ccm_cwd": allowed}),
        ),
    ];
    for (tool, arguments) in calls {
        let (code, message) = s.call_error(tool, arguments);
        assert_eq!(
            (code, message.as_str()),
            (-32600, refusal(OUTSIDE, "--allow-paths").1.as_str()),
            "{tool}"
        );
        assert!(
            !message.contains("x.yml") && !message.contains("notes"),
            "{message}"
        );
    }
    // The history of a target named by path.
    place.link("env/conda-meta/history");
    let install = json!({"prefix": env, "packages": ["fixture-pkg"]});
    assert_eq!(
        s.call_error("conda_install", install.clone()),
        refusal(OUTSIDE, "--allow-paths")
    );
    // Plain files: the same calls run.
    std::fs::write(place.project.join("env/conda-meta/history.plain"), "").unwrap();
    std::fs::rename(
        place.project.join("env/conda-meta/history.plain"),
        place.project.join("env/conda-meta/history"),
    )
    .unwrap();
    let ok = s.call("conda_install", install);
    assert!(ok["structuredContent"]["exit_code"].is_i64(), "{ok}");
    let ok = s.call(
        "conda_config",
        json!({"file": "own.yml", "append": set, "ccm_cwd": allowed}),
    );
    assert!(ok["structuredContent"]["exit_code"].is_i64(), "{ok}");
    assert_eq!(
        std::fs::read_to_string(place.outside.join("victim.sh")).unwrap(),
        VICTIM
    );
}

/// `--write-envs`, offline: a target environment (named by path, in the scope) whose
/// history is a hard link is refused; an unlinked one is admitted.
#[test]
fn a_target_whose_history_is_a_hard_link_is_refused() {
    let place = Place::new();
    let env = place.project.join("env").display().to_string();
    let mut s = Session::start(
        &support::fixture().conda,
        &["--allow-write", "--write-envs", &env],
    );
    let install = json!({"prefix": env, "packages": ["fixture-pkg"]});
    let ok = s.call("conda_install", install.clone());
    assert!(ok["structuredContent"]["exit_code"].is_i64(), "{ok}");
    place.link("env/conda-meta/history");
    assert_eq!(
        s.call_error("conda_install", install),
        refusal(LINKED, "--write-envs")
    );
}

/// The fixture's index and condarc, for a server that asks.
fn asking(revision: Revision, place: &Place, args: &[&str]) -> Asking {
    let base = place.project.parent().unwrap();
    let (index, condarc, tmp) = (
        base.join("index.json"),
        base.join("condarc"),
        base.join("tmp"),
    );
    std::fs::write(&index, "{}").unwrap();
    std::fs::write(&condarc, "channels:\n  - fixture-channel\n").unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    Asking::start(
        revision,
        &support::fixture().conda,
        args,
        &[
            ("CONDA_FIXTURE_INDEX", index.to_str().unwrap()),
            ("CONDARC", condarc.to_str().unwrap()),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    )
}

/// `--confirm-writes`, offline: a file named by the call (an install's `--file`, the file
/// `config --file` writes), and the target's history, swapped for a hard link while the
/// question is open: refused after the answer under `--allow-paths` and `--write-envs`;
/// stopped by the bound run (`plan_changed`) when neither is set. Under every revision
/// that can ask.
#[test]
fn a_hard_link_swapped_in_while_the_question_is_open_does_not_run() {
    for revision in ASKING {
        let context = format!("{revision:?}");
        let place = Place::new();
        std::fs::write(place.project.join("x.yml"), "fixture-pkg\n").unwrap();
        let cwd = place.project.display().to_string();
        let env = place.project.join("env").display().to_string();
        let from_file = json!({"file": ["x.yml"], "name": "t1", "ccm_cwd": cwd});
        let install = json!({"prefix": env, "packages": ["fixture-pkg"]});
        let set = json!([["channels", "https://attacker.example/chan"]]);
        let config = json!({"file": "x.yml", "append": set, "ccm_cwd": cwd});
        let confined = ["--allow-write", "--confirm-writes", "--allow-paths", &cwd];
        let mut server = asking(revision, &place, &confined);
        for (tool, arguments) in [("conda_install", &from_file), ("conda_config", &config)] {
            let (_, result) =
                server.ask(tool, arguments.clone(), "accept", |_| place.link("x.yml"));
            assert_refused(&result, "outside_allowed_paths", revision, &context);
            plain(&place.project.join("x.yml"), "fixture-pkg\n");
        }
        let (_, result) = server.ask("conda_install", install.clone(), "accept", |_| {
            place.link("env/conda-meta/history")
        });
        assert_refused(&result, "outside_allowed_paths", revision, &context);
        plain(&place.project.join("env/conda-meta/history"), "");
        // Without --allow-paths over HTTP the transport's default scope would refuse the
        // project at arrival (`confinement_follows_the_transport_not_the_revision`): the
        // whole file system, as stdio has by default.
        let scoped = unconfined(
            revision,
            &["--allow-write", "--confirm-writes", "--write-envs", &env],
        );
        let mut server = asking(revision, &place, &scoped);
        let (_, result) = server.ask("conda_install", install.clone(), "accept", |_| {
            place.link("env/conda-meta/history")
        });
        assert_refused(&result, "outside_write_envs", revision, &context);
        plain(&place.project.join("env/conda-meta/history"), "");
        // Neither: the bound run checks each file by identity and link count.
        let neither = unconfined(revision, &["--allow-write", "--confirm-writes"]);
        let mut server = asking(revision, &place, &neither);
        for (tool, arguments) in [("conda_install", from_file), ("conda_config", config)] {
            let (question, result) = server.ask(tool, arguments, "accept", |_| place.link("x.yml"));
            assert!(
                question.contains(&format!("{cwd}/x.yml")),
                "{context}: {question}"
            );
            assert_changed(&result, "x.yml now names another file", &context);
            plain(&place.project.join("x.yml"), "fixture-pkg\n");
        }
        let (_, result) = server.ask("conda_install", install, "accept", |_| {
            place.link("env/conda-meta/history")
        });
        assert_changed(
            &result,
            "conda-meta/history of the target environment has ",
            &context,
        );
        assert_eq!(
            std::fs::read_to_string(place.outside.join("victim.sh")).unwrap(),
            VICTIM
        );
    }
}

/// `args` for a server that confines nothing: over HTTP (the session-less revision here)
/// with `--allow-paths /`, since HTTP's default scope is the server's working directory
/// and conda's own places, where stdio's is unrestricted.
pub(crate) fn unconfined<'a>(revision: Revision, args: &[&'a str]) -> Vec<&'a str> {
    let mut args = args.to_vec();
    if matches!(revision, Revision::SessionLess) {
        args.extend(["--allow-paths", "/"]);
    }
    args
}

/// A call refused after the question with the stable word `word` (an `isError` result from
/// 2025-11-25 on; a JSON-RPC error before, which `Asking::ask` gives as no result).
fn assert_refused(result: &serde_json::Value, word: &str, revision: Revision, context: &str) {
    if matches!(revision, Revision::Handshake("2025-06-18")) {
        assert!(result.is_null(), "{context}: {result}");
        return;
    }
    assert_eq!(result["isError"], true, "{context}: {result}");
    assert!(text(result).starts_with(word), "{context}: {result}");
}

/// On a real conda, `--allow-paths`, nobody asked: `config --file` of a hard link to a
/// file outside (the attacker's channel into the user's rc), `export --file` over one,
/// `compare` reading one, and an install into an environment of the project whose
/// history is a hard link to a shell start-up file: all refused, the outside file
/// unchanged, no post-link script run. The same environment unlinked installs.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_hard_links_write_nothing_outside_the_allowed_directories() {
    let real = Real::new();
    let project = std::fs::canonicalize(real.path("project")).unwrap();
    let outside = std::fs::canonicalize(real.path(""))
        .unwrap()
        .join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.sh"), VICTIM).unwrap();
    for name in ["x.yml", "export.yml", "notes.yml"] {
        link_victim(&outside, &project.join(name));
    }
    // The post-link script's marks directory is allowed too: the write bound holds a
    // script to the allowed directories, and the control install below must run it.
    let allowed = format!(
        "{},{},{}",
        project.display(),
        real.path("conda-forge").display(),
        real.path("marks").display()
    );
    let env = real.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut s = Session::start_with(
        &support::real_conda(),
        &["--allow-write", "--allow-paths", &allowed],
        &env,
    );
    let cwd = project.display().to_string();
    let set = json!([["channels", "https://attacker.example/chan"]]);
    let calls = [
        (
            "conda_config",
            json!({"file": "x.yml", "append": set, "ccm_cwd": cwd}),
        ),
        (
            "conda_export",
            json!({"file": "export.yml", "ccm_cwd": cwd}),
        ),
        (
            "conda_compare",
            json!({"file": "notes.yml", "name": "base", "ccm_cwd": cwd}),
        ),
    ];
    for (tool, arguments) in calls {
        assert_eq!(
            s.call_error(tool, arguments),
            refusal(OUTSIDE, "--allow-paths"),
            "{tool}"
        );
    }
    // An (empty) environment of the project: conda knows one by its history.
    let prefix = project.join("env").display().to_string();
    std::fs::create_dir_all(project.join("env/conda-meta")).unwrap();
    link_victim(&outside, &project.join("env/conda-meta/history"));
    let install = json!({"prefix": prefix, "packages": ["barpkg"]});
    assert_eq!(
        s.call_error("conda_install", install.clone()),
        refusal(OUTSIDE, "--allow-paths")
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.sh")).unwrap(),
        VICTIM
    );
    assert_eq!(real.marks(), Vec::<String>::new());
    plain(&project.join("env/conda-meta/history"), "");
    let ok = s.call("conda_install", install);
    assert_eq!(ok["structuredContent"]["exit_code"], 0, "{ok}");
    assert_eq!(real.marks(), vec!["barpkg-1.0".to_owned()]);
}

/// On a real conda, `--confirm-writes`: `config --file x.yml` of a plain file in the
/// project is asked about (the file shown); while the question is open, `x.yml` is
/// swapped for a hard link to a file outside (the attacker's channel into the user's
/// rc). Accepting writes nothing outside: refused after the answer under `--allow-paths`,
/// stopped by the bound run (`plan_changed`, naming the file) without it. Under every
/// revision that can ask.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_hard_link_swapped_in_while_a_config_question_is_open_writes_nothing_outside() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        let project = std::fs::canonicalize(real.path("project")).unwrap();
        let outside = std::fs::canonicalize(real.path(""))
            .unwrap()
            .join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim.sh"), VICTIM).unwrap();
        let cwd = project.display().to_string();
        let set = json!([["channels", "https://attacker.example/chan"]]);
        let call = json!({"file": "x.yml", "append": set, "ccm_cwd": cwd});
        let confined = ["--allow-write", "--confirm-writes", "--allow-paths", &cwd];
        let neither = unconfined(revision, &["--allow-write", "--confirm-writes"]);
        for args in [&confined[..], &neither[..]] {
            plain(&project.join("x.yml"), "channels: []\n");
            let mut server = real.server_with(revision, args);
            let (question, result) = server.ask("conda_config", call.clone(), "accept", |_| {
                link_victim(&outside, &project.join("x.yml"))
            });
            assert!(
                question.contains(&format!("Configuration file: {cwd}/x.yml")),
                "{context}: {question}"
            );
            if args.contains(&cwd.as_str()) {
                assert_refused(&result, "outside_allowed_paths", revision, &context);
            } else {
                assert_changed(&result, "x.yml now names another file", &context);
            }
            assert_eq!(
                std::fs::read_to_string(outside.join("victim.sh")).unwrap(),
                VICTIM,
                "{context}"
            );
        }
        // The control: the same call, nothing swapped, writes the file it showed.
        plain(&project.join("x.yml"), "channels: []\n");
        let mut server = real.server_with(revision, &neither);
        let (_, result) = server.ask("conda_config", call.clone(), "accept", |_| ());
        assert_eq!(
            result["structuredContent"]["exit_code"], 0,
            "{context}: {result}"
        );
        let written = std::fs::read_to_string(project.join("x.yml")).unwrap();
        assert!(written.contains("attacker.example"), "{context}: {written}");
    }
}
