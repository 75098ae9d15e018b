#!/usr/bin/env python3
"""One MCP session of N calls of one tool, for whole-process A/B timing under farm-bench.

Usage: python3 bench/sessions.py BINARY CONDA TOOL N [SERVER FLAGS...]

Starts `BINARY --conda-exe CONDA [FLAGS]` over stdio (protocolVersion 2025-06-18), waits
for the warm zygote when `--warm` is among the flags, calls TOOL with `{"json": true}` N
times (each must succeed) and exits; prints nothing. `BENCH_HOME`, when set, is the
server's HOME. Pair two binaries with farm-bench, e.g.

    farm-bench -n 12 --vs "python3 bench/sessions.py OLD CONDA conda_info 20" -- \
        python3 bench/sessions.py NEW CONDA conda_info 20

Python 3 standard library only.
"""

import json
import os
import subprocess
import sys
import time

binary, conda, tool, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
extra = sys.argv[5:]
home = os.environ.get("BENCH_HOME")
env = dict(os.environ, HOME=home) if home else None
server = subprocess.Popen(
    [binary, "--conda-exe", conda, *extra],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    env=env,
)


def rpc(i, method, params):
    line = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    server.stdin.write((line + "\n").encode())
    server.stdin.flush()
    while True:
        message = json.loads(server.stdout.readline())
        if message.get("id") == i:
            return message


rpc(
    1,
    "initialize",
    {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "sessions", "version": "1"},
    },
)
server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
server.stdin.flush()
if "--warm" in extra:
    for k in range(600):
        read = rpc(100000 + k, "resources/read", {"uri": "conda://capabilities"})
        warm = json.loads(read["result"]["contents"][0]["text"]).get("warm") or {}
        if warm.get("state") == "ready":
            break
        if warm.get("state") == "unavailable":
            sys.exit(f"warm unavailable: {warm}")
        time.sleep(0.05)
    else:
        sys.exit("the zygote never became ready")
for k in range(n):
    answer = rpc(10 + k, "tools/call", {"name": tool, "arguments": {"json": True}})
    if answer.get("error") or answer["result"].get("isError"):
        sys.exit(f"call failed: {answer}")
server.stdin.close()
server.wait()
