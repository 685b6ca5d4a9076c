/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's version, for programs that compare it with the header's. */
#include <rmx/rmx.h>

unsigned rmx_version(void) { return RMX_VERSION; }

#define RMX_STR_(x) #x
#define RMX_STR(x) RMX_STR_(x)

const char *rmx_version_string(void)
{
  return RMX_STR(RMX_VERSION_MAJOR) "." RMX_STR(RMX_VERSION_MINOR) "." RMX_STR(RMX_VERSION_PATCH);
}
