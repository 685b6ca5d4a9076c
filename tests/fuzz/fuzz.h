/* SPDX-License-Identifier: BSD-3-Clause */
/* What every fuzz target shares: libFuzzer's entry points and a check that
 * fails loudly (libFuzzer keeps the input that broke a property). */
#ifndef RMX_FUZZ_H
#define RMX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: property does not hold: %s\n", __FILE__,        \
              __LINE__, #cond);                                               \
      abort();                                                                \
    }                                                                         \
  } while (0)

/* The tcp transport's id inside packed keys, from the registry. */
static inline uint8_t fuzz_tcp_wire_id(void)
{
  int slot;
  const char *why;
  return rmx__tp_lookup("tcp", &slot, &why) == 0 ? rmx__tp_ops(slot)->wire_id : 0;
}

#endif
