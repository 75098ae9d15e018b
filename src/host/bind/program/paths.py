# Part of the plan binding (see records.py): where the paths of a call lead — the values
# of its command line conda may read as paths, the working directory, the target and the
# file `conda config` writes — recorded at preview time and checked again by the run.
import os
import re
import stat

if False:  # Names from the other parts of this program (one namespace; see records.py).
    from records import Changed
    from shared import BOUND_VAR, foreign_link, unshare

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
