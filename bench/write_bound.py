#!/usr/bin/env python3
"""One write nobody confirms, for whole-process A/B timing of the write bound under farm-bench.

Usage: python3 bench/write_bound.py BINARY CONDA CHANNEL WORKDIR [--twice]

Starts `BINARY --conda-exe CONDA --allow-write --allow-paths RUN,CHANNEL` over stdio
(protocolVersion 2025-06-18) in a fresh directory RUN under WORKDIR with a HOME, package
cache and condarc of its own (so every run fetches, extracts and links), calls
`conda_create` of every package of the local channel CHANNEL (made by
tests/fixtures/make_channel.py) into `RUN/envs/e`, checks that it succeeded and exits;
prints nothing. With a debug build, `CCM_TEST_NO_WRITE_BOUND=1` in the environment runs
the same create without the bound, e.g.

    run="python3 bench/write_bound.py BIN CONDA CH /var/tmp/wb"
    farm-bench -n 10 --timeout 600 --vs "env CCM_TEST_NO_WRITE_BOUND=1 $run" -- $run

With `--twice` the same session then creates the same packages into `RUN/envs/b` and
the script prints both calls' wall times in seconds: what the run's private package cache
costs (docs/performance.md, "Private package caches"; before it, the second create
linked from the packages the first had extracted into the operator's cache; with it,
each bounded run extracts into its own).

Python 3 standard library only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

binary, conda, channel, workdir = sys.argv[1:5]
twice = sys.argv[5:] == ["--twice"]
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
for i, name in enumerate(("e", "b") if twice else ("e",)):
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
        break
result = answer.get("result", {})
server.stdin.close()
server.wait()
shutil.rmtree(run, ignore_errors=True)
if result.get("isError") is not False:
    sys.exit(f"the create failed: {json.dumps(answer)[:2000]}")
if twice:
    print(" ".join(f"{t:.2f}" for t in times))
