"""Drive `ccm` with the official MCP Python SDK as a client that declares roots, and print
what it saw as one JSON line.

Usage: python sdk_roots.py stdio CCM CONDA MODE ROOT1 ROOT2 OUTSIDE   (MODE: legacy | auto)
       python sdk_roots.py http URL MODE ROOT1 ROOT2 OUTSIDE   (CCM_TEST_BEARER: the token)

Over stdio the server is started in OUTSIDE; over HTTP it must already run. It runs with
`--allow-write --classify conda_behave=write` (over HTTP also `--allow-paths /`); every call is
`conda_behave` with `cwd: true` (it prints its working directory). The roots are ROOT1
and ROOT2 (ROOT1 has a `sub` directory and a symbolic link `link` to OUTSIDE); after the
first calls the roots change to ROOT2 alone and the client says so with
`notifications/roots/list_changed`. Exits non-zero on any unexpected failure.
"""

import asyncio
import json
import os
import pathlib
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ListRootsResult, Root


def outcome(result):
    """What one call did: the directory it ran in, and the one the result named."""
    structured = result.structured_content or {}
    meta = result.meta or {}
    return {
        "is_error": bool(result.is_error),
        "ran_in": (structured.get("stdout") or "").strip(),
        "named": meta.get("conda-cli-mcp/cwd"),
        "text": result.content[0].text if result.content else None,
    }


async def call(client, arguments):
    try:
        return outcome(await client.call_tool("conda_behave", {"cwd": True, **arguments}))
    except MCPError as error:
        return {"code": error.error.code, "message": error.error.message}


async def run(target, mode, root1, root2, outside):
    roots = [root1, root2]
    asked = []

    async def list_roots(context):
        asked.append(list(roots))
        return ListRootsResult(roots=[Root(uri=pathlib.Path(r).as_uri()) for r in roots])

    seen = {}
    async with Client(target, mode=mode, list_roots_callback=list_roots) as client:
        seen["default"] = await call(client, {})
        seen["relative"] = await call(client, {"ccm_cwd": "sub"})
        seen["second_root"] = await call(client, {"ccm_cwd": root2})
        seen["outside"] = await call(client, {"ccm_cwd": outside})
        seen["escape"] = await call(client, {"ccm_cwd": "../.."})
        seen["symlink"] = await call(client, {"ccm_cwd": "link"})
        seen["missing"] = await call(client, {"ccm_cwd": "no-such-dir"})
        roots[:] = [root2]
        if mode == "legacy":
            await client.send_roots_list_changed()
            # The notification is one-way: wait until the server has seen it.
            await asyncio.sleep(1)
        seen["after_change"] = await call(client, {})
    seen["asked"] = len(asked)
    return seen


async def run_http(url, mode, roots):
    headers = {"Authorization": f"Bearer {os.environ['CCM_TEST_BEARER']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        return await run(streamable_http_client(url, http_client=http), mode, *roots)


def main():
    if sys.argv[1] == "stdio":
        ccm, conda, mode = sys.argv[2:5]
        roots = sys.argv[5:8]
        target = StdioServerParameters(
            command=ccm,
            args=["--conda-exe", conda, "--allow-write", "--classify", "conda_behave=write"],
            cwd=roots[2],
        )
        seen = asyncio.run(run(target, mode, *roots))
    else:
        url, mode = sys.argv[2:4]
        seen = asyncio.run(run_http(url, mode, sys.argv[4:7]))
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
