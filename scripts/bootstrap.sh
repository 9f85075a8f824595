#!/usr/bin/env bash
# One step from a fresh Debian 12 / Ubuntu machine to a usable abox: installs packages, builds
# the release preset and builds (or reuses) the default guest image.
#   ABOX_PRESET   CMake preset to build (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${ABOX_PRESET:-release}"

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
# The image build is cached by its inputs outside the checkout (~/.cache/abox), so this is a
# no-op or a few seconds after the first time.
"build/$preset/bin/abox" image build
