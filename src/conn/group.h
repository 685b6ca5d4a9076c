/* SPDX-License-Identifier: BSD-3-Clause */
/* Listener groups (group.c) and what they use of connect.c. */
#ifndef RMX_CONN_GROUP_H
#define RMX_CONN_GROUP_H

#include "../rmx_int.h"

/* connect.c: a listener of ctx on transport tpi, bound to sa, or a group
 * member's (sa NULL); the transport instance is opened first. */
int rmx__listener_open(rmx_ctx_t *ctx, int tpi, const struct sockaddr *sa,
                       rmx_accept_cb on_accept, void *arg, rmx_listener_t **out);

/* rt/conn.c: "scheme://address:port" into buf; RMX_EINVAL when it does not fit. */
int rmx__uri_of(const char *scheme, const struct sockaddr_storage *ss, char *buf, size_t len);

/* A member's listener is closing: hand on what it has not taken. */
void rmx__group_leave(rmx_listener_t *l);
/* The group's address, for rmx_listener_uri of a member. */
int rmx__group_addr(rmx_listener_t *l, struct sockaddr_storage *ss);

#endif
