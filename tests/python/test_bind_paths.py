"""The plan binding's paths (bind/program/paths.py `bound_paths`, `check_paths`,
`check_links`): where each path of a call leads at preview time and which file it names,
and the run's check that it still leads there, names that file and no hard link, and is
not the audit log, on directories built here."""

import json
import os
import pathlib
import tempfile
import types
import unittest

import programs

bind = programs.load("bind")


def read(path):
    with open(path) as handle:
        return handle.read()


class BoundPaths(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = os.path.realpath(self.dir.name)
        for sub in ("project/envs", "project/sub", "outside"):
            os.makedirs(os.path.join(self.root, sub))
        self.here = os.getcwd()
        os.chdir(os.path.join(self.root, "project"))

    def tearDown(self):
        os.chdir(self.here)
        self.dir.cleanup()

    def swap(self, name, target):
        """`name` (in the project) replaced by a symlink to `target`."""
        os.rename(name, name + ".old")
        os.symlink(os.path.join(self.root, target), name)

    def test_the_values_conda_may_read_as_paths(self):
        argv = ["config", "--file", "rc", "--prefix=envs/e1", "-penv", "-y", "--json", "-c"]
        argv += ["https://x.invalid/chan", "numpy>=1"]
        self.assertEqual(
            bind.path_values(argv),
            ["config", "rc", "envs/e1", "env", "https://x.invalid/chan", "numpy>=1"],
        )
        # Tokens argparse reads as values though they start with `-` (attack 41 W1), and
        # both readings of a short option's attached value (`-fout=x` is `-f out=x` to
        # argparse); a reading that names nothing costs nothing.
        argv = ["export", "--file", "-1", "-.5", "-", "-a b", "-fout=x", "--", "-x", "--y"]
        self.assertEqual(
            bind.path_values(argv),
            ["export", "-1", "-.5", "5", "-", "-a b", " b", "x", "out=x", "-x", "--y"],
        )
        self.assertEqual(bind.path_values(["list", "-x", "--json", "-n", "base"]), ["list", "base"])
        # A URL's text is a path too: conda opens some values as written (attacks 39, 40).
        os.symlink(os.path.join(self.root, "outside"), "https:")
        shown = bind.bound_paths(["export", "--file", "https://passwd"], None, None)
        self.assertEqual(
            shown["argv"][1][:2], ["https://passwd", os.path.join(self.root, "outside/passwd")]
        )

    def test_a_file_url_names_the_file_conda_reads(self):
        # conda's `url_to_path`: the local hosts dropped, `%XX` decoded, nothing expanded
        # (attack 42 X1: the text after `://` named `<cwd>/localhost/...`).
        cases = {
            "file:///srv/env.yml": "/srv/env.yml",
            "file://localhost/srv/env.yml": "/srv/env.yml",
            "file://127.0.0.1/srv/env.yml": "/srv/env.yml",
            "file:///srv/p/%2e%2e/env.yml": "/srv/p/../env.yml",
            "file://other/srv/env.yml": "//other/srv/env.yml",
            "file:///$HOME/env.yml": "/$HOME/env.yml",
        }
        for url, path in cases.items():
            self.assertEqual(bind.locate(url), path, url)
        self.assertIsNone(bind.locate("https://example.com/env.yml"))
        self.assertEqual(bind.locate("env.yml"), os.path.join(os.getcwd(), "env.yml"))

    def test_unchanged_paths_pass(self):
        argv = ["create", "-p", "envs/e1"]
        target = os.path.join(self.root, "project/envs/e1")
        shown = bind.bound_paths(argv, target, None)
        bind.check_paths(shown, argv, target, None, None)

    def test_a_swapped_parent_of_the_target_stops_the_run(self):
        argv = ["create", "--prefix=envs/e1"]
        target = os.path.join(self.root, "project/envs/e1")
        shown = bind.bound_paths(argv, target, None)
        self.swap("envs", "outside")
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, argv, target, None, None)
        outside = os.path.join(self.root, "outside/e1")
        self.assertIn(f"now leads to {outside}", str(stopped.exception))

    def test_a_new_target_the_server_made_for_the_run_is_still_absent(self):
        argv = ["create", "-p", "envs/e1"]
        target = os.path.join(self.root, "project/envs/e1")
        shown = bind.bound_paths(argv, target, None)
        self.assertEqual(bind._state(target), "absent")
        os.mkdir(target)
        self.assertEqual(bind._state(target), "a directory that is not an environment")
        os.environ["CCM_NEW_TARGETS"] = json.dumps([target])
        try:
            self.assertEqual(bind._state(target), "absent")
            bind.check_paths(shown, argv, target, None, None)
            # Written meanwhile (or another directory's): no longer the server's.
            open(os.path.join(target, "planted"), "w").close()
            self.assertEqual(bind._state(target), "a directory that is not an environment")
            os.environ["CCM_NEW_TARGETS"] = json.dumps([target + "x"])
            os.remove(os.path.join(target, "planted"))
            self.assertEqual(bind._state(target), "a directory that is not an environment")
        finally:
            del os.environ["CCM_NEW_TARGETS"]

    def test_an_output_file_swapped_for_a_symlink_stops_the_run(self):
        with open("x.yml", "w") as handle:
            handle.write("channels: []\n")
        argv = ["config", "--file", "x.yml"]
        shown = bind.bound_paths(argv, None, "x.yml")
        os.remove("x.yml")
        os.symlink(os.path.join(self.root, "outside/victim.yml"), "x.yml")
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, argv, None, "x.yml", None)
        self.assertIn("x.yml now leads to ", str(stopped.exception))

    def test_a_file_the_command_line_names_is_written_where_the_question_showed(self):
        """`guard_written_files` (attack 35 Q3): `open` and `io.open` for writing a path
        of the argv open it through descriptors from the real path the preview
        recorded; the same file turned into a symlink, or its directory into one, after
        the check fails the write; reads and other paths are untouched."""
        import builtins
        import io

        argv = ["export", "--file", "sub/env.yml"]
        shown = bind.bound_paths(argv, None, None)
        victim = os.path.join(self.root, "outside", "env.yml")
        with open(victim, "w") as handle:
            handle.write("keep me")
        state = types.SimpleNamespace(mode=types.SimpleNamespace(plan={"paths": shown}))
        saved = builtins.open, io.open
        try:
            bind.guard_written_files(state)
            with open("sub/env.yml", "w") as handle:
                handle.write("exported")
            with pathlib.Path(self.root, "project/sub/env.yml").open("a") as handle:
                handle.write(" twice")
            self.assertEqual(read("sub/env.yml"), "exported twice")
            os.remove("sub/env.yml")
            os.symlink(victim, "sub/env.yml")
            self.assertEqual(read("sub/env.yml"), "keep me")
            with self.assertRaises(OSError):
                open("sub/env.yml", "w")
            os.remove("sub/env.yml")
            self.swap("sub", "outside")
            with self.assertRaises(OSError):
                open("sub/env.yml", "w")
            with open("other.txt", "w") as handle:
                handle.write("elsewhere, conda's own open")
            # The target's `conda-meta/pinned`, read and written (attack 36 R2).
            os.makedirs("envs/e1/conda-meta")
            target = os.path.join(self.root, "project/envs/e1")
            shown = bind.bound_paths(["doctor", "-p", "envs/e1"], target, None)
            state.mode.plan = {"paths": shown, "prefix": target}
            bind.guard_written_files(state)
            pinned = os.path.join(target, "conda-meta", "pinned")
            with open(pinned, "w") as handle:
                handle.write("pkga\n")
            self.assertEqual(read(pinned), "pkga\n")
            os.remove(pinned)
            os.symlink(victim, pinned)
            for mode in ("r", "w"):
                with self.assertRaises(OSError):
                    open(pinned, mode)
        finally:
            builtins.open, io.open = saved
        self.assertEqual(read(victim), "keep me")
        self.assertEqual(read("other.txt"), "elsewhere, conda's own open")

    def test_each_path_is_recorded_as_its_text_names_it_and_as_it_leads(self):
        """What the question compares (attack 37 S2, attack 38 T1)."""
        os.symlink(os.path.join(self.root, "outside"), "out")
        home = os.path.expanduser("~")
        shown = bind.bound_paths(["export", "--file", "out/x", "-f~/y", "sub/z"], None, None)
        entries = {e[0]: (e[1], e[3]) for e in shown["argv"]}
        self.assertEqual(
            entries["out/x"],
            (os.path.join(self.root, "outside/x"), os.path.join(self.root, "project/out/x")),
        )
        self.assertEqual(entries["~/y"][1], os.path.join(self.root, "project/~/y"))
        self.assertEqual(entries["~/y"][0], os.path.join(os.path.realpath(home), "y"))
        sub = os.path.join(self.root, "project/sub/z")
        self.assertEqual(entries["sub/z"], (sub, sub))

    def test_an_input_file_that_is_a_fifo_stops_the_run_at_once(self):
        """`read_limited` (attack 37): a FIFO in an input file's place would have held
        the run until the call's timeout."""
        os.mkfifo("env.yml")
        with self.assertRaises(bind.Changed) as stopped:
            bind.read_limited("env.yml", 1000)
        self.assertIn("env.yml is not a regular file", str(stopped.exception))

    def test_a_swapped_working_directory_stops_the_run(self):
        os.chdir("sub")
        shown = bind.bound_paths(["export"], None, None)
        os.chdir("..")
        self.swap("sub", "outside")
        os.chdir("sub")
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, ["export"], None, None, None)
        self.assertIn("the working directory ", str(stopped.exception))

    def test_no_path_may_be_the_audit_log(self):
        log = os.path.join(self.root, "outside/audit.jsonl")
        with open(log, "w") as handle:
            handle.write("{}\n")
        st = os.stat(log)
        os.symlink(log, "out.yml")
        argv = ["export", "--file=out.yml"]
        shown = bind.bound_paths(argv, None, None)
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, argv, None, None, [st.st_dev, st.st_ino])
        self.assertIn("out.yml is the audit log", str(stopped.exception))
        bind.check_paths(shown, argv, None, None, [st.st_dev, st.st_ino + 1])

    def hard_link_outside(self, name):
        victim = os.path.join(self.root, "outside/victim.sh")
        with open(victim, "w") as handle:
            handle.write("# the user's shell rc\n")
        os.link(victim, name)

    def test_a_hard_link_named_at_preview_time_is_not_bound(self):
        self.hard_link_outside("x.yml")
        argv = ["config", "--file", "x.yml"]
        shown = bind.bound_paths(argv, None, "x.yml")
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_links(shown, None)
        self.assertIn("x.yml names a file with 2 links (a hard link)", str(stopped.exception))

    def test_an_output_file_swapped_for_a_hard_link_stops_the_run(self):
        with open("x.yml", "w") as handle:
            handle.write("channels: []\n")
        argv = ["config", "--file", "x.yml"]
        shown = bind.bound_paths(argv, None, "x.yml")
        bind.check_links(shown, None)
        self.hard_link_outside("x.new")
        os.replace("x.new", "x.yml")
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, argv, None, "x.yml", None)
        self.assertIn("x.yml now names another file", str(stopped.exception))

    def test_a_file_that_gains_a_link_stops_the_run(self):
        with open("x.yml", "w") as handle:
            handle.write("channels: []\n")
        argv = ["config", "--file", "x.yml"]
        shown = bind.bound_paths(argv, None, "x.yml")
        os.link("x.yml", os.path.join(self.root, "outside/x.yml"))
        with self.assertRaises(bind.Changed) as stopped:
            bind.check_paths(shown, argv, None, "x.yml", None)
        self.assertIn("x.yml names a file with 2 links", str(stopped.exception))

    def test_the_targets_in_place_files_are_no_hard_links(self):
        target = os.path.join(self.root, "project/envs/e1")
        os.makedirs(os.path.join(target, "conda-meta"))
        argv = ["install", "-p", "envs/e1", "barpkg"]
        shown = bind.bound_paths(argv, target, None)
        bind.check_links(shown, target)
        for name in bind.IN_PLACE:
            path = os.path.join(target, name)
            self.hard_link_outside(path)
            with self.assertRaises(bind.Changed) as stopped:
                bind.check_paths(shown, argv, target, None, None)
            self.assertIn(
                f"the file {path} of the target environment has 2 links", str(stopped.exception)
            )
            with self.assertRaises(bind.Changed):
                bind.check_links(shown, target)
            os.remove(path)
            os.remove(os.path.join(self.root, "outside/victim.sh"))
        bind.check_paths(shown, argv, target, None, None)


