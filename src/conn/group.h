/* SPDX-License-Identifier: BSD-3-Clause */
/* Listeners and listener groups (group.c). */
#ifndef RMX_CONN_GROUP_H
#define RMX_CONN_GROUP_H

#include "../rmx_int.h"

/* A listener of ctx on transport tpi, bound to sa, or a group member's
 * (sa NULL); the transport instance is opened first. */
int rmx__listener_open(rmx_ctx_t *ctx, int tpi, const struct sockaddr *sa,
                       rmx_accept_cb on_accept, void *arg, rmx_listener_t **out);


#endif
