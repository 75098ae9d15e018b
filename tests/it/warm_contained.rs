//! Warm reads by default (#29): the read zygote runs inside the read-only sandbox (no
//! privilege, its own namespaces, everything read-only), what a module tries while it is
//! preloaded meets that sandbox and the module is refused, one read call leaves nothing a
//! later one sees, and each result's `_meta` says whether the call ran warm, under every
//! revision.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::mcp::{Session, session_less_meta};
use crate::support;
use crate::warm::wait_ready;

const META_WARM: &str = "conda-cli-mcp/warm";

fn conda() -> &'static Path {
    &support::fixture().conda
}

fn zygote_pid(s: &mut Session) -> u32 {
    s.capabilities()["warm"]["zygote_pid"]
        .as_u64()
        .expect("a ready zygote has a pid") as u32
}

/// Poll the capabilities until warm reads say they are off (set once the tools are
/// served); the `warm` entry.
fn warm_when_off(s: &mut Session) -> Value {
    for _ in 0..300 {
        let warm = s.capabilities()["warm"].clone();
        if warm["state"] == "off" {
            return warm;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!(
        "warm reads never said they were off: {}",
        s.capabilities()["warm"]
    );
}

#[test]
fn warm_reads_are_the_default_and_off_on_request() {
    let mut s = Session::start(conda(), &[]);
    wait_ready(&mut s);
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(result["_meta"][META_WARM], true, "{result}");
    assert_eq!(s.capabilities()["warm"]["warm_calls"], 1);
    // Compatibility: --warm is accepted and changes nothing.
    let mut s = Session::start(conda(), &["--warm"]);
    wait_ready(&mut s);
    // Off by flag or variable: no zygote, no key.
    for mut off in [
        Session::start(conda(), &["--no-warm"]),
        Session::start_with(conda(), &[], &[("CCM_WARM", "0")]),
        Session::start_with(conda(), &[], &[("CCM_WARM", "off")]),
    ] {
        let result = off.call("conda_info", json!({"json": true}));
        assert_eq!(result["_meta"].get(META_WARM), None, "{result}");
        assert_eq!(off.capabilities()["warm"], Value::Null);
    }
}

#[test]
fn without_the_sandbox_warm_reads_are_off_and_say_why_once() {
    let mut s = Session::start(conda(), &["--no-sandbox"]);
    let warm = warm_when_off(&mut s);
    assert_eq!(warm["enabled"], false, "{warm}");
    assert!(
        warm["reason"].as_str().unwrap().contains("--no-sandbox"),
        "{warm}"
    );
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(result["_meta"].get(META_WARM), None, "{result}");
    let stderr = s.stderr.lock().unwrap().clone();
    assert_eq!(
        stderr.matches("warm reads are off").count(),
        1,
        "one startup line: {stderr}"
    );
}

/// The `_meta` of a read call under each revision: `true` once the zygote is ready,
/// handshake revisions and the session-less one alike.
#[test]
fn every_revision_says_whether_a_call_ran_warm() {
    for revision in ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"] {
        let (mut s, meta) = Session::at_revision(conda(), revision, &[]);
        // Ready: the capabilities read as this revision reads them.
        for _ in 0..900 {
            let read = s.request(
                "resources/read",
                json!({"uri": "conda://capabilities", "_meta": meta}),
            );
            let text = read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap_or("{}");
            let caps: Value = serde_json::from_str(text).unwrap();
            if caps["warm"]["state"] == "ready" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let params = json!({"name": "conda_info", "arguments": {"json": true}, "_meta": meta});
        let answer = s.request("tools/call", params);
        let result = &answer["result"];
        assert_eq!(result["_meta"][META_WARM], true, "{revision}: {answer}");
        assert_eq!(
            result["_meta"]["conda-cli-mcp/stdout"], "moved-to-parsed_json",
            "{revision}: {answer}"
        );
        if revision == "2026-07-28" {
            assert_eq!(meta, session_less_meta());
        }
    }
}

/// `/proc/<pid>/status` fields of the zygote.
fn status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
        .trim()
        .to_owned()
}

#[test]
fn the_read_zygote_runs_inside_the_read_only_sandbox() {
    let check = |s: &mut Session, who: &str| {
        wait_ready(s);
        let pid = zygote_pid(s);
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(status_field(pid, cap), "0000000000000000", "{who}: {cap}");
        }
        assert_eq!(status_field(pid, "NoNewPrivs"), "1", "{who}");
        assert_eq!(
            status_field(pid, "Seccomp"),
            "2",
            "{who}: the unix-socket filter"
        );
        for ns in ["user", "mnt", "ipc"] {
            let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}")).unwrap();
            let ours = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
            assert_ne!(
                theirs, ours,
                "{who}: the zygote shares the host's {ns} namespace"
            );
        }
        // Its root mount (and every other but its tmpfs) is read-only.
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let root = mounts
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/"))
            .unwrap_or_else(|| panic!("{who}: no root mount: {mounts}"));
        let options = root.split(' ').nth(5).unwrap();
        assert!(options.split(',').any(|o| o == "ro"), "{who}: {root}");
    };
    let mut s = Session::start(conda(), &[]);
    check(&mut s, "root");
    let unprivileged = crate::kit::nobody::Unprivileged::new();
    let mut s = unprivileged.server(&[]);
    check(&mut s, "unprivileged");
}

