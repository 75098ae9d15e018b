//! Reading a file that someone other than the operator may have planted (a caller's
//! link script, the agent's file tools, another local user): a regular file only, not
//! through a symlink, opened and read without blocking, at most a bound's worth of bytes.
//! Anything else reads as absent. Attacks 7 to 9: a FIFO as a `conda-meta` record wedged
//! the hard-link gate; a FIFO as `environments.txt` wedged every sandboxed call, a link
//! there to `/dev/zero` made the server allocate until the kernel killed it, and one to
//! `trace_pipe` (a file the kernel calls regular that blocks on read) wedged it again.

use std::io::Read;
use std::path::Path;

/// The bytes of `path` when it is a regular file of at most `max` bytes (see the module).
pub(crate) fn read(path: &Path, max: u64) -> Option<Vec<u8>> {
    bounded(open(path, rustix::fs::OFlags::RDONLY)?, max)
}

/// The bytes of the file `fd` opened (read-only, `O_NONBLOCK`) when it is a regular file
/// of at most `max` bytes.
pub(crate) fn read_from(fd: std::os::fd::OwnedFd, max: u64) -> Option<Vec<u8>> {
    bounded(regular(fd)?, max)
}

fn bounded(file: std::fs::File, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// `path` opened with `flags`, not through a symlink and without blocking, when it is a
/// regular file (of any size: the caller bounds what it reads); `None` otherwise.
pub(crate) fn open(path: &Path, flags: rustix::fs::OFlags) -> Option<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    regular(rustix::fs::open(path, flags, Mode::empty()).ok()?)
}

/// The descriptor (opened `O_NONBLOCK`) as a file when it names a regular file. It stays
/// non-blocking: where a file the kernel calls regular would block on read, the read
/// fails at once; a file on a disk reads as ever.
pub(crate) fn regular(fd: std::os::fd::OwnedFd) -> Option<std::fs::File> {
    use rustix::fs::FileType;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return None;
    }
    Some(std::fs::File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO, a symlink (to `/dev/zero`, to a regular file) and a file over the bound read
    /// as absent, at once; a regular file within it reads whole.
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
            let absent = [&fifo, &zero, &big, &link]
                .iter()
                .all(|p| read(p, 1 << 20).is_none());
            done.send(absent)
        });
        let absent = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("nothing blocked");
        assert!(absent);
        assert_eq!(read(&small, 2).as_deref(), Some(&b"a\n"[..]));
        assert_eq!(read(&small, 1), None);
    }
}
