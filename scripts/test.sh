#!/usr/bin/env bash
# Runs every test: unit tests (release and ASan+UBSan builds), end-to-end tests that boot real
# microVMs, and a short libFuzzer run of every fuzz target.
#   ABOX_FUZZ_SECONDS  seconds per fuzz target (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests keep their image and sandboxes apart from the user's; the build cache is shared.
export ABOX_HOME="${ABOX_TEST_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abox/test-home}"
mkdir -p "$ABOX_HOME"
scripts/bootstrap.sh

echo "== unit + e2e tests (release)"
ctest --test-dir build/release --output-on-failure -j2 -L 'unit'
ctest --test-dir build/release --output-on-failure -L 'e2e'

echo "== unit tests (ASan + UBSan)"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --test-dir build/asan --output-on-failure -j2 -L unit

echo "== fuzz (libFuzzer, short run)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
ctest --test-dir build/fuzz --output-on-failure -L fuzz
