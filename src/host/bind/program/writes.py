# Part of the plan binding (see records.py): what conda reads, writes and deletes in the
# target by path after the run's checks goes through file descriptors instead, from the
# target's real path as the question showed it, following no symlink (attack 28 I4,
# attack 29 J1-J5: a directory or file of a target the agent may write, swapped for a
# symlink or a hard link while conda worked, led conda to write or delete outside it).
import errno
import json
import os
import stat
import sys
import threading

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from creations import _open_flags
    from main import _hold_for_tests
    from records import FILE_LIMIT, Changed


def _descend(fd, parts):
    """From the directory `fd` (taken), a descriptor of the directory `parts` below it,
    each part opened without following a symlink."""
    try:
        for part in parts:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            opened = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = opened
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(real):
    """A descriptor of the directory `real` (an absolute path), each of its components
    opened without following a symlink; OSError when one is a symlink or missing."""
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return _descend(root, [p for p in real.split(os.sep) if p])


def open_in_target(real, relative, flags, mode=0o644):
    """The file `relative` of the target opened with `flags` through `open_dir`, from
    the target's real path as the question showed it (`real`): no symlink above it, in
    it or as the file itself is followed, and the file is a regular one with no other
    link (a hard link to another environment's file, attack 29 J1), checked before it is
    truncated."""
    parent, name = os.path.split(os.path.join(real, relative))
    fd = open_dir(parent)
    try:
        flags = flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        opened = os.open(name, flags & ~os.O_TRUNC, mode, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        info = os.fstat(opened)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            raise OSError(errno.EMLINK, "not a regular file with a single link", name)
        if flags & os.O_TRUNC:
            os.ftruncate(opened, 0)
        os.set_blocking(opened, True)
    except BaseException:
        os.close(opened)
        raise
    return opened


def _below(root, parts):
    """A descriptor of the directory `parts[:-1]` below the directory `root` (a real
    path), each opened without following a symlink."""
    return _descend(open_dir(root), parts[:-1])


class Target:
    """The target as the call names it (`named()`) and its real path as the question
    showed it (`real()`; None without a target)."""

    def __init__(self, named, real):
        self.named, self.real = named, real
        self.working_out = threading.local()

    def both(self):
        """`named()` and `real()`; (None, None) while this thread works them out: conda
        opens files by path while it determines the target (`first_writable_envs_dir`
        probes each envs directory, conda/gateways/disk/create.py:514), when there is no
        target yet to keep them to (and asking for it there would recurse)."""
        if getattr(self.working_out, "now", False):
            return None, None
        self.working_out.now = True
        try:
            return self.named(), self.real()
        finally:
            self.working_out.now = False

    def inside(self, path):
        """Where `path` lies in the target: a real directory and the parts below it (the
        target itself: its parent and its name), or None (outside it)."""
        target, root = self.both()
        if not (target and root):
            return None
        path, base = os.path.abspath(str(path)), os.path.abspath(str(target))
        if path != base and not path.startswith(base + os.sep):
            return None
        if os.path.realpath(base) != root:
            # The name leads elsewhere now (attack 25 F2): conda would look there, the
            # run would work here; neither.
            raise OSError(errno.EXDEV, f"the target {base} no longer leads to {root}")
        if path == base:
            return os.path.dirname(root), [os.path.basename(root)]
        return root, [p for p in path[len(base) + 1 :].split(os.sep) if p]

    def ours(self, path, relative):
        """Whether `path` is the target's file `relative`."""
        target, root = self.both()
        return bool(target and root) and os.path.abspath(str(path)) == os.path.abspath(
            os.path.join(target, relative)
        )

    def opened(self, relative, flags):
        """`open_in_target`; None for a file to read that is not there. A symlink or a
        hard link on the way stops the run (`Changed`)."""
        try:
            return open_in_target(self.real(), relative, flags)
        except FileNotFoundError:
            if not flags & os.O_CREAT:
                return None
            raise Changed(f"a directory of {os.path.join(self.real(), relative)} is gone") from None
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise
            raise Changed(
                f"{os.path.join(self.named(), relative)}, or a directory above it, is a symlink "
                "or a file with other links now: conda would read or write through it "
                f"({error.strerror})"
            ) from None


def _delete(where, path, remove):
    """`remove(name, dir_fd)` on the last of `where`'s parts, below its directory reached
    through descriptors (`_below`); what cannot be deleted that way is left, and said."""
    import sys

    try:
        fd = _below(*where)
    except OSError as error:
        print(f"ccm: {path} was not deleted: {error}", file=sys.stderr)
        return
    try:
        remove(where[1][-1], fd)
    except (OSError, TypeError) as error:
        print(f"ccm: {path} was not deleted: {error}", file=sys.stderr)
    finally:
        os.close(fd)


def _remove_empty_parents(root, parts):
    """The directories above `parts` (below `root`), deepest first, removed while empty;
    never the target itself."""
    for depth in range(len(parts) - 1, 0, -1):
        try:
            fd = _below(root, parts[:depth])
        except OSError:
            return
        try:
            os.rmdir(parts[depth - 1], dir_fd=fd)
        except OSError:
            return
        finally:
            os.close(fd)


def guard_deletions(named, real):
    """conda deletes by path (conda/gateways/disk/delete.py: `rm_rf` calls `backoff_rmdir`,
    which runs `rmtree` — `rsync --delete` from a `.empty` it makes in the working
    directory, then `shutil.rmtree` by path — and on any error walks the path again with
    `os.walk`; `unlink_or_rename_to_trash`; `delete_trash`; `remove_empty_parent_paths`).
    Every module that took `rm_rf` by name (link.py's rollback, path_actions' removal of
    what is in the way of a file to link, of the history's copy aside, …) calls that one
    function, which looks these up in its module when it runs. Inside the target each now
    works through descriptors from the target's real path as the question showed it,
    following no symlink and never walking a path again (attack 29 J2, J4, J5: a
    directory of a target the agent may write, swapped for a symlink while conda deleted
    it, had conda delete another directory's files); what it cannot delete that way is
    left, and said on stderr. Elsewhere (the package cache, the run's transaction
    directory) a directory is deleted by Python's `shutil.rmtree`, which opens each
    directory without following a symlink and refuses one at the top, and never walked
    again: conda's rsync from a `.empty` in the working directory (the agent's project)
    and its walk after an error, which follows a directory swapped for a symlink
    meanwhile, had root delete another directory's files (attack 37 S1). Files there,
    conda's own."""
    import shutil

    from conda.gateways.disk import delete

    target = Target(named, real)
    unlink = delete.unlink_or_rename_to_trash
    trash, parents = delete.delete_trash, delete.remove_empty_parent_paths

    def backoff_rmdir(path, *args, **kwargs):
        where = target.inside(path)
        if where is None:
            try:
                shutil.rmtree(path)
            except FileNotFoundError:
                pass
            except OSError as error:
                print(f"ccm: {path} was not deleted: {error}", file=sys.stderr)
            return
        _delete(where, path, lambda name, fd: shutil.rmtree(name, dir_fd=fd))

    def unlink_or_rename_to_trash(path):
        where = target.inside(path)
        if where is None:
            return unlink(path)
        _delete(where, path, lambda name, fd: os.unlink(name, dir_fd=fd))

    def delete_trash(prefix):
        # Trash comes from a rename to `*.conda_trash`, which the run never makes inside
        # the target; a walk by path there would follow a directory swapped meanwhile.
        if target.inside(prefix) is None and not os.path.islink(prefix):
            return trash(prefix)

    def remove_empty_parent_paths(path):
        where = target.inside(path)
        if where is None:
            return parents(path)
        _remove_empty_parents(*where)

    delete.backoff_rmdir = backoff_rmdir
    delete.unlink_or_rename_to_trash = unlink_or_rename_to_trash
    delete.delete_trash = delete_trash
    delete.remove_empty_parent_paths = remove_empty_parent_paths


def guard_metadata(state, named, real):
    """conda reads and writes the target's `conda-meta/state` (`env config vars set`/
    `unset`, conda/core/prefix_data.py:661-672), writes `conda-meta/created_at`
    (:723-734, on every `create`) and appends to `conda-meta/history` (conda/history.py:
    397-411) by path, after the run's checks: each is opened through `open_in_target`
    instead (attack 28 I4: `state` swapped for a symlink right when conda read it led `env
    config vars set` to rewrite another environment's `state`, whose values that
    environment's activation runs; attack 29 J1, the same through a hard link; J3, a
    `created_at` symlink planted once the new prefix appeared had another environment's
    history overwritten)."""
    from conda import history
    from conda.core import prefix_data

    target = Target(named, real)
    _guard_state(state, target, prefix_data.PrefixData)
    _guard_created(target, prefix_data.PrefixData)
    history_file = os.path.join("conda-meta", "history")

    def history_open(path, mode="r", *args, **kwargs):
        if not any(c in mode for c in "wax+") or not target.ours(path, history_file):
            return open(path, mode, *args, **kwargs)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
        return os.fdopen(target.opened(history_file, flags), mode, *args, **kwargs)

    history.open = history_open


def _guard_state(state, target, data):
    """`env config vars`' state file: a symlink or hard link there stops the run
    (`plan_changed`): nothing has changed yet."""
    read_state, write_state = data._get_environment_state_file, data._write_environment_state_file
    state_file = os.path.join("conda-meta", "state")

    def checked(flags):
        box = []
        state.check(lambda: box.append(target.opened(state_file, flags)))
        return box[0]

    def get_state(self):
        _hold_for_tests("state")
        if not target.ours(self.prefix_path / "conda-meta" / "state", state_file):
            return read_state(self)
        fd = checked(os.O_RDONLY)
        if fd is None:
            return {}
        with os.fdopen(fd, "rb") as handle:
            return json.loads(handle.read(FILE_LIMIT))

    def put_state(self, value):
        if not target.ours(self.prefix_path / "conda-meta" / "state", state_file):
            return write_state(self, value)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(checked(flags), "w", encoding="utf-8") as handle:
            handle.write(json.dumps(value, ensure_ascii=False))

    data._get_environment_state_file, data._write_environment_state_file = get_state, put_state


def _guard_created(target, data):
    """`created_at`: written inside the transaction, so a refusal is conda's error, with
    its rollback."""
    created_file = os.path.join("conda-meta", "created_at")
    set_created = data.set_creation_time

    def set_creation_time(self):
        if not target.ours(self.prefix_path / "conda-meta" / "created_at", created_file):
            return set_created(self)
        from datetime import datetime, timezone

        stamp = self.created or self.last_modified or datetime.now(timezone.utc).timestamp()
        fd = open_dir(target.real())
        try:
            os.mkdir("conda-meta", dir_fd=fd)
        except FileExistsError:
            pass
        finally:
            os.close(fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(target.opened(created_file, flags), "w") as handle:
            handle.write(str(stamp))

    data.set_creation_time = set_creation_time


def guard_history_hold(named, real):
    """Before it appends to the history, a transaction copies it aside by path
    (conda/core/path_actions.py:1111-1115, `copy(history, history.c~)`, which opens the
    copy for writing through a symlink): the copy is written through `open_in_target`
    (a `history.c~` planted as a symlink in a target the agent may write would have had
    the history, which the agent writes, copied over any file the server's user may
    write; a `history` made a symlink, any file it may read copied into the target)."""
    from conda.core import path_actions

    copies = path_actions.copy
    hold = os.path.join("conda-meta", "history.c~")

    def copy(src, dst):
        target = named()
        if not (target and real()) or os.path.abspath(str(dst)) != os.path.abspath(
            os.path.join(target, hold)
        ):
            return copies(src, dst)
        import shutil

        history = os.path.join("conda-meta", "history")
        reading = os.O_RDONLY | os.O_NONBLOCK
        writing = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(open_in_target(real(), history, reading), "rb") as source:
            if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                raise OSError(f"{src} is not a regular file")
            with os.fdopen(open_in_target(real(), hold, writing), "wb") as out:
                shutil.copyfileobj(source, out)

    path_actions.copy = copy


def guard_config_file(state):
    """`conda config` reads the file it writes (the question names it; `records.
    config_file`) and writes it back by path (conda/cli/main_config.py:652-707
    `ConfigurationFile`; conda/cli/condarc.py:352-390 `read`, `write`: conda/common/
    serialize/yaml.py `Path.write_text`, which follows a symlink), after the run's
    checks. The file of an environment the agent may write, swapped for a symlink once
    conda read it, had root overwrite any file with the agent's YAML (attack 31 L4). The
    file the question named is read and written through descriptors from its real path
    as the question showed it instead, following no symlink, and no file with other
    links; otherwise conda's error (`Cannot write to condarc file`), nothing written."""
    import builtins

    from conda.cli import main_config

    entry = (state.mode.plan.get("paths") or {}).get("written")
    if not entry:
        return
    shown, (parent, name) = _expanded(entry[0]), os.path.split(entry[1])

    def opened(path, mode="r", *args, **kwargs):
        # `--write-default` writes the file with main_config's `open` (main_config.py:
        # 635-648), as conda before `ConfigurationFile` wrote every change.
        if not isinstance(path, (str, os.PathLike)) or _expanded(path) != shown:
            return builtins.open(path, mode, *args, **kwargs)
        writing = any(c in mode for c in "wax+")
        if writing:
            _hold_for_tests("config")
        flags = _open_flags(mode) if writing else os.O_RDONLY
        return os.fdopen(open_in_target(parent, name, flags), mode, *args, **kwargs)

    main_config.open = opened
    try:
        from conda.cli import condarc
        from conda.common.serialize import yaml
    except ImportError:  # A conda before `ConfigurationFile`: main_config's `open` only.
        return
    cls = condarc.ConfigurationFile
    reads, writes = cls.read, cls.write

    def read(self, path=None):
        if _expanded(path or self._path) != shown:
            return reads(self, path)
        try:
            fd = open_in_target(parent, name, os.O_RDONLY)
        except FileNotFoundError:
            self._content = {}
            return self._content
        with os.fdopen(fd, encoding="utf-8") as handle:
            self._content = yaml.read(fp=handle) or {}
        return self._content

    def write(self, path=None):
        _hold_for_tests("config")
        chosen = path or self._path
        if _expanded(chosen) != shown:
            return writes(self, path)
        from conda import CondaError

        try:
            fd = open_in_target(parent, name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                yaml.write(self.content, fp=handle)
        except OSError as error:
            raise CondaError(
                f"Cannot write to condarc file at {chosen}\nCaused by {error!r}"
            ) from error

    cls.read, cls.write = read, write


def guard_written_files(state):
    """A file the command line names that conda writes by path outside a transaction
    (`export --file`: conda/cli/main_export.py:279-280 `open(args.file, "w")`, after it
    read the target's records) was checked only at the parse: made a symlink in
    between, root overwrote a file elsewhere with the export (attack 35 Q3; the agent
    sizes the window by how many records the target holds). Every path of the argv the
    question showed (`paths.argv`) is opened for writing, by `open` or `io.open`
    (pathlib's), through descriptors from its real path as the question showed it,
    following no symlink, and no file with other links; otherwise conda's error, nothing
    written. So are the target's `conda-meta/pinned` and `frozen`, read too (conda
    shows their lines: attack 36 R2). Other reads and paths are conda's own."""
    import builtins
    import io

    paths = state.mode.plan.get("paths") or {}
    named = {}
    for entry in paths.get("argv") or ():
        for value in (entry[0], os.path.expandvars(entry[0])):
            named[_expanded(value)] = (entry[1], False)
    target = paths.get("target")
    for name in ("conda-meta/pinned", "conda-meta/frozen") if target else ():
        for base in (target[0], target[1], state.mode.plan.get("prefix")):
            if base:
                named[_expanded(os.path.join(base, name))] = (os.path.join(target[1], name), True)
    if not named:
        return
    original = builtins.open

    def opened(path, mode="r", *args, **kwargs):
        if not isinstance(path, (str, os.PathLike)) or not isinstance(mode, str):
            return original(path, mode, *args, **kwargs)
        entry = named.get(_expanded(path))
        writing = any(c in mode for c in "wax+")
        if entry is None or not (writing or entry[1]):
            return original(path, mode, *args, **kwargs)
        if writing:
            _hold_for_tests("written")
        parent, name = os.path.split(entry[0])
        flags = _open_flags(mode) if writing else os.O_RDONLY
        return os.fdopen(open_in_target(parent, name, flags), mode, *args, **kwargs)

    builtins.open = io.open = opened


def _expanded(path):
    """`path` as conda reads it: `~` expanded, from the working directory."""
    return os.path.abspath(os.path.expanduser(str(path)))
