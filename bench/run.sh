#!/usr/bin/env bash
# Runs the benchmarks against the release build and prints the Markdown tables that go into
# docs/BENCHMARKS.md (raw numbers in build/release/bench-*.json).
#   bench/run.sh [runtime|daemon|snapshot|workspace|egress|intercept|broker|all]   (default: all)
#   RUNS  cold `abox run` repetitions (default 15)
# Uses the image of $ABOX_HOME (default ~/.local/share/abox); the daemon bench runs its own
# aboxd in a private home whose images/ links there, and removes everything it created; so does
# the snapshot bench (golden templates, checkpoints, restore, fork: issue 13). The intercept
# bench (TLS interception for secrets, issue 15) and the broker bench (the model broker, issue
# 16) run in process: no image, no VM.
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
case "$which" in
  runtime | daemon | snapshot | workspace | egress | intercept | broker | all) ;;
  *)
    echo "usage: bench/run.sh [runtime|daemon|snapshot|workspace|egress|intercept|broker|all]" >&2
    exit 2
    ;;
esac
preset=release
bin="build/$preset/bin"
targets=()
if [[ "$which" != intercept && "$which" != broker ]]; then
  targets+=(abox abox-shim abox-guest)
fi
case "$which" in
  runtime) targets+=(runtime_bench) ;;
  daemon) targets+=(aboxd abox-mcp daemon_bench) ;;
  snapshot) targets+=(aboxd snapshot_bench) ;;
  workspace) targets+=(workspace_bench) ;;
  egress) targets+=(egress_bench) ;;
  intercept) targets+=(intercept_bench) ;;
  broker) targets+=(broker_bench) ;;
  all)
    targets+=(runtime_bench aboxd abox-mcp daemon_bench snapshot_bench workspace_bench egress_bench
      intercept_bench broker_bench)
    ;;
esac
cmake --build --preset "$preset" --target "${targets[@]}" >/dev/null
if [[ "$which" == intercept || "$which" == broker ]]; then
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) cores"
else
  "$bin/abox" image build >/dev/null
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) cores, $(qemu-system-x86_64 --version | head -1)"
fi
if [[ "$which" == runtime || "$which" == all ]]; then
  "$bin/runtime_bench" --runs "${RUNS:-15}" --abox "$bin/abox" \
    --json "build/$preset/bench-runtime.json"
fi
if [[ "$which" == daemon || "$which" == all ]]; then
  "$bin/daemon_bench" --aboxd "$bin/aboxd" --abox "$bin/abox" \
    --json "build/$preset/bench-daemon.json"
fi
if [[ "$which" == snapshot || "$which" == all ]]; then
  "$bin/snapshot_bench" --aboxd "$bin/aboxd" --json "build/$preset/bench-snapshot.json"
fi
if [[ "$which" == workspace || "$which" == all ]]; then
  "$bin/workspace_bench" --runs "${RUNS:-15}" --json "build/$preset/bench-workspace.json"
fi
if [[ "$which" == egress || "$which" == all ]]; then
  "$bin/egress_bench" --runs "${RUNS:-15}"
fi
if [[ "$which" == intercept || "$which" == all ]]; then
  "$bin/intercept_bench" --json "build/$preset/bench-intercept.json"
fi
if [[ "$which" == broker || "$which" == all ]]; then
  "$bin/broker_bench" --json "build/$preset/bench-broker.json"
fi
