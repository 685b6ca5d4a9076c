/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx__rkey_decode: a packed remote key, as an application hands it over
 * from its peer (rmx_rkey_unpack). Layout: first byte of the input picks the
 * transport asked for (low 3 bits) and whether the harness seals the blob
 * with a correct CRC-32C first (bit 7), so the fuzzer gets past the
 * checksum; the rest is the blob (entries per transport and lane, the
 * lanes of rails). What is accepted must satisfy the
 * documented invariants, and a one-bit flip of an accepted key must be
 * refused (the CRC catches every single-bit error).
 */
#include <string.h>

#include "fuzz.h"
#include "rmx_int.h"

#define RKEY_HDR 24

/* CRC-32C over the blob with its CRC field as zero, as src/mem.c seals it. */
static uint32_t seal(const uint8_t *p, size_t n)
{
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    crc ^= i >= 4 && i < 8 ? 0 : p[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
  }
  return ~crc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  uint8_t wire_id = data[0] & 7;
  int sealed = data[0] & 0x80;
  size_t len = size - 1;
  uint8_t *blob = malloc(len ? len : 1); /* exact size, for ASan */
  if (!blob)
    return 0;
  memcpy(blob, data + 1, len);
  if (sealed && len >= 8)
    rmx_put32(blob + 4, seal(blob, len));

  rmx_rkey_t k;
  memset(&k, 0, sizeof(k));
  int rc = rmx__rkey_decode(blob, len, wire_id, &k);
  FUZZ_CHECK(rc == 0 || rc == RMX_EINVAL || rc == RMX_EVERSION || rc == RMX_ENOENT);
  if (rc == 0) {
    FUZZ_CHECK(len >= RKEY_HDR && (len - RKEY_HDR) % 16 == 0);
    FUZZ_CHECK(blob[1] >= 1 && blob[1] <= 8);
    FUZZ_CHECK(k.len > 0 && k.base + k.len > k.base);
    FUZZ_CHECK(k.access >= 1 && k.access <= 15);
    FUZZ_CHECK(k.base == rmx_get64(blob + 8) && k.len == rmx_get64(blob + 16));
    /* the key is the lane-0 entry of the transport asked for, and each
     * lane's key that entry's (one entry per transport and lane, lanes 0 .. 7) */
    int hits = 0;
    unsigned lanes = 0;
    for (size_t e = RKEY_HDR; e + 16 <= len; e += 16) {
      FUZZ_CHECK(blob[e + 1] <= 7);
      if (blob[e] != wire_id)
        continue;
      FUZZ_CHECK(!(lanes & (1u << blob[e + 1])));
      lanes |= 1u << blob[e + 1];
      FUZZ_CHECK(k.lane_key[blob[e + 1]] == rmx_get64(blob + e + 8));
      if (blob[e + 1] == 0) {
        hits++;
        FUZZ_CHECK(k.key == rmx_get64(blob + e + 8));
      }
    }
    FUZZ_CHECK(hits == 1 && k.lanes == lanes);
    /* any one flipped bit is refused; the CRC picks which */
    size_t bit = rmx_get32(blob + 4) % (len * 8);
    blob[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    rmx_rkey_t k2;
    FUZZ_CHECK(rmx__rkey_decode(blob, len, wire_id, &k2) != 0);
  }
  free(blob);
  return 0;
}
