//! Paths are judged where they lead, when they are used: a bare word in the working
//! directory that is a symlink (`--allow-paths`), a directory swapped for a symlink while
//! a person decides (`--confirm-writes`: the target prefix, an output file, the working
//! directory), and the audit log, which no child ever writes. What an agent with file
//! tools in its project would plant or swap; the fixture conda proves the mechanics
//! offline, `real_conda_*` prove them on conda 26.7 with local channels whose packages
//! run a post-link script.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::binding::{ASKING, FixtureSetup, Real, Revision, assert_changed, real_asking, text};
use crate::mcp::Session;
use crate::support;

const OUTSIDE: &str = "Operation names a path outside the allowed directories (see --allow-paths)";

/// Replace the directory `dir` by a symlink to `target` (the old one kept beside it), as
/// an agent's file tools would while the question is open.
fn swap_for_link(dir: &Path, target: &Path) {
    let old = dir.with_extension("old");
    std::fs::rename(dir, &old).unwrap();
    std::os::unix::fs::symlink(target, dir).unwrap();
}

fn refusal() -> (i64, String) {
    (-32600, support::refused(OUTSIDE, "--allow-paths"))
}

/// A call refused after the question with the stable word `word` (an `isError` result from
/// 2025-11-25 on; a JSON-RPC error before, which `Asking::ask` gives as no result).
fn assert_refused(result: &Value, word: &str, revision: Revision, context: &str) {
    if matches!(revision, Revision::Handshake("2025-06-18")) {
        assert!(result.is_null(), "{context}: {result}");
        return;
    }
    assert_eq!(result["isError"], true, "{context}: {result}");
    assert!(text(result).starts_with(word), "{context}: {result}");
}

/// `--allow-paths`, offline: a bare word naming a symlink in the working directory is
/// judged where the symlink leads (it was never resolved: only tokens with a `/` were).
#[test]
fn a_bare_word_that_is_a_symlink_is_judged_where_it_leads() {
    let scope = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(scope.path()).unwrap().join("project");
    std::fs::create_dir_all(project.join("env")).unwrap();
    std::os::unix::fs::symlink("/etc", project.join("envlink")).unwrap();
    std::os::unix::fs::symlink("/etc", project.join(".hidden")).unwrap();
    let allowed = project.to_str().unwrap();
    let mut s = Session::start(&support::fixture().conda, &["--allow-paths", allowed]);
    for word in ["envlink", ".hidden"] {
        let arguments = json!({"prefix": word, "ccm_cwd": allowed});
        assert_eq!(s.call_error("conda_list", arguments), refusal(), "{word}");
    }
    // A real directory, and a word that names nothing, stay inside.
    for word in ["env", "not-there"] {
        let ok = s.call("conda_list", json!({"prefix": word, "ccm_cwd": allowed}));
        assert!(
            ok["structuredContent"]["exit_code"].is_i64(),
            "{word}: {ok}"
        );
    }
}

