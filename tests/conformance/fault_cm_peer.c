/* SPDX-License-Identifier: BSD-3-Clause */
/* A peer whose rdma_cm connections fail: see fault_cm_peer.h. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "fault_cm_peer.h"
#include "rawpeer.h"

/* Wait on the bad peer's own channel for @p want; 0 if it came. */
static int cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(ch, &ev) != 0)
    return -1;
  int got = ev->event;
  rdma_ack_cm_event(ev);
  return got == (int)want ? 0 : -1;
}

/*
 * One failing connection over verbs, in one of four ways (even attempts
 * the last, the others in turn): connected, then dropped at once (the
 * server sees a disconnect); the server's reply refused (no QP here: the
 * request names a made-up QP number); abandoned right after the request;
 * the server's reply left unanswered, the id kept (the server's half-made
 * connection holds a handshake slot until its handshake limit). Each id
 * has its own event channel, so a destroyed one leaves nothing behind.
 */
#define KEPT_MAX 4096
static struct rdma_cm_id *kept[KEPT_MAX];
static struct rdma_event_channel *kept_ch[KEPT_MAX];
static int nkept;

const char *fault_cm_fail_once(const struct sockaddr_in *sa, int attempt)
{
  int way = attempt % 2 == 0 ? 3 : (attempt / 2) % 3;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id;
  if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) != 0)
    return "rdma_create_id failed";
  if (rdma_resolve_addr(id, NULL, (struct sockaddr *)sa, 2000) != 0 ||
      cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED) != 0 || rdma_resolve_route(id, 2000) != 0 ||
      cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED) != 0)
    return "cannot resolve the server";
  uint8_t hello[HELLO_LEN];
  hello_t h = hello_default();
  hello_enc(hello, &h);
  struct rdma_conn_param p = {.private_data = hello, .private_data_len = HELLO_LEN,
                              .responder_resources = 1, .initiator_depth = 1,
                              .retry_count = 3, .rnr_retry_count = 3};
  if (way == 0) {
    struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = 4, .max_recv_wr = 4,
                                          .max_send_sge = 1, .max_recv_sge = 1}};
    if (rdma_create_qp(id, NULL, &qa) != 0)
      return "rdma_create_qp failed";
  } else {
    p.qp_num = 0x4242 + (uint32_t)attempt;
  }
  if (rdma_connect(id, &p) != 0)
    return "rdma_connect failed";
  if (way == 0)
    (void)cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED); /* or refused: the server's choice */
  else if (way != 2)
    (void)cm_wait(ch, RDMA_CM_EVENT_CONNECT_RESPONSE);
  if (way == 3 && nkept < KEPT_MAX) {
    kept_ch[nkept] = ch;
    kept[nkept++] = id;
    return NULL;
  }
  if (id->qp)
    rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return NULL;
}

void fault_cm_end(void)
{
  for (int i = 0; i < nkept; i++) {
    rdma_destroy_id(kept[i]);
    rdma_destroy_event_channel(kept_ch[i]);
  }
  nkept = 0;
}
