#!/usr/bin/env python3
"""The server's own peak RSS over one stdio session, with a breakdown by mapping.

Each run starts `ccm --conda-exe TARGET`, sends initialize, tools/list, tools/call
conda_info {"json": true}, conda_env_list {"json": true} and conda_config {"show":
["channels"], "json": true}, waits until the start is settled (a snapshot start's live
confirmation no longer `pending`, read from conda://capabilities), then reads the server's
/proc/PID/status (VmHWM: the peak; VmRSS: now) and /proc/PID/smaps (resident memory now,
grouped by mapping) before closing stdin.

Usage: python3 bench/rss.py --conda-exe PATH [--ccm target/release/ccm] [--runs N] [--json]
                            [--sections]
--sections also reports, per section of the executable, how much is resident (the present
bits of /proc/PID/pagemap; needs root and binutils' readelf).
Several binaries may be given (--ccm A --ccm B): runs alternate A B A B ... so that
machine noise hits each the same way. Python 3 standard library only.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Session

CALLS = [
    ("conda_info", {"json": True}),
    ("conda_env_list", {"json": True}),
    ("conda_config", {"show": ["channels"], "json": True}),
]


def status_kib(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def smaps_breakdown(pid, exe):
    """Resident KiB now, by kind of mapping."""
    groups = {}
    current = None
    threads = len(os.listdir(f"/proc/{pid}/task"))
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
            perms = head[1]
            name = head[5] if len(head) == 6 else ""
            if name == exe or name.endswith("/" + os.path.basename(exe)):
                kind = {
                    "r-xp": "binary code (r-x)",
                    "r--p": "binary read-only data (r--)",
                    "rw-p": "binary data (rw-)",
                }.get(perms, f"binary {perms}")
            elif name == "[heap]":
                kind = "heap (brk: main arena)"
            elif name == "[stack]":
                kind = "main thread stack"
            elif name.startswith("/"):
                kind = "shared libraries (libc, ld.so, ...)"
            elif name.startswith("["):
                kind = "kernel ([vdso], [vvar], ...)"
            else:
                kind = "anonymous (thread stacks, malloc arenas, mmap'd blocks)"
            groups.setdefault(kind, 0)
            current = kind
        elif line.startswith("Rss:") and current is not None:
            groups[current] += int(line.split()[1])
    groups["(threads now)"] = threads
    return groups


def section_residency(pid, exe):
    """Resident KiB of each allocated section of the running executable."""
    import struct
    import subprocess

    listing = subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True).stdout
    sections = []
    for line in listing.splitlines():
        line = line.strip()
        if not line.startswith("[") or "]" not in line:
            continue
        fields = line[line.index("]") + 1 :].split()
        if len(fields) < 5 or fields[0] == "Name":
            continue
        name, address, size = fields[0], int(fields[2], 16), int(fields[4], 16)
        if address and size:
            sections.append((name, address, size))
    bias = None
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5] == exe and int(fields[2], 16) == 0:
            bias = int(fields[0].split("-")[0], 16)
            break
    out = {}
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for name, address, size in sections:
            first, last = (bias + address) // 4096, (bias + address + size - 1) // 4096
            present = 0
            for page in range(first, last + 1):
                pagemap.seek(page * 8)
                present += struct.unpack("Q", pagemap.read(8))[0] >> 63
            out[name] = {"size_kib": size // 1024, "resident_kib": present * 4}
    return out


def one_run(ccm, conda_exe, tmp, sections=False):
    log = Path(tmp) / "server.log"
    session = Session([ccm, "--conda-exe", conda_exe], tmp, log)
    try:
        session.handshake()
        listed, _, size, _ = session.request("tools/list")
        tools = len(listed["result"]["tools"])
        for tool, arguments in CALLS:
            message = session.request("tools/call", {"name": tool, "arguments": arguments})[0]
            if "error" in message or message["result"].get("isError"):
                raise RuntimeError(f"{tool} failed: {json.dumps(message)[:300]}")
        deadline = time.monotonic() + 120
        while True:
            read = session.request("resources/read", {"uri": "conda://capabilities"})[0]
            caps = json.loads(read["result"]["contents"][0]["text"])
            if caps["startup"]["confirmation"] != "pending" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        pid = session.proc.pid
        out = {
            "start": caps["startup"]["path"],
            "confirmation": caps["startup"]["confirmation"],
            "tools": tools,
            "tools_list_bytes": size,
            "vmhwm_kib": status_kib(pid, "VmHWM"),
            "vmrss_kib": status_kib(pid, "VmRSS"),
            "breakdown_kib": smaps_breakdown(pid, os.readlink(f"/proc/{pid}/exe")),
        }
        if sections:
            out["sections"] = section_residency(pid, os.readlink(f"/proc/{pid}/exe"))
    finally:
        session.close()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conda-exe", required=True)
    parser.add_argument(
        "--ccm", action="append", help="binary (repeatable); default target/release/ccm"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sections", action="store_true", help="residency by ELF section")
    args = parser.parse_args()
    binaries = args.ccm or [str(Path(__file__).resolve().parent.parent / "target/release/ccm")]
    results = {b: [] for b in binaries}
    with tempfile.TemporaryDirectory(prefix="ccm-rss-") as tmp:
        for _ in range(args.runs):
            for binary in binaries:
                results[binary].append(one_run(binary, args.conda_exe, tmp, args.sections))
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for binary, runs in results.items():
        peaks = [r["vmhwm_kib"] / 1024 for r in runs]
        print(
            f"{binary} ({os.path.getsize(binary):,} bytes): {runs[0]['tools']} tools, "
            f"start {runs[0]['start']} ({runs[0]['confirmation']})"
        )
        each = ", ".join(f"{p:.2f}" for p in peaks)
        print(
            f"  VmHWM MiB: median {statistics.median(peaks):.2f}, "
            f"range {min(peaks):.2f}-{max(peaks):.2f} [{each}]"
        )
        ends = ", ".join(f"{r['vmrss_kib'] / 1024:.2f}" for r in runs)
        print(f"  VmRSS at the end MiB: {ends}")
        kinds = sorted({k for r in runs for k in r["breakdown_kib"]})
        for kind in kinds:
            values = [r["breakdown_kib"].get(kind, 0) for r in runs]
            unit = "" if kind.startswith("(") else " KiB"
            print(
                f"    {kind}: {statistics.median(values):.0f}{unit} ({min(values)}-{max(values)})"
            )
        if args.sections:
            print("  resident by section of the executable, KiB (median over runs):")
            for name, first in runs[0]["sections"].items():
                values = [r["sections"][name]["resident_kib"] for r in runs]
                if max(values) >= 16:
                    print(f"    {name}: {statistics.median(values):.0f} of {first['size_kib']}")


if __name__ == "__main__":
    main()