/// `--confirm-writes`, offline: the target prefix's parent and the working directory
/// swapped for symlinks while the question is open stop the run with `plan_changed`
/// naming where the path leads now; nothing is installed there.
#[test]
fn a_directory_swapped_while_the_question_is_open_does_not_run() {
    for revision in ASKING {
        let context = format!("{revision:?}");
        let setup = FixtureSetup::new();
        let root = std::fs::canonicalize(setup.path("")).unwrap();
        let envs = root.join("project/envs");
        let outside = root.join("outside");
        std::fs::create_dir_all(&envs).unwrap();
        std::fs::create_dir_all(root.join("project/sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let mut server = setup.server(revision);
        let prefix = envs.join("t1").display().to_string();
        let install = json!({"prefix": prefix, "packages": ["fixture-pkg"]});
        let (question, result) = server.ask("conda_install", install, "accept", |_| {
            swap_for_link(&envs, &outside);
        });
        assert!(question.contains(&prefix), "{context}: {question}");
        let what = format!("now leads to {}", outside.join("t1").display());
        assert_changed(&result, &what, &context);
        assert!(!outside.join("t1").exists(), "{context}");
        // The working directory.
        let sub = root.join("project/sub");
        let install = json!({"name": "t1", "packages": ["fixture-pkg"],
            "ccm_cwd": sub.display().to_string()});
        let (question, result) = server.ask("conda_install", install, "accept", |_| {
            swap_for_link(&sub, &outside);
        });
        assert!(
            question.contains(&format!("Working directory: {}", sub.display())),
            "{context}: {question}"
        );
        let what = format!(
            "the working directory {} now is {}",
            sub.display(),
            outside.display()
        );
        assert_changed(&result, &what, &context);
    }
}

/// The real conda's root prefix.
fn root_prefix() -> PathBuf {
    let conda = support::real_conda();
    conda.parent().unwrap().parent().unwrap().to_path_buf()
}

/// `--allow-paths` on a real conda: a symlink the agent planted in its project, named by
/// a bare word, leads nowhere outside — `config --file rc` (a write; also through a
/// dangling link, which conda would follow to create the file), `create -p envlink` (an
/// environment and its post-link script), `compare envfile.yml` (a read). The same words
/// naming real entries in the project work.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_bare_word_symlinks_do_not_lead_outside_the_allowed_directories() {
    let real = Real::new();
    let project = std::fs::canonicalize(real.path("project")).unwrap();
    let outside = std::fs::canonicalize(real.path(""))
        .unwrap()
        .join("outside");
    std::fs::create_dir_all(outside.join("realdir")).unwrap();
    std::fs::write(outside.join("victim.sh"), "# the user's shell rc\n").unwrap();
    std::fs::write(outside.join("secret.yml"), "dependencies:\n  - numpy\n").unwrap();
    let link = |name: &str, to: &str| {
        std::os::unix::fs::symlink(outside.join(to), project.join(name)).unwrap()
    };
    link("rc", "victim.sh");
    link("envlink", "realdir");
    link("envfile.yml", "secret.yml");
    link("newrc", "created.sh"); // dangling: conda would create the file outside
    let allowed = format!(
        "{},{}",
        project.display(),
        real.path("conda-forge").display()
    );
    let env = real.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut s = Session::start_with(
        &support::real_conda(),
        &["--allow-write", "--allow-paths", &allowed],
        &env,
    );
    let cwd = project.display().to_string();
    let set = json!([["channel_alias", "https://evil.example"]]);
    let calls = [
        (
            "conda_config",
            json!({"file": "rc", "set": set, "ccm_cwd": cwd}),
        ),
        (
            "conda_config",
            json!({"file": "newrc", "set": set, "ccm_cwd": cwd}),
        ),
        (
            "conda_create",
            json!({"prefix": "envlink", "packages": ["barpkg"], "yes": true, "ccm_cwd": cwd}),
        ),
        (
            "conda_compare",
            json!({"file": "envfile.yml", "name": "base", "ccm_cwd": cwd}),
        ),
    ];
    for (tool, arguments) in calls {
        assert_eq!(s.call_error(tool, arguments), refusal(), "{tool}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.sh")).unwrap(),
        "# the user's shell rc\n"
    );
    assert_eq!(
        std::fs::read_dir(outside.join("realdir")).unwrap().count(),
        0
    );
    assert!(!outside.join("created.sh").exists());
    assert_eq!(real.marks(), Vec::<String>::new());
    // The same bare words naming the project's own entries.
    let ok = s.call(
        "conda_config",
        json!({"file": "own.yml", "set": set, "ccm_cwd": cwd}),
    );
    assert_eq!(ok["structuredContent"]["exit_code"], 0, "{ok}");
    let written = std::fs::read_to_string(project.join("own.yml")).unwrap();
    assert!(
        written.contains("channel_alias: https://evil.example"),
        "{written}"
    );
}

