# Watching imports for per-call state (part of the zygote's script; runs only in a
# throwaway child of the zygote, which it changes beyond repair).
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
import os as _os
import sys as _sys


def _watch(names):
    """Import `names` in order, watching; the modules loaded and not refused, in load
    order, then "-<number refused>"."""
    import builtins
    import importlib
    import importlib._bootstrap as bootstrap
    import posix
    import random
    import resource
    import threading
    import types

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

    def wrap(owner, attribute, when=None, call=True):
        real = getattr(owner, attribute, None)
        if real is None:
            return

        def watched(*args, **kwargs):
            if when is None or when(*args, **kwargs):
                taint(getattr(owner, "__name__", "?") + "." + attribute)
            if call:
                return real(*args, **kwargs)

        setattr(owner, attribute, watched)

    class WatchedDict(dict):
        pass

    class WatchedList(list):
        pass

    for attribute in ("__getitem__", "__iter__", "__len__", "__setitem__", "__delitem__",
                      "__repr__", "copy", "setdefault", "__or__", "__ror__", "__ior__"):
        wrap(_os._Environ, attribute)
    for attribute in ("__getitem__", "__iter__", "__len__", "__contains__", "__setitem__",
                      "__delitem__", "get", "keys", "items", "values", "copy", "pop",
                      "setdefault", "update", "__repr__", "__eq__", "__or__"):
        wrap(WatchedDict, attribute)
    for attribute in ("__getitem__", "__iter__", "__len__", "__contains__", "__reversed__",
                      "index", "count", "copy", "__eq__", "__repr__"):
        wrap(WatchedList, attribute)
    for environ in (_os.environ, _os.environb):
        environ._data = WatchedDict(environ._data)
    posix.environ = WatchedDict(posix.environ)
    _sys.argv = WatchedList(_sys.argv)
    _sys.orig_argv = WatchedList(_sys.orig_argv)

    own = ("/proc/self", "/proc/thread-self", "/dev/fd", "/proc/%d" % _os.getpid())

    def here_dependent(path=None, *args, **kwargs):
        if isinstance(path, int) or path is None:
            return path is None
        path = _os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path)
        return not path.startswith("/") or path.startswith(own)

    for owner in (_os, posix):
        for attribute in ("getcwd", "getcwdb", "chdir", "access", "getpid", "getppid",
                          "fchdir", "getpgrp", "getsid", "ttyname", "urandom"):
            wrap(owner, attribute)
        for attribute in ("stat", "lstat", "readlink", "listdir", "scandir", "statvfs",
                          "pathconf", "listxattr", "getxattr"):
            wrap(owner, attribute, when=here_dependent)
        wrap(owner, "register_at_fork", call=False)
    for attribute in ("getrlimit", "prlimit"):
        wrap(resource, attribute)
    # A generator seeded, or the shared one drawn from, at import would give every warm
    # call the same numbers.
    wrap(random.Random, "seed")
    for attribute in ("random", "getrandbits", "randbytes", "randrange", "randint",
                      "choice", "choices", "shuffle", "sample", "uniform", "gauss"):
        wrap(random, attribute)
    for attribute in ("settrace", "setprofile"):
        wrap(_sys, attribute, call=False)
        wrap(threading, attribute, call=False)

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
            return ["-1"]

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
        elif event.startswith("os.") and args and isinstance(args[0], (str, bytes)):
            if here_dependent(args[0]):
                taint(event + " of a relative path")
        elif event.startswith(("subprocess.", "os.exec", "os.posix_spawn", "os.spawn",
                               "os.system", "os.fork", "os.kill", "os.chdir", "os.putenv",
                               "os.unsetenv", "socket.", "_thread.", "sys.addaudithook",
                               "ctypes.dlsym", "ctypes.addressof", "ctypes.cdata",
                               "signal.pthread_kill", "os.setsid", "os.setpgid")):
            taint(event)

    _sys.addaudithook(audit)
    bootstrap._load_unlocked = watched_load
    bootstrap._gcd_import = watched_gcd
    builtins.__import__ = watched_import

    threads = threading.active_count()
    failed = {}
    for name in names:
        if name in _sys.modules:
            continue
        present = set(_sys.modules)
        stack.append(name)
        try:
            importlib.import_module(name)
        except BaseException:
            failed[name] = "its import failed"
        finally:
            stack.pop()
        for new in set(_sys.modules) - present:
            # A lazy module (importlib.util.LazyLoader) or another object standing in for
            # a module runs code on first use, code no round has watched: refused, with
            # the import that put it there.
            if type(_sys.modules.get(new)) is not types.ModuleType:
                failed.setdefault(new, "not a plain module object")
                failed.setdefault(name, "puts a stand-in module in place: " + new)
        if threading.active_count() != threads:
            failed[name] = "a thread was started"
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
