//! `--confirm-writes` binds the confirmed run to the plan that was shown: what an agent
//! changes while the question is open (a package index, an input file, the condarc) stops
//! the run with `plan_changed`, under every revision that can ask (handshake elicitation,
//! and the session-less revision's parked plans); the question shows what decides the run
//! (stdin, the working directory, the environment, full channel URLs, deletions). The
//! fixture conda proves the mechanics offline under every such revision; `real_conda_*`
//! prove them on conda 26.7, over each way of asking, with local channels whose packages
//! run a post-link script.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::HttpServer;
use crate::kit::tree::walkdir_names;
use crate::mcp::Session;
use crate::support;

/// How the person is asked.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Revision {
    /// A handshake revision over stdio: `elicitation/create`.
    Handshake(&'static str),
    /// 2026-07-28 over HTTP: the input-required result, the plan parked, the retry.
    SessionLess,
}

/// Every revision that can ask the person.
pub(crate) const ASKING: [Revision; 3] = [
    Revision::Handshake("2025-06-18"),
    Revision::Handshake("2025-11-25"),
    Revision::SessionLess,
];

/// The revisions the real-conda tests ask over: each way of asking once. The handshake
/// revisions ask alike (`elicitation/create` in a stdio session; the server tells them
/// apart only in how it returns invalid arguments, `Caller::arguments_as_results`), so
/// the real-conda tests take the newest, 2025-11-25; the fixture tests ask over every
/// revision of [`ASKING`]. What conda does with an answer does not depend on how it was
/// asked.
pub(crate) const REAL_ASKING: [Revision; 2] =
    [Revision::Handshake("2025-11-25"), Revision::SessionLess];

/// The revisions a real-conda test that asks loops over: both of [`REAL_ASKING`], or the
/// one `CCM_TEST_REAL_ASKING` names (`handshake` or `session-less`; anything else fails
/// the test). CI runs the stock suite under one and the plugin suite under the other, so
/// each way of asking meets real conda in every run at half the CPU (`.ci/run`).
pub(crate) fn real_asking() -> Vec<Revision> {
    match std::env::var("CCM_TEST_REAL_ASKING").as_deref() {
        Err(std::env::VarError::NotPresent) => REAL_ASKING.to_vec(),
        Ok("handshake") => vec![REAL_ASKING[0]],
        Ok("session-less") => vec![REAL_ASKING[1]],
        other => panic!("CCM_TEST_REAL_ASKING={other:?}: expected handshake or session-less"),
    }
}

/// A server that asks, over the revision's transport.
pub(crate) enum Asking {
    Stdio(Box<Session>),
    Http(HttpServer, i64),
}

impl Asking {
    pub(crate) fn start(
        revision: Revision,
        conda: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Asking::start_in(revision, conda, args, env, None)
    }

    /// `start`, the server working in `cwd` (over HTTP the default `--allow-paths` scope).
    pub(crate) fn start_in(
        revision: Revision,
        conda: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        cwd: Option<&Path>,
    ) -> Self {
        match revision {
            Revision::Handshake(version) => {
                let mut command = support::ccm();
                if let Some(cwd) = cwd {
                    command.current_dir(cwd);
                }
                command.arg("--conda-exe").arg(conda).args(args);
                command.envs(env.iter().copied());
                let mut session = Session::spawn(command);
                session.initialize = session.request(
                    "initialize",
                    json!({"protocolVersion": version,
                        "capabilities": {"elicitation": {"form": {}}},
                        "clientInfo": {"name": "ccm-binding-tests", "version": "1"}}),
                );
                assert_eq!(
                    session.initialize["result"]["protocolVersion"], version,
                    "{}",
                    session.initialize
                );
                session.notify("notifications/initialized", json!({}));
                Asking::Stdio(Box::new(session))
            }
            Revision::SessionLess => {
                let mut env = env.to_vec();
                env.push(("CCM_MCP_TOKEN", crate::http::TOKEN));
                Asking::Http(
                    HttpServer::start_for_in(conda, "127.0.0.1:0", args, &env, cwd),
                    1,
                )
            }
        }
    }

    /// Call `tool`; while the question is open, `meanwhile` gets its text; then the
    /// person answers `action`. The question and the call's `result`.
    pub(crate) fn ask(
        &mut self,
        tool: &str,
        arguments: Value,
        action: &str,
        meanwhile: impl FnOnce(&str),
    ) -> (String, Value) {
        let params = json!({"name": tool, "arguments": arguments});
        let answer = json!({"action": action, "content": {}});
        match self {
            Asking::Stdio(session) => {
                let call = session.send("tools/call", params);
                let question = next_question(session);
                let message = question["params"]["message"].as_str().unwrap().to_owned();
                meanwhile(&message);
                let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": answer});
                session.write_raw(format!("{reply}\n").as_bytes());
                let response = session
                    .wait(call, Duration::from_secs(300))
                    .unwrap_or_else(|| panic!("no answer: {}", session.stderr.lock().unwrap()));
                (message, response["result"].clone())
            }
            Asking::Http(server, id) => {
                *id += 2;
                let first = crate::confirm::stateless_call(&server.url, *id, params.clone());
                let result = &first["result"];
                assert_eq!(
                    result["resultType"],
                    "input_required",
                    "{first}\n{}",
                    server.stderr()
                );
                let message = result["inputRequests"]["confirm"]["params"]["message"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                meanwhile(&message);
                let mut retry = params;
                retry["requestState"] = result["requestState"].clone();
                retry["inputResponses"] = json!({"confirm": answer});
                let response = crate::confirm::stateless_call(&server.url, *id + 1, retry);
                (message, response["result"].clone())
            }
        }
    }
}

impl Asking {
    /// Call `tool` expecting no question: the call's `result`.
    pub(crate) fn unasked(&mut self, tool: &str, arguments: Value) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        match self {
            Asking::Stdio(session) => session.request("tools/call", params)["result"].clone(),
            Asking::Http(server, id) => {
                *id += 2;
                let answer = crate::confirm::stateless_call(&server.url, *id, params);
                assert_ne!(answer["result"]["resultType"], "input_required", "{answer}");
                answer["result"].clone()
            }
        }
    }
}

