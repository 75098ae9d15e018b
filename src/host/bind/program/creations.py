# Part of the plan binding (see records.py): what conda creates, renames and changes the
# mode of in the target by path after the run's checks goes through file descriptors
# instead, from the target's real path as the question showed it, following no symlink
# (attack 30 K1-K4: a directory of a target the agent may write, swapped for a symlink
# while conda linked, had conda create an entry point in a cron directory, overwrite
# another environment's files, rename a file elsewhere aside and make directories
# there; attack 31 L3: a menu file swapped once linked had menuinst run its code). See
# writes.py for the descent by descriptors and `Target`.
import errno
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from records import FILE_LIMIT
    from target import _shipped
    from writes import Target, _below, _descend, open_in_target


def _at(where, make):
    """`make(name, dir_fd)` for the last of `where`'s parts, in its directory reached
    through descriptors (`_below`)."""
    fd = _below(*where)
    try:
        return make(where[1][-1], fd)
    finally:
        os.close(fd)


def _mkdir_below(root, parts):
    """`mkdir -p` of the directory `parts` below the directory `root` (a real path),
    through descriptors from `/`: each directory on the way, `root`'s included, opened
    without following a symlink, and made where it is missing (a new environment's
    parents, as conda's `mkdir_p` makes them)."""
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [p for p in root.split(os.sep) if p] + list(parts):
        try:
            try:
                os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
        except BaseException:
            os.close(fd)
            raise
        fd = _descend(fd, [part])  # takes `fd`, closed on failure too
    os.close(fd)


def guard_creations(named, real):
    """conda creates the target's files by path (conda/gateways/disk/create.py:
    `create_link` calls `link`, `symlink` and, for a directory, `mkdir_p`, and copies
    through `open(dst, "wb")`; `create_python_entry_point` and the other writers there
    open their files by path), after the run's last checks. A directory of a target the
    agent may write, swapped for a symlink while conda linked, had conda create an
    entry point in any directory (a cron directory: root ran it) and overwrite another
    environment's files in place (attack 30 K1, K2). Those names are looked up in that
    module when its functions run: inside the target each now works through descriptors
    from the target's real path as the question showed it, following no symlink, and
    writes no file with other links; a symlink on the way fails the action (conda rolls
    the transaction back). Elsewhere, conda's own."""
    import builtins

    from conda.gateways.disk import create

    target = Target(named, real)
    link, symlink, mkdir_p = create.link, create.symlink, create.mkdir_p

    def guarded_link(src, dst):
        where = target.inside(dst)
        if where is None:
            return link(src, dst)
        _at(where, lambda name, fd: os.link(src, name, dst_dir_fd=fd))

    def guarded_symlink(src, dst):
        where = target.inside(dst)
        if where is None:
            return symlink(src, dst)
        _at(where, lambda name, fd: os.symlink(src, name, dir_fd=fd))

    def guarded_mkdir_p(path):
        where = target.inside(path)
        if where is None:
            return mkdir_p(path)
        _mkdir_below(*where)
        # conda's value (conda/gateways/disk/__init__.py:67-78): link.py:887 deletes a
        # directory whose `mkdir_p` returned a false value as one it made for a test.
        return path

    def guarded_open(path, mode="r", *args, **kwargs):
        where = target.inside(path) if isinstance(path, (str, os.PathLike)) else None
        if where is None or not any(c in mode for c in "wax+"):
            return builtins.open(path, mode, *args, **kwargs)
        fd = open_in_target(where[0], os.path.join(*where[1]), _open_flags(mode))
        return os.fdopen(fd, mode, *args, **kwargs)

    create.link, create.symlink, create.mkdir_p = guarded_link, guarded_symlink, guarded_mkdir_p
    create.open = guarded_open
    _guard_renames_and_modes(target, guarded_mkdir_p, guarded_open)


def guard_compiles(named, real):
    """conda compiles a noarch Python package's `.py` files with the environment's
    Python, in another process that reads and writes by path (conda/core/
    path_actions.py:752-768 `CompileMultiPycAction.execute` -> conda/gateways/disk/
    create.py:400-431 `compile_multiple_pyc`, `python -m compileall`), so no descriptor
    guard reaches it. A `__pycache__` that leads outside the target (a package's own
    symlink, chained through another: attack 35 Q1) had root write `.pyc` files into
    any directory, and a source that does would be read. Each source and each `.pyc`'s
    directory must lie inside the target's real path as the question showed it when
    the compile starts; otherwise the action fails (conda rolls the transaction back).
    A directory the agent swaps during the compile itself is not covered (attack 31 L5,
    docs/security.md)."""
    from conda.core import path_actions

    compile_multiple_pyc = getattr(path_actions, "compile_multiple_pyc", None)
    if compile_multiple_pyc is None:
        return

    def guarded(python, sources, compiled, prefix, version):
        sources, compiled = tuple(sources), tuple(compiled)
        root = real().rstrip(os.sep) + os.sep
        directories = {}

        def directory(path):
            # Resolved once a directory (a package's files share a few): a realpath
            # each was half the compile's own time for 20,000 files.
            where = os.path.dirname(path)
            if where not in directories:
                directories[where] = os.path.join(os.path.realpath(where), "")
            return directories[where]

        for path in sources:
            if os.path.islink(path):
                leads = os.path.realpath(path)
            else:
                leads = directory(path) + os.path.basename(path)
            if not leads.startswith(root):
                raise OSError(errno.EXDEV, f"{leads} lies outside the target environment")
        for path in compiled:
            if not directory(path).startswith(root):
                raise OSError(errno.EXDEV, f"{directory(path)} lies outside the target environment")
        return compile_multiple_pyc(python, sources, compiled, prefix, version)

    path_actions.compile_multiple_pyc = guarded


