# Part of the discovery helper (see document.py): the catalog document of an argparse
# parser, by traversal of its actions, exclusive groups and subparsers. Needs only
# argparse: it runs on any parser, conda's or one a test builds.
import argparse

# Reasons are fixed texts: the server turns them into diagnostics as they are.
REASON_UNSUPPORTED_ACTION = "unsupported argparse action"
REASON_UNSUPPORTED_NARGS = "unsupported nargs value"
REASON_CHOICES = "could not evaluate choices: {}"
REASON_SUBPARSER_CHOICES = "subparser choices are not a mapping"
REASON_SUBPARSER_VALUE = "subparser choice has an invalid value"
REASON_INSPECT = "could not inspect argparse action: {}"
REASON_HIDDEN_UNSUPPORTED = "unsupported hidden argparse action ignored"


def _qualname(obj):
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


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
                candidate = f"{base}_{n}"
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
            node["children"].append(self.command(child, name, names[1:], path + [name], one_line))