fn next_question(session: &mut Session) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while std::time::Instant::now() < deadline {
        if let Some(message) = session.next(Duration::from_secs(1)) {
            if message["method"] == "elicitation/create" {
                return message;
            }
            // The call answered without asking: say how, at once.
            assert!(
                message.get("result").is_none() && message.get("error").is_none(),
                "no question, answered: {message}"
            );
        }
    }
    panic!("no question: {}", session.stderr.lock().unwrap());
}

/// The text of a result.
pub(crate) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A result that stopped with `plan_changed`, naming `what`.
pub(crate) fn assert_changed(result: &Value, what: &str, context: &str) {
    assert_eq!(result["isError"], true, "{context}: {result}");
    let text = text(result);
    assert!(text.starts_with("plan_changed: "), "{context}: {result}");
    assert!(text.contains(what), "{context}: {what:?} not in {text}");
}

/// The fixture with an index, a spec file and a condarc of the test's own.
pub(crate) struct FixtureSetup {
    dir: tempfile::TempDir,
}

impl FixtureSetup {
    pub(crate) fn new() -> FixtureSetup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.json"), "{}").unwrap();
        std::fs::write(dir.path().join("specs.txt"), "fixture-pkg\n").unwrap();
        std::fs::write(
            dir.path().join("condarc"),
            "channels:\n  - fixture-channel\n",
        )
        .unwrap();
        FixtureSetup { dir }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn server(&self, revision: Revision) -> Asking {
        let index = self.path("index.json");
        let condarc = self.path("condarc");
        let tmp = self.path("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        Asking::start(
            revision,
            &support::fixture().conda,
            &["--allow-write", "--allow-paths", "/", "--confirm-writes"],
            &[
                ("CONDA_FIXTURE_INDEX", index.to_str().unwrap()),
                ("CONDARC", condarc.to_str().unwrap()),
                ("TMPDIR", tmp.to_str().unwrap()),
            ],
        )
    }

    /// The server's directory that keeps the plan of the open question.
    fn kept_plan(&self) -> PathBuf {
        let mut kept: Vec<PathBuf> = std::fs::read_dir(self.path("tmp"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("plan.json").is_file())
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        kept.pop().unwrap()
    }
}

/// What an agent changes while the question is open, on the fixture: the package index
/// (another version from another channel), a `--file` spec list, the condarc. Each stops
/// the run with `plan_changed` naming the change, under every revision that can ask; the
/// same plan unchanged runs.
#[test]
fn a_plan_changed_while_the_question_is_open_does_not_run() {
    for revision in ASKING {
        let setup = FixtureSetup::new();
        let mut server = setup.server(revision);
        let context = format!("{revision:?}");
        let install = json!({"name": "t1", "packages": ["fixture-pkg"]});
        let (question, result) = server.ask("conda_install", install.clone(), "accept", |_| {
            let other = json!({"fixture-pkg": {"version": "9.9",
                "channel": "https://elsewhere.invalid/other"}});
            std::fs::write(setup.path("index.json"), other.to_string()).unwrap();
        });
        assert!(
            question.contains("\nInstall (1):\n  fixture-pkg 1.0 0 (https://fixture.invalid/fixture-channel/noarch, md5 "),
            "{context}: {question}"
        );
        assert_changed(
            &result,
            "package fixture-pkg to install: version changed from 1.0 to 9.9",
            &context,
        );
        std::fs::write(setup.path("index.json"), "{}").unwrap();
        let specs = setup.path("specs.txt");
        let from_file = json!({"name": "t1", "file": [specs.to_str().unwrap()]});
        let (question, result) = server.ask("conda_install", from_file, "accept", |_| {
            std::fs::write(&specs, "fixture-other\n").unwrap();
        });
        assert!(
            question.contains(&format!(
                "Input file {:?} ({}): 12 bytes, sha256 ",
                specs.to_str().unwrap(),
                specs.display()
            )),
            "{context}: {question}"
        );
        assert!(
            question.contains("\n  | fixture-pkg\n"),
            "{context}: {question}"
        );
        assert_changed(
            &result,
            &format!(
                "the input file {} changed after the question",
                specs.display()
            ),
            &context,
        );
        std::fs::write(&specs, "fixture-pkg\n").unwrap();
        let (_, result) = server.ask("conda_install", install.clone(), "accept", |_| {
            let condarc = "channels:\n  - evil-channel\n  - fixture-channel\n";
            std::fs::write(setup.path("condarc"), condarc).unwrap();
        });
        assert_changed(&result, "the configuration changed: channels in ", &context);
        std::fs::write(setup.path("condarc"), "channels:\n  - fixture-channel\n").unwrap();
        // What the server keeps for the run is checked too: the plan, and the copies.
        let (_, result) = server.ask("conda_install", install.clone(), "accept", |_| {
            let plan = setup.kept_plan().join("plan.json");
            let text = std::fs::read_to_string(&plan).unwrap();
            std::fs::write(&plan, text.replace("\"1.0\"", "\"9.9\"")).unwrap();
        });
        assert_changed(&result, "the plan kept for this run was changed", &context);
        let from_file = json!({"name": "t1", "file": [specs.to_str().unwrap()]});
        let (_, result) = server.ask("conda_install", from_file, "accept", |_| {
            let copy = setup.kept_plan().join("files/0/specs.txt");
            std::fs::write(copy, "fixture-other\n").unwrap();
        });
        assert_changed(&result, "the copy of the input file ", &context);
        // Unchanged: the plan runs, conda reading exactly the argv that was shown.
        let (_, result) = server.ask("conda_install", install, "accept", |_| {});
        assert_eq!(result["isError"], false, "{context}: {result}");
        assert_eq!(
            result["structuredContent"]["parsed_json"]["argv"],
            json!(["install", "fixture-pkg", "--name=t1"]),
            "{context}: {result}"
        );
    }
}

/// A real conda with local channels of its own: `conda-forge/` (a local directory named
/// like the well-known channel) holds `barpkg 1.0`, `other/` holds `barpkg 9.9`; each
/// package's post-link script leaves `marks/barpkg-VERSION` behind.
pub(crate) struct Real {
    dir: tempfile::TempDir,
    /// The home directory, beside the setup's directory rather than in it: the servers
    /// work in the setup's directory, which under the HTTP default scope a bounded write
    /// writes whole only when it holds no home directory.
    home: tempfile::TempDir,
}

impl Real {
    pub(crate) fn new() -> Real {
        let made = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
                .unwrap()
        };
        let real = Real {
            dir: made("ccm-binding-"),
            home: made("ccm-binding-home-"),
        };
        for sub in ["home", "pkgs", "tmp", "marks", "project"] {
            std::fs::create_dir_all(real.path(sub)).unwrap();
        }
        real.channel("conda-forge", "barpkg=1.0", None);
        real.channel("other", "barpkg=9.9", None);
        real.condarc(&["conda-forge"]);
        real
    }