def _open_flags(mode):
    """The `os.open` flags of the `open` mode `mode` (one that writes)."""
    flags = os.O_RDWR if "+" in mode else os.O_WRONLY
    if "r" in mode:
        return flags
    if "a" in mode:
        return flags | os.O_CREAT | os.O_APPEND
    return flags | os.O_CREAT | (os.O_EXCL if "x" in mode else os.O_TRUNC)


def _exists_at(path, where):
    """Whether `path` exists (a symlink counts), looked up through `where` (`inside`)."""
    if where is None:
        return os.path.lexists(path)
    try:
        _at(where, lambda name, fd: os.stat(name, dir_fd=fd, follow_symlinks=False))
    except FileNotFoundError:
        return False
    return True


def _guard_renames_and_modes(target, guarded_mkdir_p, guarded_open):
    """The rest of conda's writes by path in the target, after the run's checks, made
    through descriptors as `guard_creations` makes its creations: renaming a file aside
    before it is removed or replaced and back on a rollback (conda/core/path_actions.py:
    1129, 1215, 1225, 1351, 1436, 1554 `backoff_rename`, which calls the `rename` of
    conda/gateways/disk/update.py:58-64 by its module's name); `chmod +x` of an entry
    point written (conda/gateways/disk/create.py:166, 197 `make_executable`, which
    follows a symlink); the mode and times of a file copied in (create.py:342
    `copystat(src, dst)`, by path after the copy: a symlink swapped in then would give
    another file the package file's mode); the directories conda/core/link.py makes
    with the `mkdir_p` it took by name (link.py:53; 412 the target, 887 and 1108
    `conda-meta`) and the file it opens there to append (link.py:888, `conda-meta/
    history`, to see that it can). A directory of the target swapped for a symlink
    while conda worked had a file elsewhere renamed aside (attack 30 K3) and
    directories made there (K4)."""
    from conda.core import link
    from conda.gateways.disk import create, update

    rename, make_executable, copystat = update.rename, create.make_executable, create.copystat

    def guarded_rename(source, destination, force=False):
        at = target.inside(source), target.inside(destination)
        if at == (None, None):
            return rename(source, destination, force)
        if force and _exists_at(destination, at[1]):
            update.rm_rf(destination)
        if not _exists_at(source, at[0]):
            return
        fds = []
        try:
            for where in at:
                fds.append(_below(*where) if where else None)
            names = [
                where[1][-1] if where else path for where, path in zip(at, (source, destination))
            ]
            os.rename(names[0], names[1], src_dir_fd=fds[0], dst_dir_fd=fds[1])
        finally:
            for fd in fds:
                if fd is not None:
                    os.close(fd)

    def guarded_make_executable(path):
        where = target.inside(path)
        if where is None:
            return make_executable(path)
        fd = open_in_target(where[0], os.path.join(*where[1]), os.O_RDONLY)
        try:
            os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o111)
        finally:
            os.close(fd)

    def guarded_copystat(src, dst, *, follow_symlinks=True):
        where = target.inside(dst)
        if where is None:
            return copystat(src, dst, follow_symlinks=follow_symlinks)
        source = os.stat(src, follow_symlinks=follow_symlinks)
        fd = open_in_target(where[0], os.path.join(*where[1]), os.O_RDONLY)
        try:
            os.utime(fd, ns=(source.st_atime_ns, source.st_mtime_ns))
            os.fchmod(fd, stat.S_IMODE(source.st_mode))
        finally:
            os.close(fd)

    update.rename, create.make_executable = guarded_rename, guarded_make_executable
    create.copystat = guarded_copystat
    link.mkdir_p, link.open = guarded_mkdir_p, guarded_open


