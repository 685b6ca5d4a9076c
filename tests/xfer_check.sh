#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rmx-xfer end to end, small and quick: a server with a 64 MiB region, then
# writes (with notifications) and reads of 4 KiB and 64 KiB blocks, every
# byte checked by rmx-xfer (which exits 1 on a wrong one), the JSON parsed
# and its counts checked: the bytes moved, the notifications the server
# counted, the bytes checked, and no registration while posting.
# Usage: xfer_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
out=$(mktemp) json=$(mktemp)
trap 'kill "$srv" 2>/dev/null || true; rm -f "$out" "$json" "$json.lookup"' EXIT
"$bin/rmx-xfer" server "$scheme://$addr:0" --size 64M >"$out" &
srv=$!
for _ in $(seq 300); do grep -q listening "$out" && break; sleep 0.1; done
uri=$(sed -n 's/^listening on \([^,]*\),.*/\1/p' "$out")
[ -n "$uri" ] || { echo "xfer_check: server did not start"; exit 1; }

x() { timeout 60 "$bin/rmx-xfer" client "$uri" --check --json "$@" | tee -a "$json"; }
x --op write --block 64K --batch 16 --inflight 2 --total 32M --notify --threads 2
x --op read --block 64K --batch 16 --inflight 2 --total 32M --threads 2
x --op write --block 4K --batch 128 --inflight 4 --total 8M --notify
x --op read --block 4K --batch 128 --inflight 4 --total 8M --cache
x --op write --block 4K --batch 8 --inflight 2 --total 1M --contig --warmup 0

python3 - "$json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 5, rows
for r in rows:
    per = r["block"] * r["batch"]
    total = {65536: 32 << 20, 4096: 8 << 20}[r["block"]] if r["batch"] != 8 else 1 << 20
    assert r["bytes"] == r["requests"] * per and r["bytes"] >= total, r
    # every byte of each thread's window: inflight x batch x block
    assert r["check"] and r["checked_bytes"] == r["threads"] * r["inflight"] * per, r
    assert r["reg_misses_run"] == 0, r
    assert r["gb_s"] > 0 and r["req_s"] > 0 and r["seconds"] > 0, r
    l = r["lat_us"]
    assert 0 < l["min"] <= l["p50"] <= l["p99"] <= l["p999"] <= l["max"], r
    warm = r["inflight"] * r["threads"] if r["batch"] != 8 else 0
    assert r["notes"] == (r["requests"] + warm if r["notify"] else 0), r
print(f"xfer_check: {len(rows)} JSON lines as expected")
PY
kill -TERM "$srv"
wait "$srv"
# memory by name: every lookup answered, the cache's and the owner's
timeout 60 "$bin/rmx-xfer" lookup "${uri%:*}:0" --count 20 --json >"$json.lookup"
python3 - "$json.lookup" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["count"] == 20 and r["rpc_us"] > 0 and r["lookup_us"] > 0 and r["cached_us"] > 0, r
print("xfer_check: lookup JSON as expected")
PY
echo "xfer_check: $scheme passed"
