#!/usr/bin/env python3
"""The cost of caches by trust domain: two ccm binaries side by side (A/B), same run.

A sandboxed call (read-only, `--allow-exec` alone, the `--confirm-writes` preview) keeps
nothing it writes to conda's repodata cache: the next one fetches again what the
operator's cache lacks or holds stale. This measures what that costs, baseline (a binary
that bound the cache writable) against candidate, on one conda:

  search, file://   a fresh operator cache (empty `CONDA_PKGS_DIRS`), then `conda_search`
                    of a local file:// channel: the first call and the median of the
                    repeated ones. conda re-reads a file:// index on every call anyway
                    (`RepodataFetch.fetch_latest`: cached data is used without asking only
                    for non-file URLs).
  search, http      the same channel served over http on loopback with
                    `Cache-Control: max-age=3600` (a remote channel): before, repeated
                    calls used the index the first one cached; now each fetches it.
  read after write  `--allow-write`: one `conda_create` from the http channel (a write
                    call, which fills the operator's cache; not timed), then repeated
                    `conda_search`: they read the operator's cache, before and now.
  info, no pkgs/    only when CONDA's root prefix has no `pkgs/` (a conda that never
                    cached a package), with conda's default package caches (no
                    `CONDA_PKGS_DIRS`) and a fresh HOME: `conda_info --json`, whose
                    sandbox now adds `<root>/pkgs` as a tmpfs through a read-only union.

The channel holds the make_channel.py packages plus PAD synthetic index records
(`--records`, default 20000: an index of a few MB, like a mid-size channel subdir).
Each figure is the wire time of `tools/call` (request written -> response read), the
median over REPS calls; rounds alternate the order (A B, B A, ...) so machine noise hits
both; the report prints each round and the median of the per-round ratios. For the http
scenarios it also counts what the channel served during the repeated calls: whole
`noarch` indexes (`repodata.json`, 200) per call, the figure that does not depend on the machine's
noise (over a network, each is a download of the index).

Usage: python3 bench/caches.py BASELINE_BINARY CANDIDATE_BINARY CONDA [--rounds N]
                                [--reps N] [--records N]
Python 3 standard library only.
"""

import argparse
import collections
import functools
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVED = collections.Counter()  # (path, status) the channel server answered
SERVED_LOCK = threading.Lock()


