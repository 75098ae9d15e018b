//! A confirmed run checks every package it fetches against its record's hash, over
//! `http(s)://` too (attack 17 A17-4): conda checks a download only against a hash the
//! record carries, so a record without one let a package swapped while the question was
//! open install and run its post-link script. Such a record stops the run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::binding::{ASKING, Asking, Real, assert_changed};
use crate::support;

/// A directory served over http on a free port (`tests/fixtures/cache_attack.py serve`),
/// ended on drop.
struct Served(Child, String);

impl Served {
    fn start(root: &std::path::Path) -> Served {
        let mut child = Command::new(support::python())
            .arg(support::repo().join("tests/fixtures/cache_attack.py"))
            .arg("serve")
            .arg(root)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the channel server");
        let stdout = child.stdout.take().unwrap();
        // Kept first, so that a failure below still ends it (`Drop`).
        let mut served = Served(child, String::new());
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().expect("the server's port");
        served.1 = format!("http://127.0.0.1:{port}");
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every record of the channel's indexes without md5 nor sha256.
fn strip_hashes(channel: &std::path::Path) {
    for subdir in ["noarch", "linux-64"] {
        let index = channel.join(subdir).join("repodata.json");
        let Ok(bytes) = std::fs::read(&index) else {
            continue;
        };
        let mut repodata: Value = serde_json::from_slice(&bytes).unwrap();
        for key in ["packages", "packages.conda"] {
            if let Some(records) = repodata[key].as_object_mut() {
                for record in records.values_mut() {
                    let record = record.as_object_mut().unwrap();
                    record.remove("md5");
                    record.remove("sha256");
                }
            }
        }
        std::fs::write(&index, serde_json::to_vec(&repodata).unwrap()).unwrap();
    }
}

/// The same package from the same server, its record with and without hashes: with,
/// the confirmed run installs it (each download checked); without, it stops.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_an_http_package_without_a_hash_does_not_run() {
    let real = Real::new();
    real.channel("web/hashed", "barpkg=1.0", None);
    real.channel("web/bare", "barpkg=1.0", None);
    strip_hashes(&real.path("web/bare"));
    let served = Served::start(&real.path("web"));
    let env: Vec<(String, String)> = real
        .env()
        .into_iter()
        .filter(|(name, _)| name != "CONDA_OFFLINE")
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let flags = ["--allow-write", "--confirm-writes"];
    let setup = real.path("");
    let conda = support::real_conda();
    let mut server = Asking::start_in(ASKING[0], &conda, &flags, &env, Some(&setup));
    let create = |channel: &str, env: &str| {
        json!({
            "prefix": real.path(env),
            "channel": [format!("{}/{channel}", served.1)],
            "override_channels": true,
            "packages": ["barpkg"],
        })
    };
    let (question, result) = server.ask("conda_create", create("bare", "env"), "accept", |_| {});
    assert!(question.contains("no hash recorded"), "{question}");
    assert_changed(&result, "has no hash in its record", "http without a hash");
    assert_eq!(real.installed("env"), Vec::<Value>::new());
    assert_eq!(real.marks(), Vec::<String>::new());

    let (question, result) = server.ask("conda_create", create("hashed", "ok"), "accept", |_| {});
    assert!(!question.contains("no hash recorded"), "{question}");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(real.installed("ok").len(), 1);
    assert_eq!(real.marks().len(), 1, "the post-link script ran once");
}
