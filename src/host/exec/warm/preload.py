# Preloading (part of the zygote's script, run before it serves): the modules a call
# imports while conda builds its parser -- the plugins' and their dependencies among
# them -- imported once in the zygote, but only those whose import is seen to read no
# per-call state.
#
# 1. A survey child runs conda's main for `list --help` (the whole parser is built, no
#    command runs) and reports the modules it started loading with nothing else loading
#    ("roots"), in order.
# 2. A second child imports those roots in the same order with every per-call input
#    watched: os.environ (any access), the working directory, sys.argv, conda's context
#    object, opening or listing a path outside the interpreter's prefixes and sys.path,
#    starting a process, a socket or a thread. A read is charged to the module whose body
#    is running; a module is refused when it read, failed, or imports (directly or
#    through any module it imports) a refused module. The rest are reported in load
#    order.
# 3. The zygote imports them. Neither child's state reaches the zygote: both are forked
#    from it, report over a pipe and exit.
import os as _os
import sys as _sys

SURVEY_ARGS = ["list", "--help"]
SURVEY_SECONDS = 60


def _in_child(body):
    """Run `body` in a forked child; its result (a list of names) comes back over a pipe.
    Empty when the child fails or takes too long."""
    read, write = _os.pipe()
    pid = _os.fork()
    if pid == 0:
        _os.close(read)
        status = 1
        try:
            import signal

            signal.alarm(SURVEY_SECONDS)
            null = _os.open("/dev/null", _os.O_RDWR)
            _os.dup2(null, 0)
            _os.dup2(null, 1)
            names = body()
            data = "\n".join(names).encode()
            while data:
                data = data[_os.write(write, data) :]
            status = 0
        except BaseException:
            pass
        _os._exit(status)
    _os.close(write)
    chunks = []
    while True:
        chunk = _os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    _os.close(read)
    _, status = _os.waitpid(pid, 0)
    if status != 0:
        return []
    return [n for n in b"".join(chunks).decode().split("\n") if n]


def _roots():
    """Child 1: the modules conda's parser build loads from the top, in order."""
    import importlib._bootstrap as bootstrap

    stack, roots = [], []
    load = bootstrap._load_unlocked

    def watched_load(spec):
        if not stack:
            roots.append(spec.name)
        stack.append(spec.name)
        try:
            return load(spec)
        finally:
            stack.pop()

    bootstrap._load_unlocked = watched_load
    _sys.argv = [ENTRY] + SURVEY_ARGS
    try:
        from conda.cli import main

        main()
    except BaseException:
        pass
    bootstrap._load_unlocked = load
    return roots


