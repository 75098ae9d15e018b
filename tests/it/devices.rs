//! A sandboxed child reaches nothing outside its call through device nodes, unix sockets
//! or FIFOs: the host's device nodes are absent, a device node elsewhere does not open (`/dev/loop-control`, `/dev/kmsg`
//! cannot be opened), a unix socket the test's own listener serves, by path and by
//! abstract name, cannot be connected to (the listener sees nothing), a FIFO the test
//! reads (mode `0666`, as a host service's) does not open for writing, a datagram
//! socket pair (`SOCK_DGRAM`, or `SOCK_RAW`, sent to the test's own datagram socket),
//! io_uring and the user's kernel keyring (`add_key`, `keyctl`) and another process's
//! resource limits, tracing (`ptrace`) and scheduling (nice value, CPUs, policy, I/O
//! priority; after the child made a user namespace of its own) are refused;
//! `/dev/null`, `/dev/urandom`, connected stream and seqpacket pairs and the child's own
//! scheduling keep working; the controlling terminal of a server started from one does
//! not open (`/dev/tty`); a FIFO of the call's own, a file in its temporary directory and
//! in `/dev/shm` are written. A sandboxed `conda run` of `tests/fixtures/devices.py`, as
//! root and as `nobody`, cold and `--warm`, with the kernel's Landlock scope and without
//! it (a debug-build switch), on the fixture and on a real conda.

use std::io::{ErrorKind, Read};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::{Session, structured};
use crate::support;

/// The test's own listeners, outside the sandbox: one by path, one by abstract name.
struct Listeners {
    _dir: tempfile::TempDir,
    path: PathBuf,
    name: String,
    by_path: UnixListener,
    abstract_: UnixListener,
    /// A datagram socket beside `path` (`dgram.sock`, as `/dev/log` or journald's), which
    /// anyone may send to.
    dgram: std::os::unix::net::UnixDatagram,
    /// A copy of the host's `/dev/kmsg` node outside `/dev` (made when root; else a
    /// path that does not exist).
    node: PathBuf,
    /// A FIFO anyone may write (as `/run/initctl` of a host service), and the test's
    /// reading end of it.
    fifo: PathBuf,
    fifo_reader: std::fs::File,
}

impl Listeners {
    fn new() -> Listeners {
        let dir = tempfile::Builder::new()
            .prefix("ccm-sock-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("daemon.sock");
        let by_path = UnixListener::bind(&path).unwrap();
        // Anyone may connect: what refuses must be the sandbox, not the permission bits.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let nanos = std::time::SystemTime::UNIX_EPOCH
            .elapsed()
            .unwrap()
            .as_nanos();
        let name = format!("ccm-test-{}-{nanos}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_ = UnixListener::bind_addr(&address).unwrap();
        let node = dir.path().join("kmsg");
        if support::is_root() {
            let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid path; a character device 1:11 (kmsg), mode 0666.
            let rc =
                unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 11)) };
            assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
        }
        by_path.set_nonblocking(true).unwrap();
        abstract_.set_nonblocking(true).unwrap();
        let dgram_path = dir.path().join("dgram.sock");
        let dgram = std::os::unix::net::UnixDatagram::bind(&dgram_path).unwrap();
        std::fs::set_permissions(&dgram_path, std::fs::Permissions::from_mode(0o777)).unwrap();
        dgram.set_nonblocking(true).unwrap();
        let fifo = dir.path().join("initctl");
        let fifo_reader = crate::kit::fifo::with_reader(&fifo);
        Listeners {
            _dir: dir,
            path,
            name,
            node,
            fifo,
            fifo_reader,
            by_path,
            abstract_,
            dgram,
        }
    }

    /// Neither listener has seen a connection, nothing was written into the FIFO.
    fn untouched(&self, what: &str) {
        for (listener, which) in [(&self.by_path, "path"), (&self.abstract_, "abstract")] {
            match listener.accept() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("{what}: the {which} listener was reached: {other:?}"),
            }
        }
        let mut read = [0u8; 64];
        match self.dgram.recv(&mut read) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("{what}: the datagram socket was sent to: {other:?} {read:?}"),
        }
        match (&self.fifo_reader).read(&mut read) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("{what}: the FIFO was written: {other:?} {read:?}"),
        }
    }
}

/// `launch`, started in a session of its own whose controlling terminal is a new
/// pseudo-terminal (as a server a person starts from a terminal); the terminal's main
/// side is returned, held open for the session's life.
fn with_a_terminal(launch: Command) -> (Command, std::fs::File) {
    const WRAP: &str = "import fcntl, os, sys, termios\n\
        os.setsid()\n\
        fd = os.open(sys.argv[1], os.O_RDWR)\n\
        fcntl.ioctl(fd, termios.TIOCSCTTY, 0)\n\
        os.close(fd)\n\
        os.execvp(sys.argv[2], sys.argv[2:])\n";
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    // Close-on-exec: the tests' other servers, started meanwhile, must not inherit it.
    let main = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&main).unwrap();
    unlockpt(&main).unwrap();
    let name: std::ffi::OsString =
        std::os::unix::ffi::OsStringExt::from_vec(ptsname(&main, Vec::new()).unwrap().into_bytes());
    let main = std::fs::File::from(main);
    let mut wrapped = Command::new(support::python());
    wrapped
        .args(["-c", WRAP])
        .arg(name)
        .arg(launch.get_program())
        .args(launch.get_args());
    if let Some(dir) = launch.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (key, value) in launch.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    (wrapped, main)
}

fn server(launch: Command, conda: &Path, home: &Path, warm: bool, scoped: bool) -> Session {
    let (mut launch, terminal) = with_a_terminal(launch);
    TERMINALS.lock().unwrap().push(terminal);
    if !scoped {
        launch.env("CCM_TEST_NO_SIGNAL_SCOPE", "1");
    }
    crate::kit::users::sandboxed_server(launch, conda, home, warm)
}

