/* SPDX-License-Identifier: BSD-3-Clause */
/* Little-endian field access for wire formats. Base layer. Fields may be
 * unaligned: memcpy of a fixed size compiles to one load or store. */
#ifndef RMX_BASE_BYTES_H
#define RMX_BASE_BYTES_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RMX_LE16(v) __builtin_bswap16(v)
#define RMX_LE32(v) __builtin_bswap32(v)
#define RMX_LE64(v) __builtin_bswap64(v)
#else
#define RMX_LE16(v) (v)
#define RMX_LE32(v) (v)
#define RMX_LE64(v) (v)
#endif

static inline void rmx_put16(uint8_t *p, uint16_t v)
{
  v = RMX_LE16(v);
  memcpy(p, &v, 2);
}
static inline void rmx_put32(uint8_t *p, uint32_t v)
{
  v = RMX_LE32(v);
  memcpy(p, &v, 4);
}
static inline void rmx_put64(uint8_t *p, uint64_t v)
{
  v = RMX_LE64(v);
  memcpy(p, &v, 8);
}
static inline uint16_t rmx_get16(const uint8_t *p)
{
  uint16_t v;
  memcpy(&v, p, 2);
  return RMX_LE16(v);
}
static inline uint32_t rmx_get32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return RMX_LE32(v);
}
static inline uint64_t rmx_get64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return RMX_LE64(v);
}

#endif
