"""The plan binding's check of what conda would run or delete from the target itself
(bind/program/target.py `check_target_code`), on prefixes and package caches built here,
with conda's context stood in for (the check reads only `context.pkgs_dirs`)."""

import enum
import hashlib
import importlib
import json
import os
import pathlib
import shutil
import stat
import sys
import tempfile
import types
import unittest

import programs

bind = programs.load("bind")


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


class LinkType(enum.Enum):
    """conda's `LinkType` (conda/models/enums.py)."""

    hardlink = 1
    softlink = 2
    copy = 3
    directory = 4


class PathType(enum.Enum):
    """conda's `PathType`, as far as the check reads it."""

    hardlink = "hardlink"
    softlink = "softlink"
    directory = "directory"


class Action(types.SimpleNamespace):
    """A conda action as the staging reads it (conda/core/path_actions.py:250)."""

    @property
    def source_full_path(self):
        return os.path.join(self.source_prefix, self.source_short_path)


class PrefixReplaceLinkAction(Action):
    """conda's action for a file whose prefix it replaces: `verify` makes the replaced
    copy (the intermediate) from `source_full_path` (conda/core/path_actions.py:564)."""

    def verify(self):
        self.intermediate = read(self.source_full_path)
        return getattr(self, "error", None)


def restore_modules(saved):
    """Put back the modules a test stood in for (`saved`: name -> module or None)."""
    for key, value in saved.items():
        if value is None:
            sys.modules.pop(key, None)
        else:
            sys.modules[key] = value


def read(path):
    with open(path) as handle:
        return handle.read()


def record(name, files=(), paths_data=(), md5="0" * 32):
    """An installed record as conda's `PrefixRecord` offers it to the check."""
    data = types.SimpleNamespace(paths=[types.SimpleNamespace(path=p) for p in paths_data])
    return types.SimpleNamespace(
        name=name,
        fn=f"{name}-1.0-0.conda",
        md5=md5,
        sha256=None,
        files=list(files),
        paths_data=data,
    )