/// A FIFO at `path` that a sandboxed process can write (nothing else of the host is
/// writable from there), and a thread collecting its lines until "END".
fn fifo(path: &Path) -> std::thread::JoinHandle<Vec<String>> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        loop {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                if line == "END" {
                    return lines;
                }
                lines.push(line.to_owned());
            }
        }
    })
}

fn end(path: &Path) {
    let mut fifo = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    fifo.write_all(b"END\n").unwrap();
}

/// A plugin module that, at import, writes a file, connects to a unix socket and starts a
/// process that writes a file, and reports each outcome (and whether it ran under the
/// sandbox's filter) through the FIFO. Discovery's helper runs outside the sandbox (the
/// control); the zygote's survey children run inside it.
fn hostile_preload(dir: &Path) -> String {
    format!(
        r#"
import json, os, socket, subprocess
_dir = {dir:?}
def _try(what):
    try:
        what()
        return "ok"
    except OSError as error:
        import errno
        return errno.errorcode.get(error.errno, str(error.errno))
_pid = os.getpid()
with open("/proc/self/status") as _status:
    _seccomp = [l.split()[1] for l in _status if l.startswith("Seccomp:")][0]
def _write():
    with open(os.path.join(_dir, "written-%d" % _pid), "w") as f:
        f.write("x")
def _connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(_dir, "listener"))
def _spawn():
    target = os.path.join(_dir, "spawned-%d" % _pid)
    subprocess.run(["/bin/sh", "-c", "echo x > " + target], check=False, stderr=subprocess.DEVNULL)
_report = {{"pid": _pid, "seccomp": _seccomp, "write": _try(_write), "connect": _try(_connect),
           "spawn": _try(_spawn)}}
with open(os.path.join(_dir, "reports"), "a") as _fifo:
    _fifo.write(json.dumps(_report) + "\n")
"#,
        dir = dir.display().to_string()
    )
}

#[test]
fn a_module_that_writes_connects_or_starts_a_process_while_preloaded_meets_the_sandbox() {
    let fixture = support::build_fixture(&[]);
    let dir = tempfile::Builder::new()
        .prefix("ccm-hostile-preload-")
        .tempdir_in("/tmp")
        .unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("listener")).unwrap();
    let reports = dir.path().join("reports");
    let reader = fifo(&reports);
    fixture.add_plugin("conda-hostile-preload", &hostile_preload(dir.path()));
    let mut s = Session::start_with(&fixture.conda, &[], &[("CCM_LOG", "debug")]);
    wait_ready(&mut s);
    let zygote = zygote_pid(&mut s);
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(result["_meta"][META_WARM], true, "{result}");
    let stderr = s.stderr.lock().unwrap().clone();
    drop(s);
    end(&reports);
    let reports: Vec<Value> = reader
        .join()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (inside, outside): (Vec<&Value>, Vec<&Value>) =
        reports.iter().partition(|r| r["seccomp"] == "2");
    assert!(
        !inside.is_empty(),
        "the survey never imported it: {reports:?}"
    );
    for report in inside {
        let pid = &report["pid"];
        assert_eq!(report["write"], "EROFS", "{report}");
        assert_eq!(report["connect"], "EACCES", "{report}");
        assert!(!dir.path().join(format!("written-{pid}")).exists());
        assert!(!dir.path().join(format!("spawned-{pid}")).exists());
        // Only throwaway survey children and the call imported it, never the zygote.
        assert_ne!(report["pid"], json!(zygote), "preloaded: {report}");
    }
    // The control: discovery (outside the sandbox) writes, connects and spawns.
    assert!(
        outside
            .iter()
            .any(|r| r["write"] == "ok" && r["connect"] == "ok"),
        "no control: {reports:?}"
    );
    assert!(
        stderr.contains("not preloaded: conda_hostile_preload"),
        "{stderr}"
    );
}