def _clean(roots):
    """Child 2: import `roots` with every per-call input watched; the modules whose
    import read none of them, in load order."""
    import builtins
    import importlib
    import importlib._bootstrap as bootstrap
    import threading

    stack, tainted, edges = [], {}, []
    before = set(_sys.modules)

    def taint(why):
        if stack:
            tainted.setdefault(stack[-1], why)

    load = bootstrap._load_unlocked

    def watched_load(spec):
        if stack:
            edges.append((stack[-1], spec.name))
        stack.append(spec.name)
        try:
            return load(spec)
        finally:
            stack.pop()

    real_import = builtins.__import__

    def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if stack:
            try:
                if level:
                    package = bootstrap._calc___package__(globals or {})
                    name = bootstrap._resolve_name(name, package, level)
                edges.append((stack[-1], name))
                for item in fromlist or ():
                    if name + "." + str(item) in _sys.modules:
                        edges.append((stack[-1], name + "." + str(item)))
            except Exception:
                taint("an import it could not be followed through")
        return module

    real_gcd = bootstrap._gcd_import

    def watched_gcd(name, package=None, level=0):
        module = real_gcd(name, package, level)
        if stack:
            edges.append((stack[-1], module.__name__))
        return module

    def wrap(owner, attribute):
        real = getattr(owner, attribute, None)
        if real is None:
            return

        def watched(*args, **kwargs):
            taint(getattr(owner, "__name__", "?") + "." + attribute)
            return real(*args, **kwargs)

        setattr(owner, attribute, watched)

    for attribute in ("__getitem__", "__iter__", "__len__", "__setitem__", "__delitem__",
                      "__repr__", "copy", "setdefault", "__or__", "__ror__", "__ior__"):
        wrap(_os._Environ, attribute)
    for attribute in ("getcwd", "getcwdb", "chdir"):
        wrap(_os, attribute)

    class WatchedArgv(list):
        pass

    for attribute in ("__getitem__", "__iter__", "__len__", "__contains__", "__reversed__",
                      "index", "count", "copy", "__eq__", "__repr__"):
        wrap(WatchedArgv, attribute)
    _sys.argv = WatchedArgv(_sys.argv)

    conda_context = _sys.modules.get("conda.base.context")
    context = getattr(conda_context, "context", None)
    if context is not None:
        kind = type(context)

        class WatchedContext(kind):
            def __getattribute__(self, name):
                taint("conda's context")
                return kind.__getattribute__(self, name)

        try:
            context.__class__ = WatchedContext
        except TypeError:
            return []

    allowed = set()
    for base in [_sys.prefix, _sys.base_prefix, _sys.exec_prefix] + list(_sys.path):
        if base:
            allowed.add(_os.path.realpath(base).rstrip("/") + "/")

    def inside(path):
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = path.decode("utf-8", "surrogateescape")
        if not isinstance(path, str) or not path.startswith("/"):
            return False
        path = _os.path.normpath(path) + "/"
        return any(path.startswith(base) for base in allowed)

    def audit(event, args):
        if not stack:
            return
        if event in ("open", "os.listdir", "os.scandir"):
            if args and not inside(args[0]):
                taint(event + " outside the prefix")
        elif event.startswith(("subprocess.", "os.exec", "os.posix_spawn", "os.spawn",
                               "os.system", "os.fork", "os.kill", "os.chdir",
                               "socket.", "_thread.", "os.putenv", "os.unsetenv")):
            taint(event)

    _sys.addaudithook(audit)
    bootstrap._load_unlocked = watched_load
    bootstrap._gcd_import = watched_gcd
    builtins.__import__ = watched_import

    threads = threading.active_count()
    failed = {}
    for root in roots:
        if root in _sys.modules:
            continue
        stack.append(root)
        try:
            importlib.import_module(root)
        except BaseException:
            failed[root] = "its import failed"
        finally:
            stack.pop()
        if threading.active_count() != threads:
            failed[root] = "a thread was started"
            threads = threading.active_count()

    builtins.__import__ = real_import
    bootstrap._gcd_import = real_gcd
    bootstrap._load_unlocked = load
    loaded = [name for name in list(_sys.modules) if name not in before]
    refused = dict(tainted)
    refused.update(failed)
    importers = {}
    for importer, imported in edges:
        importers.setdefault(imported, set()).add(importer)
    for name in loaded:
        if "." in name:
            importers.setdefault(name.rpartition(".")[0], set()).add(name)
    pending = list(refused)
    while pending:
        name = pending.pop()
        for importer in importers.get(name, ()):
            if importer not in refused:
                refused[importer] = "imports " + name
                pending.append(importer)
    for name in sorted(refused):
        _sys.stderr.write("ccm warm: not preloaded: %s (%s)\n" % (name, refused[name]))
    return [name for name in loaded if name not in refused] + ["-%d" % len(refused)]


def preload():
    """Import what the survey admits; (imported, refused) counts."""
    import importlib

    roots = _in_child(_roots)
    admitted = _in_child(lambda: _clean(roots)) if roots else []
    refused = 0
    if admitted and admitted[-1].startswith("-"):
        refused = int(admitted.pop()[1:])
    imported = 0
    for name in admitted:
        if name in _sys.modules:
            continue
        try:
            importlib.import_module(name)
            imported += 1
        except BaseException:
            refused += 1
    return imported, refused
