//! `--warm` under attack: what a cold child gets, a warm child gets too (limits, cgroup,
//! withheld secrets, the kill sweep), nobody else can reach the zygote, a changed conda is
//! never served by stale modules, and nothing survives the server.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::kit::classify::{self, BEHAVE_READ};
use crate::kit::proc::{alive, assert_no_survivors, survivors, what_a_child_reads};
use crate::limits::{GRACE, SLACK, run_args, started, trees, unique_seconds, wait_until};
use crate::mcp::{Session, structured};
use crate::support;
use crate::warm::wait_ready;

fn conda() -> &'static Path {
    &support::fixture().conda
}

fn warm_session(conda: &Path, flags: &[&str], env: &[(&str, &str)]) -> Session {
    let mut args = vec!["--warm"];
    args.extend_from_slice(flags);
    let mut s = Session::start_with(conda, &args, env);
    wait_ready(&mut s);
    s
}

fn warm_state(s: &mut Session) -> Value {
    s.capabilities()["warm"].clone()
}

fn zygote_pid(s: &mut Session) -> i32 {
    warm_state(s)["zygote_pid"]
        .as_i64()
        .expect("a ready zygote has a pid") as i32
}

#[test]
fn warm_no_descendant_survives_a_timeout_or_a_cancellation() {
    let seconds = 5;
    let timeout = Duration::from_secs(seconds);
    let mut s = warm_session(conda(), &["--allow-exec", "--timeout", "5"], &[]);
    for tree in 0..2 {
        let unique = unique_seconds();
        let (name, argv) = trees(&unique)[tree].clone();
        let begun = Instant::now();
        let id = s.send(
            "tools/call",
            json!({"name": "conda_run", "arguments": run_args(&argv)}),
        );
        started(&unique);
        let response = s
            .wait(id, timeout + GRACE + Duration::from_secs(10))
            .expect("a result");
        assert_eq!(
            structured(&response["result"])["timed_out"],
            true,
            "{response}"
        );
        assert_no_survivors(&format!("sleep {unique}"), name);
        assert!(begun.elapsed() <= timeout + GRACE + SLACK + Duration::from_secs(1));
    }
    let unique = unique_seconds();
    let (name, argv) = trees(&unique)[1].clone();
    let id = s.send(
        "tools/call",
        json!({"name": "conda_run", "arguments": run_args(&argv)}),
    );
    started(&unique);
    s.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    wait_until("the tree to die", GRACE + Duration::from_secs(10), || {
        survivors(&format!("sleep {unique}")).is_empty()
    });
    assert_no_survivors(&format!("sleep {unique}"), name);
    let state = warm_state(&mut s);
    assert_eq!(state["warm_calls"], 3, "{state}");
    assert_eq!(state["cold_calls"], 0, "{state}");
    // The zygote serves on after killed children.
    let after = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&after)["exit_code"], 0, "{after}");
    assert_eq!(warm_state(&mut s)["warm_calls"], 4);
}

#[test]
fn warm_children_run_under_the_memory_limit_and_in_their_cgroup() {
    let mut s = warm_session(conda(), &["--allow-exec", "--memory-limit", "512MiB"], &[]);
    crate::limits::runs_out_of_512_mib(&mut s);
    // The warm child (the program's parent) is in the execution's cgroup, with its
    // program, not in the zygote's.
    let zygote = zygote_pid(&mut s);
    let script = format!(
        "cat /proc/self/cgroup; echo ==; cat /proc/$PPID/cgroup; echo ==; cat /proc/{zygote}/cgroup"
    );
    let result = s.call(
        "conda_run",
        json!({"executable_call": ["sh", "-c", script], "no_capture_output": true}),
    );
    let out = structured(&result)["stdout"].as_str().unwrap().to_owned();
    let parts: Vec<&str> = out.split("==\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    assert_eq!(
        parts[0], parts[1],
        "the warm child left its execution's cgroup"
    );
    if s.capabilities()["limits"]["descendant_tracking"] == "cgroup" {
        assert_ne!(parts[0], parts[2], "the call ran in the zygote's cgroup");
    }
    assert_eq!(warm_state(&mut s)["cold_calls"], 0);
}

