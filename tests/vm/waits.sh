# SPDX-License-Identifier: BSD-3-Clause
# Shell helpers for the VM and fault scripts (sourced, bash).

# wait_for SECONDS COMMAND...: poll every 50 ms; 1 on timeout.
wait_for() {
  local n=$(($1 * 20)); shift
  while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.05; n=$((n - 1)); done
  return 1
}

# stuck_report PID: where each of PID's threads waits in the kernel (its
# wait channel and stack), for a process that outlived its bounds.
stuck_report() {
  local t
  for t in /proc/"$1"/task/*; do
    echo "  thread ${t##*/}: $(cat "$t/wchan" 2>/dev/null)"
    sed 's/^/    /' "$t/stack" 2>/dev/null
  done
}
