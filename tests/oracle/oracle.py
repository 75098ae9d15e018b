"""The policy oracle: run argv through conda's real entry point and report what it did.

Test-only. Runs under the target conda's own interpreter (``python -I -B oracle.py``) in
one long-lived process that reads requests from standard input, one JSON object a line,
and answers each on its private copy of standard output, one JSON object a line:

    {"allowed": [DIR, ...], "internal_programs": [[PROGRAM, ARG, ...], ...],
     "probes": [{"file": SUFFIX, "functions": [NAME, ...]}, ...],
     "contained": [{"file": SUFFIX, "functions": [NAME, ...]}, ...], "budget": SECONDS}
                                                   first line: the configuration
    {"argv": [TOKEN, ...]}                         then one request per argv

For each argv the harness calls ``conda.cli.main.main_subshell`` (the code path of
``conda ARGV``: pre-parser, the full parser with plugins, ``do_call``) with a Python audit
hook armed. The hook sees every file open, directory and link operation, rename, removal,
permission change, copy, SQLite connection and temporary file (``open``, ``os.*``,
``shutil.*``, ``sqlite3.connect``, ``tempfile.*`` audit events) and every process start
(``subprocess.Popen``, ``os.exec``, ``os.posix_spawn``, ``os.spawn``, ``os.system``,
``os.fork``, ``os.forkpty``). A write below one of the ``allowed`` directories (the caches
conda may update on reads, and the private temporary directory) happens and is recorded;
the first other write or any process start raises a private ``BaseException`` so it never
happens and conda's own handlers cannot swallow it. Programs matching
``internal_programs`` (a program name or path, then the leading arguments: platform probes
conda runs for itself) are reported missing (``FileNotFoundError``) instead, and noted in
``internal_execs``. Writes made inside a ``probes`` function (conda's writability probes
and housekeeping that gives up on an OSError) are refused with EROFS, as the read-only
sandbox refuses them, and noted in ``probes``. Writes made inside a ``contained`` function
(housekeeping that deletes, such as conda's emptying of a target's trash, which also gives
up on an OSError) are refused the same way and noted in ``contained``: only the read-only
sandbox keeps them from having effect, so the caller judges them apart. Network access is
refused with an
``OSError`` (conda runs offline) and noted.

Each answer says ``outcome``: ``write`` (with ``path`` and ``event``), ``exec`` (with
``target``: the program and its arguments), ``none`` (conda finished, or failed, without
either), ``parse-error`` (conda's parser refused the argv or printed help), ``timeout``
(the per-argv budget ran out) or ``error`` (the harness could not run it). ``parsed`` says
whether conda's main parser accepted the argv; ``allowed_writes`` lists the permitted
writes seen. When an argv changed state the process cannot reset (it disabled plugins),
the harness answers and exits; the caller starts a new one for the rest.
"""

import errno
import json
import os
import signal
import sys
import threading

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_HARMLESS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}


class _Stop(BaseException):
    """The first forbidden effect of an argv: unwinds conda without being caught."""


class _Timeout(BaseException):
    pass


class _State:
    def __init__(self):
        self.armed = False
        self.first = None  # the first forbidden effect, as an answer fragment
        self.allowed_writes = []
        self.network = False
        self.parsed = False
        self.allowed = []
        self.internal = []
        self.internal_runs = []
        self.probes = []
        self.probe_writes = []
        self.contained = []
        self.contained_writes = []
        self.local = threading.local()


STATE = _State()


def _path(value):
    if isinstance(value, int):
        try:
            return os.readlink(f"/proc/self/fd/{value}")
        except OSError:
            return f"<fd {value}>"
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    try:
        return os.path.realpath(os.path.abspath(os.fspath(value)))
    except Exception:
        return str(value)


