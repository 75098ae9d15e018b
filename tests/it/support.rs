//! Shared test plumbing: the fixture conda (built once per test process from
//! `tests/fixtures/`), the optional real conda (`CCM_TEST_CONDA`), and the `ccm` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use ccm::host::discovery::{self, Discovery};

/// The Python that builds fixtures (`CCM_TEST_PYTHON`, default `python3`), as the
/// interpreter it runs (`sys.executable`, asked once): a version manager's `python3` is a
/// shim (pyenv's is a shell script that starts several more) that every test's Python
/// run would otherwise go through again. Unchanged when it cannot be asked.
pub(crate) fn python() -> String {
    static RESOLVED: OnceLock<String> = OnceLock::new();
    RESOLVED
        .get_or_init(|| {
            let named = std::env::var("CCM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
            Command::new(&named)
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .ok()
                .filter(|out| out.status.success())
                .and_then(|out| String::from_utf8(out.stdout).ok())
                .map(|out| out.trim().to_owned())
                .filter(|exe| Path::new(exe).is_absolute())
                .unwrap_or(named)
        })
        .clone()
}

pub(crate) fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A freshly built fixture conda; removed when dropped.
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub prefix: PathBuf,
    pub conda: PathBuf,
}

/// Build a fixture conda into a new temporary directory (`extra` = builder flags).
pub(crate) fn build_fixture(extra: &[&str]) -> Fixture {
    let dir = tempfile::Builder::new()
        .prefix("ccm-fixture-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temporary directory");
    let prefix = dir.path().join("conda");
    let output = Command::new(python())
        .arg(repo().join("tests/fixtures/build_fixture.py"))
        .arg(&prefix)
        .args(extra)
        .output()
        .expect("run tests/fixtures/build_fixture.py (is python3 installed?)");
    assert!(
        output.status.success(),
        "building the fixture conda failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let conda = PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
    let conda = std::fs::canonicalize(conda).unwrap();
    Fixture {
        _dir: dir,
        prefix,
        conda,
    }
}

impl Fixture {
    /// The fixture prefix's `site-packages`.
    pub(crate) fn site_packages(&self) -> PathBuf {
        let python = std::fs::read_dir(self.prefix.join("lib"))
            .expect("the fixture has lib/")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("python"))
            .expect("the fixture has lib/python3.*");
        python.path().join("site-packages")
    }

    /// Install a plugin distribution `name` whose module (`name` with `_`) has this source
    /// and a `conda` entry point pointing at it, as pip would.
    pub(crate) fn add_plugin(&self, name: &str, module_source: &str) {
        let site = self.site_packages();
        let module = name.replace('-', "_");
        std::fs::create_dir_all(site.join(&module)).unwrap();
        std::fs::write(site.join(&module).join("__init__.py"), module_source).unwrap();
        let dist = site.join(format!("{module}-1.0.dist-info"));
        std::fs::create_dir_all(&dist).unwrap();
        std::fs::write(
            dist.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"),
        )
        .unwrap();
        std::fs::write(
            dist.join("entry_points.txt"),
            format!("[conda]\n{name} = {module}\n"),
        )
        .unwrap();
    }
}

/// The uid and gid tests use for "another, unprivileged user" (`nobody`).
pub(crate) const NOBODY: u32 = 65534;

/// Whether the tests run as root (then `as_other_user` drops to [`NOBODY`]).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program` run as an unprivileged user with this `HOME`: as `nobody` ([`NOBODY`])
/// through `runuser` when the tests run as root, else as the current (already
/// unprivileged) user.
pub(crate) fn as_other_user(program: &Path, home: &Path) -> Command {
    if is_root() {
        // runuser sets HOME itself: `env` puts the requested one back.
        let mut command = Command::new("runuser");
        command
            .args(["-u", "nobody", "--", "env"])
            .arg(format!("HOME={}", home.display()))
            .arg(program);
        command
    } else {
        let mut command = Command::new(program);
        command.env("HOME", home);
        command
    }
}

