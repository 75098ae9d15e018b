# Part of the plan binding (see records.py): the preview (what decides the run, recorded)
# and the confirmed run (each of it checked against the preview).
import json
import os
import sys

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from cache import TEMP_DIRS, stage_cached_packages
    from paths import (
        _real,
        bound_paths,
        check_in_place,
        check_links,
        check_paths,
        config_file,
    )
    from records import (
        CHANGED_EXIT,
        CLEAN,
        ENV_UPDATE,
        FILE_LIMIT,
        FILES_LIMIT,
        PACKAGE,
        PROTOCOL,
        REMOVE,
        RENAME,
        Changed,
        Done,
        _sha256,
        configuration,
        difference,
        input_files,
        locate,
        read_limited,
        transaction,
    )
    from target import check_target_code, check_target_paths, check_written_metadata


class Preview:
    """What the preview records (see the module's doc)."""

    def __init__(self, inspect):
        self.inspect = inspect
        self.document = {
            "protocol": PROTOCOL,
            "files": [],
            "transactions": [],
            "packages": not inspect,
        }
        self.copies = None

    def post_parse(self, args, parser):
        from conda.base.context import context

        self.document["configuration"] = configuration(context)
        self.document["prefix"] = _target(context)
        self.document["target_state"] = _state(_target(context))
        check_written_metadata(_target(context))
        self.document["command"] = getattr(args, "func", None)
        written = config_file(args, context)
        self.document["writes"] = written and _real(written)
        self.document["paths"] = bound_paths(sys.argv[1:], _target(context), written)
        check_links(self.document["paths"], _target(context))
        if getattr(args, "func", None) == ENV_UPDATE and not (
            getattr(args, "name", None) or getattr(args, "prefix", None)
        ):
            raise Changed(
                "`env update` without --name or --prefix updates the environment its file "
                "names, which conda reads only after the preview; name the environment with "
                "--name or --prefix"
            )
        if getattr(args, "func", None) == PACKAGE:
            raise Changed(
                "`conda package` reads, archives and deletes the environment's files by "
                "path, outside any transaction, where no question can show what it reaches"
            )
        if getattr(args, "func", None) == CLEAN and getattr(args, "tempfiles", None):
            raise Changed(
                "`conda clean --tempfiles` deletes what it finds in the directories named "
                "when it runs, by path, where no question can show it"
            )
        if getattr(args, "func", None) == RENAME:
            self.document["unpreviewed"] = "a rename (a clone of the environment)"
        if getattr(args, "clone", None):
            # conda/misc.py:336-363 `clone_env` copies the source's files into the target
            # by path, before any transaction and its checks. A dry run stops there
            # (`_note`); an inspect preview stops at the parse, before it, so it is noted
            # here (attack 35 Q2: without the sandbox a clone was asked, and root copied
            # the agent's files through a symlink in the target to any directory).
            self.document.setdefault("unpreviewed", "a clone of an environment")
        if getattr(args, "func", None) == REMOVE and getattr(args, "all", False):
            self.document["deletes_prefix"] = not getattr(args, "keep_env", False)
            self.document["installed"] = _installed(context.target_prefix)
        self.bind_files(args)
        if self.inspect:
            raise Done()

    def bind_files(self, args):
        values, is_list = input_files(args)
        if not values:
            return
        import tempfile

        self.copies = tempfile.mkdtemp(prefix="ccm-preview-")
        budget = FILES_LIMIT
        replaced = []
        for index, value in enumerate(values):
            path = locate(value)
            entry = {"value": value, "path": path}
            if path is not None and os.path.exists(path) and not os.path.isfile(path):
                raise Changed(f"the input file {path} is not a regular file")
            if path is None or not os.path.exists(path):
                # A URL is fetched at run time; a missing file is conda's error to report.
                entry["bound"] = False
                replaced.append(value)
                self.document["files"].append(entry)
                continue
            data = read_limited(path, budget)
            budget -= len(data)
            copy_dir = os.path.join(self.copies, str(index))
            os.mkdir(copy_dir, 0o700)
            copy = os.path.join(copy_dir, os.path.basename(path))
            with open(copy, "wb") as handle:
                handle.write(data)
            import base64

            entry.update(
                bound=True,
                size=len(data),
                sha256=_sha256(data),
                content=base64.b64encode(data).decode("ascii"),
            )
            self.document["files"].append(entry)
            replaced.append(copy)
        args.file = replaced if is_list else replaced[0]
        _pip_workdir(
            {c: e["path"] for c, e in zip(replaced, self.document["files"]) if e.get("bound")}
        )

    def transaction(self, txn):
        for prefix in txn.prefix_setups:
            check_in_place(prefix, foreign=False)
        check_target_code(txn)
        self.document["transactions"].append(transaction(txn))

    def finish(self, out, nonce, code):
        if self.copies:
            import shutil

            shutil.rmtree(self.copies, ignore_errors=True)
        self.document["exit"] = code if isinstance(code, int) else None
        line = json.dumps(self.document, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
        out.write(b"\n" + nonce.encode("ascii") + b" " + line.encode("ascii") + b"\n")
        out.flush()


def _target(context):
    """The prefix conda resolves for the command, or None where conda cannot (it reports
    that itself when the command needs one)."""
    try:
        return str(context.target_prefix)
    except Exception:
        return None


def _state(prefix):
    """What the target is: an environment (conda's test, `PrefixData.is_environment`:
    `conda-meta/history` is a file), another directory, another file, or absent. `create`
    deletes an environment at its target before it installs (conda/cli/main_create.py:
    198 `rm_rf(context.target_prefix)`), and keeps a plain directory's files (:199)."""
    if prefix is None:
        return None
    if _made_for_the_run(prefix):
        return "absent"
    if os.path.isfile(os.path.join(prefix, "conda-meta", "history")):
        return "an environment"
    if os.path.isdir(prefix):
        return "a directory that is not an environment"
    return "another file" if os.path.lexists(prefix) else "absent"


def _made_for_the_run(prefix):
    """Whether `prefix` is a new target the server made for the run, still an empty
    directory (its list in `CCM_NEW_TARGETS`): the bound grants a new environment itself,
    so the server makes it right before the run (src/server/call/new_targets.rs `make`)."""
    try:
        made = json.loads(os.environ.get("CCM_NEW_TARGETS") or "[]")
        real = os.path.realpath(prefix)
        return any(os.path.realpath(m) == real for m in made) and not os.listdir(prefix)
    except (OSError, ValueError, TypeError):
        return False


def _installed(prefix):
    try:
        from conda.core.prefix_data import PrefixData

        return sum(1 for _ in PrefixData(str(prefix)).iter_records())
    except Exception:
        return None


def _pip_workdir(originals):
    """pip runs where it would without the copies: in the original file's directory
    (conda/env/pip_util.py:23-39 `get_pip_workdir`, used by conda/cli/install.py:409-421
    and conda/env/installers/pip.py:39-40)."""
    if not originals:
        return
    try:
        from conda.env import pip_util
    except Exception:
        return
    original = pip_util.get_pip_workdir

    def get_pip_workdir(file_path):
        return original(originals.get(file_path, file_path))

    pip_util.get_pip_workdir = get_pip_workdir
    try:
        from conda.env.installers import pip as pip_installer

        pip_installer.get_pip_workdir = get_pip_workdir
    except Exception:
        pass


class Run:
    """The confirmed run's checks (see the module's doc)."""

    def __init__(self, directory, digest):
        self.directory = directory
        with open(os.path.join(directory, "plan.json"), "rb") as handle:
            data = handle.read()
        if _sha256(data) != digest:
            raise Changed("the plan kept for this run was changed")
        self.plan = json.loads(data)
        self.seen = 0
        self.args = None
        # How far the run got when it stops (`changed.json`'s `reached`, which the result
        # says): None before anything is fetched; `fetched`, a package fetched into the
        # package cache; `extracted`, every package fetched, nothing linked or run in the
        # target; `removed`, the transaction done, the target about to be deleted whole.
        self.reached = None

    def post_parse(self, args, parser):
        from conda.base.context import context

        if self.plan.get("command") != getattr(args, "func", None):
            raise Changed("conda parses the command differently")
        self.check_configuration(context)
        if _target(context) != self.plan.get("prefix"):
            raise Changed(
                "the target environment changed: {} -> {}".format(
                    self.plan.get("prefix"), _target(context)
                )
            )
        self.check_target_state(context)
        if getattr(args, "clone", None) or getattr(args, "func", None) == PACKAGE:
            raise Changed("conda would clone or archive an environment, which no question shows")
        self.args = args
        self.check_paths(context)
        values, is_list = input_files(args)
        files = self.plan.get("files", [])
        if [f["value"] for f in files] != (values or []):
            raise Changed("conda reads other input files than the question showed")
        replaced = []
        originals = {}
        for entry in files:
            if not entry.get("bound"):
                if entry.get("path") and os.path.exists(entry["path"]):
                    raise Changed(
                        "the input file {} appeared after the question was asked".format(
                            entry["path"]
                        )
                    )
                replaced.append(entry["value"])
                continue
            try:
                data = read_limited(entry["path"], FILE_LIMIT)
            except OSError as error:
                raise Changed(
                    "the input file {} can no longer be read ({})".format(
                        entry["path"], type(error).__name__
                    )
                ) from None
            if _sha256(data) != entry["sha256"]:
                # The new digest is not said: the file may now be another one, which the
                # agent could not read (a hash to test guesses against: attack 37).
                raise Changed(
                    "the input file {} changed after the question was asked "
                    "(sha256 {}… then)".format(entry["path"], entry["sha256"][:16])
                )
            with open(entry["copy"], "rb") as handle:
                if _sha256(handle.read()) != entry["sha256"]:
                    raise Changed("the copy of the input file {} was changed".format(entry["path"]))
            replaced.append(entry["copy"])
            originals[entry["copy"]] = entry["path"]
        if values:
            args.file = replaced if is_list else replaced[0]
            _pip_workdir(originals)

    def check_configuration(self, context):
        """conda's configuration is the preview's, source by source."""
        now = configuration(context)
        shown = self.plan.get("configuration", {})
        for source in sorted(set(shown) | set(now)):
            if shown.get(source) != now.get(source):
                keys = sorted(
                    k
                    for k in set(shown.get(source, {})) | set(now.get(source, {}))
                    if shown.get(source, {}).get(k) != now.get(source, {}).get(k)
                )
                raise Changed("the configuration changed: {} in {}".format(", ".join(keys), source))

    def transaction(self, txn):
        # conda may read its configuration again after the parse (conda/cli/main_create.py
        # re-initializes the context with the name an environment file gives): the
        # configuration the transaction runs under is checked again.
        from conda.base.context import context

        self.check_configuration(context)
        self.check_paths(context)
        target = _target(context)
        if target != self.plan.get("prefix") and self.recorded_target(target) is None:
            # Named after the parse (an environment file's `prefix:`/`name:`) where the
            # preview saw only the parse (no dry run: an unsandboxed preview), so the
            # question showed conda's default prefix (attack 34 P1).
            raise Changed(f"conda would change {target}, which the question did not show")
        for prefix in txn.prefix_setups:
            check_in_place(prefix)
        check_target_code(txn)
        if not self.plan.get("packages"):
            return
        shown = self.plan.get("transactions", [])
        now = transaction(txn)
        index = self.seen
        self.seen += 1
        if index >= len(shown):
            changed = "conda would change packages the question did not show"
            names = [r["name"] for s in now for r in s["link"] + s["unlink"]]
            if names:
                changed += ": " + ", ".join(str(n) for n in names[:20])
            raise Changed(changed)
        changed = difference(shown[index], now)
        if changed:
            raise Changed(changed)

    def before_execute(self, txn):
        """Right before the transaction's first script, unlink or link, once every package
        is fetched and extracted (a large download is seconds after the transaction's
        first check): every path of the call still leads where it did (attack 25 F2: a
        target named through a symlink the agent turned elsewhere once the packages were
        fetched), what conda runs or deletes from the target, and where it writes, is
        still the packages' own (attack 24 B1, B5); then the files to link are copied
        from the cache, each checked as it is copied, and conda links the copies (attack
        26 G2, 27 H1, H2)."""
        from conda.base.context import context

        self.check_paths(context)
        check_target_code(txn)
        check_target_paths(txn)
        stage_cached_packages(txn)

    def check_target_state(self, context):
        """The target is what it was when the question was asked: a directory made an
        environment meanwhile would be deleted whole by `create` (attack 17 A17-3); and
        none of the metadata conda writes by path is a symlink."""
        target = _target(context)
        check_written_metadata(target)
        was, now = self.plan.get("target_state"), _state(target)
        if was != now:
            asked = f"{was} when the question was asked"
            raise Changed(f"the target {target} was {asked} and is {now} now")

    def real_target(self, named):
        """The real path of the target `named` as the question showed it: the preview's
        target, or for a target named anew after the parse (an environment file's name),
        the real path of the preview's transaction setup of that name (attack 33 N1: it
        was worked out again at each use, so a symlink made there once the transaction
        was checked took the whole install elsewhere); without either (a plan that binds
        no packages), where it leads now. None without a target."""
        if not named:
            return None
        recorded = self.recorded_target(named)
        return recorded if recorded is not None else os.path.realpath(named)

    def recorded_target(self, named):
        """The real path the preview recorded for the target `named` (its target, or a
        transaction setup of that name), or None."""
        entry = (self.plan.get("paths") or {}).get("target")
        if entry and len(entry) > 1 and entry[0] == named and entry[1]:
            return str(entry[1])
        for setups in self.plan.get("transactions") or []:
            for setup in setups:
                if setup.get("prefix") == named and setup.get("real"):
                    return str(setup["real"])
        return None

    def check_paths(self, context):
        """Every path of the call leads where it did at preview time (see check_paths),
        the target named anew after the parse included (`real_target`)."""
        written = config_file(self.args, context) if self.args is not None else None
        target = _target(context)
        check_paths(
            self.plan.get("paths") or {},
            sys.argv[1:],
            target,
            written,
            self.plan.get("log"),
        )
        shown = self.real_target(target)
        if shown and os.path.realpath(target) != shown:
            raise Changed(
                f"the target {target} now leads to {os.path.realpath(target)}, not {shown}"
            )

    def changed(self, why):
        """Write why and stop here: nothing after this runs (the run's transaction
        directories, which conda would have deleted, are deleted first)."""
        import shutil

        for temp in TEMP_DIRS:
            shutil.rmtree(temp, ignore_errors=True)
        Run.stop_unread(self.directory, why, self.reached)

    @staticmethod
    def stop_unread(directory, why, reached=None):
        try:
            path = os.path.join(directory, "changed.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump({"changed": why, "reached": reached}, handle)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(CHANGED_EXIT)
