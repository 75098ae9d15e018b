//! The call's seccomp filter, installed last before `exec` (and by a warm child after
//! its Landlock domain): a sandboxed child cannot make a unix socket that could reach a
//! process outside its call.
//!
//! `connect(2)` to a pathname socket needs no write permission on the mount, and the
//! calls share the host's network namespace, so a child could otherwise ask any host
//! service listening on a unix socket (the system D-Bus, systemd, docker, an X server,
//! an ssh agent) to act for it outside every namespace. The filter makes
//! `socket(AF_UNIX, …)` fail with `EACCES`, and `socketpair(AF_UNIX, …)` of every type
//! but a stream or seqpacket pair too (a datagram socket of a pair, which `SOCK_RAW`
//! also makes, can be connected again, or `sendto` any address); connected stream and
//! seqpacket pairs stay allowed (multiprocessing's `Pipe`, asyncio's self-pipe). `io_uring_setup` fails with `EACCES` (io_uring creates sockets
//! and connects them without the `socket`/`connect` system calls). `add_key`, `keyctl`
//! and `request_key` fail with `EACCES`: the kernel's keyrings belong to the user (for a
//! root server's children, which make no user namespace, to the host's root), so a key
//! added, read or revoked there would outlive the call and reach every other process of
//! that user. `prlimit64` on another process than the caller fails with `EACCES` (a
//! root server's bounded child shares the host's PID namespace: it could set any root
//! process's limits, the server's included), and so do `setpriority`, `ioprio_set`,
//! `sched_setaffinity`, `sched_setscheduler`, `sched_setparam` and `sched_setattr` on
//! another process (the kernel lets a child that made a user namespace of its own
//! change a root process's scheduling: see `program`); a process's own (pid 0) stay,
//! and a thread that names itself by its id is refused. `ptrace`, `process_vm_readv`,
//! `process_vm_writev` and `pidfd_getfd` fail with `EACCES`: a child of the call could
//! otherwise drive another process of the same user that shares its domain (a confirmed
//! run's wrapper, which reports whether the plan changed), and no conda command traces
//! one (a debugger or `strace` under `conda run` in a sandboxed call fails). Every other
//! system call is allowed: the filter narrows nothing else.
//!
//! The program is built by seccompiler (rust-vmm's, used by Firecracker: pure Rust, no C
//! library, and it builds the whole BPF program ahead, so installing it in the forked
//! child is one system call on memory prepared before the fork). It checks the
//! architecture first (another ABI, say i386's `int 0x80`, kills the process) and, on
//! x86_64, refuses the same calls through their x32 numbers. The same bytes are put in a
//! sealed memfd for the warm zygote, whose children install them with `prctl`.

use std::os::fd::OwnedFd;

/// The program, and a sealed memfd holding its bytes (for the warm zygote).
#[derive(Debug)]
pub(crate) struct Filter {
    program: seccompiler::BpfProgram,
    memfd: OwnedFd,
}

/// `ioprio_set`'s `which` for one process (include/uapi/linux/ioprio.h).
const IOPRIO_WHO_PROCESS: u64 = 1;

