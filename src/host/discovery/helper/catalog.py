# Part of the discovery helper (see document.py): the `catalog` and `plugins` modes, conda's
# parser as a catalog document plus the plugin inventory (every `conda` entry point and the
# hooks it provides) and the interpreter's facts.
import os
import sys

if False:  # Names from the other parts of this program (one namespace; see document.py).
    from document import _emit
    from traverse import _Inspector


def _hook_names():
    from conda.plugins.hookspec import CondaSpecs

    return {
        n for n in dir(CondaSpecs) if n.startswith("conda_") and callable(getattr(CondaSpecs, n))
    }


def _plugins():
    from importlib import metadata

    hooks = _hook_names()
    seen = set()
    records = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        for ep in dist.entry_points:
            if ep.group != "conda":
                continue
            key = (_normalize(name), ep.name, ep.value)
            if key in seen:  # the same distribution twice on sys.path: the first one wins
                continue
            seen.add(key)
            try:
                loaded = ep.load()
            except Exception:
                found = []
            else:
                found = set()
                if callable(loaded) and getattr(loaded, "__name__", None) in hooks:
                    found.add(loaded.__name__)
                for hook in hooks:
                    try:
                        if callable(getattr(loaded, hook, None)):
                            found.add(hook)
                    except Exception:
                        pass
                found = sorted(found)
            records.append(
                {
                    "distribution": name,
                    "version": dist.version or "",
                    "entry_point": ep.name,
                    "value": ep.value,
                    "hooks": found,
                }
            )
    records.sort(
        key=lambda r: (r["distribution"].casefold(), r["entry_point"].casefold(), r["value"])
    )
    return records


def _normalize(name):
    out = []
    for c in name.lower():
        if c in "-_.":
            if not out or out[-1] != "-":
                out.append("-")
        else:
            out.append(c)
    return "".join(out)


def _interpreter():
    return {
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "version": "{}.{}.{}".format(*sys.version_info[:3]),
        "site_dirs": [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)],
    }


def mode_catalog(out):
    try:
        import conda
        from conda.cli.conda_argparse import generate_parser
    except Exception as exc:
        _emit(out, {"error": "import", "detail": type(exc).__name__}, 3)
    version = str(getattr(conda, "__version__", "") or "")
    try:
        parser = generate_parser()
    except Exception as exc:
        _emit(out, {"error": "parser", "detail": type(exc).__name__, "conda_version": version}, 3)
    inspector = _Inspector()
    root = inspector.command(parser, None, [], [], None)
    try:
        plugins, plugin_error = _plugins(), None
    except Exception as exc:
        plugins, plugin_error = [], type(exc).__name__
    _emit(
        out,
        {
            "catalog": {
                "prog": str(parser.prog or "conda"),
                "conda_version": version,
                "root": root,
                "diagnostics": inspector.diagnostics,
            },
            "plugins": plugins,
            "plugin_error": plugin_error,
            "interpreter": _interpreter(),
            "conda_file": getattr(conda, "__file__", None),
        },
    )


def mode_plugins(out):
    try:
        import conda
    except Exception as exc:
        _emit(out, {"error": "import", "detail": type(exc).__name__}, 3)
    try:
        plugins = _plugins()
    except Exception as exc:
        _emit(out, {"error": "plugins", "detail": type(exc).__name__}, 3)
    _emit(out, {"conda_version": str(getattr(conda, "__version__", "")), "plugins": plugins})
