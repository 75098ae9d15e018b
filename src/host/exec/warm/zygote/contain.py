# Part of the zygote (see start.py): what a call's child gives up before conda runs, as a
# cold child does in its `pre_exec` hooks -- resource limits, the sandbox's namespaces
# (built by a holder process, joined here) and every privilege -- and the prctl calls of
# the zygote itself.
import ctypes
import os

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWIPC = 0x08000000
SYS_LANDLOCK_RESTRICT_SELF = 446  # the same number on every architecture
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
EINVAL = 22
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE and their locks, and
# SECBIT_KEEP_CAPS_LOCKED: the same bits as the cold path's (sandbox/enter.rs).
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def fail(where):
    err = ctypes.get_errno()
    os.write(2, b"ccm warm: " + where.encode() + b": " + os.strerror(err).encode() + b"\n")
    os._exit(126)


def prctl(option, argument):
    return LIBC.prctl(
        ctypes.c_int(option),
        ctypes.c_ulong(argument),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )


def drop_privileges():
    """What the cold path's sandbox hook does last (drop_privileges in sandbox/enter.rs):
    an empty bounding set, root not special at exec (locked), no ambient capabilities,
    no capability in any set, no_new_privs."""
    for cap in range(64):
        if prctl(PR_CAPBSET_DROP, cap) != 0:
            if ctypes.get_errno() == EINVAL:
                break
            fail("capbset")
    if prctl(PR_SET_SECUREBITS, SECURE_BITS) != 0:
        fail("securebits")
    if prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) != 0:
        fail("ambient")
    header = CapHeader(0x20080522, 0)
    data = (CapData * 2)()
    if LIBC.capset(ctypes.byref(header), data) != 0:
        fail("capset")
    if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        fail("no_new_privs")


def enter_sandbox(held):
    """Join the call's sandbox (built by a holder process): its user namespace, then the
    mount and IPC namespaces owned by it; give up what a cold child gives up before exec,
    every privilege; then take a Landlock domain of its own from the ruleset, as a cold
    child does last (sandbox/enter.rs)."""
    if "user" in held:
        if LIBC.setns(held["user"], CLONE_NEWUSER) != 0:
            fail("setns (user)")
    if LIBC.setns(held["mnt"], CLONE_NEWNS) != 0:
        fail("setns (mount)")
    if LIBC.setns(held["ipc"], CLONE_NEWIPC) != 0:
        fail("setns (ipc)")
    detach_terminal()
    drop_privileges()
    if "landlock" in held:
        restrict = ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF)
        if LIBC.syscall(restrict, ctypes.c_int(held["landlock"]), ctypes.c_uint(0)) != 0:
            fail("landlock")
    if "seccomp" in held:
        install_filter(held["seccomp"])


def detach_terminal():
    """Give up the server's controlling terminal, as a cold child does (detach_terminal
    in sandbox/dev.rs): /dev/tty then opens nothing."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return
    import fcntl
    import termios

    try:
        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except OSError:
        pass
    os.close(fd)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(fd):
    """Last, as a cold child's hook: the unix-socket filter (sandbox/seccomp.rs), whose
    program ccm built and sealed in the memfd `fd` (8 bytes per instruction)."""
    program = os.pread(fd, 65536, 0)
    if not program or len(program) % 8:
        fail("seccomp program")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if prctl_pointer(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog)) != 0:
        fail("seccomp")


def prctl_pointer(option, argument, pointer):
    return LIBC.prctl(
        ctypes.c_int(option),
        ctypes.c_ulong(argument),
        ctypes.c_void_p(pointer),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )


def set_limit(resource_id, value):
    if value:
        import resource

        n = int(value)
        resource.setrlimit(resource_id, (n, n))


def open_max():
    """One past the highest descriptor this process may hold."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 1 << 30:
        return 1 << 30
    return max(hard, 1 << 16)
