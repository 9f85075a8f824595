#!/usr/bin/env bash
# Runs the runtime benchmarks against the release build and prints the Markdown table that
# goes into docs/BENCHMARKS.md (raw numbers in build/release/bench-runtime.json).
#   RUNS  cold `abox run` repetitions (default 15)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=release
cmake --build --preset "$preset" --target abox abox-shim abox-guest runtime_bench >/dev/null
"build/$preset/bin/abox" image build >/dev/null
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) cores, $(qemu-system-x86_64 --version | head -1)"
"build/$preset/bin/runtime_bench" --runs "${RUNS:-15}" --abox "build/$preset/bin/abox" \
  --json "build/$preset/bench-runtime.json"
