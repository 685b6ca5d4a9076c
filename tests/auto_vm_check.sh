#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# auto:// per peer where RDMA is there (inside the SoftRoCE VM: rxe0 on
# $RXE_VM_ADDR). An auto:// server listens on rdma, tcp and shm at one
# port; a client's RMX_TRANSPORTS and what each side has decide:
#   rdma,tcp                      -> rdma
#   the default (shm first)       -> shm (the address is this host's)
#   rdma,tcp, client without a usable device (RMX_DEVICE names none) -> tcp
#   rdma,tcp against a tcp-only server -> rdma's set-up fails, a warning, tcp
#   rdma! against a tcp-only server    -> fails (no fall back)
#   auto_vm_check.sh BINDIR
set -euo pipefail
bin=$1 addr=${RXE_VM_ADDR:?run inside the VM (tests/vm/rxe-vm)}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "auto-vm: FAIL: $*"; exit 1; }

serve() { # name, then env for the server
  local name=$1; shift
  env "$@" "$bin/rmx-perf" server "auto://$addr:0" >"$work/$name" 2>&1 &
  for _ in $(seq 200); do grep -q '^listening on ' "$work/$name" && break; sleep 0.1; done
  local uri; uri=$(sed -n 's/^listening on //p' "$work/$name")
  [ -n "$uri" ] || { cat "$work/$name"; fail "server $name did not start"; }
  echo "${uri##*:}"
}

client() { # port, want (rdma|shm|tcp|fail), env for the client
  local port=$1 want=$2; shift 2
  local rc=0
  env RMX_LOG=info "$@" timeout 60 "$bin/rmx-perf" client "auto://$addr:$port" -n 100 \
    >"$work/cl" 2>&1 || rc=$?
  if [ "$want" = fail ]; then
    [ "$rc" != 0 ] || { cat "$work/cl"; fail "$* should have failed"; }
    grep -Eq "rdma peer .*connect failed" "$work/cl" || { cat "$work/cl"; fail "$*: no failure line"; }
    echo "auto-vm: $*: failed, as required"
    return
  fi
  [ "$rc" = 0 ] || { cat "$work/cl"; fail "$*: the client failed"; }
  grep -Eq "$want peer $addr:$port[: ].*connected" "$work/cl" ||
    { cat "$work/cl"; fail "$*: did not take $want"; }
  echo "auto-vm: ${*:-default}: $want"
}

full=$(serve full)
client "$full" rdma RMX_TRANSPORTS=rdma,tcp
client "$full" shm
client "$full" tcp RMX_TRANSPORTS=rdma,tcp RMX_DEVICE=nosuchdev
tcponly=$(serve tcponly RMX_TRANSPORTS=tcp)
client "$tcponly" tcp RMX_TRANSPORTS=rdma,tcp
grep -q "auto: peer .*rdma set-up failed" "$work/cl" || { cat "$work/cl"; fail "no warning for rdma's failure"; }
client "$tcponly" fail RMX_TRANSPORTS='rdma!'
echo "auto-vm: ok"
