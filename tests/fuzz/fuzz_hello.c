/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx__wire_hello_decode and the range after it: the 32-byte handshake. An
 * accepted hello re-encodes to the bytes it came from; a refusal is told
 * apart the documented way (wrong magic or short: EPROTO; right magic, a
 * lowest version past this build's highest: EVERSION); whatever the bytes
 * after it say, the agreed version lies in both ranges.
 */
#include <string.h>

#include "fuzz.h"
#include "rmx_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  rmx_wire_hello_t h;
  int rc = rmx__wire_hello_decode(data, size, &h);
  int magic = size >= 4 && rmx_get32(data) == RMX_WIRE_MAGIC;
  int v1 = size >= 6 && rmx_get16(data + 4) <= RMX_WIRE_VERSION;
  if (!magic || size < 6) {
    FUZZ_CHECK(rc == RMX_EPROTO);
  } else if (!v1) {
    FUZZ_CHECK(rc == RMX_EVERSION);
    FUZZ_CHECK(h.version == rmx_get16(data + 4));
  } else if (size < RMX_WIRE_HELLO_LEN) {
    FUZZ_CHECK(rc == RMX_EPROTO);
  } else {
    /* a longer hello from a later minor revision: the first 32 bytes count */
    FUZZ_CHECK(rc == 0);
    uint8_t out[RMX_WIRE_HELLO_LEN];
    rmx__wire_hello_encode(&h, out);
    FUZZ_CHECK(memcmp(out, data, sizeof(out)) == 0);
    rmx_wire_range_t r;
    int has = rmx__wire_range_decode(data + RMX_WIRE_HELLO_LEN, size - RMX_WIRE_HELLO_LEN, &r);
    uint16_t v, high = has && r.highest > h.version ? r.highest : h.version;
    uint32_t f;
    if (rmx__wire_version_agree(h.version, has ? &r : NULL, &v, &f) == 0) {
      FUZZ_CHECK(v >= h.version && v <= high);
      FUZZ_CHECK(v >= RMX_WIRE_VERSION_MIN && v <= RMX_WIRE_VERSION);
      FUZZ_CHECK((f & ~RMX_FEAT_ALL) == 0);
    } else {
      FUZZ_CHECK(high < RMX_WIRE_VERSION_MIN);
    }
  }
  return 0;
}
