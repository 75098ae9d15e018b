# Part of the discovery helper (see document.py): the `targets` mode, the environments one
# argv targets as conda itself resolves them (for --write-envs).
import argparse
import os

if False:  # Names from the other parts of this program (one namespace; see document.py).
    from document import _emit


def mode_targets(out, request):
    """Parse the argv the way conda's entry point does (`main_subshell`: the pre-parser,
    `--no-plugins`, then the full parser into the pre-parser's namespace) and resolve its
    target prefix the way conda's commands do: `determine_target_prefix` (-p, -n, else the
    default prefix); with `destination`, the `destination` positional as `conda rename`
    resolves it (a path when it holds os.sep, else a name). Also every environment conda
    knows (`list_all_known_prefixes`): a write to a prefix reaches those below it. Runs in
    the call's working directory.

    An argv conda itself refuses (its parser exits, or its context or the resolution
    raises one of conda's errors, which the run would raise too) is answered
    `{"unresolved": ...}`; anything else that goes wrong is the helper's failure (an
    `error` document, or none), which the server tells apart (`host::targets`)."""
    from conda import CondaError
    from conda.base import context as context_module
    from conda.base.context import context
    from conda.cli.conda_argparse import generate_parser, generate_pre_parser

    # Patched before conda lists anything: `list_all_known_prefixes` looks the patched
    # names up in its module when it runs, so importing it by name is safe afterwards.
    _writing_nothing()
    from conda.core.envs_manager import list_all_known_prefixes

    argv = [str(a) for a in request["argv"]]
    try:
        args = _parsed(argv, context, generate_parser, generate_pre_parser)
    except SystemExit:
        _emit(out, {"unresolved": "parse"}, 0)
    except CondaError:
        _emit(out, {"unresolved": "conda"}, 0)
    resolve = context_module.determine_target_prefix
    destination = getattr(args, "destination", None)
    try:
        context.__init__(argparse_args=args)
        target = str(resolve(context, args))
        if not (request.get("destination") and isinstance(destination, str)):
            destination = None
        elif os.sep in destination:
            from conda.common.path import expand

            destination = str(expand(destination))
        else:
            named = argparse.Namespace(name=destination, prefix=None)
            destination = str(resolve(context, named))
    except CondaError:
        _emit(out, {"unresolved": "conda"}, 0)
    _emit(
        out,
        {
            "explicit": getattr(args, "name", None) is not None
            or getattr(args, "prefix", None) is not None,
            "target": target,
            "destination": destination,
            "root_prefix": str(context.root_prefix),
            "envs_dirs": [str(d) for d in context.envs_dirs],
            "known": [str(p) for p in list_all_known_prefixes()],
            "envs_dirs_by_file": _envs_dirs(context),
        },
    )


def _parsed(argv, context, generate_parser, generate_pre_parser):
    """`argv` parsed as conda's entry point parses it (see `mode_targets`)."""
    pre_parser = generate_pre_parser(add_help=False)
    subset = argv[: argv.index("--")] if "--" in argv else argv
    pre_args, _ = pre_parser.parse_known_args(subset)
    override_args = {
        "json": pre_args.json,
        "debug": pre_args.debug,
        "trace": pre_args.trace,
        "verbosity": pre_args.verbosity,
    }
    context.__init__(argparse_args=pre_args)
    if context.no_plugins:
        context.plugin_manager.disable_external_plugins()
    parser = generate_parser(add_help=True)
    return parser.parse_args(argv, override_args=override_args, namespace=pre_args)


def _writing_nothing():
    """This helper runs unsandboxed, as the server's user, before anything is confirmed:
    it must write nothing. conda's resolution of `-n NAME` takes the first writable envs
    directory, creating one that is missing and appending to its `.conda_envs_dir_test`
    (conda/gateways/disk/create.py:500-523 `first_writable_envs_dir`, through
    conda/core/prefix_data.py:52 and :161): here it is judged by permission bits alone,
    creating nothing. Listing the known environments rewrites every readable
    `environments.txt` it cleans (conda/core/envs_manager.py:145 `_clean_environments_txt`,
    :210 `_rewrite_environments_txt`; as root, every user's): here it rewrites none, and
    reads each within bounds (`_registry_lines`)."""
    try:
        import conda.core.envs_manager as envs_manager
    except ImportError:
        envs_manager = None
    if hasattr(envs_manager, "_rewrite_environments_txt"):
        envs_manager._rewrite_environments_txt = lambda *args, **kwargs: None
    if hasattr(envs_manager, "yield_lines"):
        envs_manager.yield_lines = _registry_lines
    try:
        from conda.base.context import context
        from conda.core import prefix_data
        from conda.exceptions import NoWritableEnvsDirError
    except ImportError:
        return

    def first_writable_envs_dir(create=True):
        for envs_dir in context.envs_dirs:
            if envs_dir == os.devnull:
                continue
            magic = os.path.join(envs_dir, ".conda_envs_dir_test")
            if os.path.isfile(magic):
                if os.access(magic, os.W_OK):
                    return envs_dir
            elif create:
                existing = envs_dir
                while not os.path.exists(existing) and os.path.dirname(existing) != existing:
                    existing = os.path.dirname(existing)
                if os.path.isdir(existing) and os.access(existing, os.W_OK):
                    return envs_dir
        raise NoWritableEnvsDirError(context.envs_dirs)

    if hasattr(prefix_data, "first_writable_envs_dir"):
        prefix_data.first_writable_envs_dir = first_writable_envs_dir


