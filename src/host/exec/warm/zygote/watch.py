# Part of the zygote (see start.py): watching imports for per-call state. Runs only in a
# throwaway child of the zygote, which it changes beyond repair.
#
# Per-call state is anything a cold run of a call could see differently from the zygote:
# the environment (os.environ in any form, posix.environ), the working directory (getcwd,
# chdir, relative paths, /proc/self and /dev/fd), sys.argv and sys.orig_argv, conda's
# context object, the resource limits and the process id, what os.access says (the
# sandbox changes it), files and directories outside the interpreter's prefixes and
# sys.path, processes, sockets and threads, and seeding a random generator (every warm
# call would draw the same numbers). Also refused: code that would run in a warm
# child before its containment or outside the call (at-fork hooks, audit and trace
# hooks).
import os
import sys

# The modules the watching uses (every module a function of this part imports), loaded
# before it notes what is loaded: never candidates. Imported only in the throwaway child
# (`random`, imported in the zygote, would give every warm call the same numbers).
WATCHING_MODULES = (
    "builtins",
    "importlib",
    "importlib._bootstrap",
    "posix",
    "random",
    "resource",
    "threading",
    "types",
)
# What is watched: the methods of the environment's mappings (os.environ's `_Environ` and
# the dict in it) and of sys.argv; the calls that read the working directory, the process
# or the randomness (path calls only for a relative or own path); the random generators.
ENVIRON_METHODS = (
    "__getitem__",
    "__iter__",
    "__len__",
    "__setitem__",
    "__delitem__",
    "__repr__",
    "copy",
    "setdefault",
    "__or__",
    "__ror__",
    "__ior__",
)
DICT_METHODS = (
    "__getitem__",
    "__iter__",
    "__len__",
    "__contains__",
    "__setitem__",
    "__delitem__",
    "get",
    "keys",
    "items",
    "values",
    "copy",
    "pop",
    "setdefault",
    "update",
    "__repr__",
    "__eq__",
    "__or__",
)
LIST_METHODS = (
    "__getitem__",
    "__iter__",
    "__len__",
    "__contains__",
    "__reversed__",
    "index",
    "count",
    "copy",
    "__eq__",
    "__repr__",
)
PROCESS_CALLS = (
    "getcwd",
    "getcwdb",
    "chdir",
    "access",
    "getpid",
    "getppid",
    "fchdir",
    "getpgrp",
    "getsid",
    "ttyname",
    "urandom",
)
PATH_CALLS = (
    "stat",
    "lstat",
    "readlink",
    "listdir",
    "scandir",
    "statvfs",
    "pathconf",
    "listxattr",
    "getxattr",
)
RANDOM_CALLS = (
    "random",
    "getrandbits",
    "randbytes",
    "randrange",
    "randint",
    "choice",
    "choices",
    "shuffle",
    "sample",
    "uniform",
    "gauss",
)
# Audit events that are always per-call state or code outside the call.
AUDIT_EVENTS = (
    "subprocess.",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.fork",
    "os.kill",
    "os.chdir",
    "os.putenv",
    "os.unsetenv",
    "socket.",
    "_thread.",
    "sys.addaudithook",
    "ctypes.dlsym",
    "ctypes.addressof",
    "ctypes.cdata",
    "signal.pthread_kill",
    "os.setsid",
    "os.setpgid",
)


def _watch(names):
    """Import `names` in order, watching; the modules loaded and not refused, in load
    order, then "-<number refused>"."""
    import importlib

    for module in WATCHING_MODULES:
        importlib.import_module(module)
    stack, tainted, edges = [], {}, []
    before = set(sys.modules)

    def taint(why):
        if stack:
            tainted.setdefault(stack[-1], why)

    here_dependent = _watch_state(taint)
    if not _watch_context(taint):
        return ["-1"]
    sys.addaudithook(_auditor(stack, taint, here_dependent))
    failed = _import_watched(names, stack, edges, taint)
    loaded = [name for name in list(sys.modules) if name not in before]
    refused = _refusals(loaded, tainted, failed, edges)
    for name in sorted(refused):
        sys.stderr.write(f"ccm warm: not preloaded: {name} ({refused[name]})\n")
    return [name for name in loaded if name not in refused] + [f"-{len(refused)}"]


def _wrap(taint, owner, attribute, when=None, call=True):
    """Replace `owner.attribute` by a function that taints (when `when` says so), then
    calls the original unless `call` is false."""
    real = getattr(owner, attribute, None)
    if real is None:
        return

    def watched(*args, **kwargs):
        if when is None or when(*args, **kwargs):
            taint(getattr(owner, "__name__", "?") + "." + attribute)
        if call:
            return real(*args, **kwargs)

    setattr(owner, attribute, watched)


