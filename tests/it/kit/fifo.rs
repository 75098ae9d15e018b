//! A FIFO at a path, mode 0666 whatever the umask, held open for reading without
//! blocking: a writer (a sandboxed child reporting out, a probe trying a host FIFO) can
//! open it at once, and the test reads what arrived without waiting.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Make the FIFO `path` (mode 0666) and return its reader (non-blocking).
pub(crate) fn with_reader(path: &Path) -> std::fs::File {
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        path,
        rustix::fs::Mode::from_raw_mode(0o666),
    )
    .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}
