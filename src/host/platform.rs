//! The platform seam: the one place where `host/` chooses between the mechanisms only
//! Linux has and their honest absence elsewhere. Callers name what they need here
//! (`platform::install_sandbox`, `platform::make_write_bound`, `platform::pidfd_open` …)
//! and never test the target themselves: a target gate stands only here and on the `mod`
//! line of a Linux room (a whole file compiled on Linux only, beside the data it serves),
//! which only `linux.rs` and the other Linux rooms name (`tests/it/house/seam.rs`).
//! `linux.rs` re-exports the Linux rooms' mechanisms or writes the small ones; `other.rs`
//! offers the same names and says what a port has without them: no sandbox (the probe
//! says `Unavailable`; an `install_*` given a plan or bound fails the spawn), no write
//! bound, no seccomp filter (the capabilities say `unix_sockets: open`), no child
//! subreaper (the `CCM_EXECUTION` marker sweep still ends the orphans it can see), no
//! pidfds (every call runs cold). A port starts with a side of its own next to them.
//!
//! What each mechanism guarantees (and where its Linux code lives):
//! - mount, user and IPC namespaces (`sandbox/enter.rs`, `sandbox/dev.rs`,
//!   `sandbox/mount.rs`; [`install_sandbox`], [`enter_forked`], [`install_joined`]): a
//!   read-only call sees the host read-only, with a private tmpfs, `/dev` and IPC
//!   namespace; where they are missing the sandbox is `Unavailable`.
//! - Landlock scope (`sandbox/scope.rs`, [`scope_ruleset`], [`sandbox_rules_writes`]): a
//!   sandboxed call's signals and abstract unix sockets reach only its own call, and it
//!   opens for writing only files of its own mounts (no host FIFO); write bound
//!   (`sandbox/bound/landlock.rs` and the [`Walls`] of `sandbox/walls.rs`;
//!   [`write_bound_support`], [`make_write_bound`], [`install_write_bound`]): an
//!   unsandboxed write may write only beneath the places it was judged to.
//! - seccomp (`sandbox/seccomp.rs`, [`SeccompFilter`]): a sandboxed child cannot create a
//!   unix socket (or a datagram pair, or an io_uring) that could reach a host service.
//! - capabilities, securebits and `no_new_privs` (`sandbox/enter.rs`): a sandboxed child
//!   keeps no privilege.
//! - cgroups (`exec/cgroup.rs`): a run's whole tree is counted, limited and killed at
//!   once; without them the process group and the marker sweep end it.
//! - child subreaper ([`set_child_subreaper`]; `exec/reap.rs` reaps): orphaned
//!   descendants become the server's, which reaps them.
//! - pidfds ([`pidfd_open`], [`pidfd_kill`]): a warm child is waited for and signalled
//!   without pid reuse; without them `--warm` is off and every call runs cold.
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
