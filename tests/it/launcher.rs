//! `conda ccm` (and `conda mcp` where nothing else provides it): the conda plugin in
//! `python/ccm_conda_plugin` (shipped in the `ccm-mcp` wheel with the binary) replaces conda
//! with `ccm --conda-exe <that conda>`, through the fixture conda's real plugin mechanism,
//! and next to conda-cli-mcp in a real conda. (`.ci/dist` also installs the built wheel
//! into a real conda.)

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support::{self, Fixture};

/// Install the plugin as pip would: the package plus a dist-info with its entry point,
/// both read from the project's own files (`pyproject.toml`, `python/`).
pub(crate) fn install_plugin(fixture: &Fixture) {
    install_plugin_into(&fixture.site_packages(), None);
}

/// `own_ccm`: a prefix-relative path to record in the dist-info's `RECORD` as the
/// distribution's own `bin/ccm`, as pip does for the wheel's script (`None`: no RECORD).
pub(crate) fn install_plugin_into(site: &Path, own_ccm: Option<&str>) {
    let root = support::repo();
    let pyproject = std::fs::read_to_string(root.join("pyproject.toml")).unwrap();
    let name = pyproject
        .split("[project]")
        .nth(1)
        .and_then(|rest| rest.lines().find_map(|l| l.strip_prefix("name = \"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_owned();
    let version = env!("CARGO_PKG_VERSION");
    let entry_point = pyproject
        .split("[project.entry-points.conda]")
        .nth(1)
        .and_then(|rest| rest.lines().find(|l| l.contains('=')))
        .unwrap()
        .replace('"', "");
    let package = site.join("ccm_conda_plugin");
    std::fs::create_dir_all(&package).unwrap();
    for file in ["__init__.py", "plugin.py"] {
        std::fs::copy(
            root.join("python/ccm_conda_plugin").join(file),
            package.join(file),
        )
        .unwrap();
    }
    let dist = site.join(format!("{}-{version}.dist-info", name.replace('-', "_")));
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(
        dist.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
    )
    .unwrap();
    std::fs::write(
        dist.join("entry_points.txt"),
        format!("[conda]\n{entry_point}\n"),
    )
    .unwrap();
    if let Some(own) = own_ccm {
        // RECORD paths are relative to site-packages (`<prefix>/lib/python3.X/...`), as pip
        // writes them for the scripts it puts in `<prefix>/bin`.
        std::fs::write(
            dist.join("RECORD"),
            format!(
                "ccm_conda_plugin/__init__.py,,\nccm_conda_plugin/plugin.py,,\n../../../{own},,\n"
            ),
        )
        .unwrap();
    }
}

fn conda_mcp(conda: &Path, args: &[&str], ccm_bin: Option<&str>) -> std::process::Output {
    conda_launch(conda, "mcp", args, ccm_bin)
}

fn conda_launch(
    conda: &Path,
    name: &str,
    args: &[&str],
    ccm_bin: Option<&str>,
) -> std::process::Output {
    let mut command = Command::new(conda);
    command.arg(name).args(args).env_remove("CCM_BIN");
    if let Some(bin) = ccm_bin {
        command.env("CCM_BIN", bin);
    }
    command.output().unwrap()
}

/// The MCP session `command` starts, which must target `conda`, and the tools it lists.
fn session_on(command: Command, conda: &Path) -> (Session, Vec<String>) {
    let mut session = Session::spawn_initialized(command);
    let caps = session.capabilities();
    assert_eq!(caps["target_executable"], json!(conda));
    let names = session
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (session, names)
}

#[test]
fn conda_mcp_starts_ccm_against_the_invoking_conda() {
    let fixture = support::build_fixture(&[]);
    install_plugin(&fixture);
    let ccm = env!("CARGO_BIN_EXE_ccm");
    let version = conda_mcp(&fixture.conda, &["--version"], Some(ccm));
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("{}\n", ccm::VERSION_TEXT)
    );
    let help = conda_mcp(&fixture.conda, &["--help"], Some(ccm));
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--allow-write"));
    // Without ccm anywhere it says how to point at one.
    let missing = Command::new(&fixture.conda)
        .args(["mcp", "--version"])
        .env_remove("CCM_BIN")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("set CCM_BIN"));

    // An MCP session through `conda mcp --allow-write` targets this conda.
    let mut command = Command::new(&fixture.conda);
    command
        .args(["mcp", "--allow-write", "--list-all"])
        .env("CCM_BIN", ccm);
    let (mut session, names) = session_on(command, &fixture.conda);
    assert!(
        names.contains(&"conda_mcp".to_owned()),
        "the plugin's own command is listed (--list-all)"
    );
    // --allow-write reached ccm: a mutation runs.
    let r = session.call("conda_install", json!({"packages": ["numpy"]}));
    assert_eq!(r["structuredContent"]["exit_code"], 0);
}

/// A directory whose only entry is `ccm`, a link to the binary under test.
fn path_with_this_ccm(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("path-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ccm"), bin.join("ccm")).unwrap();
    bin
}

