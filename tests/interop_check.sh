#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two builds of rmx talk whatever their protocol versions (docs/protocol.md,
# "Versions and features"): the tools of an earlier commit, built from this
# repository's history, against this build's, both directions, over tcp,
# with and without a shared secret. Each pair moves messages from 0 B to
# 16 MiB (eager and rendezvous) and RPCs with zero-copy values (rmx-kv),
# and this build's connect and accept lines name the version agreed: 4 with
# the old build, 5 between two of this one.
#   interop_check.sh SRCDIR BINDIR WORKDIR [COMMIT]
# COMMIT (default 1578790): the last commit whose hello carried a single
# version (4). Exits 77 (skipped) where the clone lacks it (a shallow one).
set -uo pipefail
src=$1 new=$2 work=$3 commit=${4:-1578790}
bad=0
say() { echo "interop: $*"; bad=1; }

if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "interop: skipped: commit $commit is not in this clone (a shallow clone?)"
  exit 77
fi
old=$work/old-$commit
# The old build is kept between runs: its sources never change.
if [ ! -x "$old/build/bin/rmx-echo" ] || [ ! -x "$old/build/bin/rmx-kv" ]; then
  rm -rf "$old" && mkdir -p "$old/src" || exit 1
  git -C "$src" archive "$commit" | tar -x -C "$old/src" || { echo "interop: cannot unpack $commit"; exit 1; }
  if ! { cmake -S "$old/src" -B "$old/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
         cmake --build "$old/build" -j"$(nproc)" --target rmx-echo rmx-kv >"$old/build.log" 2>&1; }; then
    tail -20 "$old/build.log"
    echo "interop: cannot build $commit"
    exit 1
  fi
fi
obin=$old/build/bin

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
head -c 32 /dev/urandom >"$tmp/secret"

# serve BINDIR TOOL READY-PREFIX: start a server on a port of 0; its URI in $uri
serve() {
  RMX_LOG=info "$1/$2" server tcp://127.0.0.1:0 >"$tmp/srv.out" 2>"$tmp/srv.err" &
  pids+=($!)
  uri=
  for _ in $(seq 100); do
    uri=$(sed -n "s/^$3//p" "$tmp/srv.out")
    [ -n "$uri" ] && break
    sleep 0.1
  done
  [ -n "$uri" ] || say "$1/$2 did not start: $(tail -2 "$tmp/srv.err")"
}

stop() {
  kill -TERM "${pids[-1]}" 2>/dev/null
  wait "${pids[-1]}" 2>/dev/null
  unset 'pids[-1]'
}

# pair SERVER-BINDIR CLIENT-BINDIR VERSION LABEL: echo and kv between them;
# this build's side logs the agreed VERSION
pair() {
  local s=$1 c=$2 v=$3 what=$4 ok=1
  serve "$s" rmx-echo 'server: listening on '
  [ -n "$uri" ] || return
  for args in "200 64" "20 100000" "2 $((16 << 20))" "5 0"; do
    # shellcheck disable=SC2086
    RMX_LOG=info "$c/rmx-echo" client "$uri" $args >"$tmp/cl.out" 2>"$tmp/cl.err" ||
      { say "$what: rmx-echo client $args: $(grep -v ' info: ' "$tmp/cl.err" | tail -2)"; ok=0; }
  done
  # the side of this build names the version in its info line
  local mine=$tmp/cl.err
  [ "$c" = "$new" ] || mine=$tmp/srv.err
  grep -q "protocol version $v\$" "$mine" ||
    { say "$what: this build's log does not say protocol version $v: $(grep -m1 'peer' "$mine")"; ok=0; }
  stop
  serve "$s" rmx-kv 'kv: serving on '
  [ -n "$uri" ] || return
  RMX_LOG=warn "$c/rmx-kv" demo "$uri" >"$tmp/kv.out" 2>&1 ||
    { say "$what: rmx-kv demo: $(tail -2 "$tmp/kv.out")"; ok=0; }
  stop
  [ "$ok" = 1 ] && echo "interop: $what: echo and kv, protocol version $v"
}

for auth in "" "$tmp/secret"; do
  if [ -n "$auth" ]; then export RMX_AUTH_SECRET_FILE=$auth with=", with a secret"
  else unset RMX_AUTH_SECRET_FILE; with=; fi
  pair "$obin" "$new" 4 "$commit server, new client$with"
  pair "$new" "$obin" 4 "new server, $commit client$with"
  pair "$new" "$new" 5 "new server, new client$with"
done
unset RMX_AUTH_SECRET_FILE
[ "$bad" = 0 ] && echo "interop: every pair works both ways"
exit "$bad"
