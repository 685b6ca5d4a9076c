#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Faults on one host: a server and an rmx-fault-peer client, the fault
# injected once the client's workload is in full swing, the client's own
# checks as the verdict (tests/faults/README.md).
#
#   fault_check.sh BINDIR tcp|rdma|shm CASE...
#
# shm listens on an abstract name of its own per case (shm://@NAME: no
# file to remove; the name goes with the server's socket).
# CASE is FAULT:WORKLOAD. FAULT: none (a counted run, data checked by the
# server), kill (SIGKILL to the server process), linkflap (the netdev under
# the RDMA device set down and at once up again: root, inside the VM).
# WORKLOAD: msgs, rpc, write, idle. Every wait is bounded; no time is
# judged, only printed.
#
# Why a flap and not a link held down: the device reports the same
# PORT_ERR either way, but closes made while the port is down send their
# DREQs into it, and SoftRoCE then stops passing connection requests in
# that VM (tests/conformance/verbs_threads.c). Even after a flap, new
# connections time out in that VM once live ones were torn down by it, so
# a linkflap case goes last (ctest boots one VM per linkflap case). A link
# held down is tested across two hosts (twohost.sh linkdown).
set -uo pipefail
bin=$1 scheme=$2
shift 2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
dev=${RXE_VM_DEV:-rxe0}
work=$(mktemp -d)
srv= cli=
trap 'for p in $cli $srv; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

# shellcheck source=../vm/waits.sh
. "$(dirname "$0")/../vm/waits.sh"
alive() { kill -0 "$1" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# The netdev the RDMA device sits on (rxe-vm's dummy rxevm0 in one VM).
netdev() {
  cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null || echo rxevm0
}
port_active() { grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state"; }

results=()
run_case() {
  local fault=${1%%:*} wl=${1#*:} d rc=0 ops=0
  d=$(mktemp -d "$work/case.XXXX")
  mkdir -p "$d"
  [ "$fault" = none ] && ops=300
  local uri="$scheme://$addr:0"
  [ "$scheme" = shm ] && uri="shm://@rmx-fault-$$-${d##*.}"
  "$bin/rmx-fault-peer" server "$uri" --ready "$d/ready" >"$d/server.out" 2>&1 &
  srv=$!
  if ! wait_for 60 test -f "$d/ready"; then
    echo "$1: the server did not start"; cat "$d/server.out"; kill -9 "$srv"; return 1
  fi
  # The client's output comes through a pipe, so the fault follows its
  # "loaded" line within a millisecond or so (polling a file would let a
  # 64 MiB message on loopback finish first). Not a FIFO: 9p has none.
  exec {out}< <(exec "$bin/rmx-fault-peer" client "$(cat "$d/ready")" "$wl" --ops "$ops" \
    --loaded "$d/loaded" --fault-file "$d/fault" --deadline-ms 240000 2>&1)
  cli=$!
  if [ "$fault" != none ]; then
    local l= end=$((SECONDS + 240)) loaded=
    while [ "$SECONDS" -lt "$end" ] && IFS= read -r -t $((end - SECONDS)) -u "$out" l; do
      echo "$l" >>"$d/client.out"
      case $l in *'fault-peer: loaded'*) loaded=1; break ;; esac
    done
    if [ -z "$loaded" ]; then
      kill -9 "$cli" "$srv"; cat <&"$out" >>"$d/client.out"; exec {out}<&-
      echo "$1: the workload never got going"; cat "$d/client.out" "$d/server.out"; return 1
    fi
    # Mark, then inject: the marker is a few microseconds early at most.
    touch "$d/fault"; kill -USR1 "$cli"
    case $fault in
      kill) kill -9 "$srv" ;;
      linkflap) printf 'link set dev %s down\nlink set dev %s up\n' "$(netdev)" "$(netdev)" |
                ip -batch - ;;
    esac
  fi
  cat <&"$out" >>"$d/client.out" &
  local drain=$!
  exec {out}<&-
  wait_for 300 gone "$cli" || {
    echo "$1: the client hung; its threads are in:"; stuck_report "$cli"; kill -9 "$cli"; rc=1
  }
  # A process stuck in the kernel survives SIGKILL (SoftRoCE, see above):
  # then report it rather than wait on it forever.
  if wait_for 10 gone "$cli"; then
    wait "$cli" || rc=1
    wait "$drain"
  else
    echo "$1: the client is stuck in the kernel"; rc=1
  fi
  if [ "$fault" = linkflap ]; then
    wait_for 30 port_active || { echo "$1: the port stayed down"; rc=1; }
  fi
  # A server still up ends in order: its exit status counts (destroy, and
  # the leak check under the sanitizers). A killed one is only reaped: it
  # may not be reaped yet, and a zombie still answers kill -0.
  if [ "$fault" = kill ]; then
    wait_for 10 gone "$srv" && wait "$srv" 2>/dev/null
  elif alive "$srv"; then
    kill -TERM "$srv"
    wait_for 30 gone "$srv" || {
      echo "$1: the server did not stop 30 s after SIGTERM; its threads are in:"
      stuck_report "$srv"; kill -9 "$srv"; rc=1
    }
    if wait_for 10 gone "$srv" && ! wait "$srv"; then
      echo "$1: the server failed"; cat "$d/server.out"; rc=1
    fi
  else
    wait_for 10 gone "$srv" && wait "$srv" 2>/dev/null
  fi
  cat "$d/client.out"
  local line; line=$(grep 'fault-peer: result' "$d/client.out")
  [ -n "$line" ] || rc=1
  [ "$rc" = 0 ] || sed 's/^/server| /' "$d/server.out"
  results+=("$(printf '%-8s %-14s %-4s %s' "$scheme" "$1" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
    "$(echo "$line" | grep -o 'status=[^ ]*\|fault_to_disc_ms=[^ ]*\|last_ok_to_disc_ms=[^ ]*\|big_at_loss=[^ ]*' | tr '\n' ' ')")")
  return $rc
}

fail=0
for c in "$@"; do
  echo "== $scheme $c"
  run_case "$c" || fail=1
done
echo "== summary (times measured, not judged)"
printf '%s\n' "${results[@]}"
exit $fail