/// Another executable named `ccm` in the prefix, as conda-cli-mcp installs: a script.
fn impostor(prefix: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = prefix.join("bin").join("ccm");
    std::fs::write(&path, "#!/bin/sh\necho 9.9.9\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn launch_with_path(conda: &Path, name: &str, path: &str) -> std::process::Output {
    Command::new(conda)
        .args([name, "--version"])
        .env_remove("CCM_BIN")
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn conda_ccm_starts_this_ccm_and_skips_another_program_named_ccm() {
    let fixture = support::build_fixture(&[]);
    install_plugin(&fixture);
    let impostor = impostor(&fixture.prefix);
    let dir = tempfile::tempdir().unwrap();
    let bin = path_with_this_ccm(dir.path());
    // The prefix's `ccm` comes first but is not ccm: the one on PATH is used.
    for name in ["ccm", "mcp"] {
        let out = launch_with_path(&fixture.conda, name, bin.to_str().unwrap());
        assert!(out.status.success(), "{name}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", ccm::VERSION_TEXT),
            "{name}"
        );
    }
    // Only the impostor: refused, with what was skipped and what to do.
    let out = launch_with_path(&fixture.conda, "ccm", "/nonexistent");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{} is a script, not the ccm binary",
            impostor.display()
        )),
        "{err}"
    );
    assert!(err.contains("set CCM_BIN"), "{err}");
    // CCM_BIN naming something that is not ccm is refused, not run.
    let out = conda_launch(
        &fixture.conda,
        "ccm",
        &["--version"],
        Some(impostor.to_str().unwrap()),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "the impostor ran");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "CCM_BIN={} is a script, not the ccm binary",
            impostor.display()
        )),
        "{out:?}"
    );
}

/// An executable that carries ccm's identity bytes but is another program: a copy of
/// `/bin/echo` with them appended (it echoes its arguments).
fn echo_with_identity(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut bytes = std::fs::read("/bin/echo").unwrap();
    bytes.extend_from_slice(ccm::IDENTITY.as_bytes());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The wheel installs the launcher and `ccm` together: the launcher starts the binary its
/// own distribution recorded before the one next to conda or on PATH.
#[test]
fn conda_ccm_starts_the_binary_of_its_own_distribution_first() {
    let fixture = support::build_fixture(&[]);
    // Next to conda and on PATH: programs that pass the identity check but are not this ccm.
    echo_with_identity(&fixture.prefix.join("bin/ccm"));
    let dir = tempfile::tempdir().unwrap();
    echo_with_identity(&dir.path().join("ccm"));
    let path = dir.path().to_str().unwrap();
    // Without a RECORD naming its own binary, the prefix's `ccm` is the first candidate.
    install_plugin_into(&fixture.site_packages(), None);
    let out = launch_with_path(&fixture.conda, "ccm", path);
    assert!(out.status.success(), "{out:?}");
    let echoed = String::from_utf8_lossy(&out.stdout);
    assert!(echoed.starts_with("--conda-exe "), "{echoed}");
    // The distribution's own binary, where pip put it, comes first.
    let own = fixture.prefix.join("wheel-bin/bin/ccm");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_ccm"), &own).unwrap();
    install_plugin_into(&fixture.site_packages(), Some("wheel-bin/bin/ccm"));
    for name in ["ccm", "mcp"] {
        let out = launch_with_path(&fixture.conda, name, path);
        assert!(out.status.success(), "{name}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", ccm::VERSION_TEXT),
            "{name}"
        );
    }
    // CCM_BIN still overrides it.
    let out = conda_launch(
        &fixture.conda,
        "ccm",
        &["--version"],
        Some(fixture.prefix.join("bin/ccm").to_str().unwrap()),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("--conda-exe "));
}