/// The x32 ABI's system call numbers: x86_64's with this bit.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// The program; `None` on an architecture seccompiler does not know.
fn program() -> Option<seccompiler::BpfProgram> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
        SeccompFilter, SeccompRule,
    };
    let arch = std::env::consts::ARCH.try_into().ok()?;
    let unix = |extra: Option<Cond>| {
        let mut conds = vec![Cond::new(0, Len::Dword, Op::Eq, libc::AF_UNIX as u64).ok()?];
        conds.extend(extra);
        SeccompRule::new(conds).ok()
    };
    // socketpair's type without SOCK_NONBLOCK / SOCK_CLOEXEC (the low four bits,
    // SOCK_TYPE_MASK): every type but a connected stream or seqpacket pair. The kernel
    // makes SOCK_RAW a datagram pair (net/unix/af_unix.c, `unix_create`: "Believe it or
    // not BSD has AF_UNIX, SOCK_RAW though nothing uses it"), which can `sendto` any
    // datagram socket by path (attack 23 F2).
    let mut pairs = Vec::new();
    for kind in 0..=0xf_u64 {
        if kind != libc::SOCK_STREAM as u64 && kind != libc::SOCK_SEQPACKET as u64 {
            pairs.push(unix(Some(
                Cond::new(1, Len::Dword, Op::MaskedEq(0xf), kind).ok()?,
            ))?);
        }
    }
    // The first argument another process than the caller's own (0).
    let other_process = || SeccompRule::new(vec![Cond::new(0, Len::Dword, Op::Ne, 0).ok()?]).ok();
    // `which` is not the caller's own process (`value`) or `who` is not 0 (the caller).
    let not_self = |value: u64| -> Option<Vec<SeccompRule>> {
        Some(vec![
            SeccompRule::new(vec![Cond::new(0, Len::Dword, Op::Ne, value).ok()?]).ok()?,
            SeccompRule::new(vec![Cond::new(1, Len::Dword, Op::Ne, 0).ok()?]).ok()?,
        ])
    };
    let mut rules = std::collections::BTreeMap::new();
    let calls = [
        (libc::SYS_socket, vec![unix(None)?]),
        (libc::SYS_socketpair, pairs),
        // No condition: every call.
        (libc::SYS_io_uring_setup, vec![]),
        // Another process's resource limits (a root child could lower the server's or any
        // root process's, which no namespace of a bounded write separates); its own stay.
        (libc::SYS_prlimit64, vec![other_process()?]),
        // Another process's scheduling: its nice value, CPUs, policy and I/O priority. The
        // kernel allows them to a process of the same user whose permitted capabilities
        // hold the target's (security/commoncap.c `cap_safe_nice`: `cap_issubset`, which
        // compares the sets across user namespaces); a child that makes a user namespace
        // of its own holds them all there, and so could make the server, or any root
        // process of the host, idle for good (attack 23 F4). Its own stay: `which`
        // PRIO_PROCESS / IOPRIO_WHO_PROCESS and `who` 0, or pid 0.
        (libc::SYS_setpriority, not_self(libc::PRIO_PROCESS as u64)?),
        (libc::SYS_ioprio_set, not_self(IOPRIO_WHO_PROCESS)?),
        (libc::SYS_sched_setaffinity, vec![other_process()?]),
        (libc::SYS_sched_setscheduler, vec![other_process()?]),
        (libc::SYS_sched_setparam, vec![other_process()?]),
        (libc::SYS_sched_setattr, vec![other_process()?]),
        (libc::SYS_add_key, vec![]),
        (libc::SYS_keyctl, vec![]),
        (libc::SYS_request_key, vec![]),
        // Another process's execution, memory or descriptors: a link script traced the
        // confirmed run's wrapper (same user, same Landlock domain) and made it report a
        // changed plan after the package had been installed (attack 5 V7).
        (libc::SYS_ptrace, vec![]),
        (libc::SYS_process_vm_readv, vec![]),
        (libc::SYS_process_vm_writev, vec![]),
        (libc::SYS_pidfd_getfd, vec![]),
    ];
    for (nr, rule) in calls {
        #[cfg(target_arch = "x86_64")]
        rules.insert(nr | X32, rule.clone());
        rules.insert(nr, rule);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .ok()?;
    filter.try_into().ok()
}

impl Filter {
    /// Build the program and its memfd (at startup); `None` when either fails.
    pub(crate) fn new() -> Option<Filter> {
        use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, memfd_create};
        let program = program()?;
        let memfd = memfd_create(
            c"ccm-seccomp",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .ok()?;
        let bytes = Self::bytes(&program);
        if rustix::io::write(&memfd, &bytes).ok()? != bytes.len() {
            return None;
        }
        let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
        fcntl_add_seals(&memfd, seals).ok()?;
        Some(Filter { program, memfd })
    }

    /// `struct sock_filter` after `struct sock_filter`, in the machine's byte order.
    fn bytes(program: &seccompiler::BpfProgram) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(program.len() * 8);
        for op in program {
            bytes.extend_from_slice(&op.code.to_ne_bytes());
            bytes.push(op.jt);
            bytes.push(op.jf);
            bytes.extend_from_slice(&op.k.to_ne_bytes());
        }
        bytes
    }

    /// The memfd a warm child reads the program from (at offset 0).
    pub(crate) fn memfd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.memfd.as_fd()
    }

    /// Install the filter in the calling thread. Needs `no_new_privs`. Only a system
    /// call on memory prepared before the fork (async-signal-safe).
    pub(super) fn install(&self) -> std::io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at the program, valid for the call (the kernel copies it).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}