def _watch_state(taint):
    """Watch the environment, argv and the calls that read per-call state; the test of a
    path that depends on the working directory or the process (for the audit hook)."""
    import posix
    import random
    import resource
    import threading

    class WatchedDict(dict):
        pass

    class WatchedList(list):
        pass

    for attribute in ENVIRON_METHODS:
        _wrap(taint, os._Environ, attribute)
    for attribute in DICT_METHODS:
        _wrap(taint, WatchedDict, attribute)
    for attribute in LIST_METHODS:
        _wrap(taint, WatchedList, attribute)
    for environ in (os.environ, os.environb):
        environ._data = WatchedDict(environ._data)
    posix.environ = WatchedDict(posix.environ)
    sys.argv = WatchedList(sys.argv)
    sys.orig_argv = WatchedList(sys.orig_argv)

    own = ("/proc/self", "/proc/thread-self", "/dev/fd", f"/proc/{os.getpid()}")

    def here_dependent(path=None, *args, **kwargs):
        if isinstance(path, int) or path is None:
            return path is None
        path = os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path)
        return not path.startswith("/") or path.startswith(own)

    for owner in (os, posix):
        for attribute in PROCESS_CALLS:
            _wrap(taint, owner, attribute)
        for attribute in PATH_CALLS:
            _wrap(taint, owner, attribute, when=here_dependent)
        _wrap(taint, owner, "register_at_fork", call=False)
    for attribute in ("getrlimit", "prlimit"):
        _wrap(taint, resource, attribute)
    # A generator seeded, or the shared one drawn from, at import would give every warm
    # call the same numbers.
    _wrap(taint, random.Random, "seed")
    for attribute in RANDOM_CALLS:
        _wrap(taint, random, attribute)
    for attribute in ("settrace", "setprofile"):
        _wrap(taint, sys, attribute, call=False)
        _wrap(taint, threading, attribute, call=False)
    return here_dependent


def _watch_context(taint):
    """Watch conda's context object (when conda.base.context is loaded); False when its
    class cannot be swapped."""
    conda_context = sys.modules.get("conda.base.context")
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
            return False
    return True


def _auditor(stack, taint, here_dependent):
    """The audit hook: files outside the prefixes and sys.path, relative paths, processes,
    signals, sockets, threads and other hooks, charged to the module being imported."""
    allowed = set()
    for base in [sys.prefix, sys.base_prefix, sys.exec_prefix] + list(sys.path):
        if base:
            allowed.add(os.path.realpath(base).rstrip("/") + "/")

    def inside(path):
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = path.decode("utf-8", "surrogateescape")
        if not isinstance(path, str) or not path.startswith("/"):
            return False
        path = os.path.normpath(path) + "/"
        return any(path.startswith(base) for base in allowed)

    def audit(event, args):
        if not stack:
            return
        if event in ("open", "os.listdir", "os.scandir"):
            if args and not inside(args[0]):
                taint(event + " outside the prefix")
        elif event.startswith("os.") and args and isinstance(args[0], (str, bytes)):
            if here_dependent(args[0]):
                taint(event + " of a relative path")
        elif event.startswith(AUDIT_EVENTS):
            taint(event)

    return audit


def _import_watched(names, stack, edges, taint):
    """Import `names` in order with the import system watched: who imported whom (into
    `edges`), which module's body is running (top of `stack`); the modules refused by the
    import itself (failed, a stand-in module, a thread started), with why."""
    import importlib
    import threading
    import types

    restore = _watch_imports(stack, edges, taint)
    threads = threading.active_count()
    failed = {}
    for name in names:
        if name in sys.modules:
            continue
        present = set(sys.modules)
        stack.append(name)
        try:
            importlib.import_module(name)
        except BaseException:
            failed[name] = "its import failed"
        finally:
            stack.pop()
        for new in set(sys.modules) - present:
            # A lazy module (importlib.util.LazyLoader) or another object standing in for
            # a module runs code on first use, code no round has watched: refused, with
            # the import that put it there.
            if type(sys.modules.get(new)) is not types.ModuleType:
                failed.setdefault(new, "not a plain module object")
                failed.setdefault(name, "puts a stand-in module in place: " + new)
        if threading.active_count() != threads:
            failed[name] = "a thread was started"
            threads = threading.active_count()
    restore()
    return failed


def _watch_imports(stack, edges, taint):
    """Hook the import system (module loads, `import` statements, importlib); a function
    that unhooks it."""
    import builtins
    import importlib._bootstrap as bootstrap

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
                    if name + "." + str(item) in sys.modules:
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

    def restore():
        builtins.__import__ = real_import
        bootstrap._gcd_import = real_gcd
        bootstrap._load_unlocked = load

    bootstrap._load_unlocked = watched_load
    bootstrap._gcd_import = watched_gcd
    builtins.__import__ = watched_import
    return restore


def _refusals(loaded, tainted, failed, edges):
    """Every refused module with why: those that read per-call state (`tainted`) or whose
    import failed (`failed`), then, transitively, every module that imports a refused one
    (an `edges` pair, importer first, or a submodule's package)."""
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
    return refused
