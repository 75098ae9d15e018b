# Part of the zygote (see start.py), the last one: the zygote's start (conda's CLI imported,
# its sources recorded, the preloading), the serving loop (one request, one child, its exit
# status, the reap) and the end of whatever a call left behind.
import os
import signal
import socket
import sys

if False:  # Names from the other parts of this program (one namespace; see start.py).
    from child import child
    from contain import LIBC, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE
    from preload import preload
    from sources import Sources
    from wire import recv_reap, recv_request

# conda's CLI modules: importing them reads no per-call state (no argv, no context
# initialisation, no plugin hooks). conda/__init__ sets CONDA_ROOT when unset; that is
# replayed on each call's own environment.
CONDA_MODULES = (
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
)


class Zygote:
    """What the serving loop and each call's child need: the socket to ccm, the entry
    script, the interpreter's own argv (as a cold run's sys.orig_argv starts), whether
    importing conda set CONDA_ROOT, the sources to watch and the preloading's counts."""

    def __init__(self, sock, entry, interpreter_argv, conda_root_set, sources):
        self.sock = sock
        self.entry = entry
        self.interpreter_argv = interpreter_argv
        self.conda_root_set = conda_root_set
        self.sources = sources
        self.preloaded = self.refused = 0


def children():
    """The zygote's children: the call's child and whatever earlier warm calls left
    behind (reparented here, the zygote being a child subreaper)."""
    pids = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as listing:
                pids.update(int(p) for p in listing.read().split())
        return pids
    except (OSError, ValueError):
        pass
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
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


def serve(zygote):
    """Answer "ready", then one request at a time until ccm closes the socket."""
    sock = zygote.sock
    sock.sendall(b"ready %d %d\n" % (zygote.preloaded, zygote.refused))
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    while True:
        request = recv_request(sock)
        if request is None:
            # The server is gone: so is everything of the warm path.
            end_orphans(None)
            os._exit(0)
        fields, fds = request
        if not fields or fields[0] != b"run" or len(fds) < 3:
            sock.sendall(b"error malformed request\n")
            for fd in fds:
                os.close(fd)
            continue
        if zygote.sources.stale():
            sock.sendall(b"stale\n")
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                child(zygote, fields, fds)
            finally:
                os._exit(127)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        sock.sendall(b"pid %d\n" % pid)
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        if info.si_code == os.CLD_EXITED:
            sock.sendall(b"exit %d\n" % info.si_status)
        else:
            sock.sendall(b"signal %d\n" % info.si_status)
        recv_reap(sock)
        end_orphans(pid)
        os.waitpid(pid, 0)


def main():
    """Start: conda's CLI imported, the sources recorded, the preloading; then serve."""
    sock = socket.socket(fileno=3)
    # The interpreter and its flags as a cold run's sys.orig_argv starts (`python [flag]`).
    orig_argv = getattr(sys, "orig_argv", None)
    interpreter_argv = (
        orig_argv[: orig_argv.index("-c")] if orig_argv and "-c" in orig_argv else None
    )
    import_env = dict(os.environ)
    # Nothing may read or write this process's memory: its children inherit the flag.
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    import conda.cli.main  # noqa: F401

    for name in CONDA_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass
    conda_root_set = "CONDA_ROOT" not in import_env and "CONDA_ROOT" in os.environ
    zygote = Zygote(sock, sys.argv[1], interpreter_argv, conda_root_set, Sources())
    # Orphans (of the survey, then of warm calls) are reparented here, not to the server,
    # so end_orphans finds them.
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    zygote.sources.watch_new_modules()
    zygote.sources.watch_paths()
    zygote.preloaded, zygote.refused = preload(zygote.entry, zygote.sources.watch_new_modules)
    end_orphans(None)
    zygote.sources.watch_mappings()
    serve(zygote)


if __name__ == "__main__":
    main()
