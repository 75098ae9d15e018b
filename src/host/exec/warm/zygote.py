# The warm zygote: runs under the target's interpreter (with the flags of the `conda`
# entry script's #! line), imports conda's CLI modules once, then forks one child per
# call. It talks only over the socket inherited as file descriptor 3; it never opens a
# path of its own.
#
# argv: -c <this script> <entry script> <sys.path[0] of a cold run>
#
# Requests (ccm -> zygote), each a 4-byte big-endian length and a payload of
# NUL-separated fields, the call's file descriptors attached to the first byte:
#   run, cwd, ns ("none", or the comma-separated kinds of the sandbox's descriptors in
#   their order: [user,]mnt,ipc[,landlock][,seccomp]), memory limit (or ""), file-size limit (or
#   ""), argument count, arguments..., environment entries (NAME=VALUE)...
#   descriptors: stdin, stdout, stderr, the sandbox's (user, mount and IPC namespaces,
#   the Landlock ruleset, the memfd of the seccomp program), cgroup.procs...
# Answers (zygote -> ccm), one line each: "ready PRELOADED REFUSED", "pid N", "stale"
# (a module file changed since import: replace the zygote), "exit CODE" / "signal N",
# "error WORDS". After "exit"/"signal" the zygote waits for "reap" (the child stays a
# zombie until ccm's sweep is over, so its pid and process group cannot be reused).
import sys

ENTRY = sys.argv[1]
# A cold run's sys.path[0] is the entry script's directory; `-c` put "" (the working
# directory) there instead. Replaced before anything else is imported. Under
# PYTHONSAFEPATH (every child's environment, Python >= 3.11) neither run has either.
if not getattr(sys.flags, "safe_path", False):
    sys.path[0] = sys.argv[2]

import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402

SOCK = socket.socket(fileno=3)
# The interpreter and its flags as a cold run's sys.orig_argv starts (`python [flag]`).
ORIG_ARGV = getattr(sys, "orig_argv", None)
INTERPRETER_ARGV = ORIG_ARGV[: ORIG_ARGV.index("-c")] if ORIG_ARGV and "-c" in ORIG_ARGV else None
IMPORT_ENV = dict(os.environ)

import ctypes  # noqa: E402

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
# Nothing may read or write this process's memory: its children inherit the flag.
LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)

# conda's CLI modules: importing them reads no per-call state (no argv, no context
# initialisation, no plugin hooks). conda/__init__ sets CONDA_ROOT when unset; that is
# replayed on each call's own environment.
import conda.cli.main  # noqa: E402,F401

for name in (
    "conda.base.context",
    "conda.cli.conda_argparse",
    "conda.exception_handler",
    "conda.gateways.logging",
    "conda.plugins.manager",
    "conda.core.prefix_data",
    "conda.core.index",
    "conda.cli.main_list",
    "conda.cli.main_info",
    "conda.cli.main_search",
    "conda.cli.main_env_list",
    "conda.cli.main_config",
):
    try:
        __import__(name)
    except ImportError:
        pass

CONDA_ROOT_SET = "CONDA_ROOT" not in IMPORT_ENV and "CONDA_ROOT" in os.environ
# What the zygote's code came from, as it was when loaded: path -> (device, inode, size,
# modification and change time); mapped libraries: path -> (device, inode) of the mapping.
WATCHED = {}
MAPPED = {}
SEEN_MODULES = set()


def signature(path):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def signature_or_none(path):
    try:
        return signature(path)
    except OSError:
        return None


def watch(path):
    """Record `path` as it is now (also when missing: it must stay missing)."""
    if path not in WATCHED:
        WATCHED[path] = signature_or_none(path)


def watch_new_modules():
    """Record the files of modules imported since the last call (right after import)."""
    import types

    for name, module in list(sys.modules.items()):
        if name not in SEEN_MODULES:
            SEEN_MODULES.add(name)
            # Through the dict: an attribute lookup could run a lazy module's code.
            try:
                namespace = types.ModuleType.__getattribute__(module, "__dict__")
            except TypeError:
                continue
            path = namespace.get("__file__")
            if isinstance(path, str) and path not in WATCHED:
                signature_now = signature_or_none(path)
                if signature_now is not None:
                    WATCHED[path] = signature_now


def watch_paths():
    """The directories and archives on sys.path: a module installed there later (an
    optional dependency a module fell back without) changes them."""
    for entry in sys.path:
        if entry:
            watch(entry)


def watch_mappings():
    """Shared libraries mapped by extension modules (libssl, libsqlite3...): a replaced
    file is a different inode than the one mapped."""
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/") or fields[4] == "0":
            continue
        path = fields[5]
        major, _, minor = fields[3].partition(":")
        mapped = (os.makedev(int(major, 16), int(minor, 16)), int(fields[4]))
        try:
            st = os.stat(path)
        except OSError:
            continue
        # Only a file still at its path (not a deleted one, a memfd or a device).
        if (st.st_dev, st.st_ino) == mapped:
            MAPPED[path] = mapped


def stale():
    """Whether any file the zygote's code came from changed since it was loaded (an
    update from outside that the target's stamp does not cover, e.g. a plugin's
    dependency or a library)."""
    for path, seen in WATCHED.items():
        if signature_or_none(path) != seen:
            return True
    for path, (device, inode) in MAPPED.items():
        try:
            st = os.stat(path)
        except OSError:
            return True
        if (st.st_dev, st.st_ino) != (device, inode):
            return True
    return False

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
    return LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(argument), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))


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
        if LIBC.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(held["landlock"]),
                        ctypes.c_uint(0)) != 0:
            fail("landlock")
    if "seccomp" in held:
        install_filter(held["seccomp"])


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
    return LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(argument), ctypes.c_void_p(pointer),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))


