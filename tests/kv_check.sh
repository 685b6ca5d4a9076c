#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rmx-kv end to end: the demo (small values inline, large ones zero-copy),
# then put/get/del from the command line. Usage: kv_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
log=$(mktemp)
trap 'kill "$srv" 2>/dev/null || true; rm -f "$log"' EXIT
"$bin/rmx-kv" server "$scheme://$addr:0" >"$log" &
srv=$!
for _ in $(seq 300); do grep -q serving "$log" && break; sleep 0.1; done
uri=$(sed -n 's/^kv: serving on //p' "$log")
[ -n "$uri" ] || { echo "kv_check: server did not start"; exit 1; }
"$bin/rmx-kv" demo "$uri"
"$bin/rmx-kv" put "$uri" greeting "hello, rmx"
[ "$("$bin/rmx-kv" get "$uri" greeting)" = "hello, rmx" ]
"$bin/rmx-kv" del "$uri" greeting
! "$bin/rmx-kv" get "$uri" greeting 2>/dev/null
echo "kv_check: all good over $scheme"
