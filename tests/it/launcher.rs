//! `conda mcp`: the conda plugin in `conda-plugin/` replaces conda with
//! `ccm --conda-exe <that conda>`, through the fixture conda's real plugin mechanism.
//! (`.ci/run` also installs it with pip from a built wheel.)

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::mcp::Session;
use crate::support::{self, Fixture};

/// Install the plugin as pip would: the package plus a dist-info with its entry point,
/// both read from the plugin's own files.
fn install_plugin(fixture: &Fixture) {
    let source = support::repo().join("conda-plugin");
    let pyproject = std::fs::read_to_string(source.join("pyproject.toml")).unwrap();
    let field = |key: &str| {
        pyproject
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap()
            .to_owned()
    };
    let (name, version) = (field("name"), field("version"));
    let entry_point = pyproject
        .split("[project.entry-points.conda]")
        .nth(1)
        .and_then(|rest| rest.lines().find(|l| l.contains('=')))
        .unwrap()
        .replace('"', "");
    let site = fixture.site_packages();
    let package = site.join("ccm_conda_plugin");
    std::fs::create_dir_all(&package).unwrap();
    for file in ["__init__.py", "plugin.py"] {
        std::fs::copy(
            source.join("ccm_conda_plugin").join(file),
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
}

fn conda_mcp(conda: &Path, args: &[&str], ccm_bin: Option<&str>) -> std::process::Output {
    let mut command = Command::new(conda);
    command.arg("mcp").args(args).env_remove("CCM_BIN");
    if let Some(bin) = ccm_bin {
        command.env("CCM_BIN", bin);
    }
    command.output().unwrap()
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
        format!("{}\n", env!("CARGO_PKG_VERSION"))
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
    command.args(["mcp", "--allow-write"]).env("CCM_BIN", ccm);
    let mut session = Session::spawn(command);
    session.initialize = session.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    session.notify("notifications/initialized", json!({}));
    let caps = session.capabilities();
    assert_eq!(caps["target_executable"], json!(fixture.conda));
    let names: Vec<String> = session
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        names.contains(&"conda_mcp".to_owned()),
        "the plugin's own command is listed"
    );
    // --allow-write reached ccm: a mutation runs.
    let r = session.call("conda_install", json!({"packages": ["numpy"]}));
    assert_eq!(r["structuredContent"]["exit_code"], 0);
}
