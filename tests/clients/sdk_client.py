"""Drive `ccm` with the official MCP Python SDK and print what it saw as one JSON line.

Usage: python sdk_client.py stdio CCM CONDA [MODE] [ARG...]  (MODE: legacy | auto; default legacy;
                                                             ARGs go to the server)
       python sdk_client.py http URL [MODE]          (CCM_TEST_BEARER: send this bearer token)

Lists tools, reads conda://capabilities, calls conda_info {"json": true}, a tool with an
invalid argument, a tool that does not exist and, when listed, the dry-run-only
conda_install without dry_run. Exits non-zero on any unexpected failure.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def run(target, mode):
    async with Client(target, mode=mode) as client:
        tools = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        resources = await client.list_resources()
        capabilities = await client.read_resource("conda://capabilities")
        document = json.loads(capabilities.contents[0].text)
        info = await client.call_tool("conda_info", {"json": True})
        try:
            # From 2025-11-25 on an invalid argument is a tool result the model can read.
            refused = await client.call_tool("conda_info", {"bogus": 1})
            invalid = {
                "is_error": bool(refused.is_error),
                "text": refused.content[0].text if refused.content else None,
                "meta": refused.meta,
            }
        except MCPError as error:
            invalid = {"code": error.error.code, "message": error.error.message}
        try:
            await client.call_tool("conda_no_such_tool", {})
            unknown = None
        except MCPError as error:
            unknown = {"code": error.error.code, "message": error.error.message}
        names = [t.name for t in tools]
        dry_run_only = None
        if "conda_install" in names:
            dry_run_only = await refusal(client, "conda_install", {"packages": ["x"]})
        return {
            "tools": [t.name for t in tools],
            "resources": [str(r.uri) for r in resources.resources],
            "capabilities_keys": sorted(document),
            "info_is_error": bool(info.is_error),
            "info_exit_code": (info.structured_content or {}).get("exit_code"),
            "info_conda_version": ((info.structured_content or {}).get("parsed_json") or {}).get(
                "conda_version"
            ),
            "invalid": invalid,
            "dry_run_only": dry_run_only,
            "unknown": unknown,
            "info_stdout": (info.structured_content or {}).get("stdout"),
            "info_meta": info.meta,
        }


async def refusal(client, name, arguments):
    """How a call the server refuses came back: a JSON-RPC error or an isError result."""
    try:
        result = await client.call_tool(name, arguments)
    except MCPError as error:
        return {"code": error.error.code, "message": error.error.message}
    text = "".join(getattr(c, "text", "") for c in result.content)
    return {"is_error": bool(result.is_error), "message": text}


async def run_http(url, mode, bearer):
    if not bearer:
        return await run(url, mode)
    headers = {"Authorization": f"Bearer {bearer}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        return await run(streamable_http_client(url, http_client=http), mode)


def main():
    kind = sys.argv[1]
    if kind == "stdio":
        extra = sys.argv[5:]
        target = StdioServerParameters(
            command=sys.argv[2], args=["--conda-exe", sys.argv[3], *extra]
        )
        mode = sys.argv[4] if len(sys.argv) > 4 else "legacy"
        seen = asyncio.run(run(target, mode))
    else:
        mode = sys.argv[3] if len(sys.argv) > 3 else "legacy"
        seen = asyncio.run(run_http(sys.argv[2], mode, os.environ.get("CCM_TEST_BEARER")))
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
