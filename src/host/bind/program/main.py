# Part of the plan binding (see records.py): the package copy check, the importers
# watched, the state of one process, and the entry point (the last part; the only one that
# runs anything, and only as ``__main__``).
import hashlib
import os
import sys

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from cache import STAGED, private_temp_dir
    from creations import guard_compiles, guard_creations, guard_menus
    from plan import Preview, Run, _target
    from records import REMOVE, Changed, Done
    from writes import (
        guard_config_file,
        guard_deletions,
        guard_history_hold,
        guard_metadata,
        guard_written_files,
        open_dir,
    )


def install(state):
    """Wrap the first step of every transaction (see the module's doc); in a preview, also
    note the commands whose packages conda's dry run does not list."""
    from conda.core import link

    cls = link.UnlinkLinkTransaction
    original = cls._get_pfe
    checked = set()

    def _get_pfe(self):
        if id(self) not in checked:
            checked.add(id(self))
            state.check(lambda: state.mode.transaction(self))
        return original(self)

    cls._get_pfe = _get_pfe
    if isinstance(state.mode, Run):
        _check_fetches(state)
        _wrap_transaction(state, cls)
        _wrap_scripts_and_metadata(state)
        _recheck_before_deleting(state)
        guard_config_file(state)
        guard_written_files(state)
    if isinstance(state.mode, Preview):
        _envs_dir_as_outside()
        # conda/misc.py:206-215 (explicit package files and URLs, explicit environment
        # files: DryRunExit before anything is fetched) and :285-334 (`--clone` and
        # `rename`: DryRunExit before the clone's transaction).
        _note("get_package_records_from_explicit", "explicit package files or URLs", state)
        _note("clone_env", "a clone of an environment", state)


def _check_fetches(state):
    """conda checks what it downloads against a hash only where the record carries one
    (conda/gateways/connection/download.py:204-230) and copies a package from a file://
    channel into the package cache unchecked (conda/core/path_actions.py:1353-1405,
    `_execute_local`): the run checks every fetched file against its record before it
    is extracted, and stops on a record without a hash (an http package swapped while
    the question was open installed: attack 17 A17-4)."""
    from conda.core import path_actions

    fetch = path_actions.CacheUrlAction
    fetched = fetch.execute

    def execute(self, *args, **kwargs):
        result = fetched(self, *args, **kwargs)
        state.mode.reached = state.mode.reached or "fetched"
        state.check(lambda: verify_copy(self))
        _hold_for_tests("fetched")
        return result

    fetch.execute = execute


def _wrap_transaction(state, cls):
    """The run's own transaction directory, right after conda prepares the transaction's
    context and actions, before any action's verify or execute (conda/core/link.py:
    268-298 `prepare`; `private_temp_dir`), once the paths of the call are checked again
    (the packages are fetched then); the paths and the target checked again once
    every package is fetched and extracted, right before the first script, unlink or
    link (link.py:361-377 `execute` -> `_execute`; `Run.before_execute`)."""
    prepared = cls.prepare

    def prepare(self, *args, **kwargs):
        result = prepared(self, *args, **kwargs)
        if not getattr(self, "_ccm_temp_dir", False):
            from conda.base.context import context

            # Before verify, which makes and opens `conda-meta/history` by path
            # (link.py:884-896): a target named through a symlink turned while the
            # packages were fetched stops here, not as conda's "not writable".
            state.check(lambda: state.mode.check_paths(context))
            state.check(lambda: private_temp_dir(self))
            self._ccm_temp_dir = True
        return result

    cls.prepare = prepare
    executed = cls._execute

    def _execute(self, *args, **kwargs):
        state.mode.reached = "extracted"
        state.check(lambda: state.mode.before_execute(self))
        _hold_for_tests("linking")
        return executed(self, *args, **kwargs)

    cls._execute = _execute


def _wrap_scripts_and_metadata(state):
    """A pre-link script runs from the package's directory (conda/core/link.py:975-981
    `run_script(prec.extracted_package_dir, …, "pre-link")`): from the run's verified
    copy of it instead (`stage_cached_packages`). The metadata conda writes by path is
    opened, and what it creates and deletes in the target made and deleted, through
    descriptors (`guard_metadata`, `guard_history_hold`, `guard_deletions`,
    `guard_creations`); the menu files conda hands to menuinst are the packages' own,
    read once (`guard_menus`); what conda compiles, and where, lies inside the target
    (`guard_compiles`)."""
    from conda.base.context import context
    from conda.core import link

    ran = link.run_script

    def run_script(prefix, prec, action="post-link", *args, **kwargs):
        if action == "pre-link":
            prefix = STAGED.get(str(prefix), prefix)
        return ran(prefix, prec, action, *args, **kwargs)

    link.run_script = run_script

    def named():
        return _target(context)

    def real():
        return state.mode.real_target(_target(context))

    state.check(lambda: guard_metadata(state, named, real))
    guard_history_hold(named, real)
    guard_deletions(named, real)
    guard_creations(named, real)
    guard_menus(named, real)
    guard_compiles(named, real)


