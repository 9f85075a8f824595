#!/usr/bin/env bash
# CTest wrapper: runs the SDK client test (abox_mcp.test.mjs) against ABOX_MCP and
# ABOXD_FAKE_VMM. Installs the pinned npm packages (package-lock.json) when node_modules is
# missing (../npm_deps.sh). Fails, never skips, without node and npm or with Node < 18.
#   run.sh ABOX_MCP ABOXD_FAKE_VMM
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -ne 2 ]; then
  echo "usage: run.sh ABOX_MCP ABOXD_FAKE_VMM" >&2
  exit 2
fi
. ../npm_deps.sh
npm_deps mcp_sdk_client_test 18 node_modules/@modelcontextprotocol/sdk
export ABOX_MCP="$1" ABOXD_FAKE_VMM="$2"
exec node --test --test-concurrency=1 abox_mcp.test.mjs
