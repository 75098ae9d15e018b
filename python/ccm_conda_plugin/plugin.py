"""The conda plugin behind `conda ccm` (and `conda mcp`, where nothing else provides it).

`conda ccm [ccm options]` replaces the conda process with
`ccm --conda-exe <this conda> [ccm options]`, so the server targets the installation the
user invoked, and conda's own state never lives in the long-running server. The command
takes no options of its own (conda passes everything through unchanged), so
`conda ccm --help` shows ccm's help.

Coexistence: conda refuses to run any command when two plugins register the same
subcommand name (`PluginError`), and conda-cli-mcp, the server ccm replaces, registers
`mcp`. So the launcher is always `conda ccm`, and `conda mcp` is registered only when no
other installed plugin provides `mcp`.

conda-cli-mcp also installs a Python script called `ccm`; the launcher only starts an
executable that carries ccm's identity bytes (`IDENTITY`, compiled into every ccm
binary), looked up as `$CCM_BIN`, then the binary its own distribution installed (the
`ccm-mcp` wheel ships both; pip's `RECORD` says where its `ccm` went: `<prefix>/bin/ccm`,
or `~/.local/bin/ccm` for a `--user` install), then next to this conda (`<prefix>/bin/ccm`,
`<prefix>/Scripts/ccm.exe`), then every `ccm` on `PATH`, and says which candidates it
skipped when none is ccm.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys

from conda.plugins import hookimpl
from conda.plugins.types import CondaSubcommand

#: Bytes every ccm binary contains (`ccm::IDENTITY` in the Rust crate).
IDENTITY = b"ccm-identity:rust-mcp-server-for-the-conda-command-line:v1"

#: The Python distribution that ships this launcher together with the ccm binary.
DISTRIBUTION = "ccm-mcp"

#: Subcommand names: the launcher's own, and the established one when it is free.
NAME = "ccm"
ESTABLISHED_NAME = "mcp"

NOT_FOUND = (
    "conda {command}: the ccm binary was not found{skipped}. Install it next to conda "
    "({expected}), put it on PATH, or set CCM_BIN to its absolute path."
)
NOT_CCM = (
    "conda {command}: CCM_BIN={path} {why}. Set CCM_BIN to the absolute path of the ccm "
    "binary (the Rust MCP server), or unset it."
)


def invoking_conda() -> str:
    """The conda executable running this command."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.isfile(script) and os.path.basename(script).lower().startswith("conda"):
        return script
    try:
        from conda.base.context import context

        exe = (getattr(context, "conda_exe_vars_dict", None) or {}).get("CONDA_EXE")
        if exe and os.path.isfile(exe):
            return exe
    except Exception:
        pass
    for candidate in (
        os.path.join(sys.prefix, "bin", "conda"),
        os.path.join(sys.prefix, "condabin", "conda"),
        os.path.join(sys.prefix, "Scripts", "conda.exe"),
    ):
        if os.path.isfile(candidate):
            return candidate
    return script


def why_not_ccm(path: str) -> str | None:
    """None when `path` is an executable ccm binary, else why not (a few words)."""
    if not os.path.isfile(path):
        return "does not exist"
    if not os.access(path, os.X_OK):
        return "is not executable"
    try:
        with open(path, "rb") as handle:
            if handle.read(2) == b"#!":
                return "is a script, not the ccm binary (conda-cli-mcp installs one named ccm)"
            handle.seek(0)
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(IDENTITY) >= 0:
                    return None
    except (OSError, ValueError) as error:  # ValueError: an empty file cannot be mapped
        return f"cannot be read ({error})"
    return "is another program, not the ccm binary"


def own_binary() -> str | None:
    """The `ccm` that this launcher's own distribution installed, when pip recorded one.

    Only the distribution whose `RECORD` lists this very module counts, so another
    package's files (or a launcher copied in by hand) never name the binary.
    """
    try:
        from importlib.metadata import distribution

        files = list(distribution(DISTRIBUTION).files or ())
    except Exception:
        return None
    here = os.path.realpath(__file__)
    located = [(f, os.path.realpath(str(f.locate()))) for f in files]
    if not any(path == here for _, path in located):
        return None
    for entry, path in located:
        if entry.name in ("ccm", "ccm.exe") and entry.parent.name in ("bin", "Scripts"):
            return path
    return None


def candidates() -> list[str]:
    """Where ccm may be, best first (CCM_BIN excepted)."""
    own = own_binary()
    found = [own] if own else []
    found += [
        os.path.join(sys.prefix, "bin", "ccm"),
        os.path.join(sys.prefix, "Scripts", "ccm.exe"),
    ]
    names = ("ccm.exe", "ccm") if os.name == "nt" else ("ccm",)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory:
            found.extend(os.path.join(directory, name) for name in names)
    unique = []
    for path in found:
        path = os.path.abspath(path)
        if path not in unique:
            unique.append(path)
    return unique


def find_ccm(command: str) -> tuple[str | None, str | None]:
    """(path of ccm, None), or (None, what to tell the user)."""
    explicit = os.environ.get("CCM_BIN")
    if explicit:
        why = why_not_ccm(explicit)
        if why is None:
            return explicit, None
        return None, NOT_CCM.format(command=command, path=explicit, why=why)
    skipped = []
    for path in candidates():
        if not os.path.isfile(path):
            continue
        why = why_not_ccm(path)
        if why is None:
            return path, None
        skipped.append(f"{path} {why}")
    return None, NOT_FOUND.format(
        command=command,
        skipped=f" (skipped: {'; '.join(skipped)})" if skipped else "",
        expected=os.path.join(sys.prefix, "bin", "ccm"),
    )


def launch(command: str, args) -> int:
    """Replace this process with ccm targeting the invoking conda."""
    ccm, message = find_ccm(command)
    if ccm is None:
        print(message, file=sys.stderr)
        return 1
    argv = [ccm, "--conda-exe", invoking_conda(), *list(args or ())]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # no exec on Windows: run it and pass its exit status on
        return subprocess.call(argv)
    os.execv(ccm, argv)
    return 0  # not reached


def run_ccm(args) -> int:
    return launch(NAME, args)


def run_mcp(args) -> int:
    return launch(ESTABLISHED_NAME, args)


def provided_elsewhere(name: str) -> bool:
    """Whether another installed conda plugin registers the subcommand `name`.

    Reads the same `conda` entry points conda loads (importing a plugin twice is free:
    conda has imported it already) and asks each plugin's `conda_subcommands` hook.
    A plugin that fails here is conda's to report; it is not counted.
    """
    try:
        from importlib.metadata import entry_points

        found = entry_points()
        group = found.select(group="conda") if hasattr(found, "select") else found.get("conda", [])
    except Exception:
        return False
    own = __name__.split(".")[0]
    for entry_point in group:
        if entry_point.value.split(":")[0].strip().split(".")[0] == own:
            continue
        try:
            plugin = entry_point.load()
            hook = getattr(plugin, "conda_subcommands", None)
            if callable(hook) and any(
                getattr(subcommand, "name", None) == name for subcommand in hook() or ()
            ):
                return True
        except Exception:
            continue
    return False


@hookimpl
def conda_subcommands():
    yield CondaSubcommand(
        name=NAME,
        summary="Serve this conda's command line to MCP clients (ccm).",
        action=run_ccm,
    )
    if not provided_elsewhere(ESTABLISHED_NAME):
        yield CondaSubcommand(
            name=ESTABLISHED_NAME,
            summary="Serve this conda's command line to MCP clients (ccm; same as `conda ccm`).",
            action=run_mcp,
        )
