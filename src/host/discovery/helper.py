"""ccm discovery helper: runs under the target conda's own interpreter.

The server embeds this file and runs it as ``python -I -c <this source> <mode> [json]``, so
nothing from the server's environment (PYTHONPATH, user site-packages, the current
directory) can shadow the target's modules. It inspects the target's real argparse parser
and plugin inventory and turns them into plain JSON.

Output framing: the JSON document is written to a private duplicate of the original
standard output; file descriptor 1 itself is pointed at standard error before conda is
imported, so anything conda or a plugin prints (from Python or from C) lands on stderr and
cannot corrupt the document. The document is one line of ASCII JSON.

Modes:
  catalog          the parser tree, the plugin inventory and interpreter facts
  plugins          the plugin inventory only (restart checks)
  parse   <json>   parse each argv of a batch with the target's parser (round-trip tests)
  completion       conda-completion's manifest, converted, with its file identity
  targets  <json>  the environments one argv targets, by conda's own context (scoped writes)
"""

import argparse
import json
import os
import sys

PROTOCOL = 1
# Reasons are fixed texts: the server turns them into diagnostics as they are.
REASON_UNSUPPORTED_ACTION = "unsupported argparse action"
REASON_UNSUPPORTED_NARGS = "unsupported nargs value"
REASON_CHOICES = "could not evaluate choices: {}"
REASON_SUBPARSER_CHOICES = "subparser choices are not a mapping"
REASON_SUBPARSER_VALUE = "subparser choice has an invalid value"
REASON_INSPECT = "could not inspect argparse action: {}"
REASON_HIDDEN_UNSUPPORTED = "unsupported hidden argparse action ignored"


def _take_stdout():
    """Keep the real stdout for the document and send fd 1 to stderr from now on."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _emit(out, document, code=0):
    document["protocol"] = PROTOCOL
    data = json.dumps(
        document, ensure_ascii=True, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    out.write(data.encode("ascii"))
    out.write(b"\n")
    out.flush()
    sys.stderr.flush()
    os._exit(code)


def _qualname(obj):
    cls = obj if isinstance(obj, type) else type(obj)
    return "{}.{}".format(cls.__module__, cls.__qualname__)


def _json_safe(value, depth=0):
    """Return value when it is plain JSON data (finite numbers), else None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, (list, tuple)) and depth < 4:
        items = [_json_safe(v, depth + 1) for v in value]
        if all(i is not None or v is None for i, v in zip(items, value)):
            return items
    return None


