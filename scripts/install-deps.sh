#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages abox needs to build, run and test. Uses sudo when not
# root. Safe to re-run: apt skips what is installed.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ clang lld ccache pkg-config
  libabsl-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libarchive-dev liblz4-dev libzstd-dev nettle-dev libssl-dev libsqlite3-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # secrets: the desktop keyring store (src/secrets/keyring_store.cc) talks to the Secret Service
  # through libsecret; without a running keyring abox falls back to a 0600 file
  libsecret-1-dev
  # abox mcp install: checks (never writes) Codex's config.toml (header-only use, no exceptions)
  libtomlplusplus-dev
  # tests only: the OpenAPI contract checker (src/api/openapi_check)
  libyaml-cpp-dev
  # fuzzing and sanitizers (clang's runtime)
  libclang-rt-14-dev
  # tests only: the hygiene checks (scripts/checks: clang-format; layering and claims in python3)
  clang-format
  # run: the VMM, disk overlays, and the image builder
  qemu-system-x86 qemu-utils mmdebstrap e2fsprogs kmod lz4 ca-certificates uidmap
  # run: diff rendering and three-way merges of workspace files (git diff, git merge-file)
  git
  # benchmarks only: the floor for workspace sync (rsync between two host directories)
  rsync
  # tests only: a real keyring round trip (src/secrets/keyring_store_test: a private bus and
  # a throwaway login keyring)
  dbus gnome-keyring
  # tests only: the loopback upstreams of the egress tests (openssl s_server, python3 http.server)
  openssl python3
)
# tests only: the MCP SDK client test (tests/mcp, Node >= 18), the MCP conformance suite and the
# agent CLI tests (tests/mcp_conformance, tests/agents: Node >= 20; Debian 12 has 18, see the
# README) run on Node.js with npm. Debian's nodejs and
# npm, unless a node is already installed (e.g. NodeSource's, whose nodejs package has npm
# built in and conflicts with Debian's npm).
if ! command -v node >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  SUDO=(sudo)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
