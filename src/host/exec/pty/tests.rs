//! The pseudo-terminal path of a run: what the child sees, and every limit of a piped run
//! holding on it (byte caps, the deadline, the kill-tree, cancellation).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::host::exec::tests::{kill_pids, sh, survivors, unique_sleep};
use crate::host::exec::{Executions, Limits, Outcome, Spec, watch};

const RECORD: &str = r#"{"fetch":"pkga-1.0             | 1 KB      | ","finished":true,"maxval":1,"progress":1}\n\0"#;

async fn on_terminal(
    spec: &Spec,
    cancel: &CancellationToken,
) -> (Outcome, Vec<String>, Option<String>) {
    let (watch, mut seen) = watch::watch(true);
    let executions = Executions::new(Limits::none());
    let outcome = executions
        .run_watched(spec, cancel, Some(watch))
        .await
        .unwrap();
    let mut records = Vec::new();
    while let Ok(Some(record)) =
        tokio::time::timeout(Duration::from_millis(50), seen.record()).await
    {
        records.push(record.label());
    }
    (outcome, records, seen.last_line())
}

#[tokio::test]
async fn stdout_is_a_raw_terminal_and_stderr_a_pipe() {
    let script = format!(
        "[ -t 1 ] && echo tty; [ -t 2 ] || echo pipe >&2; [ -t 0 ] || echo no-stdin-tty >&2; \
         echo \"$NO_COLOR\"; printf 'a\\nb\\tc'; printf '{RECORD}'; printf '\\n{{\"done\": 1}}'"
    );
    let (out, records, last) =
        on_terminal(&sh(&script, 10_000, 4096), &CancellationToken::new()).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    // No echo, no \r\n translation, the record taken out.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "tty\n1\na\nb\tc\n{\"done\": 1}"
    );
    assert_eq!(out.stderr, b"pipe\nno-stdin-tty\n");
    assert_eq!(records, ["pkga-1.0 (1 KB)"]);
    assert_eq!(last.as_deref(), Some("no-stdin-tty"));
}

#[tokio::test]
async fn the_byte_cap_holds_and_records_do_not_count() {
    let script =
        format!("for i in 1 2 3 4 5 6 7 8; do printf '{RECORD}'; done; head -c 1000000 /dev/zero");
    let (out, records, _) =
        on_terminal(&sh(&script, 20_000, 4096), &CancellationToken::new()).await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(records.len(), 8);
    assert_eq!(out.stdout.len(), 4096);
    assert!(out.stdout.iter().all(|b| *b == 0));
    assert!(out.stdout_truncated);
}

#[tokio::test]
async fn deadline_and_kill_tree_hold_for_an_escaped_holder_of_the_terminal() {
    let seconds = unique_sleep();
    let started = Instant::now();
    let (out, _, _) = on_terminal(
        &sh(
            &format!("setsid sh -c 'echo up; exec sleep {seconds}' & sleep {seconds}"),
            1000,
            1024,
        ),
        &CancellationToken::new(),
    )
    .await;
    assert!(out.timed_out, "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.stdout, b"up\n", "{out:?}");
    let left = survivors(&format!("sleep {seconds}"));
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}

#[tokio::test]
async fn cancellation_ends_the_tree() {
    let seconds = unique_sleep();
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.cancel();
    });
    let (out, _, _) = on_terminal(
        &sh(&format!("sleep {seconds} & sleep {seconds}"), 60_000, 1024),
        &cancel,
    )
    .await;
    assert!(out.cancelled, "{out:?}");
    let left = survivors(&format!("sleep {seconds}"));
    kill_pids(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
}
