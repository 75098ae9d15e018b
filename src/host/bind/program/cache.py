# Part of the plan binding (see records.py): the package cache's extracted packages hold
# what their packages hold (attack 26 G1, G2: conda hard-links a cached package's files
# into a target, so an agent that may write a target in its project rewrote, in place,
# the cache's copy of a script: a later confirmed install elsewhere linked the rewritten
# copy and ran it as root, and a check that compared the target's script with the
# cache's copy found the two equal). What a package holds is what its `info/paths.json`
# records: a file of the package's own metadata, which conda never links into a target.
# A confirmed run links no file from the cache at all: it links its own copies, checked
# as they are made (`stage_cached_packages`; attack 27 H2).
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


def _copy_verified(source, copy):
    """Copy a regular file (opened without following a symlink, without blocking on a
    FIFO) to `copy`, a new file, keeping its permission bits and times; return the sha256
    of the bytes written, or None when the source is not a regular file. The hash is of
    the copy's own bytes: nothing written to the source after it was read changes the
    copy."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(copy, flags, stat.S_IMODE(info.st_mode) & 0o700 | 0o600)
        try:
            digest = hashlib.sha256()
            for chunk in iter(lambda: os.read(fd, 1 << 20), b""):
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return digest.hexdigest()


# A package's extracted directory in the package cache -> the run's verified copy of it
# (`stage_cached_packages`), where its pre-link script runs from.
STAGED = {}


def private_temp_dir(txn):
    """Point conda's transaction directory (`temp_dir`, conda/core/link.py:453: the
    target's `.condatmp`) at a new private directory in the first writable package cache,
    on the file system conda links from (or, without one, the run's temporary directory).
    conda's verify writes each file whose prefix it replaces there (conda/core/path_actions
    .py:580-589) and conda deletes it by path once the transaction ends (link.py:377), so
    in a target the agent may write, a `.condatmp` made a symlink led the first to write a
    package file into any directory and the second to delete another directory's files
    (attack 28 I2, I3); the run's own copies are made there too (I5). The target's
    `.condatmp` is then neither written nor deleted."""
    import tempfile

    try:
        from conda.core.package_cache_data import PackageCacheData

        where = str(PackageCacheData.first_writable().pkgs_dir)
        temp = tempfile.mkdtemp(prefix=".ccm-transaction-", dir=where)
    except Exception:
        temp = tempfile.mkdtemp(prefix="ccm-transaction-")
    TEMP_DIRS.append(temp)
    txn.transaction_context["temp_dir"] = temp


# The run's transaction directories (`private_temp_dir`): conda deletes each when its
# transaction ends; a run that stops before (`Run.changed`) deletes them itself.
TEMP_DIRS = []


def _staging_root(txn):
    """A new private directory in the run's transaction directory (`private_temp_dir`)."""
    import tempfile

    temp = str(txn.transaction_context["temp_dir"])
    os.makedirs(temp, exist_ok=True)
    if os.path.islink(temp) or not os.path.isdir(temp):
        raise Changed(f"{temp}, the run's transaction directory, is not a directory")
    return tempfile.mkdtemp(prefix="ccm-verified-", dir=temp)


def _name(group):
    pkg = getattr(group, "pkg_data", None)
    record = getattr(pkg, "repodata_record", None) or pkg
    return getattr(record, "name", None) or "a package"


def _stage(group, root):
    """One package's files that conda links (`LinkPathAction` with a file of the package,
    conda/core/path_actions.py:250-532) copied into a private directory under `root` and
    each checked against its sha256 in the package's `info/paths.json` (conda's
    `source_path_data`); the actions then link the copies. A file whose prefix conda
    replaces (`PrefixReplaceLinkAction`, :534-625) was copied from the cache by conda's
    verify, before this: it is copied and checked the same way, and its replacement made
    again from the checked copy. A symlink of the package is copied as a link, never read
    through; a directory is made, not read."""
    name = _name(group)
    staged, made = None, set()
    for action in getattr(group, "actions", None) or ():
        kind = type(action).__name__
        if kind not in ("LinkPathAction", "PrefixReplaceLinkAction"):
            continue
        link_type = getattr(action.link_type, "name", str(action.link_type))
        data = action.source_path_data
        path_type = getattr(getattr(data, "path_type", None), "name", "")
        if link_type == "directory" or path_type != "hardlink":
            continue
        if staged is None:
            import tempfile

            staged = tempfile.mkdtemp(dir=root)
            STAGED[str(getattr(group.pkg_data, "extracted_package_dir", ""))] = staged
        short = str(action.source_short_path)
        copy = os.path.join(staged, short)
        parent = os.path.dirname(copy)
        if parent not in made:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            made.add(parent)
        want = getattr(data, "sha256", None)
        if not want:
            # Its link count cannot vouch for it: the agent may have rewritten it through
            # a link and removed that link (attack 28 I1).
            raise Changed(
                f"the package {name} records no sha256 for {short} (info/paths.json), so "
                "its file in the package cache cannot be checked"
            )
        if _copy_verified(action.source_full_path, copy) != want:
            raise Changed(
                f"the package cache's copy of {name} changed since it was extracted: "
                f"{short} is not the file the package holds (a hard link to it was written)"
            )
        action.source_prefix = staged
        if kind == "PrefixReplaceLinkAction":
            error = action.verify()
            if error is not None:
                raise Changed(f"the checked copy of {short} of {name} cannot be linked: {error}")
        elif link_type == "softlink":
            # A link into the cache would lead to the copy conda deletes: link the copy.
            action.link_type = type(action.link_type)["hardlink"]


