//! Instant start from a baked snapshot: the fixture's stamp matches the baked fixture
//! snapshot, so tools are served before live discovery ends, and live discovery confirms
//! (or contradicts) them afterwards.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

/// Read the capabilities until live discovery has had its say.
fn settled(session: &mut Session) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let caps = session.capabilities();
        if caps["startup"]["confirmation"] != "pending" {
            return caps;
        }
        assert!(Instant::now() < deadline, "live discovery never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn matching_target_starts_from_the_snapshot_and_is_confirmed() {
    let mut s = Session::start(&support::fixture().conda, &[]);
    let tools = s.tools();
    let caps = settled(&mut s);
    assert_eq!(caps["startup"]["path"], "snapshot");
    assert_eq!(
        caps["startup"]["reason"],
        "stamp matched the baked snapshot conda-0.99.json"
    );
    assert_eq!(caps["startup"]["confirmation"], "confirmed");
    assert_eq!(caps["restart"]["required"], false);
    // The snapshot's tools are the live catalog's tools.
    let found = support::fixture_discovery();
    let live = support::toolset(&found.catalog, &found.plugins, false).descriptors();
    assert_eq!(Value::Array(tools), Value::Array(live));
    // Calls run at once, with the baked compilers.
    assert!(
        caps["compilers"]
            .as_object()
            .unwrap()
            .values()
            .all(|c| c == "baked")
    );
    let r = s.call("conda_list", json!({"json": true}));
    assert_eq!(structured(&r)["restart_required"], false);
}

#[test]
fn a_parser_change_behind_the_stamp_requires_a_restart() {
    let fixture = support::build_fixture(&[]);
    let site = fixture.site_packages().join("conda/cli/main_info.py");
    let source = std::fs::read_to_string(&site).unwrap();
    let changed = source.replacen(
        "    p.add_argument(\"--base\"",
        "    p.add_argument(\"--brand-new\", action=\"store_true\", help=\"New.\")\n    p.add_argument(\"--base\"",
        1,
    );
    assert_ne!(changed, source);
    std::fs::write(&site, changed).unwrap();
    let mut s = Session::start(&fixture.conda, &[]);
    let tools = s.tools();
    let caps = settled(&mut s);
    assert_eq!(
        caps["startup"]["path"], "snapshot",
        "same version and plugins: same stamp"
    );
    assert_eq!(caps["startup"]["confirmation"], "differs");
    assert_eq!(caps["restart"]["required"], true);
    let reason = caps["restart"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("command `info`: argument `brand_new` is new"),
        "{reason}"
    );
    // The tool list never changes in place; every result says restart.
    assert_eq!(s.tools(), tools);
    let r = s.call("conda_list", json!({"json": true}));
    assert_eq!(structured(&r)["restart_required"], true);
}

#[test]
fn other_plugins_or_no_snapshot_start_live() {
    let fixture = support::build_fixture(&["--with-plugin", "extra"]);
    let mut s = Session::start(&fixture.conda, &[]);
    let names: Vec<String> = s
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"conda_extra".to_owned()));
    let caps = s.capabilities();
    assert_eq!(caps["startup"]["path"], "live");
    assert_eq!(
        caps["startup"]["reason"],
        "plugins differ from the baked snapshot conda-0.99.json"
    );
    assert_eq!(caps["startup"]["confirmation"], Value::Null);

    let mut s = Session::start(&support::fixture().conda, &["--no-snapshot"]);
    s.tools();
    let caps = s.capabilities();
    assert_eq!(caps["startup"]["path"], "live");
    assert_eq!(caps["startup"]["reason"], "--no-snapshot");
    // Baked compilers are still used on the live path where signatures match.
    assert!(
        caps["compilers"]
            .as_object()
            .unwrap()
            .values()
            .all(|c| c == "baked")
    );
}
