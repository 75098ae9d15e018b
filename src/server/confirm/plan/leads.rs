//! The question's paths that lead elsewhere than they name (a symlink on the way).

use super::tests::shown;
use super::{Plan, command_line, message};
use serde_json::json;
use std::path::Path;

#[test]
fn a_target_that_leads_elsewhere_is_shown_with_where_it_leads() {
    // The agent's symlink in its project to a directory elsewhere (attack 33 N3): the
    // question names both; a target that leads where it is named, once.
    let install = command_line(&["install".to_owned(), "pkga".to_owned()]).unwrap();
    let (link, prod) = ("/project/link", "/srv/envs/prod");
    for (prefix, real, line) in [
        (link, prod, format!("{link} (it leads to {prod})")),
        ("/envs/a", "/envs/a", "/envs/a".to_owned()),
    ] {
        let setups = json!([[{"prefix": prefix, "real": real}]]);
        let plan =
            json!({"protocol": 1, "packages": true, "prefix": prefix, "transactions": setups});
        let plan: Plan = serde_json::from_value(plan).unwrap();
        let text = message(&shown(&install, Path::new("/project"), Some(&plan))).unwrap();
        assert!(
            text.contains(&format!("\nTarget environment: {line}\n")),
            "{text}"
        );
    }
    // A removal of it whole, from the preview's paths (no transaction of that name).
    let plan = Plan {
        prefix: Some("/project/link".into()),
        deletes_prefix: Some(true),
        paths: json!({"target": [link, prod, null]}),
        ..Plan::default()
    };
    let command = command_line(&["remove".to_owned(), "--all".to_owned()]).unwrap();
    let text = message(&shown(&command, Path::new("/project"), Some(&plan))).unwrap();
    let delete = format!("Delete: the environment {link} (it leads to {prod}) and everything");
    assert!(text.contains(&delete), "{text}");
    // A path of the command line through the agent's symlink (attack 37 S2): shown with
    // where it leads; one that leads where it names, and the target, are not repeated.
    let export = ["export", "-p", "env", "--file", "out/passwd"].map(str::to_owned);
    let plan = Plan {
        prefix: Some("/project/env".into()),
        paths: json!({"target": ["env", "/project/env", null],
            "argv": [["export", "/project/export", null, "/project/export"],
                ["env", "/project/env", null, "/project/env"],
                ["out/passwd", "/etc/passwd", [1, 2, 1], "/project/out/passwd"]]}),
        ..Plan::default()
    };
    let text = message(&shown(
        &command_line(&export).unwrap(),
        Path::new("/project"),
        Some(&plan),
    ))
    .unwrap();
    assert!(
        text.contains("\nPath: out/passwd (it leads to /etc/passwd)\n"),
        "{text}"
    );
    assert_eq!(text.matches("Path: ").count(), 1, "{text}");
}