def _read_at(where):
    """The bytes (at most FILE_LIMIT + 1) of the regular file at `where` (`inside`),
    opened through descriptors without following a symlink; other links allowed (the
    run's own copies are linked into the target)."""
    fd = _below(*where)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        opened = os.open(where[1][-1], flags, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(opened, "rb") as handle:
        if not stat.S_ISREG(os.fstat(opened).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", where[1][-1])
        return handle.read(FILE_LIMIT + 1)


def guard_menus(named, real):
    """conda hands each `Menu/*.json` of a package it links or unlinks to menuinst by
    path (conda/core/path_actions.py:659-667 `MakeMenuAction`, 1248-1254
    `RemoveMenuAction`: `make_menu(prefix, "Menu/x.json")`, conda/gateways/disk/
    create.py:243-258 `menuinst.install(join(prefix, path))`), at the end of the
    transaction, after the run's checks; menuinst runs a menu item's `precreate` as shell
    code and writes shortcuts whose `Exec=` is its `command`. A menu file of a target the
    agent may write, swapped for its own once linked, had menuinst run its `precreate`
    as root (attack 31 L3); swapped after the removal's check, it would name what
    menuinst deletes (attack 24 B6). Inside the target, the file is read through
    descriptors, must be its package's (`_shipped`), and menuinst is handed the run's
    private copy of those bytes (same name) instead; a file that is not stops the
    action (conda rolls the transaction back)."""
    import tempfile

    from conda.core import path_actions

    target = Target(named, real)
    make = path_actions.make_menu

    def menu(action, record, remove):
        relative = str(action.target_short_path)
        where = target.inside(os.path.join(action.target_prefix, relative))
        if where is None:
            return make(action.target_prefix, relative, remove=remove)
        found = _read_at(where)
        _shipped(record, action.target_prefix, relative, "menu file", found=found)
        _guard_menu_records(target)
        private = tempfile.mkdtemp(dir=action.transaction_context["temp_dir"])
        copy = os.path.join(private, os.path.basename(relative))
        with open(copy, "xb") as handle:
            handle.write(found)
        # `join(prefix, copy)` is `copy`, an absolute path (create.py:254).
        make(action.target_prefix, copy, remove=remove)

    def make_execute(self):
        menu(self, self.package_info.repodata_record, False)
        self._execute_successful = True

    def make_reverse(self):
        if self._execute_successful:
            menu(self, self.package_info.repodata_record, True)

    making, removing = path_actions.MakeMenuAction, path_actions.RemoveMenuAction
    making.execute, making.reverse = make_execute, make_reverse
    removing.execute = lambda self: menu(self, self.linked_package_data, True)
    removing.reverse = lambda self: menu(self, self.linked_package_data, False)


def _guard_menu_records(target):
    """menuinst (2.x) records the shortcuts it makes in the target's
    `Menu/menuinst.toml`, read by path, and writes `Menu/menuinst.toml.tmp` by path
    (`open(tmp, "wb")`, which follows a symlink) before it renames it over the record
    (menuinst/utils.py:91-135, taken by name in menuinst/api.py:14-21, 43-101). A
    `.tmp` the agent planted as a symlink had root write the record into any file, and a
    record made a symlink had a root-only file copied into the target (attack 32 M1).
    For the target's record both go through descriptors: read following no symlink and
    no file with other links; written as a new `.tmp` (whatever was there removed, not
    followed) renamed over the record within the directory's descriptor."""
    try:
        from menuinst import api, utils
    except ImportError:  # No menuinst: conda makes no shortcut (create.py:250-264).
        return
    if getattr(api, "_ccm_records", False) or not hasattr(api, "write_menuinst_toml"):
        return  # Guarded already, or a menuinst that records nothing.
    reads, writes = api.read_menuinst_toml, api.write_menuinst_toml

    def read(prefix):
        where = target.inside(os.path.join(str(prefix), "Menu", "menuinst.toml"))
        if where is None:
            return reads(prefix)
        try:
            fd = open_in_target(where[0], os.path.join(*where[1]), os.O_RDONLY)
        except FileNotFoundError:
            return {}
        with os.fdopen(fd, "rb") as handle:
            return utils.tomllib.load(handle)

    def write(prefix, data):
        where = target.inside(os.path.join(str(prefix), "Menu", "menuinst.toml"))
        if where is None:
            return writes(prefix, data)
        data.setdefault("schema_version", utils.MENUINST_TOML_SCHEMA_VERSION)
        _mkdir_below(where[0], where[1][:-1])
        fd = _below(*where)
        try:
            try:
                os.unlink("menuinst.toml.tmp", dir_fd=fd)
            except FileNotFoundError:
                pass
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open("menuinst.toml.tmp", flags, 0o644, dir_fd=fd), "wb") as out:
                utils.tomli_w.dump(data, out)
            os.rename("menuinst.toml.tmp", "menuinst.toml", src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)

    api.read_menuinst_toml, api.write_menuinst_toml = read, write
    api._ccm_records = True
