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

/// A new tmpfs of the call, detached (`fsmount`): `mode`, bounded as
/// [`super::CALL_TMPFS_SIZE`] says, `nosuid` and `nodev`. The caller attaches it and
/// grants its root by the returned descriptor, never by a path looked up again. Only
/// system calls.
pub(super) fn tmpfs(mode: &CStr) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::mount::{FsOpenFlags, fsconfig_create, fsconfig_set_string, fsopen};
    let fs = fsopen(c"tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    fsconfig_set_string(&fs, c"mode", mode)?;
    fsconfig_set_string(&fs, c"size", super::CALL_TMPFS_SIZE)?;
    fsconfig_set_string(&fs, c"nr_inodes", super::CALL_TMPFS_INODES)?;
    fsconfig_create(&fs)?;
    detached(&fs)
}

/// The mount of a configured file-system context, detached, `nosuid` and `nodev`.
fn detached(fs: &rustix::fd::OwnedFd) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::mount::{FsMountFlags, MountAttrFlags, fsmount};
    let attr = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
    Ok(fsmount(fs, FsMountFlags::FSMOUNT_CLOEXEC, attr)?)
}

/// Attach the detached mount `mounted` at `path` (resolved as `mount(2)` resolves it).
pub(super) fn attach(mounted: &rustix::fd::OwnedFd, path: &CStr) -> std::io::Result<()> {
    use rustix::mount::{MoveMountFlags, move_mount};
    let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH;
    Ok(move_mount(mounted, c"", rustix::fs::CWD, path, flags)?)
}

/// One overlay (best effort; whether it was mounted): its directory opened once, not
/// through a symlink, and that descriptor used as the mount point and the lower layer
/// alike. A copy-on-write overlay's root is granted in `rules` (`scope::grant`) by the
/// descriptor of the mount itself. Only system calls (the lower layers are assembled on
/// the stack).
pub(super) fn overlay(
    overlay: &super::Overlay,
    user: bool,
    rules: Option<rustix::fd::BorrowedFd<'_>>,
) -> bool {
    use rustix::fd::AsFd;
    use rustix::fs::{CWD, Mode, OFlags, openat};
    use rustix::mount::{MoveMountFlags, move_mount};

    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(dir) = openat(CWD, &*overlay.target, flags, Mode::empty()) else {
        return false;
    };
    let mut at = [0u8; 32];
    let Some(target) = fd_path(&mut at, &dir) else {
        return false;
    };
    let mut lower = [0u8; 3 * 4096];
    let Some(lower) = joined(&mut lower, &[overlay.above.to_bytes(), target.to_bytes()]) else {
        return false;
    };
    // Inside a user namespace an overlay needs `userxattr`; as root, without it.
    for userxattr in [user, !user] {
        let Ok(mounted) = configured(overlay, lower, userxattr) else {
            continue;
        };
        let onto =
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH;
        if move_mount(&mounted, c"", &dir, c"", onto).is_err() {
            return false;
        }
        if overlay.layers.is_some() {
            let _ = super::scope::grant(rules, mounted.as_fd());
        }
        return true;
    }
    false
}

/// The detached mount of `overlay` on the lower layers `lower`.
fn configured(
    overlay: &super::Overlay,
    lower: &CStr,
    userxattr: bool,
) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::mount::{
        FsOpenFlags, fsconfig_create, fsconfig_set_flag, fsconfig_set_string, fsopen,
    };
    let fs = fsopen(c"overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    fsconfig_set_string(&fs, c"lowerdir", lower)?;
    if let Some((upper, work)) = &overlay.layers {
        fsconfig_set_string(&fs, c"upperdir", &**upper)?;
        fsconfig_set_string(&fs, c"workdir", &**work)?;
    }
    if overlay.index_off {
        fsconfig_set_string(&fs, c"index", c"off")?;
    }
    if userxattr {
        fsconfig_set_flag(&fs, c"userxattr")?;
    }
    fsconfig_create(&fs)?;
    detached(&fs)
}

/// `/proc/self/fd/<fd>` written into `buffer` (no allocation).
fn fd_path<'a>(buffer: &'a mut [u8; 32], fd: &rustix::fd::OwnedFd) -> Option<&'a CStr> {
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
fn joined<'a>(buffer: &'a mut [u8], parts: &[&[u8]]) -> Option<&'a CStr> {
    let mut at = 0;
    for part in parts {
        buffer.get_mut(at..at + part.len())?.copy_from_slice(part);
        at += part.len();
    }
    *buffer.get_mut(at)? = 0;
    CStr::from_bytes_with_nul(&buffer[..=at]).ok()
}

/// One read-only union with its new entries (best effort): the overlays inside its target
/// are cloned first and attached again over it, then each new entry gets a tmpfs of the
/// call, granted in `rules`. Only system calls.
pub(super) fn union(
    union: &super::UnionMount,
    user: bool,
    private: rustix::mount::MountFlags,
    rules: Option<rustix::fd::BorrowedFd<'_>>,
) {
    use rustix::fd::AsFd;
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, mount, move_mount, open_tree};

    let mut kept: [Option<rustix::fd::OwnedFd>; super::MAX_KEEPS] =
        [const { None }; super::MAX_KEEPS];
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
        if let Ok(mounted) = tmpfs(c"0755")
            && attach(&mounted, entry).is_ok()
        {
            let _ = super::scope::grant(rules, mounted.as_fd());
        }
    }
}

/// Grant the registry copies (files in the call's tmpfs, each attached over a registry
/// where conda reads it: there the walk up from the file never meets the tmpfs's root)
/// in `rules`. Only system calls.
pub(super) fn grant_copies(registries: &Registries, rules: Option<rustix::fd::BorrowedFd<'_>>) {
    use rustix::fd::AsFd;
    use rustix::fs::{CWD, Mode, OFlags, openat};
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for copy in &registries.copies {
        if let Ok(file) = openat(CWD, &*copy.path, flags, Mode::empty()) {
            let _ = super::scope::grant(rules, file.as_fd());
        }
    }
}

/// Grant the call's POSIX message queues in `rules`: `mq_open` opens a file of the
/// `mqueue` file system of the call's IPC namespace, whose root a new `mqueue` mount
/// shares (one super block per IPC namespace). Once the call's IPC namespace is made and
/// before privileges go; best effort (without it a queue does not open for writing).
/// Only system calls.
pub(super) fn grant_mqueue(rules: Option<rustix::fd::BorrowedFd<'_>>) {
    use rustix::fd::AsFd;
    use rustix::mount::{FsOpenFlags, fsconfig_create, fsopen};
    if rules.is_none() {
        return;
    }
    let Ok(fs) = fsopen(c"mqueue", FsOpenFlags::FSOPEN_CLOEXEC) else {
        return;
    };
    if fsconfig_create(&fs).is_ok()
        && let Ok(mounted) = detached(&fs)
    {
        let _ = super::scope::grant(rules, mounted.as_fd());
    }
}
