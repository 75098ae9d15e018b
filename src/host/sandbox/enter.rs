//! In the child, between `fork` and `exec`: build the sandbox with raw system calls only
//! (no allocation, no locks) on the plan prepared before the fork.

use std::sync::Arc;

use super::mount::{MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY, mount_setattr};
use super::{Joined, Plan, Prepared, TMPDIR};

/// Put the child of `command` into the sandbox of `plan` (sets `TMPDIR`, and a
/// `pre_exec` hook that builds the namespace). Fails only where there is no sandbox
/// (`platform/other.rs`).
pub(crate) fn install(command: &mut tokio::process::Command, plan: &Plan) -> std::io::Result<()> {
    command.env(TMPDIR, &plan.0.tmpdir);
    let prepared = Arc::clone(&plan.0);
    // SAFETY: the hook only makes system calls (no allocation, no locks) on data prepared
    // before the fork, as required between fork and exec.
    unsafe {
        command.pre_exec(move || {
            // The child's ruleset: it restricts itself in `enter`, and exec closes it.
            drop(enter(&prepared, None)?);
            // Last: the unix-socket filter (`seccomp.rs`).
            match &prepared.seccomp {
                Some(filter) => filter.install(),
                None => Ok(()),
            }
        });
    }
    Ok(())
}

/// Build `plan`'s sandbox in the calling process, which must be a freshly forked,
/// single-threaded child (the warm path's namespace holder). With `parent`, the call's
/// user namespace is made inside that user namespace (the read zygote's, which the
/// server's user owns), so that the zygote's children, which hold no capability, may
/// join it: the owner of a user namespace, in its parent, holds every capability in it.
/// Returns the call's own Landlock ruleset (its mounts granted), which a process that
/// joins the namespaces restricts itself with. Only system calls.
pub(crate) fn enter_forked(
    plan: &Plan,
    parent: Option<rustix::fd::BorrowedFd<'_>>,
) -> std::io::Result<Option<rustix::fd::OwnedFd>> {
    enter(&plan.0, parent)
}

/// Make the child of `command` join `namespaces` (user, mount and IPC, built by a holder
/// from `plan`) before `exec`, then give up what a cold sandboxed child gives up: the
/// controlling terminal, every privilege, a Landlock domain of its own (where the kernel
/// scopes signals), the unix-socket filter last. The read zygote starts so: contained as a
/// cold read-only call is, before its interpreter runs a line.
pub(crate) fn install_joined(
    command: &mut tokio::process::Command,
    plan: &Plan,
    namespaces: Joined,
) -> std::io::Result<()> {
    command.env(TMPDIR, &plan.0.tmpdir);
    let prepared = Arc::clone(&plan.0);
    // SAFETY: the hook only makes system calls (setns, prctl, capset, landlock, seccomp)
    // on descriptors and data prepared before the fork: no allocation, no locks.
    unsafe {
        command.pre_exec(move || {
            use rustix::fd::AsFd;
            use rustix::thread::{LinkNameSpaceType as Kind, move_into_link_name_space as join};
            join(namespaces.user.as_fd(), Some(Kind::User))?;
            join(namespaces.mount.as_fd(), Some(Kind::Mount))?;
            join(
                namespaces.ipc.as_fd(),
                Some(Kind::InterProcessCommunication),
            )?;
            super::dev::detach_terminal();
            drop_privileges()?;
            if let Some(scope) = &prepared.scope {
                super::scope::restrict(scope.as_fd())?;
            }
            match &prepared.seccomp {
                Some(filter) => filter.install(),
                None => Ok(()),
            }
        });
    }
    Ok(())
}

/// Write a whole small file, `path` relative to `dir` (async-signal-safe).
fn write_file(
    dir: rustix::fd::BorrowedFd<'_>,
    path: &std::ffi::CStr,
    bytes: &[u8],
) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, openat};
    let fd = openat(dir, path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let written = rustix::io::write(&fd, bytes)?;
    if written == bytes.len() {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EIO))
    }
}

