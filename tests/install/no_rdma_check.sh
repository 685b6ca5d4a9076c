#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core is optional at run time: librmx.so does not need libibverbs or
# librdmacm to load; where the verbs module cannot be loaded, tcp:// works
# and rdma:// is refused with the reason.
#   1. librmx.so's NEEDED entries name no rdma-core library;
#   2. librmx.so alone in a directory (no module beside it): rmx-echo over
#      tcp:// echoes, over rdma:// it fails and the log says why;
#   3. as root, with libibverbs.so.1 itself made unloadable in a private
#      mount namespace: the same, with the build as it is.
#   no_rdma_check.sh BUILD
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "no-rdma: FAIL: $*" >&2; exit 1; }

if readelf -d "$build/lib/librmx.so" | grep -E 'NEEDED.*(libibverbs|librdmacm)'; then
  fail "librmx.so needs rdma-core to load"
fi
echo "no-rdma: librmx.so loads without rdma-core: $(readelf -d "$build/lib/librmx.so" |
  sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"

# echo_over LABEL [ENV...]: an rmx-echo server and client over tcp, then an
# rdma connect that must fail with the reason logged.
echo_over() {
  local label=$1; shift
  local log=$work/$label.log
  env "$@" "$build/bin/rmx-echo" server tcp://127.0.0.1:0 >"$log" 2>&1 &
  local srv=$!
  for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
  local uri; uri=$(sed -n 's/^server: listening on //p' "$log")
  [ -n "$uri" ] || { kill "$srv"; fail "$label: no server: $(cat "$log")"; }
  env "$@" "$build/bin/rmx-echo" client "$uri" 20 1000 >"$work/$label.client" 2>&1 ||
    { kill "$srv"; fail "$label: the tcp echo failed: $(cat "$work/$label.client")"; }
  kill "$srv"; wait "$srv" 2>/dev/null || true
  if env "$@" "$build/bin/rmx-echo" client rdma://127.0.0.1:7471 1 8 >"$work/$label.rdma" 2>&1; then
    fail "$label: an rdma connect succeeded"
  fi
  grep -q "rdma:// is not available: the RDMA transport could not be loaded" "$work/$label.rdma" ||
    fail "$label: no reason given: $(cat "$work/$label.rdma")"
  echo "no-rdma: $label: tcp echoed; rdma refused: $(grep -o 'could not be loaded.*' "$work/$label.rdma" | head -1)"
}

mkdir "$work/lib"
cp -L "$build/lib/librmx.so.0" "$work/lib/"
echo_over "no module" LD_LIBRARY_PATH="$work/lib"

ibv=$(ldconfig -p | sed -n 's/^\s*libibverbs.so.1 .*=> //p' | head -1)
if [ "$(id -u)" = 0 ] && [ -n "$ibv" ] && unshare -m true 2>/dev/null; then
  export -f echo_over fail
  export build work
  unshare -m bash -c "mount --bind /dev/null '$ibv' && echo_over 'no libibverbs'"
else
  echo "no-rdma: the run with libibverbs hidden needs root and unshare: skipped"
fi
