# Part of the plan binding (see records.py): a bounded confirmed run's targets hold no file
# shared with anything outside them, and no target holds a hard link conda's records do
# not explain.
import errno
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from records import Changed

# Set by the server in a bounded run's environment (host/sandbox/bound.rs `install`): the
# run writes inside the write bound's walls, where nothing it may write is to be a file
# shared with anything outside its places.
BOUND_VAR = "CCM_WRITE_BOUND"


UNSHARE_MAX_DEPTH = 512
"""The deepest directory `unshare` descends to (as host/sandbox/shared.rs MAX_DEPTH)."""

UNSHARE_MAX_BYTES = 1 << 30
"""The most bytes of file data one `unshare` copies (as host/sandbox/shared.rs MAX_BYTES)."""


def _copy_data(source, copy, size, budget):
    """Copy the data of `source` (`size` bytes) into `copy`, keeping holes; the bytes of
    data copied. Raises OSError past `budget`."""
    copied = 0
    at = 0
    while at < size:
        try:
            start = os.lseek(source, at, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:
                break
            raise
        end = min(os.lseek(source, start, os.SEEK_HOLE), size)
        offset = start
        while offset < end:
            chunk = os.pread(source, min(end - offset, 1 << 20), offset)
            if not chunk:
                break
            copied += len(chunk)
            if copied > budget:
                raise OSError(errno.EFBIG, "too much shared data to copy")
            written = 0
            while written < len(chunk):
                written += os.pwrite(copy, chunk[written:], offset + written)
            offset += len(chunk)
        if max(end, offset) == start:
            break
        at = max(end, offset)
    os.ftruncate(copy, size)
    return copied


def unshare(prefix):
    """Every regular file of the prefix with other links becomes a file of its own: copied
    beside itself and the copy renamed over the name (the server does the same right
    before the run, host/sandbox/shared.rs). conda's own links from a package cache are
    files of that cache and of every environment linked from it: a link script (or conda
    writing an entry point in place) would write them all. Under the walls conda copies
    package files anyway. The copy keeps the permission bits only (never set-user-ID,
    set-group-ID or sticky) and the original's owner and group (a file of another user
    that cannot be given them is refused), keeps holes, and at most UNSHARE_MAX_BYTES of
    data are copied; deeper than UNSHARE_MAX_DEPTH is refused. Walks by directory
    descriptors without following symlinks; what it cannot see fails closed."""
    if not os.path.lexists(prefix):
        return

    def unseen(error):
        raise Changed(f"the target environment could not be read whole: {error.filename}")

    budget = UNSHARE_MAX_BYTES
    top = prefix.rstrip(os.sep) or os.sep
    for root, dirs, files, fd in os.fwalk(top, onerror=unseen, follow_symlinks=False):
        depth = 0 if root == top else root[len(top) :].count(os.sep)
        if dirs and depth + 1 >= UNSHARE_MAX_DEPTH:
            raise Changed(f"the target environment is nested too deep to be read whole: {root}")
        for name in files:
            try:
                st = os.lstat(name, dir_fd=fd)
            except OSError:
                raise Changed(f"the file {os.path.join(root, name)} could not be read") from None
            if st.st_nlink <= 1 or stat.S_ISLNK(st.st_mode):
                continue
            path = os.path.join(root, name)
            if not stat.S_ISREG(st.st_mode):
                raise Changed(f"the file {path} of the target environment has other links")
            if min(st.st_size, st.st_blocks * 512) > budget:
                raise Changed(f"too much shared data to copy: {path}")
            temp = f"{name}.ccm-unshare-{os.getpid()}"
            try:
                source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
                try:
                    st = os.fstat(source)
                    if not stat.S_ISREG(st.st_mode):
                        raise OSError(errno.EINVAL, "not a regular file")
                    copy = os.open(
                        temp,
                        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                        0o600,
                        dir_fd=fd,
                    )
                    try:
                        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                            os.fchown(copy, st.st_uid, st.st_gid)
                        budget -= _copy_data(source, copy, st.st_size, budget)
                        os.fchmod(copy, stat.S_IMODE(st.st_mode) & 0o777)
                    finally:
                        os.close(copy)
                finally:
                    os.close(source)
                os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except OSError:
                try:
                    os.unlink(temp, dir_fd=fd)
                except OSError:
                    pass
                raise Changed(
                    f"the file {path} of the target environment could not be made its own"
                ) from None


def _linked_files(top):
    """(device, inode) -> path of every non-directory below top with more than one link
    (symlinks not followed), and the first path the walk could not see (a directory it
    cannot list, a name past PATH_MAX), or None."""
    found = {}
    unseen = []
    for root, _dirs, files in os.walk(top, onerror=lambda e: unseen.append(e.filename)):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                unseen.append(path)
                continue
            if st.st_nlink > 1:
                found[(st.st_dev, st.st_ino)] = path
    return found, (str(unseen[0]) if unseen else None)


def foreign_link(prefix):
    """A file of the prefix with other links that is not conda's own link of a package
    cache file, or None. conda writes some existing files in place after a warning only
    (conda/gateways/disk/create.py:137-160, an entry point: `open(target, "w")`), so a
    hard link planted there writes another file; conda's links from its caches are
    accepted: the inode of a file below the `link.source` of a record in conda-meta, when
    that source lies in one of conda's package cache directories (context.pkgs_dirs).
    The server makes the same check (host/confine.rs `foreign_links`)."""
    import json

    if not os.path.lexists(prefix):
        return None
    linked, unseen = _linked_files(prefix)
    if unseen is not None:
        # What the walk cannot see may hide a link: fail closed.
        return unseen
    if not linked:
        return None
    try:
        from conda.base.context import context

        caches = [os.path.realpath(d) for d in context.pkgs_dirs]
    except Exception:
        caches = []
    meta = os.path.join(prefix, "conda-meta")
    try:
        names = sorted(n for n in os.listdir(meta) if n.endswith(".json"))
    except OSError:
        names = []
    for name in names:
        try:
            with open(os.path.join(meta, name), "rb") as fh:
                source = (json.load(fh).get("link") or {}).get("source")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(source, str):
            continue
        source = os.path.realpath(source)
        if any(source.startswith(c + os.sep) for c in caches):
            for key in _linked_files(source)[0]:
                linked.pop(key, None)
        if not linked:
            return None
    return sorted(linked.values())[0]
