# Shared by the shell benchmarks: a private $ABOX_HOME that borrows an images/ dir, and timing.
# Source it after setting `abox` (the binary) and `images_home`.

# Makes $ABOX_HOME a fresh temp dir linking $images_home/images; removes it (and stops its aboxd)
# on exit.
bench_home() {
  home=$(mktemp -d "/tmp/abox-bench-$1.XXXXXX")
  export ABOX_HOME=$home
  ln -s "$images_home/images" "$home/images"
  trap '"$abox" daemon stop >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
}

ms() { echo $(( $(date +%s%N) / 1000000 )); }

# `abox create --image IMAGE FLAGS...` timed on the wall clock until it printed the id; the
# sandbox is removed after. Prints the ms.
create() {
  local image=$1; shift
  local t0 t1 id
  t0=$(ms)
  id=$("$abox" create --image "$image" "$@")
  t1=$(ms)
  "$abox" rm -f "$id" >/dev/null
  echo $((t1 - t0))
}

# The median of the numbers on stdin, one per line.
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }
