"""Drive `ccm` with the official MCP Python SDK and print what it saw as one JSON line.

Usage: python sdk_client.py stdio CCM CONDA [MODE]   (MODE: legacy | auto; default legacy)
       python sdk_client.py http URL [MODE]

Lists tools, reads conda://capabilities, calls conda_info {"json": true} and a tool with an
invalid argument. Exits non-zero on any unexpected failure.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters
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
            await client.call_tool("conda_info", {"bogus": 1})
            invalid = None
        except MCPError as error:
            invalid = {"code": error.error.code, "message": error.error.message}
        return {
            "tools": [t.name for t in tools],
            "resources": [str(r.uri) for r in resources.resources],
            "capabilities_keys": sorted(document),
            "info_is_error": bool(info.is_error),
            "info_exit_code": (info.structured_content or {}).get("exit_code"),
            "info_conda_version": ((info.structured_content or {}).get("parsed_json") or {}).get("conda_version"),
            "invalid": invalid,
        }


def main():
    kind = sys.argv[1]
    if kind == "stdio":
        target = StdioServerParameters(command=sys.argv[2], args=["--conda-exe", sys.argv[3]])
        mode = sys.argv[4] if len(sys.argv) > 4 else "legacy"
    else:
        target = sys.argv[2]
        mode = sys.argv[3] if len(sys.argv) > 3 else "legacy"
    print(json.dumps(asyncio.run(run(target, mode))))


if __name__ == "__main__":
    main()
