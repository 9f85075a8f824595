#!/usr/bin/env bash
# Old aboxd + abox against new, side by side in one run (alternating old, new, old, new ...
# so that the machine's drift falls on both): GET /v1/sandboxes throughput, an exec of `true`
# through aboxd, and the `abox exec ID -- true` CLI round trip, each by bench/daemon_bench.
#   bench/compare_daemons.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]   (default 2 rounds)
# Each BIN_DIR holds aboxd, abox, abox-shim and abox-guest (a build/release/bin). The bench
# binary is NEW_BIN_DIR's daemon_bench. Uses the image of $ABOX_HOME.
set -euo pipefail
old="${1:?usage: bench/compare_daemons.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]}"
new="${2:?usage: bench/compare_daemons.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]}"
rounds="${3:-2}"
out=$(mktemp -d "${TMPDIR:-/tmp}/abox-compare.XXXXXX")
flags=(--exec-pairs "${EXEC_PAIRS:-100}" --cli-runs "${CLI_RUNS:-20}" --list-requests 20000
       --list-seconds 5)
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), $(nproc) cores; raw numbers in $out"
for r in $(seq 1 "$rounds"); do
  for which in old new; do
    dir=$old
    [ "$which" = new ] && dir=$new
    "$new/daemon_bench" --aboxd "$dir/aboxd" --abox "$dir/abox" "${flags[@]}" \
      --json "$out/$which-$r.json" >"$out/$which-$r.md" 2>"$out/$which-$r.log"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = [
    ("GET /v1/sandboxes, 1 connection (req/s)", lambda j: j["list_sequential"]["requests_per_second"], "%.0f"),
    ("GET /v1/sandboxes, 4 connections (req/s)", lambda j: j["list_concurrent"]["requests_per_second"], "%.0f"),
    ("aboxd CPU per list request (µs)", lambda j: j["list_sequential"]["aboxd_cpu_us_per_request"], "%.0f"),
    ("exec `true` through aboxd, median (ms)", lambda j: j["exec"]["daemon_ms"]["median"], "%.2f"),
    ("of which POST .../execs, median (ms)", lambda j: j["exec"]["daemon_post_ms"]["median"], "%.2f"),
    ("daemon − direct, paired median (ms)", lambda j: j["exec"]["paired_difference_ms"]["median"], "%.2f"),
    ("`abox exec ID -- true` wall, median (ms)", lambda j: j["cli_exec"]["wall_ms"]["median"], "%.1f"),
    ("3 sandboxes created and ready (ms)", lambda j: j["daemon_boot_3_ms"], "%.0f"),
]
cols = [(w, r) for r in range(1, rounds + 1) for w in ("old", "new")]
data = {c: json.load(open(f"{out}/{c[0]}-{c[1]}.json")) for c in cols}
print("| measurement | " + " | ".join(f"{w} {r}" for w, r in cols) + " |")
print("|---|" + "---|" * len(cols))
for name, get, fmt in rows:
    cells = []
    for c in cols:
        try:
            cells.append(fmt % get(data[c]))
        except (KeyError, TypeError):
            cells.append("–")
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
