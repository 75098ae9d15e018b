# Part of the plan binding (see records.py): what conda would run or delete from a target
# prefix is its packages' own (attack 23 F1: a target the agent may write — an environment
# in its project — held a planted `bin/.pkga-pre-unlink.sh`, which the confirmed removal of
# pkga ran as the server's user, and a record whose `files` named `../../victim.txt`,
# which the removal deleted).
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from records import FILE_LIMIT, Changed, _sha256


def _installed_paths(prec):
    """The paths an installed record lists (what unlinking it deletes): `files` and
    `paths_data` (conda/core/path_actions.py `UnlinkPathAction`, from the prefix record)."""
    paths = [str(f) for f in (getattr(prec, "files", None) or ())]
    data = getattr(prec, "paths_data", None)
    for entry in getattr(data, "paths", None) or ():
        path = getattr(entry, "path", None) or getattr(entry, "_path", None)
        if path is not None:
            paths.append(str(path))
    return paths


def _files_digest(prec):
    """The sha256 of the paths a record to remove lists, in their order: what the removal
    deletes, bound like the rest of the record (the record is a file of the target, which
    whoever may write the target may edit)."""
    return _sha256("\n".join(_installed_paths(prec)).encode("utf-8", "surrogateescape"))


# The scripts conda runs from the target prefix itself (conda/core/link.py:1586
# `run_script`, which runs `bin/.<name>-<action>.sh` when such a file exists, whoever put it
# there): before and after a package's files are unlinked (:979-984, :1148-1152), and after
# a package's files are linked (:1148-1152). `pre-link` runs from the package's extracted
# directory in the package cache (:980), not from the target.
UNLINK_SCRIPTS = ("pre-unlink", "post-unlink")
LINK_SCRIPTS = ("post-link",)


def _script(prefix, name, action):
    return os.path.join(str(prefix), "bin", f".{name}-{action}.sh")


def _cached_package(prec):
    """The extracted directory of an installed record's package in a package cache (the
    operator's: a sandboxed call writes none), matched by file name and hash; or None."""
    import json

    from conda.base.context import context

    fn = str(getattr(prec, "fn", "") or "")
    for ending in (".tar.bz2", ".conda"):
        if fn.endswith(ending):
            fn = fn[: -len(ending)]
    if not fn or "/" in fn or fn in (".", ".."):
        return None
    for pkgs_dir in context.pkgs_dirs:
        extracted = os.path.join(str(pkgs_dir), fn)
        try:
            with open(os.path.join(extracted, "info", "repodata_record.json"), "rb") as handle:
                cached = json.loads(handle.read(FILE_LIMIT))
        except (OSError, ValueError):
            continue
        if any(
            getattr(prec, key, None) and cached.get(key) == getattr(prec, key)
            for key in ("sha256", "md5")
        ):
            return extracted
    return None


def _regular_bytes(path):
    """A regular file's bytes (not through a symlink), or None."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            return handle.read(FILE_LIMIT + 1)
    except OSError:
        return None


def check_target_code(txn):
    """What conda would run or delete from a target prefix is its packages' own (attack 23
    F1: a target the agent may write — an environment in its project — held a planted
    `bin/.pkga-pre-unlink.sh`, which the confirmed removal of pkga ran as the server's
    user, and a record to remove whose `files` named `../../victim.txt`, which it
    deleted):
    - a record to remove lists only paths inside the prefix (relative, no `..`);
    - a script conda would run from the target when it removes a package is byte for byte
      the one that package's extracted copy in a package cache holds (a package not in a
      cache cannot be checked, and stops the run);
    - no script conda would run after linking a package sits in the target before the
      transaction, unless a record this transaction removes lists it (unlinking deletes
      it first: an update's older version)."""
    for prefix, setup in txn.prefix_setups.items():
        removed = {}
        for prec in setup.unlink_precs:
            paths = _installed_paths(prec)
            # What unlinking deletes is `files` alone (conda/core/path_actions.py:1237):
            # a path in `paths_data` only would stay, and with it a planted script.
            removed[str(prec.name)] = {str(f) for f in (getattr(prec, "files", None) or ())}
            for path in paths:
                if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
                    raise Changed(
                        f"the record of {prec.name} to remove lists {path!r}, a path outside "
                        f"the environment {prefix}"
                    )
            for action in UNLINK_SCRIPTS:
                script = _script(prefix, prec.name, action)
                if not os.path.lexists(script):
                    continue
                cached = _cached_package(prec)
                if cached is None:
                    raise Changed(
                        f"conda would run {script}, the {action} script of {prec.name}, which "
                        "cannot be checked: its package is in no package cache"
                    )
                shipped = _regular_bytes(os.path.join(cached, "bin", os.path.basename(script)))
                if shipped is None or _regular_bytes(script) != shipped:
                    raise Changed(
                        f"conda would run {script} as the {action} script of {prec.name}, "
                        "and its package did not install that file"
                    )
        for prec in setup.link_precs:
            for action in LINK_SCRIPTS:
                script = _script(prefix, prec.name, action)
                relative = os.path.relpath(script, str(prefix))
                if os.path.lexists(script) and relative not in removed.get(str(prec.name), ()):
                    raise Changed(
                        f"{script} is in the target before {prec.name} is installed: conda "
                        f"would run it as the package's {action} script"
                    )
