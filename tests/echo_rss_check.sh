#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# An echo server gives a burst's memory back (issue 23, items 6, 13, 14):
# its resident size (VmRSS) after start is the baseline; after rounds of 10
# concurrent 16 MiB echoes, rounds of other large sizes (glibc's dynamic
# mmap threshold would keep those in its heap), and 16 connections one
# after another each echoing 4 x 16 MiB, it must come back within
# RMX_TEST_RSS_SLACK_MIB (64) of the baseline once the clients are gone.
# Usage: echo_rss_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
slack_kib=$((${RMX_TEST_RSS_SLACK_MIB:-64} * 1024))
out=$(mktemp)
trap 'kill "$srv" 2>/dev/null || true; rm -f "$out"' EXIT
"$bin/rmx-echo" server "$scheme://$addr:0" >"$out" &
srv=$!
for _ in $(seq 300); do grep -q listening "$out" && break; sleep 0.1; done
uri=$(sed -n 's/^server: listening on //p' "$out")
[ -n "$uri" ] || { echo "echo_rss_check: server did not start"; exit 1; }

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$srv/status"; }
# One small echo first, so that the baseline counts what any connection
# leaves behind (the transport, the pool's small slabs).
"$bin/rmx-echo" client "$uri" 10 1000 >/dev/null
base=$(rss)
echo "echo_rss_check: baseline $((base / 1024)) MiB"

# The server may still be finishing the last sends when the clients are
# gone: its resident size has until then, plus a few seconds, to come down.
settled() {
  local now
  for _ in $(seq 50); do
    now=$(rss)
    [ "$now" -le $((base + slack_kib)) ] && break
    sleep 0.1
  done
  echo "echo_rss_check: after $1: $((now / 1024)) MiB (baseline $((base / 1024)) MiB)"
  if [ "$now" -gt $((base + slack_kib)) ]; then
    echo "echo_rss_check: FAIL: the server kept $(((now - base) / 1024)) MiB after $1"
    exit 1
  fi
}

burst() { # SIZE ECHOES: 10 clients at once
  local pids=()
  for _ in $(seq 10); do
    "$bin/rmx-echo" client "$uri" "$2" "$1" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}

for round in 1 2 3; do
  burst $((16 << 20)) 2
  settled "round $round of 10 concurrent 16 MiB echoes"
done
for mib in 8 12 3; do
  burst $((mib << 20)) 2
  settled "10 concurrent $mib MiB echoes"
done
for _ in $(seq 16); do
  "$bin/rmx-echo" client "$uri" 4 $((16 << 20)) >/dev/null
done
settled "16 connections one after another, 4 x 16 MiB each"
kill -TERM "$srv"
wait "$srv"
echo "echo_rss_check: all good over $scheme"
