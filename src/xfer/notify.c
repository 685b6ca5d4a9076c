/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Notifications at the target of a transfer request: DATA frames flagged
 * RMX_FF_NOTIFY, delivered in order with messages to on_notify, or kept
 * for rmx_notify_take() when the connection has none. A kept one holds its
 * receive credit until it is taken, so a peer can make this side keep no
 * more than it has receive buffers (as RPC requests waiting for a handler).
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

typedef struct notif {
  rmx_list_t link;
  size_t len;
  uint8_t data[];
} notif_t;

int rmx__notify_deliver(rmx_conn_t *c, const void *data, size_t len)
{
  if (c->cbs.on_notify) {
    c->cbs.on_notify(c, data, len, c->cbs_arg);
    return 0;
  }
  notif_t *n = malloc(sizeof(*n) + len);
  if (!n) {
    rmx__conn_down(c, RMX_ENOMEM);
    return 0;
  }
  n->len = len;
  if (len)
    memcpy(n->data, data, len);
  rmx_list_push(&c->notifq, &n->link);
  return 1;
}

int rmx_notify_take(rmx_conn_t *c, void *buf, size_t cap, size_t *len)
{
  if (!c || !len || (!buf && cap))
    return RMX_EINVAL;
  if (rmx_list_empty(&c->notifq))
    return RMX_EAGAIN;
  notif_t *n = rmx_container_of(c->notifq.next, notif_t, link);
  *len = n->len;
  if (n->len > cap)
    return RMX_EMSGSIZE;
  if (n->len)
    memcpy(buf, n->data, n->len);
  rmx_list_del(&n->link);
  free(n);
  if (c->state == RMX_CS_ESTABLISHED) {
    rmx__msg_credit_back(c);
    rmx__msg_maybe_return_credits(c);
    rmx__msg_progress(c);
  }
  return 0;
}

void rmx__notify_conn_gone(rmx_conn_t *c)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&c->notifq)) != NULL)
    free(rmx_container_of(n, notif_t, link));
}
