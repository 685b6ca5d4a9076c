/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The 64-byte messages of a shared-memory channel's Unix socket (chan.h;
 * docs/protocol.md, "Shared memory (shm://)"): the set-up's hello and
 * answer, the bye, one copy's offer and verdict. Pure code with no I/O.
 */
#include <string.h>

#include "../../src/base/bytes.h"
#include "chan.h"

void rmx__shm_msg_put(uint8_t m[RMX_SHM_MSG], uint32_t magic, uint32_t word, int32_t status,
                      const char *boot_id)
{
  memset(m, 0, RMX_SHM_MSG);
  rmx_put32(m, magic);
  rmx_put16(m + 4, 1);
  rmx_put16(m + 6, RMX_SHM_MSG);
  rmx_put32(m + 8, word);
  rmx_put32(m + 12, (uint32_t)status);
  if (boot_id)
    memcpy(m + 16, boot_id, RMX_SHM_BOOT_ID_LEN);
}

const char *rmx__shm_msg_check(const uint8_t *m, ssize_t len, uint32_t magic, uint32_t *word,
                               int32_t *status, char boot_id[RMX_SHM_BOOT_ID_LEN + 1])
{
  if (len != RMX_SHM_MSG)
    return len < RMX_SHM_MSG ? "a set-up message came short" : "a set-up message came too long";
  if (rmx_get32(m) != magic)
    return magic == RMX_SHM_HELLO_MAGIC    ? "the peer's hello is no rmx shm hello (magic)"
           : magic == RMX_SHM_ANSWER_MAGIC ? "the peer's answer is no rmx shm answer (magic)"
                                           : "the peer sent something other than a bye";
  if (rmx_get16(m + 4) != 1)
    return "the peer speaks a set-up version this build does not";
  if (rmx_get16(m + 6) != RMX_SHM_MSG)
    return "a set-up message's length field is wrong";
  for (unsigned i = 16 + RMX_SHM_BOOT_ID_LEN; i < RMX_SHM_MSG; i++)
    if (m[i] != 0)
      return "a set-up message's reserved bytes are not zero";
  *word = rmx_get32(m + 8);
  *status = (int32_t)rmx_get32(m + 12);
  if (!boot_id)
    return NULL;
  for (unsigned i = 0; i < RMX_SHM_BOOT_ID_LEN; i++) {
    char c = (char)m[16 + i];
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return "the peer's boot id is malformed"; /* and is not printed */
    boot_id[i] = c;
  }
  boot_id[RMX_SHM_BOOT_ID_LEN] = '\0';
  return NULL;
}
