#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's main job (scripts/demo) on the programs in BINDIR/..: a
# run that passes exits 0 with its table, and one that fails (a URI
# nothing can serve) exits 1 with a reason; either way its servers are
# gone and its temporary files too. (It once exited 1 after a run that
# passed, and left a file behind.)
#
#   demo_check.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "demo_check: FAIL: $*"; exit 1; }

# run NAME ARGS...: the demo with a private TMPDIR; its status in $rc.
run() {
  local name=$1; shift
  mkdir -p "$tmp/$name"
  TMPDIR=$tmp/$name DEMO_BUILD_DIR=$build "$src/scripts/demo" "$@" >"$tmp/$name.out" 2>&1
  rc=$?
  sed "s/^/$name| /" "$tmp/$name.out"
  [ -z "$(ls -A "$tmp/$name")" ] || fail "$name: left behind: $(ls -A "$tmp/$name")"
  # Its servers, told from other tests' by the TMPDIR they inherited.
  local p
  for p in $(pgrep -f "$build/bin/rmx-(echo|kv) server"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "TMPDIR=$tmp/$name"; then
      fail "$name: its server is still running: $(tr '\0' ' ' <"/proc/$p/cmdline")"
    fi
  done
}

run pass tcp://127.0.0.1:0
[ "$rc" = 0 ] || fail "a passing run exited $rc"
grep -q '^demo: every check passed over tcp$' "$tmp/pass.out" || fail "no verdict line"
grep -qE '^  echo +10000 +64 ' "$tmp/pass.out" || fail "no table row for 10000 echoes of 64 B"
grep -qE '^  key-value: [1-9][0-9]* values put and read back' "$tmp/pass.out" || fail "no key-value line"

run fail nonsense://127.0.0.1:0
[ "$rc" = 1 ] || fail "a failing run exited $rc, not 1"
grep -q '^demo: FAILED: ' "$tmp/fail.out" || fail "a failing run gave no reason"
echo "demo_check: exit 0 with the table when it passes, 1 with a reason when not, nothing left"
