#!/usr/bin/env bash
# Runs every test: hygiene checks (layering, clang-format, and the claims of docs/security.md
# against the tests and doctor checks they cite, with that check's own tests), unit tests (release
# build), end-to-end tests that boot real microVMs, unit tests under ASan + UBSan (clang) and a
# short libFuzzer run of every fuzz target. Prints the wall time of every phase, one summary line
# per tier (`unit: N passed, M failed`) and a total at the end; exits non-zero if any phase failed.
#   ABOX_FUZZ_SECONDS  seconds per fuzz target (default: 30, 10 for the net parsers)
#   ABOX_TEST_JOBS     tests run side by side in each tier (default 2; e2e VMs included)
#   ABOX_TEST_HOME     where the test image lives (default ~/.cache/abox/test-home)
set -uo pipefail
cd "$(dirname "$0")/.."

jobs="${ABOX_TEST_JOBS:-2}"
start_all=$(date +%s)
phases=()   # "name seconds status"
tiers=()    # "tier: N passed, M failed"
failed=0
logdir=$(mktemp -d "${TMPDIR:-/tmp}/abox-test-logs.XXXXXX")

# phase NAME CMD...: runs CMD, records its wall time and whether it failed.
phase() {
  local name="$1"
  shift
  echo
  echo "== $name"
  local t0 rc
  t0=$(date +%s)
  "$@"
  rc=$?
  local dt=$(($(date +%s) - t0))
  local status=ok
  if [ "$rc" -ne 0 ]; then
    status="FAILED (exit $rc)"
    failed=1
  fi
  phases+=("$(printf '%-22s %6ss  %s' "$name" "$dt" "$status")")
  echo "== $name: ${dt}s, $status"
  return "$rc"
}

# tier NAME CTEST-ARGS...: a ctest run whose counts make the tier's summary line.
tier() {
  local name="$1"
  shift
  local log="$logdir/$name.log"
  ctest --output-on-failure --no-tests=error "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line total failures
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -n "$line" ]; then
    failures=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/')
    total=$(echo "$line" | sed -E 's/.*out of ([0-9]+).*/\1/')
    tiers+=("$name: $((total - failures)) passed, $failures failed")
  else
    tiers+=("$name: 0 passed, 1 failed (ctest ran no test)")
    rc=1
  fi
  return "$rc"
}

summary() {
  echo
  echo "== summary"
  printf '%s\n' "${phases[@]}"
  printf '%-22s %6ss\n' "total" "$(($(date +%s) - start_all))"
  if command -v ccache >/dev/null; then
    echo "ccache: $(ccache --print-stats 2>/dev/null | awk '
      $1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m+=$2}
      END{printf "%d hits, %d misses this run", h, m}')"
  fi
  echo
  # One line per tier, last, in the form CI reads.
  printf '%s\n' "${tiers[@]}"
}

build() { cmake --preset "$1" >/dev/null && cmake --build --preset "$1"; }

# Tests keep their image and sandboxes apart from the user's; the build cache is shared.
export ABOX_HOME="${ABOX_TEST_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/abox/test-home}"
mkdir -p "$ABOX_HOME"
# An aboxd the tests start keeps no warm pool unless the test asks (--pool N): on a 2-core
# runner idle pooled VMs would take CPU from the tests beside them.
export ABOX_POOL="${ABOX_POOL:-0}"
command -v ccache >/dev/null && ccache --zero-stats >/dev/null

phase deps scripts/install-deps.sh || { summary; exit 1; }
phase layering python3 scripts/checks/layering.py
phase claims python3 scripts/checks/claims.py
phase "claims self-test" python3 scripts/checks/claims_test.py
phase format scripts/checks/format.sh
phase "build release" build release || { summary; exit 1; }
phase image build/release/bin/abox image build || { summary; exit 1; }
phase unit tier unit --test-dir build/release -j "$jobs" -L '^unit$'
phase e2e tier e2e --test-dir build/release -j "$jobs" -L '^e2e$'
if phase "build sanitize" build sanitize; then
  phase "unit asan+ubsan" tier asan --test-dir build/sanitize -j "$jobs" -L '^unit$'
  phase fuzz tier fuzz --test-dir build/sanitize -j "$jobs" -L '^fuzz$'
fi
summary
rm -rf "$logdir"
exit "$failed"
