/* SPDX-License-Identifier: BSD-3-Clause */
/* Transfer requests and notifications (src/xfer/); included by rmx_int.h. */
#ifndef RMX_XFER_XFER_H
#define RMX_XFER_XFER_H

/* Posted transfer requests: parts go from the connection's rmaq. */
extern const rmx__op_class_t rmx__xfer_class;
/* The notify_deliver upcall: on_notify now, or kept for rmx_notify_take
 * (1: its credit goes back when taken). */
int rmx__notify_deliver(rmx_conn_t *c, const void *data, size_t len);
/* c is being freed: its requests forget it, its kept notifications go. */
void rmx__xfer_conn_gone(rmx_conn_t *c);
void rmx__notify_conn_gone(rmx_conn_t *c);

#endif
