"""ccm plan binding: conda's own entry point, run under the target's interpreter, with a
check on what it is about to do (``--confirm-writes``).

The server embeds this file and runs it as ``python -I -c <this source> MODE ...``, the way
it runs its discovery helper (nothing from the environment, the user site or the working
directory is imported). It then runs conda exactly as conda's entry script does
(``from conda.cli import main; sys.exit(main())`` with ``sys.argv`` set to the conda
executable and the call's argv), with ``post_parse_hook`` (conda's own hook, used by
``conda.cli.main_pip``) and one wrapper around ``UnlinkLinkTransaction._get_pfe`` — the
first step of every package transaction (download, extract, link, scripts), which conda
takes before anything is fetched or linked (conda/core/link.py: ``download_and_extract``,
``prepare`` and the dry run's ``_make_legacy_action_groups`` all start there).

Modes:
  preview NONCE CONDA -- ARGV   the question's preview (the server appends --dry-run --json):
      records what decides the run — the input files conda reads (their bytes; conda reads a
      private copy of exactly those bytes), conda's configuration by source, the target
      prefix, each transaction's records (name, version, build, channel, URL, md5, sha256,
      size) — and writes it as the last line of stdout, after conda's own output, as
      ``NONCE <one line of JSON>``.
  run PLAN CONDA DIGEST -- ARGV the confirmed run: PLAN is the server's directory holding
      ``plan.json`` (what the preview recorded; DIGEST is its sha256, so a plan changed on
      disk is refused) and the copies of the input files (checked against their digests). Before
      conda's command starts, the configuration, the target and every input file must be
      as they were (the files are then read from the copies); before each transaction's
      first step, its records must be the preview's. Otherwise nothing more happens:
      ``changed.json`` is written to PLAN, naming what changed, and the process exits
      with status CHANGED_EXIT at once (no download, no link, no script).
  inspect NONCE CONDA -- ARGV   for a command conda cannot dry-run: what `preview` records up
      to conda's parse (configuration, target, input files), then the process ends before
      the command starts. Its plan binds no packages (``"packages": false``).
"""

import hashlib
import json
import os
import sys

PROTOCOL = 1
CHANGED_EXIT = 87
# Most bytes of one input file, and of all of them, a plan carries.
FILE_LIMIT = 1 << 20
FILES_LIMIT = 4 << 20
# conda's commands whose `file` argument names input files conda reads (specs,
# environment definitions). Other commands' `--file` may be an output or a config file.
# conda/cli/main_create.py, main_install.py, main_update.py: `add_parser_create_install_update`
# (conda/cli/helpers.py, `-f/--file` "Read package versions from the given file",
# action="append"); conda/cli/main_env_create.py:86-97 (`-f/--file`, nargs="*", default
# ["environment.yml"], func main_create.execute); conda/cli/main_env_update.py:91-98
# (`args.file`, one path or URL).
FILE_INPUTS = {
    "conda.cli.main_create.execute",
    "conda.cli.main_install.execute",
    "conda.cli.main_update.execute",
    "conda.cli.main_env_update.execute",
}
# conda/cli/main_remove.py:183-222: with `args.all` (always for `env remove`,
# main_env_remove.py:57) and without `--keep-env`, the prefix is deleted (`rm_rf(prefix)`).
REMOVE = "conda.cli.main_remove.execute"
# conda/cli/main_rename.py:107-128: the rename clones the environment (conda/cli/install.py
# `clone` → conda/misc.py `clone_env`), which its dry run only describes in words.
RENAME = "conda.cli.main_rename.execute"
# Keys of the command line source that differ between the preview and the run by design.
PREVIEW_KEYS = ("dry_run", "json")
# URL schemes conda fetches input files from (conda/cli/common.py:329-333).
REMOTE = ("http", "https", "s3", "ftp")


class Changed(Exception):
    """The run would differ from the plan that was shown."""


class Done(Exception):
    """`inspect` has what it needs: end before the command starts."""


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _plain(value, depth=0):
    """A JSON-able, deterministic form of a configuration value."""
    if depth > 16:
        return str(value)
    if isinstance(value, dict) or hasattr(value, "items"):
        try:
            return {str(k): _plain(v, depth + 1) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
        except Exception:
            return str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v, depth + 1) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    enum_value = getattr(value, "value", None)
    if isinstance(enum_value, (str, int)):
        return enum_value
    return str(value)


