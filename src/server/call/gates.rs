//! The gates a judged call passes before it runs, each with one signature ([`Gate`],
//! [`Server::pass`]): the `--tools` selection (raw argv only), the grants, the working
//! directory (a generated tool's `ccm_cwd` in the client's roots), path confinement (and
//! the audit log), `--write-envs`, the read-only sandbox's plan, the command's size, and
//! `--confirm-writes`. A gate refuses (recording why in the audit record) or lets the call
//! on, adding what it decided to it.

use std::path::{Path, PathBuf};

use rmcp::ErrorData;
use serde_json::json;

use super::super::caller::Caller;
use super::super::judged::{Judged, Workdir};
use super::super::ready::Ready;
use super::super::refuse::{self, Refusal, internal, invalid_arguments};
use super::super::state::Server;
use super::super::trail;
use super::envs_dirs;
use crate::host::{confine, exec, sandbox, targets};
use crate::tools::policy::write_envs::{self, NO_TARGET, Scope};
use crate::tools::policy::{self, Classification};
use crate::tools::schema::{Invalid, Keyword};

/// The refusal of a call one of whose judged targets changed between the last check and
/// the bound (never the path).
pub(super) const TARGET_CHANGED: &str =
    "Operation targets an environment whose path changed after it was judged";

/// `conda_execute` with an argv whose command is not a selected tool (never echoes it).
pub(super) const NOT_SELECTED: &str =
    "Operation names a command whose tool is not selected (see --tools)";
/// The refusal of a working directory that is not an existing directory inside the
/// client's roots (never the path).
pub(super) const OUTSIDE_ROOTS: &str =
    "The working directory is not an existing directory inside the client's roots";
/// The refusal of a working directory on a mount of another mount namespace (never the
/// path): no sandbox made from the server's namespace would cover it (attack 16).
pub(crate) const FOREIGN_WORKDIR: &str = "The working directory lies on a mount of another mount namespace (such as one reached through /proc/PID/root); name a directory of the server's own";
/// The refusal of a path outside `--allow-paths` (never the path).
pub(super) const OUTSIDE_ALLOWED: &str =
    "Operation names a path outside the allowed directories (see --allow-paths)";
/// The refusal of a write under `--allow-paths` whose targets could not be judged: the
/// target helper failed (crashed, timed out, ran out of memory, answered nothing), so
/// nothing is known of where conda would write (never a path or value).
pub(super) const UNJUDGED: &str = "Operation's target environment could not be resolved, so it cannot be checked against the allowed directories (see --allow-paths). Nothing ran.";
/// The refusal of a call that names a FIFO, socket, device or `/proc` entry
/// (`confine::names_special`; never the path): conda would wait on it, holding the
/// execution slot every session shares, until the timeout.
pub(super) const SPECIAL_FILE: &str = "Operation names a path that is a FIFO, a socket, a device (other than \
    /dev/null, /dev/zero, /dev/full, /dev/random, /dev/urandom) or an entry of /proc or /dev/fd \
    (such as /dev/stdin), which conda could wait on until the timeout; name a regular file \
    instead. Nothing ran.";
/// The refusal of a write whose target environment holds a hard link where conda writes
/// in place (`host::confine::IN_PLACE`; never the path).
pub(super) const LINKED_TARGET: &str = "Operation's target environment holds a file with other links that conda would write in place (--write-envs)";

/// The refusal of a bounded write whose target environment could not be checked for
/// links to files elsewhere within `--timeout` (never the path).
pub(super) const TOO_MANY_FILES: &str = "Operation's target environment holds more files than \
    could be checked for links to files elsewhere within the timeout (see --timeout). Nothing ran.";