def _recheck_before_deleting(state):
    """`remove --all` and `env remove` delete the target whole after the transaction
    (conda/cli/main_remove.py:218 `rm_rf(prefix)`): right before, every path of the call
    still leads where it did (attack 26 G3: a directory above the target made a symlink
    once the records were gone led the deletion to another directory, deleted whole)."""
    from conda.gateways.disk import delete

    removes = delete.rm_rf

    def rm_rf(path, *args, **kwargs):
        from conda.base.context import context

        target = _target(context)
        if target is not None and os.path.abspath(str(path)) == os.path.abspath(target):
            state.check(lambda: _deletion_shown(state, target))
            state.mode.reached = "removed"
            _hold_for_tests("deleting")
            state.check(lambda: state.mode.check_paths(context))
            return _remove_tree(state.mode.real_target(target))
        return removes(path, *args, **kwargs)

    delete.rm_rf = rm_rf


def _deletion_shown(state, target):
    """Only `remove --all` and `env remove` delete the target whole as the question says
    (main_remove.py:218). `create` deletes an environment it finds at its target
    (main_create.py:182-198), but its dry run refuses one there (:184-188), so no
    question showed one: it appeared after (attack 33 N2: a target named by an
    environment file, made a symlink to another environment while the question was
    open, had that environment deleted whole)."""
    if state.mode.plan.get("command") != REMOVE:
        raise Changed(
            f"conda would delete the environment at {target}, which the question did not show there"
        )


def _remove_tree(real):
    """Delete the directory `real` (just checked to be where the target led) whole through
    file descriptors: each directory above it opened without following a symlink, and the
    tree removed below that descriptor (`shutil.rmtree` with `dir_fd`, which follows no
    symlink). conda's `rm_rf` works by path and, when a removal fails, walks the path
    again, so a directory above the target turned into a symlink while it deleted led it
    to delete another directory's files (attack 27 H3). A directory turned meanwhile
    stops the deletion (what is left stays); so does any error. True when deleted."""
    import shutil
    import sys

    parent, name = os.path.split(real)
    try:
        fd = open_dir(parent)
    except OSError as error:
        print(f"ccm: the environment {real} was not deleted whole: {error}", file=sys.stderr)
        return False
    try:
        shutil.rmtree(name, dir_fd=fd)
        return True
    except (OSError, TypeError) as error:
        print(f"ccm: the environment {real} was not deleted whole: {error}", file=sys.stderr)
        return False
    finally:
        os.close(fd)


def _hold_for_tests(point):
    """`CCM_TEST_HOLD_FETCHED=DIR` (debug builds of the server only: a release build
    removes it from the run's environment) makes the run wait at `point` — after it
    fetched a package (`fetched`), after its last checks before the first link
    (`linking`), before it reads the target's `conda-meta/state` (`state`), before it
    deletes the target whole (`deleting`), before `conda config` writes its file
    (`config`), before conda writes a file its command line names (`written`) — when
    the test asked
    for that point (`DIR/<point>.wanted`, taken), until `DIR/go` exists (`DIR/<point>`
    says it waits; at most two minutes; `go` is taken), so that a test can change the
    target between the run's checks."""
    import time

    hold = os.environ.get("CCM_TEST_HOLD_FETCHED")
    if not hold:
        return
    try:
        os.remove(os.path.join(hold, f"{point}.wanted"))
    except OSError:
        return
    with open(os.path.join(hold, point), "w"):
        pass
    go = os.path.join(hold, "go")
    for _ in range(2400):
        if os.path.exists(go):
            os.remove(go)
            return
        time.sleep(0.05)


