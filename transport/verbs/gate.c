/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A listener group's connection-manager listener (src/conn/group.c): one
 * rdma_cm id listening on its own event channel, whose fd every member's
 * loop watches. A connect request taken from it moves, with
 * rdma_migrate_id, to the event channel of the member that will own the
 * connection, before that member sees it: its later events (the peer
 * giving up, the connection established) arrive there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

struct rmx_tp_gate {
  struct rdma_event_channel *ech;
  struct rdma_cm_id *id;
};

int rmx__vb_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **out, int *fd)
{
  rmx_tp_gate_t *g = calloc(1, sizeof(*g));
  if (!g)
    return RMX_ENOMEM;
  int rc = 0;
  if (!(g->ech = rdma_create_event_channel()) || vb_set_nonblock(g->ech->fd))
    rc = RMX_ENODEV;
  else if (rdma_create_id(g->ech, &g->id, NULL, RDMA_PS_TCP) ||
           rdma_bind_addr(g->id, (struct sockaddr *)sa) || rdma_listen(g->id, VB_BACKLOG))
    rc = rmx__vb_err_from_errno(errno);
  if (rc) {
    rmx__vb_gate_close(g);
    return rc;
  }
  *fd = g->ech->fd;
  *out = g;
  return 0;
}

int rmx__vb_gate_addr(rmx_tp_gate_t *g, struct sockaddr_storage *ss)
{
  const struct sockaddr *sa = rdma_get_local_addr(g->id);
  memset(ss, 0, sizeof(*ss));
  memcpy(ss, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                            : sizeof(struct sockaddr_in));
  return 0;
}

/* Only connect requests come to this channel: the listener's own events
 * (its device going away) are acknowledged and left to the members, whose
 * own channels report them for their connections. */
int rmx__vb_gate_take(rmx_tp_gate_t *g, rmx_tp_raw_t **raw)
{
  struct rdma_cm_event *ev;
  while (rdma_get_cm_event(g->ech, &ev) == 0) {
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(ev);
      continue;
    }
    vb_held_t *h = malloc(sizeof(*h));
    struct rdma_cm_id *id = ev->id;
    size_t len = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
    if (h) {
      h->id = id;
      h->len = len < sizeof(h->pd) ? len : sizeof(h->pd);
      memcpy(h->pd, ev->param.conn.private_data, h->len);
    }
    rdma_ack_cm_event(ev);
    if (!h) {
      rmx__vb_refuse_id(id, RMX_ENOMEM);
      return RMX_ENOMEM;
    }
    id->context = NULL;
    *raw = &h->raw;
    return 0;
  }
  return errno == EAGAIN || errno == EWOULDBLOCK ? RMX_EAGAIN : rmx__vb_err_from_errno(errno);
}

int rmx__vb_gate_give(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, struct rmx_tp *tp)
{
  vb_held_t *h = rmx_container_of(raw, vb_held_t, raw);
  return rdma_migrate_id(h->id, tp ? tp->ech : g->ech) ? rmx__vb_err_from_errno(errno) : 0;
}

void rmx__vb_gate_drop(rmx_tp_raw_t *raw)
{
  vb_held_t *h = rmx_container_of(raw, vb_held_t, raw);
  rmx__vb_refuse_id(h->id, RMX_ECONNREFUSED);
  free(h);
}

void rmx__vb_gate_close(rmx_tp_gate_t *g)
{
  if (g->id)
    rdma_destroy_id(g->id);
  if (g->ech)
    rdma_destroy_event_channel(g->ech);
  free(g);
}
