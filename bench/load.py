#!/usr/bin/env python3
"""HTTP load test for `ccm --http` (standard library only).

Starts `ccm --http 127.0.0.1:0` against a freshly built fixture conda, then runs N
concurrent clients (default 16), each with its own MCP session, sending M requests each
(default 200) that mix `tools/list`, `ping` and executions (`tools/call conda_info
{"json": true}`, which runs the fixture conda once). Every request has a timeout; the run
has a hard deadline and stops by itself. The server's resident memory is sampled all along.

Pass/fail (exit status 1 on failure):
- no failed request: anything but a correct result, or an `isError` result whose text
  carries a capacity code (`no_capacity`, `session_busy`), counts as a failure;
- no request answered after its timeout;
- resident memory flat: at the end at most max(4 MiB, 10 %) above the level after the
  first half of the run.

- with --audit-log: the server runs with `--audit-log`, and the log holds exactly one
  whole JSON line per execution request (capacity refusals included: they reached the
  policy), none interleaved, and never the token.

Loopback only. Usage:
    python3 bench/load.py [--ccm target/release/ccm] [--clients 16] [--requests 200]
                          [--max-queue 16] [--max-session-calls 4] [--audit-log] [--json]
"""

import argparse
import http.client
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ACCEPT = "application/json, text/event-stream"
TIMEOUTS = {"tools/list": 30.0, "ping": 30.0, "execution": 300.0}
# Relative weights of the request kinds.
MIX = (("tools/list", 3), ("ping", 4), ("execution", 1))
RUN_DEADLINE = 900.0
CAPACITY_CODES = ("no_capacity", "session_busy")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler(threading.Thread):
    """Samples the server's RSS every 100 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.samples = []  # (seconds since start, KiB)
        self.stop = threading.Event()
        self.started = time.monotonic()

    def run(self):
        while not self.stop.is_set():
            value = rss_kib(self.pid)
            if value is not None:
                self.samples.append((time.monotonic() - self.started, value))
            self.stop.wait(0.1)


def messages(content_type, body):
    """The JSON-RPC messages of a Streamable HTTP answer (JSON or an SSE stream)."""
    if content_type.startswith("application/json"):
        return [json.loads(body)]
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data:
                out.append(json.loads(data))
    return out


class Client:
    def __init__(self, host, port, path, token):
        self.host, self.port, self.path = host, port, path
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": ACCEPT,
        }
        self.conn = None
        self.session = None
        self.next_id = 0

    def post(self, message, timeout):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        self.conn.timeout = timeout
        if self.conn.sock is not None:
            self.conn.sock.settimeout(timeout)
        headers = dict(self.headers)
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        try:
            self.conn.request("POST", self.path, body=json.dumps(message), headers=headers)
            response = self.conn.getresponse()
            body = response.read()
        except Exception:
            self.conn.close()
            self.conn = None
            raise
        return (
            response.status,
            response.getheader("Content-Type", ""),
            response.getheader("Mcp-Session-Id"),
            body,
        )

    def request(self, method, params, timeout):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        status, content_type, session, body = self.post(message, timeout)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
        for reply in messages(content_type, body):
            if reply.get("id") == self.next_id:
                return reply, session
        raise RuntimeError("no response in the answer")

    def open(self):
        reply, session = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "ccm-load", "version": "1"},
            },
            TIMEOUTS["ping"],
        )
        if "result" not in reply or not session:
            raise RuntimeError(f"initialize failed: {reply}")
        self.session = session
        status, _, _, _ = self.post(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}, TIMEOUTS["ping"]
        )
        if status != 202:
            raise RuntimeError(f"initialized: HTTP {status}")


def judge(kind, reply):
    """'ok', a capacity code, or a failure description."""
    if "error" in reply:
        return f"error {reply['error'].get('code')}: {reply['error'].get('message')}"
    result = reply.get("result")
    if kind == "ping":
        return "ok" if result == {} else f"bad ping result {result}"
    if kind == "tools/list":
        tools = (result or {}).get("tools") or []
        return (
            "ok"
            if any(t.get("name") == "conda_info" for t in tools)
            else "tools/list without conda_info"
        )
    text = ((result or {}).get("content") or [{}])[0].get("text", "")
    if result.get("isError"):
        for code in CAPACITY_CODES:
            if text.startswith(code + ":"):
                return code
        return f"execution failed: {text[:200]}"
    exit_code = (result.get("structuredContent") or {}).get("exit_code")
    return "ok" if exit_code == 0 else f"execution exit code {exit_code}"


def client_run(index, args, address, token, results, halfway):
    host, port, path = address
    rng = random.Random(index)
    kinds = [k for k, w in MIX for _ in range(w)]
    client = Client(host, port, path, token)
    try:
        client.open()
    except Exception as error:
        results.append(("initialize", 0.0, f"initialize: {error}", False))
        halfway.abort()
        return
    for n in range(args.requests):
        if n == args.requests // 2:
            try:
                halfway.wait(timeout=RUN_DEADLINE)
            except threading.BrokenBarrierError:
                pass
        kind = rng.choice(kinds)
        timeout = TIMEOUTS[kind]
        started = time.monotonic()
        try:
            if kind == "execution":
                reply, _ = client.request(
                    "tools/call", {"name": "conda_info", "arguments": {"json": True}}, timeout
                )
            else:
                reply, _ = client.request(kind, {}, timeout)
            verdict = judge(kind, reply)
        except Exception as error:
            verdict = f"{type(error).__name__}: {error}"
        elapsed = time.monotonic() - started
        results.append((kind, elapsed, verdict, elapsed > timeout))


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ccm", default=str(REPO / "target/release/ccm"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--max-queue", type=int, default=16)
    parser.add_argument("--max-session-calls", type=int, default=4)
    parser.add_argument(
        "--audit-log", action="store_true", help="run the server with --audit-log and check the log"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    ccm = Path(args.ccm)
    if not ccm.exists():
        subprocess.run(["cargo", "build", "--release", "--bin", "ccm"], cwd=REPO, check=True)

    with tempfile.TemporaryDirectory(prefix="ccm-load-") as work:
        conda = subprocess.run(
            [sys.executable, str(REPO / "tests/fixtures/build_fixture.py"), f"{work}/conda"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        token = secrets.token_hex(24)
        log = open(f"{work}/ccm.log", "w+")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CCM_")}
        env["CCM_MCP_TOKEN"] = token
        audit = [] if not args.audit_log else ["--audit-log", f"{work}/audit.jsonl"]
        args.audit_path = audit[1] if audit else None
        server = subprocess.Popen(
            [
                str(ccm),
                "--conda-exe",
                conda,
                "--http",
                "127.0.0.1:0",
                "--max-queue",
                str(args.max_queue),
                "--max-session-calls",
                str(args.max_session_calls),
                *audit,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
        try:
            return run(args, server, log, token)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()


def run(args, server, log, token):
    deadline = time.monotonic() + 60
    url = None
    while url is None:
        log.seek(0)
        for line in log:
            if line.startswith("ccm: listening on "):
                url = line.split("listening on ", 1)[1].strip()
        if url is None:
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                sys.exit(f"ccm did not start:\n{log.read()}")
            time.sleep(0.05)
    hostport, path = url.removeprefix("http://").split("/", 1)
    host, port = hostport.rsplit(":", 1)
    if host not in ("127.0.0.1", "[::1]", "localhost"):
        sys.exit("refusing a non-loopback address")
    address = (host, int(port), "/" + path)

    # Warm up: discovery done, the tool list served once.
    warm = Client(*address, token)
    warm.open()
    warm.request("tools/list", {}, TIMEOUTS["tools/list"])

    sampler = Sampler(server.pid)
    sampler.start()
    time.sleep(0.3)
    rss_start = rss_kib(server.pid)
    results = []
    halfway = threading.Barrier(args.clients + 1)
    threads = [
        threading.Thread(
            target=client_run, args=(i, args, address, token, results, halfway), daemon=True
        )
        for i in range(args.clients)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        halfway.wait(timeout=RUN_DEADLINE)
    except threading.BrokenBarrierError:
        pass
    time.sleep(0.3)
    rss_mid = rss_kib(server.pid)
    for t in threads:
        t.join(timeout=max(0.0, RUN_DEADLINE - (time.monotonic() - started)))
    hung = sum(t.is_alive() for t in threads)
    wall = time.monotonic() - started
    time.sleep(0.3)
    rss_end = rss_kib(server.pid)
    sampler.stop.set()
    sampler.join()
    peak = max(v for _, v in sampler.samples)

    kinds = [k for k, _ in MIX]
    figures = {
        "clients": args.clients,
        "requests_per_client": args.requests,
        "max_queue": args.max_queue,
        "max_session_calls": args.max_session_calls,
        "requests": len(results),
        "wall_seconds": round(wall, 2),
        "requests_per_second": round(len(results) / wall, 1),
        "latency_ms": {},
        "outcomes": {},
        "late": sum(1 for r in results if r[3]),
        "hung_clients": hung,
        "rss_kib": {
            "start": rss_start,
            "mid": rss_mid,
            "end": rss_end,
            "peak": peak,
            "samples": len(sampler.samples),
        },
    }
    for kind in kinds:
        ok = [r[1] * 1000 for r in results if r[0] == kind and r[2] == "ok"]
        refused = [r[1] * 1000 for r in results if r[0] == kind and r[2] in CAPACITY_CODES]
        figures["latency_ms"][kind] = {
            "count": sum(1 for r in results if r[0] == kind),
            "p50": round(percentile(ok, 50), 1) if ok else None,
            "p99": round(percentile(ok, 99), 1) if ok else None,
            "max": round(max(ok), 1) if ok else None,
        }
        if refused:
            figures["latency_ms"][kind]["refused_p99"] = round(percentile(refused, 99), 1)
    for _, _, verdict, _ in results:
        key = verdict if verdict == "ok" or verdict in CAPACITY_CODES else "failed"
        figures["outcomes"][key] = figures["outcomes"].get(key, 0) + 1
    failures = [r for r in results if r[2] != "ok" and r[2] not in CAPACITY_CODES]
    growth = rss_end - rss_mid
    flat = growth <= max(4096, rss_mid // 10)
    expected = args.clients * args.requests
    ok = not failures and figures["late"] == 0 and hung == 0 and flat and len(results) == expected
    figures["passed"] = ok

    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"{len(results)} requests from {args.clients} clients in {wall:.1f} s: "
            f"{figures['requests_per_second']} requests/s"
        )
        for kind in kinds:
            lat = figures["latency_ms"][kind]
            refused = f"  refused p99={lat['refused_p99']} ms" if "refused_p99" in lat else ""
            print(
                f"  {kind:11} n={lat['count']:5}  p50={lat['p50']} ms  p99={lat['p99']} ms  "
                f"max={lat['max']} ms{refused}"
            )
        print(
            f"  outcomes: {figures['outcomes']}; late answers: {figures['late']}; "
            f"hung clients: {hung}"
        )
        print(
            f"  RSS (KiB): start {rss_start}, after half {rss_mid}, end {rss_end}, peak {peak} "
            f"({'flat' if flat else 'GREW'})"
        )
    for kind, _, verdict, _ in failures[:10]:
        print(f"  failure ({kind}): {verdict}", file=sys.stderr)
    log.seek(0)
    if token in log.read():
        print("the token appeared in the server's log", file=sys.stderr)
        ok = False
    if args.audit_path is not None and not audit_log_holds(args.audit_path, results, token):
        ok = False
    return 0 if ok else 1


def audit_log_holds(path, results, token):
    """One whole JSON line per execution request, none torn, never the token."""
    text = Path(path).read_text()
    lines = text.splitlines()
    executions = sum(1 for r in results if r[0] == "execution")
    whole = all(json.loads(line).get("canonical_tool") == "conda_info" for line in lines)
    held = text.endswith("\n") and whole and len(lines) == executions and token not in text
    print(
        f"  audit log: {len(lines)} lines for {executions} executions "
        f"({'ok' if held else 'FAILED'})"
    )
    return held


if __name__ == "__main__":
    sys.exit(main())
