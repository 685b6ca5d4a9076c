#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The verbs suites again with every connection on the device's shared
# receive queue (RMX_SRQ=1), in one VM boot: what runs over verbs must not
# depend on where receive buffers come from (nor on the small send ring
# such a connection has, nor on a tiny one). The examples, the
# killed-server faults and the key forger run too; the two-host runs and
# the soak do not (two more VM boots, and a minute, each). Then a burst of
# 200 clients at once into a queue of 16 buffers (RMX_SRQ_DEPTH=16): every message
# arrives, the queue is drained to its limit and refilled over and over,
# and the senders wait on "not ready" instead of failing.
#   srq_check.sh BIN_DIR [core|long]
# core (the default) is every suite but the longest (API order, killed
# servers, the forger, the examples), which long runs:
# the sanitizer pass runs core, the plain pass long (the same code, where
# the API-order sweep and the killed servers take a third of the time).
set -uo pipefail
bin=$1
set_=${2:-core}
here=$(cd "$(dirname "$0")" && pwd)
export RMX_SRQ=1
failed=0
LONG=" api-order-poll faults-kill forge examples-echo examples-kv examples-spin examples-bulk-copy "
run() { # NAME ENV... -- COMMAND...
  local name=$1; shift
  case "$LONG" in
    *" $name "*) [ "$set_" = long ] || return 0 ;;
    *) [ "$set_" = core ] || return 0 ;;
  esac
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local t0=$SECONDS
  if env "${envs[@]}" "$@" >"/tmp/srq_check.$name.log" 2>&1; then
    echo "srq: $name passed ($((SECONDS - t0)) s)"
  else
    echo "srq: $name FAILED ($((SECONDS - t0)) s); its output:"
    tail -n 40 "/tmp/srq_check.$name.log"
    failed=1
  fi
}
run conformance RMX_RNR_RETRY=0 -- "$bin/rmx-conformance" rdma
run fastpath RMX_RNR_RETRY=0 -- "$bin/rmx-fastpath" rdma
# a ring far shallower than the credits: posts refused for room wait for
# the completion that frees it, whichever slot that was (a bind, a copy)
run fastpath-tiny-ring RMX_RNR_RETRY=0 RMX_SQ_DEPTH=3 -- "$bin/rmx-fastpath" rdma
run rpc-tiny-ring-own-rq RMX_SRQ=0 RMX_RNR_RETRY=0 RMX_SQ_DEPTH=3 RMX_TEST_RPC_CALLS=2000 -- "$bin/rmx-rpc-test" rdma
run fastpath-poll RMX_RNR_RETRY=0 RMX_PROGRESS=poll -- "$bin/rmx-fastpath" rdma
run busy-poll RMX_RNR_RETRY=0 -- "$bin/rmx-busy-poll" rdma
run api-order-poll RMX_RNR_RETRY=0 RMX_PROGRESS=poll -- "$bin/rmx-api-order" rdma
run liveness RMX_RNR_RETRY=0 -- "$bin/rmx-liveness" rdma
run reconnect RMX_RNR_RETRY=0 -- "$bin/rmx-reconnect" rdma
run wait-fd RMX_RNR_RETRY=0 -- "$bin/rmx-wait-fd" rdma
run guard RMX_RNR_RETRY=0 -- "$bin/rmx-guard-test" rdma
run one-sided RMX_RNR_RETRY=0 RMX_KEEPALIVE_TIMEOUT_MS=120000 -- "$bin/rmx-one-sided" rdma
# transfer requests on the small ring, and on a tiny one with the key
# scope of a protection domain per connection (own receive queues: an SRQ
# belongs to the device's domain)
run xfer RMX_RNR_RETRY=0 -- "$bin/rmx-xfer-test" rdma
run xfer-tiny-ring-pd RMX_SRQ=0 RMX_RNR_RETRY=0 RMX_SQ_DEPTH=3 RMX_KEY_SCOPE=pd -- "$bin/rmx-xfer-test" rdma
run rpc RMX_RNR_RETRY=0 RMX_TEST_RPC_CALLS=2000 -- "$bin/rmx-rpc-test" rdma
run burst-small-srq RMX_SRQ_DEPTH=16 RMX_LOG=error -- "$bin/rmx-burst" rdma 200 0 0
run undrained RMX_RNR_RETRY=0 RMX_TEST_QP_ERR_FAILS=1 -- "$bin/rmx-conformance-undrained" rdma
[ -x "$bin/rmx-auth-test" ] && run auth RMX_RNR_RETRY=0 -- "$bin/rmx-auth-test" rdma
run group RMX_RNR_RETRY=0 -- "$bin/rmx-group" rdma
run forge RMX_RNR_RETRY=0 RMX_GUARD_STRIKES=0 -- "$bin/rmx-key-forge" rdma
run examples-echo RMX_LOG=warn -- "$here/echo_check.sh" "$bin" rdma
run examples-kv RMX_RNR_RETRY=0 -- "$here/kv_check.sh" "$bin" rdma
run examples-spin RMX_LOG=warn -- "$here/spin_check.sh" "$bin" rdma
run examples-bulk-copy RMX_LOG=warn -- "$here/bulk_copy_check.sh" "$bin" rdma
run faults-kill RMX_LOG=warn -- "$here/faults/fault_check.sh" "$bin" rdma none:msgs none:rpc \
  none:write none:idle kill:msgs kill:rpc kill:write kill:idle
run verbs-threads RMX_RNR_RETRY=0 -- "$bin/rmx-verbs-threads" rdma
# last: it takes the port down for good
run verbs-faults RMX_RNR_RETRY=0 -- "$bin/rmx-verbs-faults" rdma
exit $failed
