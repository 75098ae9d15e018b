# Part of the plan binding (see records.py): the package cache's extracted packages hold
# what their packages hold (attack 26 G1, G2: conda hard-links a cached package's files
# into a target, so an agent that may write a target in its project rewrote, in place,
# the cache's copy of a script: a later confirmed install elsewhere linked the rewritten
# copy and ran it as root, and a check that compared the target's script with the
# cache's copy found the two equal). What a package holds is what its `info/paths.json`
# records: a file of the package's own metadata, which conda never links into a target.
import hashlib
import json
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from records import FILE_LIMIT, Changed


def _cached_package(prec):
    """The extracted directory of a record's package in a package cache (the operator's,
    or a bounded run's own with the operator's behind it), matched by file name and hash;
    or None."""
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


def declared(cached):
    """An extracted package's `info/paths.json`: each path's entry, or None when it is
    missing or unreadable."""
    try:
        with open(os.path.join(cached, "info", "paths.json"), "rb") as handle:
            data = json.loads(handle.read(64 * FILE_LIMIT))
    except (OSError, ValueError):
        return None
    entries = data.get("paths") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return {str(e["_path"]): e for e in entries if isinstance(e, dict) and e.get("_path")}


def _regular(path):
    """A regular file opened for reading (without following a symlink, without blocking
    on a FIFO), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        return None
    return handle


def file_bytes(path, limit):
    """A regular file's bytes (`_regular`), at most `limit` + 1 of them; or None."""
    handle = _regular(path)
    if handle is None:
        return None
    with handle:
        return handle.read(limit + 1)


def _file_sha256(path):
    """The sha256 of a regular file (`_regular`), or None."""
    handle = _regular(path)
    if handle is None:
        return None
    with handle:
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_cached_packages(txn):
    """Every file of a package to link holds, in its extracted copy in the package cache,
    what the package's `info/paths.json` records (sha256): conda hard-links those copies
    into targets, through which whoever may write a target may rewrite them — and then
    remove its own link, leaving the rewritten file the cache's alone (attack 27 H1).
    Made right before the transaction's first link. A package in no cache, or without
    the record of its files, cannot be checked and stops the run; so does a file without
    a recorded sha256 that has other links (one with a single link is let through: old
    packages record none)."""
    for setup in txn.prefix_setups.values():
        for prec in setup.link_precs:
            cached = _cached_package(prec)
            if cached is None:
                raise Changed(
                    f"package {prec.name} to install is in no package cache, so its files "
                    "cannot be checked"
                )
            entries = declared(cached)
            if entries is None:
                raise Changed(
                    f"the package cache's copy of {prec.name} has no readable "
                    "info/paths.json, so its files cannot be checked"
                )
            for path, entry in entries.items():
                if entry.get("path_type", "hardlink") != "hardlink":
                    continue
                full = os.path.join(cached, path)
                want = entry.get("sha256")
                if not want:
                    try:
                        linked = os.lstat(full).st_nlink > 1
                    except OSError:
                        linked = False
                    if not linked:
                        continue
                    raise Changed(
                        f"the package cache's copy of {prec.name} records no sha256 for "
                        f"{path}, which has other links, so it cannot be checked"
                    )
                if _file_sha256(full) != want:
                    raise Changed(
                        f"the package cache's copy of {prec.name} changed since it was "
                        f"extracted: {path} is not the file the package holds (a hard link "
                        "to it was written)"
                    )
