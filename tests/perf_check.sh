#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rmx-perf end to end: every test against one server, a few sizes and few
# iterations each (all data checked by rmx-perf itself, which exits 1 on a
# wrong byte), the JSON lines checked for their fields and for sane values,
# and the usage rules. No timing is judged, but the units are: bandwidth in
# MiB/s (2^20 bytes, as perftest) that agrees with the message rate and size,
# the standard deviation beside the percentiles, and the unit on every line.
# Usage: perf_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
out=$(mktemp) json=$(mktemp) err=$(mktemp)
trap 'kill "$srv" 2>/dev/null || true; rm -f "$out" "$json" "$err"' EXIT
listen="$scheme://$addr:0"
[ "$scheme" = shm ] && listen="shm://@rmx-perf-check-$$" # a socket name, no port
"$bin/rmx-perf" server "$listen" >"$out" &
srv=$!
for _ in $(seq 300); do grep -q listening "$out" && break; sleep 0.1; done
uri=$(sed -n 's/^listening on //p' "$out")
[ -n "$uri" ] || { echo "perf_check: server did not start"; exit 1; }

tests="send_lat send_bw send_rate rpc_lat rpc_rate write_lat write_bw read_lat read_bw atomic_lat"
for t in $tests; do
  # 1 B, one above the eager size (rendezvous for messages), and 1 MiB
  "$bin/rmx-perf" client "$uri" -t "$t" -s 1,9000,1M -n 200 -w 20 -c 2 --json >>"$json"
done
# the table for people, and a window of 1 with one connection: every line
# of results names its units
"$bin/rmx-perf" client "$uri" -t send_rate -n 500 -W 1 | tee "$out"
grep -qE '^send_rate +64 +500 +[0-9.]+ MiB/s +[0-9.]+ Mmsg/s$' "$out"
"$bin/rmx-perf" client "$uri" -t rpc_lat -n 200 | tee "$out"
grep -qE '^rpc_lat +8 +200( +[0-9.]+){7} us$' "$out"
grep -qE '^test .* stddev unit$' "$out"

python3 - "$json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tests = "send_lat send_bw send_rate rpc_lat rpc_rate write_lat write_bw read_lat read_bw atomic_lat".split()
keys = {"test", "transport", "progress", "size", "iters", "warmup", "window", "conns",
        "lat_kind", "lat_us", "mib_s", "mmsg_s"}
lat_keys = {"mean", "stddev", "p50", "p99", "p999", "min", "max"}
assert sorted({r["test"] for r in rows}) == sorted(tests), "a test printed nothing"
for r in rows:
    assert set(r) == keys, r
    assert r["iters"] == 200 and r["warmup"] == 20 and r["conns"] == 2, r
    lat = r["test"].endswith("_lat")
    want = [8] if r["test"] == "atomic_lat" else [1, 9000, 1 << 20]
    assert r["size"] in want, r
    if lat:
        l = r["lat_us"]
        assert r["window"] == 1 and r["mib_s"] is None and r["mmsg_s"] is None, r
        assert r["lat_kind"] == ("one_way" if r["test"] == "send_lat" else "round_trip"), r
        assert set(l) == lat_keys, r
        assert 0 < l["min"] <= l["p50"] <= l["p99"] <= l["p999"] <= l["max"], r
        assert l["min"] <= l["mean"] <= l["max"], r
        # a population's standard deviation is at most half its spread, and
        # above 0 unless every sample is the same (to the printed 1 ns)
        assert 0 <= l["stddev"] <= (l["max"] - l["min"]) / 2 + 1e-3, r
        # (over n samples it is at least the spread / sqrt(2n): 0.005 here)
        assert l["stddev"] > 0 or l["max"] - l["min"] < 0.1, r
    else:
        assert r["window"] == 64 and r["lat_us"] is None and r["lat_kind"] is None, r
        assert r["mib_s"] > 0 and r["mmsg_s"] > 0, r
        # MiB/s of 2^20 bytes (as perftest), messages in millions a second
        mib = r["mmsg_s"] * 1e6 * r["size"] / 2**20
        assert abs(r["mib_s"] - mib) <= 1e-4 * r["mib_s"] + 1e-6, r
print(f"perf_check: {len(rows)} JSON lines as expected")
PY

# usage: help on stdout with 0; what is wrong on stderr with 2
grep -q 'send_lat' <<<"$("$bin/rmx-perf" --help)"
for bad in "client $uri -t nosuch" "client $uri -s 0" "client $uri -W 0" "client" \
           "client $uri --bogus" "server a b" "client $uri -n x" "client nonsense"; do
  set +e
  "$bin/rmx-perf" $bad >/dev/null 2>"$err"
  rc=$?
  set -e
  [ "$rc" = 2 ] || { echo "perf_check: 'rmx-perf $bad' exited $rc, not 2"; exit 1; }
  grep -q "^rmx-perf: .* (try 'rmx-perf --help')\$" "$err" && [ "$(wc -l <"$err")" = 1 ] ||
    { echo "perf_check: 'rmx-perf $bad' did not say one line: $(cat "$err")"; exit 1; }
done

kill -TERM "$srv"
wait "$srv"
echo "perf_check: $scheme passed"