/// The servers' terminals, kept open until the test ends.
static TERMINALS: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());

/// One sandboxed run of the probe; its outcomes.
fn probe(s: &mut Session, prefix: &Path, listeners: &Listeners) -> Value {
    let source =
        std::fs::read_to_string(support::repo().join("tests/fixtures/devices.py")).unwrap();
    let call = [
        "python".to_owned(),
        "-c".to_owned(),
        source,
        listeners.path.display().to_string(),
        listeners.name.clone(),
        listeners.node.display().to_string(),
        // A process outside the call: the test's own.
        std::process::id().to_string(),
        listeners.fifo.display().to_string(),
    ];
    let result = s.call(
        "conda_run",
        json!({"prefix": prefix, "executable_call": call}),
    );
    assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    let stdout = structured(&result)["stdout"].as_str().unwrap().to_owned();
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| panic!("no outcome in {result}"))
}

/// What the probe does to another process's scheduling, and to its own.
const SCHEDULING: [&str; 6] = [
    "renice",
    "pin",
    "reschedule",
    "reparam",
    "sched_attr",
    "io_priority",
];

/// Cold and warm, scoped and not: every reach refused, every need met.
fn check(launch: &dyn Fn() -> Command, conda: &Path, prefix: &Path, home: &Path, who: &str) {
    for warm in [false, true] {
        for scoped in [true, false] {
            let what = format!("{who}, warm {warm}, landlock scope {scoped}");
            let listeners = Listeners::new();
            let mut s = server(launch(), conda, home, warm, scoped);
            let out = probe(&mut s, prefix, &listeners);
            eprintln!("{what}: {out}");
            listeners.untouched(&what);
            for key in ["loop_control", "kmsg"] {
                assert_eq!(out[key], "ENOENT", "{what}: {key} {out}");
            }
            // The server's controlling terminal is not the child's.
            assert_eq!(out["tty"], "ENXIO", "{what}: {out}");
            // `nodev` on every mount of the child's tree.
            let elsewhere = if support::is_root() {
                "EACCES"
            } else {
                "ENOENT"
            };
            assert_eq!(out["node_elsewhere"], elsewhere, "{what}: {out}");
            for key in [
                "unix_path",
                "unix_abstract",
                "fifo_host",
                "dgram_pair",
                "raw_pair",
                "io_uring",
                "add_key",
                "keyctl",
                "prlimit_other",
                "ptrace_other",
            ] {
                assert_eq!(out[key], "EACCES", "{what}: {key} {out}");
            }
            for key in [
                "null",
                "urandom",
                "stream_pair",
                "seqpacket_pair",
                "prlimit_self",
                "fifo_own",
                "tmp_file",
                "shm_file",
            ] {
                assert_eq!(out[key], "ok", "{what}: {key} {out}");
            }
            // Another process's scheduling, after the child made a user namespace of its
            // own (all capabilities there; `unshare_user` says whether the kernel let
            // it): refused. Its own: kept.
            for key in SCHEDULING {
                assert_eq!(out[format!("{key}_other")], "EACCES", "{what}: {key} {out}");
                assert_eq!(out[format!("{key}_self")], "ok", "{what}: {key} {out}");
            }
            let expected = [
                "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
                "tty", "urandom", "zero",
            ];
            assert_eq!(out["dev"], json!(expected), "{what}: /dev");
            let isolation = s.capabilities()["sandbox"]["isolation"].clone();
            assert_eq!(isolation["unix_sockets"], "refused", "{what}: {isolation}");
            assert_eq!(isolation["devices"], "minimal", "{what}: {isolation}");
            assert_eq!(isolation["fifos"], "refused", "{what}: {isolation}");
            if warm {
                assert_eq!(s.capabilities()["warm"]["warm_calls"], 1, "{what}");
            }
        }
    }
}

#[test]
fn sandboxed_children_reach_no_device_and_no_unix_socket() {
    crate::kit::users::fixture_as_each_user(check);
}

/// A warm call whose holder's ruleset went missing (a lost descriptor, made so by a
/// debug-build hook) is not forked without it: it runs cold, where the child makes its own
/// ruleset, and the host FIFO stays refused.
#[test]
fn a_warm_call_without_its_ruleset_runs_cold() {
    crate::kit::users::fixture_as_each_user(|launch, conda, prefix, home, who| {
        let listeners = Listeners::new();
        let mut launch = launch();
        launch.env("CCM_TEST_HOLDER_RULESET_LOST", "1");
        let mut s = server(launch, conda, home, true, true);
        let out = probe(&mut s, prefix, &listeners);
        listeners.untouched(who);
        assert_eq!(out["fifo_host"], "EACCES", "{who}: {out}");
        assert_eq!(out["tmp_file"], "ok", "{who}: {out}");
        let warm = s.capabilities()["warm"].clone();
        assert_eq!(
            warm["warm_calls"], 0,
            "{who}: forked without its ruleset: {warm}"
        );
        // Cold for that reason, not another (a zygote still starting, a busy one).
        assert_eq!(warm["cold_calls"], 1, "{who}: {warm}");
        assert_eq!(
            warm["last_cold_reason"], "the call's sandbox could not be prepared for a warm child",
            "{who}: {warm}"
        );
    });
}

/// A real conda as the tests' user (root in CI): its `conda run` (activation, a shell
/// wrapper) starts the probe.
#[test]
#[ignore = "needs CCM_TEST_CONDA"]
fn real_conda_sandboxed_children_reach_no_device_and_no_unix_socket() {
    crate::kit::users::real_conda_as_the_tests_user(check);
}