# The most bytes of one `environments.txt` read (the server's bound for the same file:
# src/host/sandbox/registries.rs MAX_REGISTRY), and the most entries taken from one (conda
# appends one line per environment it registers, once: conda/core/envs_manager.py:65-83
# `register_env`).
_REGISTRY_BYTES = 16 << 20
_REGISTRY_ENTRIES = 4096
# The most lines of one registry looked at (the server's own reading stops there too).
_REGISTRY_LINES = 16 * _REGISTRY_ENTRIES


def _registry_lines(path):
    """conda's `yield_lines` (conda/gateways/disk/read.py:41-64) as envs_manager reads a
    registry with it (conda/core/envs_manager.py:17, :199 in `_clean_environments_txt`,
    which :145 `list_all_known_prefixes` calls for `~/.conda/environments.txt` of the
    HOME, as root of every `getpwall()` home), bounded: anyone may plant that file, and
    this helper runs unsandboxed. Only a regular file opened without following a symlink
    and without blocking (a FIFO, or a link to `trace_pipe`, would stall the call; a link
    to `/dev/zero` would fill memory), of at most `_REGISTRY_BYTES`; anything else reads as
    no entries (what its owner could write anyway). The same lines as conda's for a sane
    file (universal newlines, stripped, neither empty nor `#`), each once (conda keeps a
    set of them: :125), at most `_REGISTRY_ENTRIES`; a line that is not text is skipped."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return []
    try:
        import stat

        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _REGISTRY_BYTES:
            return []
        chunks, size = [], 0
        while size <= _REGISTRY_BYTES:
            chunk = os.read(fd, _REGISTRY_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > _REGISTRY_BYTES:
            return []
    except OSError:
        return []
    finally:
        os.close(fd)
    return _registry_entries(b"".join(chunks))


def _registry_entries(data):
    """The entries of a registry's bytes (see `_registry_lines`): each distinct line once,
    in order, before any per-line work (8 M lines of "/" are one line to look at), of the
    first `_REGISTRY_LINES` lines, read one at a time (a file of millions of distinct short
    lines is never split whole)."""
    import itertools
    import locale

    encoding = locale.getpreferredencoding(False)
    entries, seen = {}, set()
    for raw in itertools.islice(_split_lines(data), _REGISTRY_LINES):
        if raw in seen:
            continue
        seen.add(raw)
        try:
            line = raw.decode(encoding).strip()
        except UnicodeDecodeError:
            continue
        if line and not line.startswith("#"):
            entries[line] = None
            if len(entries) >= _REGISTRY_ENTRIES:
                break
    return list(entries)


def _split_lines(data):
    """The lines of `data` one at a time, split where text mode's universal newlines split
    (\n, \r, \r\n), as `bytes.splitlines` splits them."""
    import re

    start = 0
    for end in re.finditer(rb"\r\n|\r|\n", data):
        yield data[start : end.start()]
        start = end.end()
    if start < len(data):
        yield data[start:]


def _envs_dirs(context):
    """The envs directories each condarc file names (`envs_dirs`, or its alias `envs_path`:
    conda/base/context.py:787), by file: [[file, [dir, ...]], ...], only the entries that
    are absolute once `~` and variables are expanded (a relative one is expanded from
    whatever directory conda runs in, which the caller chooses). Environment variables
    and the command line are left out (the server reads CONDA_ENVS_PATH itself; the
    command line is the caller's). The server trusts only some files (`server::call`)."""
    try:
        from conda.common.path import expand

        found = []
        for source, values in context.collect_all().items():
            values = dict(values)
            dirs = list(values.get("envs_dirs") or ()) + list(values.get("envs_path") or ())
            if not dirs or str(source) in ("envvars", "cmd_line"):
                continue
            absolute = [
                str(expand(str(d)))
                for d in dirs
                if os.path.isabs(os.path.expandvars(os.path.expanduser(str(d))))
            ]
            found.append([str(source), absolute])
        return found
    except Exception:
        return []