#[test]
fn warm_secrets_reach_neither_the_zygote_nor_its_children() {
    let token = "hostile-warm-token-91f3";
    let mut s = warm_session(
        conda(),
        &["--allow-exec", "--child-env-remove", "OPERATOR_SECRET"],
        &[
            ("CCM_MCP_TOKEN", token),
            ("OPERATOR_SECRET", "operator-warm-secret"),
        ],
    );
    let zygote = zygote_pid(&mut s);
    let seen = what_a_child_reads(&mut s, &[zygote as u32]);
    for secret in [token, "operator-warm-secret"] {
        assert!(
            !seen.contains(secret),
            "{secret} reached a warm child: {seen}"
        );
    }
    // Read directly (this test runs as the server's user).
    if let Ok(environ) = std::fs::read(format!("/proc/{zygote}/environ")) {
        let environ = String::from_utf8_lossy(&environ);
        for secret in [token, "operator-warm-secret"] {
            assert!(!environ.contains(secret), "{secret} is in the zygote");
        }
    }
    assert_eq!(warm_state(&mut s)["warm_calls"], 1);
}

/// `/proc/net/unix` lines by inode: (flags, path).
fn unix_sockets() -> std::collections::HashMap<String, (String, String)> {
    std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let inode = fields.get(6)?.to_string();
            let path = fields.get(7).map(|p| p.to_string()).unwrap_or_default();
            Some((inode, (fields[3].to_owned(), path)))
        })
        .collect()
}

#[test]
fn the_zygote_listens_nowhere_and_holds_only_its_socket() {
    let mut s = warm_session(conda(), &[], &[]);
    let zygote = zygote_pid(&mut s);
    let sockets = unix_sockets();
    let mut seen = 0;
    for entry in std::fs::read_dir(format!("/proc/{zygote}/fd"))
        .unwrap()
        .flatten()
    {
        let target = std::fs::read_link(entry.path()).unwrap();
        let target = target.to_string_lossy();
        let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        else {
            assert!(
                target == "/dev/null" || target.starts_with("pipe:"),
                "the zygote holds {target}"
            );
            continue;
        };
        seen += 1;
        let (flags, path) = sockets.get(inode).expect("a unix socket");
        assert!(path.is_empty(), "the zygote's socket has a path: {path}");
        assert_ne!(flags, "00010000", "the zygote listens");
    }
    assert_eq!(seen, 1, "the zygote holds exactly its inherited socket");
    // A stranger connecting to anything named like it reaches nothing: there is no name.
    assert!(
        !std::fs::read_to_string("/proc/net/unix")
            .unwrap()
            .contains(&format!("ccm-{zygote}"))
    );
}

/// After one warm call, the last call ran cold because the target changed, and the zygote
/// `old` is replaced by a new one.
fn ran_cold_and_replaced(s: &mut Session, old: i32) {
    let state = warm_state(s);
    assert_eq!(
        (state["warm_calls"].clone(), state["cold_calls"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );
    let reason = state["last_cold_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("changed"), "{state}");
    wait_ready(s);
    assert_ne!(old, zygote_pid(s));
}

#[test]
fn a_changed_conda_replaces_the_zygote_and_that_call_runs_cold() {
    let fixture = support::build_fixture(&[]);
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = zygote_pid(&mut s);
    let warm = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&warm)["exit_code"], 0);
    assert_eq!(warm_state(&mut s)["warm_calls"], 1);
    // A plugin appears: the target's stamp changes.
    fixture.add_plugin("conda-warm-probe", "");
    let cold = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&cold)["exit_code"], 0, "{cold}");
    ran_cold_and_replaced(&mut s, first);
    wait_until("the old zygote to end", Duration::from_secs(10), || {
        !alive(first)
    });
    let again = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&again)["exit_code"], 0);
    assert_eq!(warm_state(&mut s)["warm_calls"], 2);
}

