#!/usr/bin/env bash
# Cold create (kernel boot) and golden-restore create of the developer image ("default") against
# the minimal one, in one run, interleaved (issue 19). Each create is `abox create --image X
# [--cold]` through a fresh aboxd with no warm pool, timed on the wall clock until it printed
# the id (the sandbox is ready), then removed. The first restore create of each image makes its
# golden template and is reported apart.
#
# Usage: bench/image_creates.sh [ROUNDS]   (ABOX_BIN: the abox to run; IMAGES_HOME: the
# $ABOX_HOME whose images/ to use, default ~/.cache/abox/test-home; it needs "default" and
# "minimal": abox image build && abox image build --preset minimal)
set -euo pipefail
rounds=${1:-5}
abox=${ABOX_BIN:-build/release/bin/abox}
images_home=${IMAGES_HOME:-$HOME/.cache/abox/test-home}
source "$(dirname "$0")/lib.sh"
bench_home images
"$abox" daemon start --pool 0 >/dev/null

declare -A first cold restore
for image in minimal default; do
  first[$image]=$(create "$image")
done
for ((i = 0; i < rounds; i++)); do
  for image in minimal default; do
    cold[$image]+="$(create "$image" --cold) "
    restore[$image]+="$(create "$image") "
  done
done
printf '%-9s %-22s %-12s %-12s %s\n' image "first (makes template)" "cold median" \
  "restore med" "cold / restore samples (ms)"
for image in minimal default; do
  c=$(tr ' ' '\n' <<<"${cold[$image]}" | grep . | median)
  r=$(tr ' ' '\n' <<<"${restore[$image]}" | grep . | median)
  printf '%-9s %-22s %-12s %-12s %s / %s\n' "$image" "${first[$image]} ms" "$c ms" "$r ms" \
    "${cold[$image]}" "${restore[$image]}"
done
