#!/usr/bin/env python3
"""Benchmark ccm against the reference server (conda-cli-mcp 0.2.0) it replaces.

Both servers are driven by the same raw JSON-RPC client written here: a subprocess with
pipes, newline-delimited JSON, responses matched by id. Each session sends `initialize`
(protocolVersion 2025-06-18) and `notifications/initialized`. Times use
time.perf_counter(); a response is timestamped by a reader thread the moment its line
arrives. Runs alternate ccm / reference (A B A B ...) so machine noise hits both.

Per server and run (a "read" session with the default policy, then a "write" session with
--allow-write), it measures:
  1. spawn -> initialize response (ms)
  2. spawn -> tools/list response (tools/list sent right after initialized) (ms)
  3. tools/list alone: one warm-up, then the median of 10 (ms); the response size (bytes)
  4. per-call overhead for read calls: wire time of tools/call minus the server-reported
     structuredContent.duration_ms (conda_info x20, conda_env_list, conda_list, conda_config)
  5. mutating calls (write session, including each server's restart check): wire time,
     server-reported duration and the difference
  6. conda_cli_command ["env","list"]: one warm-up, then the median of 5 (when listed)
  7. server peak RSS: VmHWM from /proc/<pid>/status of the read session, read just
     before the session is closed

With --warm, it measures instead `ccm` cold against `ccm --warm` (same binary, same
target, alternating sessions; the warm session waits until its zygote is ready): wire time
of conda_list (the root prefix, --json), conda_env_list --json, conda_info --json and
conda_search against a local file:// channel the benchmark creates (private package cache),
median of WARM_REPS calls each, and the zygote's RSS and start time from capabilities.

Usage: python3 bench/run.py [--target fixture|real|both] [--runs N] [--out FILE.md]
                            [--reference-venv DIR] [--warm]
"""

import argparse
import hashlib
import json
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CCM = Path(os.environ.get("CCM_BENCH_BINARY") or REPO / "target" / "release" / "ccm")
PROTOCOL = "2025-06-18"
REQUEST_TIMEOUT = 120.0
REFERENCE_SPEC = "conda-cli-mcp==0.2.0"
DEFAULT_REAL_CONDA = "/work/conda-real/plugins/bin/conda"
READ_CALLS = [  # (label, tool, arguments, repetitions)
    ("conda_info", "conda_info", {"json": True}, 20),
    ("conda_env_list", "conda_env_list", {"json": True}, 1),
    ("conda_list", "conda_list", {"name": "t1", "json": True}, 1),
    ("conda_config", "conda_config", {"show": ["channels", "solver"], "json": True}, 1),
]
WRITE_CALLS = {
    "real": [
        (
            "conda_create",
            "conda_create",
            {"name": "bench-tmp", "packages": [], "offline": True, "yes": True},
        ),
        ("conda_env_remove", "conda_env_remove", {"name": "bench-tmp", "yes": True}),
    ],
    "fixture": [("conda_install", "conda_install", {"packages": ["numpy"]})],
}
NOTES = []  # anything odd seen during the run, printed in the report


def note(text):
    if text not in NOTES:
        NOTES.append(text)
        print(f"  note: {text}", file=sys.stderr)


