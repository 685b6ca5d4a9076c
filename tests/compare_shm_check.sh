#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/compare-shm --smoke: one repetition, tiny sizes, nothing installed.
# It must exit 0 and print every row of both tables with rmx's figure a
# number (the references may show '-' where ucx_perftest or sockperf is
# missing), and each row's commands. No figure is judged. Skipped (77)
# on a host with fewer than two CPUs: the rows pin to CPUs 0 and 1.
# Usage: compare_shm_check.sh BINDIR SOURCE
set -euo pipefail
bin=$1 src=$2
[ "$(nproc)" -ge 2 ] || { echo "compare-shm check: skipped, fewer than two CPUs"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Under the sanitizers the servers start through stdbuf, whose preload
# comes before ASan's runtime: let ASan accept that order.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
say() { echo "compare-shm check: $*" >&2; cat "$out" >&2; exit 1; }
RMX_BIN=$bin "$src/bench/compare-shm" --smoke --no-install >"$out" || say "exit $?"
num='[0-9][0-9.e+-]*'
for row in "8 B one-way latency, polled, median (us)" "8 B RPC round trip, polled, median (us)" \
  "64 B message rate, window 64 (Mmsg/s)" "64 KiB send bandwidth (MiB/s)" \
  "64 KiB RDMA write bandwidth (MiB/s)" "8 B one-way latency, event mode, median (us)"; do
  line=$(grep -F "| $row | " "$out") || say "no row '$row'"
  [[ $(cut -d'|' -f3 <<<"$line" | tr -d ' ') =~ ^$num$ ]] || say "rmx's figure missing: $line"
done
for row in "the host's cost" "server Pss + client Pss" "the segment, mapped"; do
  line=$(grep -F "| $row" "$out") || say "no memory row '$row'"
  [[ $(cut -d'|' -f3 <<<"$line" | tr -d ' ') =~ ^$num$ ]] || say "no figure: $line"
done
[ "$(grep -c 'rmx-perf client shm://@' "$out")" -ge 6 ] || say "the commands are missing"
grep -qF 'rmx-conns --json shm @' "$out" || say "the memory row's command is missing"
echo "compare-shm check: every row measured"
