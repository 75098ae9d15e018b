"""Check the client configurations of README.md and docs/clients.md as pasted: every JSON
block that configures a server (`mcpServers` or `servers`) and every TOML block with
`mcp_servers` must start a working `ccm` with the configuration's `args` and `env` — the
example paths /home/you/.cargo/bin/ccm and /opt/conda/bin/conda replaced by the binary
under test and a real conda (any other command is resolved on PATH, the binary's directory
first). Each server is asked for its tools and runs conda_info; the tools it lists must
be what `ccm tools --json` says that configuration lists. Configurations that start the
installed launcher (`/opt/conda/bin/conda ccm`) need the wheel installed in CONDA: they
are checked with --launcher (.ci/dist does, against a real conda with the wheel) and
listed as not checked without it.

Usage: python3 tests/clients/readme.py [--launcher] CCM_BINARY CONDA
"""

import json
import os
import re
import subprocess
import sys

import tomllib

EXAMPLE_CONDA = "/opt/conda/bin/conda"
EXAMPLE_CCM = "/home/you/.cargo/bin/ccm"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FILES = ["README.md", "docs/clients.md"]


def servers(text):
    """(section, name, server) for every configuration in a Markdown text."""
    section = ""
    for heading, kind, block in re.findall(
        r"^## (.*?)$|```(json|toml)\n(.*?)```", text, flags=re.S | re.M
    ):
        if heading:
            section = heading
            continue
        try:
            config = json.loads(block) if kind == "json" else tomllib.loads(block)
        except (ValueError, tomllib.TOMLDecodeError):
            continue  # an example result, not a configuration
        found = config.get("mcpServers") or config.get("servers") or config.get("mcp_servers")
        if isinstance(found, dict):
            for name, server in found.items():
                yield section, name, server


def environment(ccm, server):
    env = dict(os.environ, PATH=os.path.dirname(ccm) + os.pathsep + os.environ.get("PATH", ""))
    # The launcher form must find the wheel's own ccm (.ci/dist installs it), not be told.
    for name in ("CONDA_EXE", "CCM_LOG", "CCM_TOOLS", "CCM_BIN"):
        env.pop(name, None)
    for name, value in server.get("env", {}).items():
        env[name] = value
    return env


def listed_by_ccm_tools(ccm, conda, server, env):
    """The tool names `ccm tools --json` reports listed for this configuration."""
    args = [a for a in server.get("args", []) if a not in ("ccm", "--conda-exe", EXAMPLE_CONDA)]
    out = subprocess.run(
        [ccm, "--conda-exe", conda, "tools", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(t["name"] for t in json.loads(out)["tools"] if t["listed"])


def check(name, server, ccm, conda):
    env = environment(ccm, server)
    replace = {EXAMPLE_CCM: ccm, EXAMPLE_CONDA: conda}
    argv = [
        replace.get(server["command"], server["command"]),
        *[replace.get(a, a) for a in server.get("args", [])],
    ]
    process = subprocess.Popen(
        argv,
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
            line = process.stdout.readline()
            assert line, f"{name}: the server ended ({argv})"
            message = json.loads(line)
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
        tools = sorted(t["name"] for t in request(2, "tools/list", {})["result"]["tools"])
        expected = listed_by_ccm_tools(ccm, conda, server, env)
        assert tools == expected, f"{name}: lists {tools}, `ccm tools` says {expected}"
        info = request(3, "tools/call", {"name": "conda_info", "arguments": {"json": True}})[
            "result"
        ]
        assert not info.get("isError"), info
        version = info["structuredContent"]["parsed_json"]["conda_version"]
        return f"{len(tools)} tools, conda {version}"
    finally:
        process.kill()
        process.wait()


def main():
    args = sys.argv[1:]
    launcher = "--launcher" in args
    if launcher:
        args.remove("--launcher")
    ccm, conda = args
    ccm = os.path.abspath(ccm)
    checked, not_checked = 0, 0
    for file in FILES:
        with open(os.path.join(ROOT, file)) as f:
            text = f.read()
        for section, _name, server in servers(text):
            command = server.get("command")
            label = f"{file}, {section}: {'launcher' if command == EXAMPLE_CONDA else 'binary'}"
            assert command in (EXAMPLE_CCM, EXAMPLE_CONDA), (
                f"{label}: configurations start `ccm` or `conda ccm` by absolute path"
            )
            if command == EXAMPLE_CONDA:
                assert server.get("args", [])[:1] == ["ccm"], f"{label}: `conda ccm` expected"
                if not launcher:
                    not_checked += 1
                    continue
            print(f"{label}: {check(label, server, ccm, conda)}")
            checked += 1
    assert checked >= (15 if launcher else 8), f"only {checked} client configurations found"
    if not_checked:
        print(
            f"not checked here (they need the wheel's launcher in the conda; .ci/dist "
            f"checks them): {not_checked} `conda ccm` configuration(s)"
        )


if __name__ == "__main__":
    main()