def _package_links(link_groups):
    """The symlinks the packages of a transaction hold, as their package caches have
    them: the path in the target -> (where it points, the package)."""
    links = {}
    for group in link_groups:
        for action in getattr(group, "actions", None) or ():
            if type(action).__name__ not in ("LinkPathAction", "PrefixReplaceLinkAction"):
                continue
            data = getattr(action, "source_path_data", None)
            if getattr(getattr(data, "path_type", None), "name", "") != "softlink":
                continue
            try:
                points = os.readlink(action.source_full_path)
            except OSError:
                continue  # Not a symlink in the cache: conda copies the file.
            links[str(action.target_short_path)] = (points, _name(group))
    return links


def _leads_outside(short, points, links, prefix):
    """Whether the symlink `short` -> `points` leads outside the target `prefix`, followed
    through the transaction's other package symlinks (`links`) and the target's own
    symlinks, one component at a time, as the kernel would once all are made."""
    if os.path.isabs(points):
        return True
    root = os.path.realpath(str(prefix))
    parts = [p for p in os.path.dirname(short).split("/") if p]
    pending = [p for p in points.split("/") if p]
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not parts:
                return True
            parts.pop()
            continue
        if part == ".":
            continue
        candidate = "/".join(parts + [part])
        leads = links[candidate][0] if candidate in links else None
        if leads is None:
            try:
                leads = os.readlink(os.path.join(root, candidate))
            except OSError:
                parts.append(part)
                continue
        followed += 1
        if followed > 40:
            return True
        if os.path.isabs(leads):
            # Inside by the target's real path or by the name conda knows it by.
            leads = os.path.normpath(leads)
            bases = [b for b in (root, os.path.normpath(str(prefix))) if _within(leads, b)]
            if not bases:
                return True
            parts = []
            leads = os.path.relpath(leads, bases[0])
        pending = [p for p in leads.split("/") if p] + pending
    return False


def _within(path, base):
    return os.path.commonpath([base, path]) == base


def check_package_links(link_groups, prefix):
    """A package's symlink leads inside the target. conda copies a symlink whose
    destination is absolute by reading through it (conda/gateways/disk/create.py:316-
    325 `copy` -> `_do_copy`; path_actions.py:256-258 links a softlink by `copy`): as
    root, any file's bytes into the environment. A relative one is made as it is, and a
    later step that writes through it by path in another process (conda's compile of
    a noarch package's `.py` files, into `__pycache__`) wrote outside (attack 35 Q1).
    Followed through the other symlinks of the transaction and of the target (attack 36:
    two that each stay inside by their text lead out together). Either stops the run
    before anything is linked; a symlink that stays inside is linked as conda links it."""
    links = _package_links(link_groups)
    for short, (points, name) in sorted(links.items()):
        if _leads_outside(short, points, links, prefix):
            raise Changed(
                f"the package {name} holds a symlink {short} to {points}, outside the "
                "target environment (conda would copy what it leads to, or write through it)"
            )


def stage_cached_packages(txn):
    """Every file conda links into a target comes from the run's own copy, checked
    against what the package's `info/paths.json` records (sha256) as it is copied,
    never from the package cache (attack 27 H2: an agent that keeps a hard link to a
    cached file, from an environment in its project that conda linked from the same
    cache, can watch the file's access time change when a check reads it and rewrite it
    before conda links that inode; attack 26 G2 and 27 H1 before it: a script rewritten
    in place, and the agent's own link then removed). Made right before the
    transaction's first step, once every package is fetched and extracted. The target
    ends holding files of its own, not links to the cache that any other environment
    linked from it could write through. A file without a recorded sha256 (old packages)
    stops the run."""
    for prefix, groups in (getattr(txn, "prefix_action_groups", None) or {}).items():
        link_groups = list(getattr(groups, "link_action_groups", None) or ())
        if not link_groups:
            continue
        check_package_links(link_groups, prefix)
        root = _staging_root(txn)
        try:
            for group in link_groups:
                _stage(group, root)
        except BaseException:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
            raise