/// A module the zygote imported changes on disk while the target's stamp (conda's and
/// the plugins' versions) stays the same, as when a plugin's dependency is upgraded from
/// outside: that call runs cold, on the new code, and the zygote is replaced.
#[test]
fn a_changed_module_file_replaces_the_zygote_and_that_call_runs_cold() {
    let fixture = support::build_fixture(&[]);
    // conda_behave classified read: warm calls are the sandboxed ones.
    let mut s = warm_session(&fixture.conda, &BEHAVE_READ, &[]);
    let first = zygote_pid(&mut s);
    let text = |s: &mut Session| {
        let result = s.call("conda_behave", json!({"text": "hello"}));
        structured(&result)["stdout"].as_str().unwrap().to_owned()
    };
    assert_eq!(text(&mut s), "hello\n");
    assert_eq!(warm_state(&mut s)["warm_calls"], 1);
    let module = fixture
        .site_packages()
        .join("conda_fixture_tools/behave.py");
    let mut code = std::fs::read_to_string(&module).unwrap();
    code.push_str(
        "\n_plain_line = _line\n\n\ndef _line(text):\n    _plain_line(\"changed: \" + text)\n",
    );
    std::fs::write(&module, code).unwrap();
    assert_eq!(text(&mut s), "changed: hello\n");
    ran_cold_and_replaced(&mut s, first);
    assert_eq!(text(&mut s), "changed: hello\n");
    assert_eq!(warm_state(&mut s)["warm_calls"], 2);
}

#[test]
fn nothing_of_the_warm_path_survives_the_server() {
    let mut s = warm_session(conda(), &[], &[]);
    let zygote = zygote_pid(&mut s);
    assert!(alive(zygote));
    assert!(
        s.close_stdin_and_wait(GRACE + Duration::from_secs(10))
            .is_some()
    );
    wait_until("the zygote to end", Duration::from_secs(5), || {
        !alive(zygote)
    });
}

/// What a sandboxed call holds, seen by the program `conda run` starts: the capabilities
/// of its parent (the conda process, cold or warm) and its own, and whether it can write.
fn held(s: &mut Session, probe: &Path) -> String {
    let script = format!(
        "grep ^Cap /proc/$PPID/status; echo; grep ^Cap /proc/self/status; echo; \
         touch {} 2>&1 | sed 's/^.*: //'",
        probe.display()
    );
    let result = s.call(
        "conda_run",
        json!({"executable_call": ["sh", "-c", script], "no_capture_output": true}),
    );
    structured(&result)["stdout"].as_str().unwrap().to_owned()
}

/// Cold and warm servers made by `server`, which classifies the fixture's `conda_behave`
/// (it writes the file it is given) read so that it runs in the sandbox: a sandboxed
/// write fails in both, and the conda process and its program hold the same capabilities.
fn sandboxed_alike(server: impl Fn(&[&str]) -> Session, home: &Path) {
    let target = home.join("written-by-a-read");
    let probe = home.join("touched-by-a-read");
    let mut cold = server(&["--allow-exec", "--no-warm"]);
    let mut warm = server(&["--allow-exec", "--warm"]);
    wait_ready(&mut warm);
    assert_eq!(warm.capabilities()["sandbox"]["state"], "active");
    for s in [&mut cold, &mut warm] {
        let result = s.call("conda_behave", json!({"pid_file": target}));
        assert!(
            structured(&result)["stderr"]
                .as_str()
                .unwrap()
                .contains("Read-only file system"),
            "{result}"
        );
        assert!(!target.exists());
    }
    let (a, b) = (held(&mut cold, &probe), held(&mut warm, &probe));
    assert!(
        a.contains("CapEff") && a.contains("Read-only file system"),
        "{a}"
    );
    assert_eq!(a, b, "cold and warm children hold different things");
    assert!(!probe.exists());
    let state = warm_state(&mut warm);
    assert_eq!(
        (state["warm_calls"].clone(), state["cold_calls"].clone()),
        (json!(2), json!(0))
    );
}

#[test]
fn warm_sandboxed_children_hold_what_cold_ones_hold() {
    let home = tempfile::tempdir().unwrap();
    let server = |args: &[&str]| Session::start(conda(), &classify::with(&BEHAVE_READ, args));
    sandboxed_alike(server, home.path());
}

/// The same for a server that is not root (a user namespace).
#[test]
fn warm_sandboxed_children_of_an_unprivileged_server_hold_what_cold_ones_hold() {
    let unprivileged = crate::kit::nobody::Unprivileged::new();
    let server = |args: &[&str]| unprivileged.server(&classify::with(&BEHAVE_READ, args));
    sandboxed_alike(server, unprivileged.home());
}