/// In the child, between fork and exec: build the sandbox. Only system calls.
///
/// Not root: a user namespace (with mount and IPC namespaces) first, then the mounts
/// inside it. Every mount read-only and `nodev`, `/dev` the call's own (`dev.rs`). Root: a mount namespace, the mounts (made as root), then the call's user
/// namespace with a new mount namespace (copies of the mounts, locked: nothing in the
/// user namespace can remount or unmount them) and an IPC namespace. Either way every
/// sandboxed child is alone in a user namespace of its own: another call's child, in a
/// sibling, holds no capability over it, so the kernel refuses `ptrace` and
/// `/proc/<pid>/root`, `mem`, `fd` between them. Then every privilege goes, and the
/// call's own Landlock ruleset (`scope.rs`), made first and granting each writable mount
/// as it is made, keeps signals within the call and opens for writing only files of its
/// mounts.
///
/// With `parent` (a user namespace the server's user owns), the call's user namespace is
/// made inside it: joined right before the call's own is unshared, after a root server's
/// mounts (made as root). Returns the call's ruleset.
fn enter(
    plan: &Prepared,
    parent: Option<rustix::fd::BorrowedFd<'_>>,
) -> std::io::Result<Option<rustix::fd::OwnedFd>> {
    use rustix::fd::AsFd;
    use rustix::thread::UnshareFlags;

    let calls_own = UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWIPC;
    let rules = super::scope::call_ruleset(plan.rules_writes, plan.scope.is_some())?;
    // Where the maps are written: `/proc`, or (root) a detached copy of its mount, which
    // the read-only remount below does not reach (the maps are written after it).
    let proc = match &plan.maps {
        Some(_) => Some(proc_dir(plan.mounts_first)?),
        None => None,
    };
    let join_parent = || match parent {
        Some(parent) => rustix::thread::move_into_link_name_space(
            parent,
            Some(rustix::thread::LinkNameSpaceType::User),
        ),
        None => Ok(()),
    };
    if parent.is_some() && plan.maps.is_none() {
        // Nested calls need a user namespace of their own.
        return Err(rustix::io::Errno::INVAL.into());
    }
    match (&plan.maps, &proc, plan.mounts_first) {
        (Some(maps), Some(proc), false) => {
            join_parent()?;
            user_namespace(calls_own, maps, proc)?
        }
        _ => unshare(UnshareFlags::NEWNS)?,
    }
    mount_tree(plan, rules.as_ref().map(AsFd::as_fd))?;
    match (&plan.maps, &proc, plan.mounts_first) {
        (Some(maps), Some(proc), true) => {
            join_parent()?;
            user_namespace(calls_own, maps, proc)?
        }
        // A root server whose kernel refused a user namespace: an IPC namespace alone.
        (None, _, _) => unshare(UnshareFlags::NEWIPC)?,
        _ => {}
    }
    super::mount::grant_mqueue(rules.as_ref().map(AsFd::as_fd));
    drop(proc);
    super::mount::working_directory_walled()?;
    super::dev::detach_terminal();
    drop_privileges()?;
    // The scopes are the call's ruleset's too (none only on a kernel without Landlock).
    if let Some(rules) = &rules {
        super::scope::restrict(rules.as_fd())?;
    }
    Ok(rules)
}

/// The child's mount tree, in its new mount namespace: everything read-only and
/// `nodev`, `/dev` and the tmpfs the call's own, then its overlays, unions and registry
/// copies; each writable mount granted in `rules` as it is made. Only system calls.
fn mount_tree(plan: &Prepared, rules: Option<rustix::fd::BorrowedFd<'_>>) -> std::io::Result<()> {
    use rustix::fd::AsFd;
    use rustix::fs::{CWD, Mode, OFlags, mkdir, openat};
    use rustix::mount::{MountFlags, MountPropagationFlags, mount_change};
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    // The host's few device nodes the call keeps, cloned before `/` goes `nodev`.
    let nodes = super::dev::clone_nodes();
    mount_setattr(
        libc::AT_FDCWD,
        c"/",
        libc::AT_RECURSIVE,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
        0,
    )?;
    super::dev::build(nodes)?;
    // `/dev` is the call's tmpfs now (in a namespace of the child's own, under the root's
    // own `/`): its devices, pseudo-terminals and `shm`.
    let dev = openat(
        CWD,
        c"/dev",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    super::scope::grant(rules, dev.as_fd())?;
    let base = super::mount::tmpfs(&plan.base_mode)?;
    super::mount::attach(&base, &plan.base)?;
    super::scope::grant(rules, base.as_fd())?;
    if let Some(report) = &plan.test_report {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let fifo = openat(CWD, &**report, flags, Mode::empty())?;
        super::scope::grant(rules, fifo.as_fd())?;
    }
    for dir in &plan.mkdirs {
        mkdir(&**dir, Mode::from_raw_mode(0o700))?;
    }
    mount_areas(plan, MountFlags::NOSUID | MountFlags::NODEV, rules);
    Ok(())
}

/// The call's overlays, unions and registry copies (best effort). Only system calls.
fn mount_areas(
    plan: &Prepared,
    private: rustix::mount::MountFlags,
    rules: Option<rustix::fd::BorrowedFd<'_>>,
) {
    use super::mount::{attach_copies, attach_copy, grant_copies, overlay, union, write_copies};
    let user = plan.maps.is_some() && !plan.mounts_first;
    write_copies(&plan.registries);
    grant_copies(&plan.registries, rules);
    for (home, fallback) in plan.homes.iter().zip(&plan.registries.fallbacks) {
        if !overlay(home, user, rules) {
            attach_copy(&plan.registries, fallback);
        }
    }
    for each in &plan.overlays {
        overlay(each, user, rules);
    }
    for each in &plan.unions {
        union(each, user, private, rules);
    }
    attach_copies(&plan.registries);
}

/// A directory descriptor of `/proc` (close-on-exec). `detached`: of a copy of its mount
/// that belongs to no mount tree, so a later read-only remount of `/` leaves it writable
/// (a root server's child writes its maps after that remount). Only system calls.
pub(super) fn proc_dir(detached: bool) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, open};
    use rustix::mount::{OpenTreeFlags, open_tree};
    if detached {
        let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
        Ok(open_tree(CWD, c"/proc", flags)?)
    } else {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(open(c"/proc", flags, Mode::empty())?)
    }
}

