//! In the child, between `fork` and `exec`: build the sandbox with raw system calls only
//! (no allocation, no locks) on the plan prepared before the fork.

use std::sync::Arc;

use super::mount::{MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY, mount_setattr};
use super::{Joined, MAX_KEEPS, Overlay, Plan, Prepared, TMPDIR, UnionMount};

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
            enter(&prepared, None)?;
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
/// Only system calls.
pub(crate) fn enter_forked(
    plan: &Plan,
    parent: Option<rustix::fd::BorrowedFd<'_>>,
) -> std::io::Result<()> {
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
/// Landlock scope (where the kernel has one) keeps signals within the call.
///
/// With `parent` (a user namespace the server's user owns), the call's user namespace is
/// made inside it: joined right before the call's own is unshared, after a root server's
/// mounts (made as root).
fn enter(plan: &Prepared, parent: Option<rustix::fd::BorrowedFd<'_>>) -> std::io::Result<()> {
    use rustix::fs::{Mode, mkdir};
    use rustix::mount::{MountFlags, MountPropagationFlags, mount, mount_change};
    use rustix::thread::UnshareFlags;

    let calls_own = UnshareFlags::NEWUSER | UnshareFlags::NEWNS | UnshareFlags::NEWIPC;
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
    let private = MountFlags::NOSUID | MountFlags::NODEV;
    mount(
        c"tmpfs",
        &*plan.base,
        c"tmpfs",
        private,
        &*plan.base_options,
    )?;
    for dir in &plan.mkdirs {
        mkdir(&**dir, Mode::from_raw_mode(0o700))?;
    }
    mount_areas(plan, private);
    match (&plan.maps, &proc, plan.mounts_first) {
        (Some(maps), Some(proc), true) => {
            join_parent()?;
            user_namespace(calls_own, maps, proc)?
        }
        // A root server whose kernel refused a user namespace: an IPC namespace alone.
        (None, _, _) => unshare(UnshareFlags::NEWIPC)?,
        _ => {}
    }
    drop(proc);
    super::mount::working_directory_walled()?;
    super::dev::detach_terminal();
    drop_privileges()?;
    if let Some(scope) = &plan.scope {
        use std::os::fd::AsFd;
        super::scope::restrict(scope.as_fd())?;
    }
    Ok(())
}

/// The call's overlays, unions and registry copies (best effort). Only system calls.
fn mount_areas(plan: &Prepared, private: rustix::mount::MountFlags) {
    let user = plan.maps.is_some() && !plan.mounts_first;
    super::mount::write_copies(&plan.registries);
    for (home, fallback) in plan.homes.iter().zip(&plan.registries.fallbacks) {
        if !mount_overlay(home, user, private) {
            super::mount::attach_copy(&plan.registries, fallback);
        }
    }
    for overlay in &plan.overlays {
        mount_overlay(overlay, user, private);
    }
    for union in &plan.unions {
        mount_union(union, user, private);
    }
    super::mount::attach_copies(&plan.registries);
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

/// One overlay (best effort; whether it was mounted): its directory opened once, not through a
/// symlink, and that descriptor used as the mount point and the lower layer alike. Only
/// system calls (the options are assembled on the stack).
fn mount_overlay(overlay: &Overlay, user: bool, private: rustix::mount::MountFlags) -> bool {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    use rustix::mount::mount;

    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(dir) = openat(CWD, &*overlay.target, flags, Mode::empty()) else {
        return false;
    };
    let mut at = [0u8; 32];
    let Some(target) = fd_path(&mut at, &dir) else {
        return false;
    };
    let (first, second) = if user {
        (&overlay.rest_userxattr, &overlay.rest)
    } else {
        (&overlay.rest, &overlay.rest_userxattr)
    };
    for rest in [first, second] {
        let mut options = [0u8; 3 * 4096];
        let Some(options) = joined(
            &mut options,
            &[
                b"lowerdir=",
                overlay.above.to_bytes(),
                target.to_bytes(),
                rest.to_bytes(),
            ],
        ) else {
            return false;
        };
        if mount(c"overlay", target, c"overlay", private, options).is_ok() {
            return true;
        }
    }
    false
}

/// `/proc/self/fd/<fd>` written into `buffer` (no allocation).
fn fd_path<'a>(buffer: &'a mut [u8; 32], fd: &rustix::fd::OwnedFd) -> Option<&'a std::ffi::CStr> {
    use std::os::fd::AsRawFd;
    let mut digits = [0u8; 10];
    let mut n = u32::try_from(fd.as_raw_fd()).ok()?;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[..len].reverse();
    joined(buffer, &[b"/proc/self/fd/", &digits[..len]])
}

/// `parts` one after the other in `buffer`, NUL-terminated; `None` when they do not fit
/// (no allocation).
fn joined<'a>(buffer: &'a mut [u8], parts: &[&[u8]]) -> Option<&'a std::ffi::CStr> {
    let mut at = 0;
    for part in parts {
        buffer.get_mut(at..at + part.len())?.copy_from_slice(part);
        at += part.len();
    }
    *buffer.get_mut(at)? = 0;
    std::ffi::CStr::from_bytes_with_nul(&buffer[..=at]).ok()
}

/// One read-only union with its new entries (best effort): the overlays inside its target
/// are cloned first and attached again over it, then each new entry gets a tmpfs. Only
/// system calls.
fn mount_union(union: &UnionMount, user: bool, private: rustix::mount::MountFlags) {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, mount, move_mount, open_tree};

    let mut kept: [Option<rustix::fd::OwnedFd>; MAX_KEEPS] = [const { None }; MAX_KEEPS];
    for (slot, keep) in kept.iter_mut().zip(&union.keeps) {
        // A symlink put in the directory's place is not followed (the clone then fails).
        let flags = OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
        *slot = open_tree(rustix::fs::CWD, &**keep, flags).ok();
    }
    let (first, second) = if user {
        (&union.options_userxattr, &union.options)
    } else {
        (&union.options, &union.options_userxattr)
    };
    let mounted = mount(c"overlay", &*union.target, c"overlay", private, &**first)
        .or_else(|_| mount(c"overlay", &*union.target, c"overlay", private, &**second));
    if mounted.is_err() {
        return;
    }
    for (slot, keep) in kept.iter_mut().zip(&union.keeps) {
        if let Some(fd) = slot.take() {
            let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH;
            let _ = move_mount(&fd, c"", rustix::fs::CWD, &**keep, flags);
        }
    }
    for entry in &union.created {
        let _ = mount(c"tmpfs", &**entry, c"tmpfs", private, UNION_TMPFS);
    }
}

/// The options of a tmpfs a union adds (what conda creates there, a package cache with its
/// repodata cache): bounded as the call's own ([`super::CALL_TMPFS`]).
pub(super) const UNION_TMPFS: &std::ffi::CStr = c"mode=0755,size=2g,nr_inodes=262144";

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
