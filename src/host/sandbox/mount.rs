//! `mount_setattr(2)`, which the sandbox's hook (`enter.rs`) and the call's own `/dev`
//! (`dev.rs`) both use: one raw system call, no allocation (safe after `fork`); and the
//! registry copies of `registries.rs`, written and attached in the child.

use std::ffi::CStr;

use super::registries::{Attached, Registries};

pub(super) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const MOUNT_ATTR_NODEV: u64 = 0x4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(dirfd, path, flags, {set, clear})`.
pub(super) fn mount_setattr(
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

/// In the child, between fork and exec, once the call's tmpfs and its directories are
/// made: write the copies. Only system calls.
pub(super) fn write_copies(registries: &Registries) {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    for copy in &registries.copies {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        if let Ok(fd) = openat(CWD, &*copy.path, flags, Mode::from_raw_mode(0o644)) {
            let _ = rustix::io::write(&fd, &copy.bytes);
        }
    }
}

/// In the child, after every overlay is mounted: attach each copy over its registry
/// (best effort: a home whose registry does not exist, or where attaching fails,
/// keeps what it has). Only system calls.
pub(super) fn attach_copies(registries: &Registries) {
    for attached in &registries.attached {
        attach_copy(registries, attached);
    }
}

/// One copy over its registry (best effort). Only system calls.
pub(super) fn attach_copy(registries: &Registries, attached: &Attached) {
    let (Some(copy), Some(empty)) = (
        registries.copies.get(attached.copy),
        registries.copies.first(),
    ) else {
        return;
    };
    let _ = replace(&attached.home, &copy.path, &empty.path, attached.own);
}

/// Attach `copy` over `<home>/.conda/environments.txt`. The server's own `~/.conda` is
/// followed (as conda follows it); another's that is not a directory (a symlink: conda
/// would follow it) gets `empty` attached over it. The final name is never followed.
/// Only system calls.
fn replace(home: &CStr, copy: &CStr, empty: &CStr, own: bool) -> rustix::io::Result<()> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    use rustix::io::Errno;
    let dir = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let home = openat(CWD, home, dir, Mode::empty())?;
    let follow = if own {
        OFlags::empty()
    } else {
        OFlags::NOFOLLOW
    };
    match openat(&home, c".conda", dir | follow, Mode::empty()) {
        Ok(conda) => over(copy, &conda, c"environments.txt"),
        Err(Errno::NOTDIR | Errno::LOOP) if !own => over(empty, &home, c".conda"),
        Err(error) => Err(error),
    }
}

/// A clone of the file `source` attached over `name` in `dir`, not following `name`.
fn over(source: &CStr, dir: &rustix::fd::OwnedFd, name: &CStr) -> rustix::io::Result<()> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};
    let flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    let tree = open_tree(rustix::fs::CWD, source, flags)?;
    move_mount(
        &tree,
        c"",
        dir,
        name,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
}

/// Refuse (`EXDEV`) a working directory that the namespace's recursive read-only
/// remount did not reach. The child enters its working directory as the server, before
/// its namespaces exist (`chdir` runs before the `pre_exec` hooks); a directory entered
/// through `/proc/<pid>/root` of a process in another mount namespace (a container, a
/// service's private `/tmp`, another call's tmpfs) is a mount of that namespace, which
/// no remount of this one changes: writable, devices and all. Every mount of the child's
/// own tree is read-only and `nodev` by now. Only system calls.
pub(super) fn working_directory_walled() -> std::io::Result<()> {
    use rustix::fs::StatVfsMountFlags as Flags;
    let flags = rustix::fs::statvfs(c".")?.f_flag;
    if flags.contains(Flags::RDONLY | Flags::NODEV) {
        Ok(())
    } else {
        Err(rustix::io::Errno::XDEV.into())
    }
}
