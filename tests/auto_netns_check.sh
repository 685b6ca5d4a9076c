#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# auto:// across network namespaces on one host: the two processes share a
# kernel (the same boot id) but not an abstract socket namespace, so the
# server's shm alias cannot answer the client, which must go over TCP
# (not fail, not hang). Then the same pair in one namespace, as a control:
# shm. Two namespaces joined by a veth pair, addresses from 10.251.0.0/30
# that exist only inside them; removed on exit. Needs root and ip(8):
# exit 77 (skipped) without.
#   auto_netns_check.sh BINDIR
set -euo pipefail
bin=$1
[ "$(id -u)" = 0 ] && command -v ip >/dev/null || { echo "auto-netns: skipped (needs root and ip)"; exit 77; }
a=rmxa$$ b=rmxb$$
work=$(mktemp -d)
cleanup() {
  kill "${srv:-}" 2>/dev/null || true
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" || { echo "auto-netns: skipped (no network namespaces here)"; exit 77; }
ip link add "va$$" type veth peer name "vb$$"
ip link set "va$$" netns "$a"
ip link set "vb$$" netns "$b"
ip -n "$a" addr add 10.251.0.1/30 dev "va$$"
ip -n "$b" addr add 10.251.0.2/30 dev "vb$$"
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set "va$$" up
ip -n "$b" link set "vb$$" up

# server: auto:// in namespace a
ip netns exec "$a" "$bin/rmx-perf" server auto://10.251.0.1:0 >"$work/srv" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q '^listening on ' "$work/srv" && break; sleep 0.1; done
uri=$(sed -n 's/^listening on //p' "$work/srv")
[ -n "$uri" ] || { echo "auto-netns: FAIL: the server did not start"; cat "$work/srv"; exit 1; }
port=${uri##*:}

# the client in namespace b: tcp, at once
start=$(date +%s%N)
if ! RMX_LOG=info timeout 60 ip netns exec "$b" "$bin/rmx-perf" client "auto://10.251.0.1:$port" \
     -n 200 >"$work/cl" 2>&1; then
  echo "auto-netns: FAIL: the client in another namespace did not get through"; cat "$work/cl"; exit 1
fi
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -Eq "tcp peer 10.251.0.1:$port[: ].*connected" "$work/cl" ||
  { echo "auto-netns: FAIL: another namespace's client did not take tcp"; cat "$work/cl"; exit 1; }
if grep -q "shm" "$work/cl"; then
  echo "auto-netns: FAIL: another namespace's client tried shm"; cat "$work/cl"; exit 1
fi
echo "auto-netns: a client in another namespace went over tcp ($ms ms for the whole run)"

# control: a client in the server's namespace takes shm
RMX_LOG=info timeout 60 ip netns exec "$a" "$bin/rmx-perf" client "auto://10.251.0.1:$port" -n 200 \
  >"$work/cl2" 2>&1 || { echo "auto-netns: FAIL: the same-namespace client failed"; cat "$work/cl2"; exit 1; }
grep -Eq "shm peer 10.251.0.1:$port[: ].*connected" "$work/cl2" ||
  { echo "auto-netns: FAIL: a client in the server's namespace did not take shm"; cat "$work/cl2"; exit 1; }
echo "auto-netns: a client in the server's namespace took shm"
echo "auto-netns: ok"
