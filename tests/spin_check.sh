#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rmx-spin end to end: a client and its forked echo server spinning on
# rmx_ctx_progress, in poll progress (the program's choice) and in
# adaptive (set from the environment, where the spinner's back-off may
# sleep on rmx_ctx_fd). Each run must exit 0, every echo checked, and
# print its figures. Usage: spin_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for progress in "" adaptive; do
  rc=0
  env ${progress:+RMX_PROGRESS=$progress} timeout 120 "$bin/rmx-spin" "$scheme://$addr:0" 2000 \
    >"$out" || rc=$?
  cat "$out"
  what="rmx-spin over $scheme (RMX_PROGRESS=${progress:-unset})"
  [ "$rc" = 0 ] || { echo "spin_check: $what exited $rc"; exit 1; }
  grep -qE "^spin: 2000 round trips of 32 B over $scheme://.*, 0 bad\$" "$out" &&
    grep -qE '^spin: median [0-9]+\.[0-9] us, p99 [0-9]+\.[0-9] us$' "$out" &&
    grep -qE '^spin: backed off [0-9]+ times' "$out" ||
    { echo "spin_check: $what did not print its figures"; exit 1; }
done
echo "spin_check: rmx-spin over $scheme: every echo checked, figures printed"
