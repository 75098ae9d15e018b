"""The conda plugin behind `conda mcp`.

`conda mcp [ccm options]` replaces the conda process with
`ccm --conda-exe <this conda> [ccm options]`, so the server targets the installation the
user invoked, and conda's own state never lives in the long-running server. The command
takes no options of its own (conda passes everything through unchanged), so
`conda mcp --help` shows ccm's help.

ccm is looked up in this order: `$CCM_BIN`, next to this conda (`<prefix>/bin/ccm`,
`<prefix>/Scripts/ccm.exe`), then `ccm` on `PATH`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conda.plugins import hookimpl
from conda.plugins.types import CondaSubcommand

NOT_FOUND = (
    "conda mcp: the ccm binary was not found. Install it next to conda "
    "({}), put it on PATH, or set CCM_BIN to its path."
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


def find_ccm() -> str | None:
    """Where the ccm binary is, or None."""
    explicit = os.environ.get("CCM_BIN")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    for candidate in (
        os.path.join(sys.prefix, "bin", "ccm"),
        os.path.join(sys.prefix, "Scripts", "ccm.exe"),
    ):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("ccm")


def run_mcp(args) -> int:
    """Replace this process with ccm targeting the invoking conda."""
    ccm = find_ccm()
    if ccm is None:
        print(NOT_FOUND.format(os.path.join(sys.prefix, "bin", "ccm")), file=sys.stderr)
        return 1
    argv = [ccm, "--conda-exe", invoking_conda(), *list(args or ())]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # no exec on Windows: run it and pass its exit status on
        return subprocess.call(argv)
    os.execv(ccm, argv)
    return 0  # not reached


@hookimpl
def conda_subcommands():
    yield CondaSubcommand(
        name="mcp",
        summary="Serve this conda's command line to MCP clients (ccm).",
        action=run_mcp,
    )
