#!/usr/bin/env bash
# rmx against perftest, side by side in one boot of the SoftRoCE VM (or on a
# host with an RDMA device): 8 B latency (event-driven and polled) and 64 KiB
# bandwidth, medians of RUNS runs, and rmx/perftest ratios.
#   bench/compare.sh [RUNS]        (from the repository root, after a build)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
if [ -z "${RXE_VM:-}" ] && ! ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
  command -v ib_send_lat >/dev/null || {
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq perftest >&2; }
  exec tests/vm/rxe-vm -- bench/compare.sh "$RUNS"
fi
A=${RXE_VM_ADDR:-${RMX_TEST_ADDR:?set RMX_TEST_ADDR to this host\'s RDMA address}}
DEV=${RXE_VM_DEV:-$(ibv_devices | awk 'NR==3{print $1}')}
B=build/bin
median() { sort -g | awk '{a[NR]=$1} END{print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

perf_lat() { # extra flags for perftest; prints t_typical (one-way, us)
  taskset -c 0 ib_send_lat -d "$DEV" -R -s 8 -n 5000 "$@" >/dev/null 2>&1 &
  sleep 1
  taskset -c 1 ib_send_lat -d "$DEV" -R -s 8 -n 5000 "$@" "$A" 2>/dev/null | awk '$1==8{print $5}'
  wait
}
perf_bw() {
  taskset -c 0 ib_send_bw -d "$DEV" -R -s 65536 -n 2000 >/dev/null 2>&1 &
  sleep 1
  taskset -c 1 ib_send_bw -d "$DEV" -R -s 65536 -n 2000 "$A" 2>/dev/null | awk '$1==65536{print $4}'
  wait
}
rmx() { # mode size iters [env]; prints median_us or mb_s
  local mode=$1 size=$2 iters=$3; shift 3
  local log; log=$(mktemp)
  env "$@" taskset -c 0 $B/rmx-perf server "rdma://$A:0" >"$log" &
  local srv=$!
  for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
  local uri; uri=$(sed -n 's/^listening on //p' "$log")
  env "$@" taskset -c 1 $B/rmx-perf "$mode" "$uri" "$size" "$iters" |
    sed -n 's/.*median_us=\([0-9.]*\).*/\1/p; s/.*mb_s=\([0-9.]*\).*/\1/p'
  kill "$srv"; wait "$srv" 2>/dev/null || true; rm -f "$log"
}

declare -A r
for i in $(seq "$RUNS"); do
  r[pl]+="$(perf_lat) "; r[rl]+="$(rmx lat 8 5000 RMX_PROGRESS=poll) "
  r[pe]+="$(perf_lat -e) "; r[re]+="$(rmx lat 8 5000 RMX_PROGRESS=event) "
  r[pb]+="$(perf_bw) "; r[rb]+="$(rmx bw 65536 2000 RMX_PROGRESS=poll) "
done
m() { echo "${r[$1]}" | tr ' ' '\n' | grep . | median; }
printf '%-28s %12s %12s %8s\n' "median of $RUNS, one boot" perftest rmx "rmx/ref"
for row in "8 B latency, polled (us):pl:rl" "8 B latency, events (us):pe:re" "64 KiB send bw (MB/s):pb:rb"; do
  IFS=: read -r name p x <<<"$row"
  printf '%-28s %12s %12s %8.2f\n' "$name" "$(m "$p")" "$(m "$x")" "$(echo "$(m "$x") $(m "$p")" | awk '{print $1/$2}')"
done
