#!/usr/bin/env bash
# One step from a fresh Debian 12 / Ubuntu machine to a usable abox: installs packages, builds
# what a user runs (abox, aboxd, abox-shim, abox-guest; not the tests and benchmarks, which
# scripts/test.sh builds) and builds (or reuses) the default guest image.
#   ABOX_PRESET   CMake configure preset to build in (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${ABOX_PRESET:-release}"

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target abox_programs
# The image build is cached by its inputs outside the checkout (~/.cache/abox), so this is a
# no-op or a few seconds after the first time.
"build/$preset/bin/abox" image build
