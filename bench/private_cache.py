#!/usr/bin/env python3
"""A bounded create and a repeated one, in one session: what the run's private package
cache costs (docs/performance.md, "Private package caches").

Usage: python3 bench/private_cache.py BINARY CONDA CHANNEL WORKDIR

Starts `BINARY --conda-exe CONDA --allow-write --allow-paths RUN,CHANNEL` over stdio
in a fresh directory RUN under WORKDIR (HOME, package cache, condarc of its own), calls
`conda_create` of every `noarch` package of the local channel CHANNEL (made by
tests/fixtures/make_channel.py) into `RUN/envs/a`, then the same into `RUN/envs/b`,
and prints the two calls' wall times in seconds. Before the private cache, the second
create linked from the packages the first had extracted into the operator's cache; with
it, each bounded run extracts into its own. Python 3 standard library only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

binary, conda, channel, workdir = sys.argv[1:5]
os.makedirs(workdir, exist_ok=True)
run = tempfile.mkdtemp(prefix="run-", dir=workdir)
for sub in ("home", "pkgs", "envs", "tmp"):
    os.makedirs(os.path.join(run, sub))
with open(os.path.join(run, "condarc"), "w") as fh:
    fh.write("channels: []\n")
env = dict(
    os.environ,
    HOME=os.path.join(run, "home"),
    CONDARC=os.path.join(run, "condarc"),
    CONDA_PKGS_DIRS=os.path.join(run, "pkgs"),
    TMPDIR=os.path.join(run, "tmp"),
    CONDA_OFFLINE="1",
    CONDA_OVERRIDE_CUDA="",
)
server = subprocess.Popen(
    [binary, "--conda-exe", conda, "--allow-write", "--allow-paths", f"{run},{channel}"],
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
        answer = json.loads(server.stdout.readline())
        if answer.get("id") == i:
            return answer


rpc(
    1,
    "initialize",
    {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
)
server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
with open(os.path.join(channel, "noarch", "repodata.json")) as fh:
    index = json.load(fh)
names = sorted({r["name"] for r in index.get("packages", {}).values()})
times = []
for i, name in enumerate(("a", "b")):
    arguments = {
        "prefix": os.path.join(run, "envs", name),
        "packages": names,
        "channel": [f"file://{channel}"],
        "override_channels": True,
        "yes": True,
    }
    start = time.perf_counter()
    answer = rpc(2 + i, "tools/call", {"name": "conda_create", "arguments": arguments})
    times.append(time.perf_counter() - start)
    if answer.get("result", {}).get("isError") is not False:
        sys.exit(f"the create failed: {json.dumps(answer)[:2000]}")
server.stdin.close()
server.wait()
shutil.rmtree(run, ignore_errors=True)
print(" ".join(f"{t:.2f}" for t in times))