/// One gate.
#[derive(Clone, Copy, Debug)]
pub(super) enum Gate {
    /// `--tools`: raw argv reaches only the commands of selected tools.
    Selection,
    /// The operator's grants (`--allow-write`, `--allow-exec`, `--allow-credentials`).
    Grants,
    /// A generated tool's working directory, resolved (in the client's roots).
    Workdir,
    /// The audit log, and `--allow-paths` for calls that need no `--allow-exec`.
    Paths,
    /// `--write-envs`, and the files conda writes in place in a write's target
    /// environments (under `--write-envs` or `--allow-paths`): the targets are resolved.
    EnvScope,
    /// The files conda writes in place in the targets [`Gate::EnvScope`] resolved, looked
    /// at again (no new resolution).
    Linked,
    /// The read-only sandbox's plan for the calls it applies to (fail closed).
    Sandbox,
    /// The argv + environment cap, before anything spawns or queues.
    Size,
    /// `--confirm-writes` (asked before the execution slot is taken).
    Confirmation,
}

/// The gates of a generated tool's call, in order, before it runs.
pub(super) const GENERATED: &[Gate] = &[Gate::Grants, Gate::Workdir, Gate::Paths, Gate::EnvScope];
/// The gates of `conda_execute`'s call, in order, before it runs.
pub(super) const RAW: &[Gate] = &[Gate::Selection, Gate::Grants, Gate::Paths, Gate::EnvScope];
/// The gates of every call that runs, last.
pub(super) const RUN: &[Gate] = &[Gate::Sandbox, Gate::Size, Gate::Confirmation];
/// The gates judged again once the call holds its execution slot, right before the child
/// starts (paths may have been swapped for symlinks meanwhile).
pub(super) const AGAIN: &[Gate] = &[Gate::Paths, Gate::Linked];
/// The same for a call the person was asked about (the question may have been open long).
pub(super) const AGAIN_ASKED: &[Gate] = &[Gate::EnvScope, Gate::Paths, Gate::Linked];

impl Server {
    /// Pass `gates` in order: the first refusal ends the call.
    pub(super) async fn pass_all(
        &self,
        gates: &[Gate],
        ready: &Ready,
        call: &mut Judged,
        caller: &Caller,
    ) -> Result<(), Refusal> {
        for gate in gates {
            self.pass(*gate, ready, call, caller).await?;
        }
        Ok(())
    }

    /// Pass one gate.
    async fn pass(
        &self,
        gate: Gate,
        ready: &Ready,
        call: &mut Judged,
        caller: &Caller,
    ) -> Result<(), Refusal> {
        match gate {
            Gate::Selection => selection(ready, call, &caller.audit),
            Gate::Grants => self.grants(call, &caller.audit),
            Gate::Workdir => self.workdir(ready, call, caller).await,
            Gate::Paths => paths(&self.shared.host.audit, ready, call, &caller.audit),
            Gate::EnvScope => self.env_scope(ready, call, &caller.audit).await,
            Gate::Linked => self.linked(ready, call, &caller.audit).await,
            Gate::Sandbox => self.sandbox(ready, call).await,
            Gate::Size => {
                check_size(&call.spec(&self.shared.config, self.shared.host.exec.limits()))
            }
            Gate::Confirmation => self.confirm(ready, call, caller).await,
        }
    }

    fn grants(&self, call: &Judged, audit: &trail::Record) -> Result<(), Refusal> {
        self.enforce(&call.class, audit)
    }

    /// Refuse a verdict that needs a grant the operator did not give.
    pub(super) fn enforce(
        &self,
        class: &Classification,
        audit: &trail::Record,
    ) -> Result<(), Refusal> {
        let missing = class.missing(super::super::ready::grants(&self.shared.config));
        if missing.is_empty() {
            Ok(())
        } else {
            let refusal = Classification::refusal(&missing);
            audit.refused(&refusal);
            Err(refuse::policy(refuse::Reason::Needs(missing), &refusal))
        }
    }