class Session:
    def __init__(self, binary, conda, flags, env):
        self.p = subprocess.Popen(
            [binary, "--conda-exe", conda, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.n = 0
        self.rpc(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "caches", "version": "1"},
            },
        )
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()
        self.rpc("tools/list", {})

    def rpc(self, method, params):
        self.n += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        while True:
            message = json.loads(self.p.stdout.readline())
            if message.get("id") == self.n:
                return message

    def call(self, tool, arguments):
        """Wire time (ms) of one tools/call; fails loudly on an error."""
        start = time.perf_counter()
        answer = self.rpc("tools/call", {"name": tool, "arguments": arguments})
        wire = (time.perf_counter() - start) * 1000
        result = answer.get("result") or {}
        if result.get("isError") or result.get("structuredContent", {}).get("exit_code") != 0:
            sys.exit(f"{tool} failed: {json.dumps(answer)[:2000]}")
        return wire

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def build_channel(root, records):
    channel = root / "chan"
    subprocess.run(
        [sys.executable, str(REPO / "tests/fixtures/make_channel.py"), str(channel)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    index_path = channel / "noarch" / "repodata.json"
    index = json.loads(index_path.read_text())
    for i in range(records):
        name = f"pad{i % 2000}"
        index["packages"][f"{name}-{i}.0-0.tar.bz2"] = {
            "name": name,
            "version": f"{i}.0",
            "build": "0",
            "build_number": 0,
            "depends": [],
            "noarch": "generic",
            "subdir": "noarch",
            "license": "BSD-3-Clause",
            "md5": "0" * 32,
            "sha256": "0" * 64,
            "size": 1000,
            "timestamp": 0,
        }
    index_path.write_text(json.dumps(index))
    return channel


def serve(root):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def end_headers(self):
            self.send_header("Cache-Control", "public, max-age=3600")
            super().end_headers()

        def log_request(self, code="-", size="-"):
            with SERVED_LOCK:
                SERVED[(self.path, int(code))] += 1

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def environment(home, pkgs):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CONDA_PKGS_DIRS", "XDG_CACHE_HOME", "CONDARC", "CCM_LOG", "CONDA_EXE")
    }
    env["HOME"] = str(home)
    if pkgs is not None:
        env["CONDA_PKGS_DIRS"] = str(pkgs)
    return env


def scenario(binary, conda, work, channel, kind, reps):
    """(first, median of the repeated) wire times of conda_search, in a fresh world."""
    world = Path(tempfile.mkdtemp(dir=work))
    (world / "home").mkdir()
    (world / "pkgs" / "cache").mkdir(parents=True)
    (world / "pkgs" / "urls.txt").write_text("")
    search = {"channel": [channel], "override_channels": True, "match_spec": "pkga"}
    flags = ["--allow-write"] if kind == "read after write" else []
    pkgs = None if kind == "info, no pkgs/" else world / "pkgs"
    s = Session(binary, conda, flags, environment(world / "home", pkgs))
    try:
        if kind == "read after write":
            s.call(
                "conda_create",
                {
                    "prefix": str(world / "env"),
                    "yes": True,
                    "json": True,
                    "override_channels": True,
                    "channel": [channel],
                    "packages": ["pkga"],
                },
            )
        tool, arguments = ("conda_search", search)
        if kind == "info, no pkgs/":
            tool, arguments = ("conda_info", {"json": True})
        first = s.call(tool, arguments)
        SERVED.clear()
        repeated = [s.call(tool, arguments) for _ in range(reps)]
        with SERVED_LOCK:
            downloads = SERVED[("/chan/noarch/repodata.json", 200)] / reps
    finally:
        s.close()
    return first, statistics.median(repeated), downloads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("candidate")
    parser.add_argument("conda")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ccm-bench-caches-") as tmp:
        work = Path(tmp)
        channel = build_channel(work, args.records)
        size = (channel / "noarch" / "repodata.json").stat().st_size
        base = serve(work)
        kinds = {
            "search, file://": f"file://{channel}",
            "search, http": f"{base}/chan",
            "read after write": f"{base}/chan",
        }
        root = Path(os.path.realpath(args.conda)).parent.parent
        if not (root / "pkgs").exists():
            kinds["info, no pkgs/"] = ""
        else:
            print(f"{root}/pkgs exists: no 'info, no pkgs/' scenario")
        print(
            f"index: {args.records + 3} records, {size / 1e6:.1f} MB; "
            f"{args.rounds} rounds, {args.reps} repeated calls each"
        )
        ratios = {(k, which): [] for k in kinds for which in ("first", "repeated")}
        for r in range(args.rounds):
            order = [("base", args.baseline), ("head", args.candidate)]
            if r % 2:
                order.reverse()
            for kind, channel_url in kinds.items():
                got = {
                    name: scenario(b, args.conda, work, channel_url, kind, args.reps)
                    for name, b in order
                }
                (bf, br, bd), (hf, hr, hd) = got["base"], got["head"]
                ratios[(kind, "first")].append(hf / bf)
                ratios[(kind, "repeated")].append(hr / br)
                fetched = (
                    f"; indexes served per repeated call base {bd:g} head {hd:g}"
                    if "http" in kind or "write" in kind
                    else ""
                )
                print(
                    f"round {r + 1} {kind:17}: first base {bf:7.0f} ms head {hf:7.0f} ms "
                    f"({hf / bf:.2f}); repeated base {br:7.0f} ms head {hr:7.0f} ms "
                    f"({hr / br:.2f}){fetched}",
                    flush=True,
                )
        print("median head/base ratio over rounds:")
        for (kind, which), values in ratios.items():
            print(f"  {kind:17} {which:8} {statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