/// A warm child's fork that never execs and leaves the process group: its
/// `/proc/<pid>/environ` is the zygote's (no `CCM_EXECUTION` marker), and a server that is
/// not root has no cgroup to find it by. It is reparented to the zygote (a child
/// subreaper), which kills it when the call is reaped, as the marker sweep ends a cold
/// child's.
#[test]
fn a_warm_forked_orphan_without_exec_or_cgroup_does_not_survive_the_call() {
    let unprivileged = crate::kit::nobody::Unprivileged::new();
    // A FIFO: the call runs in the read-only sandbox (warm reads are sandboxed calls),
    // where it writes nothing the test reads but this FIFO, which the server's sandboxed
    // children may open (`CCM_TEST_REPORT_FIFO`, a debug-build grant: no other host FIFO
    // opens there). Beside HOME, not in it: a HOME without `.conda` is seen through a
    // union in the sandbox, and a FIFO opened through an overlay is not the one the test
    // reads.
    let pids = unprivileged.home().parent().unwrap().join("pids");
    let c_path = std::ffi::CString::new(pids.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    std::fs::set_permissions(&pids, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let input = json!({"detached_grandchild": true, "no_exec": true, "child_sleep": 300,
                       "pid_file": pids});
    for flags in [
        classify::with(&BEHAVE_READ, &["--no-warm"]),
        classify::with(&BEHAVE_READ, &[]),
    ] {
        // The call opens the FIFO twice (its own pid, then the grandchild's).
        let reader = {
            let pids = pids.clone();
            std::thread::spawn(move || {
                let mut recorded = String::new();
                while recorded.lines().count() < 2 {
                    recorded += &std::fs::read_to_string(&pids).unwrap();
                }
                recorded
            })
        };
        let mut s = unprivileged.server_with(&flags, &[("CCM_TEST_REPORT_FIFO", &pids)]);
        let warm = !flags.contains(&"--no-warm");
        if warm {
            wait_ready(&mut s);
        }
        assert_eq!(
            s.capabilities()["limits"]["descendant_tracking"],
            "environment marker",
            "this server has cgroups: the case is not the one under test"
        );
        let result = s.call("conda_behave", input.clone());
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
        let recorded = reader.join().unwrap();
        let orphan: i32 = recorded.lines().nth(1).unwrap().parse().unwrap();
        let what = if warm {
            "a warm call's orphan to end"
        } else {
            "a cold call's orphan to end"
        };
        wait_until(what, Duration::from_secs(10), || !alive(orphan));
        if warm {
            let state = warm_state(&mut s);
            assert_eq!(state["warm_calls"], 1, "{state}");
        }
    }
}

/// Spawn `sleep 1000` in a process group of its own: a process the server must never
/// signal.
fn victim() -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("sleep")
        .arg("1000")
        .process_group(0)
        .spawn()
        .unwrap()
}

/// After one call: the victim still runs (then it is ended).
fn assert_spared(mut victim: std::process::Child) {
    std::thread::sleep(Duration::from_secs(2));
    let status = victim.try_wait().unwrap();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        status.is_none(),
        "the server signalled an unrelated process group: {status:?}"
    );
}

/// A plugin's module that registers an at-fork hook at import reads nothing of the call,
/// but its hook would run in the zygote before each fork (and `after_in_child` in the
/// warm child before any containment): such a module is never preloaded. Here the hook
/// forges the zygote's `pid` answer with a process of the attacker's choosing.
#[test]
fn a_module_registering_an_at_fork_hook_is_not_preloaded() {
    let fixture = support::build_fixture(&[]);
    let victim = victim();
    fixture.add_plugin(
        "forge-hook",
        &format!(
            "import os\n\
             def _hook():\n    os.write(3, b'pid {}\\n')\n\
             os.register_at_fork(before=_hook)\n",
            victim.id()
        ),
    );
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert_eq!(warm_state(&mut s)["warm_calls"], 1);
    assert_spared(victim);
}

