"""The plan binding's check of what conda would run or delete from the target itself
(bind/program/target.py `check_target_code`), on prefixes and package caches built here,
with conda's context stood in for (the check reads only `context.pkgs_dirs`)."""

import hashlib
import json
import os
import sys
import tempfile
import types
import unittest

import programs

bind = programs.load("bind")


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


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
        for key, value in self.saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
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

    def test_a_cached_package_to_link_holds_what_its_package_holds_where_linked(self):
        prec = record("pkgb")
        extracted = self.cache(prec, {".pkgb-post-link.sh": "echo shipped\n"})
        script = os.path.join(extracted, "bin", ".pkgb-post-link.sh")
        txn = types.SimpleNamespace(
            prefix_setups={"/other": types.SimpleNamespace(unlink_precs=[], link_precs=[prec])}
        )
        bind.check_cached_packages(txn)
        # Linked into an environment the agent may write, and rewritten there (G2).
        linked = os.path.join(self.prefix, "bin", "linked")
        os.link(script, linked)
        bind.check_cached_packages(txn)
        with open(linked, "w") as handle:
            handle.write("id > /tmp/pwned\n")
        with self.assertRaises(bind.Changed) as caught:
            bind.check_cached_packages(txn)
        self.assertIn(
            "the package cache's copy of pkgb changed since it was extracted: "
            "bin/.pkgb-post-link.sh is not the file the package holds",
            str(caught.exception),
        )
        # And its link removed, the rewritten file the cache's alone (attack 27 H1).
        os.remove(linked)
        with self.assertRaises(bind.Changed):
            bind.check_cached_packages(txn)
        # A file without a recorded sha256: let through with a single link (old
        # packages), refused with other links.
        with open(script, "w") as handle:
            handle.write("echo shipped\n")
        entries = {"bin/.pkgb-post-link.sh": {"sha256": None}}
        self.cache(prec, {".pkgb-post-link.sh": "echo shipped\n"}, entries=entries)
        bind.check_cached_packages(txn)
        os.link(script, linked)
        with self.assertRaises(bind.Changed) as caught:
            bind.check_cached_packages(txn)
        self.assertIn("records no sha256", str(caught.exception))
        os.remove(linked)
        # Without the record of its files, or in no cache: not checked, stopped.
        os.remove(os.path.join(extracted, "info", "paths.json"))
        with self.assertRaises(bind.Changed):
            bind.check_cached_packages(txn)
        missing = types.SimpleNamespace(unlink_precs=[], link_precs=[record("pkgz")])
        with self.assertRaises(bind.Changed):
            bind.check_cached_packages(types.SimpleNamespace(prefix_setups={"/o": missing}))

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


if __name__ == "__main__":
    unittest.main()