def _inside(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _harmless(path):
    # Devices that discard or print, and fds that are pipes or sockets, not files.
    return path in _HARMLESS or path.startswith(("pipe:", "socket:", "anon_inode:"))


def _permitted(path):
    if _harmless(path):
        return True
    for root in STATE.allowed:
        if _inside(path, root):
            return True
    return False


def _creates_ancestor(event, path):
    """``mkdir`` of a directory on the way to an allowed one (``makedirs``)."""
    return event == "os.mkdir" and any(_inside(root, path) for root in STATE.allowed)


def _write(event, *paths):
    resolved = [_path(p) for p in paths]
    if all(_permitted(p) or _creates_ancestor(event, p) for p in resolved):
        if len(STATE.allowed_writes) < 20 and not all(_harmless(p) for p in resolved):
            STATE.allowed_writes.append([event] + resolved)
        return
    bad = next(p for p in resolved if not (_permitted(p) or _creates_ancestor(event, p)))
    _probe(event, bad)
    _contain(event, bad)
    _forbid({"outcome": "write", "event": event, "path": bad})


def _exec(event, program, argv):
    """A process start: ``program`` runs with ``argv`` (``argv[0]`` included)."""
    if _internal(program, argv):
        # A program conda runs for itself (platform probes), not one the caller chose:
        # it is reported missing, as on a system without it, and conda goes on.
        if len(STATE.internal_runs) < 20:
            STATE.internal_runs.append(argv)
        raise FileNotFoundError(2, "not run by the policy oracle", program)
    _forbid({"outcome": "exec", "event": event, "program": program, "target": argv})


def _internal(program, argv):
    for pattern in STATE.internal:
        head, rest = pattern[0], pattern[1:]
        if head in (program, os.path.basename(program)) and argv[1 : 1 + len(rest)] == rest:
            return True
    return False


def _probe(event, path):
    """A write conda makes only to learn whether a directory is writable, or as
    housekeeping, inside a function that treats an OSError as "no" or "skip": refused with
    EROFS, as the read-only sandbox refuses it, and noted."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        for suffix, names in STATE.probes:
            if code.co_name in names and code.co_filename.endswith(suffix):
                if len(STATE.probe_writes) < 20:
                    STATE.probe_writes.append([event, path, code.co_name])
                raise OSError(errno.EROFS, "read-only file system (policy oracle)", path)
        frame = frame.f_back


def _contain(event, path):
    """A write inside a ``contained`` function (housekeeping that deletes and gives up on
    an OSError): refused with EROFS, as the read-only sandbox refuses it, and noted apart
    from the probes — without the sandbox it would take effect."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        for suffix, names in STATE.contained:
            if code.co_name in names and code.co_filename.endswith(suffix):
                if len(STATE.contained_writes) < 20:
                    STATE.contained_writes.append([event, path, code.co_name])
                raise OSError(errno.EROFS, "read-only file system (policy oracle)", path)
        frame = frame.f_back


def _forbid(fragment):
    if STATE.first is None:
        fragment["where"] = _where()
        STATE.first = fragment
    raise _Stop()


def _where():
    """The innermost frames of the code that caused the effect (site-packages relative)."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < 4:
        name = frame.f_code.co_filename
        if name != __file__ and "site-packages/" in name:
            short = name.split("site-packages/", 1)[1]
            frames.append(f"{short}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return frames


def _argv_list(args):
    if args is None:
        return []
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    try:
        return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]
    except TypeError:
        return [str(args)]


def _hook(event, args):
    if not STATE.armed or getattr(STATE.local, "busy", False):
        return
    STATE.local.busy = True
    try:
        _judge(event, args)
    finally:
        STATE.local.busy = False


def _judge(event, args):
    if event == "open":
        path, _mode, flags = args
        if flags & _WRITE_FLAGS:
            _write(event, path)
    elif event in (
        "os.mkdir",
        "os.remove",
        "os.rmdir",
        "os.chmod",
        "os.chown",
        "os.chflags",
        "os.utime",
        "os.truncate",
        "os.setxattr",
        "os.removexattr",
        "shutil.rmtree",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
    ):
        _write(event, args[0])
    elif event in ("os.rename", "shutil.move"):
        _write(event, args[0], args[1])
    elif event in (
        "os.symlink",
        "os.link",
        "shutil.copyfile",
        "shutil.copymode",
        "shutil.copystat",
        "shutil.copytree",
    ):
        _write(event, args[1])
    elif event == "shutil.make_archive":
        _write(event, args[0])
    elif event == "shutil.unpack_archive":
        _write(event, args[1])
    elif event == "sqlite3.connect":
        database = args[0]
        if isinstance(database, (str, bytes, os.PathLike)):
            text = os.fsdecode(database)
            if text != ":memory:" and not (text.startswith("file:") and "mode=ro" in text):
                _write(event, text.split("?", 1)[0][5:] if text.startswith("file:") else text)
    elif event == "subprocess.Popen":
        argv = _argv_list(args[1])
        program = os.fsdecode(args[0]) if args[0] else (argv[0] if argv else "")
        _exec(event, program, argv)
    elif event in ("os.exec", "os.posix_spawn"):
        _exec(event, os.fsdecode(args[0]), _argv_list(args[1]))
    elif event == "os.spawn":
        _exec(event, os.fsdecode(args[1]), _argv_list(args[2]))
    elif event == "os.system":
        _exec(event, "/bin/sh", ["/bin/sh", "-c", os.fsdecode(args[0])])
    elif event in ("os.fork", "os.forkpty", "os.startfile"):
        _exec(event, event, [])
    elif event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        STATE.network = True
        raise OSError("network access is disabled in the policy oracle")


def _guard(name):
    """os functions without an audit event that create files."""
    original = getattr(os, name, None)
    if original is None:
        return

    def guarded(path, *args, **kwargs):
        if STATE.armed:
            _write("os." + name, path)
        return original(path, *args, **kwargs)

    setattr(os, name, guarded)


class _Probe:
    """An existing file opened for appending, which conda does to probe writability
    (``context.root_writable``, ``file_path_is_writable``): opened for reading instead, so
    the probe succeeds as it would; the first write through it is the forbidden effect."""

    def __init__(self, handle, path):
        self._handle = handle
        self._path = path

    def _refuse(self, *_args, **_kwargs):
        STATE.local.busy = False
        _write("open+write", self._path)

    write = writelines = truncate = _refuse

    def writable(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()
        return False

    def __iter__(self):
        return iter(self._handle)

    def __getattr__(self, name):
        return getattr(self._handle, name)


def _probing_open(original):
    def probing_open(file, mode="r", *args, **kwargs):
        if (
            STATE.armed
            and isinstance(mode, str)
            and "a" in mode
            and isinstance(file, (str, bytes, os.PathLike))
            and os.path.isfile(file)
        ):
            STATE.local.busy = True  # the read-only open below is not an effect
            try:
                handle = original(file, mode.replace("a", "r").replace("+", ""), *args, **kwargs)
            finally:
                STATE.local.busy = False
            return _Probe(handle, file)
        return original(file, mode, *args, **kwargs)

    return probing_open


def _alarm(_signum, _frame):
    if STATE.armed:
        raise _Timeout()


def _plugin_names():
    from conda.base.context import context

    try:
        return sorted(str(n) for n, _ in context.plugin_manager.list_name_plugin())
    except Exception:
        return []


def _install_parser_cache():
    """conda builds its parsers for every call; build them once (they are not changed by
    parsing) unless plugins are disabled, and note whether the main parse succeeded."""
    from conda.base.context import context
    from conda.cli import conda_argparse

    real_generate = conda_argparse.generate_parser
    real_pre = conda_argparse.generate_pre_parser
    cache = {}

    def generate_pre_parser(**kwargs):
        key = ("pre", tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = real_pre(**kwargs)
        return cache[key]

    def fresh(**kwargs):
        # generate_parser extends the pre-parser it makes: give it an uncached one.
        conda_argparse.generate_pre_parser = real_pre
        try:
            return real_generate(**kwargs)
        finally:
            conda_argparse.generate_pre_parser = generate_pre_parser

    def generate_parser(**kwargs):
        if context.no_plugins:
            parser = fresh(**kwargs)
        else:
            key = ("main", tuple(sorted(kwargs.items())))
            if key not in cache:
                cache[key] = fresh(**kwargs)
            parser = cache[key]
        return _Noting(parser)

    conda_argparse.generate_parser = generate_parser
    conda_argparse.generate_pre_parser = generate_pre_parser


class _Noting:
    """A view of the main parser that notes a successful parse."""

    def __init__(self, parser):
        self._parser = parser

    def parse_args(self, *args, **kwargs):
        namespace = self._parser.parse_args(*args, **kwargs)
        STATE.parsed = True
        return namespace

    def __getattr__(self, name):
        return getattr(self._parser, name)


def _reset_caches():
    try:
        from conda.core.prefix_data import PrefixData

        PrefixData._cache_.clear()
    except Exception:
        pass
    try:
        from conda.core.subdir_data import SubdirData

        SubdirData._cache_.clear()
    except Exception:
        pass


def _text(exc):
    """``str(exc)``, which conda's own errors can fail (a ``%`` in a path they format)."""
    try:
        return str(exc)
    except Exception as failed:
        return f"<str() failed: {type(failed).__name__}>"


def run_one(argv, budget):
    from conda.cli.main import main_subshell

    STATE.first = None
    STATE.allowed_writes = []
    STATE.internal_runs = []
    STATE.probe_writes = []
    STATE.contained_writes = []
    STATE.network = False
    STATE.parsed = False
    environ = dict(os.environ)
    cwd = os.getcwd()
    answer = {}
    exit_code = None
    exception = None
    signal.setitimer(signal.ITIMER_REAL, budget)
    STATE.armed = True
    try:
        exit_code = main_subshell(*argv)
    except _Stop:
        pass
    except _Timeout:
        answer["outcome"] = "timeout"
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        exception = f"{type(exc).__name__}: {_text(exc)[:200]}"
    finally:
        STATE.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        while True:  # a timer that fired while disarming is ignored
            try:
                os.environ.clear()
                os.environ.update(environ)
                os.chdir(cwd)
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
                _reset_caches()
                break
            except _Timeout:
                continue
    if STATE.first is not None:
        answer.update(STATE.first)
    elif "outcome" not in answer:
        answer["outcome"] = "none" if STATE.parsed else "parse-error"
    answer["parsed"] = STATE.parsed
    answer["exit"] = exit_code if isinstance(exit_code, int) else None
    if exception:
        answer["exception"] = exception
    if STATE.allowed_writes:
        answer["allowed_writes"] = STATE.allowed_writes
    if STATE.probe_writes:
        answer["probes"] = STATE.probe_writes
    if STATE.contained_writes:
        answer["contained"] = STATE.contained_writes
    if STATE.internal_runs:
        answer["internal_execs"] = STATE.internal_runs
    if STATE.network:
        answer["network"] = True
    return answer


def main():
    sys.dont_write_bytecode = True
    requests = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2 if os.environ.get("CCM_ORACLE_VERBOSE") else null, 1)
    if not os.environ.get("CCM_ORACLE_VERBOSE"):
        os.dup2(null, 2)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.__stdout__ = os.fdopen(1, "w")
    sys.stderr = sys.__stderr__ = os.fdopen(2, "w")

    def reply(document):
        out.write(json.dumps(document, ensure_ascii=True, separators=(",", ":")).encode())
        out.write(b"\n")
        out.flush()

    config = json.loads(requests.readline())
    STATE.allowed = [os.path.realpath(p) for p in config["allowed"]]
    STATE.internal = [list(p) for p in config.get("internal_programs", [])]
    STATE.probes = [(p["file"], set(p["functions"])) for p in config.get("probes", [])]
    STATE.contained = [(p["file"], set(p["functions"])) for p in config.get("contained", [])]
    budget = float(config.get("budget", 10))
    try:
        import resource

        limit = int(config.get("memory", 3 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except Exception:
        pass
    for name in ("mkfifo", "mknod"):
        _guard(name)
    import builtins
    import io

    builtins.open = _probing_open(builtins.open)
    io.open = _probing_open(io.open)
    signal.signal(signal.SIGALRM, _alarm)
    import conda.cli.main  # noqa: F401  (imported before the hook is armed)

    _install_parser_cache()
    plugins = _plugin_names()
    sys.addaudithook(_hook)
    reply({"ready": True, "plugins": len(plugins)})
    for line in requests:
        request = json.loads(line)
        try:
            answer = run_one([str(t) for t in request["argv"]], budget)
        except BaseException as exc:  # never an answer missing
            import traceback

            answer = {
                "outcome": "error",
                "exception": type(exc).__name__,
                "traceback": traceback.format_exc()[-3000:],
            }
        reply(answer)
        if _plugin_names() != plugins:
            break  # plugins were disabled: the caller restarts the harness
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
