//! One warm call: the request to the zygote (argv, environment, working directory,
//! limits, descriptors) and the child it forks, as the supervisor sees it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::net::unix::pipe;
use tokio::sync::OwnedMutexGuard;

use super::super::{Spec, limits, reap};
use super::{Unfit, Zygote};
use crate::host::platform;

/// How long the zygote may take to answer with the child's pid.
const PID_TIMEOUT: Duration = Duration::from_secs(10);

/// A child forked from the zygote. Holds the zygote (one warm call at a time) until
/// dropped; dropping it lets the zygote reap the child (after the supervisor's sweep).
pub(crate) struct WarmChild {
    slot: OwnedMutexGuard<Option<Zygote>>,
    pid: i32,
    pidfd: OwnedFd,
    pub(crate) stdin: Option<pipe::Sender>,
    pub(crate) stdout: Option<pipe::Receiver>,
    pub(crate) stderr: Option<pipe::Receiver>,
    status: Option<ExitStatus>,
}

/// A close-on-exec pipe: (read end, write end).
fn pipe_pair() -> Result<(OwnedFd, OwnedFd), Unfit> {
    platform::pipe_cloexec().map_err(|_| Unfit::Refused)
}

/// The environment a cold child of `spec` gets, in the order it gets it (sorted by name,
/// as the standard library builds a modified environment).
fn environment(spec: &Spec, marker: &str) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for name in &spec.env_remove {
        env.remove(std::ffi::OsStr::new(name));
    }
    for name in spec.limits.env_remove.iter() {
        env.remove(std::ffi::OsStr::new(name));
    }
    super::super::environ::apply(
        &mut env,
        &super::super::environ::changes(|name| super::super::withheld(spec, name)),
    );
    env.insert(reap::MARKER_VAR.into(), marker.into());
    if let Some(plan) = &spec.sandbox {
        env.insert(
            crate::host::sandbox::TMPDIR.into(),
            plan.tmpdir().as_os_str().to_owned(),
        );
    }
    env
}

/// The request's fields (see `zygote/start.py`; read by `zygote/child.py`).
fn fields(spec: &Spec, marker: &str, ns: &str) -> Result<Vec<Vec<u8>>, Unfit> {
    // Absolute: a cold child changes directory before its sandbox, relative to the
    // server's; the warm child does so after joining the sandbox, whose root is `/`.
    let here = std::env::current_dir().map_err(|_| Unfit::Refused)?;
    let cwd = match &spec.cwd {
        Some(cwd) => here.join(cwd),
        None => here,
    };
    let number = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default().into_bytes();
    let mut fields = vec![
        b"run".to_vec(),
        cwd.as_os_str().as_bytes().to_vec(),
        ns.as_bytes().to_vec(),
        number(spec.limits.memory),
        number(spec.limits.file_size),
        spec.args.len().to_string().into_bytes(),
    ];
    fields.extend(spec.args.iter().map(|a| a.as_bytes().to_vec()));
    for (name, value) in environment(spec, marker) {
        let mut entry = name.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        fields.push(entry);
    }
    Ok(fields)
}

/// The kinds of the descriptors that follow stdio, in order (see `zygote/start.py`): the
/// call's user, mount and IPC namespaces and the call's own Landlock ruleset, made by
/// the holder with the mounts it grants (where the kernel has Landlock). The unix-socket
/// filter is not sent: the zygote installed it before `exec`, and its children inherit
/// it.
fn kinds(namespaces: &super::holder::Namespaces) -> String {
    let mut kinds = vec!["user", "mnt", "ipc"];
    if namespaces.ruleset.is_some() {
        kinds.push("landlock");
    }
    kinds.join(",")
}

