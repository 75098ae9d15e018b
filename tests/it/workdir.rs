//! Where a generated tool's call runs: ccm's own `ccm_cwd` and `ccm_timeout_seconds`,
//! the reserved `ccm_` prefix over every tool, and the results that say which directory
//! was used.

use std::time::Duration;

use ccm::model::catalog::{ActionKind, Catalog, Nargs, Plugin};
use ccm::tools::argv;
use ccm::tools::layout::{
    RESERVED_PREFIX, TIMEOUT, TIMEOUT_DESCRIPTION, WORKDIR, WORKDIR_DESCRIPTION,
};
use ccm::tools::toolset::{Toolset, ToolsetSettings};
use serde_json::{Map, Value, json};

use crate::inputs;
use crate::kit::classify;
use crate::mcp::{Session, reported_argv, structured};
use crate::support::{self, FIXTURE, REAL, argument, catalog, command};

fn settings() -> ToolsetSettings {
    ToolsetSettings {
        allow_exec: true,
        classify: Vec::new(),
        timeout: Duration::from_secs(900),
        sandboxed: false,
    }
}

/// Every generated tool lists the two properties, with `conda_execute`'s bounds, and no
/// conda-derived property takes the reserved prefix.
fn assert_reserved_rule(tools: &Toolset, what: &str) {
    assert!(!tools.generated.is_empty(), "{what}");
    for tool in &tools.generated {
        let properties = tool.descriptor["inputSchema"]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{what} {}: no properties", tool.name));
        assert_eq!(
            properties[WORKDIR],
            json!({"type": "string", "maxLength": 4096, "description": WORKDIR_DESCRIPTION}),
            "{what} {}",
            tool.name
        );
        assert_eq!(
            properties[TIMEOUT],
            json!({"type": "number", "exclusiveMinimum": 0, "maximum": 900,
                   "description": TIMEOUT_DESCRIPTION}),
            "{what} {}",
            tool.name
        );
        for id in properties.keys() {
            assert!(
                !id.starts_with(RESERVED_PREFIX) || id == WORKDIR || id == TIMEOUT,
                "{what} {}: {id} takes the reserved prefix",
                tool.name
            );
        }
        for property in &tool.layout.properties {
            assert!(
                !property.id.starts_with(RESERVED_PREFIX),
                "{what} {}: {}",
                tool.name,
                property.id
            );
        }
    }
}

/// The reserved properties change no argv, for either compiler of any tool.
fn assert_not_argv(tools: &Toolset, what: &str) {
    let mut runner = inputs::runner(&format!("reserved properties are not argv ({what})"));
    let mut compared = 0;
    for tool in &tools.generated {
        for input in inputs::valid_inputs(tool, &mut runner, 8) {
            let mut with = input.clone();
            with.insert(WORKDIR.into(), json!("/tmp"));
            with.insert(TIMEOUT.into(), json!(5));
            let generic = argv::compile(&tool.layout, &input);
            assert_eq!(argv::compile(&tool.layout, &with), generic, "{}", tool.name);
            if let ccm::tools::toolset::Compiler::Baked(baked) = tool.compiler {
                assert_eq!(
                    (baked.compile)(&with),
                    (baked.compile)(&input),
                    "{}",
                    tool.name
                );
            }
            compared += 1;
        }
    }
    assert!(
        compared > tools.generated.len(),
        "{what}: {compared} inputs"
    );
}

fn check_catalog(catalog: &Catalog, plugins: &[Plugin], what: &str) {
    let generic = Toolset::build(catalog, plugins, &settings());
    assert_reserved_rule(&generic, what);
    assert_not_argv(&generic, what);
    let baked = ccm::baked::toolset(catalog, plugins, &settings());
    assert_not_argv(&baked, what);
}

