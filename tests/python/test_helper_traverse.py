"""The discovery helper's traversal of an argparse parser into the catalog document
(helper/traverse.py), on parsers built here with every kind of action conda and its
plugins use."""

import argparse
import unittest

import programs

helper = programs.load("helper")


def entry(**fields):
    """A whole argument entry: the fields given, the rest as a plain optional has them."""
    whole = {
        "id": None,
        "dest": None,
        "flags": [],
        "action": "store",
        "nargs": None,
        "value_type": "string",
        "required": False,
        "choices": [],
        "dynamic_choices": False,
        "metavar": [],
        "help": None,
        "hidden": False,
        "default": None,
        "const": None,
    }
    unknown = set(fields) - set(whole)
    assert not unknown, unknown
    whole.update(fields)
    return whole


def inspect(parser):
    """(the root command node, the diagnostics) of `parser`."""
    inspector = helper._Inspector()
    root = inspector.command(parser, None, [], [], None)
    return root, inspector.diagnostics


def by_id(node):
    return {argument["id"]: argument for argument in node["arguments"]}


# Actions as conda and plugins define them (recognised by class name, from any module).
class LazyChoicesAction(argparse.Action):
    """conda.cli.helpers.LazyChoicesAction: choices computed on first use."""

    def __init__(self, option_strings, dest, choices_func, **kwargs):
        self.choices_func = choices_func
        self._cached = None
        super().__init__(option_strings, dest, **kwargs)

    @property
    def choices(self):
        if self._cached is None:
            self._cached = self.choices_func()
        return self._cached

    @choices.setter
    def choices(self, value):
        pass

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class ExtendConstAction(argparse.Action):
    """conda.cli.actions.ExtendConstAction."""

    def __init__(self, option_strings, dest, const, **kwargs):
        super().__init__(option_strings, dest, nargs="*", const=const, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, list(values or [self.const]))


class NullCountAction(argparse._CountAction):
    """conda.cli.actions.NullCountAction: a count by inheritance."""


class ValidatePackages(argparse._StoreAction):
    """A store by inheritance (conda.cli.helpers._ValidatePackages)."""


class Custom(argparse.Action):
    """A plugin's own action: nothing the compilers know how to drive."""

    def __call__(self, parser, namespace, values, option_string=None):
        pass


class Unprintable:
    """A value whose text raises: an action with it as its dest breaks introspection."""

    def __str__(self):
        raise ValueError("no text")