/// Ask the zygote in `slot` to fork `spec`'s run.
pub(super) async fn start(
    mut slot: OwnedMutexGuard<Option<Zygote>>,
    spec: &Spec,
    marker: &str,
    prepared: &limits::Prepared,
) -> Result<WarmChild, Unfit> {
    // Only sandboxed calls are forked (the zygote lives in the sandbox); each gets a
    // sandbox of its own, built inside the zygote's user namespace.
    let plan = spec.sandbox.as_ref().ok_or(Unfit::Sandbox)?;
    if !plan.user_namespace() {
        return Err(Unfit::Sandbox);
    }
    let namespaces = {
        let zygote = slot.as_ref().ok_or(Unfit::Starting)?;
        super::holder::build(plan, Some(zygote.user_ns.as_fd())).map_err(|_| Unfit::Sandbox)?
    };
    // The holder fails when it cannot make the call's ruleset; a ruleset missing all the
    // same (the holder's answer lost a descriptor) would leave the child's writes
    // unruled, so the call runs cold instead, where the child makes its own.
    if plan.has_own_ruleset() && namespaces.ruleset.is_none() {
        return Err(Unfit::Sandbox);
    }
    let ns = kinds(&namespaces);
    let fields = fields(spec, marker, &ns)?;
    let (stdin_child, stdin_ours) = match spec.stdin {
        Some(_) => {
            let (read, write) = pipe_pair()?;
            (read, Some(write))
        }
        None => (
            OwnedFd::from(std::fs::File::open("/dev/null").map_err(|_| Unfit::Refused)?),
            None,
        ),
    };
    let (stdout_ours, stdout_child) = pipe_pair()?;
    let (stderr_ours, stderr_child) = pipe_pair()?;
    let mut fds: Vec<BorrowedFd<'_>> = vec![
        stdin_child.as_fd(),
        stdout_child.as_fd(),
        stderr_child.as_fd(),
    ];
    let user = namespaces.user.as_ref().ok_or(Unfit::Sandbox)?;
    fds.push(user.as_fd());
    fds.push(namespaces.mount.as_fd());
    fds.push(namespaces.ipc.as_fd());
    fds.extend(namespaces.ruleset.as_ref().map(AsFd::as_fd));
    fds.extend(prepared.join_fds());
    let zygote = slot.as_mut().ok_or(Unfit::Starting)?;
    let field_refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
    zygote
        .send(&field_refs, &fds)
        .await
        .map_err(|_| Unfit::Refused)?;
    drop(fds);
    drop((stdin_child, stdout_child, stderr_child));
    drop(namespaces);
    let (pid, pidfd) = forked(zygote).await?;
    let receiver = |fd| pipe::Receiver::from_owned_fd(fd).ok();
    Ok(WarmChild {
        slot,
        pid,
        pidfd,
        stdin: stdin_ours.and_then(|fd| pipe::Sender::from_owned_fd(fd).ok()),
        stdout: receiver(stdout_ours),
        stderr: receiver(stderr_ours),
        status: None,
    })
}

/// The child the zygote reports for the request just sent, held by a pidfd; a `stale`
/// answer, a timeout or anything unexpected marks the zygote for replacement.
async fn forked(zygote: &mut Zygote) -> Result<(i32, OwnedFd), Unfit> {
    let answer = tokio::time::timeout(PID_TIMEOUT, zygote.line()).await;
    let pid: i32 = match answer {
        Ok(Ok(line)) if line == "stale" => {
            zygote.broken = true;
            return Err(Unfit::Changed);
        }
        Ok(Ok(line)) => line
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
            .ok_or(Unfit::Refused)?,
        _ => {
            zygote.broken = true;
            return Err(Unfit::Refused);
        }
    };
    let pidfd = platform::pidfd_open(pid).map_err(|_| Unfit::Refused)?;
    // The pid must be the zygote's child (held by the pidfd from here on): anything else
    // is an answer the zygote did not write, and signalling it could hit anyone.
    if crate::host::platform::parent_of(pid) != Some(zygote.pid as i32) {
        zygote.broken = true;
        tracing::warn!(
            pid,
            "the zygote's answer names a process that is not its child"
        );
        return Err(Unfit::Refused);
    }
    Ok((pid, pidfd))
}

impl WarmChild {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Wait for the child's exit status, as the zygote reports it (the child stays a
    /// zombie, its pid and process group reserved, until this value is dropped).
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let zygote = self
            .slot
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no zygote"))?;
        let line = zygote.line().await?;
        let status = match line.split_once(' ') {
            Some(("exit", code)) => code.parse::<i32>().ok().map(|c| (c & 0xff) << 8),
            Some(("signal", signal)) => signal.parse::<i32>().ok().map(|s| s & 0x7f),
            _ => None,
        };
        let status = ExitStatus::from_raw(
            status.ok_or_else(|| std::io::Error::other("unexpected answer from the zygote"))?,
        );
        self.status = Some(status);
        Ok(status)
    }

    /// SIGKILL the child through its pidfd.
    pub(crate) fn kill(&self) {
        platform::pidfd_kill(&self.pidfd, rustix::process::Signal::KILL);
    }
}

impl Drop for WarmChild {
    fn drop(&mut self) {
        let Some(zygote) = self.slot.as_mut() else {
            return;
        };
        if self.status.is_some() {
            zygote.send_now(b"reap\n");
        } else {
            // The zygote's answers are no longer in step with the calls: replace it.
            platform::pidfd_kill(&self.pidfd, rustix::process::Signal::KILL);
            zygote.broken = true;
        }
    }
}