/// Another plugin that provides `conda mcp` (as conda-cli-mcp does): conda keeps working,
/// `conda mcp` stays the other plugin's, and the launcher is `conda ccm`.
#[test]
fn another_plugin_keeps_conda_mcp_and_conda_keeps_working() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "other-mcp",
        "import sys\nfrom conda.plugins import hookimpl\nfrom conda.plugins.types import CondaSubcommand\n\
         def run(args):\n    print('the other mcp')\n    return 0\n\
         @hookimpl\ndef conda_subcommands():\n    yield CondaSubcommand(name='mcp', summary='Other.', action=run)\n",
    );
    install_plugin(&fixture);
    let info = Command::new(&fixture.conda)
        .args(["info", "--json"])
        .output()
        .unwrap();
    assert!(info.status.success(), "{info:?}");
    let other = Command::new(&fixture.conda).arg("mcp").output().unwrap();
    assert!(other.status.success(), "{other:?}");
    assert_eq!(String::from_utf8_lossy(&other.stdout), "the other mcp\n");
    let ours = conda_launch(
        &fixture.conda,
        "ccm",
        &["--version"],
        Some(env!("CARGO_BIN_EXE_ccm")),
    );
    assert!(ours.status.success(), "{ours:?}");
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        format!("{}\n", ccm::VERSION_TEXT)
    );
}

