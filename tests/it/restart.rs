//! Restart detection costs a helper process only when the plugin distributions on disk
//! changed: a marker plugin records every isolated (helper) interpreter that imports it.

use serde_json::json;

use crate::mcp::{Session, structured};
use crate::support;

#[test]
fn the_helper_runs_only_when_plugin_distributions_change() {
    let fixture = support::build_fixture(&[]);
    let marker = fixture.prefix.join("helper-runs.txt");
    fixture.add_plugin(
        "marker-plugin",
        &format!(
            "import sys\nif sys.flags.isolated:\n    with open({:?}, 'a') as f:\n        f.write('helper\\n')\n",
            marker.to_str().unwrap()
        ),
    );
    let runs = || {
        std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count()
    };

    let mut s = Session::start(&fixture.conda, &["--allow-write"]);
    s.tools();
    assert_eq!(runs(), 1, "startup discovery: one helper process");
    let r = s.call("conda_list", json!({"json": true}));
    assert_eq!(structured(&r)["restart_required"], false);
    let r = s.call("conda_install", json!({"packages": ["numpy"]}));
    assert_eq!(structured(&r)["restart_required"], false);
    assert_eq!(
        runs(),
        1,
        "read-only and plugin-neutral calls run no helper"
    );
    let r = s.call(
        "conda_install",
        json!({"packages": ["fixture-plugin-extra"]}),
    );
    assert_eq!(structured(&r)["restart_required"], true);
    assert_eq!(
        runs(),
        2,
        "a changed plugin set costs exactly one helper run"
    );
}
