"""Gaps between the progress notifications of one long call (the heartbeat interval).

Usage: python bench/heartbeat.py CONDA CCM [SECONDS]

Starts `ccm --conda-exe CONDA --allow-write --classify conda_behave=write` over stdio
(protocol revision 2025-11-25; CONDA is the fixture conda, whose `behave` command
sleeps), calls `conda_behave {"sleep": SECONDS}` (default 30) with a progress token, and
prints the gaps between the call and its first notification, between notifications, and
between the last one and the result: count, median and max, in seconds.
"""

import json
import statistics
import subprocess
import sys
import time


def main():
    conda, binary = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    child = subprocess.Popen(
        [binary, "--conda-exe", conda, "--allow-write", "--classify", "conda_behave=write"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def send(message):
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "heartbeat", "version": "1"},
            },
        }
    )
    child.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    child.stdout.readline()
    started = time.monotonic()
    send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "conda_behave",
                "arguments": {"sleep": seconds},
                "_meta": {"progressToken": "heartbeat"},
            },
        }
    )
    times = [started]
    while True:
        message = json.loads(child.stdout.readline())
        times.append(time.monotonic())
        if message.get("id") == 3:
            break
    child.stdin.close()
    child.wait()
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    print(
        json.dumps(
            {
                "sleep_seconds": seconds,
                "notifications": len(times) - 2,
                "gap_median_s": round(statistics.median(gaps), 3),
                "gap_max_s": round(max(gaps), 3),
                "gaps_s": [round(g, 3) for g in gaps],
            }
        )
    )


if __name__ == "__main__":
    main()
