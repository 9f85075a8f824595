#!/usr/bin/env bash
# CTest wrapper: runs one agent CLI test (claude_code.test.mjs or codex.test.mjs) against the
# built abox and abox-mcp, on real VMs booted from the image in $ABOX_HOME (scripts/test.sh
# builds it). Installs the pinned CLIs (package-lock.json) when node_modules is missing. Fails,
# never skips, when node or npm is missing.
#   run.sh claude|codex ABOX ABOX_MCP
set -euo pipefail
if [ $# -ne 3 ] || { [ "$1" != claude ] && [ "$1" != codex ]; }; then
  echo "usage: run.sh claude|codex ABOX ABOX_MCP" >&2
  exit 2
fi
# Absolute before the cd, so that paths relative to the caller work too.
abox=$(realpath -e -- "$2")
abox_mcp=$(realpath -e -- "$3")
cd "$(dirname "$0")"
. ../npm_deps.sh
npm_deps "tests/agents ($1)" 20 node_modules/.bin/claude node_modules/.bin/codex
export ABOX_BIN="$abox" ABOX_MCP_BIN="$abox_mcp"
case "$1" in
  claude) exec node --test claude_code.test.mjs ;;
  codex) exec node --test codex.test.mjs ;;
esac