#[test]
fn the_reserved_rule_holds_for_every_tool_of_both_snapshots() {
    for stem in [REAL, FIXTURE] {
        let snapshot = support::snapshot(stem);
        check_catalog(&snapshot.catalog, &snapshot.plugins, stem);
    }
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_the_reserved_rule_holds_for_every_live_tool() {
    let found = support::real_discovery();
    check_catalog(&found.catalog, &found.plugins, "live");
}

/// A conda argument named like ccm's own properties is renamed, still compiles to its
/// flag, and the reserved names keep their meaning.
#[test]
fn conda_arguments_never_take_the_reserved_prefix() {
    let arguments = vec![
        argument("ccm_cwd", &["--ccm-cwd"], ActionKind::Store, Nargs::One),
        argument("ccm_x", &["--ccm-x"], ActionKind::Store, Nargs::One),
        argument(
            "conda_ccm_x",
            &["--conda-ccm-x"],
            ActionKind::Store,
            Nargs::One,
        ),
        argument("cwd", &["--cwd"], ActionKind::Store, Nargs::One),
    ];
    let catalog = catalog(vec![command(Some("clash"), arguments, vec![])]);
    let tools = Toolset::build(&catalog, &[], &settings());
    let tool = tools.get("conda_clash").unwrap();
    let ids: Vec<&str> = tool
        .layout
        .properties
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["conda_ccm_cwd", "conda_ccm_x", "conda_ccm_x_2", "cwd"]
    );
    assert_reserved_rule(&tools, "synthetic");
    let input: Map<String, Value> = serde_json::from_value(json!({
        "conda_ccm_cwd": "a", "conda_ccm_x": "b", "cwd": "c", "ccm_cwd": "/tmp",
    }))
    .unwrap();
    tool.validate(&json!({"conda_ccm_cwd": "a", "conda_ccm_x": "b", "cwd": "c"}))
        .unwrap();
    assert_eq!(
        argv::compile(&tool.layout, &input).unwrap(),
        ["clash", "--ccm-cwd=a", "--ccm-x=b", "--cwd=c"]
    );
}

/// The directory `behave --cwd` printed.
fn printed(result: &Value) -> String {
    structured(result)["stdout"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn conda() -> std::path::PathBuf {
    support::fixture().conda.clone()
}

#[test]
fn generated_tools_run_in_the_working_directory_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(canonical.join("sub")).unwrap();
    let mut s = Session::spawn_initialized({
        let mut command = support::ccm();
        command
            .arg("--conda-exe")
            .arg(conda())
            .args(classify::BEHAVE_WRITE)
            .current_dir(&canonical);
        command
    });
    let r = s.call("conda_behave", json!({"cwd": true, "ccm_cwd": canonical}));
    assert_eq!(printed(&r), canonical.to_str().unwrap(), "{r}");
    assert_eq!(r["_meta"]["conda-cli-mcp/cwd"], json!(canonical), "{r}");
    // The reserved properties are not argv.
    let r = s.call(
        "conda_behave",
        json!({"ccm_cwd": canonical, "ccm_timeout_seconds": 60}),
    );
    assert_eq!(reported_argv(&r), ["behave"], "{r}");
    // A relative one is relative to the server's (no roots were declared).
    let r = s.call("conda_behave", json!({"cwd": true, "ccm_cwd": "sub"}));
    assert_eq!(printed(&r), canonical.join("sub").to_str().unwrap(), "{r}");
    assert_eq!(r["_meta"]["conda-cli-mcp/cwd"], "sub", "{r}");
    // Without it: the server's, and no directory is named.
    let r = s.call("conda_behave", json!({"cwd": true}));
    assert_eq!(printed(&r), canonical.to_str().unwrap(), "{r}");
    assert_eq!(r["_meta"].get("conda-cli-mcp/cwd"), None, "{r}");
    // What is not a directory is refused, naming the rule, never the value.
    for (arguments, expected) in [
        (
            json!({"ccm_cwd": "/secret/does/not/exist"}),
            "Invalid arguments at $.ccm_cwd: must name an existing directory",
        ),
        (
            json!({"ccm_cwd": 7}),
            "Invalid arguments at $.ccm_cwd: must be of type string",
        ),
        (
            json!({"ccm_cwd": "x".repeat(5000)}),
            "Invalid arguments at $.ccm_cwd: must have at most 4096 characters",
        ),
        (
            json!({"ccm_timeout_seconds": 0}),
            "Invalid arguments at $.ccm_timeout_seconds: must be greater than 0",
        ),
        (
            json!({"ccm_timeout_seconds": 901}),
            "Invalid arguments at $.ccm_timeout_seconds: must be at most 900",
        ),
    ] {
        let (code, message) = s.call_error("conda_behave", arguments.clone());
        assert_eq!((code, message.as_str()), (-32602, expected), "{arguments}");
    }
}

#[test]
fn the_working_directory_is_confined_and_the_timeout_applies() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let allowed_path = std::fs::canonicalize(allowed.path()).unwrap();
    let mut s = Session::start(
        &conda(),
        &classify::with(
            &classify::BEHAVE_WRITE,
            &[
                "--timeout",
                "900",
                "--allow-paths",
                allowed_path.to_str().unwrap(),
            ],
        ),
    );
    let r = s.call(
        "conda_behave",
        json!({"cwd": true, "ccm_cwd": allowed_path}),
    );
    assert_eq!(printed(&r), allowed_path.to_str().unwrap(), "{r}");
    let (code, message) = s.call_error(
        "conda_behave",
        json!({"cwd": true, "ccm_cwd": outside.path()}),
    );
    assert_eq!(
        (code, message),
        (
            -32600,
            support::refused(
                "Operation names a path outside the allowed directories (see --allow-paths)",
                "--allow-paths"
            )
        )
    );
    let started = std::time::Instant::now();
    let r = s.call(
        "conda_behave",
        json!({"sleep": 30, "ccm_timeout_seconds": 0.5, "ccm_cwd": allowed_path}),
    );
    assert_eq!(structured(&r)["timed_out"], true, "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the call's own timeout"
    );
}

