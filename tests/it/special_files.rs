//! A call that names a FIFO, a socket, a device other than the memory devices, or an
//! entry of `/proc` or `/dev/fd` (`/dev/stdin`, `/proc/self/fd/0`) is refused before
//! anything runs (attack 5, V5): conda's `open` of a FIFO blocks until a writer comes, so a
//! read-only `conda compare` of a FIFO the agent's file tools made held the server's one
//! execution slot, and every session's calls, until `--timeout`. Directly, by a bare word
//! in the working directory, through a symlink, in `--opt=value` form; the same refusal
//! under every revision offered (the gate is transport-independent: stdio here).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp::Session;
use crate::support;

const SPECIAL: &str = "Operation names a path that is a FIFO, a socket, a device (other than \
    /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom) or an entry of /proc or /dev/fd \
    (such as /dev/stdin), which conda could wait on until the timeout; name a regular file \
    instead. Nothing ran.";

const REVISIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
}

/// A project directory holding a FIFO `environment.yml`, a symlink `link.yml` to it, a
/// listening unix socket `sock`, and a regular file `plain.yml`.
fn project() -> (tempfile::TempDir, std::os::unix::net::UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("environment.yml"));
    std::os::unix::fs::symlink("environment.yml", dir.path().join("link.yml")).unwrap();
    let socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    std::fs::write(dir.path().join("plain.yml"), "name: x\n").unwrap();
    (dir, socket)
}

/// The paths a call may not name (relative ones from the project directory).
fn special(dir: &Path) -> Vec<String> {
    let fifo = dir.join("environment.yml").to_str().unwrap().to_owned();
    let mut paths = vec![
        "environment.yml".to_owned(),
        "link.yml".to_owned(),
        "./sock".to_owned(),
        fifo,
        "/dev/stdin".to_owned(),
        "/dev/stdout".to_owned(),
        "/dev/fd/0".to_owned(),
        "/proc/self/fd/0".to_owned(),
        "/proc/thread-self/fd/1".to_owned(),
        "/proc/kmsg".to_owned(),
        "/dev/../proc/self/fd/2".to_owned(),
    ];
    // Devices that exist here and are no memory device.
    for device in ["/dev/tty", "/dev/ptmx", "/dev/kmsg", "/dev/loop-control"] {
        if Path::new(device).exists() {
            paths.push(device.to_owned());
        }
    }
    paths
}

/// The call's answer under `revision`: the refusal's text, or `None` when it ran.
fn refusal(answer: &Value, revision: &str) -> Option<String> {
    if revision == "2025-06-18" {
        let error = answer.get("error")?;
        assert_eq!(error["code"], -32600, "{answer}");
        assert_eq!(error["data"]["reason"], "names_special_file", "{answer}");
        return error["message"].as_str().map(str::to_owned);
    }
    let result = &answer["result"];
    if result["isError"] != true || result.get("structuredContent").is_some() {
        return None;
    }
    assert_eq!(
        result["_meta"]["conda-cli-mcp/refused"]["reason"], "names_special_file",
        "{answer}"
    );
    let text = result["content"][0]["text"].as_str()?;
    text.strip_prefix("names_special_file: ").map(str::to_owned)
}

fn call(s: &mut Session, meta: &Value, tool: &str, arguments: Value) -> Value {
    let id = s.send(
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": meta}),
    );
    s.wait(id, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("no answer to {tool}"))
}

/// Offline: every special path, in every form conda reads a path in, is refused under
/// every revision, with a fixed text that names no path; a regular file and `/dev/null`
/// still run.
#[test]
fn a_call_naming_a_fifo_socket_device_or_proc_entry_is_refused() {
    let (dir, _socket) = project();
    let cwd = dir.path().to_str().unwrap();
    let conda = &support::fixture().conda;
    for revision in REVISIONS {
        let (mut s, meta) = Session::at_revision(conda, revision, &["--timeout", "20"]);
        for path in special(dir.path()) {
            for arguments in [
                json!({"prefix": path, "ccm_cwd": cwd}),
                json!({"regex": format!("x[channel={path}]"), "ccm_cwd": cwd}),
            ] {
                let answer = call(&mut s, &meta, "conda_list", arguments.clone());
                let text = refusal(&answer, revision)
                    .unwrap_or_else(|| panic!("{revision}: {arguments} ran: {answer}"));
                assert_eq!(text, SPECIAL, "{revision}: {arguments}");
                let rest = answer.to_string().replace(SPECIAL, "");
                assert!(!rest.contains(&path), "{path} echoed: {answer}");
            }
        }
        for path in ["plain.yml", "/dev/null", "/dev/zero", "nothing-here"] {
            let arguments = json!({"prefix": path, "ccm_cwd": cwd});
            let answer = call(&mut s, &meta, "conda_list", arguments.clone());
            assert_eq!(refusal(&answer, revision), None, "{revision}: {arguments}");
            assert!(
                answer["result"]["structuredContent"]["exit_code"].is_i64(),
                "{revision}: {arguments}: {answer}"
            );
        }
    }
}

/// Real conda: `conda compare` of a FIFO in the working directory (the repro of V5) is
/// refused at once, and a call behind it is not held; through a symlink too. Before, the
/// compare held the slot until `--timeout` and the call behind it waited as long.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_compare_of_a_fifo_does_not_hold_the_server() {
    let conda = support::real_conda();
    let prefix = conda.parent().unwrap().parent().unwrap().to_owned();
    let (dir, _socket) = project();
    let cwd = dir.path().to_str().unwrap();
    let mut s = Session::start(&conda, &["--timeout", "120"]);
    for file in [
        "environment.yml",
        "link.yml",
        "/dev/stdin",
        "/proc/self/fd/0",
    ] {
        let begun = Instant::now();
        let arguments = json!({"file": file, "prefix": prefix, "ccm_cwd": cwd});
        let answer = call(&mut s, &json!({}), "conda_compare", arguments.clone());
        assert_eq!(
            refusal(&answer, "2025-06-18").as_deref(),
            Some(SPECIAL),
            "{arguments}: {answer}"
        );
        eprintln!("{file}: refused after {:?}", begun.elapsed());
    }
    // A regular environment file is compared as before.
    std::fs::write(
        dir.path().join("plain.yml"),
        "name: x\ndependencies:\n  - python\n",
    )
    .unwrap();
    let answer = call(
        &mut s,
        &json!({}),
        "conda_compare",
        json!({"file": "plain.yml", "prefix": prefix, "ccm_cwd": cwd}),
    );
    let result = &answer["result"];
    assert_eq!(result["structuredContent"]["timed_out"], false, "{answer}");
    assert!(
        result["structuredContent"]["exit_code"].is_i64(),
        "{answer}"
    );
}
