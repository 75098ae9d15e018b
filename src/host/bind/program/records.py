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

One program in three parts (this one first): ``bind.rs`` concatenates the files of
``program/`` in order into one source, so the parts share one namespace; a part names
what it takes from the others in an ``if False:`` import block (see ARCHITECTURE.md,
"Python in src/"). Only the last part runs anything, and only as ``__main__``.
"""

import hashlib
import os
import re
import stat

if False:  # Names from the other parts of this program (one namespace; see above).
    from shared import BOUND_VAR, foreign_link, unshare
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


# conda/cli/main_config.py:619-633: the file `conda config` writes (`rc_path`).
CONFIG = "conda.cli.main_config.execute"


def _real(value):
    """Where a path leads now: conda expands `~` and `$VAR` (conda/common/path/__init__.py:
    105 `expand`), relative paths start at the working directory, then every symlink and
    `..` of the part that exists is resolved (the rest appended, as it would be created)."""
    return os.path.realpath(os.path.expanduser(os.path.expandvars(value)))


# argparse's own matcher (Lib/argparse.py 3.11:1381): a token it matches is a value,
# not an option, since conda's parsers have no option that looks like a number.
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def path_values(argv):
    """Every value of the argv conda may read as a path, by position rather than by
    option (a bare word too: `config --file rc`, `create -p envlink`): each token, the
    value after an option's `=`, a short option's attached value (both of `-fout=x`,
    which argparse reads as `-f out=x`). A URL too: conda opens some values as they are
    written (`export --file https://passwd` is the file `passwd` in the directory
    `https:`), so its text is a path as well as a URL (attack 39 U1, attack 40 V1: left
    out, a value with `://` led the write through the agent's symlink `out:` or
    `https:`, the question silent); one that names nothing stays as it was, and is
    shown as nothing. A token that starts with `-` is a value as it is where argparse
    reads it as one (Lib/argparse.py 3.11 `_parse_optional`, :2244, :2275-2281): `-`
    alone, one that looks like a negative number, one with a space, and each after
    `--` (attack 41 W1: `export --file -1` wrote through the agent's symlink `-1`, the
    question silent). The server's `--allow-paths` reads the argv the same way
    (host/confine.rs `argv_values`)."""
    values = []
    options_end = False
    for token in argv:
        if options_end or not token.startswith("-"):
            found = [token]
        elif token == "--":
            options_end = True
            continue
        else:
            found = []
            if token == "-" or NEGATIVE_NUMBER.match(token) or " " in token:
                found.append(token)
            if "=" in token:
                found.append(token.split("=", 1)[1])
            if not token.startswith("--") and len(token) > 2:
                found.append(token[2:])
        values += [value for value in found if value and "\0" not in value]
    return values


def config_file(args, context):
    """The file `conda config` writes, as conda picks it (see CONFIG), or None."""
    if getattr(args, "func", None) != CONFIG:
        return None
    try:
        from conda.base.context import sys_rc_path, user_rc_path
    except ImportError:
        return None
    if getattr(args, "system", False):
        return sys_rc_path
    if getattr(args, "env", False):
        if context.active_prefix:
            return os.path.join(context.active_prefix, ".condarc")
        return user_rc_path
    if getattr(args, "file", None):
        return str(args.file)
    if getattr(args, "prefix", None) or getattr(args, "name", None):
        return os.path.join(str(context.target_prefix), ".condarc")
    return user_rc_path


# The files inside a prefix that conda opens in place (appends to, rewrites without
# replacing, reads and shows); the server's list is host/confine.rs `IN_PLACE`. A hard
# link there makes conda write or read another file.
IN_PLACE = (
    # conda/history.py:102-103 (touch: conda/gateways/disk/update.py:161, "a"), :399, :411.
    "conda-meta/history",
    # conda/core/prefix_data.py:661-672: read, then `write_text` (env config vars).
    "conda-meta/state",
    # conda/core/prefix_data.py:742-746 (read); doctor/health_checks/pinned.py:117 (written).
    "conda-meta/pinned",
    # conda/core/prefix_data.py:300-315: read, its message shown.
    "conda-meta/frozen",
    # conda/core/prefix_data.py:726-734 `set_creation_time`: `write_text`.
    "conda-meta/created_at",
    # conda/cli/main_config.py:628-631, :707 -> conda/common/serialize/yaml.py:89 `write_text`.
    ".condarc",
)


def _identity(path):
    """The file a path names now, as [device, inode, links], for a non-directory; else
    None (a directory, or nothing there)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(st.st_mode):
        return None
    return [st.st_dev, st.st_ino, st.st_nlink]


