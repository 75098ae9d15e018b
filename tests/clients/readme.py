"""Check the README's client configurations as pasted: every JSON block that configures a
server (`mcpServers` or `servers`) must start a working `ccm` — with the example paths
/home/you/.cargo/bin/ccm and /opt/conda/bin/conda replaced by the binary under test and a
real conda (any other command is resolved on PATH, the binary's directory first).

Usage: python3 tests/clients/readme.py CCM_BINARY CONDA
"""

import json
import os
import re
import subprocess
import sys

EXAMPLE_CONDA = "/opt/conda/bin/conda"
EXAMPLE_CCM = "/home/you/.cargo/bin/ccm"


def blocks(text):
    return re.findall(r"```json\n(.*?)```", text, flags=re.S)


def check(name, server, ccm, conda):
    ccm_dir = os.path.dirname(ccm)
    env = dict(os.environ, PATH=ccm_dir + os.pathsep + os.environ.get("PATH", ""))
    args = [conda if a == EXAMPLE_CONDA else a for a in server.get("args", [])]
    process = subprocess.Popen(
        [ccm if server["command"] == EXAMPLE_CCM else server["command"], *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=env, text=True,
    )

    def request(id_, method, params):
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n")
        process.stdin.flush()
        while True:
            message = json.loads(process.stdout.readline())
            if message.get("id") == id_:
                return message

    try:
        init = request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "readme", "version": "1"}})
        assert init["result"]["serverInfo"]["name"], init
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        tools = request(2, "tools/list", {})["result"]["tools"]
        info = request(3, "tools/call", {"name": "conda_info", "arguments": {"json": True}})["result"]
        assert not info.get("isError"), info
        version = info["structuredContent"]["parsed_json"]["conda_version"]
        print(f"{name}: {len(tools)} tools, conda {version}")
    finally:
        process.kill()
        process.wait()


def main():
    ccm, conda = sys.argv[1], sys.argv[2]
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    checked = 0
    for block in blocks(readme):
        config = json.loads(block)
        servers = config.get("mcpServers") or config.get("servers")
        if not isinstance(servers, dict):
            continue
        for name, server in servers.items():
            assert server.get("command") == EXAMPLE_CCM, (
                f"{name}: the README's configs start `ccm` by its absolute path"
            )
            check(name, server, os.path.abspath(ccm), conda)
            checked += 1
    assert checked >= 4, f"only {checked} client configurations found"


if __name__ == "__main__":
    main()