/// A tools/call over a session whose client declared roots, answering the server's
/// `roots/list` with `answer` (a result or an error object); the call's response.
fn call_answering_roots(s: &mut Session, params: Value, answer: &Value) -> Value {
    let id = s.send("tools/call", params);
    loop {
        let message = s
            .next(Duration::from_secs(60))
            .expect("an answer to the call");
        if message["method"] == "roots/list" {
            let mut reply = json!({"jsonrpc": "2.0", "id": message["id"]});
            let key = if answer.get("code").is_some() {
                "error"
            } else {
                "result"
            };
            reply[key] = answer.clone();
            s.write_raw(format!("{reply}\n").as_bytes());
        } else if message["id"] == id {
            return message;
        }
    }
}

fn with_roots(args: &[&str]) -> Session {
    let mut s = Session::spawn_on(&support::fixture().conda, args);
    s.initialize = s.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}},
               "clientInfo": {"name": "ccm-tests", "version": "1"}}),
    );
    s.notify("notifications/initialized", json!({}));
    s
}

/// Hostile: the confinement of the working directory fails closed and tells nothing about
/// what exists outside it. A client that declared roots none of which is usable (or that
/// answers `roots/list` with an error) gets no directory of the agent's choosing; a
/// request's own `_meta` revision does not switch a session's roots off; where
/// `--allow-paths` confines, a missing directory gets the answer an existing outside one
/// gets.
#[test]
fn the_working_directory_fails_closed_and_is_no_existence_oracle() {
    let outside_roots = json!({"code": -32600,
        "message": "The working directory is not an existing directory inside the client's roots"});
    let etc = json!({"name": "conda_info", "arguments": {"ccm_cwd": "/etc"}});
    let unusable =
        json!({"roots": [{"uri": "file:///does/not/exist"}, {"uri": "https://example.com/x"}]});
    let failed = json!({"code": -32603, "message": "no roots here"});
    for answer in [&unusable, &json!({"roots": []}), &failed] {
        let mut s = with_roots(&[]);
        let refused = call_answering_roots(&mut s, etc.clone(), answer);
        assert_eq!(
            refused["error"]["code"], outside_roots["code"],
            "{answer}: {refused}"
        );
        assert_eq!(
            refused["error"]["message"], outside_roots["message"],
            "{answer}: {refused}"
        );
        // Without a directory of its choosing the call runs where the server runs.
        let ran = s.call("conda_info", json!({}));
        assert_eq!(structured(&ran)["exit_code"], 0, "{ran}");
    }
    // A usable root; the request claims the session-less revision in its `_meta`.
    let root = tempfile::tempdir().unwrap();
    let uri = format!("file://{}", root.path().canonicalize().unwrap().display());
    let mut s = with_roots(&[]);
    let mut params = etc.clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "x", "version": "1"},
    });
    let refused = call_answering_roots(&mut s, params, &json!({"roots": [{"uri": uri}]}));
    assert_eq!(
        refused["error"]["message"], outside_roots["message"],
        "{refused}"
    );
    // Roots: a missing directory inside the root is refused like an outside one.
    let missing = s.request(
        "tools/call",
        json!({"name": "conda_info", "arguments": {"ccm_cwd": "no-such-dir"}}),
    );
    assert_eq!(
        missing["error"]["message"], outside_roots["message"],
        "{missing}"
    );
    // --allow-paths: a missing directory and an existing outside one, one answer.
    let allowed = tempfile::tempdir().unwrap();
    let mut s = Session::start(
        &support::fixture().conda,
        &["--allow-paths", allowed.path().to_str().unwrap()],
    );
    let outside = (
        -32600,
        support::refused(
            "Operation names a path outside the allowed directories (see --allow-paths)",
            "--allow-paths",
        ),
    );
    for dir in ["/etc", "/hidden-project-codename", "../no-such-dir"] {
        assert_eq!(
            s.call_error("conda_info", json!({"ccm_cwd": dir})),
            outside,
            "{dir}"
        );
    }
}
