#!/usr/bin/env bash
# What QEMU's jail (decision 0021) costs: cold create (a kernel boot), golden-restore create and
# the exec round trip with the jail on, against ABOX_JAIL=off (no namespaces, no new root, one
# shared uid), in one run, interleaved: each round restarts aboxd once per mode. Creates are
# `abox create [--cold]` through aboxd with no warm pool, timed until the id is printed; the
# exec round trip is the median of 10 `abox exec ID -- true` on one sandbox of that aboxd.
#
# Usage: bench/jail_cost.sh [ROUNDS]   (ABOX_BIN: the abox to run; IMAGES_HOME: the $ABOX_HOME
# whose images/ to use, default ~/.cache/abox/test-home; IMAGE: default "default")
set -euo pipefail
rounds=${1:-3}
abox=${ABOX_BIN:-build/release/bin/abox}
images_home=${IMAGES_HOME:-$HOME/.cache/abox/test-home}
image=${IMAGE:-default}
source "$(dirname "$0")/lib.sh"
bench_home jail

daemon() {  # on | off
  "$abox" daemon stop >/dev/null 2>&1 || true
  ABOX_JAIL=$1 "$abox" daemon start --pool 0 >/dev/null
}
exec_rtt() {  # prints the median ms of 10 `abox exec -- true`
  local id t0 samples=""
  id=$("$abox" create --image "$image")
  "$abox" exec "$id" -- true
  for ((k = 0; k < 10; k++)); do
    t0=$(ms)
    "$abox" exec "$id" -- true
    samples+="$(( $(ms) - t0 ))"$'\n'
  done
  "$abox" rm -f "$id" >/dev/null
  median <<<"$samples"
}

daemon on
create "$image" >/dev/null  # makes the golden template both modes restore from
declare -A cold restore rtt
for ((i = 0; i < rounds; i++)); do
  for mode in on off; do
    daemon "$mode"
    cold[$mode]+="$(create "$image" --cold) "
    restore[$mode]+="$(create "$image") "
    rtt[$mode]+="$(exec_rtt) "
  done
done
printf '%-5s %-12s %-12s %-10s %s\n' jail "cold median" "restore med" "exec med" \
  "cold / restore / exec samples (ms)"
for mode in on off; do
  c=$(tr ' ' '\n' <<<"${cold[$mode]}" | grep . | median)
  r=$(tr ' ' '\n' <<<"${restore[$mode]}" | grep . | median)
  e=$(tr ' ' '\n' <<<"${rtt[$mode]}" | grep . | median)
  printf '%-5s %-12s %-12s %-10s %s / %s / %s\n' "$mode" "$c ms" "$r ms" "$e ms" \
    "${cold[$mode]}" "${restore[$mode]}" "${rtt[$mode]}"
done