class Session:
    """One server process spoken to with newline-delimited JSON-RPC over its stdio."""

    def __init__(self, argv, cwd, log_path, env=None):
        self.argv, self.next_id, self.lines = argv, 1, queue.Queue()
        self.log = open(log_path, "wb")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=cwd,
            start_new_session=True,
            env=env,
        )
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line))
        self.lines.put((time.perf_counter(), None))

    def _send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def notify(self, method, params=None):
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method, params=None):
        """Send one request; return (message, wire seconds, response bytes, received at)."""
        rid, self.next_id = self.next_id, self.next_id + 1
        sent = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        deadline = sent + REQUEST_TIMEOUT
        while True:
            try:
                received, line = self.lines.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                raise RuntimeError(
                    f"{method}: no response within {REQUEST_TIMEOUT:.0f} s"
                ) from None
            if line is None:
                raise RuntimeError(f"{method}: server closed stdout (exit {self.proc.poll()})")
            message = json.loads(line)
            if "method" in message and "id" in message:  # a request from the server
                self._send(
                    {"jsonrpc": "2.0", "id": message["id"], "result": {}}
                    if message["method"] == "ping"
                    else {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "Method not found"},
                    }
                )
            elif message.get("id") == rid:
                return message, received - sent, len(line.rstrip(b"\n")), received

    def handshake(self):
        """initialize + initialized; returns (result, spawn->response seconds)."""
        message, _, _, received = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "ccm-bench", "version": "0"},
            },
        )
        if "result" not in message:
            raise RuntimeError(f"initialize failed: {message.get('error')}")
        self.notify("notifications/initialized")
        return message["result"], received - self.t0

    def call(self, tool, arguments):
        """tools/call; returns (wire ms, server-reported ms or None, result or error)."""
        message, wire, _, _ = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "error" in message:
            return wire * 1000, None, message["error"]
        result = message["result"]
        duration = (result.get("structuredContent") or {}).get("duration_ms")
        return wire * 1000, duration, result

    def server_pid(self):
        """The server's own pid; if the started process is a wrapper, its python child."""
        pid = self.proc.pid
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            return pid
        if exe == "ccm" or exe.startswith("python"):
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                if os.path.basename(os.readlink(f"/proc/{child}/exe")).startswith("python"):
                    return int(child)
        return pid

    def vmhwm_mib(self):
        for line in Path(f"/proc/{self.server_pid()}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return None

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:  # the session (process group) this harness created: server and any leftovers
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        self.proc.wait()
        self.log.close()


def stderr_tail(path, n=5):
    lines = Path(path).read_text(errors="replace").splitlines()
    return " | ".join(lines[-n:])


def median(values):
    return statistics.median(values) if values else None


# ---------------------------------------------------------------- measurements


def measure_startup(session, out):
    """1 + 2: spawn->initialize and spawn->tools/list; returns the listed tool names."""
    result, t_init = session.handshake()
    out["spawn_initialize_ms"] = t_init * 1000
    out["server_info"] = result.get("serverInfo")
    out["protocol"] = result.get("protocolVersion")
    message, _, size, received = session.request("tools/list")
    out["spawn_tools_list_ms"] = (received - session.t0) * 1000
    tools = message["result"]["tools"]
    if message["result"].get("nextCursor"):
        note("tools/list returned a nextCursor; only the first page is measured")
    out["tools_count"] = len(tools)
    out["tools_list_bytes"] = size
    return {t["name"]: t for t in tools}


def measure_tools_list(session, out):
    """3: tools/list alone, one warm-up then 10 timed."""
    session.request("tools/list")
    times = [session.request("tools/list")[1] * 1000 for _ in range(10)]
    out["tools_list_each_ms"] = times
    out["tools_list_ms"] = median(times)


def measure_read_calls(session, tools, out, name):
    """4: wire time minus the server-reported duration_ms, per read tool."""
    for label, tool, arguments, reps in READ_CALLS:
        if tool not in tools:
            note(f"{name}: {tool} is not listed; skipped")
            continue
        rows = []
        for _ in range(reps):
            wire, duration, result = session.call(tool, arguments)
            if duration is None:
                note(f"{name}: {tool} {json.dumps(arguments)} -> {str(result)[:200]}")
                break
            if result.get("isError"):
                note(
                    f"{name}: {tool} returned isError "
                    f"(exit {result['structuredContent'].get('exit_code')})"
                )
            rows.append({"wire_ms": wire, "server_ms": duration, "overhead_ms": wire - duration})
        out[f"call_{label}"] = rows
        if rows:
            out[f"{label}_wire_ms"] = median([r["wire_ms"] for r in rows])
            out[f"{label}_overhead_ms"] = median([r["overhead_ms"] for r in rows])


def measure_cli_command(session, tools, out, name, conda):
    """6: conda_cli_command ["env","list"]: one warm-up, then 5 timed calls."""
    if "conda_cli_command" not in tools:
        note(f"{name}: conda_cli_command is not listed; skipped")
        return
    arguments = {"command_path": ["env", "list"]}
    _, _, result = session.call("conda_cli_command", arguments)
    availability = (
        (result.get("structuredContent") or {}).get("availability")
        if isinstance(result, dict) and "content" in result
        else None
    )
    if availability == "not_generated":
        note(
            f"{name}: completion manifest not generated; "
            "ran `conda completion generate --no-repodata`"
        )
        subprocess.run(
            [conda, "completion", "generate", "--no-repodata"],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=600,
        )
        session.call("conda_cli_command", arguments)
    elif availability is None:
        note(f"{name}: conda_cli_command [env list] failed: {str(result)[:200]}; skipped")
        return
    elif availability != "available":
        note(f"{name}: conda_cli_command [env list] -> availability {availability}")
    times = [session.call("conda_cli_command", arguments)[0] for _ in range(5)]
    out["cli_command_each_ms"] = times
    out["cli_command_ms"] = median(times)
    out["cli_command_availability"] = availability


def measure_writes(session, tools, out, name, target):
    """5: mutating calls with --allow-write (each server's own restart check included)."""
    for label, tool, arguments in WRITE_CALLS[target]:
        if tool not in tools:
            note(f"{name}: {tool} is not listed; skipped")
            continue
        wire, duration, result = session.call(tool, arguments)
        if duration is None or result.get("isError"):
            note(f"{name}: {tool} {json.dumps(arguments)} failed: {str(result)[:300]}")
        if duration is not None:
            out[f"{label}_wire_ms"] = wire
            out[f"{label}_server_ms"] = duration
            out[f"{label}_overhead_ms"] = wire - duration


def run_server(server, target, workdir, run_index):
    """One read session and one write session of one server; returns its metrics."""
    out, name = {}, f"{server['name']} ({target['name']})"
    conda = target["conda"]
    for mode in ("read", "write"):
        argv = server["argv"] + (["--allow-write"] if mode == "write" else [])
        log = workdir / f"{target['name']}-{server['name']}-{mode}-{run_index}.log"
        session = Session(argv, cwd=workdir, log_path=log)
        try:
            if mode == "read":
                tools = measure_startup(session, out)
                out["tool_names"] = sorted(tools)
                measure_tools_list(session, out)
                measure_read_calls(session, tools, out, name)
                measure_cli_command(session, tools, out, name, conda)
                if server["name"] == "ccm":
                    read = session.request("resources/read", {"uri": "conda://capabilities"})[0]
                    caps = json.loads(read["result"]["contents"][0]["text"])
                    out["start_path"] = caps.get("startup", {}).get("path")
                out["vmhwm_mib"] = session.vmhwm_mib()
            else:
                session.handshake()
                tools = {t["name"] for t in session.request("tools/list")[0]["result"]["tools"]}
                measure_writes(session, tools, out, name, target["name"])
        except Exception as error:  # record and go on with the other server
            note(
                f"{name}, {mode} session, run {run_index + 1}: {error}; stderr: {stderr_tail(log)}"
            )
        finally:
            session.close()
    return out


def interpreter_of(conda):
    """The interpreter named by conda's entry script (its #! line)."""
    first = Path(conda).read_bytes()[:512].split(b"\n", 1)[0].decode(errors="replace")
    return first[2:].split()[0] if first.startswith("#!") else None


def measure_discovery(target, ccm, runs):
    """ccm discover vs one bare import of conda's parser under the same interpreter,
    alternating; medians in ms."""
    python = interpreter_of(target["conda"])
    if not python:
        note(f"{target['name']}: no interpreter in conda's #! line; discovery benchmark skipped")
        return None
    bare_argv = [
        python,
        "-c",
        "from conda.cli.conda_argparse import generate_parser; generate_parser()",
    ]
    ccm_argv = [str(ccm), "--conda-exe", target["conda"], "discover"]
    times = {"bare": [], "ccm": []}
    for _ in range(runs):
        for key, argv in (("bare", bare_argv), ("ccm", ccm_argv)):
            start = time.perf_counter()
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[key].append((time.perf_counter() - start) * 1000)
            if done.returncode:
                note(f"{target['name']}: `{' '.join(argv[:3])}` exited with {done.returncode}")
    return {"bare_ms": median(times["bare"]), "ccm_ms": median(times["ccm"]), "runs": runs}


# ---------------------------------------------------------------- warm vs cold

WARM_REPS = 7
# The goals of #29 (warm reads by default); conda_search has none of its own.
WARM_TARGETS = {
    "conda_list": 0.2,
    "conda_env_list": 0.25,
    "conda_config --show": 0.3,
    "conda_info": 0.6,
    "conda_search": 0.6,
}


def local_channel(tmp):
    """A file:// channel with one package, and a private package cache."""
    channel = tmp / "warm-channel"
    for subdir, packages in (
        (
            "noarch",
            {
                "demo-1.0-0.tar.bz2": {
                    "name": "demo",
                    "version": "1.0",
                    "build": "0",
                    "build_number": 0,
                    "depends": [],
                    "noarch": "generic",
                    "subdir": "noarch",
                    "md5": "0" * 32,
                    "size": 1,
                }
            },
        ),
        ("linux-64", {}),
    ):
        (channel / subdir).mkdir(parents=True, exist_ok=True)
        (channel / subdir / "repodata.json").write_text(
            json.dumps({"info": {"subdir": subdir}, "packages": packages, "packages.conda": {}})
        )
    (tmp / "warm-pkgs").mkdir(exist_ok=True)
    return f"file://{channel}"


def warm_calls(conda, channel):
    prefix = str(Path(conda).resolve().parent.parent)
    return [
        ("conda_list", {"prefix": prefix, "json": True}),
        ("conda_env_list", {"json": True}),
        ("conda_config --show", {"show": [], "json": True}),
        ("conda_info", {"json": True}),
        (
            "conda_search",
            {"match_spec": "demo", "channel": [channel], "override_channels": True, "json": True},
        ),
    ]


def run_warm_session(ccm, target, tmp, warm, run_index, channel):
    """One session, cold or warm: the median wire ms of each call (and the zygote)."""
    # Warm reads are the default; the cold session opts out.
    argv = [str(ccm), "--conda-exe", target["conda"]] + ([] if warm else ["--no-warm"])
    env = dict(os.environ, CONDA_PKGS_DIRS=str(tmp / "warm-pkgs"))
    log = tmp / f"{target['name']}-warm-{warm}-{run_index}.log"
    session, out = Session(argv, cwd=tmp, log_path=log, env=env), {}
    try:
        session.handshake()
        session.request("tools/list")
        deadline = time.perf_counter() + 300
        while warm:
            read = session.request("resources/read", {"uri": "conda://capabilities"})[0]
            state = json.loads(read["result"]["contents"][0]["text"]).get("warm") or {}
            if state.get("state") == "ready":
                break
            if state.get("state") == "unavailable" or time.perf_counter() > deadline:
                raise RuntimeError(f"no warm zygote: {state}")
            time.sleep(0.2)
        for tool, arguments in warm_calls(target["conda"], channel):
            times = []
            for _ in range(WARM_REPS):
                wire, duration, result = session.call(tool.split(" ")[0], arguments)
                if duration is None or result.get("isError"):
                    note(f"{target['name']} warm={warm}: {tool} failed: {str(result)[:200]}")
                times.append(wire)
            out[tool] = median(times)
        read = session.request("resources/read", {"uri": "conda://capabilities"})[0]
        out["warm"] = json.loads(read["result"]["contents"][0]["text"]).get("warm")
    except Exception as error:
        note(
            f"{target['name']} warm={warm}, run {run_index + 1}: {error}; "
            f"stderr: {stderr_tail(log)}"
        )
    finally:
        session.close()
    return out


def warm_report(target, runs):
    lines = [
        f"## Warm vs cold: {target['name']} ({target['conda_version']}, `{target['conda']}`)",
        "",
        f"Wire time of each call, median of {WARM_REPS} calls per session, median over "
        f"{len(runs)} alternating sessions (min–max).",
        "",
        "| call | cold (ms) | warm (ms) | warm/cold | target |",
        "|---|---|---|---|---|",
    ]
    for tool, goal in WARM_TARGETS.items():
        cold = [r["cold"][tool] for r in runs if tool in r["cold"]]
        warm = [r["warm"][tool] for r in runs if tool in r["warm"]]
        ratio = median(warm) / median(cold) if cold and warm else None
        verdict = "–" if ratio is None else f"≤ {goal} ({'met' if ratio <= goal else 'not met'})"
        lines.append(
            f"| {tool} | {cell(cold)} | {cell(warm)} | "
            f"{'–' if ratio is None else f'{ratio:.2f}'} | {verdict} |"
        )
    zygotes = [r["warm"].get("warm") or {} for r in runs]
    rss = [z["zygote_rss_bytes"] / 2**20 for z in zygotes if z.get("zygote_rss_bytes")]
    start = [z["zygote_start_ms"] for z in zygotes if z.get("zygote_start_ms")]
    cold_calls = sum(z.get("cold_calls", 0) for z in zygotes)
    lines += [
        "",
        f"Zygote RSS {cell(rss)} MiB, start {cell(start)} ms; calls that ran cold on "
        f"the warm server: {cold_calls}.",
        "",
    ]
    return "\n".join(lines)


def warm_main(args, tmp, ccm, info, started):
    out = [
        "# ccm benchmark: cold vs --warm",
        "",
        f"* date: {info[0]}",
        f"* machine: {info[1]}, {info[2]} CPUs, {info[3]} RAM, "
        f"load average at start {' '.join(info[4])}",
        "",
    ]
    channel = local_channel(tmp)
    for kind in ["fixture", "real"] if args.target == "both" else [args.target]:
        target = prepare_target(kind, tmp, None, ccm, reference=False)
        runs = []
        for i in range(args.runs):
            print(f"[{kind}] warm run {i + 1}/{args.runs}", file=sys.stderr)
            runs.append(
                {
                    "cold": run_warm_session(ccm, target, tmp, False, i, channel),
                    "warm": run_warm_session(ccm, target, tmp, True, i, channel),
                }
            )
        out.append(warm_report(target, runs))
    out += [f"Wall time {time.perf_counter() - started:.0f} s.", "", "## Notes", ""]
    out += [f"* {n}" for n in NOTES or ["none"]]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- targets and servers


def sh(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def install_reference(venv):
    """Install conda-cli-mcp 0.2.0 from PyPI into venv; returns bin/ccm or None."""
    venv = Path(venv)
    if (venv / "bin" / "ccm").exists():
        return venv / "bin" / "ccm"
    print(f"installing {REFERENCE_SPEC} into {venv} ...", file=sys.stderr)
    if sh([sys.executable, "-m", "venv", str(venv)]).returncode:
        note(f"could not create a venv at {venv}; reference side skipped")
        return None
    pip, wheels = str(venv / "bin" / "pip"), venv / "wheels"
    got = sh([pip, "download", "--no-deps", "-q", REFERENCE_SPEC, "-d", str(wheels)], timeout=600)
    if got.returncode:
        note(f"PyPI unreachable ({got.stderr.strip()[-200:]}); reference side skipped")
        return None
    wheel = next(wheels.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    requires = [r for r in requires if ";" not in r or "extra ==" not in r]

    def is_conda(r):
        return re.match(r"[A-Za-z0-9._-]*", r).group().lower() == "conda"

    if any(map(is_conda, requires)):  # PyPI's `conda` is ancient and unrelated: never pull it
        steps = [
            [pip, "install", "-q", "--no-deps", str(wheel)],
            [pip, "install", "-q", *[r for r in requires if not is_conda(r)]],
        ]
    else:
        steps = [[pip, "install", "-q", str(wheel)]]
    for step in steps:
        done = sh(step, timeout=900)
        if done.returncode:
            note(
                f"pip failed ({' '.join(step[1:3])}): {done.stderr.strip()[-300:]}; "
                "reference side skipped"
            )
            return None
    return venv / "bin" / "ccm"


def reference_versions(ccm_script):
    """conda-cli-mcp and mcp versions of the interpreter behind a reference ccm script."""
    python = Path(ccm_script).read_text().splitlines()[0][2:].strip()
    code = "import importlib.metadata as m; print(m.version('conda-cli-mcp'), m.version('mcp'))"
    got = sh([python, "-c", code]).stdout.split()
    return f"conda-cli-mcp {got[0]}, mcp {got[1]}" if len(got) == 2 else "unknown"


def prepare_target(kind, tmp, reference_venv, ccm, reference=True):
    """Returns {name, conda, servers: [...]} for a target."""
    if kind == "fixture":
        got = sh(
            [sys.executable, str(REPO / "tests/fixtures/build_fixture.py"), str(tmp / "fixture")]
        )
        if got.returncode:
            raise SystemExit(f"fixture build failed: {got.stderr}")
        conda = got.stdout.strip()
        reference = reference and install_reference(reference_venv or tmp / "reference-venv")
    else:
        conda = os.environ.get("CCM_TEST_CONDA", DEFAULT_REAL_CONDA)
        if not os.access(conda, os.X_OK):
            raise SystemExit(f"real conda not found at {conda} (set CCM_TEST_CONDA)")
        beside = Path(conda).resolve().parent / "ccm"
        if reference:
            reference = (
                beside
                if beside.exists()
                else install_reference(reference_venv or tmp / "reference-venv")
            )
        if reference:  # leftovers of an interrupted run would make conda_create fail
            sh([conda, "env", "remove", "-n", "bench-tmp", "-y"], cwd=tmp)
    servers = [{"name": "ccm", "argv": [str(ccm), "--conda-exe", conda]}]
    if reference:
        servers.append(
            {
                "name": "reference",
                "argv": [str(reference), "--conda-exe", conda],
                "version": reference_versions(reference),
            }
        )
    return {
        "name": kind,
        "conda": conda,
        "servers": servers,
        "conda_version": sh([conda, "--version"]).stdout.strip(),
    }


# ---------------------------------------------------------------- report

METRICS = [  # (key, label)
    ("spawn_initialize_ms", "spawn → initialize response (ms)"),
    ("spawn_tools_list_ms", "spawn → tools/list response (ms)"),
    ("tools_list_ms", "tools/list alone, median of 10 (ms)"),
    ("tools_list_bytes", "tools/list response size (bytes)"),
    ("tools_count", "tools listed"),
    ("conda_info_wire_ms", "conda_info {json} wire, median of 20 (ms)"),
    ("conda_info_overhead_ms", "conda_info {json} overhead, median of 20 (ms)"),
    ("conda_env_list_overhead_ms", "conda_env_list {json} overhead (ms)"),
    ("conda_list_overhead_ms", "conda_list {name: t1, json} overhead (ms)"),
    ("conda_config_overhead_ms", "conda_config {show: [channels, solver], json} overhead (ms)"),
    ("conda_create_wire_ms", "write: conda_create bench-tmp wire (ms)"),
    ("conda_create_server_ms", "write: conda_create bench-tmp server-reported (ms)"),
    ("conda_create_overhead_ms", "write: conda_create bench-tmp difference (ms)"),
    ("conda_env_remove_wire_ms", "write: conda_env_remove bench-tmp wire (ms)"),
    ("conda_env_remove_server_ms", "write: conda_env_remove bench-tmp server-reported (ms)"),
    ("conda_env_remove_overhead_ms", "write: conda_env_remove bench-tmp difference (ms)"),
    ("conda_install_wire_ms", "write: conda_install [numpy] wire (ms)"),
    ("conda_install_server_ms", "write: conda_install [numpy] server-reported (ms)"),
    ("conda_install_overhead_ms", "write: conda_install [numpy] difference (ms)"),
    ("cli_command_ms", "conda_cli_command [env, list], median of 5 (ms)"),
    ("vmhwm_mib", "server peak RSS, VmHWM (MiB)"),
]


def cell(values):
    if not values:
        return "–"
    fmt = (
        (lambda v: f"{v:,.0f}")
        if all(float(v).is_integer() for v in values)
        else (lambda v: f"{v:,.1f}")
    )
    med = median(values)
    return (
        fmt(med)
        if len(values) == 1 or min(values) == max(values)
        else f"{fmt(med)} ({fmt(min(values))}–{fmt(max(values))})"
    )


def target_table(target, runs):
    per = {s["name"]: [r[s["name"]] for r in runs] for s in target["servers"]}
    lines = [
        "| metric | ccm median | reference median | ratio (ccm/reference) |",
        "|---|---|---|---|",
    ]
    for key, label in METRICS:
        values = {n: [r[key] for r in rs if r.get(key) is not None] for n, rs in per.items()}
        if not any(values.values()):
            continue
        a, b = values.get("ccm", []), values.get("reference", [])
        ratio = f"{median(a) / median(b):.3g}" if a and b and median(b) else "–"
        lines.append(f"| {label} | {cell(a)} | {cell(b)} | {ratio} |")
    return "\n".join(lines)


def machine():
    mem = next(
        line.split()[1]
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return (
        sh(["date", "-u"]).stdout.strip(),
        sh(["uname", "-srm"]).stdout.strip(),
        sh(["nproc"]).stdout.strip(),
        f"{int(mem) / 1024 / 1024:.1f} GiB",
        Path("/proc/loadavg").read_text().split()[:3],
    )


def report(targets, results, args, elapsed, info, sha, build):
    date, uname, nproc, mem, load = info
    out = [
        "# ccm benchmark: ccm vs the reference server (conda-cli-mcp 0.2.0)",
        "",
        f"* date: {date}",
        f"* machine: {uname}, {nproc} CPUs, {mem} RAM, load average at start {' '.join(load)}",
        f"* ccm: {build} (sha256 {sha[:16]}…; copied from `{CCM}` to the temp dir at start, "
        "so a rebuild during the run cannot change it)",
        f"* runs: {args.runs} per target, alternating ccm / reference; wall time {elapsed:.0f} s",
        "* client: this harness's raw JSON-RPC stdio driver (protocolVersion 2025-06-18), "
        "the same for both",
        "* cells: median over runs (min–max over runs); a run's value for a repeated call is the "
        "median of its calls; overhead = wire time − server-reported `duration_ms`",
        "",
    ]
    for target in targets:
        out += [f"## Target: {target['name']} ({target['conda_version']}, `{target['conda']}`)", ""]
        for s in target["servers"]:
            extra = f" ({s['version']})" if s.get("version") else ""
            out.append(
                f"* {s['name']}{extra}: `{' '.join(s['argv'])}` "
                "(write session: add `--allow-write`)"
            )
        if len(target["servers"]) == 1:
            out.append("* reference: not run (see notes)")
        out += ["", target_table(target, results[target["name"]]), ""]
        paths = sorted(
            {r["ccm"].get("start_path") or "?" for r in results[target["name"]] if "ccm" in r}
        )
        out += [
            f"ccm started from: {', '.join(paths)} "
            "(`snapshot` = tools served from a baked snapshot "
            "while live discovery confirms; `live` = tools after live discovery).",
            "",
        ]
        d = target.get("discovery")
        if d:
            out += [
                f"Discovery, median of {d['runs']} alternating runs: "
                f"`ccm discover` {d['ccm_ms']:.0f} ms, "
                f"one bare `generate_parser()` under the same interpreter {d['bare_ms']:.0f} ms, "
                f"ratio {d['ccm_ms'] / d['bare_ms']:.2f}.",
                "",
            ]
        names = {
            s["name"]: set(results[target["name"]][0][s["name"]].get("tool_names", []))
            for s in target["servers"]
        }
        if len(names) == 2 and names["ccm"] != names["reference"]:
            ccm_only = ", ".join(sorted(names["ccm"] - names["reference"])) or "none"
            reference_only = ", ".join(sorted(names["reference"] - names["ccm"])) or "none"
            out += [
                f"Tools only ccm lists: {ccm_only}.",
                f"Tools only the reference lists: {reference_only}.",
                "",
            ]
    out += ["## Notes", ""] + [f"* {n}" for n in NOTES or ["none"]]
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", choices=["fixture", "real", "both"], default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--out", help="write the Markdown report here (raw numbers: same name, .json)"
    )
    parser.add_argument(
        "--reference-venv", help="venv for the reference server (created if missing, kept)"
    )
    parser.add_argument(
        "--warm", action="store_true", help="measure ccm cold vs ccm --warm instead"
    )
    args = parser.parse_args()
    if not CCM.exists():
        raise SystemExit(f"{CCM} does not exist: run `cargo build --release` in {REPO} first")
    info, started = machine(), time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ccm-bench-"))
    ccm = tmp / "ccm"
    shutil.copy2(CCM, ccm)
    sha = hashlib.sha256(ccm.read_bytes()).hexdigest()
    git = (
        sh(["git", "-C", str(REPO), "describe", "--always", "--dirty"]).stdout.strip() or "unknown"
    )
    build = (
        f"{sh([str(ccm), '--version']).stdout.strip()}, tree {git}, binary modified "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(CCM.stat().st_mtime))}"
    )
    targets, results = [], {}
    if args.warm:
        try:
            text = warm_main(args, tmp, ccm, info, started)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(text)
        if args.out:
            Path(args.out).write_text(text)
        return
    try:
        for kind in ["fixture", "real"] if args.target == "both" else [args.target]:
            target = prepare_target(kind, tmp, args.reference_venv, ccm)
            targets.append(target)
            results[kind] = []
            target["discovery"] = measure_discovery(target, ccm, max(5, args.runs * 2))
            for i in range(args.runs):
                run = {}
                for server in target["servers"]:  # A B A B ...
                    print(f"[{kind}] run {i + 1}/{args.runs}: {server['name']}", file=sys.stderr)
                    run[server["name"]] = run_server(server, target, tmp, i)
                results[kind].append(run)
        text = report(targets, results, args, time.perf_counter() - started, info, sha, build)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        raw = {
            "machine": info,
            "runs": args.runs,
            "notes": NOTES,
            "ccm_sha256": sha,
            "targets": [
                {k: t.get(k) for k in ("name", "conda", "conda_version", "servers", "discovery")}
                for t in targets
            ],
            "results": results,
        }
        Path(args.out).with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")


if __name__ == "__main__":
    main()
