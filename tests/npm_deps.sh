# Sourced by the Node test wrappers (tests/mcp, tests/mcp_conformance, tests/agents) from
# their own folder: fails, never skips, without node and npm or with a Node older than the
# test's minimum, and installs the pinned packages (package-lock.json) when one of the given
# paths is missing, under a lock so that tests started at once (ctest -j) install once.
#   npm_deps TEST_NAME MIN_NODE_MAJOR PATH...
npm_deps() {
  local name="$1" min="$2"
  shift 2
  local tool
  for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
      echo "$name: '$tool' is missing: install Node.js >= $min with npm" \
           "(scripts/install-deps.sh does)" >&2
      exit 1
    fi
  done
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt "$min" ]; then
    echo "$name: Node.js $(node --version) is too old: this test needs >= $min" \
         "(Debian 12's nodejs is 18; see the README's Node.js note)" >&2
    exit 1
  fi
  local path missing=0
  for path in "$@"; do
    [ -e "$path" ] || missing=1
  done
  if [ "$missing" = 1 ]; then
    exec 9>.npm-ci.lock
    flock 9
    for path in "$@"; do
      if [ ! -e "$path" ]; then
        npm ci --no-audit --no-fund >&2
        break
      fi
    done
    exec 9>&-
  fi
}
