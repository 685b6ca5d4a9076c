#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Python package: build its C module against this build's librmx into
# BUILD/python-SCHEME (the package's sources copied beside it), then run its
# pytest suite there with Debian's python3 (pytest, pytest-asyncio, cffi).
#   [RMXPY_RUNNER=tests/vm/run-in-vm] python_check.sh SOURCE BUILD [tcp|rdma|auto] [PYTEST ARGS...]
# The module is built here; with RMXPY_RUNNER the suite alone runs through
# it (inside the SoftRoCE VM, where a compiler runs under emulation).
# Under a sanitizer build of librmx, the ASan runtime is preloaded into the
# interpreter (which is not instrumented) and leak checks are off: CPython
# keeps memory to its exit by design.
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) scheme=${3:-tcp}
shift $(($# < 3 ? $# : 3))
py=/usr/bin/python3
out=$build/python-$scheme
rm -rf "$out/rmx"
mkdir -p "$out"
cp -r "$src/python/rmx" "$out/rmx"
RMX_BUILD_DIR=$build RMX_SOURCE_DIR=$src "$py" "$src/python/rmx_build.py" "$out" >/dev/null
run=(env PYTHONPATH="$out" RMXPY_BIN="$build/bin")
if grep -q libasan <<<"$(ldd "$build/lib/librmx.so")"; then # read whole: no SIGPIPE under pipefail
  run+=(LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)")
  run+=(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0") # the last one counts
fi
cd "$out"
# Where it runs: the address to listen on (the VM's, in the VM), and in the
# VM temporary files on its tmpfs (the host's tree is 9p there, where
# pytest's unlinked capture files cannot be truncated).
exec ${RMXPY_RUNNER:-} bash -c '
  export RMXPY_URI="$0://${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}:0"
  [ -z "${RXE_VM:-}" ] || export TMPDIR=/dev/shm
  exec "$@"' "$scheme" "${run[@]}" "$py" -m pytest -q -p no:cacheprovider \
  -c "$src/python/pyproject.toml" --rootdir "$src/python" "$src/python/tests" "$@"