/// A fixture conda that another, unprivileged user can run: built with an interpreter that
/// user can execute (the tests' Python may live in root's home), in a directory they can
/// read.
pub(crate) fn build_fixture_for_others(extra: &[&str]) -> Fixture {
    let candidates = [python(), "/usr/bin/python3".to_owned()];
    let usable = candidates
        .iter()
        .find(|python| {
            let found = Command::new(python.as_str())
                .args(["-c", "import os, sys; print(os.path.realpath(sys.executable))"])
                .output();
            let Ok(found) = found else { return false };
            let real = String::from_utf8_lossy(&found.stdout).trim().to_owned();
            as_other_user(Path::new(&real), Path::new("/"))
                .args(["-c", "import venv"])
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("no Python that an unprivileged user can run (tried CCM_TEST_PYTHON or python3, then /usr/bin/python3)")
        .clone();
    let mut with_python = vec!["--python", usable.as_str()];
    with_python.extend_from_slice(extra);
    let fixture = build_fixture(&with_python);
    use std::os::unix::fs::PermissionsExt;
    let dir = fixture.prefix.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    fixture
}

/// The shared, never-modified fixture conda of this test process.
pub(crate) fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| build_fixture(&[]))
}

/// Discovery of the shared fixture, computed once.
pub(crate) fn fixture_discovery() -> &'static Discovery {
    static FOUND: OnceLock<Discovery> = OnceLock::new();
    FOUND.get_or_init(|| discover(&fixture().conda))
}

pub(crate) fn discover(conda: &Path) -> Discovery {
    let target = ccm::host::target::Conda::resolve(conda.to_path_buf());
    runtime().block_on(discovery::discover(
        &executions(),
        &target,
        Duration::from_secs(120),
    ))
}

/// Executions of the test's own for library calls that start children (the default
/// limits, no cgroups).
pub(crate) fn executions() -> ccm::host::exec::Executions {
    ccm::host::exec::Executions::new(ccm::host::exec::Limits::defaults())
}

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The real conda named by `CCM_TEST_CONDA`. Tests that call this are
/// `#[ignore = "needs CCM_TEST_CONDA"]` and named `real_conda_*`; CI runs exactly them
/// with `--include-ignored real_conda` against a stock and a plugin conda. Panics when the
/// variable is unset, so such a test can never pass without having run.
pub(crate) fn real_conda() -> PathBuf {
    match std::env::var_os("CCM_TEST_CONDA") {
        Some(path) if !path.is_empty() => {
            std::fs::canonicalize(&path).expect("CCM_TEST_CONDA must name an existing conda")
        }
        _ => panic!(
            "this test needs a real conda: set CCM_TEST_CONDA=/path/to/conda \
             (build one with scripts/make-real-conda DEST [--plugins], CONTRIBUTING.md)"
        ),
    }
}

/// Discovery of the real conda (`CCM_TEST_CONDA`), computed once.
pub(crate) fn real_discovery() -> &'static Discovery {
    static FOUND: OnceLock<Discovery> = OnceLock::new();
    FOUND.get_or_init(|| discover(&real_conda()))
}

/// The `ccm` binary under test.
pub(crate) fn ccm() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ccm"));
    command.env_remove("CONDA_EXE").env_remove("CCM_LOG");
    command
}

