//! Unit tests of `exec`: capture, limits, the termination sweep and the queue.

use std::sync::Arc;
use std::time::Instant;

use super::*;

/// `spec` run by executions of its own (its limits are the spec's).
pub(super) async fn run(spec: &Spec, cancel: &CancellationToken) -> std::io::Result<Outcome> {
    Executions::new(Limits::none()).run(spec, cancel).await
}

pub(super) fn sh(script: &str, timeout_ms: u64, limit: usize) -> Spec {
    Spec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: None,
        stdin: None,
        timeout: Duration::from_millis(timeout_ms),
        stdout_limit: limit,
        stderr_limit: limit,
        env_remove: Vec::new(),
        limits: Limits::none(),
        sandbox: None,
        write_bound: None,
    }
}

#[tokio::test]
async fn captures_exit_code_and_streams() {
    let out = run(
        &sh("echo out; echo err >&2; exit 3", 5000, 1024),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert!(!out.timed_out && !out.cancelled && !out.stdout_truncated);
}

#[tokio::test]
async fn output_is_capped_and_drained() {
    let out = run(
        &sh("head -c 1000000 /dev/zero; echo done >&2", 10_000, 4096),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout_truncated);
    assert_eq!(out.stderr, b"done\n");
    assert!(!out.stderr_truncated);
}

#[tokio::test]
async fn exactly_at_the_limit_is_not_truncated() {
    let out = run(&sh("printf 12345678", 5000, 8), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.stdout, b"12345678");
    assert!(!out.stdout_truncated);
}

#[tokio::test]
async fn stdin_is_delivered() {
    let mut spec = sh("cat", 5000, 1024);
    spec.stdin = Some(b"hello".to_vec());
    let out = run(&spec, &CancellationToken::new()).await.unwrap();
    assert_eq!(out.stdout, b"hello");
}

#[tokio::test]
async fn timeout_kills_a_term_ignoring_group() {
    let started = Instant::now();
    let out = run(
        &sh("trap '' TERM; sleep 30 & sleep 30 & wait", 300, 1024),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

/// Live processes whose command line contains `marker` (zombies count as gone).
pub(super) fn survivors(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let mut cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        for byte in &mut cmdline {
            if *byte == 0 {
                *byte = b' ';
            }
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// A sleep whose argv is unique to this test (so the check cannot see other tests).
pub(super) fn unique_sleep() -> String {
    // Process-wide: unique across every test of the process.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "6{}{:03}.{}",
        std::process::id() % 1000,
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::process::id()
    )
}

pub(super) fn kill_pids(pids: &[i32]) {
    for pid in pids
        .iter()
        .filter_map(|pid| rustix::process::Pid::from_raw(*pid))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

#[tokio::test]
async fn escaped_descendant_cannot_hold_the_call_and_dies() {
    // setsid puts the sleeper outside the group; it keeps stdout open. Without cgroups
    // the environment marker still finds it.
    let seconds = unique_sleep();
    let started = Instant::now();
    let out = run(
        &sh(
            &format!("setsid sh -c 'echo up; exec sleep {seconds}' & sleep {seconds}"),
            1000,
            1024,
        ),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(out.timed_out);
    assert!(started.elapsed() < Duration::from_secs(10));
    // The sleepers did start: the escaped one wrote to the pipe the call kept.
    assert_eq!(out.stdout, b"up\n", "{out:?}");
    let left = survivors(&format!("sleep {seconds}"));
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test]
async fn leftovers_of_a_normal_exit_die() {
    let seconds = unique_sleep();
    let out = run(
        &sh(
            &format!("setsid sh -c 'echo started; exec sleep {seconds}' & sleep 0.3"),
            10_000,
            1024,
        ),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, b"started\n", "the escaped sleeper ran");
    let left = survivors(&format!("sleep {seconds}"));
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test]
async fn a_dropped_call_still_ends_its_tree() {
    let seconds = unique_sleep();
    let spec = sh(
        &format!("trap '' TERM; setsid sleep {seconds} & sleep {seconds}"),
        60_000,
        1024,
    );
    let call = tokio::spawn(async move { run(&spec, &CancellationToken::new()).await });
    let probe = format!("sleep {seconds}");
    let until = Instant::now() + Duration::from_secs(10);
    while survivors(&probe).len() < 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started: Vec<String> = survivors(&probe)
        .iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default())
        .collect();
    assert!(started.len() >= 2, "both sleepers started: {started:?}");
    call.abort();
    let until = Instant::now() + TERMINATION_GRACE + Duration::from_secs(3);
    while !survivors(&probe).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = survivors(&probe);
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}

/// Two runs overlap (a helper run during a tool run): the first one's sweep kills its
/// own escaped descendant and nothing of the second one.
async fn overlapping_runs_sweep_only_their_own(limits: Limits) {
    let (mine, theirs) = (unique_sleep(), unique_sleep());
    let mut long = sh(
        &format!("setsid sleep {theirs} & sleep {theirs}"),
        60_000,
        1024,
    );
    long.limits = limits.clone();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let long = tokio::spawn(async move { run(&long, &stop).await });
    let probe = format!("sleep {theirs}");
    let until = Instant::now() + Duration::from_secs(10);
    while survivors(&probe).len() < 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut short = sh(
        &format!("setsid sh -c 'echo up; exec sleep {mine}' & sleep 0.3"),
        10_000,
        1024,
    );
    short.limits = limits;
    let out = run(&short, &CancellationToken::new()).await.unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_slice()),
        (Some(0), &b"up\n"[..])
    );
    let left = survivors(&format!("sleep {mine}"));
    kill_pids(&left);
    assert!(
        left.is_empty(),
        "the short run's descendant survived: {left:?}"
    );
    let theirs_alive = survivors(&probe);
    cancel.cancel();
    let out = long.await.unwrap().unwrap();
    assert!(out.cancelled);
    assert!(
        theirs_alive.len() >= 2,
        "the short run's sweep killed the other run's processes: {theirs_alive:?}"
    );
    let left = survivors(&probe);
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test]
async fn overlapping_runs_by_marker() {
    overlapping_runs_sweep_only_their_own(Limits::none()).await;
}

#[tokio::test]
async fn overlapping_runs_by_cgroup() {
    // Where this process cannot create cgroups (not root, no delegation) the marker
    // variant above still covers attribution.
    match cgroup::Cgroups::detect(false) {
        Ok(cgroups) => {
            let cgroups = Arc::new(cgroups);
            let limits = Limits {
                cgroups: Some(Arc::clone(&cgroups)),
                ..Limits::none()
            };
            overlapping_runs_sweep_only_their_own(limits).await;
            cgroups.remove();
        }
        Err(reason) => eprintln!("cgroups unavailable here: {reason}"),
    }
}

#[tokio::test]
async fn file_size_limit_is_named() {
    let mut spec = sh(
        "head -c 3000000 /dev/zero > \"$0\"; echo \"head: $?\" >&2; exit 1",
        10_000,
        1024,
    );
    let dir = std::env::temp_dir().join(format!("ccm-fsize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    spec.args.push(dir.join("big").into());
    spec.limits.file_size = Some(1 << 20);
    let out = run(&spec, &CancellationToken::new()).await.unwrap();
    let size = std::fs::metadata(dir.join("big"))
        .map(|m| m.len())
        .unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(size <= 1 << 20, "wrote {size} bytes past the limit");
    assert_eq!(
        out.limit.as_deref(),
        Some("file-size limit 1 MiB may have been exceeded"),
        "{out:?}"
    );
}

#[tokio::test]
async fn memory_limit_is_enforced_and_named() {
    // python3 reports MemoryError when the address-space limit refuses the allocation.
    let mut spec = sh(
        "exec python3 -c 'b = bytearray(512 * 1024 * 1024)'",
        30_000,
        64 * 1024,
    );
    spec.limits.memory = Some(256 << 20);
    let out = run(&spec, &CancellationToken::new()).await.unwrap();
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MemoryError"),
        "{out:?}"
    );
    assert_eq!(
        out.limit.as_deref(),
        Some("memory limit 256 MiB may have been exceeded")
    );
}

#[tokio::test]
async fn withheld_variables_do_not_reach_the_child() {
    let mut spec = sh("env", 5000, 1 << 20);
    spec.limits.env_remove = Arc::from(vec!["PATH".to_owned(), "HOME".to_owned()]);
    let out = run(&spec, &CancellationToken::new()).await.unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(
        !env.lines()
            .any(|l| l.starts_with("PATH=") || l.starts_with("HOME=")),
        "{env}"
    );
    assert!(env.contains(&format!("{}=", reap::MARKER_VAR)), "{env}");
}

/// `--confirm-writes` shows [`environment_changes`]: every variable a child gets that the
/// server does not have (or has otherwise) is named there, and no withheld one arrives.
#[tokio::test]
async fn the_environment_changes_shown_are_what_the_child_gets() {
    let mut spec = sh("", 5000, 1 << 20);
    spec.program = "/usr/bin/env".into();
    spec.args = vec!["-0".into()];
    spec.limits.env_remove = Arc::from(vec!["PATH".to_owned()]);
    let changes = environment_changes(&spec);
    assert_eq!(changes.withheld, ["PATH"]);
    let out = run(&spec, &CancellationToken::new()).await.unwrap();
    let set: Vec<&str> = changes.set.iter().map(|(name, _)| name.as_str()).collect();
    for entry in out.stdout.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let entry = String::from_utf8_lossy(entry);
        let (name, value) = entry.split_once('=').unwrap();
        assert_ne!(name, "PATH", "a withheld variable reached the child");
        let server = std::env::var_os(name);
        if server.as_deref() != Some(std::ffi::OsStr::new(value)) {
            assert!(set.contains(&name), "{name} is set but not shown: {set:?}");
        }
    }
}

#[tokio::test]
async fn cancellation_ends_the_run() {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let out = run(&sh("sleep 30", 20_000, 1024), &cancel).await.unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert!(out.duration < Duration::from_secs(10));
}

#[tokio::test]
async fn spawn_failure_is_an_error() {
    let mut spec = sh("true", 1000, 10);
    spec.program = "/nonexistent/conda".into();
    assert!(run(&spec, &CancellationToken::new()).await.is_err());
}

#[tokio::test]
async fn queue_is_fifo_and_bounded() {
    let executor = Executor::new(3);
    let first = executor.acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for n in 1..=3 {
        let e = Arc::clone(&executor);
        let order = Arc::clone(&order);
        waiters.push(tokio::spawn(async move {
            let _slot = e.acquire().await.unwrap();
            order.lock().unwrap().push(n);
            // Hold the slot a moment so a later waiter could overtake if it were not FIFO.
            tokio::task::yield_now().await;
        }));
        // Each waiter is queued before the next one asks.
        while executor.load() < n + 1 {
            tokio::task::yield_now().await;
        }
    }
    assert!(matches!(executor.acquire().await, Err(QueueFull)));
    drop(first);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![1, 2, 3]);
    assert_eq!(executor.load(), 0);
}

#[test]
fn os_errors_are_plain_words() {
    let plain = |code| plain_os_error(&std::io::Error::from_raw_os_error(code));
    assert!(plain(libc::ENOEXEC).starts_with("it is not a program this system can run"));
    assert!(plain(libc::EACCES).starts_with("permission denied"));
    assert!(plain(libc::ENOENT).contains("#! line"));
    assert!(!plain(libc::EROFS).contains("os error"));
    assert!(!plain(libc::EROFS).is_empty());
}
