#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every tool that listens, on an address another server holds: it exits 1
# at once with "<tool>: cannot listen on URI: address already in use" (or
# "cannot serve on") on stderr, and never says it is listening. (rmx-conns
# listens on a port of 0 only: its server child, when it cannot listen,
# exits and the tool exits 1 with the child's reason, at once.)
#   listen_check.sh BINDIR
set -uo pipefail
bin=$1
bad=0
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
say() { echo "listen: $*"; bad=1; }

# HOST: an rmx-echo server on HOST (an IPv6 one in brackets), port 0; its URI in $held ('' if none)
hold() {
  "$bin/rmx-echo" server "tcp://$1:0" >"$work/held.log" 2>&1 &
  pids+=($!)
  held=
  for _ in $(seq 100); do
    held=$(sed -n 's/^server: listening on //p' "$work/held.log")
    [ -n "$held" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
}

# TOOL ARGS...: exits 1 within 10 s, stderr names the URI $held and the
# reason, stdout says nothing of listening
taken() {
  local t=$1
  timeout 10 "$bin/$t" "${@:2}" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" != 1 ] || grep -qi 'listening\|serving\|offering' "$work/out" ||
     ! grep -qxF -e "$t: cannot listen on $held: address already in use" \
       -e "$t: cannot serve on $held: address already in use" "$work/err"; then
    say "'$*' with $held taken: exit $rc (want 1), stdout '$(head -1 "$work/out")', stderr '$(grep -v ' rmx\[' "$work/err" | head -2)'"
  fi
}

hold 127.0.0.1
[ -n "$held" ] || { echo "listen: the holding server did not start: $(cat "$work/held.log")"; exit 1; }
taken rmx-echo server "$held"
taken rmx-perf server "$held"
taken rmx-xfer server "$held" --size 1M
taken rmx-kv server "$held"
taken rmx-bulk-copy serve "$held" /dev/null
taken rmx-embed "$held"
taken rmx-spin "$held" 1
taken rmx-percore "$held" 2
# a rail listener of rmx-xfer's on the taken port
timeout 10 "$bin/rmx-xfer" server tcp://127.0.0.1:0 --size 1M --rail "$held" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] && grep -qF "rmx-xfer: cannot serve on $held: address already in use" "$work/err" ||
  say "rmx-xfer --rail $held (taken): exit $rc, stderr '$(grep -v ' rmx\[' "$work/err" | head -2)'"
# IPv6, where this host has it
hold [::1]
if [ -n "$held" ]; then
  taken rmx-echo server "$held"
  taken rmx-percore "$held" 2
fi

# rmx-conns over rdma on loopback, which no RDMA device serves here: exit 1
# with the server child's reason within 10 s (or 0 where a device does serve)
timeout 10 "$bin/rmx-conns" rdma 127.0.0.1 1 1 >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 0 ] || { [ "$rc" = 1 ] && grep -qF "rmx-conns server: rdma://127.0.0.1:0: " "$work/err"; } ||
  say "rmx-conns rdma 127.0.0.1: exit $rc (want 1 with the reason), stderr '$(grep -v ' rmx\[' "$work/err" | head -2)'"

[ "$bad" = 0 ] && echo "listen: every tool exits 1 with the reason on a taken address"
exit "$bad"