    /// A path of the setup: `home` and below it in the home directory, the rest in the
    /// setup's directory.
    pub(crate) fn path(&self, sub: &str) -> PathBuf {
        match sub.strip_prefix("home") {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                self.home.path().join(rest.trim_start_matches('/'))
            }
            _ => self.dir.path().join(sub),
        }
    }

    pub(crate) fn url(&self, channel: &str) -> String {
        format!("file://{}", self.path(channel).display())
    }

    /// Build (or rebuild, and index anew) a package in a local channel.
    pub(crate) fn channel(&self, name: &str, package: &str, payload: Option<&str>) {
        let mut command = std::process::Command::new(support::python());
        command
            .arg(support::repo().join("tests/fixtures/make_channel.py"))
            .arg("--post-link")
            .arg(self.path("marks"));
        if let Some(payload) = payload {
            command.args(["--payload", payload]);
        }
        let status = command
            .arg(self.path(name))
            .arg(package)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// An environment at `prefix` with `packages` from the channels, made by conda itself
    /// (no server).
    pub(crate) fn create(&self, prefix: &Path, packages: &[&str]) {
        let status = std::process::Command::new(support::real_conda())
            .args(["create", "-y", "--json", "-p"])
            .arg(prefix)
            .args(packages)
            .envs(self.env())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "conda create -p {}", prefix.display());
    }

    fn condarc(&self, channels: &[&str]) {
        let mut text = String::from("channels:\n");
        for channel in channels {
            text.push_str(&format!("  - {}\n", self.url(channel)));
        }
        std::fs::write(self.path("condarc"), text).unwrap();
    }

    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let p = |s: &str| self.path(s).display().to_string();
        vec![
            ("HOME".into(), p("home")),
            ("XDG_CONFIG_HOME".into(), p("home/.config")),
            ("XDG_CACHE_HOME".into(), p("home/.cache")),
            ("CONDARC".into(), p("condarc")),
            ("CONDA_PKGS_DIRS".into(), p("pkgs")),
            ("TMPDIR".into(), p("tmp")),
            ("CONDA_OFFLINE".into(), "1".into()),
            ("CONDA_OVERRIDE_CUDA".into(), String::new()),
        ]
    }

    fn server(&self, revision: Revision) -> Asking {
        self.server_with(revision, &["--allow-write", "--confirm-writes"])
    }

    /// A server on the real conda with these flags (and this setup's environment).
    pub(crate) fn server_with(&self, revision: Revision, args: &[&str]) -> Asking {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        // In the setup's own directory: the HTTP default scope is the working directory,
        // and the repository's build directory holds hard-linked files a bounded write
        // would have to un-share (docs/security.md, "Shared files in the places").
        Asking::start_in(
            revision,
            &support::real_conda(),
            args,
            &env,
            Some(&self.path("")),
        )
    }

    /// Post-link scripts that ran.
    pub(crate) fn marks(&self) -> Vec<String> {
        let mut marks: Vec<String> = std::fs::read_dir(self.path("marks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        marks.sort();
        marks
    }

    /// The package records installed in the environment `env`.
    pub(crate) fn installed(&self, env: &str) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(self.path(env).join("conda-meta")) else {
            return Vec::new();
        };
        entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect()
    }
}