/// A checked-in snapshot (`snapshots/<stem>.json`).
pub(crate) fn snapshot(stem: &str) -> ccm::model::snapshot::Snapshot {
    let path = repo().join("snapshots").join(format!("{stem}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ccm::model::snapshot::Snapshot::from_text(&text).unwrap()
}

/// The real-conda snapshot shipped with the repository.
pub(crate) const REAL: &str = "conda-26.7";
/// The fixture-conda snapshot shipped with the repository.
pub(crate) const FIXTURE: &str = "conda-0.99";

/// The toolset of a catalog, as a server with these flags would build it.
pub(crate) fn toolset(
    catalog: &ccm::model::catalog::Catalog,
    plugins: &[ccm::model::catalog::Plugin],
    allow_exec: bool,
) -> ccm::tools::toolset::Toolset {
    toolset_in(catalog, plugins, allow_exec, false)
}

/// The toolset of a server whose read-only calls run in the read-only sandbox
/// (`sandboxed`) or not.
pub(crate) fn toolset_in(
    catalog: &ccm::model::catalog::Catalog,
    plugins: &[ccm::model::catalog::Plugin],
    allow_exec: bool,
    sandboxed: bool,
) -> ccm::tools::toolset::Toolset {
    ccm::tools::toolset::Toolset::build(
        catalog,
        plugins,
        &ccm::tools::toolset::ToolsetSettings {
            allow_exec,
            classify: Vec::new(),
            timeout: Duration::from_secs(900),
            sandboxed,
        },
    )
}

/// The descriptors `tools/list` serves for a catalog under these grants without any
/// operator setting: the policy-shaped listing (withheld tools left out, restricted ones
/// in their listed form), folded and left-out tools unlisted.
pub(crate) fn listed(
    catalog: &ccm::model::catalog::Catalog,
    plugins: &[ccm::model::catalog::Plugin],
    grants: ccm::tools::policy::Grants,
    sandboxed: bool,
) -> Vec<serde_json::Value> {
    selected(catalog, plugins, grants, sandboxed, None)
}

/// [`listed`] under a `--tools` selection.
pub(crate) fn selected(
    catalog: &ccm::model::catalog::Catalog,
    plugins: &[ccm::model::catalog::Plugin],
    grants: ccm::tools::policy::Grants,
    sandboxed: bool,
    tools: Option<&str>,
) -> Vec<serde_json::Value> {
    let mut toolset = toolset_in(catalog, plugins, grants.exec, sandboxed);
    let shaped = ccm::tools::listing::shape(&mut toolset, grants);
    let spec = tools.map(|t| ccm::tools::select::Selection::parse([t]).expect("a valid selection"));
    let shaping =
        ccm::tools::select::Selected::new(&toolset, catalog, plugins, spec.as_ref(), false)
            .expect("the selection applies");
    let surface = ccm::tools::surface::Surface::default();
    shaping
        .apply(&surface, toolset.descriptors(), &shaped.withheld)
        .expect("no surface settings always apply")
        .listed
}

/// Compare `actual` with the golden file `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites it.
pub(crate) fn golden(name: &str, actual: &str) {
    let path = repo().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let diff = similar::TextDiff::from_lines(&expected, actual)
            .unified_diff()
            .to_string();
        panic!(
            "tests/golden/{name} is stale; the diff's first lines (golden -> this run):\n{}\n\
             Review the change, then run `UPDATE_GOLDEN=1 cargo test --test integration` and \
             commit the file.",
            diff.lines().take(60).collect::<Vec<_>>().join("\n")
        );
    }
}

/// An argument for synthetic catalogs (string-typed, optional, visible).
pub(crate) fn argument(
    id: &str,
    flags: &[&str],
    action: ccm::model::catalog::ActionKind,
    nargs: ccm::model::catalog::Nargs,
) -> ccm::model::catalog::Argument {
    ccm::model::catalog::Argument {
        id: id.into(),
        dest: id.into(),
        flags: flags.iter().map(|s| s.to_string()).collect(),
        action,
        nargs,
        value_type: ccm::model::catalog::ValueType::String,
        required: false,
        choices: vec![],
        dynamic_choices: false,
        metavar: vec![],
        help: None,
        hidden: false,
        default: serde_json::Value::Null,
        const_value: serde_json::Value::Null,
    }
}

/// A parser for synthetic catalogs: terminal unless it has children.
pub(crate) fn command(
    name: Option<&str>,
    arguments: Vec<ccm::model::catalog::Argument>,
    children: Vec<ccm::model::catalog::Command>,
) -> ccm::model::catalog::Command {
    ccm::model::catalog::Command {
        name: name.map(str::to_owned),
        aliases: vec![],
        summary: None,
        help: None,
        arguments,
        exclusive_groups: vec![],
        terminal: children.is_empty(),
        passthrough: false,
        raw_only: false,
        children,
    }
}

/// A catalog whose root has these commands.
pub(crate) fn catalog(children: Vec<ccm::model::catalog::Command>) -> ccm::model::catalog::Catalog {
    ccm::model::catalog::Catalog {
        prog: "conda".into(),
        conda_version: "1.0".into(),
        root: Some(command(None, vec![], children)),
        diagnostics: vec![],
    }
}

/// Assert that a call answered "Unknown tool" (-32602) with the closest listed tools, and
/// that the answer names neither the requested tool nor any of `never` (tools that exist
/// but are not listed).
pub(crate) fn assert_unknown_tool(answer: (i64, String), requested: &str, never: &[&str]) {
    let (code, message) = answer;
    assert_eq!(code, -32602, "{requested}: {message}");
    assert!(
        message.starts_with("Unknown tool; ") && message.contains("listed tools: "),
        "{requested}: {message}"
    );
    for name in std::iter::once(&requested).chain(never) {
        let named = message
            .split([',', ' ', '\'', '?'])
            .any(|word| word == *name);
        assert!(!named, "{requested}: {message} names {name}");
    }
}

/// A policy refusal's message (the JSON-RPC error before 2025-11-25; after the stable word
/// in the tool result from 2025-11-25 on): the fixed text and where the operator sets
/// `flags`.
pub(crate) fn refused(fixed: &str, flags: &str) -> String {
    let stop = if fixed.ends_with('.') { "" } else { "." };
    format!("{fixed}{stop} The operator sets {flags} in the client's MCP server configuration.")
}
