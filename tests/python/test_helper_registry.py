"""The target helper's reading of `~/.conda/environments.txt` (helper/targets.py
`_registry_lines`, which replaces conda's `yield_lines` in `conda.core.envs_manager`):
anyone may plant that file, and the helper runs unsandboxed, as root reading every
user's. A huge sparse file, a FIFO, a symlink, a flood of lines: each is read at once,
within bounds, as no entries or as its few distinct ones. A sane registry gives conda's
own entries (with CCM_TEST_CONDA, compared with conda's `_clean_environments_txt`)."""

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

import programs

helper = programs.load("helper")


def read_soon(path, seconds=60):
    """`_registry_lines(path)`, failing the test if it has not returned within `seconds`
    (the read runs in a daemon thread: one that blocks is left behind)."""
    found = []
    thread = threading.Thread(target=lambda: found.append(helper._registry_lines(path)))
    thread.daemon = True
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"reading {path} blocked")
    return found[0]


class BoundedRegistryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_huge_sparse_file_is_no_entries(self):
        path = self.dir / "environments.txt"
        with open(path, "wb") as f:
            f.truncate(64 << 30)  # 64 GiB of NULs, one line, no block on disk
        self.assertEqual(read_soon(path), [])

    def test_a_file_just_over_the_bound_is_no_entries(self):
        path = self.dir / "environments.txt"
        path.write_bytes(b"/a\n" + b"#" * (helper._REGISTRY_BYTES - 2))
        self.assertEqual(read_soon(path), [])
        path.write_bytes(b"/a\n" + b"#" * (helper._REGISTRY_BYTES - 3))
        self.assertEqual(read_soon(path), ["/a"])

    def test_a_fifo_does_not_block(self):
        path = self.dir / "environments.txt"
        os.mkfifo(path)
        self.assertEqual(read_soon(path), [])

    def test_a_symlink_is_not_followed(self):
        real = self.dir / "real.txt"
        real.write_text("/opt/env\n")
        for target in (real, Path("/dev/zero")):
            with self.subTest(target=str(target)):
                link = self.dir / "environments.txt"
                if link.is_symlink():
                    link.unlink()
                link.symlink_to(target)
                self.assertEqual(read_soon(link), [])

    def test_a_flood_of_lines_is_read_once_each_and_capped(self):
        path = self.dir / "environments.txt"
        path.write_bytes(b"/\n" * (helper._REGISTRY_BYTES // 2))  # 8 M lines, 16 MiB
        self.assertEqual(read_soon(path), ["/"])
        path.write_text("/opt/env\n" * 100_000)
        self.assertEqual(read_soon(path), ["/opt/env"])
        path.write_text("".join(f"/opt/env{i}\n" for i in range(10_000)))
        entries = read_soon(path)
        self.assertEqual(len(entries), helper._REGISTRY_ENTRIES)
        self.assertEqual(entries[:2], ["/opt/env0", "/opt/env1"])

    def test_lines_past_the_line_cap_are_not_read(self):
        # The server's reading stops at the same line (src/host/sandbox/registries.rs).
        path = self.dir / "environments.txt"
        path.write_bytes(b"/\n" * helper._REGISTRY_LINES + b"/late\n")
        self.assertEqual(read_soon(path), ["/"])
        path.write_bytes(b"/\n" * (helper._REGISTRY_LINES - 1) + b"/last\n")
        self.assertEqual(read_soon(path), ["/", "/last"])

    def test_a_sane_registry_reads_as_conda_reads_it(self):
        # conda's `yield_lines`: universal newlines, each line stripped, empty lines and
        # `#` comments dropped (conda/gateways/disk/read.py:53-57).
        path = self.dir / "environments.txt"
        path.write_bytes(
            b"/opt/a\n  /opt/b  \r\n\n# a comment\n/opt/c\r/opt/a\n\t\n/opt/d with space"
        )
        self.assertEqual(read_soon(path), ["/opt/a", "/opt/b", "/opt/c", "/opt/d with space"])
        self.assertEqual(read_soon(self.dir / "missing.txt"), [])

    def test_a_line_that_is_not_text_is_skipped(self):
        path = self.dir / "environments.txt"
        path.write_bytes(b"/opt/a\n\xff\xfe\n/opt/b\n")
        self.assertEqual(read_soon(path), ["/opt/a", "/opt/b"])


# Run under conda's interpreter: the helper's patch applied, then conda's own
# `_clean_environments_txt` (conda/core/envs_manager.py:180-206) on the file named.
CLEAN = """
import json, sys
namespace = {"__name__": "ccm_helper"}
exec(compile(sys.stdin.read(), "<ccm helper>", "exec"), namespace)
import conda.core.envs_manager as envs_manager
envs_manager._rewrite_environments_txt = lambda *args, **kwargs: None
stock = sys.argv[2] == "stock"
if not stock:
    namespace["_writing_nothing"]()
print(json.dumps(list(envs_manager._clean_environments_txt(sys.argv[1]))))
"""


@unittest.skipUnless(os.environ.get("CCM_TEST_CONDA"), "needs CCM_TEST_CONDA")
class RealCondaRegistryTest(unittest.TestCase):
    """With conda's own code: the hostile registries on the patched reading, each in a
    process held to 2 GiB of address space and 120 s; a sane one compared with conda's
    unpatched reading."""

    @classmethod
    def setUpClass(cls):
        conda = Path(os.environ["CCM_TEST_CONDA"])
        cls.python = str(conda.resolve().parent / "python")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def clean(self, path, how="patched"):
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

        done = subprocess.run(
            [self.python, "-I", "-c", CLEAN, str(path), how],
            input=programs.source("helper"),
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limit,
        )
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        return json.loads(done.stdout)

    def test_hostile_registries_are_read_within_bounds(self):
        sparse = self.dir / "sparse.txt"
        with open(sparse, "wb") as f:
            f.truncate(64 << 30)
        flood = self.dir / "flood.txt"
        flood.write_bytes(b"/\n" * (8 << 20))
        fifo = self.dir / "fifo.txt"
        os.mkfifo(fifo)
        link = self.dir / "link.txt"
        link.symlink_to("/dev/zero")
        for path in (sparse, flood, fifo, link):
            with self.subTest(registry=path.name):
                # "/" is no environment (no conda-meta/history), so none is kept.
                self.assertEqual(self.clean(path), [])

    def test_a_sane_registry_gives_condas_result(self):
        envs = []
        for name in ("one", "two"):
            env = self.dir / "envs" / name
            (env / "conda-meta").mkdir(parents=True)
            (env / "conda-meta" / "history").write_text("")
            envs.append(str(env))
        registry = self.dir / "environments.txt"
        lines = [envs[0], "  " + envs[1] + "  ", "", "# comment", "/nowhere", envs[0]]
        registry.write_text("\n".join(lines) + "\n")
        stock = self.clean(registry, "stock")
        self.assertEqual(stock, [envs[0], envs[1], envs[0]])
        self.assertEqual(self.clean(registry), list(dict.fromkeys(stock)))


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
