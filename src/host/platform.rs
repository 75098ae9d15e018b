//! The platform seam: the one place where `host/` chooses between the mechanisms only
//! Linux has and their honest absence elsewhere. Callers in `host/` name what they need
//! here (`platform::SeccompFilter`, `platform::exit_code`, the pidfd and subreaper calls) instead of testing the
//! target themselves; `linux.rs` re-exports or wraps the Linux code where it lives
//! (`sandbox/`, `exec/`), `other.rs` says what a port has without it: no seccomp filter
//! (the sandbox's capabilities say `unix_sockets: open`), no child subreaper (the
//! `CCM_EXECUTION` marker sweep still ends the orphans it can see), exit codes without
//! signals. A macOS or Windows port starts by filling in `other.rs`.
//!
//! What each mechanism guarantees (and where its Linux code lives):
//! - mount, user and IPC namespaces (`sandbox/enter.rs`, `sandbox/dev.rs`,
//!   `sandbox/mount.rs`): a read-only call sees the host read-only, with a private tmpfs,
//!   `/dev` and IPC namespace; where they are missing the sandbox is `Unavailable`.
//! - Landlock scope (`sandbox/scope.rs`, [`scope_ruleset`]): a sandboxed call's signals and abstract unix
//!   sockets reach only its own call; write bound (`sandbox/bound.rs`): an unsandboxed
//!   write may write only beneath the places it was judged to.
//! - seccomp (`sandbox/seccomp.rs`, [`SeccompFilter`]): a sandboxed child cannot create a
//!   unix socket (or a datagram pair, or an io_uring) that could reach a host service.
//! - capabilities, securebits and `no_new_privs` (`sandbox/enter.rs`): a sandboxed child
//!   keeps no privilege.
//! - cgroups (`exec/cgroup.rs`): a run's whole tree is counted, limited and killed at
//!   once; without them the process group and the marker sweep end it.
//! - child subreaper ([`set_child_subreaper`]; `exec/reap.rs` reaps): orphaned
//!   descendants become the server's, which reaps them.
//! - pidfds ([`pidfd_open`], [`pidfd_kill`]): a warm child is waited for and signalled without pid
//!   reuse; without them `--warm` is off and every call runs cold.
//! - pseudo-terminal (`exec/pty.rs`): a watched run's stdout is a terminal, so conda
//!   writes its fetch records as it goes.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;

#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
pub(crate) use other::*;