/// A preloaded module that rewrites the zygote itself (trusted plugin code could: here
/// every socket's `sendall`, whatever the zygote calls its socket) and forges its answer:
/// the server adopts a pid only when it is the zygote's child; the call runs cold and the
/// unrelated process is never signalled.
#[test]
fn a_forged_answer_naming_a_process_that_is_not_the_zygotes_child_is_refused() {
    let fixture = support::build_fixture(&[]);
    let victim = victim();
    fixture.add_plugin(
        "forge-main",
        &format!(
            "import socket\n\
             _sendall = socket.socket.sendall\n\
             def _forged(self, data, *args):\n    \
                 if data.startswith(b'pid '):\n        data = b'pid {}\\n'\n    \
                 return _sendall(self, data, *args)\n\
             socket.socket.sendall = _forged\n",
            victim.id()
        ),
    );
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    let state = warm_state(&mut s);
    assert_eq!(state["cold_calls"], 1, "{state}");
    assert_spared(victim);
}

/// The same kind of module writes a file from the warm child, before the child enters
/// the sandbox of a read-only call; a cold read-only call runs plugin code only inside
/// the sandbox. Not preloaded, nothing is written.
#[test]
fn a_preloaded_module_runs_nothing_before_a_read_only_calls_sandbox() {
    let fixture = support::build_fixture(&[]);
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("escaped");
    fixture.add_plugin(
        "escape-hook",
        &format!(
            "import os\n\
             def _hook():\n    open({:?}, 'a').write('written by a warm child')\n\
             os.register_at_fork(after_in_child=_hook)\n",
            target.display().to_string()
        ),
    );
    let mut s = warm_session(&fixture.conda, &[], &[]);
    assert_eq!(s.capabilities()["sandbox"]["state"], "active");
    let result = s.call("conda_info", json!({"json": true}));
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    assert_eq!(warm_state(&mut s)["warm_calls"], 1);
    assert!(
        !target.exists(),
        "a read-only warm call wrote outside its sandbox"
    );
}

/// What a plugin's atexit handler printed after `label` during a read-only call.
fn printed_at_exit(s: &mut Session, label: &str) -> String {
    let result = s.call("conda_config", json!({"show": ["channels"]}));
    let stdout = structured(&result)["stdout"].as_str().unwrap_or_default();
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label).map(str::to_owned))
        .unwrap_or_else(|| panic!("{result}"))
}

/// A read is charged to the first module that makes it: `primer` reads the environment
/// (refused) and fills `tempfile`'s cache on the way; `capture` then calls
/// `tempfile.gettempdir()` at import without touching the environment, so one round of
/// watching admits it. Imported alone, as the zygote would, it reads the server's
/// `TMPDIR`; the next round sees that and refuses it, so a sandboxed warm call has its
/// sandbox's temporary directory, as a cold one does.
#[test]
fn a_cache_filled_by_a_refused_module_does_not_hide_a_per_call_read() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "tmp-capture",
        "from conda import plugins\n\
         from conda.plugins.types import CondaSubcommand\n\
         def _configure(parser):\n    \
             from . import primer, capture  # noqa: F401 (imported while the parser is built)\n\
         @plugins.hookimpl\n\
         def conda_subcommands():\n    \
             yield CondaSubcommand(name='tmpcap', summary='x', action=lambda a: 0, configure_parser=_configure)\n",
    );
    let package = fixture.site_packages().join("tmp_capture");
    std::fs::write(
        package.join("primer.py"),
        "import os, tempfile\nFOO = os.environ.get('FOO')\ntempfile.gettempdir()\n",
    )
    .unwrap();
    std::fs::write(
        package.join("capture.py"),
        "import atexit, sys, tempfile\nTMP = tempfile.gettempdir()\n\
         atexit.register(lambda: sys.stdout.write('captured TMPDIR=%s\\n' % TMP))\n",
    )
    .unwrap();
    let server_tmp = tempfile::tempdir().unwrap();
    let env = [("TMPDIR", server_tmp.path().to_str().unwrap())];
    let captured = |s: &mut Session| printed_at_exit(s, "captured TMPDIR=");
    let mut cold = Session::start_with(&fixture.conda, &[], &env);
    let mut warm = warm_session(&fixture.conda, &[], &env);
    let (cold_tmp, warm_tmp) = (captured(&mut cold), captured(&mut warm));
    assert_eq!(warm_state(&mut warm)["warm_calls"], 1);
    assert_eq!(warm_tmp, cold_tmp, "the warm call kept the zygote's TMPDIR");
}