def configuration(context):
    """conda's configuration by source (conda/common/configuration.py `collect_all`, what
    `conda config --show-sources` prints): condarc files, environment variables, the
    command line (without the keys the preview adds)."""
    sources = {}
    for source, values in context.collect_all().items():
        values = {str(k): _plain(v) for k, v in dict(values).items()}
        if str(source) == "cmd_line":
            for key in PREVIEW_KEYS:
                values.pop(key, None)
        if values:
            sources[str(source)] = values
    return sources


def _channel_url(prec):
    channel = getattr(prec, "channel", None)
    for attribute in ("base_url", "url"):
        try:
            value = getattr(channel, attribute, None)
            value = value() if callable(value) else value
        except Exception:
            value = None
        if value:
            return str(value)
    return str(channel) if channel is not None else None


def record(prec):
    """What identifies a package record: what the person is shown, and its hashes."""

    def field(name):
        try:
            value = prec.get(name, None) if hasattr(prec, "get") else getattr(prec, name, None)
        except Exception:
            value = None
        return value if value is None or isinstance(value, (int, str)) else str(value)

    return {
        "name": field("name"),
        "version": field("version"),
        "build": field("build"),
        "build_number": field("build_number"),
        "subdir": field("subdir"),
        "channel": _channel_url(prec),
        "url": field("url"),
        "fn": field("fn"),
        "md5": field("md5"),
        "sha256": field("sha256"),
        "size": field("size"),
    }


def transaction(txn):
    setups = []
    for prefix, setup in sorted(txn.prefix_setups.items(), key=lambda kv: str(kv[0])):
        setups.append(
            {
                "prefix": str(prefix),
                "unlink": [record(p) for p in setup.unlink_precs],
                "link": [record(p) for p in setup.link_precs],
            }
        )
    return setups


def _describe(rec):
    return "{} {} {} ({})".format(rec.get("name"), rec.get("version"), rec.get("build"), rec.get("channel"))


def difference(shown, now):
    """The first difference between two transactions' setups, in words, or None."""
    if [s["prefix"] for s in shown] != [s["prefix"] for s in now]:
        return "the target environment changed: {} -> {}".format(
            ", ".join(s["prefix"] for s in shown) or "none", ", ".join(s["prefix"] for s in now)
        )
    for before, after in zip(shown, now):
        for key, verb in (("link", "install"), ("unlink", "remove")):
            old = {r["name"]: r for r in before[key]}
            new = {r["name"]: r for r in after[key]}
            for name in sorted(set(old) | set(new)):
                if name not in old:
                    return "conda would {} a package the question did not show: {}".format(verb, _describe(new[name]))
                if name not in new:
                    return "conda would no longer {} {}".format(verb, _describe(old[name]))
                for field, value in old[name].items():
                    if new[name].get(field) != value:
                        return "package {} to {}: {} changed from {} to {}".format(
                            name, verb, field, value, new[name].get(field)
                        )
            if len(before[key]) != len(after[key]):
                return "the number of packages to {} changed".format(verb)
    return None


def _expand(value):
    try:
        from conda.common.path import expand
    except Exception:

        def expand(path):
            return os.path.abspath(os.path.expanduser(os.path.expandvars(path)))

    return expand(value)


def input_files(args):
    """The input files conda reads for this command: (attribute value, list form?)."""
    if getattr(args, "func", None) not in FILE_INPUTS:
        return None, False
    value = getattr(args, "file", None)
    if value is None:
        return None, False
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value], True
    return [str(value)], False


def locate(value):
    """The local path conda reads for an input file value, or None for a URL."""
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme == "file":
        return _expand(value.split("://", 1)[1])
    if scheme.lower() in REMOTE:
        return None
    return _expand(value)


def read_limited(path, budget):
    with open(path, "rb") as handle:
        data = handle.read(min(FILE_LIMIT, budget) + 1)
    if len(data) > min(FILE_LIMIT, budget):
        raise Changed("the input file {} is too large to bind (more than {} bytes)".format(path, FILE_LIMIT))
    return data


