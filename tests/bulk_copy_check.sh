#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rmx-bulk-copy end to end: files of 0 B, 1 B and 50 MiB + 123 B copied,
# compared with cmp. Usage: bulk_copy_check.sh BINDIR SCHEME
set -euo pipefail
bin=$1 scheme=$2
addr=${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}
# In the SoftRoCE VM the files live in the VM's own tmpfs, not on the host's
# file system that it mounts over 9p: there, RDMA reads of a file mapped
# from 9p stalled the QP for good in about half the runs (no completion, no
# retry error, on kernels 6.1.0-47 to -56), with rmx and the same copy
# from /dev/shm fine every time.
dir=$(mktemp -d -p "${RXE_VM:+/dev/shm}")
srv=
# A server left behind would hold ctest's pipe open until its timeout.
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
# On a failure, what the server and the fetch said.
trap 'echo "bulk_copy_check: failed at line $LINENO (status $?); server:"; cat "$dir/log";
      echo "fetch:"; cat "$dir/err"' ERR
: >"$dir/empty"
printf x >"$dir/one"
head -c $((50 * 1048576 + 123)) /dev/urandom >"$dir/big"
for f in empty one big; do
  # Emptied here, not by the redirection: the background child makes that
  # when it gets to it, and the loop below could read the last server's line.
  : >"$dir/log"
  "$bin/rmx-bulk-copy" serve "$scheme://$addr:0" "$dir/$f" >>"$dir/log" &
  srv=$!
  # The server checksums the file first: 50 MiB under ASan on a loaded
  # machine took longer than a fixed 30 s once. Wait while it lives.
  while kill -0 "$srv" 2>/dev/null && ! grep -q offering "$dir/log"; do sleep 0.1; done
  uri=$(sed -n 's/.* on \(.*\)$/\1/p' "$dir/log")
  [ -n "$uri" ] || { echo "bulk_copy_check: the server offered nothing"; exit 1; }
  # A progress line every 10 ms once the copy lasts that long (a long
  # copy said nothing until it ended): the 50 MiB one must show some.
  : >"$dir/err"
  "$bin/rmx-bulk-copy" fetch "$uri" "$dir/$f.copy" 10 2>"$dir/err"
  wait "$srv"
  srv=
  cmp "$dir/$f" "$dir/$f.copy"
  cat "$dir/err" >&2
  if [ "$f" = big ] && ! grep -qE '^fetch: [0-9]+ of 50 MiB \([0-9]+%\), [0-9.]+ MiB/s$' "$dir/err"; then
    echo "bulk_copy_check: no progress line during the 50 MiB copy"; exit 1
  fi
done
echo "bulk_copy_check: 3 files copied intact over $scheme"