class TraverseTest(unittest.TestCase):
    def test_a_store_option_becomes_this_entry(self):
        parser = argparse.ArgumentParser(prog="conda")
        parser.add_argument("-n", "--name", metavar="ENV", help="Name of environment.")
        root, diagnostics = inspect(parser)
        self.assertEqual(
            root["arguments"],
            [
                entry(
                    id="name",
                    dest="name",
                    flags=["-n", "--name"],
                    metavar=["ENV"],
                    help="Name of environment.",
                )
            ],
        )
        self.assertEqual(diagnostics, [])
        self.assertEqual(
            {k: v for k, v in root.items() if k != "arguments"},
            {
                "name": None,
                "aliases": [],
                "summary": None,
                "help": None,
                "exclusive_groups": [],
                "children": [],
                "terminal": True,
                "passthrough": False,
                "raw_only": False,
            },
        )

    def test_every_action_kind(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--file", type=int)
        parser.add_argument("--yes", action="store_true")
        parser.add_argument("--no-pin", dest="pin", action="store_false")
        parser.add_argument("--json-const", action="store_const", const="json")
        parser.add_argument("-c", "--channel", action="append")
        parser.add_argument("--all", dest="which", action="append_const", const=3)
        parser.add_argument("--extra", action="extend", nargs="+")
        parser.add_argument("-v", "--verbose", action="count", default=0)
        parser.add_argument("--color", action=argparse.BooleanOptionalAction)
        parser.add_argument("-q", "--quiet", action=NullCountAction)
        parser.add_argument("--kinds", action=ExtendConstAction, const="all")
        parser.add_argument("--env", action=LazyChoicesAction, choices_func=lambda: ["a"])
        parser.add_argument("packages", action=ValidatePackages, nargs="*")
        root, diagnostics = inspect(parser)
        self.assertEqual(diagnostics, [])
        kinds = {a["id"]: a["action"] for a in root["arguments"]}
        self.assertEqual(
            kinds,
            {
                "file": "store",
                "yes": "store_true",
                "no_pin": "store_false",
                "json_const": "store_const",
                "channel": "append",
                "all": "append_const",
                "extra": "extend",
                "verbose": "count",
                "color": "boolean",
                "quiet": "count",
                "kinds": "extend_const",
                "env": "store",
                "packages": "store",
            },
        )
        arguments = by_id(root)
        self.assertEqual(
            arguments["yes"],
            entry(id="yes", dest="yes", flags=["--yes"], action="store_true", nargs=0)
            | {"default": False, "const": True},
        )
        self.assertEqual(
            arguments["color"],
            entry(
                id="color",
                dest="color",
                flags=["--color", "--no-color"],
                action="boolean",
                nargs=0,
            ),
        )
        self.assertEqual(arguments["no_pin"]["dest"], "pin")
        self.assertEqual(arguments["no_pin"]["default"], True)
        self.assertEqual(arguments["json_const"]["const"], "json")
        self.assertEqual(arguments["all"]["const"], 3)
        self.assertEqual(arguments["verbose"]["default"], 0)
        self.assertEqual(arguments["kinds"]["nargs"], "*")
        self.assertEqual(arguments["kinds"]["const"], "all")
        self.assertEqual(arguments["extra"]["nargs"], "+")
        self.assertEqual(arguments["file"]["value_type"], "integer")
        self.assertEqual(arguments["packages"]["flags"], [])

    def test_nargs(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--one")
        parser.add_argument("--maybe", nargs="?", const="c")
        parser.add_argument("--some", nargs="*")
        parser.add_argument("--many", nargs="+")
        parser.add_argument("--pair", nargs=2, metavar=("KEY", "VALUE"))
        parser.add_argument("command", nargs=argparse.REMAINDER)
        root, diagnostics = inspect(parser)
        self.assertEqual(diagnostics, [])
        nargs = {a["id"]: a["nargs"] for a in root["arguments"]}
        self.assertEqual(
            nargs,
            {
                "one": None,
                "maybe": "?",
                "some": "*",
                "many": "+",
                "pair": 2,
                "command": "remainder",
            },
        )
        self.assertEqual(by_id(root)["pair"]["metavar"], ["KEY", "VALUE"])
        self.assertEqual(by_id(root)["maybe"]["const"], "c")

    def test_an_unsupported_nargs_makes_the_command_raw_only(self):
        for bad in (-1, True, "{2,}"):
            with self.subTest(nargs=bad):
                parser = argparse.ArgumentParser()
                parser.add_argument("--fine")
                parser.add_argument("--odd").nargs = bad
                root, diagnostics = inspect(parser)
                self.assertEqual(list(by_id(root)), ["fine"])
                self.assertTrue(root["raw_only"])
                self.assertEqual(
                    diagnostics,
                    [
                        {
                            "path": [],
                            "reason": "unsupported nargs value",
                            "action_type": "argparse._StoreAction",
                            "blocking": True,
                        }
                    ],
                )

    def test_choices(self):
        class Members:
            def __iter__(self):
                return iter(["x", "y"])

            def __contains__(self, item):
                return item in ("x", "y")

        parser = argparse.ArgumentParser()
        parser.add_argument("--listed", choices=["b", "a"])
        parser.add_argument("--set", choices={"b", "c", "a"})
        parser.add_argument("--mapping", choices={"one": 1, "two": 2})
        parser.add_argument("--range", type=int, choices=range(3))
        parser.add_argument("--members", choices=Members())
        parser.add_argument("--lazy", action=LazyChoicesAction, choices_func=lambda: ("q", 7))
        parser.add_argument("--unset", action=LazyChoicesAction, choices_func=lambda: None)
        root, diagnostics = inspect(parser)
        self.assertEqual(diagnostics, [])
        found = {a["id"]: (a["choices"], a["dynamic_choices"]) for a in root["arguments"]}
        self.assertEqual(
            found,
            {
                "listed": (["b", "a"], False),
                "set": (["a", "b", "c"], False),
                "mapping": (["one", "two"], False),
                "range": (["0", "1", "2"], False),
                "members": (["x", "y"], True),
                "lazy": (["q", "7"], True),
                "unset": ([], True),
            },
        )

    def test_choices_that_fail_make_the_command_raw_only(self):
        def broken():
            raise RuntimeError("the plugin's lookup failed")

        parser = argparse.ArgumentParser()
        # (A metavar: argparse itself then never asks for the choices.)
        parser.add_argument("--env", action=LazyChoicesAction, choices_func=broken, metavar="E")
        root, diagnostics = inspect(parser)
        self.assertEqual(root["arguments"], [])
        self.assertTrue(root["raw_only"])
        self.assertEqual(
            diagnostics,
            [
                {
                    "path": [],
                    "reason": "could not evaluate choices: RuntimeError",
                    "action_type": "test_helper_traverse.LazyChoicesAction",
                    "blocking": True,
                }
            ],
        )

    def test_hidden_arguments(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--secret", help=argparse.SUPPRESS)
        parser.add_argument("spec", nargs="*", default=[], help=argparse.SUPPRESS)
        root, diagnostics = inspect(parser)
        self.assertEqual(diagnostics, [])
        self.assertEqual(
            root["arguments"],
            [
                entry(id="secret", dest="secret", flags=["--secret"], hidden=True),
                entry(id="spec", dest="spec", nargs="*", hidden=True, default=[]),
            ],
        )

    def test_a_custom_action(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--plain")
        parser.add_argument("--custom", action=Custom)
        root, diagnostics = inspect(parser)
        self.assertEqual(list(by_id(root)), ["plain"])
        self.assertTrue(root["raw_only"])
        self.assertEqual(
            diagnostics,
            [
                {
                    "path": [],
                    "reason": "unsupported argparse action",
                    "action_type": "test_helper_traverse.Custom",
                    "blocking": True,
                }
            ],
        )

    def test_a_hidden_optional_custom_action_is_ignored_but_a_required_one_is_not(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--internal", action=Custom, help=argparse.SUPPRESS)
        root, diagnostics = inspect(parser)
        self.assertEqual(root["arguments"], [])
        self.assertFalse(root["raw_only"])
        self.assertEqual(
            diagnostics,
            [
                {
                    "path": [],
                    "reason": "unsupported hidden argparse action ignored",
                    "action_type": "test_helper_traverse.Custom",
                    "blocking": False,
                }
            ],
        )
        parser = argparse.ArgumentParser()
        parser.add_argument("--internal", action=Custom, help=argparse.SUPPRESS, required=True)
        root, diagnostics = inspect(parser)
        self.assertTrue(root["raw_only"])
        self.assertEqual([d["blocking"] for d in diagnostics], [True])

    def test_an_action_that_breaks_introspection(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--opaque", dest=Unprintable())
        parser.add_argument("--plain")
        root, diagnostics = inspect(parser)
        self.assertEqual(list(by_id(root)), ["plain"])
        self.assertTrue(root["raw_only"])
        self.assertEqual(
            diagnostics,
            [
                {
                    "path": [],
                    "reason": "could not inspect argparse action: ValueError",
                    "action_type": "argparse._StoreAction",
                    "blocking": True,
                }
            ],
        )

    def test_exclusive_groups(self):
        parser = argparse.ArgumentParser()
        must = parser.add_mutually_exclusive_group(required=True)
        must.add_argument("-n", "--name")
        must.add_argument("-p", "--prefix")
        may = parser.add_mutually_exclusive_group()
        may.add_argument("--json", action="store_true")
        may.add_argument("--internal", action=Custom, help=argparse.SUPPRESS)
        may.add_argument("--quiet", action="store_true")
        only_unsupported = parser.add_mutually_exclusive_group()
        only_unsupported.add_argument("--other", action=Custom, help=argparse.SUPPRESS)
        root, _ = inspect(parser)
        self.assertEqual(
            root["exclusive_groups"],
            [
                {"members": ["name", "prefix"], "required": True},
                {"members": ["json", "quiet"], "required": False},
            ],
        )
        self.assertFalse(root["raw_only"])

    def test_nested_subcommands_and_aliases(self):
        parser = argparse.ArgumentParser(prog="conda")
        commands = parser.add_subparsers(dest="cmd", required=True)
        install = commands.add_parser(
            "install",
            aliases=["i", "add"],
            help="Install packages.",
            description="Installs a list of packages.",
        )
        install.add_argument("packages", nargs="*")
        env = commands.add_parser("env", help="Environments.")
        env_commands = env.add_subparsers(dest="env_cmd", required=True)
        create = env_commands.add_parser("create", aliases=["new"], help="Create one.")
        create.add_argument("--file", action=Custom)
        config = commands.add_parser("config")
        config.add_subparsers(dest="config_cmd").add_parser("show")
        commands.add_parser("secret", help=argparse.SUPPRESS)
        root, diagnostics = inspect(parser)
        self.assertFalse(root["terminal"])
        children = {c["name"]: c for c in root["children"]}
        self.assertEqual(list(children), ["install", "env", "config", "secret"])
        self.assertEqual(children["install"]["aliases"], ["i", "add"])
        self.assertEqual(children["install"]["help"], "Install packages.")
        self.assertEqual(children["install"]["summary"], "Installs a list of packages.")
        self.assertTrue(children["install"]["terminal"])
        self.assertEqual(list(by_id(children["install"])), ["packages"])
        self.assertIsNone(children["secret"]["help"])
        # Optional subcommands leave the command callable on its own.
        self.assertTrue(children["config"]["terminal"])
        self.assertEqual([c["name"] for c in children["config"]["children"]], ["show"])
        self.assertFalse(children["env"]["terminal"])
        (new,) = children["env"]["children"]
        self.assertEqual(
            (new["name"], new["aliases"], new["help"]), ("create", ["new"], "Create one.")
        )
        # A diagnostic names the command's path; only that command is raw-only.
        self.assertTrue(new["raw_only"])
        self.assertFalse(children["env"]["raw_only"])
        self.assertFalse(root["raw_only"])
        self.assertEqual(
            [(d["path"], d["reason"]) for d in diagnostics],
            [(["env", "create"], "unsupported argparse action")],
        )

    def test_subparsers_that_are_not_a_mapping_of_parsers(self):
        parser = argparse.ArgumentParser()
        commands = parser.add_subparsers(dest="cmd")
        commands.add_parser("list")
        commands.choices["broken"] = "not a parser"
        root, diagnostics = inspect(parser)
        self.assertTrue(root["raw_only"])
        self.assertEqual(root["children"], [])
        self.assertEqual(
            diagnostics,
            [
                {
                    "path": [],
                    "reason": "subparser choice has an invalid value",
                    "action_type": "argparse._SubParsersAction",
                    "blocking": True,
                }
            ],
        )
        parser = argparse.ArgumentParser()
        parser.add_subparsers(dest="cmd").choices = ["list"]
        root, diagnostics = inspect(parser)
        self.assertTrue(root["raw_only"])
        self.assertEqual(
            [d["reason"] for d in diagnostics], ["subparser choices are not a mapping"]
        )

    def test_a_greedy_parser_passes_the_rest_through(self):
        parser = argparse.ArgumentParser()
        parser.greedy = True
        self.assertTrue(inspect(parser)[0]["passthrough"])

    def test_ids_are_unique_within_a_command(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--foo-bar")
        parser.add_argument("--foo_bar", dest="other")
        parser.add_argument("foo-bar", nargs="?")
        parser.add_argument("-x")
        parser.add_argument("-y", "--why", dest="y")
        root, _ = inspect(parser)
        self.assertEqual(
            [(a["id"], a["dest"]) for a in root["arguments"]],
            [
                ("foo_bar", "foo_bar"),
                ("foo_bar_2", "other"),
                ("foo_bar_3", "foo-bar"),
                ("x", "x"),
                ("why", "y"),
            ],
        )

    def test_help_texts(self):
        parser = argparse.ArgumentParser(prog="conda")
        parser.add_argument("--timeout", type=float, default=5.0, help="Seconds (%(default)s).")
        parser.add_argument("--who", help="Run by %(prog)s, 100%% sure.")
        # Not a format: the text as it is, "%%" read as "%".
        parser.add_argument("--broken", help="100%% sure, or 100%")
        # A format after all (`% s`, the whole mapping), as argparse's own help has it.
        parser.add_argument("--space", help="100% sure")
        parser.add_argument("--hidden-default", default=argparse.SUPPRESS, help="%(default)s")
        helps = {a["id"]: a["help"] for a in inspect(parser)[0]["arguments"]}
        space = helps.pop("space")
        self.assertTrue(space.startswith("100{") and space.endswith("ure"), space)
        self.assertEqual(
            helps,
            {
                "timeout": "Seconds (5.0).",
                "who": "Run by conda, 100% sure.",
                "broken": "100% sure, or 100%",
                "hidden_default": "%(default)s",
            },
        )

    def test_defaults_and_consts_only_as_plain_json(self):
        cases = [
            (5, 5),
            (2.5, 2.5),
            ("text", "text"),
            (True, True),
            (2**63 - 1, 2**63 - 1),
            (2**63, None),
            (float("nan"), None),
            (float("inf"), None),
            ([1, "a", None], [1, "a", None]),
            ((1, 2), [1, 2]),
            ([1, object()], None),
            ([[[[[1]]]]], None),
            (object(), None),
            ({"a": 1}, None),
        ]
        for default, expected in cases:
            with self.subTest(default=default):
                parser = argparse.ArgumentParser()
                parser.add_argument("--value", default=default)
                parser.add_argument("--flag", action="store_const", const=default)
                found = by_id(inspect(parser)[0])
                self.assertEqual(found["value"]["default"], expected)
                self.assertEqual(found["flag"]["const"], expected)

    def test_value_types(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--count", type=int)
        parser.add_argument("--ratio", type=float)
        parser.add_argument("--path", type=str)
        parser.add_argument("--other", type=lambda text: text)
        types = {a["id"]: a["value_type"] for a in inspect(parser)[0]["arguments"]}
        self.assertEqual(
            types, {"count": "integer", "ratio": "number", "path": "string", "other": "string"}
        )


if __name__ == "__main__":
    unittest.main()