class Preview:
    """What the preview records (see the module's doc)."""

    def __init__(self, inspect):
        self.inspect = inspect
        self.document = {"protocol": PROTOCOL, "files": [], "transactions": [], "packages": not inspect}
        self.copies = None

    def post_parse(self, args, parser):
        from conda.base.context import context

        self.document["configuration"] = configuration(context)
        self.document["prefix"] = _target(context)
        self.document["command"] = getattr(args, "func", None)
        if getattr(args, "func", None) == RENAME:
            self.document["unpreviewed"] = "a rename (a clone of the environment)"
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
                raise Changed("the input file {} is not a regular file".format(path))
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
        _pip_workdir({c: e["path"] for c, e in zip(replaced, self.document["files"]) if e.get("bound")})

    def transaction(self, txn):
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

    def post_parse(self, args, parser):
        from conda.base.context import context

        if self.plan.get("command") != getattr(args, "func", None):
            raise Changed("conda parses the command differently")
        self.check_configuration(context)
        if _target(context) != self.plan.get("prefix"):
            raise Changed(
                "the target environment changed: {} -> {}".format(self.plan.get("prefix"), _target(context))
            )
        values, is_list = input_files(args)
        files = self.plan.get("files", [])
        if [f["value"] for f in files] != (values or []):
            raise Changed("conda reads other input files than the question showed")
        replaced = []
        originals = {}
        for entry in files:
            if not entry.get("bound"):
                if entry.get("path") and os.path.exists(entry["path"]):
                    raise Changed("the input file {} appeared after the question was asked".format(entry["path"]))
                replaced.append(entry["value"])
                continue
            try:
                data = read_limited(entry["path"], FILE_LIMIT)
            except OSError as error:
                raise Changed("the input file {} can no longer be read ({})".format(entry["path"], type(error).__name__))
            if _sha256(data) != entry["sha256"]:
                raise Changed(
                    "the input file {} changed after the question was asked (sha256 {} -> {})".format(
                        entry["path"], entry["sha256"][:16], _sha256(data)[:16]
                    )
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

    def changed(self, why):
        """Write why and stop here: nothing after this runs."""
        Run.stop_unread(self.directory, why)

    @staticmethod
    def stop_unread(directory, why):
        try:
            path = os.path.join(directory, "changed.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump({"changed": why}, handle)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(CHANGED_EXIT)


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
        # conda checks the hash of what it downloads (conda/gateways/connection/download.py:
        # 204-230) but copies a package from a file:// channel into the package cache
        # unchecked (conda/core/path_actions.py:1353-1405, `_execute_local`): the run checks
        # that copy against its record before it is extracted.
        from conda.core import path_actions

        fetch = path_actions.CacheUrlAction
        fetched = fetch.execute

        def execute(self, *args, **kwargs):
            result = fetched(self, *args, **kwargs)
            if str(self.url).startswith("file:/"):
                state.check(lambda: verify_copy(self))
            return result

        fetch.execute = execute
    if isinstance(state.mode, Preview):
        _envs_dir_as_outside()
        # conda/misc.py:206-215 (explicit package files and URLs, explicit environment
        # files: DryRunExit before anything is fetched) and :285-334 (`--clone` and
        # `rename`: DryRunExit before the clone's transaction).
        _note("get_package_records_from_explicit", "explicit package files or URLs", state)
        _note("clone_env", "a clone of an environment", state)


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
    """The package file copied from a local channel is the one its record names."""
    algorithm, expected = ("sha256", action.sha256) if action.sha256 else ("md5", action.md5)
    path = action.target_full_path
    if not expected:
        os.unlink(path)
        raise Changed("the package {} has no hash in its record, so its bytes cannot be checked".format(action.url))
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        os.unlink(path)
        raise Changed(
            "the package file {} is not the one its record names ({} {} -> {})".format(
                action.url, algorithm, expected[:16], digest.hexdigest()[:16]
            )
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
            self.stop("the plan could not be checked ({}: {})".format(type(error).__name__, error))

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
            Run.stop_unread(key, "the plan could not be read ({})".format(type(error).__name__))
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