class TargetCode(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = os.path.realpath(self.dir.name)
        self.prefix = os.path.join(root, "env")
        self.pkgs = os.path.join(root, "pkgs")
        os.makedirs(os.path.join(self.prefix, "bin"))
        os.makedirs(self.pkgs)
        # conda's context, as far as the check reads it.
        context = types.SimpleNamespace(pkgs_dirs=(self.pkgs,))
        self.saved = {k: sys.modules.get(k) for k in ("conda", "conda.base", "conda.base.context")}
        conda = types.ModuleType("conda")
        base = types.ModuleType("conda.base")
        module = types.ModuleType("conda.base.context")
        module.context = context
        conda.base, base.context = base, module
        sys.modules.update({"conda": conda, "conda.base": base, "conda.base.context": module})

    def tearDown(self):
        restore_modules(self.saved)
        self.dir.cleanup()

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)

    def script(self, name, action):
        return os.path.join(self.prefix, "bin", f".{name}-{action}.sh")

    def cache(self, prec, scripts, files=None, entries=None):
        """`prec`'s package extracted in the package cache, with these scripts (in `bin/`)
        and files (path in the package: text), and `info/paths.json` recording each with
        its sha256 (`entries`: path -> extra fields of its entry)."""
        extracted = os.path.join(self.pkgs, prec.fn[: -len(".conda")])
        self.write(
            os.path.join(extracted, "info", "repodata_record.json"), json.dumps({"md5": prec.md5})
        )
        held = {os.path.join("bin", name): text for name, text in scripts.items()}
        held.update(files or {})
        paths = []
        for path, text in held.items():
            self.write(os.path.join(extracted, path), text)
            entry = {"_path": path, "path_type": "hardlink", "sha256": sha256(text)}
            entry.update((entries or {}).get(path, {}))
            paths.append(entry)
        self.write(
            os.path.join(extracted, "info", "paths.json"),
            json.dumps({"paths": paths, "paths_version": 1}),
        )
        return extracted

    def check(self, unlink=(), link=()):
        setup = types.SimpleNamespace(unlink_precs=list(unlink), link_precs=list(link))
        bind.check_target_code(types.SimpleNamespace(prefix_setups={self.prefix: setup}))

    def refused(self, expected, **txn):
        with self.assertRaises(bind.Changed) as caught:
            self.check(**txn)
        self.assertIn(expected, str(caught.exception))

    def test_a_post_link_script_is_deleted_first_only_when_the_removed_record_files_list_it(self):
        self.write(self.script("pkga", "post-link"), "echo old\n")
        new = record("pkga")
        # An update: the older record lists the script in `files`, which unlinking deletes.
        self.check(unlink=[record("pkga", files=["bin/.pkga-post-link.sh"])], link=[new])
        # In `paths_data` alone (an edited record): conda unlinks `files` only, so the
        # script would stay and run as the new version's.
        older = record("pkga", paths_data=["bin/.pkga-post-link.sh"])
        self.refused("is in the target before pkga is installed", unlink=[older], link=[new])
        # Another package's record listing it deletes nothing of pkga's.
        other = record("pkgb", files=["bin/.pkga-post-link.sh"])
        self.refused("is in the target before pkga is installed", unlink=[other], link=[new])
        # Nothing in the target: nothing to check.
        os.remove(self.script("pkga", "post-link"))
        self.check(link=[new])

    def test_a_record_to_remove_lists_only_paths_inside_the_environment(self):
        for files, data in (
            (["lib/ok", "../../victim.txt"], []),
            (["lib/ok"], ["share/../../../victim.txt"]),
            (["/etc/passwd"], []),
        ):
            with self.subTest(files=files, data=data):
                self.refused(
                    "a path outside the environment",
                    unlink=[record("pkga", files=files, paths_data=data)],
                )
        self.check(unlink=[record("pkga", files=["lib/ok", "share/a..b"])])

    def test_an_unlink_script_in_the_target_is_the_cached_package_copy(self):
        prec = record("pkga", files=["bin/.pkga-pre-unlink.sh"])
        self.write(self.script("pkga", "pre-unlink"), "echo mine\n")
        # No package cache holds the package: it cannot be checked.
        self.refused("its package is in no package cache, or records no sha256", unlink=[prec])
        # A cached copy of another hash is not the package's.
        self.cache(record("pkga", md5="1" * 32), {".pkga-pre-unlink.sh": "echo mine\n"})
        self.refused("its package is in no package cache, or records no sha256", unlink=[prec])
        # The package's copy, other bytes; then the same bytes.
        self.cache(prec, {".pkga-pre-unlink.sh": "echo shipped\n"})
        self.refused("its package did not install that file", unlink=[prec])
        self.write(self.script("pkga", "pre-unlink"), "echo shipped\n")
        self.check(unlink=[prec])
        # A post-unlink script the package does not ship.
        self.write(self.script("pkga", "post-unlink"), "echo planted\n")
        self.refused("as the post-unlink script of pkga", unlink=[prec])
        os.remove(self.script("pkga", "post-unlink"))
        # The right bytes through a symlink (which could be turned elsewhere) are refused.
        shipped = os.path.join(self.pkgs, "pkga-1.0-0", "bin", ".pkga-pre-unlink.sh")
        os.remove(self.script("pkga", "pre-unlink"))
        os.symlink(shipped, self.script("pkga", "pre-unlink"))
        self.refused("its package did not install that file", unlink=[prec])

    def test_a_menu_file_removing_a_package_hands_to_menuinst_is_the_cached_copy(self):
        prec = record("pkga", files=["Menu/pkga.json", "share/pkga/data.txt"])
        self.write(os.path.join(self.prefix, "Menu", "pkga.json"), '{"menu_items": []}')
        self.refused("the menu file of pkga, which cannot be checked", unlink=[prec])
        self.cache(prec, {}, files={"Menu/pkga.json": '{"x": 1}'})
        self.refused("as the menu file of pkga, and its package did not install", unlink=[prec])
        self.write(os.path.join(self.prefix, "Menu", "pkga.json"), '{"x": 1}')
        self.check(unlink=[prec])
        # Listed but absent: nothing for menuinst to read.
        os.remove(os.path.join(self.prefix, "Menu", "pkga.json"))
        self.check(unlink=[record("pkga", files=["menu/other.JSON"])])

    def test_a_path_to_remove_through_a_directory_leading_outside_stops_the_run(self):
        outside = os.path.join(os.path.dirname(self.prefix), "outside")
        os.makedirs(outside)
        os.makedirs(os.path.join(self.prefix, "share", "inner"))
        prec = record("pkga", files=["share/pkga/data.txt"])
        self.check(unlink=[prec])
        # A directory of the target made a symlink to one outside; one inside is fine.
        os.symlink(outside, os.path.join(self.prefix, "share", "pkga"))
        self.refused("whose directory leads outside the environment", unlink=[prec])
        os.remove(os.path.join(self.prefix, "share", "pkga"))
        os.symlink("inner", os.path.join(self.prefix, "share", "pkga"))
        self.check(unlink=[prec])

    def test_the_actions_paths_lie_inside_the_target_when_they_run(self):
        outside = os.path.join(os.path.dirname(self.prefix), "outside")
        os.makedirs(outside)

        def action(short, prefix=self.prefix, many=False):
            if many:
                return types.SimpleNamespace(target_prefix=prefix, target_short_paths=short)
            return types.SimpleNamespace(target_prefix=prefix, target_short_path=short)

        def txn(*actions):
            group = types.SimpleNamespace(actions=list(actions))
            # A prefix's action groups: a tuple of fields, each a tuple of groups.
            groups = ((group,), (), None)
            return types.SimpleNamespace(prefix_action_groups={self.prefix: groups})

        fine = txn(
            action("share/pkgc/data.txt"),
            action(["lib/a.pyc", "lib/b.pyc"], many=True),
            action(None),
            # The package cache's and the registry's actions name no prefix.
            types.SimpleNamespace(target_prefix=None, target_short_path="/elsewhere/x"),
        )
        bind.check_target_paths(fine)
        os.symlink(outside, os.path.join(self.prefix, "share"))
        with self.assertRaises(bind.Changed) as caught:
            bind.check_target_paths(fine)
        self.assertIn(
            f"share/pkgc/data.txt, whose directory leads outside the environment "
            f"{self.prefix} (to {os.path.join(outside, 'pkgc')})",
            str(caught.exception),
        )
        os.remove(os.path.join(self.prefix, "share"))
        os.symlink(outside, os.path.join(self.prefix, "lib"))
        with self.assertRaises(bind.Changed):
            bind.check_target_paths(txn(action(["lib/a.pyc"], many=True)))
        os.remove(os.path.join(self.prefix, "lib"))
        # The file itself a symlink leading outside: written through, it stops the run
        # (an entry point, `conda-meta/history`: attack 26 G4); removed, it is the link.
        os.symlink(os.path.join(outside, "victim"), os.path.join(self.prefix, "bin", "tool"))
        with self.assertRaises(bind.Changed) as caught:
            bind.check_target_paths(txn(action("bin/tool")))
        self.assertIn("a symlink leading outside the environment", str(caught.exception))

        class UnlinkPathAction(types.SimpleNamespace):
            pass

        removal = UnlinkPathAction(target_prefix=self.prefix, target_short_path="bin/tool")
        bind.check_target_paths(txn(removal))

    def test_a_file_rewritten_through_its_hard_link_to_the_cache_is_not_the_packages(self):
        prec = record("pkga", files=["bin/.pkga-pre-unlink.sh"])
        extracted = self.cache(prec, {".pkga-pre-unlink.sh": "echo shipped\n"})
        cached = os.path.join(extracted, "bin", ".pkga-pre-unlink.sh")
        os.link(cached, self.script("pkga", "pre-unlink"))
        self.check(unlink=[prec])
        # Rewritten in place: the cache's copy is the same file, so equal to it; the
        # package's record of it says otherwise (attack 26 G1).
        with open(self.script("pkga", "pre-unlink"), "w") as handle:
            handle.write("cat /etc/shadow\n")
        self.refused("and its package did not install that file", unlink=[prec])

    def test_a_script_whose_prefix_placeholder_conda_replaced_is_the_packages(self):
        placeholder = "/opt/anaconda1anaconda2anaconda3"
        prec = record("pkga", files=["bin/.pkga-pre-unlink.sh"])
        text = f"echo {placeholder}/bin\n"
        entries = {"bin/.pkga-pre-unlink.sh": {"prefix_placeholder": placeholder}}
        self.cache(prec, {".pkga-pre-unlink.sh": text}, entries=entries)
        self.write(self.script("pkga", "pre-unlink"), text.replace(placeholder, self.prefix))
        self.check(unlink=[prec])
        self.write(self.script("pkga", "pre-unlink"), text.replace(placeholder, "/elsewhere"))
        self.refused("and its package did not install that file", unlink=[prec])

    def link_group(self, prec, extracted, link_type="hardlink", **kinds):
        """conda's link action group of `prec`'s package as `stage_cached_packages` reads it:
        a `LinkPathAction` for each file of its `info/paths.json` (`kinds`: path -> the
        action's class name, for the other actions), the package's info beside it."""
        with open(os.path.join(extracted, "info", "paths.json")) as handle:
            entries = json.load(handle)["paths"]
        actions = []
        for entry in entries:
            data = types.SimpleNamespace(
                path_type=PathType[entry["path_type"]], sha256=entry.get("sha256")
            )
            kind = kinds.get(entry["_path"], "LinkPathAction")
            if kind != "PrefixReplaceLinkAction":
                kind = type(kind, (Action,), {})
            else:
                kind = PrefixReplaceLinkAction
            actions.append(
                kind(
                    source_prefix=extracted,
                    source_short_path=entry["_path"],
                    target_short_path=entry["_path"],
                    link_type=LinkType[link_type],
                    source_path_data=data,
                )
            )
        pkg = types.SimpleNamespace(
            extracted_package_dir=extracted, repodata_record=types.SimpleNamespace(name=prec.name)
        )
        return types.SimpleNamespace(pkg_data=pkg, actions=actions)

    def stage(self, *groups):
        """`stage_cached_packages` over a transaction linking `groups` into the target,
        its transaction directory `self.temp` (as `private_temp_dir` leaves it)."""
        txn = types.SimpleNamespace(
            prefix_action_groups={
                self.prefix: types.SimpleNamespace(link_action_groups=list(groups))
            },
            transaction_context={"temp_dir": self.temp},
        )
        bind.stage_cached_packages(txn)

    @property
    def temp(self):
        return os.path.join(os.path.dirname(self.prefix), "txn")

    def staging(self):
        return os.listdir(self.temp) if os.path.isdir(self.temp) else []

    def test_conda_s_transaction_directory_is_the_run_s_own_not_the_target_s(self):
        txn = types.SimpleNamespace(transaction_context={"temp_dir": "/x/.condatmp"})
        bind.private_temp_dir(txn)
        temp = txn.transaction_context["temp_dir"]
        self.addCleanup(shutil.rmtree, temp, ignore_errors=True)
        self.assertTrue(os.path.isdir(temp) and not os.path.islink(temp), temp)
        self.assertEqual(os.stat(temp).st_mode & 0o777, 0o700)
        self.assertFalse(temp.startswith(self.prefix), temp)

    def test_the_files_conda_links_are_the_runs_own_copies_checked_as_copied(self):
        prec = record("pkgb")
        shipped = "echo shipped\n"
        extracted = self.cache(prec, {".pkgb-post-link.sh": shipped}, files={"lib/b.py": "b\n"})
        script = os.path.join(extracted, "bin", ".pkgb-post-link.sh")
        os.chmod(script, 0o755)
        os.utime(script, ns=(1_000_000_000, 2_000_000_000))
        group = self.link_group(prec, extracted)
        self.stage(group)
        # Each action now links a copy of its own, in the run's transaction directory,
        # with the file's bytes, permission bits and times.
        for action in group.actions:
            self.assertTrue(
                action.source_prefix.startswith(os.path.join(self.temp, "")),
                action.source_prefix,
            )
            self.assertNotEqual(
                os.stat(action.source_full_path).st_ino,
                os.stat(os.path.join(extracted, action.source_short_path)).st_ino,
            )
        copy = group.actions[0].source_full_path
        self.assertEqual(read(copy), shipped)
        self.assertEqual(os.stat(copy).st_mode & 0o777, 0o755)
        self.assertEqual(os.stat(copy).st_mtime_ns, 2_000_000_000)
        self.assertEqual(bind.STAGED[extracted], group.actions[0].source_prefix)
        # The cache's file rewritten after the copy, through a link the agent kept to it
        # from an environment conda linked from the same cache (attack 27 H2): the copy
        # conda links is not.
        linked = os.path.join(self.prefix, "bin", "linked")
        os.link(script, linked)
        with open(linked, "w") as handle:
            handle.write("id > /tmp/pwned\n")
        self.assertEqual(read(copy), shipped)

    def test_a_cached_file_that_is_not_the_packages_stops_the_run(self):
        prec = record("pkgb")
        extracted = self.cache(prec, {".pkgb-post-link.sh": "echo shipped\n"})
        script = os.path.join(extracted, "bin", ".pkgb-post-link.sh")
        # Rewritten in place through a link from the agent's environment (G2), and that
        # link then removed, leaving the rewritten file the cache's alone (attack 27 H1).
        linked = os.path.join(self.prefix, "bin", "linked")
        os.link(script, linked)
        with open(linked, "w") as handle:
            handle.write("id > /tmp/pwned\n")
        os.remove(linked)
        group = self.link_group(prec, extracted)
        with self.assertRaises(bind.Changed) as caught:
            self.stage(group)
        self.assertIn(
            "the package cache's copy of pkgb changed since it was extracted: "
            "bin/.pkgb-post-link.sh is not the file the package holds",
            str(caught.exception),
        )
        self.assertEqual(group.actions[0].source_prefix, extracted)
        self.assertEqual(self.staging(), [], "the copies made are removed")
        # Not a regular file (a symlink in the cache): the same.
        os.remove(script)
        os.symlink("/etc/hostname", script)
        with self.assertRaises(bind.Changed):
            self.stage(self.link_group(prec, extracted))

    def test_a_cached_file_without_a_sha256_stops_the_run(self):
        # Its link count cannot vouch for it: rewritten through a link, the link then
        # removed, it has one (attack 28 I1).
        prec = record("pkgb")
        entries = {"bin/.pkgb-post-link.sh": {"sha256": None}}
        extracted = self.cache(prec, {".pkgb-post-link.sh": "echo old\n"}, entries=entries)
        with self.assertRaises(bind.Changed) as caught:
            self.stage(self.link_group(prec, extracted))
        self.assertIn(
            "the package pkgb records no sha256 for bin/.pkgb-post-link.sh",
            str(caught.exception),
        )
        self.assertEqual(self.staging(), [], "the copies made are removed")

    def test_only_the_package_files_conda_would_read_are_copied(self):
        prec = record("pkgb")
        extracted = self.cache(prec, {}, files={"a": "a\n", "b": "b\n", "c": "c\n"})
        kinds = {"b": "PrefixReplaceLinkAction", "c": "CreatePythonEntryPointAction"}
        # Soft links asked for (a cache on another file system): the copy is hard-linked.
        group = self.link_group(prec, extracted, link_type="softlink", **kinds)
        self.stage(group)
        copied, replaced, other = group.actions
        self.assertNotEqual(copied.source_prefix, extracted)
        self.assertIs(copied.link_type, LinkType.hardlink)
        self.assertEqual(other.source_prefix, extracted)
        self.assertIs(other.link_type, LinkType.softlink)
        # The file whose prefix conda replaces: its replacement is made again, from the
        # checked copy (conda made the first from the cache's file, before the check).
        self.assertNotEqual(replaced.source_prefix, extracted)
        self.assertEqual(replaced.intermediate, "b\n")
        self.assertIs(replaced.link_type, LinkType.softlink)
        with open(os.path.join(extracted, "b"), "w") as handle:
            handle.write("rewritten\n")
        with self.assertRaises(bind.Changed) as caught:
            self.stage(self.link_group(prec, extracted, **kinds))
        self.assertIn("b is not the file the package holds", str(caught.exception))
        with open(os.path.join(extracted, "b"), "w") as handle:
            handle.write("b\n")
        group = self.link_group(prec, extracted, **kinds)
        group.actions[1].error = RuntimeError("padding")
        with self.assertRaises(bind.Changed) as caught:
            self.stage(group)
        self.assertIn(
            "the checked copy of b of pkgb cannot be linked: padding", str(caught.exception)
        )
        # The transaction directory a symlink leading elsewhere: not used.
        shutil.rmtree(self.temp)
        os.symlink(self.pkgs, self.temp)
        with self.assertRaises(bind.Changed) as caught:
            self.stage(self.link_group(prec, extracted))
        self.assertIn("is not a directory", str(caught.exception))
        self.assertEqual(sorted(os.listdir(self.pkgs)), ["pkgb-1.0-0"])

    def test_a_package_symlink_leading_outside_the_target_stops_the_run(self):
        """A symlink the package holds leads inside the target: conda copies an absolute
        one by reading through it, and another process writes through a relative one
        that leads out (attack 35 Q1)."""
        prec = record("pkgb")
        extracted = self.cache(prec, {}, files={"lib/a.py": "a\n"})

        def staged(links):
            paths = [{"_path": "lib/a.py", "path_type": "hardlink", "sha256": sha256("a\n")}]
            for path, points in links.items():
                full = os.path.join(extracted, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                if os.path.lexists(full):
                    os.remove(full)
                os.symlink(points, full)
                paths.append({"_path": path, "path_type": "softlink", "sha256": None})
            self.write(
                os.path.join(extracted, "info", "paths.json"),
                json.dumps({"paths": paths, "paths_version": 1}),
            )
            self.stage(self.link_group(prec, extracted, link_type="copy"))

        staged({"lib/b.py": "a.py", "lib/pkg/up": "../a.py", "bin/a": "../lib/a.py"})
        for path, points in (
            ("lib/pkg/__pycache__", "../../../outside"),
            ("lib/pkg/deep/__pycache__", "../../../../../../../../tmp"),
            ("share/abs", "/etc/hostname"),
            ("top", ".."),
        ):
            with self.assertRaises(bind.Changed) as caught:
                staged({path: points})
            self.assertIn(
                f"the package pkgb holds a symlink {path} to {points}, outside the target",
                str(caught.exception),
            )
            os.remove(os.path.join(extracted, path))
        # Two that each stay inside by their text lead out together (attack 36), and so
        # does one through a symlink of the target itself; a symlink of the target that
        # names a place inside it by its absolute path is followed there.
        os.symlink(os.path.join("..", ".."), os.path.join(self.prefix, "planted"))
        os.symlink(os.path.join(self.prefix, "bin"), os.path.join(self.prefix, "absolute"))
        staged({"d1/up": "..", "share/q": "../absolute/a"})
        for links, path, points in (
            ({"d1/up": "..", "d2/out": "../d1/up/../../victim"}, "d2/out", "../d1/up/../../victim"),
            ({"share/p": "../planted/y"}, "share/p", "../planted/y"),
            ({"a/loop": "../b/loop", "b/loop": "../a/loop"}, "a/loop", "../b/loop"),
        ):
            with self.assertRaises(bind.Changed) as caught:
                staged(links)
            self.assertIn(
                f"the package pkgb holds a symlink {path} to {points}, outside the target",
                str(caught.exception),
            )
            os.remove(os.path.join(extracted, path))

    def test_what_conda_compiles_lies_inside_the_target(self):
        """`guard_compiles` (attack 35 Q1): a source, or a `.pyc`'s directory, that
        leads outside the target stops the compile before it starts."""
        compiled = []
        path_actions = types.ModuleType("conda.core.path_actions")
        path_actions.compile_multiple_pyc = lambda *args: compiled.append(args) or []
        core = types.ModuleType("conda.core")
        core.path_actions = path_actions
        saved = {k: sys.modules.get(k) for k in ("conda.core", "conda.core.path_actions")}
        sys.modules.update({"conda.core": core, "conda.core.path_actions": path_actions})
        sys.modules["conda"].core = core
        try:
            bind.guard_compiles(lambda: self.prefix, lambda: self.prefix)
            guarded = path_actions.compile_multiple_pyc
        finally:
            restore_modules(saved)
        site = os.path.join(self.prefix, "lib", "site")
        outside = os.path.join(os.path.dirname(self.prefix), "outside")
        os.makedirs(os.path.join(site, "pkg"))
        os.makedirs(outside)
        self.write(os.path.join(site, "pkg", "a.py"), "a = 1\n")
        pyc = os.path.join(site, "pkg", "__pycache__", "a.cpython-311.pyc")
        python = os.path.join(self.prefix, "bin", "python")
        guarded(python, [os.path.join(site, "pkg", "a.py")], [pyc], self.prefix, "3.11")
        self.assertEqual(len(compiled), 1)
        os.symlink(os.path.join("..", "..", "..", "..", "outside"), os.path.dirname(pyc))
        secret = os.path.join(outside, "secret.py")
        self.write(secret, "token = 1\n")
        os.symlink(secret, os.path.join(site, "pkg", "b.py"))
        for sources, pycs in (
            ([os.path.join(site, "pkg", "a.py")], [pyc]),
            ([os.path.join(site, "pkg", "b.py")], []),
        ):
            with self.assertRaises(OSError) as caught:
                guarded(python, sources, pycs, self.prefix, "3.11")
            self.assertIn("lies outside the target environment", str(caught.exception))
        self.assertEqual(len(compiled), 1)
        self.assertEqual(os.listdir(outside), ["secret.py"])

    def test_the_target_is_deleted_whole_through_descriptors_never_through_a_symlink(self):
        outside = os.path.join(os.path.dirname(self.prefix), "outside")
        self.write(os.path.join(outside, "keep.txt"), "keep me")
        parent = os.path.join(os.path.dirname(self.prefix), "a")
        target = os.path.join(parent, "env")
        self.write(os.path.join(target, "share", "data.txt"), "data")
        # A symlink inside the tree is removed, not followed.
        os.symlink(outside, os.path.join(target, "share", "out"))
        self.assertTrue(bind._remove_tree(target))
        self.assertFalse(os.path.lexists(target))
        self.assertTrue(os.path.exists(os.path.join(outside, "keep.txt")))
        # A directory above turned into a symlink (attack 27 H3): nothing is deleted.
        self.write(os.path.join(outside, "env", "keep.txt"), "keep me")
        os.rmdir(parent)
        os.symlink(outside, parent)
        self.assertFalse(bind._remove_tree(target))
        self.assertTrue(os.path.exists(os.path.join(outside, "env", "keep.txt")))

    def test_metadata_conda_writes_by_path_is_no_symlink(self):
        bind.check_written_metadata(self.prefix)
        outside = os.path.join(os.path.dirname(self.prefix), "state.json")
        self.write(outside, "{}")
        os.makedirs(os.path.join(self.prefix, "conda-meta"), exist_ok=True)
        os.symlink(outside, os.path.join(self.prefix, "conda-meta", "state"))
        with self.assertRaises(bind.Changed) as caught:
            bind.check_written_metadata(self.prefix)
        self.assertIn("conda-meta/state is a symlink", str(caught.exception))

    def test_a_record_conda_would_wait_reading_is_refused(self):
        meta = os.path.join(self.prefix, "conda-meta")
        os.makedirs(meta)
        self.write(os.path.join(meta, "pkga-1.0-0.json"), "{}")
        os.mkfifo(os.path.join(meta, "notes.txt"))  # not a record: conda does not read it
        bind.check_written_metadata(self.prefix)
        # A FIFO as a record (attack 26 G8), or a symlink to one.
        for planted in ("pkgf-1.0-0.json", "pkgl-1.0-0.json"):
            fifo = os.path.join(os.path.dirname(self.prefix), "fifo")
            if not os.path.exists(fifo):
                os.mkfifo(fifo)
            path = os.path.join(meta, planted)
            if planted.startswith("pkgf"):
                os.mkfifo(path)
            else:
                os.symlink(fifo, path)
            with self.assertRaises(bind.Changed) as caught:
                bind.check_written_metadata(self.prefix)
            self.assertIn(f"{planted} is not a regular file", str(caught.exception))
            os.remove(path)


FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "conda", "site-packages")


