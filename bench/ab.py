#!/usr/bin/env python3
"""Per-call overhead of two ccm binaries side by side (A/B), same run.

Each session starts `BINARY --conda-exe CONDA` over stdio (protocolVersion 2025-06-18),
lists the tools, then calls `conda_info {"json": true}` 20 times without a progress token;
a call's overhead is its wire time minus the server-reported `duration_ms`, and a session's
figure is the median. Six rounds alternate the order (A B, B A, ...) so machine noise
hits both; the report prints each round and the median over rounds.

Usage: python3 bench/ab.py BASELINE_BINARY CANDIDATE_BINARY CONDA
Python 3 standard library only.
"""

import json
import statistics
import subprocess
import sys
import time

A, B, CONDA = sys.argv[1], sys.argv[2], sys.argv[3]  # baseline, candidate, conda


def session(binary, n=20):
    p = subprocess.Popen(
        [binary, "--conda-exe", CONDA],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def rpc(i, method, params):
        p.stdin.write(
            (
                json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n"
            ).encode()
        )
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            m = json.loads(line)
            if m.get("id") == i:
                return m

    rpc(
        1,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "ab", "version": "1"},
        },
    )
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    rpc(2, "tools/list", {})
    over = []
    for k in range(n):
        t = time.perf_counter()
        r = rpc(10 + k, "tools/call", {"name": "conda_info", "arguments": {"json": True}})
        wire = (time.perf_counter() - t) * 1000
        over.append(wire - r["result"]["structuredContent"]["duration_ms"])
    p.stdin.close()
    p.wait()
    return statistics.median(over)


rows = []
for r in range(6):
    order = [("base", A), ("head", B)] if r % 2 == 0 else [("head", B), ("base", A)]
    res = {name: session(b) for name, b in order}
    rows.append(res)
    print(
        f"round {r + 1}: base {res['base']:.2f} ms, head {res['head']:.2f} ms, "
        f"head/base {res['head'] / res['base']:.2f}"
    )
b = statistics.median(x["base"] for x in rows)
h = statistics.median(x["head"] for x in rows)
print(f"median over rounds: base {b:.2f} ms, head {h:.2f} ms, ratio {h / b:.2f}")