if __name__ == "__main__":
    unittest.main()


class ForeignLink(unittest.TestCase):
    """`foreign_link`: a prefix the walk cannot see whole (a name past PATH_MAX) may hide a
    link, so it is reported; a prefix that does not exist yet holds none."""

    def test_a_prefix_the_walk_cannot_see_whole_is_reported(self):
        with tempfile.TemporaryDirectory() as top:
            prefix = os.path.join(top, "env")
            self.assertIsNone(bind.foreign_link(prefix))
            with open(os.path.join(top, "bashrc"), "w") as fh:
                fh.write("rc")
            os.mkdir(prefix)
            fd = os.open(prefix, os.O_DIRECTORY)
            try:
                for _ in range(20):
                    os.mkdir("d" * 250, dir_fd=fd)
                    inner = os.open("d" * 250, os.O_DIRECTORY, dir_fd=fd)
                    os.close(fd)
                    fd = inner
                outside = os.open(top, os.O_DIRECTORY)
                os.link("bashrc", "evil", src_dir_fd=outside, dst_dir_fd=fd)
                os.close(outside)
            finally:
                os.close(fd)
            self.assertIsNotNone(bind.foreign_link(prefix))
            self.assertIsNone(bind.foreign_link(os.path.join(top, "missing")))


class Unshare(unittest.TestCase):
    """`unshare`: in a bounded confirmed run, every regular file of the target with other
    links becomes a file of its own (bytes and mode kept), so a write there reaches no
    other name; symlinks are left alone; a prefix that does not exist holds nothing."""

    def test_a_shared_file_becomes_its_own(self):
        with tempfile.TemporaryDirectory() as top:
            prefix = os.path.join(top, "env")
            bind.unshare(prefix)
            os.makedirs(os.path.join(prefix, "bin", "deep"))
            cache = os.path.join(top, "cache-file")
            with open(cache, "w") as fh:
                fh.write("shared\n")
            os.chmod(cache, 0o751)
            linked = os.path.join(prefix, "bin", "deep", "python")
            os.link(cache, linked)
            os.symlink(cache, os.path.join(prefix, "bin", "link"))
            bind.unshare(prefix)
            self.assertEqual(os.stat(linked).st_nlink, 1)
            self.assertEqual(os.stat(linked).st_mode & 0o7777, 0o751)
            with open(linked, "a") as fh:
                fh.write("written\n")
            with open(cache) as fh:
                self.assertEqual(fh.read(), "shared\n")
            self.assertEqual(os.stat(cache).st_nlink, 1)
            self.assertTrue(os.path.islink(os.path.join(prefix, "bin", "link")))
            self.assertEqual(sorted(os.listdir(os.path.join(prefix, "bin", "deep"))), ["python"])

    def test_the_copy_keeps_no_special_bit_its_owner_and_its_holes(self):
        """Attack 4 U1, U5: a set-user-ID file with two links loses the bit in its copy and
        (under root) stays its owner's; a sparse file keeps its holes; past the budget
        the call is refused."""
        with tempfile.TemporaryDirectory() as top:
            prefix = os.path.join(top, "env")
            os.makedirs(prefix)
            tool = os.path.join(prefix, "tool")
            with open(tool, "w") as fh:
                fh.write("#!/bin/sh\n")
            if os.geteuid() == 0:
                os.chown(tool, 65534, 65534)
            os.chmod(tool, 0o6755)
            os.link(tool, os.path.join(top, "tool-elsewhere"))
            big = os.path.join(prefix, "big")
            with open(big, "wb") as fh:
                fh.truncate(1 << 30)
                fh.seek((1 << 30) - 4)
                fh.write(b"tail")
            os.link(big, os.path.join(top, "big-elsewhere"))
            blocks = os.stat(big).st_blocks
            bind.unshare(prefix)
            st = os.stat(tool)
            self.assertEqual((st.st_nlink, st.st_mode & 0o7777), (1, 0o755))
            if os.geteuid() == 0:
                self.assertEqual((st.st_uid, st.st_gid), (65534, 65534))
            st = os.stat(big)
            self.assertEqual((st.st_nlink, st.st_size), (1, 1 << 30))
            self.assertLessEqual(st.st_blocks, blocks + 8)
            with open(big, "rb") as fh:
                fh.seek((1 << 30) - 4)
                self.assertEqual(fh.read(), b"tail")
            more = os.path.join(prefix, "more")
            with open(more, "wb") as fh:
                fh.write(b"x" * 100)
            os.link(more, os.path.join(top, "more-elsewhere"))
            saved = bind.UNSHARE_MAX_BYTES
            bind.UNSHARE_MAX_BYTES = 10
            try:
                with self.assertRaises(bind.Changed):
                    bind.unshare(prefix)
            finally:
                bind.UNSHARE_MAX_BYTES = saved
            self.assertEqual(os.stat(more).st_nlink, 2)

    def test_a_deep_chain_is_refused(self):
        """Attack 4 U2: deeper than UNSHARE_MAX_DEPTH is refused (Changed), not a
        RecursionError."""
        with tempfile.TemporaryDirectory() as top:
            prefix = os.path.join(top, "env")
            os.makedirs(prefix)
            fd = os.open(prefix, os.O_RDONLY)
            try:
                for _ in range(bind.UNSHARE_MAX_DEPTH + 5):
                    os.mkdir("d", dir_fd=fd)
                    sub = os.open("d", os.O_RDONLY, dir_fd=fd)
                    os.close(fd)
                    fd = sub
            finally:
                os.close(fd)
            with self.assertRaises(bind.Changed):
                bind.unshare(prefix)
