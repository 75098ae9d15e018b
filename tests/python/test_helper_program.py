"""The discovery helper as a program: its output framing (one line of JSON on a private
copy of stdout, whatever conda prints), its modes and failures, and the round trip's
instrumented parser (helper/document.py, catalog.py, roundtrip.py, main.py). The program
runs as the server runs it, `python -c <source> <mode>`, on a small conda-shaped package
made here (without `-I`, so that PYTHONPATH can name it)."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

import programs

helper = programs.load("helper")

FAKE_CONDA = {
    "conda/__init__.py": """
        import os
        __version__ = "9.8.7"
        # What a noisy plugin or conda itself might do on import: both must reach stderr.
        print("printed on import")
        os.write(1, b"written to fd 1 on import\\n")
    """,
    "conda/cli/__init__.py": "",
    "conda/cli/conda_argparse.py": """
        import argparse
        import os

        def generate_parser():
            if os.environ.get("FAKE_CONDA_PARSER") == "raise":
                raise LookupError("no parser")
            parser = argparse.ArgumentParser(prog="conda")
            parser.add_argument("-V", "--version", action="version", version="9.8.7")
            commands = parser.add_subparsers(dest="cmd", required=True)
            install = commands.add_parser("install", aliases=["i"], help="Install.")
            install.add_argument("-n", "--name")
            install.add_argument("--count", type=int)
            install.add_argument("-c", "--channel", action="append")
            install.add_argument("--yes", action="store_true")
            install.add_argument("packages", nargs="*")
            run = commands.add_parser("run", help="Run.")
            run.add_argument("executable_call", nargs=argparse.REMAINDER)
            return parser
    """,
    "conda/plugins/__init__.py": "",
    "conda/plugins/hookspec.py": """
        class CondaSpecs:
            def conda_subcommands(self):
                pass

            def conda_solvers(self):
                pass

            not_a_hook = 1
    """,
    "fake_plugin/__init__.py": """
        def conda_subcommands():
            pass
    """,
    "fake_plugin-1.2.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: fake_plugin
        Version: 1.2
    """,
    "fake_plugin-1.2.dist-info/entry_points.txt": """
        [conda]
        fake-plugin = fake_plugin
    """,
}


class ProgramTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.site = Path(cls.tmp.name, "site")
        # The working directory of each run: empty (`-c` puts it on sys.path).
        cls.cwd = Path(cls.tmp.name, "cwd")
        cls.cwd.mkdir()
        for name, text in FAKE_CONDA.items():
            path = cls.site / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_helper(self, *args, stdin=None, path=None, env=None):
        environment = dict(os.environ, PYTHONPATH=str(path or self.site), **(env or {}))
        environment.pop("PYTHONSAFEPATH", None)
        return subprocess.run(
            [sys.executable, "-c", programs.source("helper"), *args],
            input=stdin,
            capture_output=True,
            env=environment,
            cwd=self.cwd,
            timeout=60,
        )

    def document(self, done, code=0):
        """The one line of stdout, as JSON, after checking the framing."""
        self.assertEqual(done.returncode, code, done.stderr.decode())
        self.assertTrue(done.stdout.endswith(b"\n"))
        self.assertEqual(done.stdout.count(b"\n"), 1, done.stdout)
        self.assertTrue(done.stdout.isascii())
        document = json.loads(done.stdout)
        self.assertEqual(document.pop("protocol"), 1)
        return document

    def test_catalog_on_a_private_stdout(self):
        done = self.run_helper("catalog")
        document = self.document(done)
        self.assertIn(b"printed on import", done.stderr)
        self.assertIn(b"written to fd 1 on import", done.stderr)
        catalog = document["catalog"]
        self.assertEqual((catalog["prog"], catalog["conda_version"]), ("conda", "9.8.7"))
        self.assertEqual(catalog["diagnostics"], [])
        install, run = catalog["root"]["children"]
        self.assertEqual((install["name"], install["aliases"]), ("install", ["i"]))
        self.assertEqual(
            [a["id"] for a in install["arguments"]],
            ["name", "count", "channel", "yes", "packages"],
        )
        self.assertEqual(run["arguments"][0]["nargs"], "remainder")
        self.assertEqual(
            document["plugins"],
            [
                {
                    "distribution": "fake_plugin",
                    "version": "1.2",
                    "entry_point": "fake-plugin",
                    "value": "fake_plugin",
                    "hooks": ["conda_subcommands"],
                }
            ],
        )
        self.assertIsNone(document["plugin_error"])
        self.assertEqual(document["interpreter"]["executable"], sys.executable)
        self.assertIn(str(self.site), document["interpreter"]["site_dirs"])
        self.assertEqual(document["conda_file"], str(self.site / "conda/__init__.py"))

    def test_plugins(self):
        document = self.document(self.run_helper("plugins"))
        self.assertEqual(document["conda_version"], "9.8.7")
        self.assertEqual([p["distribution"] for p in document["plugins"]], ["fake_plugin"])

    def test_parse_round_trip(self):
        batch = {
            "argvs": [
                ["install", "-n", "base", "--count", "3", "-c", "a", "-c", "b", "numpy"],
                ["i", "--yes"],
                ["run", "python", "-c", "print(1)"],
                ["install", "--count", "many"],
                ["remove"],
            ]
        }
        document = self.document(self.run_helper("parse", json.dumps(batch)))
        installed, aliased, ran, bad_count, unknown = document["results"]
        self.assertEqual(installed["path"], ["install"])
        self.assertEqual(
            installed["calls"],
            {
                "1|install|-n,--name|name": [{"option": "-n", "values": "base"}],
                "1|install|--count|count": [{"option": "--count", "values": 3}],
                "1|install|-c,--channel|channel": [
                    {"option": "-c", "values": "a"},
                    {"option": "-c", "values": "b"},
                ],
                "1|install|--yes|yes": [],
                "1|install||packages": [{"option": None, "values": ["numpy"]}],
            },
        )
        # The alias: the same parser, recorded under the name it was registered with first.
        self.assertEqual(aliased["path"], ["install"])
        self.assertEqual(
            aliased["calls"]["1|install|--yes|yes"], [{"option": "--yes", "values": []}]
        )
        self.assertEqual(aliased["calls"]["1|install||packages"], [])
        self.assertEqual(
            ran["calls"]["1|run||executable_call"],
            [{"option": None, "values": ["python", "-c", "print(1)"]}],
        )
        self.assertIn("invalid int value: 'many'", bad_count["error"])
        self.assertIn("invalid choice: 'remove'", unknown["error"])

    def test_parse_reads_its_batch_from_stdin(self):
        batch = json.dumps({"argvs": [["i"]]}).encode()
        document = self.document(self.run_helper("parse", stdin=batch))
        self.assertEqual(document["results"][0]["path"], ["install"])

    def test_an_unknown_mode(self):
        document = self.document(self.run_helper("bogus"), code=2)
        self.assertEqual(document, {"error": "mode", "detail": "bogus"})

    def test_no_conda(self):
        with tempfile.TemporaryDirectory() as empty:
            document = self.document(self.run_helper("catalog", path=empty), code=3)
        self.assertEqual(document, {"error": "import", "detail": "ModuleNotFoundError"})

    def test_a_parser_that_cannot_be_built(self):
        done = self.run_helper("catalog", env={"FAKE_CONDA_PARSER": "raise"})
        document = self.document(done, code=3)
        self.assertEqual(
            document, {"error": "parser", "detail": "LookupError", "conda_version": "9.8.7"}
        )

    def test_an_internal_error_is_a_document_too(self):
        # A batch without "argvs": a KeyError inside the mode, never a traceback instead.
        document = self.document(self.run_helper("parse", "{}"), code=3)
        self.assertEqual(document, {"error": "internal", "detail": "KeyError"})


