# Preloading (part of the zygote's script, run before it serves): the modules a call
# imports while conda builds its parser -- the plugins' and their dependencies among
# them -- imported once in the zygote, but only those whose import is seen to read no
# per-call state.
#
# 1. A survey child runs conda's main for `list --help` (the whole parser is built, no
#    command runs) and reports the modules it started loading with nothing else loading
#    ("roots"), in order.
# 2. Rounds of watching: a child imports a list of modules in order with every per-call
#    input watched (see _watch). A read is charged to the module whose body is running; a
#    module is refused when it read, failed, or imports (directly or through any module
#    it imports) a refused module. The next round imports what the last admitted, from
#    the same starting state; the first round without a refusal is the list the zygote
#    imports -- exactly that sequence was watched, so a read that an earlier, refused
#    module's cache hid in one round shows in the next.
# 3. The zygote imports that list. No child's state reaches the zygote: each is forked
#    from it, holds only /dev/null, stderr and its pipe (never the server's socket),
#    reports over the pipe and is killed with its process group at the deadline.
import os as _os
import sys as _sys

SURVEY_ARGS = ["list", "--help"]
SURVEY_SECONDS = 60
ROUNDS = 6


def _in_child(body):
    """Run `body` in a forked child; its result (a list of names) comes back over a pipe.
    Empty when the child fails or does not finish within SURVEY_SECONDS."""
    import select
    import signal
    import time

    read, write = _os.pipe()
    pid = _os.fork()
    if pid == 0:
        status = 1
        try:
            _os.setpgid(0, 0)
            null = _os.open("/dev/null", _os.O_RDWR)
            _os.dup2(null, 0)
            _os.dup2(null, 1)
            _os.dup2(write, 3)
            _os.closerange(4, 1 << 20)
            names = body()
            data = "\n".join(names).encode()
            while data:
                data = data[_os.write(3, data) :]
            status = 0
        except BaseException:
            pass
        _os._exit(status)
    _os.close(write)
    chunks, done = [], False
    end = time.monotonic() + SURVEY_SECONDS
    while not done:
        left = end - time.monotonic()
        if left <= 0 or not select.select([read], [], [], left)[0]:
            break
        chunk = _os.read(read, 1 << 16)
        chunks.append(chunk)
        done = not chunk
    _os.close(read)
    try:
        _os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = _os.waitpid(pid, 0)
    if not done or status != 0:
        return []
    return [n for n in b"".join(chunks).decode().split("\n") if n]


def _roots():
    """The modules conda's parser build loads from the top, in order."""
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


def _guarded_import(names):
    """Import `names` in order in this process (the zygote); the number imported. An
    at-fork hook registered meanwhile (the watching rounds saw none) would run in every
    warm child before its containment: then the zygote stops (calls run cold)."""
    import importlib
    import posix

    registered = []

    def refuse(*args, **kwargs):
        registered.append(kwargs or args)

    real = posix.register_at_fork
    _os.register_at_fork = posix.register_at_fork = refuse
    imported = 0
    try:
        for name in names:
            if name in _sys.modules:
                continue
            try:
                importlib.import_module(name)
                imported += 1
            except BaseException:
                pass
            watch_new_modules()
    finally:
        _os.register_at_fork = posix.register_at_fork = real
    if registered:
        _os.write(2, b"ccm warm: a preloaded module registered an at-fork hook\n")
        _os._exit(3)
    return imported


def preload():
    """Import what the watching rounds admit; (imported, refused) counts."""
    roots = _in_child(_roots)
    names, refused = roots, 0
    for _ in range(ROUNDS):
        if not names:
            break
        admitted = _in_child(lambda: _watch(names))
        if not admitted or not admitted[-1].startswith("-"):
            return 0, refused + len(names)
        count = int(admitted.pop()[1:])
        if count == 0:
            return _guarded_import(names), refused
        refused += count
        names = admitted
    return 0, refused + len(names)
