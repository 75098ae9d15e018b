//! Sandboxed children hold no privileges: no capability in any set (inheritable,
//! permitted, effective, bounding, ambient) and `no_new_privs`, whether the server runs as
//! root or as an unprivileged user (then in a user namespace, where a child would
//! otherwise keep a full bounding set), cold and `--warm`. Read from `/proc/self/status`
//! of the program a sandboxed `conda run` starts (exec without `--allow-write` runs
//! sandboxed): a root process that execs keeps or regains capabilities unless its
//! bounding set is empty and root's special treatment is off.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::kit::users::sandboxed_server;
use crate::mcp::{Session, structured};

/// The fields of `/proc/<pid>/status` that say what a process may do beyond its ids.
const FIELDS: [&str; 6] = [
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
];

/// The privilege fields of a status document.
fn privileges(status: &str) -> Vec<(String, String)> {
    FIELDS
        .iter()
        .map(|field| {
            let value = status
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{field}:")))
                .unwrap_or_else(|| panic!("no {field} in {status}"))
                .trim()
                .to_owned();
            ((*field).to_owned(), value)
        })
        .collect()
}

/// What every sandboxed program must show.
fn none() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = FIELDS[..5]
        .iter()
        .map(|f| ((*f).to_owned(), "0000000000000000".to_owned()))
        .collect();
    out.push(("NoNewPrivs".into(), "1".into()));
    out
}

/// `/proc/self/status` of a program a sandboxed `conda run` starts.
fn status_of_a_sandboxed_program(s: &mut Session, prefix: &Path) -> String {
    let result = s.call(
        "conda_run",
        json!({"prefix": prefix, "executable_call": ["cat", "/proc/self/status"]}),
    );
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    structured(&result)["stdout"].as_str().unwrap().to_owned()
}

/// Cold and warm, one sandboxed program's privileges must be none.
fn check(launch: &dyn Fn() -> Command, conda: &Path, prefix: &Path, home: &Path, who: &str) {
    for warm in [false, true] {
        let mut s = sandboxed_server(launch(), conda, home, warm);
        let status = status_of_a_sandboxed_program(&mut s, prefix);
        assert_eq!(
            privileges(&status),
            none(),
            "{who}, warm {warm}: a sandboxed program holds privileges"
        );
        if warm {
            let counters: Value = s.capabilities()["warm"].clone();
            assert_eq!(counters["warm_calls"], 1, "{counters}");
        }
    }
}

/// The fixture conda, as the tests' user (root in CI) and as `nobody` (when root).
#[test]
fn sandboxed_children_hold_no_capabilities_and_no_new_privileges() {
    crate::kit::users::fixture_as_each_user(check);
}

/// A real conda as the tests' user (root in CI): its `conda run` (activation, a shell
/// wrapper) starts the program.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_sandboxed_children_hold_no_capabilities_and_no_new_privileges() {
    crate::kit::users::real_conda_as_the_tests_user(check);
}
