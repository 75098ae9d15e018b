//! A server that must stop on its own: started over stdio with stdin kept open (so only
//! the server can end it), waited for within a bound, its output read once it exited.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Start `command` (a `ccm` server) with piped stdio, keep its stdin open, and wait up to
/// 60 s for it to exit: (exit code, stdout, stderr). A server still running then is
/// killed, and the test fails.
pub(crate) fn serve_until_exit(mut command: Command) -> (Option<i32>, String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stdout, stderr)
}