    /// The working directory of a generated tool's call. Without roots: the one asked
    /// for (relative to the server's), else the server's. With the client's roots: a
    /// relative one (or none) is in the first root, and it must lie inside one of them.
    ///
    /// Where the directory is confined (roots, `--allow-paths`), a missing directory gets
    /// the answer an outside one gets, so that the refusal tells nothing about what exists
    /// outside. A client that declared roots none of which is a local directory (or that
    /// did not answer) gets no working directory of the agent's choosing: fail closed.
    async fn workdir(
        &self,
        ready: &Ready,
        call: &mut Judged,
        caller: &Caller,
    ) -> Result<(), Refusal> {
        let Workdir::Requested(requested) = &call.workdir else {
            return Ok(());
        };
        let requested = requested.as_deref();
        let outside_roots = || Refusal::from(ErrorData::invalid_request(OUTSIDE_ROOTS, None));
        let roots = self.roots.get(caller.roots_peer.as_ref()).await;
        let resolved = match roots.first() {
            None => match requested {
                None => None,
                Some(_) if caller.roots_peer.is_some() => return Err(outside_roots()),
                Some(text) => {
                    let path = PathBuf::from(if text.is_empty() { "." } else { text });
                    if path.is_dir() {
                        Some(path)
                    } else if !ready.confinement.is_unrestricted() {
                        return Err(refuse::policy(
                            refuse::Reason::OutsideAllowedPaths,
                            OUTSIDE_ALLOWED,
                        ));
                    } else {
                        return Err(invalid_arguments(&Invalid::at(
                            "$.ccm_cwd",
                            Keyword::Directory,
                        )));
                    }
                }
            },
            Some(first) => {
                let path = first.join(requested.unwrap_or(""));
                match std::fs::canonicalize(&path) {
                    Ok(canonical)
                        if canonical.is_dir()
                            && roots.iter().any(|root| canonical.starts_with(root)) =>
                    {
                        Some(canonical)
                    }
                    _ => return Err(outside_roots()),
                }
            }
        };
        if resolved
            .as_deref()
            .is_some_and(|dir| !crate::host::sandbox::of_this_namespace(dir))
        {
            return Err(ErrorData::invalid_params(FOREIGN_WORKDIR, None).into());
        }
        call.workdir = Workdir::Resolved(resolved);
        Ok(())
    }

    /// Check a call admitted by the policy against `--write-envs` (nothing to check
    /// without a scope, or for a call that neither writes nor runs in an environment):
    /// the environments the final argv targets are resolved by conda's own context and
    /// each must lie in the operator's scope. Refusals name the flag and the target's
    /// kind, never its value. Under `--write-envs`, or `--allow-paths` for a write that
    /// needs no `--allow-exec`, the targets are kept on the call and the files conda
    /// writes in place in them must not be hard links ([`Server::linked`]); with
    /// `--allow-paths` alone, a target conda cannot name before the run (`create` from a
    /// file, or an argv conda's parser or context refuses, which conda then refuses
    /// itself) is not checked, and a write whose targets are unknown because the helper
    /// failed is refused ([`UNJUDGED`]: fail closed).
    async fn env_scope(
        &self,
        ready: &Ready,
        call: &mut Judged,
        audit: &trail::Record,
    ) -> Result<(), Refusal> {
        let scope = self.shared.config.write_envs.as_ref();
        let confined = ready.confinement.has_outside() && !call.class.requires_exec;
        let refuse = |text: String| {
            audit.refused(&text);
            Err(refuse::policy(refuse::Reason::OutsideWriteEnvs, &text))
        };
        let argv = &call.argv;
        let path = policy::command_path(ready.discovery.catalog.root.as_ref(), argv);
        let runs = path.as_deref() == Some(&["run".to_owned()][..]);
        if (scope.is_none() && !(confined && call.class.requires_write))
            || (!call.class.requires_write && !runs)
        {
            return Ok(());
        }
        let rule = path.as_deref().and_then(write_envs::rule);
        let interpreter = ready.discovery.interpreter.as_deref();
        let (Some(rule), Some(interpreter)) = (rule, interpreter) else {
            return match (scope, rule) {
                (None, None) => Ok(()),
                (None, Some(_)) => unjudged(audit),
                (Some(_), None) => refuse(NO_TARGET.into()),
                (Some(_), Some(_)) => refuse(write_envs::UNRESOLVED.into()),
            };
        };
        let timeout = self.shared.config.timeout;
        let exec = &self.shared.host.exec;
        let resolved = targets::resolve(exec, interpreter, argv, call.cwd(), rule, timeout).await;
        let found = match (resolved, scope) {
            (Ok(found), _) => found,
            (Err(targets::Unresolved::Failed), None) => return unjudged(audit),
            (Err(_), None) => return Ok(()),
            (Err(why), Some(_)) => return refuse(why.to_string()),
        };
        if let Some(scope) = scope {
            let canonical = targets::canonical_all(scope.paths()).await;
            if let Some(outside) = found.targets.iter().find(|t| !scope.admits(t, &canonical)) {
                return refuse(Scope::refusal(outside.kind()));
            }
        }
        call.targets = found.targets.into_iter().map(|t| t.path).collect();
        call.envs_dirs = found.envs_dirs;
        self.linked(ready, call, audit).await
    }

