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
    the call's working directory."""
    from conda.base import context as context_module
    from conda.base.context import context
    from conda.cli.conda_argparse import generate_parser, generate_pre_parser
    from conda.core.envs_manager import list_all_known_prefixes

    _writing_nothing()
    argv = [str(a) for a in request["argv"]]
    try:
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
        args = parser.parse_args(argv, override_args=override_args, namespace=pre_args)
    except SystemExit:
        _emit(out, {"error": "parse"}, 0)
    context.__init__(argparse_args=args)
    name = getattr(args, "name", None)
    prefix = getattr(args, "prefix", None)
    resolve = context_module.determine_target_prefix
    document = {
        "explicit": name is not None or prefix is not None,
        "target": str(resolve(context, args)),
        "destination": None,
        "root_prefix": str(context.root_prefix),
        "envs_dirs": [str(d) for d in context.envs_dirs],
        "known": [str(p) for p in list_all_known_prefixes()],
        "caches": _caches(context),
        "envs_dirs_by_file": _envs_dirs(context),
    }
    destination = getattr(args, "destination", None)
    if request.get("destination") and isinstance(destination, str):
        if os.sep in destination:
            from conda.common.path import expand

            document["destination"] = str(expand(destination))
        else:
            named = argparse.Namespace(name=destination, prefix=None)
            document["destination"] = str(resolve(context, named))
    _emit(out, document)


def _writing_nothing():
    """This helper runs unsandboxed, as the server's user, before anything is confirmed:
    it must write nothing. conda's resolution of `-n NAME` takes the first writable envs
    directory, creating one that is missing and appending to its `.conda_envs_dir_test`
    (conda/gateways/disk/create.py:500-523 `first_writable_envs_dir`, through
    conda/core/prefix_data.py:52 and :161): here it is judged by permission bits alone,
    creating nothing. Listing the known environments rewrites every readable
    `environments.txt` it cleans (conda/core/envs_manager.py:145 `_clean_environments_txt`,
    :210 `_rewrite_environments_txt`; as root, every user's): here it rewrites none."""
    try:
        import conda.core.envs_manager as envs_manager
    except ImportError:
        envs_manager = None
    if hasattr(envs_manager, "_rewrite_environments_txt"):
        envs_manager._rewrite_environments_txt = lambda *args, **kwargs: None
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


def _caches(context):
    """The package caches each condarc file names (`pkgs_dirs`, expanded as conda does:
    conda/base/context.py:793-795), by file: [[file, [dir, ...]], ...]. Environment
    variables and the command line are left out (the server reads CONDA_PKGS_DIRS
    itself; the command line is the caller's). A configuration conda cannot validate
    names none (the call then fails in conda as it would)."""
    try:
        from conda.common.path import expand

        sources = context.collect_all().items()
        found = []
        for source, values in sources:
            dirs = dict(values).get("pkgs_dirs")
            if dirs and str(source) not in ("envvars", "cmd_line"):
                found.append([str(source), [str(expand(str(d))) for d in dirs]])
        return found
    except Exception:
        return []
