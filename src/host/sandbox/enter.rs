//! In the child, between `fork` and `exec`: build the sandbox with raw system calls only
//! (no allocation, no locks) on the plan prepared before the fork.

use std::sync::Arc;

use super::{MAX_KEEPS, Overlay, Plan, Prepared, TMPDIR, UnionMount};

/// Put the child of `command` into the sandbox of `plan` (sets `TMPDIR`, and a
/// `pre_exec` hook that builds the namespace).
#[cfg(target_os = "linux")]
pub fn install(command: &mut tokio::process::Command, plan: &Plan) {
    command.env(TMPDIR, &plan.0.tmpdir);
    let prepared = Arc::clone(&plan.0);
    // SAFETY: the hook only makes system calls (no allocation, no locks) on data prepared
    // before the fork, as required between fork and exec.
    unsafe {
        command.pre_exec(move || enter(&prepared));
    }
}

#[cfg(not(target_os = "linux"))]
pub fn install(_command: &mut tokio::process::Command, _plan: &Plan) {}

/// Build `plan`'s sandbox in the calling process, which must be a freshly forked,
/// single-threaded child (the warm path's namespace holder). Only system calls.
#[cfg(target_os = "linux")]
pub fn enter_forked(plan: &Plan) -> std::io::Result<()> {
    enter(&plan.0)
}

#[cfg(target_os = "linux")]
const MOUNT_ATTR_RDONLY: u64 = 0x1;

#[cfg(target_os = "linux")]
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(dirfd, path, flags, {set, clear})`.
#[cfg(target_os = "linux")]
fn mount_setattr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    set: u64,
    clear: u64,
) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the pointers are valid for the call; the size is the struct's.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Write a whole small file (async-signal-safe).
#[cfg(target_os = "linux")]
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let written = rustix::io::write(&fd, bytes)?;
    if written == bytes.len() {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EIO))
    }
}

/// In the child, between fork and exec: build the sandbox. Only system calls.
#[cfg(target_os = "linux")]
fn enter(plan: &Prepared) -> std::io::Result<()> {
    use rustix::fs::{Mode, mkdir};
    use rustix::mount::{MountFlags, MountPropagationFlags, mount, mount_change};

    unshare_namespaces(plan.ids.as_ref())?;
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    mount_setattr(
        libc::AT_FDCWD,
        c"/",
        libc::AT_RECURSIVE,
        MOUNT_ATTR_RDONLY,
        0,
    )?;
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
    for overlay in &plan.overlays {
        mount_overlay(overlay, plan.ids.is_some(), private);
    }
    for union in &plan.unions {
        mount_union(union, plan.ids.is_some(), private);
    }
    if plan.ids.is_none() {
        drop_capabilities()?;
    }
    Ok(())
}

/// A new mount namespace, inside a new user namespace mapping `ids` (the `uid_map` and
/// `gid_map` contents) when the server is not root. Only system calls.
#[cfg(target_os = "linux")]
fn unshare_namespaces(ids: Option<&(Vec<u8>, Vec<u8>)>) -> std::io::Result<()> {
    use rustix::thread::{UnshareFlags, unshare_unsafe};

    // SAFETY: the child is single-threaded; no file table is unshared.
    match ids {
        Some((uid_map, gid_map)) => {
            unsafe { unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }?;
            // A non-dumpable process's /proc files belong to root, so it could not write
            // its own maps: be dumpable for these three writes only (exec resets the flag
            // anyway).
            // SAFETY: prctl with integer arguments only.
            let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
            if dumpable != 1 {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
            }
            let written = write_file(c"/proc/self/setgroups", b"deny")
                .and_then(|()| write_file(c"/proc/self/uid_map", uid_map))
                .and_then(|()| write_file(c"/proc/self/gid_map", gid_map));
            if dumpable != 1 {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_SET_DUMPABLE, dumpable.max(0), 0, 0, 0) };
            }
            written
        }
        None => unsafe { unshare_unsafe(UnshareFlags::NEWNS) }.map_err(Into::into),
    }
}

/// One copy-on-write overlay (best effort). Only system calls.
#[cfg(target_os = "linux")]
fn mount_overlay(overlay: &Overlay, user: bool, private: rustix::mount::MountFlags) {
    use rustix::mount::mount;

    let first = if user {
        &overlay.options_userxattr
    } else {
        &overlay.options
    };
    if mount(c"overlay", &*overlay.target, c"overlay", private, &**first).is_err() {
        let second = if user {
            &overlay.options
        } else {
            &overlay.options_userxattr
        };
        let _ = mount(c"overlay", &*overlay.target, c"overlay", private, &**second);
    }
}

/// One read-only union with its new entries (best effort): the overlays inside its target
/// are cloned first and attached again over it, then each new entry gets a tmpfs. Only
/// system calls.
#[cfg(target_os = "linux")]
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
        let _ = mount(c"tmpfs", &**entry, c"tmpfs", private, c"mode=0755");
    }
}

/// A root child keeps root's capabilities: take away those that would undo the sandbox
/// (remount, unmount), reach the server (ptrace) or the kernel. It and its descendants can
/// never regain them; a user namespace it makes locks the mounts. Only system calls.
#[cfg(target_os = "linux")]
fn drop_capabilities() -> std::io::Result<()> {
    for cap in DROPPED_CAPABILITIES {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Capabilities a root server's sandboxed children lose (bounding set).
#[cfg(target_os = "linux")]
const DROPPED_CAPABILITIES: [libc::c_ulong; 6] = [
    21, // CAP_SYS_ADMIN: mount, remount, unmount, namespaces
    19, // CAP_SYS_PTRACE: the server's memory
    16, // CAP_SYS_MODULE: kernel modules
    17, // CAP_SYS_RAWIO: ioperm, /dev/mem
    27, // CAP_MKNOD: new device nodes
    22, // CAP_SYS_BOOT: reboot
];
