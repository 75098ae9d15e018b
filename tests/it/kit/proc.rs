//! Processes as `/proc` shows them: a process's state and parent, whether it is alive
//! (a zombie is not), a memory figure of its `status`, and the processes a run left
//! behind (found by a needle in their command line).

/// State letter and parent pid of a process, from `/proc/<pid>/stat` (`None` once gone).
pub(crate) fn stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// Whether a process exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, …).
pub(crate) fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Every pid in `/proc`.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
}

/// Live (non-zombie) processes whose command line contains `needle`.
pub(crate) fn survivors(needle: &str) -> Vec<i32> {
    pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|mut cmdline| {
                cmdline
                    .iter_mut()
                    .filter(|b| **b == 0)
                    .for_each(|b| *b = b' ');
                String::from_utf8_lossy(&cmdline).contains(needle)
            })
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Zombie children of `parent` (nobody reaped them).
pub(crate) fn zombies_of(parent: u32) -> Vec<i32> {
    pids()
        .filter(|pid| stat(*pid) == Some(('Z', parent as i32)))
        .collect()
}

fn kill_pids(pids: &[i32]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Assert that nothing matching `needle` is alive (killing leftovers so they cannot leak
/// into other tests).
pub(crate) fn assert_no_survivors(needle: &str, what: &str) {
    let left = survivors(needle);
    kill_pids(&left);
    assert!(left.is_empty(), "{what}: descendants survived: {left:?}");
}

/// What a child started by `conda_run` reads of environments and command lines: those of
/// each of `pids` (the server, the zygote), its parent's, its own, and `env`. Asserts the
/// child did read something (a `PATH=`), so that an empty answer cannot pass for "no
/// secret seen".
pub(crate) fn what_a_child_reads(session: &mut crate::mcp::Session, pids: &[u32]) -> String {
    let others: String = pids
        .iter()
        .map(|pid| format!("cat /proc/{pid}/environ /proc/{pid}/cmdline; echo; "))
        .collect();
    let script =
        format!("{others}cat /proc/$PPID/environ; echo; cat /proc/self/environ; echo; env");
    let result = session.call(
        "conda_run",
        serde_json::json!({"executable_call": ["sh", "-c", script], "no_capture_output": true}),
    );
    let output = crate::mcp::structured(&result);
    let seen = format!(
        "{}{}",
        output["stdout"].as_str().unwrap(),
        output["stderr"].as_str().unwrap()
    );
    assert!(
        seen.contains("PATH="),
        "the child read no environment: {seen}"
    );
    seen
}

#[test]
fn the_proc_kit_reads_this_process() {
    let me = std::process::id();
    let (state, parent) = stat(me as i32).expect("this process has a stat");
    assert!(matches!(state, 'R' | 'S' | 'D'), "{state}");
    assert_eq!(parent as u32, std::os::unix::process::parent_id());
    assert!(alive(me as i32));
    assert!(!alive(i32::MAX), "no such pid");
    let rss = status_kb(me, "VmRSS");
    assert!(rss > 0 && rss <= status_kb(me, "VmHWM"), "{rss}");
    let seconds = format!("30.{me}");
    let mut child = std::process::Command::new("sleep")
        .arg(&seconds)
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Until the child has exec'd `sleep`, its command line is still this binary's.
    let needle = format!("sleep {seconds}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !survivors(&needle).contains(&pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(survivors(&needle).contains(&pid));
    child.kill().unwrap();
    // Killed and not yet reaped: a zombie child of this process, and no survivor.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !zombies_of(me).contains(&pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        zombies_of(me).contains(&pid),
        "the killed child is a zombie"
    );
    assert!(survivors(&format!("sleep {seconds}")).is_empty());
    child.wait().unwrap();
    assert!(!zombies_of(me).contains(&pid), "a reaped child is gone");
}