/// `from sys import argv` reads nothing at import (admitted), but binds the zygote's
/// list: the warm child fills that list with the call's command line (and
/// `sys.orig_argv` likewise).
#[test]
fn a_module_holding_sys_argv_sees_the_calls_command_line() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "argv-capture",
        "import atexit, sys\n\
         from sys import argv\n\
         atexit.register(lambda: sys.stdout.write('captured argv=%r\\n' % (argv[1:],)))\n",
    );
    let captured = |s: &mut Session| printed_at_exit(s, "captured argv=");
    let mut cold = Session::start_with(&fixture.conda, &[], &[]);
    let mut warm = warm_session(&fixture.conda, &[], &[]);
    let (cold_argv, warm_argv) = (captured(&mut cold), captured(&mut warm));
    assert_eq!(warm_state(&mut warm)["warm_calls"], 1);
    assert_eq!(
        warm_argv, cold_argv,
        "the warm call's module sees another command line"
    );
}

/// A call that loads no plugins runs cold: a warm child would carry the import-time
/// effects of the plugins' preloaded modules (an atexit handler here) that a cold run
/// without plugins never has.
#[test]
fn a_call_without_plugins_runs_cold() {
    let fixture = support::build_fixture(&[]);
    // conda imports a plugin's entry module even without plugins; what its hooks import
    // while the parser is built (here `note`) only with them.
    fixture.add_plugin(
        "exit-note",
        "from conda import plugins\n\
         from conda.plugins.types import CondaSubcommand\n\
         def _configure(parser):\n    from . import note  # noqa: F401\n\
         @plugins.hookimpl\n\
         def conda_subcommands():\n    \
             yield CondaSubcommand(name='note', summary='x', action=lambda a: 0, configure_parser=_configure)\n",
    );
    std::fs::write(
        fixture.site_packages().join("exit_note/note.py"),
        "import atexit, sys\natexit.register(lambda: sys.stdout.write('plugin module loaded\\n'))\n",
    )
    .unwrap();
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let show = |s: &mut Session, input: Value| {
        let result = s.call("conda_config", input);
        structured(&result)["stdout"].as_str().unwrap().to_owned()
    };
    assert!(show(&mut s, json!({"show": ["channels"]})).contains("plugin module loaded"));
    let without = show(&mut s, json!({"show": ["channels"], "no_plugins": true}));
    assert!(!without.contains("plugin module loaded"), "{without}");
    let state = warm_state(&mut s);
    assert_eq!(
        (state["warm_calls"].clone(), state["cold_calls"].clone()),
        (json!(1), json!(1)),
        "{state}"
    );
    let reason = state["last_cold_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("without plugins"), "{state}");
}

/// A module rewritten in place to the same size with its modification time put back
/// (only the change time tells): the call runs cold and the zygote is replaced.
#[test]
fn a_module_rewritten_with_its_old_size_and_time_still_replaces_the_zygote() {
    let fixture = support::build_fixture(&[]);
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = zygote_pid(&mut s);
    let info = json!({"json": true});
    assert_eq!(
        structured(&s.call("conda_info", info.clone()))["exit_code"],
        0
    );
    let module = fixture
        .site_packages()
        .join("conda_fixture_tools/behave.py");
    let modified = std::fs::metadata(&module).unwrap().modified().unwrap();
    let code = std::fs::read_to_string(&module).unwrap();
    let rewritten = code.replacen("scripted", "Scripted", 1);
    assert_ne!(code, rewritten);
    assert_eq!(code.len(), rewritten.len());
    std::fs::write(&module, rewritten).unwrap();
    let file = std::fs::File::options().write(true).open(&module).unwrap();
    file.set_modified(modified).unwrap();
    assert_eq!(
        std::fs::metadata(&module).unwrap().modified().unwrap(),
        modified
    );
    assert_eq!(structured(&s.call("conda_info", info))["exit_code"], 0);
    ran_cold_and_replaced(&mut s, first);
}

/// A module that fell back when an optional dependency was missing: once the dependency
/// is installed (no module file of the zygote changes, nor the target's stamp), a call
/// imports it as a cold run would.
#[test]
fn an_optional_dependency_installed_later_is_seen_by_the_next_call() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "optional-probe",
        "import atexit, sys\n\
         try:\n    import ccm_optional_dependency\n    STATE = 'with'\n\
         except ImportError:\n    STATE = 'without'\n\
         atexit.register(lambda: sys.stdout.write('optional=%s\\n' % STATE))\n",
    );
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = zygote_pid(&mut s);
    assert_eq!(printed_at_exit(&mut s, "optional="), "without");
    std::fs::write(
        fixture.site_packages().join("ccm_optional_dependency.py"),
        "",
    )
    .unwrap();
    assert_eq!(printed_at_exit(&mut s, "optional="), "with");
    ran_cold_and_replaced(&mut s, first);
}

