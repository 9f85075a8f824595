#!/usr/bin/env bash
# CTest wrapper: the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# package-lock.json) against `abox-mcp --http`. Runs the server scenarios that apply to abox-mcp
# (README.md says which and why the others do not) and fails when any check fails. Installs the
# pinned package when node_modules is missing. Fails, never skips, when node or npm is missing.
#   run.sh ABOX_MCP
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -ne 1 ]; then
  echo "usage: run.sh ABOX_MCP" >&2
  exit 2
fi
ABOX_MCP="$1"
. ../npm_deps.sh
npm_deps mcp_conformance_test 20 node_modules/@modelcontextprotocol/conformance

SCENARIOS=(server-initialize ping tools-list logging-set-level dns-rebinding-protection)

work="$(mktemp -d /tmp/abox-mcp-conformance-XXXXXX)"
mcp_pid=""
cleanup() {
  if [ -n "$mcp_pid" ]; then
    kill "$mcp_pid" 2>/dev/null || true
    wait "$mcp_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# These scenarios never call aboxd: a socket nobody serves, a private ABOX_HOME, and no
# autostart make sure of it (a tool call would fail instead of starting a daemon).
# --no-auth: the suite's client cannot send an Authorization header (test-only flag).
ABOX_HOME="$work/home" ABOX_NO_AUTOSTART=1 \
  "$ABOX_MCP" --http 127.0.0.1:0 --no-auth --socket "$work/no-aboxd.sock" \
  2>"$work/abox-mcp.log" &
mcp_pid=$!

url=""
for _ in $(seq 1 100); do
  url="$(sed -n 's|^abox-mcp .*: listening on \(http://127\.0\.0\.1:[0-9]*/mcp\) .*|\1|p' \
    "$work/abox-mcp.log")"
  if [ -n "$url" ]; then
    break
  fi
  if ! kill -0 "$mcp_pid" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "mcp_conformance_test: abox-mcp did not start listening:" >&2
  cat "$work/abox-mcp.log" >&2
  exit 1
fi
echo "abox-mcp serves $url"

failed=()
for scenario in "${SCENARIOS[@]}"; do
  echo "=== $scenario"
  if ! npx --no-install conformance server --url "$url" --scenario "$scenario" \
      >"$work/$scenario.out" 2>&1; then
    failed+=("$scenario")
  fi
  cat "$work/$scenario.out"
  # Warnings count as failures here: every check of these scenarios must pass.
  if ! grep -Eq '^Passed: ([0-9]+)/\1, 0 failed, 0 warnings$' "$work/$scenario.out"; then
    [[ " ${failed[*]} " == *" $scenario "* ]] || failed+=("$scenario")
  fi
done
if ! kill -0 "$mcp_pid" 2>/dev/null; then
  echo "mcp_conformance_test: abox-mcp exited during the run:" >&2
  cat "$work/abox-mcp.log" >&2
  exit 1
fi
if [ ${#failed[@]} -ne 0 ]; then
  echo "mcp_conformance_test: FAILED: ${failed[*]}" >&2
  echo "--- abox-mcp stderr" >&2
  cat "$work/abox-mcp.log" >&2
  exit 1
fi
echo "mcp_conformance_test: all ${#SCENARIOS[@]} scenarios passed"
