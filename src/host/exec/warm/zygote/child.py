# Part of the zygote (see start.py): one call's child, forked from the zygote. It reads its
# request, becomes what a cold child of the same call would be (standard streams, process
# group, cgroup, limits, sandbox, descriptors, environment, working directory, argv), then
# runs conda's main and exits as the interpreter would.
import os
import sys

if False:  # Names from the other parts of this program (one namespace; see start.py).
    from contain import enter_sandbox, open_max, set_limit


class Request:
    """A "run" request: its fields (after "run": cwd, ns, memory limit, file-size limit,
    argument count, arguments, environment entries) and descriptors (stdin, stdout, stderr,
    the sandbox's descriptors of the kinds ns lists in their order -- "none", or
    [user,]mnt,ipc[,landlock][,seccomp] -- then cgroup.procs files). Raises on a request
    with too few fields or descriptors."""

    def __init__(self, fields, fds):
        self.cwd, ns, self.memory, self.file_size, argc = fields[1:6]
        argc = int(argc)
        self.argv = fields[6 : 6 + argc]
        self.env = fields[6 + argc :]
        self.stdio, rest = fds[:3], fds[3:]
        kinds = [] if ns == b"none" else ns.decode().split(",")
        if len(rest) < len(kinds):
            raise ValueError("too few descriptors for the sandbox")
        self.held, rest = dict(zip(kinds, rest)), rest[len(kinds) :]
        self.cgroup_procs = rest


def child(zygote, fields, fds):
    """The forked child of one request (never returns)."""
    request = Request(fields, fds)
    zygote.sock.close()
    # As a cold child: standard streams first (a failure below is reported on them).
    for target, fd in enumerate(request.stdio):
        os.dup2(fd, target)
    os.setpgid(0, 0)
    for fd in request.cgroup_procs:
        # "0" moves the writing process into the execution's cgroup.
        try:
            os.write(fd, b"0")
        except OSError:
            pass
        os.close(fd)
    import resource

    set_limit(resource.RLIMIT_AS, request.memory)
    set_limit(resource.RLIMIT_FSIZE, request.file_size)
    if request.held:
        enter_sandbox(request.held)
    os.closerange(3, open_max())
    os.environ.clear()
    for entry in request.env:
        name, _, value = entry.partition(b"=")
        os.environb[name] = value
    if zygote.conda_root_set and b"CONDA_ROOT" not in os.environb:
        os.environ["CONDA_ROOT"] = sys.prefix
    try:
        os.chdir(request.cwd)
    except OSError as error:
        why = os.strerror(error.errno).encode()
        os.write(2, b"ccm warm: cannot enter the working directory: " + why + b"\n")
        os._exit(126)
    reset_process_state()
    # In place: a module that bound the list (`from sys import argv`) sees the call's.
    sys.argv[:] = [zygote.entry] + [os.fsdecode(a) for a in request.argv]
    if zygote.interpreter_argv is not None:
        sys.orig_argv[:] = zygote.interpreter_argv + sys.argv
    os._exit(run_main())


def reset_process_state():
    """What a fresh interpreter computes from the environment or the working directory
    on first use, and the zygote may already have computed."""
    import tempfile

    tempfile.tempdir = None
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        mp.ORIGINAL_DIR = os.path.abspath(os.getcwd())


def entry_line(entry):
    """The entry script's `sys.exit(main())`, compiled under the script's name, at its
    line and column: a traceback through it reads as one through the script itself
    (`File ".../bin/conda", line 13, in <module>`). None when the script has no such line."""
    try:
        with open(entry, encoding="utf-8") as script:
            lines = script.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for number, text in enumerate(lines, 1):
        if text.strip() != "sys.exit(main())":
            continue
        indented = text != text.lstrip()
        if indented and number < 2:
            return None
        source = "\n" * (number - 2) + "if 1:\n" + text if indented else "\n" * (number - 1) + text
        try:
            return compile(source + "\n", entry, "exec")
        except SyntaxError:
            return None
    return None


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
    """conda's main, then what the interpreter does at exit; the exit status. main is
    called from the entry script's own line (`entry_line`), and an exception that escapes
    it is shown from that frame on: the traceback a cold run's interpreter prints."""
    try:
        from conda.cli import main

        line = entry_line(sys.argv[0])
        if line is None:
            sys.exit(main())
        exec(line, {"__name__": "__main__", "sys": sys, "main": main})
    except SystemExit as done:
        status = exit_status(done.code)
    except BaseException:
        kind, value, trace = sys.exc_info()
        if trace is not None and value is not None:
            # (the interpreter's hook prints the exception's own traceback)
            trace = trace.tb_next
            value.__traceback__ = trace
        sys.excepthook(kind, value, trace)
        status = 1
    import atexit
    import threading

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