/// A shared library a preloaded module mapped (here through ctypes, as an extension
/// module maps libssl) is replaced by an update: no module file changes, yet the zygote
/// holds the old code, so the call runs cold and the zygote is replaced.
#[test]
fn a_replaced_shared_library_replaces_the_zygote() {
    let fixture = support::build_fixture(&[]);
    let found = std::process::Command::new(fixture.conda.with_file_name("python"))
        .args(["-c", "import _ctypes; print(_ctypes.__file__)"])
        .output()
        .unwrap();
    assert!(found.status.success(), "{found:?}");
    let library = String::from_utf8(found.stdout).unwrap().trim().to_owned();
    fixture.add_plugin(
        "mapped-probe",
        "import ctypes, os\n\
         ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libprobe.so'))\n",
    );
    let mapped = fixture.site_packages().join("mapped_probe/libprobe.so");
    std::fs::copy(&library, &mapped).unwrap();
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = zygote_pid(&mut s);
    let info = json!({"json": true});
    assert_eq!(
        structured(&s.call("conda_info", info.clone()))["exit_code"],
        0
    );
    let update = mapped.with_extension("new");
    std::fs::copy(&library, &update).unwrap();
    std::fs::rename(&update, &mapped).unwrap();
    assert_eq!(structured(&s.call("conda_info", info))["exit_code"], 0);
    ran_cold_and_replaced(&mut s, first);
}

/// A module that seeds its own random generator at import would give every warm call the
/// same numbers (each cold run draws new ones): it is not preloaded.
#[test]
fn a_module_seeding_a_random_generator_at_import_is_not_preloaded() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "random-probe",
        "import atexit, random, sys\n\
         DRAW = random.Random()\n\
         atexit.register(lambda: sys.stdout.write('drawn=%r\\n' % DRAW.random()))\n",
    );
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = printed_at_exit(&mut s, "drawn=");
    let second = printed_at_exit(&mut s, "drawn=");
    assert_ne!(first, second, "two warm calls drew the same number");
    assert_eq!(warm_state(&mut s)["warm_calls"], 2);
}

/// A lazily loaded module (`importlib.util.LazyLoader`) runs its body on first use: in a
/// warm child, as in a cold run, that is during the call, with the call's environment,
/// never in the zygote.
#[test]
fn a_lazy_module_runs_its_body_in_the_call() {
    let fixture = support::build_fixture(&[]);
    fixture.add_plugin(
        "lazy-probe",
        "import atexit, importlib.util, sys\n\
         spec = importlib.util.find_spec('lazy_probe.target')\n\
         spec.loader = importlib.util.LazyLoader(spec.loader)\n\
         target = importlib.util.module_from_spec(spec)\n\
         sys.modules['lazy_probe.target'] = target\n\
         spec.loader.exec_module(target)\n\
         atexit.register(lambda: sys.stdout.write('execution=%s\\n' % target.EXECUTION))\n",
    );
    std::fs::write(
        fixture.site_packages().join("lazy_probe/target.py"),
        "import os\nEXECUTION = os.environ.get('CCM_EXECUTION')\n",
    )
    .unwrap();
    let mut s = warm_session(&fixture.conda, &[], &[]);
    let first = printed_at_exit(&mut s, "execution=");
    let second = printed_at_exit(&mut s, "execution=");
    assert_ne!(first, "None", "the lazy module ran in the zygote");
    assert_ne!(first, second, "two calls, one execution marker");
    assert_eq!(warm_state(&mut s)["warm_calls"], 2);
}