class InstrumentTest(unittest.TestCase):
    """The round trip's instrumentation on parsers built here."""

    def parse(self, parser, argv):
        helper._instrument(parser, 0, [])
        return vars(parser.parse_args(argv))

    def test_every_action_records_what_it_received(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--flag", action="store_true")
        parser.add_argument("-v", action="count")
        parser.add_argument("--level", type=int, choices=[1, 2])
        parser.add_argument("--path", type=Path)
        parser.add_argument("items", nargs="+")
        found = self.parse(parser, ["-v", "-v", "--level", "2", "--path", "a/b", "x", "y"])
        self.assertEqual(
            found,
            {
                "0||--flag|flag": [],
                "0||-v|v": [{"option": "-v", "values": []}, {"option": "-v", "values": []}],
                "0||--level|level": [{"option": "--level", "values": 2}],
                # The argv text, not the converter's result.
                "0||--path|path": [{"option": "--path", "values": "a/b"}],
                "0|||items": [{"option": None, "values": ["x", "y"]}],
                "ccm_path:0": [],
            },
        )

    def test_a_parse_error_is_an_exception(self):
        parser = argparse.ArgumentParser()
        parser.add_argument("--level", type=int, required=True)
        for argv, message in (([], "required"), (["--level", "x"], "invalid int value")):
            with self.subTest(argv=argv):
                helper._instrument(parser, 0, [])
                with self.assertRaises(helper._ParseError) as raised:
                    parser.parse_args(argv)
                self.assertIn(message, str(raised.exception))

    def test_an_action_shared_between_parsers_is_instrumented_once_per_parser(self):
        common = argparse.ArgumentParser(add_help=False)
        common.add_argument("--json", action="store_true")
        parser = argparse.ArgumentParser()
        commands = parser.add_subparsers(dest="cmd")
        commands.add_parser("list", parents=[common])
        commands.add_parser("info", parents=[common])
        helper._instrument(parser, 0, [])
        for command in ("list", "info"):
            with self.subTest(command=command):
                found = vars(parser.parse_args([command, "--json"]))
                self.assertEqual(
                    found[f"1|{command}|--json|json"], [{"option": "--json", "values": []}]
                )
                self.assertEqual(found["ccm_path:1"], [command])
        # The parent itself is left alone.
        self.assertEqual(common.parse_args(["--json"]).json, True)


if __name__ == "__main__":
    unittest.main()