    /// The files conda writes in place in a write's targets ([`Gate::EnvScope`] kept
    /// them) are no hard links.
    async fn linked(
        &self,
        ready: &Ready,
        call: &Judged,
        audit: &trail::Record,
    ) -> Result<(), Refusal> {
        let narrow = self.shared.config.write_envs.is_some();
        for target in &call.targets {
            if ready.confinement.target_escapes(target)
                || (!narrow
                    && self.bounded(ready, call)
                    && envs_dirs::target_outside(ready, call, target))
            {
                audit.refused(OUTSIDE_ALLOWED);
                return Err(refuse::policy(
                    refuse::Reason::OutsideAllowedPaths,
                    OUTSIDE_ALLOWED,
                ));
            }
            let Some(foreign) = self.foreign_links(ready, call, target).await else {
                audit.refused(TOO_MANY_FILES);
                return Err(refuse::policy(
                    refuse::Reason::OutsideAllowedPaths,
                    TOO_MANY_FILES,
                ));
            };
            if (narrow && confine::linked_in_place(target)) || foreign {
                let (reason, text) = if narrow {
                    (refuse::Reason::OutsideWriteEnvs, LINKED_TARGET)
                } else {
                    (refuse::Reason::OutsideAllowedPaths, OUTSIDE_ALLOWED)
                };
                audit.refused(text);
                return Err(refuse::policy(reason, text));
            }
        }
        Ok(())
    }

    /// Whether a write that runs under the write bound targets a prefix holding a file
    /// with other links that are not conda's own package-cache links
    /// ([`confine::foreign_links`]): conda, or a link script, would write through it.
    /// The walk reads the whole prefix, which the agent may have filled: it runs off the
    /// async workers (a failed walk counts as links) and stops at `--timeout` (`None`).
    async fn foreign_links(
        &self,
        ready: &Ready,
        call: &Judged,
        target: &std::path::Path,
    ) -> Option<bool> {
        if !self.bounded(ready, call) {
            return Some(false);
        }
        let inputs = crate::host::sandbox::Inputs::from_process();
        let root = ready.discovery.prefix.as_deref();
        let pkgs = crate::host::sandbox::bound::pkgs_dirs(&inputs, root);
        let target = target.to_path_buf();
        let deadline = std::time::Instant::now() + self.shared.config.timeout;
        tokio::task::spawn_blocking(move || {
            confine::foreign_links(&target, &pkgs, Some(deadline)).ok()
        })
        .await
        .unwrap_or(Some(true))
    }

    /// Plan the read-only sandbox for a call it applies to. Fail closed: an active
    /// sandbox that cannot be planned runs nothing.
    async fn sandbox(&self, ready: &Ready, call: &mut Judged) -> Result<(), Refusal> {
        call.sandbox = match self.shared.start.sandbox.get() {
            Some(sandbox)
                if sandbox::applies(&call.class, self.shared.config.allow_write)
                    && *sandbox.state() == sandbox::State::Active =>
            {
                let plan = self.sandbox_plan(ready, call.timeout).await;
                if plan.is_none() {
                    tracing::error!("the sandbox could not be prepared for a read-only call");
                    return Err(internal().into());
                }
                plan
            }
            _ => None,
        };
        Ok(())
    }
}

/// Refuse a bounded write whose targets are unknown ([`UNJUDGED`]).
fn unjudged(audit: &trail::Record) -> Result<(), Refusal> {
    audit.refused(UNJUDGED);
    Err(refuse::policy(
        refuse::Reason::OutsideAllowedPaths,
        UNJUDGED,
    ))
}

