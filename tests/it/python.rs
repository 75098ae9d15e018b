//! The Python programs the binary embeds (the discovery helper, the `--warm` zygote),
//! tested directly by `tests/python/` (Python's unittest, no conda and no server): the
//! helper's traversal of argparse parsers, its modes and output framing; the zygote's wire
//! format, survey and protocol over a socket pair. Run under the tests' Python
//! (`CCM_TEST_PYTHON`, default `python3`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;

/// Fewer tests than this means discovery in `tests/python/` broke.
const AT_LEAST: usize = 70;
const DEADLINE: Duration = Duration::from_secs(600);

#[test]
fn python_unit_tests_of_the_embedded_programs() {
    let mut child = Command::new(support::python())
        .args(["-m", "unittest", "discover", "-v", "-s", "tests/python"])
        .current_dir(support::repo())
        // Nothing written into the work tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 -m unittest (is python3 installed?)");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let report = format!("{}{}", out.join().unwrap(), err.join().unwrap());
    let status = status.unwrap_or_else(|| panic!("tests/python took over {DEADLINE:?}:\n{report}"));
    assert!(status.success(), "tests/python failed:\n{report}");
    let ran: usize = report
        .lines()
        .find_map(|line| line.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `Ran N tests` line:\n{report}"));
    assert!(
        ran >= AT_LEAST,
        "only {ran} Python tests ran (at least {AT_LEAST} expected):\n{report}"
    );
    eprintln!("{report}");
}