def _writable_outside(path):
    """Whether this process could write `path` outside the read-only sandbox, by its
    permission bits (the preview's sandbox mounts most of the file system read-only and
    the root prefix as a discarded overlay; the run has neither)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    uid = os.geteuid()
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & 0o200)
    if st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        return bool(st.st_mode & 0o020)
    return bool(st.st_mode & 0o002)


def _envs_dir_as_outside():
    """The preview names a new environment's prefix as the run will: conda takes the first
    envs directory it can write (conda/gateways/disk/create.py:500-523, through
    conda/core/prefix_data.py:52 and :161 `PrefixData.from_name`), which the sandbox would
    otherwise decide."""
    try:
        from conda.base.context import context
        from conda.core import prefix_data
        from conda.exceptions import NoWritableEnvsDirError
    except ImportError:
        return

    def first_writable_envs_dir(create=True):
        for envs_dir in context.envs_dirs:
            if envs_dir == os.devnull:
                continue
            magic = os.path.join(envs_dir, ".conda_envs_dir_test")
            if os.path.isfile(magic):
                if _writable_outside(magic):
                    return envs_dir
            elif create:
                existing = envs_dir
                while not os.path.exists(existing) and os.path.dirname(existing) != existing:
                    existing = os.path.dirname(existing)
                if os.path.isdir(existing) and _writable_outside(existing):
                    return envs_dir
        raise NoWritableEnvsDirError(context.envs_dirs)

    if hasattr(prefix_data, "first_writable_envs_dir"):
        prefix_data.first_writable_envs_dir = first_writable_envs_dir


def verify_copy(action):
    """The package file fetched (downloaded, or copied from a local channel) is the one
    its record names."""
    algorithm, expected = ("sha256", action.sha256) if action.sha256 else ("md5", action.md5)
    path = action.target_full_path
    if not expected:
        os.unlink(path)
        raise Changed(
            f"the package {action.url} has no hash in its record, so its bytes cannot be checked"
        )
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        os.unlink(path)
        raise Changed(
            f"the package file {action.url} is not the one its record names "
            f"({algorithm} {expected[:16]} -> {digest.hexdigest()[:16]})"
        )


# Modules that import the functions `_note` wraps by name (conda/models/environment.py:20,
# conda/env/specs/explicit.py:11, conda/cli/install.py:53).
IMPORTERS = ("conda.models.environment", "conda.env.specs.explicit", "conda.cli.install")


def _note(name, what, state):
    import importlib

    try:
        misc = importlib.import_module("conda.misc")
    except ImportError:
        return
    original = getattr(misc, name, None)
    if original is None:
        return

    def noted(*args, **kwargs):
        state.mode.document.setdefault("unpreviewed", what)
        return original(*args, **kwargs)

    setattr(misc, name, noted)
    for module in IMPORTERS:
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, name, None) is original:
            setattr(loaded, name, noted)


class State:
    def __init__(self, mode, out, nonce):
        self.mode = mode
        self.out = out
        self.nonce = nonce

    def check(self, step):
        """Run one check; a run that would differ (or cannot be checked) stops here."""
        try:
            step()
        except Done:
            try:
                self.mode.finish(self.out, self.nonce, 0)
            finally:
                os._exit(0)
        except Changed as why:
            self.stop(str(why))
        except Exception as error:
            self.stop(f"the plan could not be checked ({type(error).__name__}: {error})")

    def stop(self, why):
        """Nothing after this runs: the run writes why to the plan's directory, the
        preview says it in its document."""
        if isinstance(self.mode, Run):
            self.mode.changed(why)
        self.mode.document["unbound"] = why
        try:
            self.mode.finish(self.out, self.nonce, 1)
        finally:
            os._exit(1)


def main():
    mode, key, conda_exe = sys.argv[1], sys.argv[2], sys.argv[3]
    argv = sys.argv[sys.argv.index("--", 4) + 1 :]
    digest = sys.argv[4] if sys.argv[4] != "--" else None
    if mode in ("preview", "inspect"):
        state = State(Preview(mode == "inspect"), os.fdopen(os.dup(1), "wb"), key)
    else:
        state = State(None, None, key)
        try:
            state.mode = Run(key, digest)
        except Changed as why:
            Run.stop_unread(key, str(why))
        except Exception as error:
            Run.stop_unread(key, f"the plan could not be read ({type(error).__name__})")
    state.check(lambda: install(state))
    sys.argv = [conda_exe, *argv]
    code = 1
    try:
        from conda.cli import main as conda_main

        def post_parse_hook(args, parser):
            state.check(lambda: state.mode.post_parse(args, parser))

        code = conda_main(*argv, post_parse_hook=post_parse_hook)
    except SystemExit as exit:
        code = exit.code
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if state.out is not None:
            state.mode.finish(state.out, key, code)
    sys.exit(code)


if __name__ == "__main__":
    main()