def set_limit(resource_id, value):
    if value:
        import resource

        n = int(value)
        resource.setrlimit(resource_id, (n, n))


def child(fields, fds):
    cwd, ns, memory, file_size, argc = fields[1:6]
    argc = int(argc)
    argv = fields[6 : 6 + argc]
    env = fields[6 + argc :]
    stdio, rest = fds[:3], fds[3:]
    kinds = [] if ns == b"none" else ns.decode().split(",")
    held, rest = dict(zip(kinds, rest)), rest[len(kinds):]
    SOCK.close()
    # As a cold child: standard streams first (a failure below is reported on them).
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    os.setpgid(0, 0)
    for fd in rest:
        # "0" moves the writing process into the execution's cgroup.
        try:
            os.write(fd, b"0")
        except OSError:
            pass
        os.close(fd)
    import resource

    set_limit(resource.RLIMIT_AS, memory)
    set_limit(resource.RLIMIT_FSIZE, file_size)
    if held:
        enter_sandbox(held)
    os.closerange(3, open_max())
    os.environ.clear()
    for entry in env:
        name, _, value = entry.partition(b"=")
        os.environb[name] = value
    if CONDA_ROOT_SET and b"CONDA_ROOT" not in os.environb:
        os.environ["CONDA_ROOT"] = sys.prefix
    try:
        os.chdir(cwd)
    except OSError as error:
        os.write(2, b"ccm warm: cannot enter the working directory: " + os.strerror(error.errno).encode() + b"\n")
        os._exit(126)
    reset_process_state()
    # In place: a module that bound the list (`from sys import argv`) sees the call's.
    sys.argv[:] = [ENTRY] + [os.fsdecode(a) for a in argv]
    if INTERPRETER_ARGV is not None:
        sys.orig_argv[:] = INTERPRETER_ARGV + sys.argv
    os._exit(run_main())


def open_max():
    """One past the highest descriptor this process may hold."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard > 1 << 30:
        return 1 << 30
    return max(hard, 1 << 16)


def reset_process_state():
    """What a fresh interpreter computes from the environment or the working directory
    on first use, and the zygote may already have computed."""
    import tempfile

    tempfile.tempdir = None
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        mp.ORIGINAL_DIR = os.path.abspath(os.getcwd())


def exit_status(code):
    """Python's handling of SystemExit at the top level."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def run_main():
    try:
        from conda.cli import main

        sys.exit(main())
    except SystemExit as done:
        status = exit_status(done.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    import threading
    import atexit

    try:
        threading._shutdown()
    except Exception:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120
    return status


def recv_request():
    """One request: its fields and descriptors; None at end of file (ccm is gone)."""
    fds = []
    head = b""
    while len(head) < 4:
        data, anc, _flags, _addr = SOCK.recvmsg(4 - len(head), socket.CMSG_SPACE(64 * 4))
        if not data:
            return None
        head += data
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds.extend(struct.unpack("%di" % (usable // 4), payload[:usable]))
    (length,) = struct.unpack(">I", head)
    body = bytearray()
    while len(body) < length:
        data = SOCK.recv(min(1 << 20, length - len(body)))
        if not data:
            return None
        body += data
    return bytes(body).split(b"\0"), fds


def children():
    """The zygote's children: the call's child and whatever earlier warm calls left
    behind (reparented here, the zygote being a child subreaper)."""
    pids = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/children" % task) as listing:
                pids.update(int(p) for p in listing.read().split())
        return pids
    except (OSError, ValueError):
        pass
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    fields = stat.read().rpartition(")")[2].split()
                if int(fields[1]) == me:
                    pids.add(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return pids


def end_orphans(call):
    """SIGKILL and reap every child but `call` until none is left: processes the call
    forked that left its process group (a fork that never execs carries no marker the
    server could find). Each is unreaped until killed, so its pid cannot be reused. One
    that cannot be signalled (it changed its user) or does not die within a second is
    left for the next time, never waited for."""
    import time

    spared = set()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        orphans = children() - {call} - spared
        if not orphans:
            return
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except PermissionError:
                spared.add(pid)
            except OSError:
                pass
        for pid in orphans - spared:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    time.sleep(0.001)
            except OSError:
                pass


def wait_reap(pid):
    # Exactly "reap\n": what follows is the next request (its descriptors attached).
    line = b""
    while len(line) < 5:
        data = SOCK.recv(5 - len(line))
        if not data:
            break
        line += data
    end_orphans(pid)
    os.waitpid(pid, 0)


def serve():
    SOCK.sendall(b"ready %d %d\n" % (PRELOADED, REFUSED))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    while True:
        request = recv_request()
        if request is None:
            # The server is gone: so is everything of the warm path.
            end_orphans(None)
            os._exit(0)
        fields, fds = request
        if not fields or fields[0] != b"run" or len(fds) < 3:
            SOCK.sendall(b"error malformed request\n")
            for fd in fds:
                os.close(fd)
            continue
        if stale():
            SOCK.sendall(b"stale\n")
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                child(fields, fds)
            finally:
                os._exit(127)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        SOCK.sendall(b"pid %d\n" % pid)
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        if info.si_code == os.CLD_EXITED:
            SOCK.sendall(b"exit %d\n" % info.si_status)
        else:
            SOCK.sendall(b"signal %d\n" % info.si_status)
        wait_reap(pid)


# Orphans (of the survey, then of warm calls) are reparented here, not to the server, so
# end_orphans finds them.
LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
watch_new_modules()
watch_paths()
PRELOADED, REFUSED = preload()
end_orphans(None)
watch_mappings()
serve()