/// What an agent changes while the question is open.
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// `env create -f environment.yml`: the file now names the other channel and 9.9.
    EnvironmentFile,
    /// `create --file specs.txt` (both channels configured): the list now asks for 9.9.
    SpecFile,
    /// `barpkg 1.0 0` rebuilt with other bytes, and the channel indexed anew.
    Rebuilt,
    /// The other channel prepended to the condarc's channels.
    Condarc,
    /// `create` over a plain project directory, made an environment while the question
    /// is open (an empty `conda-meta/history`): conda would delete the directory whole
    /// before installing (attack 17 A17-3).
    BecameEnvironment,
}

impl Attack {
    /// The call, and what `plan_changed` must name.
    fn call(self, real: &Real) -> (&'static str, Value, String) {
        let prefix = real.path("env").display().to_string();
        match self {
            Attack::EnvironmentFile => {
                let file = real.path("project/environment.yml");
                let text = format!(
                    "name: bound\nchannels:\n  - {}\ndependencies:\n  - barpkg\n",
                    real.url("conda-forge")
                );
                std::fs::write(&file, text).unwrap();
                let what = format!(
                    "the input file {} changed after the question",
                    file.display()
                );
                let args = json!({"prefix": prefix, "file": [file.display().to_string()]});
                ("conda_env_create", args, what)
            }
            Attack::SpecFile => {
                real.condarc(&["conda-forge", "other"]);
                let file = real.path("project/specs.txt");
                std::fs::write(&file, "barpkg=1.0\n").unwrap();
                let what = format!(
                    "the input file {} changed after the question",
                    file.display()
                );
                let args = json!({"prefix": prefix, "file": [file.display().to_string()]});
                ("conda_create", args, what)
            }
            Attack::Rebuilt => {
                let args = json!({"prefix": prefix, "packages": ["barpkg"]});
                let what = "package barpkg to install: md5 changed from ".to_owned();
                ("conda_create", args, what)
            }
            Attack::BecameEnvironment => {
                let project = real.path("project");
                std::fs::write(project.join("keep.txt"), "the agent's sources\n").unwrap();
                let args = json!({"prefix": project, "packages": ["barpkg"], "yes": true});
                let what = format!(
                    "the target {} was a directory that is not an environment when the \
                     question was asked and is an environment now",
                    project.display()
                );
                ("conda_create", args, what)
            }
            Attack::Condarc => {
                let args = json!({"prefix": prefix, "packages": ["barpkg"]});
                let what = format!(
                    "the configuration changed: channels in {}",
                    real.path("condarc").display()
                );
                ("conda_create", args, what)
            }
        }
    }

    fn tamper(self, real: &Real) {
        match self {
            Attack::EnvironmentFile => {
                let text = format!(
                    "name: bound\nchannels:\n  - {}\ndependencies:\n  - barpkg=9.9\n",
                    real.url("other")
                );
                std::fs::write(real.path("project/environment.yml"), text).unwrap();
            }
            Attack::SpecFile => {
                std::fs::write(real.path("project/specs.txt"), "barpkg=9.9\n").unwrap();
            }
            Attack::Rebuilt => real.channel("conda-forge", "barpkg=1.0", Some("rebuilt\n")),
            Attack::Condarc => real.condarc(&["other", "conda-forge"]),
            Attack::BecameEnvironment => {
                let meta = real.path("project/conda-meta");
                std::fs::create_dir_all(&meta).unwrap();
                std::fs::write(meta.join("history"), "").unwrap();
            }
        }
    }
}

/// On a real conda, each attack while the question is open: nothing is installed, no
/// post-link script runs, and the result is `plan_changed` naming the change; over each
/// way of asking ([`REAL_ASKING`]). One setup and one server per revision (on the plugin
/// conda every server start is a live discovery: docs/performance.md); each attack
/// starts from the setup's condarc, and the one before it installed nothing.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_plan_changed_while_the_question_is_open_installs_nothing() {
    for revision in real_asking() {
        let real = Real::new();
        let mut server = real.server(revision);
        for attack in [
            Attack::EnvironmentFile,
            Attack::SpecFile,
            Attack::Rebuilt,
            Attack::Condarc,
            Attack::BecameEnvironment,
        ] {
            let context = format!("{revision:?} {attack:?}");
            real.condarc(&["conda-forge"]);
            let (tool, arguments, what) = attack.call(&real);
            let (question, result) =
                server.ask(tool, arguments, "accept", |_| attack.tamper(&real));
            assert!(
                question.contains(&format!(
                    "\nInstall (1):\n  barpkg 1.0 0 ({}/noarch, sha256 ",
                    real.url("conda-forge")
                )),
                "{context}: {question}"
            );
            assert_changed(&result, &what, &context);
            assert_eq!(real.installed("env"), Vec::<Value>::new(), "{context}");
            assert_eq!(real.marks(), Vec::<String>::new(), "{context}");
            if let Attack::BecameEnvironment = attack {
                let kept = real.path("project/keep.txt");
                assert!(
                    kept.exists(),
                    "{context}: the project directory was deleted"
                );
                assert_eq!(real.installed("project"), Vec::<Value>::new(), "{context}");
                std::fs::remove_dir_all(real.path("project/conda-meta")).unwrap();
            }
        }
    }
}