/// A private real conda with conda-cli-mcp installed: a copy of `CCM_TEST_CONDA`'s prefix
/// when it has conda-cli-mcp (the plugin flavour), else a copy of `CCM_TEST_PLUGIN_CONDA`'s
/// (a plugin conda `scripts/make-real-conda --plugins` made; `.ci/run` names its own),
/// else one built with `scripts/make-real-conda --plugins` (about 150 s; it needs
/// `CCM_CONDA_SRC` and `CCM_MENUINST_SRC`). Neither conda named is ever written to.
fn private_conda_with_conda_cli_mcp(conda: &Path, dir: &Path) -> std::path::PathBuf {
    let prefix = conda.parent().unwrap().parent().unwrap();
    let has_cli_mcp = |prefix: &Path| {
        std::fs::read_dir(prefix.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|python| {
                std::fs::read_dir(python.path().join("site-packages"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        name.starts_with("conda_cli_mcp-") && name.ends_with(".dist-info")
                    })
            })
    };
    let private = dir.join("conda");
    if has_cli_mcp(prefix) {
        crate::kit::prefix::copy(prefix, &private);
    } else if let Some(plugins) = std::env::var_os("CCM_TEST_PLUGIN_CONDA") {
        let plugins = std::fs::canonicalize(&plugins)
            .unwrap_or_else(|e| panic!("CCM_TEST_PLUGIN_CONDA={}: {e}", plugins.display()));
        let plugins = plugins.parent().unwrap().parent().unwrap();
        assert!(
            has_cli_mcp(plugins),
            "CCM_TEST_PLUGIN_CONDA names a conda without conda-cli-mcp: {}",
            plugins.display()
        );
        crate::kit::prefix::copy(plugins, &private);
    } else {
        let script = support::repo().join("scripts/make-real-conda");
        let built = Command::new(&script)
            .arg(&private)
            .arg("--plugins")
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
    assert!(has_cli_mcp(&private), "conda-cli-mcp is installed");
    private.join("bin").join("conda")
}

#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_launcher_coexists_with_conda_cli_mcp() {
    let conda = support::real_conda();
    let dir = tempfile::Builder::new()
        .prefix("ccm-launcher-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let private = private_conda_with_conda_cli_mcp(&conda, dir.path());
    let prefix = private.parent().unwrap().parent().unwrap().to_path_buf();
    let site = std::fs::read_dir(prefix.join("lib"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap()
        .path()
        .join("site-packages");
    install_plugin_into(&site, None);
    let bin = path_with_this_ccm(dir.path());
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = |args: &[&str]| {
        Command::new(&private)
            .args(args)
            .env_remove("CCM_BIN")
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    // conda works: no PluginError for a doubly registered `mcp`.
    let info = run(&["info", "--json"]);
    assert!(info.status.success(), "{info:?}");
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["conda_version"], "26.7.1");
    // `conda ccm` reaches this ccm, past conda-cli-mcp's `<prefix>/bin/ccm` script.
    let version = run(&["ccm", "--version"]);
    assert!(version.status.success(), "{version:?}");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("{}\n", ccm::VERSION_TEXT)
    );
    // `conda mcp` is still conda-cli-mcp's (it prints its own version).
    let theirs = run(&["mcp", "--version"]);
    assert!(theirs.status.success(), "{theirs:?}");
    assert_ne!(
        String::from_utf8_lossy(&theirs.stdout),
        format!("{}\n", ccm::VERSION_TEXT)
    );
    // Without this ccm anywhere: conda-cli-mcp's script is skipped, and the message says so.
    let missing = Command::new(&private)
        .args(["ccm", "--version"])
        .env_remove("CCM_BIN")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains(&format!(
            "{} is a script, not the ccm binary",
            prefix.join("bin/ccm").display()
        )),
        "{err}"
    );
    // An MCP session through `conda ccm` targets the private conda.
    let mut command = Command::new(&private);
    command.arg("ccm").env_remove("CCM_BIN").env("PATH", &path);
    let (mut session, names) = session_on(command, &private);
    let caps = session.capabilities();
    // Both launchers are tools, left out of the listing (they start a server).
    assert!(
        !names.iter().any(|n| n == "conda_ccm" || n == "conda_mcp"),
        "{names:?}"
    );
    let generated = caps["generated_tools"].as_array().unwrap();
    let left_out: Vec<&Value> = caps["toolset"]["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["tool"])
        .collect();
    for launcher in ["conda_ccm", "conda_mcp"] {
        assert!(generated.iter().any(|n| n == launcher), "{generated:?}");
        assert!(left_out.iter().any(|n| *n == launcher), "{left_out:?}");
    }
}

/// The launcher the stamp and confirmation leave out is the one the wheel declares
/// (`pyproject.toml`) and the plugin registers (`python/ccm_conda_plugin`).
#[test]
fn the_own_launcher_constants_are_the_wheels() {
    use ccm::model::stamp::{
        OWN_LAUNCHER_COMMANDS, OWN_LAUNCHER_DISTRIBUTION, OWN_LAUNCHER_ENTRY_POINT,
        OWN_LAUNCHER_VALUE,
    };
    let root = support::repo();
    let pyproject = std::fs::read_to_string(root.join("pyproject.toml")).unwrap();
    assert!(
        pyproject.contains(&format!("name = \"{OWN_LAUNCHER_DISTRIBUTION}\"")),
        "pyproject.toml names another distribution"
    );
    let section = pyproject
        .split("[project.entry-points.conda]")
        .nth(1)
        .unwrap();
    let lines: Vec<&str> = section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| l.contains('='))
        .collect();
    assert_eq!(
        lines,
        [format!("{OWN_LAUNCHER_ENTRY_POINT} = \"{OWN_LAUNCHER_VALUE}\"").as_str()]
    );
    let plugin = std::fs::read_to_string(root.join("python/ccm_conda_plugin/plugin.py")).unwrap();
    for (constant, name) in [
        ("NAME", OWN_LAUNCHER_COMMANDS[0]),
        ("ESTABLISHED_NAME", OWN_LAUNCHER_COMMANDS[1]),
    ] {
        assert!(
            plugin.contains(&format!("{constant} = \"{name}\"")),
            "{constant} is not {name}"
        );
    }
    // It implements subcommands only (what confirmation expects of it).
    let hooks: Vec<&str> = plugin
        .lines()
        .filter(|l| l.trim_start().starts_with("def conda_"))
        .collect();
    assert!(
        hooks.iter().all(|l| l.contains("def conda_subcommands")) && !hooks.is_empty(),
        "{hooks:?}"
    );
}
