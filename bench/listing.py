#!/usr/bin/env python3
"""Measure what `tools/list` costs a client: bytes of the whole response, per tool and per
command group.

Starts a ccm binary over stdio with `--conda-exe CONDA` (plus any extra server flags),
sends `initialize` (protocolVersion 2025-06-18), `notifications/initialized` and
`tools/list`, follows `nextCursor` until the last page, and prints:

  * the total: bytes of every tools/list response line as received (compact JSON, the
    newline excluded), summed over pages;
  * per tool: bytes of its descriptor serialized as compact JSON (the form the server
    sends), and an estimated token count (bytes / 4, rounded up); of those, the
    model-visible bytes (the compact JSON of an object holding only its `name`,
    `description` and `inputSchema`: what clients show a model) and the rest (`title`,
    `outputSchema`, `annotations`, `_meta`: read by clients, not shown to the model);
  * per group: the tools summed by the first word of their command path (`_meta`
    `conda-cli-mcp/path`: `conda_env_*` -> `env`; a plugin's commands share its word,
    e.g. `workspace`, `pypi`); ccm's own tools (`conda_execute`, `conda_cli_command`)
    are `ccm`.

Usage:
  python3 bench/listing.py --conda-exe CONDA [--ccm BINARY] [--json] [--tools]
                           [-- EXTRA SERVER FLAGS...]

  --ccm     the server binary (default: target/release/ccm of this checkout)
  --json    print one JSON document instead of the text report
  --tools   also print every tool's bytes (text report)
  --floor   also print the floor: the same tools with every parameter description removed
            (names, types, bounds, groups, tool descriptions and output schemas kept) — the
            least any listing that keeps every option of every listed tool can cost


Example:
  python3 bench/listing.py --conda-exe /tmp/real-conda/bin/conda -- --allow-write --allow-exec

Python 3 standard library only.
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-06-18"


def tokens(n):
    """The stated estimator: bytes / 4, rounded up."""
    return math.ceil(n / 4)


class Session:
    def __init__(self, argv):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"server closed stdout while waiting for {method}")
            message = json.loads(line)
            if message.get("id") == rid and ("result" in message or "error" in message):
                if "error" in message:
                    raise SystemExit(f"{method}: {message['error'].get('message')}")
                return message["result"], len(line.rstrip(b"\r\n"))
            if "method" in message and "id" in message:  # a request from the server
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not supported"},
                    }
                )

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def group_of(tool):
    path = (tool.get("_meta") or {}).get("conda-cli-mcp/path")
    return path[0] if path else "ccm"


def measure(binary, conda, extra):
    session = Session([binary, "--conda-exe", conda, *extra])
    try:
        session.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "listing.py", "version": "1"},
            },
        )
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools, total, pages, cursor = [], 0, 0, None
        while True:
            params = {"cursor": cursor} if cursor else {}
            result, size = session.request("tools/list", params)
            total += size
            pages += 1
            tools.extend(result.get("tools", []))
            cursor = result.get("nextCursor")
            if not cursor:
                break
    finally:
        session.close()
    rows = []
    for tool in tools:
        size = compact(tool)
        model = model_bytes(tool)
        rows.append(
            {
                "name": tool["name"],
                "group": group_of(tool),
                "bytes": size,
                "tokens": tokens(size),
                "model_bytes": model,
                "model_tokens": tokens(model),
                "other_bytes": size - model,
            }
        )
    groups = {}
    for row in rows:
        g = groups.setdefault(row["group"], {"tools": 0, "bytes": 0, "model_bytes": 0})
        g["tools"] += 1
        g["bytes"] += row["bytes"]
        g["model_bytes"] += row["model_bytes"]
    for g in groups.values():
        g["tokens"] = tokens(g["bytes"])
    return {
        "binary": str(binary),
        "conda": conda,
        "flags": extra,
        "pages": pages,
        "tools": len(rows),
        "bytes": total,
        "tokens": tokens(total),
        "groups": groups,
        "per_tool": rows,
        "tool_bytes": sum(row["bytes"] for row in rows),
        "model_bytes": sum(row["model_bytes"] for row in rows),
        "model_tokens": tokens(sum(row["model_bytes"] for row in rows)),
        "other_bytes": sum(row["other_bytes"] for row in rows),
        "largest_model_bytes": max((row["model_bytes"] for row in rows), default=0),
        "floor_bytes": floor_bytes(tools),
        "model_floor_bytes": sum(model_bytes(t) for t in without_parameter_descriptions(tools)),
    }


MODEL_KEYS = ("name", "description", "inputSchema")


def compact(value):
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def model_bytes(tool):
    """What clients show the model of one tool: the compact JSON of an object holding only
    its name, description and inputSchema (in the descriptor's order)."""
    return compact({key: value for key, value in tool.items() if key in MODEL_KEYS})


def without_parameter_descriptions(tools):
    out = []
    for tool in tools:
        tool = json.loads(json.dumps(tool))
        for schema in (tool.get("inputSchema") or {}).get("properties", {}).values():
            schema.pop("description", None)
        out.append(tool)
    return out


def floor_bytes(tools):
    """The listing's bytes with every parameter description removed (compact JSON, one
    newline-free line per tool as in a response's array: the array's own brackets and
    commas are not counted)."""
    return sum(compact(tool) for tool in without_parameter_descriptions(tools))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ccm", default=str(REPO / "target" / "release" / "ccm"))
    parser.add_argument("--conda-exe", required=True)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tools", action="store_true")
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("extra", nargs="*", help="extra server flags (after --)")
    args = parser.parse_args()
    report = measure(args.ccm, args.conda_exe, args.extra)
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return
    print(f"{report['conda']} {' '.join(report['flags'])}".rstrip())
    print(
        f"  tools/list: {report['tools']} tools, {report['pages']} page(s), "
        f"{report['bytes']} bytes, ~{report['tokens']} tokens (bytes / 4)"
    )
    print(
        f"  model-visible (name + description + inputSchema): {report['model_bytes']} bytes, "
        f"~{report['model_tokens']} tokens; largest tool {report['largest_model_bytes']} bytes; "
        f"the rest (title, outputSchema, annotations, _meta): {report['other_bytes']} bytes"
    )
    if args.floor:
        print(
            f"  descriptors: {report['tool_bytes']} bytes; without any parameter description "
            f"(the floor): {report['floor_bytes']} bytes, {report['model_floor_bytes']} "
            f"model-visible"
        )
    width = max([len(g) for g in report["groups"]] + [5])
    print(f"  {'group':{width}}  tools    bytes    model  tokens")
    for name, g in sorted(report["groups"].items(), key=lambda kv: -kv[1]["bytes"]):
        print(
            f"  {name:{width}}  {g['tools']:5}  {g['bytes']:7}  {g['model_bytes']:7}  "
            f"{g['tokens']:6}"
        )
    if args.tools:
        print(f"    {'tool':48}  {'bytes':>7}  {'model':>7}  {'rest':>6}")
        for row in sorted(report["per_tool"], key=lambda r: -r["model_bytes"]):
            print(
                f"    {row['name']:48}  {row['bytes']:7}  {row['model_bytes']:7}  "
                f"{row['other_bytes']:6}"
            )


if __name__ == "__main__":
    main()