def _plain(value, depth=0):
    """JSON form of a parsed value: containers kept, anything else stringified."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (list, tuple)) and depth < 8:
        return [_plain(v, depth + 1) for v in value]
    return str(value)


# ---------------------------------------------------------------------------------------
# Parser inspection


def _action_kind(action):
    # conda's own action classes are recognised by name (they may come from any module),
    # then the standard classes by inheritance, most specific first.
    for cls in type(action).__mro__:
        if cls.__name__ == "ExtendConstAction":
            return "extend_const"
        if cls.__name__ == "LazyChoicesAction":
            return "store"
    checks = []
    boolean = getattr(argparse, "BooleanOptionalAction", None)
    if boolean is not None:
        checks.append((boolean, "boolean"))
    checks += [
        (argparse._StoreTrueAction, "store_true"),
        (argparse._StoreFalseAction, "store_false"),
        (argparse._StoreConstAction, "store_const"),
        (argparse._AppendConstAction, "append_const"),
        (argparse._CountAction, "count"),
    ]
    extend = getattr(argparse, "_ExtendAction", None)
    if extend is not None:
        checks.append((extend, "extend"))
    checks += [(argparse._AppendAction, "append"), (argparse._StoreAction, "store")]
    for cls, kind in checks:
        if isinstance(action, cls):
            return kind
    return None


def _nargs(action):
    nargs = action.nargs
    if nargs is None:
        return True, None
    if isinstance(nargs, bool):
        return False, None
    if isinstance(nargs, int):
        return nargs >= 0, nargs
    if nargs == argparse.OPTIONAL:
        return True, "?"
    if nargs == argparse.ZERO_OR_MORE:
        return True, "*"
    if nargs == argparse.ONE_OR_MORE:
        return True, "+"
    if nargs == argparse.REMAINDER:
        return True, "remainder"
    if nargs == argparse.PARSER:
        return True, "parser"
    return False, None


def _value_type(action):
    if action.type is int:
        return "integer"
    if action.type is float:
        return "number"
    return "string"


def _choices(action):
    """(choices as strings, computed lazily?) — may raise."""
    dynamic = any(c.__name__ == "LazyChoicesAction" for c in type(action).__mro__)
    choices = action.choices
    if choices is None:
        return [], dynamic
    if not isinstance(choices, (list, tuple, set, frozenset, dict, range)):
        dynamic = True
    if hasattr(choices, "keys"):
        choices = list(choices.keys())
    values = [str(c) for c in choices]
    if isinstance(action.choices, (set, frozenset)):
        values.sort()
    return values, dynamic


def _metavar(action):
    metavar = action.metavar
    if metavar is None:
        return []
    if isinstance(metavar, tuple):
        return [str(m) for m in metavar]
    return [str(metavar)]


def _help(parser, action):
    text = action.help
    if text is None or text == argparse.SUPPRESS:
        return None
    text = str(text)
    if "%" in text:
        params = dict(vars(action), prog=parser.prog)
        for name in list(params):
            if params[name] is argparse.SUPPRESS:
                del params[name]
        try:
            text = text % params
        except Exception:
            text = text.replace("%%", "%")
    return text


def _base_id(action):
    if action.option_strings:
        longs = [s for s in action.option_strings if s.startswith("--")]
        raw = longs[0][2:] if longs else action.option_strings[0].lstrip("-")
    else:
        raw = str(action.dest)
    return raw.replace("-", "_") or "argument"


class _Inspector:
    def __init__(self):
        self.diagnostics = []

    def diagnostic(self, path, reason, action=None, blocking=True):
        self.diagnostics.append(
            {
                "path": list(path),
                "reason": reason[:512],
                "action_type": _qualname(action) if action is not None else None,
                "blocking": blocking,
            }
        )

    def command(self, parser, name, aliases, path, one_line_help):
        node = {
            "name": name,
            "aliases": list(aliases),
            "summary": str(parser.description) if parser.description is not None else None,
            "help": one_line_help,
            "arguments": [],
            "exclusive_groups": [],
            "children": [],
            "terminal": True,
            "passthrough": bool(getattr(parser, "greedy", False)),
            "raw_only": False,
        }
        ids = {}
        used = set()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                if action.required:
                    node["terminal"] = False
                self.subcommands(parser, action, node, path)
                continue
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            hidden = action.help == argparse.SUPPRESS
            try:
                argument = self.argument(parser, action, hidden)
            except Exception as exc:  # a plugin's action that breaks introspection
                self.diagnostic(path, REASON_INSPECT.format(type(exc).__name__), action)
                node["raw_only"] = True
                continue
            if isinstance(argument, str):
                # Unsupported: a hidden optional action is harmless (nobody is meant to
                # pass it); anything else makes the command raw-only.
                if hidden and not action.required:
                    self.diagnostic(path, REASON_HIDDEN_UNSUPPORTED, action, blocking=False)
                else:
                    self.diagnostic(path, argument, action)
                    node["raw_only"] = True
                continue
            base = argument["id"]
            candidate, n = base, 2
            while candidate in used:
                candidate = "{}_{}".format(base, n)
                n += 1
            used.add(candidate)
            argument["id"] = candidate
            ids[id(action)] = candidate
            node["arguments"].append(argument)
        for group in getattr(parser, "_mutually_exclusive_groups", []):
            members = [ids[id(a)] for a in group._group_actions if id(a) in ids]
            if members:
                node["exclusive_groups"].append(
                    {"members": members, "required": bool(group.required)}
                )
        return node

    def argument(self, parser, action, hidden):
        kind = _action_kind(action)
        if kind is None:
            return REASON_UNSUPPORTED_ACTION
        ok, nargs = _nargs(action)
        if not ok:
            return REASON_UNSUPPORTED_NARGS
        try:
            choices, dynamic = _choices(action)
        except Exception as exc:
            return REASON_CHOICES.format(type(exc).__name__)
        return {
            "id": _base_id(action),
            "dest": str(action.dest),
            "flags": [str(s) for s in action.option_strings],
            "action": kind,
            "nargs": nargs,
            "value_type": _value_type(action),
            "required": bool(action.required),
            "choices": choices,
            "dynamic_choices": dynamic,
            "metavar": _metavar(action),
            "help": _help(parser, action),
            "hidden": hidden,
            "default": _json_safe(action.default),
            "const": _json_safe(action.const),
        }

    def subcommands(self, parser, action, node, path):
        choices = action.choices
        if not hasattr(choices, "items"):
            self.diagnostic(path, REASON_SUBPARSER_CHOICES, action)
            node["raw_only"] = True
            return
        helps = {}
        for choice_action in getattr(action, "_choices_actions", []):
            text = choice_action.help
            if text is not None and text != argparse.SUPPRESS:
                helps[str(choice_action.dest)] = str(text)
        grouped = []
        by_parser = {}
        for key, child in choices.items():
            if not isinstance(key, str) or not isinstance(child, argparse.ArgumentParser):
                self.diagnostic(path, REASON_SUBPARSER_VALUE, action)
                node["raw_only"] = True
                return
            if id(child) in by_parser:
                by_parser[id(child)][1].append(key)
            else:
                entry = (child, [key])
                by_parser[id(child)] = entry
                grouped.append(entry)
        for child, names in grouped:
            name = names[0]
            one_line = next((helps[n] for n in names if n in helps), None)
            node["children"].append(
                self.command(child, name, names[1:], path + [name], one_line)
            )


def _hook_names():
    from conda.plugins.hookspec import CondaSpecs

    return {n for n in dir(CondaSpecs) if n.startswith("conda_") and callable(getattr(CondaSpecs, n))}


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
    records.sort(key=lambda r: (r["distribution"].casefold(), r["entry_point"].casefold(), r["value"]))
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


# ---------------------------------------------------------------------------------------
# Round trip: parse argv with the target's parser and record what each action receives.


class _ParseError(Exception):
    pass


class _Recorder(argparse.Action):
    """Stands in for every action: records the option string and the values argparse
    hands over (after nargs matching, type conversion and choice checks)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values is self.default:
            return  # an absent positional: argparse passes the default through
        calls = getattr(namespace, self.dest, None)
        calls = list(calls) if isinstance(calls, list) else []
        calls.append({"option": option_string, "values": _plain(values)})
        setattr(namespace, self.dest, calls)


