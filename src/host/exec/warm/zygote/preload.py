# Part of the zygote (see start.py): preloading, run before it serves. The modules a call
# imports while conda builds its parser -- the plugins' and their dependencies among them --
# imported once in the zygote, but only those whose import is seen to read no per-call
# state.
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
import os
import sys

if False:  # Names from the other parts of this program (one namespace; see start.py).
    from watch import _watch

SURVEY_ARGS = ["list", "--help"]
SURVEY_SECONDS = 60
ROUNDS = 6


def _in_child(body, *args):
    """Run `body(*args)` in a forked child; its result (a list of names) comes back over a
    pipe. Empty when the child fails or does not finish within SURVEY_SECONDS."""
    import select
    import signal
    import time

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.setpgid(0, 0)
            null = os.open("/dev/null", os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.dup2(write, 3)
            os.closerange(4, 1 << 20)
            names = body(*args)
            data = "\n".join(names).encode()
            while data:
                data = data[os.write(3, data) :]
            status = 0
        except BaseException:
            pass
        os._exit(status)
    os.close(write)
    chunks, done = [], False
    end = time.monotonic() + SURVEY_SECONDS
    while not done:
        left = end - time.monotonic()
        if left <= 0 or not select.select([read], [], [], left)[0]:
            break
        chunk = os.read(read, 1 << 16)
        chunks.append(chunk)
        done = not chunk
    os.close(read)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    if not done or status != 0:
        return []
    return [n for n in b"".join(chunks).decode().split("\n") if n]


def _roots(entry):
    """The modules conda's parser build loads from the top, in order (`entry`: the conda
    entry script, sys.argv[0] of the survey's run)."""
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
    sys.argv = [entry] + SURVEY_ARGS
    try:
        from conda.cli import main

        main()
    except BaseException:
        pass
    bootstrap._load_unlocked = load
    return roots


def _guarded_import(names, after_each):
    """Import `names` in order in this process (the zygote), calling `after_each()` after
    each; the number imported. An at-fork hook registered meanwhile (the watching rounds saw
    none) would run in every warm child before its containment: then the zygote stops (calls
    run cold)."""
    import importlib
    import posix

    registered = []

    def refuse(*args, **kwargs):
        registered.append(kwargs or args)

    real = posix.register_at_fork
    os.register_at_fork = posix.register_at_fork = refuse
    imported = 0
    try:
        for name in names:
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
                imported += 1
            except BaseException:
                pass
            after_each()
    finally:
        os.register_at_fork = posix.register_at_fork = real
    if registered:
        os.write(2, b"ccm warm: a preloaded module registered an at-fork hook\n")
        os._exit(3)
    return imported


def preload(entry, after_each):
    """Import what the watching rounds admit (`after_each()` after each import); the
    (imported, refused) counts."""
    roots = _in_child(_roots, entry)
    names, refused = roots, 0
    for _ in range(ROUNDS):
        if not names:
            break
        admitted = _in_child(_watch, names)
        if not admitted or not admitted[-1].startswith("-"):
            return 0, refused + len(names)
        count = int(admitted.pop()[1:])
        if count == 0:
            return _guarded_import(names, after_each), refused
        refused += count
        names = admitted
    return 0, refused + len(names)