def check_identity(value, now, then=None):
    """A path names no hard link (a file with other names, perhaps outside every allowed
    directory, which realpath cannot tell), and the file it named at preview time."""
    if now is None:
        return
    if then is not None and list(now[:2]) != list(then[:2]):
        raise Changed(f"the path {value} now names another file")
    if now[2] > 1:
        raise Changed(f"the path {value} names a file with {now[2]} links (a hard link)")


def check_in_place(prefix, foreign=True):
    """The files conda opens in place in a target prefix are no hard links, and (with
    `foreign`) no file of it has other links than conda's own from a package cache (see
    foreign_link). The preview passes `foreign=False`: it runs in the read-only sandbox,
    where the package caches are overlays whose files show other inodes, so conda's own
    links would look foreign; the server checks the same when the call arrives, after the
    answer and before the run (host/confine.rs `foreign_links`), and the run here again."""
    if not prefix:
        return
    for name in IN_PLACE:
        path = os.path.join(str(prefix), name)
        now = _identity(path)
        if now is not None and now[2] > 1:
            raise Changed(
                f"the file {path} of the target environment has {now[2]} links (a hard link)"
            )
    path = foreign_link(str(prefix)) if foreign else None
    if path is not None:
        raise Changed(f"the file {path} of the target environment has other links (a hard link)")
    if foreign and os.environ.get(BOUND_VAR) == "1":
        unshare(str(prefix))


def _entry(value):
    """[the value, where it leads, the file it names (see _identity), the path its text
    names]: the question shows the two paths where they differ (a directory on the way
    the agent made a symlink: attack 37 S2; a `~` or `$VAR` the run expands where conda
    would have opened the text: attack 38 T1)."""
    real = _real(value)
    return [value, real, _identity(real), os.path.abspath(value)]


def bound_paths(argv, target, written):
    """Where the run's paths lead at preview time: the working directory, the target
    prefix, the file `conda config` writes, and every value of the argv (see path_values),
    each with the identity of the file it names (see _identity)."""
    paths = {"cwd": os.getcwd(), "argv": [_entry(v) for v in path_values(argv)]}
    if target:
        paths["target"] = _entry(target)
    if written:
        paths["written"] = _entry(written)
    return paths


def check_links(paths, target):
    """At preview time: no path of the call names a hard link, nor does the target's
    in-place files (see IN_PLACE)."""
    entries = list(paths.get("argv", []))
    entries += [paths[key] for key in ("target", "written") if paths.get(key)]
    for entry in entries:
        check_identity(entry[0], entry[2] if len(entry) > 2 else None)
    check_in_place(target, foreign=False)


def check_paths(shown, argv, target, written, log):
    """The run's paths lead where the preview's did, name the files they named then and
    no hard link, and none of them is the audit log (`log`: its device and inode): a
    directory swapped for a symlink while the question was open (the target's parent, the
    working directory, an output file), or a file swapped for a hard link, stops the run."""
    now = bound_paths(argv, target, written)
    if now["cwd"] != shown.get("cwd"):
        raise Changed(f"the working directory {shown.get('cwd')} now is {now['cwd']}")
    pairs = list(zip(shown.get("argv", []), now["argv"]))
    if len(pairs) != len(now["argv"]) or len(pairs) != len(shown.get("argv", [])):
        raise Changed("the command line names other paths than the question showed")
    for key in ("target", "written"):
        # A target named anew after the parse (an environment file's name) is compared by
        # its text elsewhere (the transaction's setups, which carry their real paths too).
        if shown.get(key) and now.get(key) and shown[key][0] == now[key][0]:
            pairs.append((shown[key], now[key]))
    for before, after in pairs:
        value, then, real = before[0], before[1], after[1]
        if then != real:
            raise Changed(f"the path {value} now leads to {real}, not {then}")
        check_identity(value, after[2], before[2] if len(before) > 2 else None)
        if log and _is_log(real, log):
            raise Changed(f"the path {value} is the audit log")
    check_in_place(target)


def _is_log(path, log):
    try:
        st = os.stat(path)
    except OSError:
        return False
    return [st.st_dev, st.st_ino] == list(log)