/// On a real conda, the plan unchanged: exactly the records shown are installed (name,
/// version, build, the full URL of a local channel named `conda-forge`, the hash), and
/// the post-link script ran. A package rebuilt without indexing the channel anew keeps
/// its record, which conda 26.7 would install unchecked (it copies file:// packages
/// without a checksum): the bound run checks the copy, and nothing is installed.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_unchanged_plan_installs_exactly_what_was_shown() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        let mut server = real.server(revision);
        let prefix = real.path("env").display().to_string();
        let arguments = json!({"prefix": prefix, "packages": ["barpkg"]});
        let (question, result) = server.ask("conda_create", arguments, "accept", |_| {});
        assert_eq!(result["isError"], false, "{context}: {result}");
        let installed = real.installed("env");
        assert_eq!(installed.len(), 1, "{context}: {installed:?}");
        let record = &installed[0];
        let url = format!("{}/noarch/barpkg-1.0-0.tar.bz2", real.url("conda-forge"));
        assert_eq!(record["url"], url.as_str(), "{context}: {record}");
        let sha256 = record["sha256"].as_str().unwrap();
        assert!(
            question.contains(&format!(
                "\nInstall (1):\n  barpkg 1.0 0 ({}/noarch, sha256 {sha256})\n",
                real.url("conda-forge")
            )),
            "{context}: {question}"
        );
        assert_eq!(real.marks(), ["barpkg-1.0"], "{context}");
        // Rebuilt without indexing anew: the same record, other bytes.
        let again = real.path("env2").display().to_string();
        let index = real.path("conda-forge/noarch/repodata.json");
        let indexed = std::fs::read(&index).unwrap();
        let pkgs = real.path("pkgs");
        std::fs::remove_dir_all(&pkgs).unwrap();
        std::fs::create_dir(&pkgs).unwrap();
        let arguments = json!({"prefix": again, "packages": ["barpkg"]});
        let (_, result) = server.ask("conda_create", arguments, "accept", |_| {
            real.channel("conda-forge", "barpkg=1.0", Some("rebuilt\n"));
            std::fs::write(&index, &indexed).unwrap();
        });
        let what = format!(
            "the package file {}/noarch/barpkg-1.0-0.tar.bz2 is not the one its record names",
            real.url("conda-forge")
        );
        assert_changed(&result, &what, &context);
        assert_eq!(real.installed("env2"), Vec::<Value>::new(), "{context}");
        assert_eq!(real.marks(), ["barpkg-1.0"], "{context}");
    }
}

/// The question shows what decides the run, under every revision that can ask:
/// `conda_execute`'s stdin (quoted whole), its working directory, how the child's
/// environment differs from the server's (and the child then gets exactly that), and each
/// channel as its full URL with credentials redacted.
#[test]
fn the_question_shows_stdin_the_working_directory_the_environment_and_full_urls() {
    for revision in ASKING {
        let context = format!("{revision:?}");
        let setup = FixtureSetup::new();
        let index = setup.path("index.json");
        let condarc = setup.path("condarc");
        let mut server = Asking::start(
            revision,
            &support::fixture().conda,
            &[
                "--allow-write",
                "--allow-exec",
                "--confirm-writes",
                "--child-env-remove",
                "CCM_TEST_WITHHELD",
            ],
            &[
                ("CONDA_FIXTURE_INDEX", index.to_str().unwrap()),
                ("CONDARC", condarc.to_str().unwrap()),
                ("CCM_TEST_WITHHELD", "s3cr3t-value"),
            ],
        );
        let cwd = std::fs::canonicalize(setup.dir.path()).unwrap();
        let stdin = "channels:\n  - https://evil.example/ch\n";
        let call = json!({"argv": ["config", "--stdin"], "stdin": stdin,
            "cwd": cwd.to_str().unwrap()});
        let (question, result) = server.ask("conda_execute", call, "decline", |_| {});
        assert!(
            question.contains(&format!("\nWorking directory: {}\n", cwd.display())),
            "{context}: {question}"
        );
        assert!(
            question.contains(&format!("\nStandard input: {} bytes, sha256 ", stdin.len())),
            "{context}: {question}"
        );
        assert!(
            question.contains(":\n  | channels:\n  |   - https://evil.example/ch\n  | "),
            "{context}: {question}"
        );
        assert!(text(&result).starts_with("declined_by_user"), "{result}");
        // The environment: what the question says is what the child gets.
        let call = json!({"argv": ["run", "-n", "t1", "env"]});
        let (question, result) = server.ask("conda_execute", call, "accept", |_| {});
        assert!(
            question.contains(
                "\nEnvironment: the server's, with CCM_EXECUTION=<this execution's marker>"
            ),
            "{context}: {question}"
        );
        let withheld = question
            .lines()
            .find(|l| l.starts_with("Environment: "))
            .unwrap();
        assert!(
            withheld.contains("CCM_TEST_WITHHELD") && withheld.ends_with(" withheld"),
            "{context}: {question}"
        );
        assert!(!question.contains("s3cr3t-value"), "{context}: {question}");
        let stdout = result["structuredContent"]["stdout"].as_str().unwrap();
        assert!(
            stdout.contains("\nCCM_EXECUTION=") || stdout.starts_with("CCM_EXECUTION="),
            "{context}: {stdout}"
        );
        assert!(!stdout.contains("CCM_TEST_WITHHELD"), "{context}: {stdout}");
        // A channel URL with credentials: shown whole, the credentials redacted.
        let private = json!({"fixture-pkg": {"channel": "https://bob:hunter2@fixture.invalid/t/tk-42/private"}});
        std::fs::write(&index, private.to_string()).unwrap();
        let install = json!({"name": "t1", "packages": ["fixture-pkg"]});
        let (question, _) = server.ask("conda_install", install, "decline", |_| {});
        assert!(
            question.contains("fixture-pkg 1.0 0 (https://[redacted]@fixture.invalid/t/[redacted]/private/noarch, md5 "),
            "{context}: {question}"
        );
        assert!(
            !question.contains("hunter2") && !question.contains("tk-42"),
            "{context}: {question}"
        );
    }
}

