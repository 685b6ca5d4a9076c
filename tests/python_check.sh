#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Python package: build its C module against this build's librmx into
# BUILD/python-SCHEME (the package's sources copied beside it), then run its pytest
# suite there with Debian's python3 (pytest, pytest-asyncio, cffi).
#   python_check.sh SOURCE BUILD [tcp|rdma] [PYTEST ARGS...]
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
if ldd "$build/lib/librmx.so" | grep -q libasan; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # the last one counts
fi
# In the VM the host's tree is 9p, where pytest's unlinked capture files
# cannot be truncated: keep temporary files on the VM's tmpfs.
[ -z "${RXE_VM:-}" ] || export TMPDIR=/dev/shm
export RMXPY_URI="$scheme://${RMX_TEST_ADDR:-${RXE_VM_ADDR:-127.0.0.1}}:0"
export RMXPY_BIN=$build/bin
cd "$out"
PYTHONPATH=$out exec "$py" -m pytest -q -p no:cacheprovider -c "$src/python/pyproject.toml" \
  --rootdir "$src/python" "$src/python/tests" "$@"
