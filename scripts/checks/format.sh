#!/usr/bin/env bash
# clang-format check: every tracked C/C++ file is formatted as .clang-format says. The tree is
# formatted with clang-format 14 (Debian 12's); another major version formats some constructs
# differently, so with one the check says so and is skipped rather than failing on noise.
#   scripts/checks/format.sh         check (exit 1 on a file that needs formatting)
#   scripts/checks/format.sh --fix   format those files in place
set -euo pipefail
cd "$(dirname "$0")/../.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "format: clang-format not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
major=$("$cf" --version | sed -nE 's/.*version ([0-9]+)\..*/\1/p')
if [ "$major" != "14" ]; then
  echo "format: skipped: $cf is version $major, the tree is formatted with 14"
  exit 0
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c')
if [ "${1:-}" = "--fix" ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
# One clang-format for the whole list; each file that needs a change is named in a warning.
mapfile -t bad < <("$cf" --dry-run -Werror "${files[@]}" 2>&1 |
  sed -nE 's/^([^:]+\.(cc|h|c)):[0-9]+:[0-9]+: (error|warning):.*/\1/p' | sort -u)
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'format: needs clang-format: %s\n' "${bad[@]}"
  echo "format: ${#bad[@]} of ${#files[@]} files; fix with scripts/checks/format.sh --fix"
  exit 1
fi
echo "format: ${#files[@]} files formatted"