/// The question hides no value for its name (a hostile agent picks the names): a channel
/// alias and a variable named like secrets are quoted with their values, while a URL's
/// credentials stay hidden, under every revision that can ask.
#[test]
fn the_question_hides_no_value_behind_a_secret_looking_name() {
    for revision in ASKING {
        let context = format!("{revision:?}");
        let setup = FixtureSetup::new();
        let mut server = Asking::start(
            revision,
            &support::fixture().conda,
            &["--allow-write", "--allow-exec", "--confirm-writes"],
            &[],
        );
        let cwd = std::fs::canonicalize(setup.dir.path()).unwrap();
        let stdin = "custom_channels:\n  conda-forge-signed: https://attacker.example/x\n\
            env_vars:\n  GIT_ASKPASS: ./evil.sh\n  API_TOKEN: abc123\n\
            channels:\n  - https://bob:hunter2@h.example/ch\n";
        let call = json!({"argv": ["config", "--stdin"], "stdin": stdin,
            "cwd": cwd.to_str().unwrap()});
        let (question, result) = server.ask("conda_execute", call, "decline", |_| {});
        for shown in [
            "\n  |   conda-forge-signed: https://attacker.example/x\n",
            "\n  |   GIT_ASKPASS: ./evil.sh\n",
            "\n  |   API_TOKEN: abc123\n",
            "\n  |   - https://[redacted]@h.example/ch\n",
        ] {
            assert!(
                question.contains(shown),
                "{context}: {shown:?} in {question}"
            );
        }
        assert!(!question.contains("hunter2"), "{context}: {question}");
        assert!(text(&result).starts_with("declined_by_user"), "{result}");
    }
}

/// On a real conda, removing a whole environment names it and how many packages it holds
/// (`env remove`, `remove --all`; an empty one too), under every revision that can ask.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_removing_an_environment_names_it_and_its_packages() {
    let real = Real::new();
    real.channel("conda-forge", "pkga=1.0", None);
    let create = |env: &str, packages: &[&str]| {
        let status = std::process::Command::new(support::real_conda())
            .args(["create", "-y", "--json", "-p"])
            .arg(real.path(env))
            .args(packages)
            .envs(real.env())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    create("full", &["barpkg", "pkga"]);
    create("empty", &[]);
    for revision in real_asking() {
        let mut server = real.server(revision);
        for (tool, env, all, packages) in [
            ("conda_env_remove", "full", false, "2 packages"),
            ("conda_remove", "full", true, "2 packages"),
            ("conda_env_remove", "empty", false, "0 packages"),
        ] {
            let context = format!("{revision:?} {tool} {env}");
            let prefix = real.path(env).display().to_string();
            let mut arguments = json!({"prefix": prefix});
            if all {
                arguments["all"] = json!(true);
            }
            let (question, result) = server.ask(tool, arguments, "decline", |_| {});
            assert!(
                question.contains(&format!(
                    "\nDelete: the environment {prefix} and everything in it ({packages}, and \
                     any other files in that directory)"
                )),
                "{context}: {question}"
            );
            assert!(
                !question.contains("lists no package changes") || env == "empty",
                "{context}: {question}"
            );
            assert!(
                text(&result).starts_with("declined_by_user"),
                "{context}: {result}"
            );
        }
    }
    assert!(real.path("full/conda-meta").is_dir() && real.path("empty/conda-meta").is_dir());
    assert_eq!(real.marks(), ["barpkg-1.0", "pkga-1.0"]);
}

