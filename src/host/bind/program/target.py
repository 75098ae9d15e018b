# Part of the plan binding (see records.py): what conda would run or delete from a target
# prefix is its packages' own (attack 23 F1: a target the agent may write — an environment
# in its project — held a planted `bin/.pkga-pre-unlink.sh`, which the confirmed removal of
# pkga ran as the server's user, and a record whose `files` named `../../victim.txt`,
# which the removal deleted).
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from cache import _cached_package, declared, file_bytes
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


# The menu files removing a package hands to menuinst, which deletes the shortcuts they
# describe wherever they say (conda/core/path_actions.py:84 `_MENU_RE`, :1232-1251
# `RemoveMenuAction`, made for every listed match whatever `context.shortcuts` says): a
# `Menu/*.json` an edited record listed removed a `.desktop` file of the host (attack 24 B6).
MENU_PREFIX = "menu/"


def _menus(prec):
    return [
        f
        for f in (str(f) for f in (getattr(prec, "files", None) or ()))
        if f.lower().startswith(MENU_PREFIX) and f.lower().endswith(".json")
    ]


def _shipped(prec, prefix, relative, what, found=None):
    """Stop unless the target's `relative` (a file conda would run, or hand to menuinst, as
    `what`) is what `prec`'s package holds: the sha256 its `info/paths.json` in a package
    cache records (not the cache's bytes, which a hard link from the target may have
    rewritten: attack 26 G1); for a file whose prefix placeholder conda replaced (text
    mode), the cache's copy, itself as recorded, with the placeholder replaced. `found`:
    the file's bytes as the caller read them (else read here by path; a file not there
    passes)."""
    path = os.path.join(str(prefix), relative)
    if found is None and not os.path.lexists(path):
        return
    cached = _cached_package(prec)
    entries = declared(cached) if cached is not None else None
    entry = (entries or {}).get(relative, {})
    if entries is None or (entry and not entry.get("sha256")):
        raise Changed(
            f"conda would use {path}, the {what} of {prec.name}, which cannot be checked: "
            "its package is in no package cache, or records no sha256 for it"
        )
    if not entry:
        found = None
    elif found is None:
        found = file_bytes(path, FILE_LIMIT)
    placeholder = entry.get("prefix_placeholder")
    if placeholder and entry.get("file_mode", "text") == "text":
        shipped = file_bytes(os.path.join(cached, relative), FILE_LIMIT)
        good = shipped is not None and _sha256(shipped) == entry["sha256"]
        expected = shipped.replace(placeholder.encode(), str(prefix).encode()) if good else None
        same = found is not None and found == expected
    else:
        same = found is not None and _sha256(found) == entry["sha256"]
    if not same:
        raise Changed(
            f"conda would use {path} as the {what} of {prec.name}, and its package did not "
            "install that file"
        )


def check_target_code(txn):
    """What conda would run or delete from a target prefix is its packages' own (attack 23
    F1: a target the agent may write — an environment in its project — held a planted
    `bin/.pkga-pre-unlink.sh`, which the confirmed removal of pkga ran as the server's
    user, and a record to remove whose `files` named `../../victim.txt`, which it
    deleted):
    - a record to remove lists only paths inside the prefix (relative, no `..`, in a
      directory that resolves inside the prefix: not through a symlink leading out);
    - a script conda would run from the target when it removes a package, and a menu
      file it would hand to menuinst, is byte for byte the one that package's extracted
      copy in a package cache holds (a package not in a cache cannot be checked, and
      stops the run);
    - no script conda would run after linking a package sits in the target before the
      transaction, unless a record this transaction removes lists it (unlinking deletes
      it first: an update's older version)."""
    for prefix, setup in txn.prefix_setups.items():
        removed = {}
        root, checked = os.path.realpath(str(prefix)), set()
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
                leads = _parent_outside(root, os.path.join(str(prefix), path), checked)
                if leads is not None:
                    raise Changed(
                        f"the record of {prec.name} to remove lists {path!r}, whose directory "
                        f"leads outside the environment {prefix} (to {leads})"
                    )
            for action in UNLINK_SCRIPTS:
                script = os.path.relpath(_script(prefix, prec.name, action), str(prefix))
                _shipped(prec, prefix, script, f"{action} script")
            for menu in _menus(prec):
                _shipped(prec, prefix, menu, "menu file")
        for prec in setup.link_precs:
            for action in LINK_SCRIPTS:
                script = _script(prefix, prec.name, action)
                relative = os.path.relpath(script, str(prefix))
                if os.path.lexists(script) and relative not in removed.get(str(prec.name), ()):
                    raise Changed(
                        f"{script} is in the target before {prec.name} is installed: conda "
                        f"would run it as the package's {action} script"
                    )