class MetadataWrites(unittest.TestCase):
    """`guard_metadata` and `guard_history_hold` over the fixture conda's mirrors of
    conda's `PrefixData` state file, `History` and `path_actions.copy`."""

    def setUp(self):
        import importlib.util

        self.dir = tempfile.TemporaryDirectory()
        root = os.path.realpath(self.dir.name)
        self.target = os.path.join(root, "env")
        os.makedirs(os.path.join(self.target, "conda-meta"))
        # Another environment's state, which the agent would have conda rewrite.
        self.outside = os.path.join(root, "prod", "conda-meta", "state")
        os.makedirs(os.path.dirname(self.outside))
        with open(self.outside, "w") as handle:
            handle.write('{"env_vars": {"KEEP": "me"}}')
        packages = ("conda", "conda.core", "conda.gateways", "conda.gateways.disk")
        names = ("conda.core.prefix_data", "conda.history", "conda.core.path_actions")
        names += ("conda.gateways.disk.delete", "conda.gateways.disk.create")
        names += ("conda.gateways.disk.update", "conda.core.link")
        self.saved = {k: sys.modules.get(k) for k in packages + names}
        for name in packages:
            sys.modules[name] = types.ModuleType(name)
        for name in packages[1:] + names:
            path = os.path.join(FIXTURE, *name.split(".")) + ".py"
            if name in names:
                spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[name] = module
            parent, _, leaf = name.rpartition(".")
            setattr(sys.modules[parent], leaf, sys.modules[name])
        self.modules = sys.modules
        state = types.SimpleNamespace(check=lambda step: step())
        bind.guard_metadata(state, lambda: self.target, lambda: self.target)
        bind.guard_history_hold(lambda: self.target, lambda: self.target)
        bind.guard_deletions(lambda: self.target, lambda: self.target)
        envs = os.path.join(root, "envs")
        os.makedirs(envs)
        open(os.path.join(envs, ".conda_envs_dir_test"), "w").close()

        def named():
            # As conda works out a named target: it probes the envs directories, opening
            # a file by path through the guarded module (conda/base/context.py:2341).
            self.modules["conda.gateways.disk.create"].first_writable_envs_dir(envs)
            return self.target

        bind.guard_creations(named, lambda: self.target)
        self.victim = os.path.join(root, "victim")
        os.makedirs(os.path.join(self.victim, "sub"))
        for name in ("keep.txt", os.path.join("sub", "keep.txt")):
            with open(os.path.join(self.victim, name), "w") as handle:
                handle.write("keep me")

    def victim_kept(self):
        for name in ("keep.txt", os.path.join("sub", "keep.txt")):
            self.assertEqual(read(os.path.join(self.victim, name)), "keep me")

    def test_what_conda_deletes_in_the_target_is_deleted_there_only(self):
        rm_rf = self.modules["conda.gateways.disk.delete"].rm_rf
        lib = os.path.join(self.target, "lib")
        os.makedirs(os.path.join(lib, "pkg", "deep"))
        for name in ("a.txt", os.path.join("pkg", "b.txt"), os.path.join("pkg", "deep", "c")):
            with open(os.path.join(lib, name), "w") as handle:
                handle.write("x")
        # In the target: deleted, a file and a tree; emptied parents up to the target.
        self.assertTrue(rm_rf(os.path.join(lib, "a.txt")))
        self.assertTrue(rm_rf(os.path.join(lib, "pkg", "deep"), clean_empty_parents=False))
        self.assertTrue(rm_rf(os.path.join(lib, "pkg", "b.txt"), clean_empty_parents=True))
        self.assertFalse(os.path.exists(lib))
        self.assertTrue(os.path.isdir(self.target))
        # A directory of the target swapped for a symlink to another directory while
        # conda deletes below it (attack 29 J2, J4, J5): nothing there is deleted.
        os.symlink(self.victim, lib)
        rm_rf(os.path.join(lib, "sub"))
        rm_rf(os.path.join(lib, "keep.txt"))
        rm_rf(os.path.join(lib, "sub", "keep.txt"), clean_empty_parents=True)
        self.victim_kept()
        # The target itself swapped for one: refused outright (its name leads elsewhere).
        os.remove(lib)
        os.rename(self.target, self.target + ".old")
        os.symlink(self.victim, self.target)
        for path in (self.target, os.path.join(self.target, "sub")):
            with self.assertRaises(OSError) as caught:
                rm_rf(path)
            self.assertIn("no longer leads to", str(caught.exception))
        self.victim_kept()
        # Elsewhere, a directory swapped for a symlink once conda checked it (attack 37
        # S1): nothing below is deleted, nor walked; one that is a directory, deleted.
        delete = self.modules["conda.gateways.disk.delete"]
        elsewhere = os.path.join(os.path.dirname(self.target), "elsewhere")
        os.makedirs(elsewhere)
        os.symlink(self.victim, os.path.join(elsewhere, "swapped"))
        delete.backoff_rmdir(os.path.join(elsewhere, "swapped"))
        delete.delete_trash(os.path.join(elsewhere, "swapped"))
        self.victim_kept()
        self.assertTrue(rm_rf(os.path.join(self.victim, "sub")))
        self.assertFalse(os.path.exists(os.path.join(self.victim, "sub")))

    def test_what_conda_renames_and_makes_executable_in_the_target_stays_there(self):
        update = self.modules["conda.gateways.disk.update"]
        create = self.modules["conda.gateways.disk.create"]
        link = self.modules["conda.core.link"]
        lib = os.path.join(self.target, "lib")
        os.makedirs(lib)
        for name in ("keep.txt", "old.txt"):
            with open(os.path.join(lib, name), "w") as handle:
                handle.write("mine")
        # In the target: renamed aside (a file in the way replaced), made executable,
        # directories made.
        update.backoff_rename(os.path.join(lib, "keep.txt"), os.path.join(lib, "keep.c~"))
        update.backoff_rename(
            os.path.join(lib, "keep.c~"), os.path.join(lib, "old.txt"), force=True
        )
        self.assertEqual(sorted(os.listdir(lib)), ["old.txt"])
        create.make_executable(os.path.join(lib, "old.txt"))
        self.assertTrue(os.stat(os.path.join(lib, "old.txt")).st_mode & 0o100)
        for _ in range(2):
            # conda's value, made or there: the path (link.py:887 deletes the directory
            # of a false one).
            made = os.path.join(lib, "made", "deep")
            self.assertEqual(link.mkdir_p(made), made)
            self.assertTrue(os.path.isdir(made))
        # A directory of the target swapped for a symlink to another directory while
        # conda works (attack 30 K3, K4): nothing there is renamed, made or changed.
        os.rename(lib, lib + ".old")
        os.symlink(self.victim, lib)
        mode = os.stat(os.path.join(self.victim, "keep.txt")).st_mode
        calls = (
            lambda: update.backoff_rename(
                os.path.join(lib, "keep.txt"), os.path.join(lib, "keep.txt.c~")
            ),
            lambda: update.backoff_rename(
                os.path.join(self.target, "lib.old", "old.txt"),
                os.path.join(lib, "keep.txt"),
                force=True,
            ),
            lambda: create.make_executable(os.path.join(lib, "keep.txt")),
            lambda: link.mkdir_p(os.path.join(lib, "new")),
        )
        for call in calls:
            with self.assertRaises(OSError):
                call()
        self.assertEqual(sorted(os.listdir(self.victim)), ["keep.txt", "sub"])
        self.assertEqual(os.stat(os.path.join(self.victim, "keep.txt")).st_mode, mode)
        self.victim_kept()
        # A file of the target made a symlink to a file elsewhere: neither made
        # executable nor given a copied file's mode and times.
        os.remove(lib)
        os.symlink(os.path.join(self.victim, "keep.txt"), os.path.join(self.target, "tool"))
        source = os.path.join(self.target, "lib.old", "old.txt")
        os.chmod(source, 0o777)
        times = os.stat(os.path.join(self.victim, "keep.txt")).st_mtime_ns
        for call in (
            lambda: create.make_executable(os.path.join(self.target, "tool")),
            lambda: create.copystat(source, os.path.join(self.target, "tool")),
        ):
            with self.assertRaises(OSError):
                call()
        self.assertEqual(os.stat(os.path.join(self.victim, "keep.txt")).st_mode, mode)
        self.assertEqual(os.stat(os.path.join(self.victim, "keep.txt")).st_mtime_ns, times)
        # In the target: the copy's mode and times are the source's.
        copied = os.path.join(self.target, "copied")
        create.create_link(source, copied, "copy")
        self.assertEqual(stat.S_IMODE(os.stat(copied).st_mode), 0o777)
        self.assertEqual(os.stat(copied).st_mtime_ns, os.stat(source).st_mtime_ns)

    def test_menuinst_keeps_its_records_in_the_target_only(self):
        names = ("menuinst", "menuinst.utils", "menuinst.api")
        self.saved.update({k: sys.modules.get(k) for k in names})
        sys.path.insert(0, FIXTURE)
        try:
            api = importlib.import_module("menuinst.api")
        finally:
            sys.path.remove(FIXTURE)
        bind._guard_menu_records(bind.Target(lambda: self.target, lambda: self.target))
        record = os.path.join(self.target, "Menu", "menuinst.toml")
        # A `.tmp` planted as a symlink to a file elsewhere (attack 32 M1): not written
        # through; the record is written in the target.
        os.makedirs(os.path.dirname(record))
        os.symlink(os.path.join(self.victim, "keep.txt"), record + ".tmp")
        prefix = pathlib.Path(self.target)  # as menuinst has it (menuinst/api.py:150)
        api.record_shortcuts(prefix, "pkgm.json", ["/usr/share/applications/x.desktop"])
        self.victim_kept()
        self.assertFalse(os.path.lexists(record + ".tmp"))
        self.assertIn('source = "pkgm.json"', read(record))
        api.record_shortcuts(prefix, "other.json", ["/y.desktop"])
        self.assertEqual(read(record).count("[[shortcuts]]"), 2)
        # The record made a symlink to a file elsewhere: not read (nor copied in).
        os.remove(record)
        os.symlink(os.path.join(self.victim, "keep.txt"), record)
        with self.assertRaises(OSError):
            api.record_shortcuts(prefix, "pkgm.json", ["/z.desktop"])
        self.victim_kept()
        self.assertTrue(os.path.islink(record))

    def test_what_conda_creates_in_the_target_is_created_there_only(self):
        create = self.modules["conda.gateways.disk.create"]
        source = os.path.join(os.path.dirname(self.target), "source.txt")
        with open(source, "w") as handle:
            handle.write("package")
        lib = os.path.join(self.target, "lib")
        for kind in ("directory", "hardlink", "softlink", "copy"):
            name = "sub" if kind == "directory" else kind
            create.create_link(source, os.path.join(lib, name), kind)
        self.assertTrue(os.path.isdir(os.path.join(lib, "sub")))
        self.assertEqual(read(os.path.join(lib, "copy")), "package")
        self.assertEqual(os.readlink(os.path.join(lib, "softlink")), source)
        create.create_python_entry_point(os.path.join(lib, "tool"), "#!python\n")
        self.assertEqual(read(os.path.join(lib, "tool")), "#!python\n")
        # A directory of the target swapped for a symlink to another directory while
        # conda creates files (attack 30 K1, K2): nothing there is created or changed.
        os.rename(lib, lib + ".old")
        os.symlink(self.victim, lib)
        for kind in ("directory", "hardlink", "softlink", "copy"):
            with self.assertRaises(OSError):
                create.create_link(source, os.path.join(lib, "sub", "new"), kind)
        with self.assertRaises(OSError):
            create.create_python_entry_point(os.path.join(lib, "keep.txt"), "#!evil\n")
        self.assertEqual(sorted(os.listdir(self.victim)), ["keep.txt", "sub"])
        self.assertEqual(os.listdir(os.path.join(self.victim, "sub")), ["keep.txt"])
        self.victim_kept()
        # A file of the target with another link (to a file elsewhere): not written.
        os.remove(lib)
        os.link(os.path.join(self.victim, "keep.txt"), os.path.join(self.target, "tool"))
        with self.assertRaises(OSError):
            create.create_python_entry_point(os.path.join(self.target, "tool"), "#!evil\n")
        self.victim_kept()

    def test_the_creation_time_is_written_in_the_target_only(self):
        data = self.modules["conda.core.prefix_data"].PrefixData(self.target)
        data.set_creation_time()
        created = os.path.join(self.target, "conda-meta", "created_at")
        float(read(created))
        # Planted as a symlink to another environment's file (attack 29 J3).
        os.remove(created)
        os.symlink(self.outside, created)
        with self.assertRaises(bind.Changed):
            data.set_creation_time()
        self.assertEqual(read(self.outside), '{"env_vars": {"KEEP": "me"}}')

    def test_a_state_file_with_another_link_is_neither_read_nor_written(self):
        # A hard link to another environment's state (attack 29 J1).
        os.link(self.outside, os.path.join(self.target, "conda-meta", "state"))
        data = self.modules["conda.core.prefix_data"].PrefixData(self.target)
        for step in (
            data._get_environment_state_file,
            lambda: data._write_environment_state_file({"env_vars": {"EVIL": "'"}}),
        ):
            with self.assertRaises(bind.Changed):
                step()
        self.assertEqual(read(self.outside), '{"env_vars": {"KEEP": "me"}}')

    def tearDown(self):
        restore_modules(self.saved)
        self.dir.cleanup()

    def test_the_state_file_is_read_and_written_in_the_target_only(self):
        data = self.modules["conda.core.prefix_data"].PrefixData(self.target)
        self.assertEqual(data._get_environment_state_file(), {})
        data._write_environment_state_file({"env_vars": {"A": "1"}})
        self.assertEqual(data._get_environment_state_file(), {"env_vars": {"A": "1"}})
        state = os.path.join(self.target, "conda-meta", "state")
        # Swapped for a symlink to another environment's state once checked (attack 28
        # I4), or the directory above it swapped: neither read nor written through.
        os.remove(state)
        os.symlink(self.outside, state)
        for step in (
            data._get_environment_state_file,
            lambda: data._write_environment_state_file({"env_vars": {"EVIL": "'"}}),
        ):
            with self.assertRaises(bind.Changed) as caught:
                step()
            self.assertIn(
                "conda-meta/state, or a directory above it, is a symlink or a file",
                str(caught.exception),
            )
        os.remove(state)
        meta = os.path.join(self.target, "conda-meta")
        os.rename(meta, meta + ".old")
        os.symlink(os.path.dirname(self.outside), meta)
        with self.assertRaises(bind.Changed):
            data._write_environment_state_file({"env_vars": {"EVIL": "'"}})
        self.assertEqual(read(self.outside), '{"env_vars": {"KEEP": "me"}}')
        # Another environment's state is conda's own business.
        prod = os.path.dirname(os.path.dirname(self.outside))
        other = self.modules["conda.core.prefix_data"].PrefixData(prod)
        self.assertEqual(other._get_environment_state_file(), {"env_vars": {"KEEP": "me"}})

    def test_the_history_and_its_copy_are_written_in_the_target_only(self):
        history = os.path.join(self.target, "conda-meta", "history")
        self.modules["conda.history"].History(self.target).write_specs(["a"])
        self.assertEqual(read(history), "# update specs: ['a']\n")
        copy = self.modules["conda.core.path_actions"].copy
        copy(history, history + ".c~")
        self.assertEqual(read(history + ".c~"), "# update specs: ['a']\n")
        # The copy aside planted as a symlink: not written through.
        os.remove(history + ".c~")
        os.symlink(self.outside, history + ".c~")
        with self.assertRaises(OSError):
            copy(history, history + ".c~")
        # The history itself swapped for a symlink: not appended to through it.
        os.remove(history)
        os.symlink(self.outside, history)
        with self.assertRaises(bind.Changed):
            self.modules["conda.history"].History(self.target).write_specs(["b"])
        self.assertEqual(read(self.outside), '{"env_vars": {"KEEP": "me"}}')


if __name__ == "__main__":
    unittest.main()
