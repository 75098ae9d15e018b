"""What the zygote preloads and how it notices change (zygote/watch.py, preload.py,
sources.py): the watching of imports for per-call state, in a forked child as the zygote
runs it; the refusal of every module that imports a refused one; the record of the files
its code came from."""

import ast
import os
import sys
import tempfile
import unittest
from pathlib import Path

import programs

zygote = programs.load("zygote")

# Modules for the watching, each doing one thing at import.
MODULES = {
    "ccm_t_clean": "import json\nVALUE = json.dumps([1])\n",
    "ccm_t_environ": "import os\nHOME = os.environ.get('HOME')\n",
    "ccm_t_getenv": "import os\nHOME = os.getenv('HOME')\n",
    "ccm_t_argv": "import sys\nPROGRAM = sys.argv[0]\n",
    "ccm_t_cwd": "import os\nHERE = os.getcwd()\n",
    "ccm_t_relative": "import os\nos.path.exists('relative/file')\n",
    "ccm_t_outside": "import os\nos.listdir('/')\n",
    "ccm_t_new_random": "import random\nGENERATOR = random.Random()\n",
    "ccm_t_draws": "import random\nTOKEN = random.random()\n",
    "ccm_t_thread": (
        "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    ),
    "ccm_t_fork_hook": "import os\nos.register_at_fork(after_in_child=lambda: None)\n",
    "ccm_t_fails": "raise ImportError('no')\n",
    "ccm_t_importer": "import ccm_t_middle\n",
    "ccm_t_middle": "from ccm_t_environ import HOME\n",
    "ccm_t_pkg/__init__.py": "",
    "ccm_t_pkg/sub.py": "import os\nos.getpid()\n",
    "ccm_t_uses_clean": "import ccm_t_clean\n",
}


def write_modules(root):
    for name, text in MODULES.items():
        path = root / (name if name.endswith(".py") else name + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        write_modules(Path(cls.tmp.name))
        sys.path.insert(0, cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        sys.path.remove(cls.tmp.name)
        cls.tmp.cleanup()

    def watch(self, names):
        """`_watch(names)` in a forked child, as the preloading runs it: (admitted, refused
        count, the reasons written to stderr)."""
        with tempfile.TemporaryFile() as log:
            saved = os.dup(2)
            os.dup2(log.fileno(), 2)
            try:
                result = zygote._in_child(zygote._watch, names)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            log.seek(0)
            reasons = log.read().decode()
        self.assertTrue(result and result[-1].startswith("-"), (result, reasons))
        return result[:-1], int(result[-1][1:]), reasons

    def test_a_clean_module_is_admitted_with_what_it_loads(self):
        admitted, refused, reasons = self.watch(["ccm_t_clean", "ccm_t_uses_clean"])
        self.assertEqual(refused, 0, reasons)
        self.assertIn("ccm_t_clean", admitted)
        self.assertIn("ccm_t_uses_clean", admitted)
        self.assertNotIn("random", admitted)
        self.assertNotIn("threading", admitted)

    def test_each_kind_of_per_call_state_is_refused(self):
        cases = {
            "ccm_t_environ": "_Environ.",
            "ccm_t_getenv": "_Environ.",
            "ccm_t_argv": "WatchedList.",
            "ccm_t_cwd": "getcwd",
            "ccm_t_relative": "os.stat",
            "ccm_t_outside": "os.listdir outside the prefix",
            "ccm_t_new_random": "Random.seed",
            "ccm_t_draws": "random.random",
            "ccm_t_thread": "a thread was started",
            "ccm_t_fork_hook": "register_at_fork",
            "ccm_t_fails": "its import failed",
        }
        for name, why in cases.items():
            with self.subTest(module=name):
                admitted, refused, reasons = self.watch([name])
                self.assertNotIn(name, admitted)
                self.assertGreaterEqual(refused, 1)
                line = next(
                    (line for line in reasons.splitlines() if f"preloaded: {name} (" in line), ""
                )
                self.assertIn(why, line, reasons)

    def test_a_module_that_imports_a_refused_one_is_refused(self):
        admitted, refused, reasons = self.watch(["ccm_t_clean", "ccm_t_importer"])
        self.assertIn("ccm_t_clean", admitted)
        for name in ("ccm_t_importer", "ccm_t_middle", "ccm_t_environ"):
            self.assertNotIn(name, admitted)
        self.assertEqual(refused, 3, reasons)
        self.assertIn("preloaded: ccm_t_importer (imports ccm_t_middle)", reasons)
        self.assertIn("preloaded: ccm_t_middle (imports ccm_t_environ)", reasons)

    def test_a_refused_submodule_leaves_its_package_alone(self):
        admitted, refused, reasons = self.watch(["ccm_t_pkg.sub"])
        self.assertEqual((admitted, refused), (["ccm_t_pkg"], 1), reasons)
        self.assertIn("preloaded: ccm_t_pkg.sub (os.getpid)", reasons)

    def test_the_watching_imports_its_own_modules_first(self):
        # Any module a function of watch.py imports is loaded before the watching notes what
        # is loaded: else it would be preloaded (random: the same numbers in every call).
        tree = ast.parse(
            next(p for p in programs.parts("zygote") if p.name == "watch.py").read_text()
        )
        imported = set()
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.Import):
                        imported.update(alias.name for alias in node.names)
                    elif isinstance(node, ast.ImportFrom):
                        imported.add(node.module)
        self.assertTrue(imported)
        self.assertLessEqual(imported, set(zygote.WATCHING_MODULES))


class RefusalsTest(unittest.TestCase):
    def test_refusal_spreads_to_importers_and_packages(self):
        refused = zygote._refusals(
            loaded=["a", "b", "c", "p", "p.q", "d"],
            tainted={"c": "os.getcwd"},
            failed={"d": "its import failed"},
            edges=[("a", "b"), ("b", "c"), ("p", "c"), ("e", "a")],
        )
        self.assertEqual(
            refused,
            {
                "c": "os.getcwd",
                "d": "its import failed",
                "b": "imports c",
                "a": "imports b",
                "e": "imports a",
                "p": "imports c",
                # A submodule needs its package.
                "p.q": "imports p",
            },
        )

    def test_nothing_refused(self):
        self.assertEqual(zygote._refusals(["a", "a.b"], {}, {}, [("a", "a.b")]), {})


class SourcesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_changed_file(self):
        path = self.root / "module.py"
        path.write_text("x = 1\n")
        sources = zygote.Sources()
        sources.watch(str(path))
        self.assertFalse(sources.stale())
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        self.assertTrue(sources.stale())

    def test_a_replaced_file(self):
        path = self.root / "module.py"
        path.write_text("x = 1\n")
        sources = zygote.Sources()
        sources.watch(str(path))
        (self.root / "new.py").write_text("x = 1\n")
        os.replace(self.root / "new.py", path)
        self.assertTrue(sources.stale())

    def test_a_file_that_appears(self):
        sources = zygote.Sources()
        sources.watch(str(self.root / "later.py"))
        self.assertFalse(sources.stale())
        (self.root / "later.py").write_text("")
        self.assertTrue(sources.stale())

    def test_new_modules_and_paths(self):
        (self.root / "ccm_t_sources.py").write_text("")
        sys.path.insert(0, str(self.root))
        try:
            sources = zygote.Sources()
            sources.watch_new_modules()
            __import__("ccm_t_sources")
            sources.watch_new_modules()
            sources.watch_paths()
        finally:
            sys.path.remove(str(self.root))
            sys.modules.pop("ccm_t_sources", None)
        self.assertIn(str(self.root / "ccm_t_sources.py"), sources.watched)
        self.assertIn(str(self.root), sources.watched)
        self.assertFalse(sources.stale())
        # A module installed later in a sys.path directory changes the directory.
        (self.root / "ccm_t_other.py").write_text("")
        self.assertTrue(sources.stale())

    def test_a_replaced_mapped_library(self):
        library = self.root / "libccm.so"
        library.write_bytes(b"\0" * 16)
        st = library.stat()
        maps = self.root / "maps"
        device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
        line = f"7f00-7f01 r-xp 00000000 {device} {st.st_ino} {library}\n"
        maps.write_text(line + "7f01-7f02 rw-p 00000000 00:00 0 \n")
        sources = zygote.Sources()
        sources.watch_mappings(str(maps))
        self.assertEqual(sources.mapped, {str(library): (st.st_dev, st.st_ino)})
        self.assertFalse(sources.stale())
        (self.root / "new.so").write_bytes(b"\0" * 16)
        os.replace(self.root / "new.so", library)
        self.assertTrue(sources.stale())

    def test_the_process_own_mappings(self):
        sources = zygote.Sources()
        sources.watch_mappings()
        self.assertTrue(sources.mapped)
        self.assertFalse(sources.stale())


if __name__ == "__main__":
    unittest.main()