/// `--tools`: raw argv reaches only the commands of selected tools.
fn selection(ready: &Ready, call: &Judged, audit: &trail::Record) -> Result<(), Refusal> {
    let root = ready.discovery.catalog.root.as_ref();
    if ready
        .selected
        .admits_path(policy::command_path(root, &call.argv).as_deref())
    {
        return Ok(());
    }
    audit.refused(NOT_SELECTED);
    Err(refuse::policy(refuse::Reason::NotSelected, NOT_SELECTED))
}

/// Path confinement for calls that do not need `--allow-exec` (those may run any
/// program, which can read anything anyway); no call may name the audit log.
fn paths(
    log: &crate::host::audit::Audit,
    ready: &Ready,
    call: &Judged,
    audit: &trail::Record,
) -> Result<(), Refusal> {
    let (class, argv, cwd) = (&call.class, &call.argv, call.cwd());
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let here_cwd = here.join(cwd.unwrap_or(&here));
    if trail::names_log(log, argv, &here_cwd, home.as_deref(), class.requires_write) {
        audit.refused(trail::NAMES_LOG);
        return Err(refuse::policy(
            refuse::Reason::NamesAuditLog,
            trail::NAMES_LOG,
        ));
    }
    if class.requires_exec {
        return Ok(());
    }
    if !ready.confinement.is_unrestricted() {
        confined(ready, call.cwd(), &here, home.as_deref(), argv, audit)?;
    }
    // After `--allow-paths`: a path outside gets the refusal it always got. A command the
    // operator classified (`--classify`) is the operator's: ccm knows nothing of how it
    // opens its paths (a report written to a FIFO someone reads is its business).
    let root = ready.discovery.catalog.root.as_ref();
    let classified = policy::command_path(root, argv)
        .is_some_and(|path| ready.toolset.rules.operator_classified(&path));
    if !classified && confine::names_special(argv, &here_cwd, home.as_deref()) {
        audit.refused(SPECIAL_FILE);
        return Err(refuse::policy(refuse::Reason::SpecialFile, SPECIAL_FILE));
    }
    Ok(())
}

/// `--allow-paths`: the call's working directory and every path of its argv inside.
fn confined(
    ready: &Ready,
    cwd: Option<&Path>,
    here: &Path,
    home: Option<&Path>,
    argv: &[String],
    audit: &trail::Record,
) -> Result<(), Refusal> {
    // An explicit working directory is a path the call names too.
    let named_cwd = cwd.map(|c| here.join(c));
    let cwd_outside = named_cwd.as_ref().is_some_and(|c| {
        let token = [c.to_string_lossy().into_owned()];
        ready.confinement.check(&token, here, None).is_err()
    });
    let cwd: &Path = named_cwd.as_deref().unwrap_or(here);
    if cwd_outside || ready.confinement.check(argv, cwd, home).is_err() {
        audit.refused(OUTSIDE_ALLOWED);
        return Err(refuse::policy(
            refuse::Reason::OutsideAllowedPaths,
            OUTSIDE_ALLOWED,
        ));
    }
    Ok(())
}

/// Refuse a command over the argv + environment cap (before it spawns or queues).
pub(super) fn check_size(spec: &exec::Spec) -> Result<(), Refusal> {
    exec::check_size(spec).map_err(size_refusal)
}

/// The refusal of a command over the argv + environment cap.
fn size_refusal(why: exec::TooLarge) -> Refusal {
    let message = match why {
        exec::TooLarge::Argument => format!(
            "Invalid arguments: one argument is longer than {} bytes",
            exec::MAX_ARG_BYTES
        ),
        exec::TooLarge::Total(_) => format!(
            "Invalid arguments: the command line and environment would exceed {} bytes",
            exec::MAX_COMMAND_BYTES
        ),
    };
    Refusal::Arguments(ErrorData::invalid_params(
        message,
        Some(json!({"limit": exec::MAX_COMMAND_BYTES})),
    ))
}
