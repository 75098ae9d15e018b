"""Drive `ccm --confirm-writes` with the official MCP Python SDK as a client that answers
elicitation, and print what it saw as one JSON line.

Usage: python sdk_confirm.py CCM CONDA MODE ANSWER DIR [ELICIT]
  MODE: legacy (a handshake revision) | auto (2026-07-28 when both sides offer it)
  ANSWER: accept | decline | cancel (what the elicitation callback answers)
  ELICIT: "no" for a client without the elicitation capability

The server runs with `--allow-write --classify conda_behave=write --confirm-writes`. The
calls: `conda_install` of one package into environment t1 (dry-runnable: the question shows
the dry run's plan; the fixture answers with its invocation report, which records the argv),
and `conda_behave` with `pid_file: DIR/ran` (not dry-runnable; the file exists only if it
ran). Exits non-zero on any unexpected failure.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult


def outcome(result):
    structured = result.structured_content or {}
    return {
        "is_error": bool(result.is_error),
        "text": result.content[0].text if result.content else None,
        "parsed_json": structured.get("parsed_json"),
        "exit_code": structured.get("exit_code"),
    }


async def call(client, name, arguments):
    try:
        return outcome(await client.call_tool(name, arguments))
    except MCPError as error:
        return {"code": error.error.code, "message": error.error.message}


async def run(ccm, conda, mode, answer, directory, elicit):
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return ElicitResult(action=answer, content={} if answer == "accept" else None)

    target = StdioServerParameters(
        command=ccm,
        args=[
            "--conda-exe",
            conda,
            "--allow-write",
            "--classify",
            "conda_behave=write",
            "--confirm-writes",
        ],
    )
    options = {"elicitation_callback": on_elicit} if elicit else {}
    seen = {}
    async with Client(target, mode=mode, **options) as client:
        seen["protocol"] = client.protocol_version
        listed = await client.list_tools()
        seen["listed"] = sorted(t.name for t in listed.tools)
        seen["install"] = await call(
            client, "conda_install", {"name": "t1", "packages": ["fixture-pkg=1.0"], "json": True}
        )
        seen["behave"] = await call(client, "conda_behave", {"pid_file": f"{directory}/ran"})
        seen["info"] = await call(client, "conda_info", {"json": True})
    seen["asked"] = asked
    return seen


def main():
    ccm, conda, mode, answer, directory = sys.argv[1:6]
    elicit = len(sys.argv) < 7 or sys.argv[6] != "no"
    print(json.dumps(asyncio.run(run(ccm, conda, mode, answer, directory, elicit))))


if __name__ == "__main__":
    main()
