#!/usr/bin/env bash
# rmx against perftest, side by side in one boot of the SoftRoCE VM (or on a
# host with an RDMA device): 8 B latency (event-driven and polled) and 64 KiB
# bandwidth, RUNS repetitions (default 3), each repetition's values and
# rmx/perftest ratio, then the medians and the ratio of the medians.
#   bench/compare.sh [RUNS]        (from the repository root, after a build)
# RMX_BIN=DIR       the rmx-perf measured (default build/bin).
# RMX_BASELINE=DIR  also measure DIR/rmx-perf, another build tree's bin (its
#                   rpath finds that build's librmx), in the same boot: two
#                   more columns, base and rmx/base, to show a change does not
#                   regress. Relative paths are taken from the current directory.
# Within a repetition perftest, rmx and the baseline run each measurement one
# after the other; the order rotates from one repetition to the next, so drift
# in the VM does not always fall on the same one.
set -euo pipefail
bindir() { # DIR -> absolute path, checked; the VM sees the host's / (9p), /tmp included
  [ -x "$1/rmx-perf" ] || { echo "compare.sh: no rmx-perf in $1 (build first)" >&2; exit 2; }
  (cd "$1" && pwd -P)
}
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
RMX_BIN=$(bindir "${RMX_BIN:-$ROOT/build/bin}")
RMX_BASELINE=${RMX_BASELINE:+$(bindir "$RMX_BASELINE")}
export RMX_BIN RMX_BASELINE # rxe-vm passes RMX_* into the VM
cd "$ROOT"
RUNS=${1:-3}
if [ -z "${RXE_VM:-}" ] && ! ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
  command -v ib_send_lat >/dev/null || {
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq perftest >&2; }
  exec tests/vm/rxe-vm -- bench/compare.sh "$RUNS"
fi
A=${RXE_VM_ADDR:-${RMX_TEST_ADDR:?set RMX_TEST_ADDR to this host\'s RDMA address}}
DEV=${RXE_VM_DEV:-$(ibv_devices | awk 'NR==3{print $1}')}
median() { sort -g | awk 'NF{a[++n]=$1} END{if(n) print (n%2)? a[(n+1)/2] : (a[n/2]+a[n/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f\n", a/b}'; }

perftest() { # column size program [flags]; prints that column of the client's result line
  # The server can take seconds to start in the VM, and a client that comes
  # too early fails ("Unable to init the socket connection") and leaves the
  # server waiting for ever: run the client again until it prints a result or
  # the server is gone (at most 300 s). The client's exit status is not used:
  # under load one has exited with an error after the server saw the test run.
  local col=$1 size=$2 prog=$3; shift 3
  local log; log=$(mktemp)
  taskset -c 0 timeout 300 "$prog" -d "$DEV" -R -s "$size" "$@" >"$log" 2>&1 &
  local srv=$! out v
  while sleep 1; do
    out=$(taskset -c 1 timeout 300 "$prog" -d "$DEV" -R -s "$size" "$@" "$A" 2>&1 || true)
    v=$(echo "$out" | awk -v s="$size" -v c="$col" '$1==s{print $c}')
    [ -n "$v" ] && break
    kill -0 "$srv" 2>/dev/null || break
  done
  [ -n "$v" ] || echo "compare.sh: $prog $* failed: $(echo "$out" | tail -1); server: $(tail -1 "$log")" >&2
  kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null || true; rm -f "$log"
  echo "$v"
}
perf_lat() { perftest 5 8 ib_send_lat -n 5000 "$@"; } # t_typical, one-way us
perf_bw() { perftest 4 65536 ib_send_bw -n 2000; }     # BW average, MB/s
rmx() { # bindir mode size iters [env]; prints median_us or mb_s
  local bin=$1 mode=$2 size=$3 iters=$4; shift 4
  local log; log=$(mktemp)
  env "$@" taskset -c 0 "$bin/rmx-perf" server "rdma://$A:0" >"$log" &
  local srv=$!
  for _ in $(seq 300); do grep -q listening "$log" && break; sleep 0.1; done
  local uri; uri=$(sed -n 's/^listening on //p' "$log")
  env "$@" taskset -c 1 timeout 300 "$bin/rmx-perf" "$mode" "$uri" "$size" "$iters" |
    sed -n 's/.*median_us=\([0-9.]*\).*/\1/p; s/.*mb_s=\([0-9.]*\).*/\1/p'
  kill "$srv"; wait "$srv" 2>/dev/null || true; rm -f "$log"
}
measure() { # tool (perftest|rmx|base) test (pl|el|bw); prints one value
  local bin=$RMX_BIN; [ "$1" = base ] && bin=$RMX_BASELINE
  case $1:$2 in
    perftest:pl) perf_lat ;;
    perftest:el) perf_lat -e ;;
    perftest:bw) perf_bw ;;
    *:pl) rmx "$bin" lat 8 5000 RMX_PROGRESS=poll ;;
    *:el) rmx "$bin" lat 8 5000 RMX_PROGRESS=event ;;
    *:bw) rmx "$bin" bw 65536 2000 RMX_PROGRESS=poll ;;
  esac
}

TOOLS=(perftest rmx); [ -z "$RMX_BASELINE" ] || TOOLS+=(base)
echo "rmx: $RMX_BIN${RMX_BASELINE:+, base: $RMX_BASELINE}" >&2
declare -A r # r[tool,test,repetition] = value
for i in $(seq "$RUNS"); do
  k=$(( (i - 1) % ${#TOOLS[@]} ))
  order=("${TOOLS[@]:k}" "${TOOLS[@]:0:k}")
  echo "repetition $i of $RUNS, order: ${order[*]}" >&2
  for t in pl el bw; do
    for tool in "${order[@]}"; do r[$tool,$t,$i]=$(measure "$tool" "$t"); done
  done
done

row() { # label perftest rmx [base]
  printf '%-28s %10s %10s %8s' "$1" "$2" "$3" "$(ratio "$3" "$2")"
  [ -z "$RMX_BASELINE" ] || printf ' %10s %8s' "$4" "$(ratio "$3" "$4")"
  echo
}
med() { for i in $(seq "$RUNS"); do echo "${r[$1,$2,$i]:-}"; done | median; }
printf '%-28s %10s %10s %8s' "$RUNS runs, one boot" perftest rmx rmx/perf
[ -z "$RMX_BASELINE" ] || printf ' %10s %8s' base rmx/base
echo
for line in "8 B latency, polled (us):pl" "8 B latency, events (us):el" "64 KiB send bw (MB/s):bw"; do
  IFS=: read -r name t <<<"$line"
  echo "$name"
  for i in $(seq "$RUNS"); do
    row "  run $i" "${r[perftest,$t,$i]}" "${r[rmx,$t,$i]}" "${r[base,$t,$i]:-}"
  done
  row "  median" "$(med perftest "$t")" "$(med rmx "$t")" "$(med base "$t")"
done
