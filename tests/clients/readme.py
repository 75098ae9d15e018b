"""Check the README's client configurations as pasted: every JSON block that configures a
server (`mcpServers` or `servers`) must start a working `ccm` — with the example paths
/home/you/.cargo/bin/ccm and /opt/conda/bin/conda replaced by the binary under test and a
real conda (any other command is resolved on PATH, the binary's directory first).
Configurations that start the installed launcher (`/opt/conda/bin/conda ccm`) need the
wheel installed in CONDA: they are checked with --launcher (.ci/dist does, against a real
conda with the wheel) and listed as not checked without it.

Usage: python3 tests/clients/readme.py [--launcher] CCM_BINARY CONDA
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
        [{EXAMPLE_CCM: ccm, EXAMPLE_CONDA: conda}.get(server["command"], server["command"]), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )

    def request(id_, method, params):
        process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n"
        )
        process.stdin.flush()
        while True:
            message = json.loads(process.stdout.readline())
            if message.get("id") == id_:
                return message

    try:
        init = request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "readme", "version": "1"},
            },
        )
        assert init["result"]["serverInfo"]["name"], init
        process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        )
        tools = request(2, "tools/list", {})["result"]["tools"]
        info = request(3, "tools/call", {"name": "conda_info", "arguments": {"json": True}})[
            "result"
        ]
        assert not info.get("isError"), info
        version = info["structuredContent"]["parsed_json"]["conda_version"]
        print(f"{name}: {len(tools)} tools, conda {version}")
    finally:
        process.kill()
        process.wait()


def main():
    args = sys.argv[1:]
    launcher = "--launcher" in args
    if launcher:
        args.remove("--launcher")
    ccm, conda = args
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    checked, not_checked = 0, []
    for block in blocks(readme):
        config = json.loads(block)
        servers = config.get("mcpServers") or config.get("servers")
        if not isinstance(servers, dict):
            continue
        for name, server in servers.items():
            command = server.get("command")
            assert command in (EXAMPLE_CCM, EXAMPLE_CONDA), (
                f"{name}: the README's configs start `ccm` or `conda ccm` by absolute path"
            )
            if command == EXAMPLE_CONDA:
                assert server.get("args", [])[:1] == ["ccm"], f"{name}: `conda ccm` expected"
                if not launcher:
                    not_checked.append(name)
                    continue
            check(name, server, os.path.abspath(ccm), conda)
            checked += 1
    assert checked >= 4, f"only {checked} client configurations found"
    if not_checked:
        print(
            f"not checked here (they need the wheel's launcher in the conda; .ci/dist "
            f"checks them): {len(not_checked)} `conda ccm` configuration(s)"
        )


if __name__ == "__main__":
    main()
