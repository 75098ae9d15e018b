# Part of the discovery helper (see document.py): the `parse` mode, the round trip. Each
# argv of a batch is parsed with the target's parser, every action replaced by a recorder,
# and the document says what each action received.
import argparse

if False:  # Names from the other parts of this program (one namespace; see document.py).
    from document import _emit


def _plain(value, depth=0):
    """JSON form of a parsed value: containers kept, anything else stringified."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (list, tuple)) and depth < 8:
        return [_plain(v, depth + 1) for v in value]
    return str(value)


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
        raise _ParseError(message or f"exit {status}")

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
    parser.set_defaults(**{f"ccm_path:{level}": path})


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
            results.append({"error": f"{type(exc).__name__}: {exc}"})
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
