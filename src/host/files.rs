//! Reading a file that someone other than the operator may have planted (a caller's
//! link script, the agent's file tools, another local user): a regular file only, opened
//! without blocking (a FIFO would hold the server's thread for good), at most a bound's
//! worth of bytes (a symlink to `/dev/zero`, a sparse file of many gigabytes). Anything
//! else reads as absent. Attacks 7 and 8: a FIFO as a `conda-meta` record wedged the
//! hard-link gate; a FIFO or a `/dev/zero` link as `environments.txt` wedged every
//! sandboxed call or made the server allocate until the kernel killed it.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;

/// How [`read`] treats a symlink as the file's last component.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// Followed (the file it leads to is judged as the file).
    Follow,
    /// Refused: the file reads as absent.
    Refuse,
}

/// The bytes of `path` when it is a regular file of at most `max` bytes (see the module).
pub(crate) fn read(path: &Path, max: u64, links: Links) -> Option<Vec<u8>> {
    let file = open(path, links, rustix::fs::OFlags::RDONLY)?;
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// `path` opened with `flags` without blocking, when it is a regular file (of any size:
/// the caller bounds what it reads); `None` otherwise. The descriptor is switched back to
/// blocking once it is known to be a regular file.
pub(crate) fn open(path: &Path, links: Links, flags: rustix::fs::OFlags) -> Option<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let mut flags = flags | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if links == Links::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    regular(fd)
}

/// The descriptor as a file when it names a regular file (back in blocking mode).
pub(crate) fn regular(fd: std::os::fd::OwnedFd) -> Option<std::fs::File> {
    use rustix::fs::FileType;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    let flags = rustix::fs::fcntl_getfl(fd.as_fd()).ok()?;
    rustix::fs::fcntl_setfl(fd.as_fd(), flags - rustix::fs::OFlags::NONBLOCK).ok()?;
    Some(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO, a symlink to `/dev/zero` and a file over the bound read as absent, at once;
    /// a regular file within it reads whole, through a symlink only where links are
    /// followed.
    #[test]
    fn only_a_small_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let (fifo, zero, big, small, link) = (
            dir.path().join("fifo"),
            dir.path().join("zero"),
            dir.path().join("big"),
            dir.path().join("small"),
            dir.path().join("link"),
        );
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, 0o600.into()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        std::fs::write(&small, b"a\n").unwrap();
        std::os::unix::fs::symlink(&small, &link).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let absent = [&fifo, &zero, &big]
                .iter()
                .all(|p| read(p, 1 << 20, Links::Follow).is_none());
            done.send(absent)
        });
        let absent = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("nothing blocked");
        assert!(absent);
        assert_eq!(read(&small, 2, Links::Refuse).as_deref(), Some(&b"a\n"[..]));
        assert_eq!(read(&small, 1, Links::Refuse), None);
        assert_eq!(read(&link, 2, Links::Follow).as_deref(), Some(&b"a\n"[..]));
        assert_eq!(read(&link, 2, Links::Refuse), None);
    }
}
