#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The tree as a packager meets it: a BSD-3-Clause LICENSE at the top, an
# SPDX line in the first three lines of every source, build and script
# file, and no merge-conflict marker left in any tracked file.
#   hygiene_check.sh SOURCE
set -euo pipefail
src=$1
cd "$src"
fail=0
grep -q '^BSD 3-Clause License' LICENSE 2>/dev/null ||
  { echo "hygiene: LICENSE is missing or not BSD-3-Clause" >&2; fail=1; }
# Tracked files where the tree is a git checkout, every file otherwise.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files)
else
  files=$(find . -type f ! -path './build*' ! -path './.git/*' | sed 's#^\./##')
fi
# A source file: C, headers, CMake, shell, Python, linker maps, templates,
# and the extension-less scripts (a #! line).
is_source() {
  case $1 in
    tests/fuzz/corpus/*) return 1 ;;
    *.c | *.h | *.cmake | *.in | *.map | *.sh | *.py | CMakeLists.txt | */CMakeLists.txt | docs/Doxyfile) return 0 ;;
    *.*) return 1 ;;
  esac
  [ -f "$1" ] && head -c2 "$1" | grep -q '^#!'
}
n=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  if is_source "$f"; then
    n=$((n + 1))
    head -n3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause' ||
      { echo "hygiene: $f has no SPDX-License-Identifier line in its first three lines" >&2; fail=1; }
  fi
  # A conflict marker is seven of <, = or > at the start of a line, the
  # outer two followed by a space or the line's end.
  if grep -nE '^(<<<<<<<|>>>>>>>)( |$)|^=======$' "$f" >/dev/null 2>&1; then
    grep -nE '^(<<<<<<<|>>>>>>>)( |$)|^=======$' "$f" | sed "s#^#hygiene: merge-conflict marker in $f:#" >&2
    fail=1
  fi
done <<<"$files"
[ "$fail" = 0 ] || exit 1
echo "hygiene: LICENSE, SPDX lines in $n source files, no conflict markers"
