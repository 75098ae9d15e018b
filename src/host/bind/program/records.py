"""ccm plan binding: conda's own entry point, run under the target's interpreter, with a
check on what it is about to do (``--confirm-writes``).

The server embeds this program and runs it as ``python -I -c <this source> MODE ...``, the way
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

One program in parts (this one first): ``bind.rs`` concatenates the files of
``program/`` in order into one source, so the parts share one namespace; a part names
what it takes from the others in an ``if False:`` import block (see ARCHITECTURE.md,
"Python in src/"). Only the last part runs anything, and only as ``__main__``.
"""

import hashlib
import os
import stat

if False:  # Names from the other parts of this program (one namespace; see above).
    from paths import _real
    from target import _files_digest

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
# conda/cli/main_env_update.py:105-130: without --name or --prefix, the environment file's
# `name:` becomes the target after the parse (`args.name = env.name`), where the preview
# (conda's parse, no dry run) cannot see it (attack 25 F1: the question named the root
# prefix and the run changed an environment the agent had made).
ENV_UPDATE = "conda.cli.main_env_update.execute"
# conda/cli/main_package.py:75-87 (`--reset` unlinks and removes by path), :197-261 (the
# tarball: each untracked file read by path, written to a name in the working directory)
# over conda/misc.py:246-261 `walk_prefix`, which walks the target through a symlink at its
# top: no transaction, nothing a question can show (attack 36 R1).
PACKAGE = "conda.cli.main_package.execute"
# conda/cli/main_clean.py:282-296 `find_tempfiles`, :399-401: `--tempfiles DIR` deletes
# what it finds in DIR at run time (`*.c~`, `*.trash`), by path; the dry run lists no
# package change, so the question could show none of it (attack 37 S1).
CLEAN = "conda.cli.main_clean.execute"
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
            return {
                str(k): _plain(v, depth + 1)
                for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
            }
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
        if str(source) == "envvars":
            # The server's environment, fixed for its life; a bounded run's
            # CONDA_PKGS_DIRS starts with its private package cache (host/sandbox/bound.rs
            # `private_cache`), which the preview did not have.
            values.pop("pkgs_dirs", None)
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
                "real": _real(str(prefix)),
                "unlink": [dict(record(p), files=_files_digest(p)) for p in setup.unlink_precs],
                "link": [record(p) for p in setup.link_precs],
            }
        )
    return setups


def _describe(rec):
    return "{} {} {} ({})".format(
        rec.get("name"), rec.get("version"), rec.get("build"), rec.get("channel")
    )


def difference(shown, now):
    """The first difference between two transactions' setups, in words, or None."""
    if [s["prefix"] for s in shown] != [s["prefix"] for s in now]:
        return "the target environment changed: {} -> {}".format(
            ", ".join(s["prefix"] for s in shown) or "none", ", ".join(s["prefix"] for s in now)
        )
    for before, after in zip(shown, now):
        if before.get("real") != after.get("real"):
            return "the target environment {} now leads to {}, not {}".format(
                after["prefix"], after.get("real"), before.get("real")
            )
        for key, verb in (("link", "install"), ("unlink", "remove")):
            old = {r["name"]: r for r in before[key]}
            new = {r["name"]: r for r in after[key]}
            for name in sorted(set(old) | set(new)):
                if name not in old:
                    return (
                        f"conda would {verb} a package the question did not show: "
                        f"{_describe(new[name])}"
                    )
                if name not in new:
                    return f"conda would no longer {verb} {_describe(old[name])}"
                for field, value in old[name].items():
                    if field == "files" and new[name].get(field) != value:
                        return (
                            f"package {name} to {verb}: the files its record in the target "
                            "lists changed"
                        )
                    if new[name].get(field) != value:
                        return (
                            f"package {name} to {verb}: {field} changed from {value} "
                            f"to {new[name].get(field)}"
                        )
            if len(before[key]) != len(after[key]):
                return f"the number of packages to {verb} changed"
    return None


def _expand(value):
    try:
        from conda.common.path import expand
    except Exception:

        def expand(path):
            return os.path.abspath(os.path.expanduser(os.path.expandvars(path)))

    return expand(value)


def _file_url_path(url):
    """The file a `file://` URL names to conda: its reader (conda/gateways/connection/
    adapters/localfs.py:23 -> conda/common/path/__init__.py:123 `url_to_path`) drops
    the host `localhost`, `127.0.0.1` or `::1`, keeps any other as `//host`, and
    percent-decodes the path, with no `~` or `$VAR` expanded (attack 42 X1: read as
    the text after `://`, `file://localhost/ABS` was shown as `<cwd>/localhost/ABS`,
    a file that does not exist, while conda read `/ABS`)."""
    try:
        from conda.common.path import url_to_path

        return url_to_path(url)
    except Exception:
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(url)
        host = "" if parts.netloc in ("", "localhost", "127.0.0.1", "::1") else parts.netloc
        return (f"//{host}" if host else "") + unquote(parts.path)


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
        return _file_url_path(value)
    if scheme.lower() in REMOTE:
        return None
    return _expand(value)


def read_limited(path, budget):
    """At most the budget of bytes of the regular file `path`: opened without waiting,
    so a FIFO put in its place (attack 37) stops the run rather than holding it until
    the call's timeout."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Changed(f"the input file {path} is not a regular file")
        os.set_blocking(fd, True)
        data = handle.read(min(FILE_LIMIT, budget) + 1)
    if len(data) > min(FILE_LIMIT, budget):
        raise Changed(f"the input file {path} is too large to bind (more than {FILE_LIMIT} bytes)")
    return data
