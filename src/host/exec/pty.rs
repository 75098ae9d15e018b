//! A pseudo-terminal for a child's stdout: the child sees a terminal (`isatty(1)` is true),
//! the server reads the other side. The terminal is raw: no echo, no line discipline, no
//! output processing (`\n` stays `\n`), 80 × 24. Neither side is anyone's controlling
//! terminal (`O_NOCTTY`), and both descriptors are close-on-exec in the server (the
//! child's copy is its fd 1 only).

use std::os::fd::OwnedFd;

use rustix::pty::OpenptFlags;
use rustix::termios::{OptionalActions, Winsize};

/// The two sides of a new pseudo-terminal.
pub(super) struct Pty {
    /// The server's side, non-blocking.
    pub(super) master: OwnedFd,
    /// The child's side (its stdout).
    pub(super) terminal: OwnedFd,
}

/// Open a raw pseudo-terminal.
pub(super) fn open() -> std::io::Result<Pty> {
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let terminal = crate::host::platform::pty_peer(&master, flags)?;
    let mut termios = rustix::termios::tcgetattr(&terminal)?;
    termios.make_raw();
    rustix::termios::tcsetattr(&terminal, OptionalActions::Now, &termios)?;
    rustix::termios::tcsetwinsize(
        &terminal,
        Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    rustix::io::ioctl_fionbio(&master, true)?;
    Ok(Pty { master, terminal })
}

/// The server's side as an async reader. Once every copy of the child's side is closed,
/// reads fail with `EIO`, which the capture takes for the end of the stream.
pub(super) fn reader(master: OwnedFd) -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    // A pseudo-terminal is no FIFO, but it is pollable and non-blocking like one.
    tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(master)
}

#[cfg(test)]
mod tests;