def _action_key(level, path, action):
    return "{}|{}|{}|{}".format(level, " ".join(path), ",".join(action.option_strings), action.dest)


def _own_actions(parser):
    """Plugins may share one action object between parsers (argparse `parents=`); give this
    parser copies of its own so that instrumenting it leaves the others alone."""
    import copy

    mapping = {}
    for index, action in enumerate(parser._actions):
        if not isinstance(action, argparse._SubParsersAction):
            mapping[id(action)] = parser._actions[index] = copy.copy(action)
    for option, action in list(parser._option_string_actions.items()):
        parser._option_string_actions[option] = mapping.get(id(action), action)
    for group in list(parser._action_groups) + list(parser._mutually_exclusive_groups):
        group._group_actions[:] = [mapping.get(id(a), a) for a in group._group_actions]


def _instrument(parser, level, path):
    """Record every action under a unique key, keep argparse's matching untouched, and
    make parse errors exceptions."""

    def error(message):
        raise _ParseError(message)

    def exit_(status=0, message=None):
        raise _ParseError(message or "exit {}".format(status))

    parser.error = error
    parser.exit = exit_
    _own_actions(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.dest = argparse.SUPPRESS
            seen = set()
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    _instrument(child, level + 1, path + [name])
            continue
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        key = _action_key(level, path, action)
        try:
            choices = action.choices
        except Exception:
            choices = None
        action.__class__ = _Recorder
        action.choices = choices
        action.dest = key
        # A fresh, empty list: recognisable by identity (absent positionals), valid against
        # any choices, and an empty record when the action never fires.
        action.default = []
        if action.type not in (int, float):
            action.type = None  # observe the argv text, not a converter's result
    parser._defaults = {}
    parser.set_defaults(**{"ccm_path:{}".format(level): path})


def mode_parse(out, batch):
    from conda.cli.conda_argparse import generate_parser

    parser = generate_parser()
    _instrument(parser, 0, [])
    results = []
    for argv in batch["argvs"]:
        try:
            namespace = parser.parse_args(list(argv))
        except _ParseError as exc:
            results.append({"error": str(exc)})
            continue
        except Exception as exc:
            results.append({"error": "{}: {}".format(type(exc).__name__, exc)})
            continue
        calls = {}
        path = []
        for key, value in vars(namespace).items():
            if key.startswith("ccm_path:"):
                if len(value) >= len(path):
                    path = value
            elif key == "_args":
                calls["passthrough"] = _plain(list(value))
            elif isinstance(value, list) and "|" in key:
                calls[key] = value
        results.append({"path": path, "calls": calls})
    _emit(out, {"results": results})


# ---------------------------------------------------------------------------------------
# Targets of one argv, as conda itself resolves them (for --write-envs)


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


# ---------------------------------------------------------------------------------------
# conda-completion manifest


def mode_completion(out):
    """Read the completion manifest through conda-completion's public API only."""
    from importlib import metadata

    newer = "Use conda-completion 0.3 or newer in the target environment."
    regenerate = "Regenerate completion.msgpack in the target environment."

    def reply(availability, hint, **extra):
        extra.update({"availability": availability, "hint": hint})
        _emit(out, extra)

    try:
        from conda_completion import exceptions as cc_exceptions
        from conda_completion import manifest as cc_manifest
        from conda_completion import paths as cc_paths
        from conda_completion import plugin as cc_plugin
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "conda_completion":
            reply("not_installed", "Install conda-completion in the target conda environment.")
        reply("unavailable", "Repair the conda-completion installation in the target environment.")
    except ImportError:
        reply("unavailable", "Use a conda-completion version with the public manifest API.")
    try:
        version = metadata.version("conda-completion")
    except Exception:
        version = None
    if version:
        try:
            release = tuple(int(part) for part in version.split(".", 2)[:2])
        except ValueError:
            release = ()
        if release and release < (0, 3):
            reply("unavailable", newer)
    read_manifest = getattr(cc_manifest, "read_manifest", None)
    manifest_path = getattr(cc_paths, "manifest_path", None)
    if not callable(read_manifest) or not callable(manifest_path):
        reply("unavailable", newer)
    manifest_error = getattr(cc_exceptions, "ManifestError", OSError)
    path = manifest_path()
    try:
        stat = os.stat(path)
        manifest = read_manifest(path)
    except FileNotFoundError:
        reply(
            "not_generated",
            "Run 'conda completion generate' in the target environment.",
            manifest_path=str(path),
        )
    except (manifest_error, OSError):
        reply("unavailable", regenerate, manifest_path=str(path))
    try:
        converted = _convert_manifest(manifest)
    except (AttributeError, TypeError, ValueError):
        reply("unavailable", newer)
    try:
        current_hash = cc_plugin.plugin_entry_point_hash()
    except Exception:
        current_hash = None
    reply(
        "available",
        None,
        manifest_path=str(path),
        identity=[stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns],
        conda_completion_version=version,
        current_plugin_hash=current_hash,
        manifest=converted,
    )


def _to_dict(obj):
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return _plain_dict(to_dict())
    raise TypeError("manifest object without to_dict")


def _plain_dict(value, depth=0):
    if isinstance(value, dict) and depth < 16:
        return {str(k): _plain_dict(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and depth < 16:
        return [_plain_dict(v, depth + 1) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return str(value)


def _convert_command(spec):
    return {
        "summary": getattr(spec, "summary", None),
        "options": [
            dict({"name": flag}, **_to_dict(option))
            for flag, option in (getattr(spec, "options", None) or {}).items()
        ],
        "positionals": [_to_dict(p) for p in (getattr(spec, "positionals", None) or [])],
        "subcommands": {
            name: _convert_command(child)
            for name, child in (getattr(spec, "subcommands", None) or {}).items()
        },
        "exclusive_groups": [list(g) for g in (getattr(spec, "exclusive_groups", None) or [])],
    }


def _convert_manifest(manifest):
    for attribute in (
        "aliases",
        "commands",
        "generated_at",
        "plugin_hash",
        "root_options",
        "runtime_sources",
        "version",
    ):
        if not hasattr(manifest, attribute):
            raise TypeError("manifest lacks " + attribute)
    return {
        "version": _plain_dict(manifest.version),
        "generated_at": _plain_dict(manifest.generated_at),
        "plugin_hash": manifest.plugin_hash or None,
        "aliases": {
            name: list(getattr(alias, "target", alias) or [])
            for name, alias in (manifest.aliases or {}).items()
        },
        "root_options": [
            dict({"name": flag}, **_to_dict(option))
            for flag, option in (manifest.root_options or {}).items()
        ],
        "commands": {name: _convert_command(spec) for name, spec in (manifest.commands or {}).items()},
        "runtime_sources": {
            name: _to_dict(source) for name, source in (manifest.runtime_sources or {}).items()
        },
    }


def main():
    out = _take_stdout()
    mode = sys.argv[1] if len(sys.argv) > 1 else "catalog"
    try:
        if mode == "catalog":
            mode_catalog(out)
        elif mode == "plugins":
            mode_plugins(out)
        elif mode == "parse":
            mode_parse(out, json.loads(sys.argv[2]) if len(sys.argv) > 2 else json.load(sys.stdin))
        elif mode == "completion":
            mode_completion(out)
        elif mode == "targets":
            mode_targets(out, json.load(sys.stdin))
        else:
            _emit(out, {"error": "mode", "detail": mode}, 2)
    except SystemExit:
        raise
    except BaseException as exc:  # never a traceback instead of a document
        _emit(out, {"error": "internal", "detail": type(exc).__name__}, 3)


if __name__ == "__main__":
    main()
