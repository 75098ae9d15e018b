//! The walls of a bounded write besides its Landlock rules (`bound.rs`): a mount
//! namespace in which every mount is read-only, `nodev` and `nosuid` except the bound's
//! places (writable, `nodev`, `nosuid`), the call's own `/dev` (`dev.rs`) with a private
//! tmpfs on `/dev/shm` (the host's is never shared with a run), no capability,
//! and (installed by `bound::install` after the Landlock domain) the read-only sandbox's
//! unix-socket filter (`seccomp.rs`).
//!
//! Landlock handles writes to files and directory entries only: a root link script kept
//! every capability and made device nodes inside the target (`/dev/kmsg`, the root disk),
//! and, as root or not, changed the mode, owner, times and extended attributes of files
//! outside every place (Landlock does not see metadata). In this namespace such a change
//! outside the places fails with `EROFS`, no device node opens anywhere but the call's
//! few in `/dev`, and a hard link between a place and anything else is `EXDEV` (each
//! place is a mount of its own).
//!
//! Each place is opened in the parent (`bound::Bound::make`) and its identity (device,
//! inode) recorded; the child opens it again, judged places without following any
//! symlink, and leaves it read-only when it is another file now (a directory swapped
//! after the bound was made: the run's writes there fail). The place is cloned (`open_tree`, with the mounts below it)
//! before `/` goes read-only and attached back onto the very directory the child opened
//! (`move_mount` to a descriptor), so a symlink swapped in later never moves a writable
//! mount elsewhere. Only system calls in the child; everything else is prepared before
//! the fork.

/// The run's private `/dev/shm`: at most 64 MiB and 4096 files (attack 4 U8).
pub(super) const SHM_OPTIONS: &std::ffi::CStr = c"mode=1777,size=64m,nr_inodes=4096";
use std::ffi::CString;
use std::path::Path;

/// Most places a bounded write's namespace makes writable (the child keeps their
/// descriptors in fixed arrays).
pub(super) const MAX_PLACES: usize = 24;

/// The mount plan of one bounded write.
#[derive(Debug)]
pub(crate) struct Walls {
    /// `uid_map`, `gid_map` of a user namespace made first (a server that is not root);
    /// `None`: a root server makes the mounts as root.
    pub(super) maps: Option<(Vec<u8>, Vec<u8>)>,
    /// The writable places, none inside another.
    pub(super) places: Vec<Place>,
    /// The run's working directory (canonical): entered again once the places are
    /// attached, when it is still the directory the child started in, so that conda's
    /// relative paths reach a writable place's new mount rather than the read-only one
    /// below it.
    pub(super) cwd: Option<CString>,
}

/// One writable place: the path the parent opened and what it found there.
#[derive(Debug)]
pub(super) struct Place {
    pub(super) path: CString,
    /// Opened without following any symlink (a judged place).
    pub(super) judged: bool,
    pub(super) dev: u64,
    pub(super) ino: u64,
}

/// `MOUNT_ATTR_NOSUID`.
const MOUNT_ATTR_NOSUID: u64 = 0x2;