/// `--confirm-writes` on a real conda: what the person saw is where the write lands.
/// While the question is open the agent swaps the target prefix's parent, an output
/// file's name and the working directory for symlinks to a directory outside; each run
/// stops with `plan_changed` naming where the path leads now, nothing is written there
/// and no post-link script runs. The question for `config --file` names the file conda
/// writes, not an environment.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_confirmed_write_lands_where_the_question_said() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        let base = std::fs::canonicalize(real.path("")).unwrap();
        let (project, outside) = (base.join("project"), base.join("outside"));
        for dir in ["project/envs", "project/sub", "outside"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        std::fs::write(outside.join("victim.yml"), "# outside\n").unwrap();
        std::fs::write(project.join("x.yml"), "channels: []\n").unwrap();
        let mut server = real.server_with(revision, &["--allow-write", "--confirm-writes"]);
        // The target prefix's parent.
        let envs = project.join("envs");
        let prefix = envs.join("e1").display().to_string();
        let arguments = json!({"prefix": prefix, "packages": ["barpkg"]});
        let (question, result) = server.ask("conda_create", arguments, "accept", |_| {
            swap_for_link(&envs, &outside)
        });
        assert!(
            question.contains(&format!("Target environment: {prefix}")),
            "{context}: {question}"
        );
        let what = format!("now leads to {}", outside.join("e1").display());
        assert_changed(&result, &what, &context);
        assert!(!outside.join("e1").exists(), "{context}");
        assert_eq!(real.marks(), Vec::<String>::new(), "{context}");
        // An output file.
        let cwd = project.display().to_string();
        let set = json!([["channel_alias", "https://evil.example"]]);
        let arguments = json!({"file": "x.yml", "set": set, "ccm_cwd": cwd});
        let (question, result) = server.ask("conda_config", arguments, "accept", |_| {
            std::fs::remove_file(project.join("x.yml")).unwrap();
            std::os::unix::fs::symlink(outside.join("victim.yml"), project.join("x.yml")).unwrap();
        });
        assert!(
            question.contains(&format!(
                "Configuration file: {}",
                project.join("x.yml").display()
            )),
            "{context}: {question}"
        );
        assert!(
            !question.contains("Target environment"),
            "{context}: {question}"
        );
        let what = format!("now leads to {}", outside.join("victim.yml").display());
        assert_changed(&result, &what, &context);
        let victim = std::fs::read_to_string(outside.join("victim.yml")).unwrap();
        assert_eq!(victim, "# outside\n", "{context}");
        // The working directory.
        let sub = project.join("sub");
        let arguments = json!({"file": "exported.yml", "format": "environment-yaml",
            "prefix": root_prefix(), "ccm_cwd": sub});
        let (_, result) = server.ask("conda_export", arguments, "accept", |_| {
            swap_for_link(&sub, &outside)
        });
        let what = format!(
            "the working directory {} now is {}",
            sub.display(),
            outside.display()
        );
        assert_changed(&result, &what, &context);
        assert!(!outside.join("exported.yml").exists(), "{context}");
    }
}

/// The same swap under `--allow-paths`: the paths are judged again after the answer,
/// where they lead now, and the call is refused as one naming a path outside.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_allowed_paths_are_judged_again_after_the_answer() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        let base = std::fs::canonicalize(real.path("")).unwrap();
        let (envs, outside) = (base.join("project/envs"), base.join("outside"));
        std::fs::create_dir_all(&envs).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let allowed = format!(
            "{},{}",
            base.join("project").display(),
            real.path("conda-forge").display()
        );
        let args = [
            "--allow-write",
            "--confirm-writes",
            "--allow-paths",
            &allowed,
        ];
        let mut server = real.server_with(revision, &args);
        let prefix = envs.join("e1").display().to_string();
        let arguments = json!({"prefix": prefix, "packages": ["barpkg"]});
        let (_, result) = server.ask("conda_create", arguments, "accept", |_| {
            swap_for_link(&envs, &outside)
        });
        assert_refused(&result, "outside_allowed_paths", revision, &context);
        assert!(!outside.join("e1").exists(), "{context}");
        assert_eq!(real.marks(), Vec::<String>::new(), "{context}");
    }
}

