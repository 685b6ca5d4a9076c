/* SPDX-License-Identifier: BSD-3-Clause */
/* Error conversions at the edges. Base layer. */
#ifndef RMX_BASE_ERROR_H
#define RMX_BASE_ERROR_H

#include <stdint.h>

/* libuv status -> RMX_E* (0 stays 0; what rmx does not name is RMX_EIO). */
int rmx__uv_err(int uv_status);

/* A status that came off the wire: 0 or an RMX_E* code as sent; any other
 * value (positive, or a negative one rmx has no name for) becomes RMX_EIO. */
int32_t rmx__wire_status(int32_t v);

/* The status of a peer's refusal of our connect (a REJECT): an RMX_E* code
 * as sent; anything else (0, positive, a negative one rmx has no name for)
 * becomes RMX_ECONNREFUSED: the peer refused without saying why. */
int32_t rmx__reject_status(int32_t v);

/* For the log line of a listen that failed with rc: what a user can do
 * about it, as " (...)", or "". */
const char *rmx__listen_hint(int rc);

#endif