/// A plugin whose `leak` subcommand reports what it finds of the state a call could
/// leave behind, then leaves some of each kind.
const LEAKY: &str = r#"
import json, os, random, signal, sys
from conda.plugins import hookimpl
from conda.plugins.types import CondaSubcommand

SEEN = {"calls": 0}


def _leak(args):
    fds = sorted(os.listdir("/proc/self/fd"))
    handler = signal.getsignal(signal.SIGUSR1)
    report = {
        "global": SEEN["calls"],
        "environ": os.environ.get("CCM_LEAKED"),
        "cwd": os.getcwd(),
        "path": [p for p in sys.path if p.startswith("/leaked")],
        "fds": fds,
        "signal": None if handler is signal.SIG_DFL else repr(handler),
        "random": random.random(),
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    SEEN["calls"] += 1
    os.environ["CCM_LEAKED"] = "1"
    os.chdir("/")
    sys.path.insert(0, "/leaked")
    os.set_inheritable(os.open("/dev/null", os.O_RDONLY), True)
    signal.signal(signal.SIGUSR1, lambda *a: None)
    random.seed(42)
    return 0


@hookimpl
def conda_subcommands():
    yield CondaSubcommand(
        name="leak",
        summary="Report and leave state.",
        action=_leak,
        configure_parser=lambda parser: None,
    )
"#;

/// Two warm calls of the leaky subcommand on one server, each report (shared by the
/// tests below, each checking one kind of state).
fn two_leaky_calls() -> &'static (Value, Value, PathBuf) {
    static CALLS: OnceLock<(Value, Value, PathBuf)> = OnceLock::new();
    CALLS.get_or_init(|| {
        let fixture = support::build_fixture(&[]);
        fixture.add_plugin("conda-leaky", LEAKY);
        let mut s = Session::start(&fixture.conda, &["--classify", "conda_leak=read"]);
        wait_ready(&mut s);
        let mut reports = Vec::new();
        for _ in 0..2 {
            let result = s.call("conda_leak", json!({}));
            assert_eq!(result["_meta"][META_WARM], true, "{result}");
            // The report is the JSON document: carried in `parsed_json`.
            let report = result["structuredContent"]["parsed_json"].clone();
            assert!(report.is_object(), "{result}");
            reports.push(report);
        }
        let cwd = std::env::current_dir().unwrap();
        std::mem::forget(fixture);
        (reports.remove(0), reports.remove(0), cwd)
    })
}

#[test]
fn a_read_leaves_no_module_global_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    assert_eq!(
        (&first["global"], &second["global"]),
        (&json!(0), &json!(0))
    );
}

#[test]
fn a_read_leaves_no_environment_variable_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    assert_eq!(
        (&first["environ"], &second["environ"]),
        (&Value::Null, &Value::Null)
    );
}

#[test]
fn a_read_leaves_no_working_directory_to_the_next() {
    let (first, second, cwd) = two_leaky_calls();
    assert_eq!(first["cwd"], json!(cwd));
    assert_eq!(second["cwd"], json!(cwd));
}

#[test]
fn a_read_leaves_no_sys_path_entry_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    assert_eq!((&first["path"], &second["path"]), (&json!([]), &json!([])));
}

#[test]
fn a_read_leaves_no_open_descriptor_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    assert_eq!(first["fds"], second["fds"]);
}

#[test]
fn a_read_leaves_no_signal_handler_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    assert_eq!(
        (&first["signal"], &second["signal"]),
        (&Value::Null, &Value::Null)
    );
}

#[test]
fn a_read_leaves_no_random_state_to_the_next() {
    let (first, second, _) = two_leaky_calls();
    // What `random.seed(42)` in the first call would make the second draw.
    let seeded = 0.6394267984578837;
    assert_ne!(second["random"], json!(seeded));
    // And the two calls do not share one generator's state either: each is seeded anew.
    assert_ne!(first["random"], second["random"]);
}