/// The audit log is never written by a child: an output file named in a confirmed call,
/// swapped for a symlink to the log while the question is open, is refused after the
/// answer (device and inode), and the log keeps every line.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_confirmed_write_never_reaches_the_audit_log() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        let base = std::fs::canonicalize(real.path("")).unwrap();
        let project = base.join("project");
        std::fs::create_dir_all(base.join("outside")).unwrap();
        let log = base.join("outside/audit.jsonl");
        let log_text = log.display().to_string();
        let args = [
            "--allow-write",
            "--confirm-writes",
            "--audit-log",
            &log_text,
        ];
        let mut server = real.server_with(revision, &args);
        let info = server.unasked("conda_info", json!({}));
        assert_eq!(info["isError"], false, "{context}: {info}");
        let before = std::fs::read_to_string(&log).unwrap();
        assert!(!before.is_empty(), "{context}");
        let arguments = json!({"file": "out.yml", "format": "environment-yaml",
            "prefix": root_prefix(), "ccm_cwd": project});
        let (_, result) = server.ask("conda_export", arguments, "accept", |_| {
            std::os::unix::fs::symlink(&log, project.join("out.yml")).unwrap()
        });
        assert_refused(&result, "names_audit_log", revision, &context);
        let after = std::fs::read_to_string(&log).unwrap();
        assert!(after.starts_with(&before), "{context}: {after}");
        for line in after.lines() {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("{context}: {e}: {line}"));
        }
    }
}

/// Every revision offered, over each transport: an install into an environment of a
/// project outside the server's working directory, from that project. Where the
/// operator gave no `--allow-paths`, stdio confines nothing and HTTP confines to its
/// default scope (the server's working directory, conda's root prefix, `~/.conda/envs`):
/// the transport decides, never the revision — the session-less revision over stdio is
/// admitted as the handshake ones are, and every revision over HTTP is refused. With
/// `--allow-paths` naming the project, every revision is admitted on both transports.
#[test]
fn confinement_follows_the_transport_not_the_revision() {
    use crate::http::{HttpServer, TOKEN, open_session_at, post_raw, post_stateless, request};
    let dir = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(dir.path()).unwrap().join("project");
    std::fs::create_dir_all(project.join("env/conda-meta")).unwrap();
    std::fs::write(project.join("env/conda-meta/history"), "").unwrap();
    let cwd = project.display().to_string();
    let env = project.join("env").display().to_string();
    let arguments = json!({"prefix": env, "packages": ["fixture-pkg"], "ccm_cwd": cwd});
    let params = json!({"name": "conda_install", "arguments": arguments});
    let revisions = ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"];
    let admitted = |answer: &Value, context: &str| {
        assert!(
            answer["result"]["structuredContent"]["exit_code"].is_i64(),
            "{context}: {answer}"
        );
    };
    let refused = |answer: &Value, revision: &str, context: &str| {
        let message = support::refused(OUTSIDE, "--allow-paths");
        if revision < "2025-11-25" {
            assert_eq!(answer["error"]["code"], -32600, "{context}: {answer}");
            assert_eq!(answer["error"]["message"], message, "{context}: {answer}");
        } else {
            let text = text(&answer["result"]);
            assert_eq!(answer["result"]["isError"], true, "{context}: {answer}");
            assert_eq!(
                text,
                format!("outside_allowed_paths: {message}"),
                "{context}"
            );
        }
    };
    for confined in [false, true] {
        let mut args = vec!["--allow-write"];
        if confined {
            args.extend(["--allow-paths", cwd.as_str()]);
        }
        for revision in revisions {
            let context = format!("stdio {revision}, --allow-paths given: {confined}");
            let (mut s, meta) = Session::at_revision(&support::fixture().conda, revision, &args);
            let mut call = params.clone();
            call["_meta"] = meta;
            admitted(&s.request("tools/call", call), &context);
        }
        let server = HttpServer::start(&args, &[("CCM_MCP_TOKEN", TOKEN)]);
        for (id, revision) in (1..).zip(revisions) {
            let context = format!("HTTP {revision}, --allow-paths given: {confined}");
            let answer = if revision == "2026-07-28" {
                post_stateless(&server.url, id, "tools/call", params.clone()).response()
            } else {
                let session = open_session_at(&server.url, revision);
                let body = request(id, "tools/call", params.clone()).to_string();
                let headers = [("MCP-Protocol-Version", revision)];
                post_raw(&server.url, Some(&session), &headers, body.as_bytes()).response()
            };
            if confined {
                admitted(&answer, &context);
            } else {
                refused(&answer, revision, &context);
            }
        }
    }
}
