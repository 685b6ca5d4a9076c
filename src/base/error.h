/* SPDX-License-Identifier: BSD-3-Clause */
/* Error conversions at the edges. Base layer. */
#ifndef RMX_BASE_ERROR_H
#define RMX_BASE_ERROR_H

#include <stdint.h>

/* libuv status -> RMX_E* (0 stays 0; what rmx does not name is RMX_EIO). */
int rmx__uv_err(int uv_status);

/* A status that came off the wire: 0 or an rmx error code as sent; any
 * other value (positive, or beyond the codes rmx uses) becomes RMX_EIO. */
int32_t rmx_wire_status(int32_t v);

#endif