/// On a real conda, a call whose packages conda's dry run does not list (explicit package
/// files, an explicit `--file`, a rename, which clones, a clone) cannot be bound: it is
/// refused before anyone is asked, and nothing is installed. A clone and a rename are
/// refused without the sandbox too, where the preview stops at conda's parse (attack 35
/// Q2: a clone was asked there, and conda copied the source's files into the target by
/// path, through the agent's symlink in the target to another directory). So is `conda
/// package` (attack 36 R1: through a symlink at the environment's top it archived
/// another directory's files into a tarball anyone could read, and `--reset` deleted
/// them), and `clean --tempfiles`, which deletes what it finds when it runs (attack 37
/// S1).
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_plan_conda_cannot_preview_is_not_asked() {
    let real = Real::new();
    let package = real.path("conda-forge/noarch/barpkg-1.0-0.tar.bz2");
    let explicit = real.path("project/explicit.txt");
    std::fs::write(
        &explicit,
        format!("@EXPLICIT\nfile://{}\n", package.display()),
    )
    .unwrap();
    let status = std::process::Command::new(support::real_conda())
        .args(["create", "-y", "--json", "-p"])
        .arg(real.path("source"))
        .envs(real.env())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // The clone's source holds a file of the agent's; the new environment's `lib` leads to
    // a directory outside it.
    std::fs::create_dir_all(real.path("source/lib/cron.d")).unwrap();
    std::fs::write(real.path("source/lib/cron.d/job"), "* * * * * root true\n").unwrap();
    std::fs::create_dir_all(real.path("victim")).unwrap();
    std::fs::create_dir_all(real.path("project/new")).unwrap();
    std::os::unix::fs::symlink(real.path("victim"), real.path("project/new/lib")).unwrap();
    let env = real.path("env").display().to_string();
    let source = real.path("source").display().to_string();
    let clone = (
        "conda_create",
        json!({"prefix": real.path("project/new").display().to_string(), "clone": source,
            "yes": true}),
        "a clone of an environment",
    );
    // `conda package` walks the target through a symlink at its top (attack 36 R1).
    std::fs::write(real.path("victim/keep.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(real.path("victim"), real.path("source/x")).unwrap();
    let reset = (
        "conda_package",
        json!({"prefix": source, "reset": true}),
        "`conda package` reads, archives and deletes the environment's files by path",
    );
    let tarball = (
        "conda_package",
        json!({"prefix": source, "pkg_name": "leak"}),
        "outside any transaction",
    );
    // `clean --tempfiles DIR` deletes what it finds in DIR at run time (attack 37 S1).
    std::fs::write(real.path("project/new/old.c~"), "").unwrap();
    let tempfiles = (
        "conda_clean",
        json!({"tempfiles": [real.path("project/new").display().to_string()], "yes": true}),
        "`conda clean --tempfiles` deletes what it finds",
    );
    let rename = (
        "conda_rename",
        json!({"prefix": source, "destination": real.path("renamed").display().to_string()}),
        "a rename",
    );
    let with_sandbox = real_asking().into_iter().map(|revision| (revision, vec![]));
    let without = [(REAL_ASKING[0], vec!["--no-sandbox"])];
    for (revision, extra) in with_sandbox.into_iter().chain(without) {
        let mut flags = vec!["--allow-write", "--confirm-writes"];
        flags.extend(&extra);
        let mut server = real.server_with(revision, &flags);
        let mut cases = vec![
            clone.clone(),
            rename.clone(),
            reset.clone(),
            tarball.clone(),
            tempfiles.clone(),
        ];
        if extra.is_empty() {
            cases.extend([
                (
                    "conda_create",
                    json!({"prefix": env, "packages": [package.display().to_string()]}),
                    "explicit package files or URLs",
                ),
                (
                    "conda_create",
                    json!({"prefix": env, "file": [explicit.display().to_string()]}),
                    "explicit package files or URLs",
                ),
            ]);
        }
        for (tool, arguments, what) in cases {
            let context = format!("{revision:?} {extra:?} {tool} {what}");
            let result = server.unasked(tool, arguments);
            assert_eq!(result["isError"], true, "{context}: {result}");
            let text = text(&result);
            assert!(
                text.starts_with("confirmation_unavailable: the plan cannot be bound"),
                "{context}: {text}"
            );
            assert!(text.contains(what), "{context}: {text}");
        }
    }
    assert_eq!(real.installed("env"), Vec::<Value>::new());
    assert!(real.path("source/conda-meta").is_dir() && !real.path("renamed").exists());
    assert_eq!(walkdir_names(&real.path("victim")), ["keep.txt"]);
    assert!(!real.path("leak-0.0-0.tar.bz2").exists());
    assert!(real.path("project/new/old.c~").exists());
    assert_eq!(real.marks(), Vec::<String>::new());
}

/// On a real conda, a new environment named by `name` (or by its environment file) is
/// previewed where the run will create it: in the first envs directory the run can write
/// (the condarc's), not where the read-only preview could; the run then installs there.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_a_named_environment_is_created_where_the_question_says() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        // In the working directory: a condarc there is the agent's to write under the
        // HTTP default scope, so the envs directories it names are trusted only inside
        // the scope.
        let envs = real.path("envs");
        let condarc = format!(
            "envs_dirs:\n  - {}\nchannels:\n  - {}\n",
            envs.display(),
            real.url("conda-forge")
        );
        std::fs::write(real.path("condarc"), condarc).unwrap();
        let mut server = real.server(revision);
        let arguments = json!({"name": "named", "packages": ["barpkg"]});
        let (question, result) = server.ask("conda_create", arguments, "accept", |_| {});
        assert!(
            question.contains(&format!(
                "\nTarget environment: {}\n",
                envs.join("named").display()
            )),
            "{context}: {question}"
        );
        assert_eq!(result["isError"], false, "{context}: {result}");
        assert_eq!(real.installed("envs/named").len(), 1, "{context}");
        let file = real.path("project/environment.yml");
        std::fs::write(&file, "name: fromfile\ndependencies:\n  - barpkg\n").unwrap();
        let arguments = json!({"file": [file.display().to_string()]});
        let (question, result) = server.ask("conda_env_create", arguments, "accept", |_| {});
        assert!(
            question.contains(&format!(
                "\nTarget environment: {}\n",
                envs.join("fromfile").display()
            )),
            "{context}: {question}"
        );
        assert_eq!(result["isError"], false, "{context}: {result}");
        assert_eq!(real.installed("envs/fromfile").len(), 1, "{context}");
    }
}