/// Unshare namespaces (`flags`: only `NEW*` flags, never the file table). Only a system
/// call.
pub(super) fn unshare(flags: rustix::thread::UnshareFlags) -> std::io::Result<()> {
    use rustix::thread::UnshareFlags;
    if flags.contains(UnshareFlags::FILES) {
        return Err(rustix::io::Errno::INVAL.into());
    }
    // SAFETY: rustix marks `unshare` unsafe because `CLONE_FILES` would give this thread
    // a file table that descriptors owned elsewhere in the process no longer match;
    // `FILES` is refused above, and namespace flags change no Rust-visible state.
    unsafe { rustix::thread::unshare_unsafe(flags) }?;
    Ok(())
}

/// Unshare `flags` (a new user namespace among them) and map the caller's ids in it to
/// themselves (`maps`: the `uid_map` and `gid_map` contents), `setgroups` denied: the one
/// mapping a process may write for itself, through `proc` (a descriptor of `/proc`).
/// Only system calls.
pub(super) fn user_namespace(
    flags: rustix::thread::UnshareFlags,
    (uid_map, gid_map): &(Vec<u8>, Vec<u8>),
    proc: &rustix::fd::OwnedFd,
) -> std::io::Result<()> {
    use rustix::fd::AsFd;
    use rustix::process::{DumpableBehavior, dumpable_behavior, set_dumpable_behavior};
    let proc = proc.as_fd();
    unshare(flags)?;
    // A non-dumpable process's /proc files belong to root, so a non-root one could not
    // write its own maps: be dumpable for these three writes only (exec resets the flag
    // anyway).
    let dumpable = dumpable_behavior().ok();
    if dumpable != Some(DumpableBehavior::Dumpable) {
        let _ = set_dumpable_behavior(DumpableBehavior::Dumpable);
    }
    let written = write_file(proc, c"self/setgroups", b"deny")
        .and_then(|()| write_file(proc, c"self/uid_map", uid_map))
        .and_then(|()| write_file(proc, c"self/gid_map", gid_map));
    if dumpable != Some(DumpableBehavior::Dumpable) {
        let _ = set_dumpable_behavior(dumpable.unwrap_or(DumpableBehavior::NotDumpable));
    }
    written
}

/// Give up every privilege, for good, for this process and everything it starts. A root
/// child would keep root's capabilities across `exec`, and a child in a new user namespace
/// holds every capability in it (a full bounding set): after this, neither holds any
/// capability in any set, `exec` grants none (root is not special, a setuid or
/// file-capability program gains nothing) and the bits that say so are locked. Only
/// system calls (rustix's raw `prctl` and `capset`).
pub(super) fn drop_privileges() -> std::io::Result<()> {
    use rustix::io::Errno;
    use rustix::thread::{
        CapabilitiesSecureBits as Bits, CapabilitySet, CapabilitySets,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
        set_capabilities_secure_bits, set_no_new_privs,
    };
    // The bounding set first (it needs CAP_SETPCAP): what no `exec` can grant again.
    for cap in 0..64 {
        match remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << cap)) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(Errno::INVAL) => break,
            Err(error) => return Err(error.into()),
        }
    }
    // uid 0 gets no capabilities at `exec` and keeps none across uid changes; nothing can
    // raise an ambient capability; the bits cannot be changed back.
    set_capabilities_secure_bits(
        Bits::NO_ROOT
            | Bits::NO_ROOT_LOCKED
            | Bits::NO_SETUID_FIXUP
            | Bits::NO_SETUID_FIXUP_LOCKED
            | Bits::KEEP_CAPS_LOCKED
            | Bits::NO_CAP_AMBIENT_RAISE
            | Bits::NO_CAP_AMBIENT_RAISE_LOCKED,
    )?;
    clear_ambient_capability_set()?;
    let none = CapabilitySet::empty();
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )?;
    // No `exec` grants a privilege (setuid, setgid, file capabilities).
    set_no_new_privs(true)?;
    Ok(())
}