impl Walls {
    /// The plan for `places` (path opened, judged, device, inode): nested places are
    /// covered by the outer one, `/dev/null` by the call's `/dev`, `/dev/shm` by a private
    /// tmpfs (see [`enter`]). `None` when there are
    /// more than [`MAX_PLACES`] or a path cannot be a C string.
    pub(super) fn new(
        ids: (u32, u32),
        places: &[(std::path::PathBuf, bool, u64, u64)],
        cwd: Option<&Path>,
    ) -> Option<Walls> {
        let mut kept: Vec<&(std::path::PathBuf, bool, u64, u64)> = Vec::new();
        for place in places {
            if place.0 == Path::new("/dev/null") || place.0 == Path::new("/dev/shm") {
                continue;
            }
            if places
                .iter()
                .any(|other| other.0 != place.0 && place.0.starts_with(&other.0))
                || kept.iter().any(|k| k.0 == place.0)
            {
                continue;
            }
            kept.push(place);
        }
        if kept.len() > MAX_PLACES {
            return None;
        }
        let (uid, gid) = ids;
        let maps = (uid != 0).then(|| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        let places = kept
            .into_iter()
            .map(|(path, judged, dev, ino)| {
                Some(Place {
                    path: CString::new(path.as_os_str().as_encoded_bytes()).ok()?,
                    judged: *judged,
                    dev: *dev,
                    ino: *ino,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let cwd = match cwd {
            Some(cwd) => Some(CString::new(cwd.as_os_str().as_encoded_bytes()).ok()?),
            None => None,
        };
        Some(Walls { maps, places, cwd })
    }
}

/// In the child, between fork and exec: the namespace, the mounts, no privilege. Only
/// system calls, on data prepared before the fork.
pub(super) fn enter(walls: &Walls) -> std::io::Result<()> {
    use super::mount::{MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY, mount_setattr};
    use rustix::fd::OwnedFd;
    use rustix::mount::{MountPropagationFlags, OpenTreeFlags, mount_change, open_tree};
    use rustix::thread::UnshareFlags;

    // The working directory the child started in (`chdir` comes before this hook).
    let here = rustix::fs::stat(c".").ok().map(|s| (s.st_dev, s.st_ino));
    let own = UnshareFlags::NEWNS | UnshareFlags::NEWIPC;
    match &walls.maps {
        Some(maps) => {
            let proc = super::enter::proc_dir(false)?;
            super::enter::user_namespace(UnshareFlags::NEWUSER | own, maps, &proc)?;
        }
        None => super::enter::unshare(own)?,
    }
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    let mut opened: [Option<OwnedFd>; MAX_PLACES] = [const { None }; MAX_PLACES];
    let mut clones: [Option<OwnedFd>; MAX_PLACES] = [const { None }; MAX_PLACES];
    let clone_flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_RECURSIVE
        | OpenTreeFlags::AT_EMPTY_PATH;
    for ((place, fd), clone) in walls.places.iter().zip(&mut opened).zip(&mut clones) {
        // A place that is another file now (swapped after the bound was made) stays
        // read-only: the run's writes there fail, as Landlock's would.
        let Ok(at) = open_place(place) else {
            continue;
        };
        *clone = Some(open_tree(&at, c"", clone_flags)?);
        *fd = Some(at);
    }
    let nodes = super::dev::clone_nodes();
    mount_setattr(
        libc::AT_FDCWD,
        c"/",
        libc::AT_RECURSIVE,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
        0,
    )?;
    super::dev::build(nodes)?;
    // The run's own POSIX shared memory and semaphores (conda's extraction pool,
    // conda/core/package_cache_data.py:874): a tmpfs of its own, gone with the namespace.
    // The host's `/dev/shm` holds other processes' segments (root's, as a root run is uid 0).
    // Bounded (the kernel's default is half the memory, pinned outside any process's
    // address space): the pool needs a few semaphores, 32 bytes each.
    rustix::mount::mount(
        c"tmpfs",
        c"/dev/shm",
        c"tmpfs",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        SHM_OPTIONS,
    )?;
    attach(&opened, &mut clones)?;
    drop(opened);
    let entered = match (&walls.cwd, here) {
        (Some(cwd), Some(here)) => enter_again(cwd, here),
        _ => false,
    };
    // Not re-entered through a place: the directory must be one of this tree's mounts,
    // all read-only now (a directory of another mount namespace is not).
    if !entered {
        super::mount::working_directory_walled()?;
    }
    super::dev::detach_terminal();
    super::enter::drop_privileges()
}

/// Attach each place's clone (writable, made `nodev` and `nosuid`) onto the directory
/// the child opened. Only system calls.
fn attach(
    opened: &[Option<rustix::fd::OwnedFd>; MAX_PLACES],
    clones: &mut [Option<rustix::fd::OwnedFd>; MAX_PLACES],
) -> std::io::Result<()> {
    use super::mount::{MOUNT_ATTR_NODEV, mount_setattr};
    use rustix::fd::AsRawFd;
    use rustix::mount::{MoveMountFlags, move_mount};
    for (fd, clone) in opened.iter().zip(clones.iter_mut()) {
        let (Some(fd), Some(clone)) = (fd, clone.take()) else {
            continue;
        };
        mount_setattr(
            clone.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
            0,
        )?;
        move_mount(
            &clone,
            c"",
            fd,
            c"",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )?;
    }
    Ok(())
}

/// Open a place again in the child (a judged one without following any symlink) and
/// check it is the file the parent opened. Only system calls.
fn open_place(place: &Place) -> std::io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, open, openat2};
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let fd = if place.judged {
        openat2(
            CWD,
            &*place.path,
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )?
    } else {
        open(&*place.path, flags, Mode::empty())?
    };
    let stat = rustix::fs::fstat(&fd)?;
    if stat.st_dev != place.dev || stat.st_ino != place.ino {
        return Err(rustix::io::Errno::XDEV.into());
    }
    Ok(fd)
}

/// Enter `cwd` again (without following a symlink) when it is still the directory `here`
/// (device, inode) the child started in: its path now leads through the writable mount
/// of a place. Otherwise the child stays where it is (writes there fail). Whether it
/// entered again. Only system calls.
fn enter_again(cwd: &std::ffi::CStr, here: (u64, u64)) -> bool {
    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags, openat2};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let Ok(fd) = openat2(CWD, cwd, flags, Mode::empty(), resolve) else {
        return false;
    };
    match rustix::fs::fstat(&fd) {
        Ok(stat) if (stat.st_dev, stat.st_ino) == here => rustix::process::fchdir(&fd).is_ok(),
        _ => false,
    }
}