/// On a real conda, `env update` (no dry run: conda's parse is the preview) reads the
/// environment file that was shown: rewritten while the question is open, the run stops
/// with `plan_changed` and installs nothing; unchanged, it runs. Under every revision that
/// can ask.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_env_update_reads_the_file_that_was_shown() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        real.channel("conda-forge", "pkga=1.0", None);
        real.create(&real.path("env"), &["pkga"]);
        let file = real.path("project/update.yml");
        std::fs::write(&file, "dependencies:\n  - pkga\n").unwrap();
        let mut server = real.server(revision);
        let arguments = json!({"prefix": real.path("env").display().to_string(),
            "file": file.display().to_string()});
        let (question, result) =
            server.ask("conda_env_update", arguments.clone(), "accept", |_| {
                let text = format!(
                    "channels:\n  - {}\ndependencies:\n  - barpkg=9.9\n",
                    real.url("other")
                );
                std::fs::write(&file, text).unwrap();
            });
        assert!(
            question.contains("\n  | dependencies:\n  |   - pkga\n"),
            "{context}: {question}"
        );
        assert!(
            question.contains(plan_bound_inspect()),
            "{context}: {question}"
        );
        let what = format!(
            "the input file {} changed after the question",
            file.display()
        );
        assert_changed(&result, &what, &context);
        assert_eq!(real.installed("env").len(), 1, "{context}");
        assert_eq!(real.marks(), ["pkga-1.0"], "{context}");
        // The file as it is now is shown and runs.
        let (question, result) = server.ask("conda_env_update", arguments, "accept", |_| {});
        assert!(
            question.contains("  |   - barpkg=9.9\n"),
            "{context}: {question}"
        );
        assert_eq!(result["isError"], false, "{context}: {result}");
        assert_eq!(real.marks(), ["barpkg-9.9", "pkga-1.0"], "{context}");
    }
}

/// The start of the line a plan without a dry run ends with.
fn plan_bound_inspect() -> &'static str {
    "No package preview: conda has no dry run for this command. Bound: conda's configuration"
}

/// A package, a channel and an environment named with letters of other scripts that look
/// like ASCII ones (a Cyrillic "а", a Greek "ο") are shown escaped in the question under
/// every revision that can ask: the person reads `d\u{430}ta`, not `data`. Nothing
/// non-ASCII is shown raw but ccm's own space marker.
#[test]
fn look_alike_names_are_escaped_in_the_question() {
    for revision in ASKING {
        let setup = FixtureSetup::new();
        let mut server = setup.server(revision);
        let context = format!("{revision:?}");
        let install = json!({"name": "d\u{430}ta", "packages": ["fixture-pkg"],
            "channel": ["https://c\u{3bf}nda.anaconda.org/conda-forge"]});
        let (question, result) = server.ask("conda_install", install, "decline", |_| {});
        let raw: Vec<char> = question
            .chars()
            .filter(|c| !c.is_ascii() && !"⟨⟩".contains(*c))
            .collect();
        assert!(raw.is_empty(), "{context}: raw {raw:?} in {question}");
        for escaped in [
            "d\\u{430}ta",
            "https://c\\u{3bf}nda.anaconda.org/conda-forge",
        ] {
            assert!(
                question.contains(escaped),
                "{context}: {escaped}: {question}"
            );
        }
        assert!(
            text(&result).starts_with("declined_by_user"),
            "{context}: {result}"
        );
    }
}

/// On a real conda: a local channel and an environment named with a Cyrillic "о" and "а"
/// (`с\u{43e}nda-forge`, `d\u{430}ta`): the question shows the target, the package's
/// channel URL and the command escaped, nothing non-ASCII raw, under every revision that
/// can ask.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_look_alike_channel_and_environment_names_are_escaped() {
    for revision in real_asking() {
        let context = format!("{revision:?}");
        let real = Real::new();
        real.channel("c\u{43e}nda-forge", "barpkg=1.0", None);
        real.condarc(&["c\u{43e}nda-forge"]);
        // In the working directory: a condarc there is the agent's to write under the
        // HTTP default scope, so the envs directories it names are trusted only inside
        // the scope.
        let envs = real.path("envs");
        let condarc = std::fs::read_to_string(real.path("condarc")).unwrap();
        let condarc = format!("envs_dirs:\n  - {}\n{condarc}", envs.display());
        std::fs::write(real.path("condarc"), condarc).unwrap();
        let mut server = real.server(revision);
        let arguments = json!({"name": "d\u{430}ta", "packages": ["barpkg"]});
        let (question, result) = server.ask("conda_create", arguments, "decline", |_| {});
        let raw: Vec<char> = question
            .chars()
            .filter(|c| !c.is_ascii() && !"⟨⟩".contains(*c))
            .collect();
        assert!(raw.is_empty(), "{context}: raw {raw:?} in {question}");
        let channel = format!(
            "{}/c\\u{{43e}}nda-forge/noarch",
            real.url("").trim_end_matches('/')
        );
        for shown in [
            format!("\nTarget environment: {}/d\\u{{430}}ta\n", envs.display()),
            format!("\n  barpkg 1.0 0 ({channel}, "),
            "\"--name=d\\u{430}ta\"".to_owned(),
        ] {
            assert!(question.contains(&shown), "{context}: {shown}: {question}");
        }
        assert!(
            text(&result).starts_with("declined_by_user"),
            "{context}: {result}"
        );
        assert!(!envs.join("d\u{430}ta").exists(), "{context}");
    }
}