def _inside(root, path):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parent_outside(root, path, seen):
    """Where the directory holding `path` leads when that is outside `root` (resolved);
    None when inside, or when that directory is in `seen` (added to it)."""
    parent = os.path.dirname(path)
    if parent in seen:
        return None
    seen.add(parent)
    leads = os.path.realpath(parent)
    return None if _inside(root, leads) else leads


def _action_paths(groups):
    """The full paths the actions of a target's action groups name by prefix and short
    path (`PrefixPathAction.target_full_path`, `MultiPathAction.target_full_paths`), each
    with whether the action creates or writes it (every action but those that remove,
    conda/core/path_actions.py:1178 `RemoveFromPrefixPathAction`, whose names say so)."""
    for field in groups:
        for group in field or ():
            for action in getattr(group, "actions", None) or ():
                prefix = getattr(action, "target_prefix", None)
                if prefix is None:
                    continue
                name = type(action).__name__
                writes = not any(word in name for word in ("Unlink", "Remove", "Unregister"))
                shorts = getattr(action, "target_short_paths", None)
                if shorts is None:
                    shorts = (getattr(action, "target_short_path", None),)
                for short in shorts:
                    if short is not None:
                        yield os.path.join(str(prefix), str(short)), writes


def check_target_paths(txn):
    """Every path the transaction creates or deletes in a target lies inside it through
    whatever its directories are now (attack 24 B1: a directory of the target made a
    symlink to one outside led the approved removal to delete, and an install to
    overwrite, a file there). Made when the actions exist, right before the first of them
    (conda/core/link.py `_execute`): every `PrefixPathAction` and `MultiPathAction`
    (conda/core/path_actions.py:181-218) of every action group names its files by prefix
    and short path, and the directory holding each must resolve inside the prefix.
    Actions outside the prefix by design (the package cache's, `environments.txt`) name
    no prefix and are not looked at."""
    for prefix, groups in (getattr(txn, "prefix_action_groups", None) or {}).items():
        root = os.path.realpath(str(prefix))
        seen = set()
        actions = list(_action_paths(groups))
        removed = {path for path, writes in actions if not writes}
        for path, writes in actions:
            # A symlink conda would write through (an entry point, `conda-meta/history`
            # appended to) leading outside (attack 26 G4); removing one removes the link,
            # and the transaction's removals come before its links (an update).
            if writes and path not in removed and os.path.islink(path):
                leads = os.path.realpath(path)
                if not _inside(root, leads):
                    raise Changed(
                        f"conda would write {path}, a symlink leading outside the "
                        f"environment {prefix} (to {leads})"
                    )
            leads = _parent_outside(root, path, seen)
            if leads is not None:
                raise Changed(
                    f"conda would create or delete {path}, whose directory leads outside "
                    f"the environment {prefix} (to {leads})"
                )


# Files of a target's `conda-meta` that conda writes by path outside a transaction (`env
# config vars set`/`unset` rewrite `state`, conda/core/prefix_data.py `_write_environment_
# state_file`; `doctor --fix` rewrites `pinned`, conda/plugins/subcommands/doctor/
# health_checks/pinned.py:95-117, after printing the lines it drops), the history every
# change appends to, and `frozen`, whose text conda shows (conda/core/prefix_data.py:
# 300-315). A symlink there had root print and rewrite another file (attack 36 R2).
WRITTEN_METADATA = (
    "conda-meta/state",
    "conda-meta/history",
    "conda-meta/pinned",
    "conda-meta/frozen",
)


def check_written_metadata(prefix):
    """None of `WRITTEN_METADATA` in the target is a symlink: conda would write through it
    (attack 27 H4: a `conda-meta/state` symlink led `env config vars set` to rewrite a file
    outside the environment)."""
    if not prefix:
        return
    for name in WRITTEN_METADATA:
        path = os.path.join(str(prefix), name)
        if os.path.islink(path):
            raise Changed(f"{path} is a symlink: conda would write through it")
    _check_records_readable(prefix)


def _check_records_readable(prefix):
    """Every record conda reads from the target's `conda-meta` (conda/core/prefix_data.py
    `load`: each `*.json`, opened and read whole) is, through any symlink, a regular file
    or nothing: a FIFO there made conda's own read wait until the call's timeout
    (attack 26 G8)."""
    try:
        entries = list(os.scandir(os.path.join(str(prefix), "conda-meta")))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith(".json"):
            continue
        try:
            mode = os.stat(entry.path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            raise Changed(f"{entry.path} is not a regular file: conda would wait reading it")
