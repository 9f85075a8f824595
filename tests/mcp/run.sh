#!/usr/bin/env bash
# CTest wrapper: runs the SDK client test (abox_mcp.test.mjs) against ABOX_MCP and
# ABOXD_FAKE_VMM. Installs the pinned npm packages (package-lock.json) when node_modules is
# missing. Fails, never skips, when node or npm is missing.
#   run.sh ABOX_MCP ABOXD_FAKE_VMM
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -ne 2 ]; then
  echo "usage: run.sh ABOX_MCP ABOXD_FAKE_VMM" >&2
  exit 2
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "mcp_sdk_client_test: '$tool' is missing: install Node.js >= 18 with npm" \
         "(scripts/install-deps.sh does)" >&2
    exit 1
  fi
done
if [ ! -d node_modules/@modelcontextprotocol/sdk ]; then
  npm ci --no-audit --no-fund >&2
fi
export ABOX_MCP="$1" ABOXD_FAKE_VMM="$2"
exec node --test --test-concurrency=1 abox_mcp.test.mjs
