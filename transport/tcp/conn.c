/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TCP connections: their life from the socket to CLOSED, the handshake
 * (HELLO, then HELLO_ACK or REJECT) within the connect timeout, and the
 * frames of an open connection, handed to the core, the initiator or the
 * target. Which frame may come in which state is frame.c's (rmx__tf_check).
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "tcp.h"

/* ---- the handshake ---- */

/* The handshake is over: tell the owner (data/len: the peer's hello, on the
 * active side). */
static void establish(rmx_tp_conn_t *tc, const void *data, size_t len)
{
  tc->established = 1;
  uv_timer_stop(&tc->timer);
  tc_ev(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, data, len);
}

/* The peer's first frame beat our HELLO_ACK's write callback: established
 * now. 0 when the owner closed the connection meanwhile. */
static int establish_early(rmx_tp_conn_t *tc)
{
  establish(tc, NULL, 0);
  return !tc->closing && !tc->dead;
}

void rmx__tcp_conn_acked(rmx_tp_conn_t *tc, int status)
{
  if (status == 0 && !tc->established && !tc->closing && !tc->dead)
    establish(tc, NULL, 0);
}

/* An incoming peer's handshake has a short limit of its own: a peer that
 * connects and says nothing holds a handshake slot no longer. */
static uint32_t handshake_ms(const rmx_tp_conn_t *tc)
{
  const rmx_config_t *cfg = tc->tp->env->cfg;
  return tc->passive ? cfg->handshake_timeout_ms : cfg->connect_timeout_ms;
}

static void timer_cb(uv_timer_t *t)
{
  rmx_tp_conn_t *tc = t->data;
  char peer[80] = "?";
  if (tc->tp->env->log_level >= RMX_LOG_WARN)
    rmx__tcp_peer(tc, peer, sizeof(peer));
  /* An incoming peer can open silent connections at will. */
  if (tc->passive)
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_handshakes, uv_now(tc->tp->loop), WARN,
                       "%s: handshake with incoming peer %s not finished within %u ms "
                       "(RMX_HANDSHAKE_TIMEOUT_MS)", tc->tp->name, peer, handshake_ms(tc));
  else
    RMX_TP_LOG(tc->tp->env, WARN, "%s: handshake with %s not finished within %u ms",
               tc->tp->name, peer, handshake_ms(tc));
  rmx__tcp_fail(tc, RMX_ETIMEDOUT);
}

/* ---- life ---- */

rmx_tp_conn_t *rmx__tcp_conn_new(rmx_tp_t *tp, int passive)
{
  const rmx_config_t *cfg = tp->env->cfg;
  rmx_tp_conn_t *tc = calloc(1, sizeof(*tc));
  if (!tc)
    return NULL;
  tc->tp = tp;
  tc->passive = (uint8_t)passive;
  tc->max_frame = cfg->eager_size;
  tc->rbuf = tc->rsmall; /* the large one when traffic needs it (stream.c) */
  tc->rcap = RBUF_SMALL;
  rmx_list_init(&tc->rd_pending);
  rmx_list_init(&tc->lst_link);
  rmx_list_init(&tc->srvq);
  rmx_list_init(&tc->srv_sent);
  rmx_list_init(&tc->srv_held);
  rmx_list_init(&tc->later_link);
  tc->by_fd = -1;
  rmx_list_push(&tp->conns, &tc->tp_link);
  tp->nconns++;
  tc->serial = ++tp->next_serial;
  uv_timer_init(tp->loop, &tc->timer);
  tc->timer.data = tc;
  tc->open_handles = 1;
  tp->pipe->open(tc);
  tp->live++;
  uv_timer_start(&tc->timer, timer_cb, handshake_ms(tc), 0);
  return tc;
}

/* Both handles are closed: every op is reported, then CLOSED. */
void rmx__tcp_conn_free(rmx_tp_conn_t *tc)
{
  rmx__tcp_pend_cancel(tc);
  rmx__tcp_target_drop(tc);
  if (tc->owner)
    tc_ev(tc, RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
  rmx_list_del(&tc->tp_link);
  tc->tp->nconns--;
  if (tc->by_fd >= 0 && tc->tp->by_fd[tc->by_fd] == tc)
    tc->tp->by_fd[tc->by_fd] = NULL;
  if (tc->rbuf != tc->rsmall)
    free(tc->rbuf);
  free(tc);
}

/* ---- ops ---- */

/*
 * A socket's options: no Nagle, and the kernel's own loss detection scaled
 * to the keepalive settings. rmx's keepalive frames find a silent peer;
 * these cover what frames cannot see: bytes we wrote that the peer's host
 * never acknowledges (TCP_USER_TIMEOUT) and a connection on which this side
 * only reads, for example a large read response coming in (keepalive
 * probes). Failures to set them are harmless: the frames still work.
 */
void rmx__tcp_sock_opts(rmx_tp_conn_t *tc)
{
  const rmx_config_t *cfg = tc->tp->env->cfg;
  uv_os_fd_t fd;
  uv_tcp_nodelay(&tc->h, 1);
  if (!cfg->keepalive_ms || uv_fileno((uv_handle_t *)&tc->h, &fd) != 0)
    return;
  int on = 1, idle = (int)(cfg->keepalive_timeout_ms / 2000), cnt = 3;
  int intvl = (int)(cfg->keepalive_timeout_ms / 3000);
  unsigned int user = cfg->keepalive_timeout_ms;
  idle = idle < 1 ? 1 : idle;
  intvl = intvl < 1 ? 1 : intvl;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}

void rmx__tcp_connected(rmx_tp_conn_t *tc, int status)
{
  int rc;
  if (tc->closing)
    return;
  if (status) {
    rmx__tcp_fail(tc, status);
    return;
  }
  if ((rc = rmx__tcp_write_small(tc, W_CTRL, TF_HELLO, tc->hello, tc->hello_len)) != 0 ||
      (rc = rmx__tcp_read_start(tc)) != 0) {
    rmx__tcp_fail(tc, rc);
    return;
  }
  tc->state = TC_HELLO_SENT;
}

static void connect_cb(uv_connect_t *req, int status)
{
  rmx_tp_conn_t *tc = req->data;
  if (status == UV_ECANCELED || tc->closing)
    return;
  if (status == 0)
    rmx__tcp_sock_opts(tc);
  rmx__tcp_connected(tc, rmx__uv_err(status));
}

int rmx__tcp_connect(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                     void *owner, rmx_tp_conn_t **out)
{
  if (len > TF_HELLO_MAX)
    return RMX_EINVAL;
  rmx_tp_conn_t *tc = rmx__tcp_conn_new(tp, 0);
  if (!tc)
    return RMX_ENOMEM;
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  tc->state = TC_CONNECTING;
  tc->creq.data = tc;
  int rc = uv_tcp_connect(&tc->creq, &tc->h, sa, connect_cb);
  if (rc) {
    if (rc == UV_EMFILE || rc == UV_ENFILE) {
      struct rlimit rl = {0, 0};
      tp->refused++;
      getrlimit(RLIMIT_NOFILE, &rl);
      RMX_TP_LOG_LIMITED(tp->env, &tp->rl_nofd, uv_now(tp->loop), ERROR,
                         "tcp: cannot connect: out of file descriptors (%s; RLIMIT_NOFILE %llu, "
                         "%u connections here)", rc == UV_ENFILE ? "the system's, fs.file-max" :
                         "the process's", (unsigned long long)rl.rlim_cur, tp->nconns);
    }
    rmx__tcp_conn_close(tc);
    return rmx__uv_err(rc);
  }
  tc->owner = owner;
  *out = tc;
  return 0;
}

int rmx__tcp_accept(rmx_tp_conn_t *tc, void *owner, const void *hello, size_t len)
{
  if (len > TF_HELLO_MAX)
    return RMX_EINVAL;
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  tc->owner = owner;
  tc->state = TC_UP;
  int rc = rmx__tcp_write_small(tc, W_HELLO_ACK, TF_HELLO_ACK, tc->hello, len);
  if (rc)
    tc->owner = NULL;
  return rc;
}

void rmx__tcp_reject(rmx_tp_conn_t *tc, int status)
{
  uint8_t body[TF_REJECT_LEN];
  tc->owner = NULL;
  tc->state = TC_REJECTING;
  rmx__tf_reject_put(body, status);
  tc->tp->pipe->read_stop(tc);
  if (rmx__tcp_write_small(tc, W_REJECT, TF_REJECT, body, sizeof(body)) != 0)
    rmx__tcp_conn_close(tc);
}

void rmx__tcp_ready(rmx_tp_conn_t *tc) { tc->ready = 1; }

/* Every TCP connection can do atomics: the target runs them. */
unsigned rmx__tcp_caps(rmx_tp_conn_t *tc) { return RMX_TP_CAP_ATOMIC; }

/* ---- frames ---- */

static void on_hello(rmx_tp_conn_t *tc, const uint8_t *body, size_t blen)
{
  rmx_tp_listener_t *l = tc->lst;
  rmx_list_del(&tc->lst_link);
  l->npending--;
  tc->lst = NULL;
  l->tp->env->incoming(l->owner, tc, body, blen); /* answers with accept or reject */
  l->tp->up->slot_free(l); /* the next peer waiting may come in */
}

/*
 * May the peer's remote requests be served? Only once the core has
 * accepted the peer: with authentication, not before its proof. A request
 * that beats our HELLO_ACK's write callback establishes the connection
 * first, as a message does.
 */
static int remote_allowed(rmx_tp_conn_t *tc)
{
  if (!tc->ready && !tc->established && !establish_early(tc))
    return 0;
  if (!tc->ready) {
    rmx__tcp_proto_fail(tc, "remote request before the peer was accepted (authenticated)");
    return 0;
  }
  return 1;
}

void rmx__tcp_conn_frame(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen)
{
  switch (kind) {
  case TF_HELLO:
    on_hello(tc, body, blen);
    break;
  case TF_HELLO_ACK:
    tc->state = TC_UP;
    establish(tc, body, blen);
    break;
  case TF_REJECT: {
    int32_t st = rmx__tf_reject_get(body);
    rmx__tcp_fail(tc, rmx__reject_status(st));
    break;
  }
  case TF_FRAME:
    if (!tc->established && !establish_early(tc))
      return;
    tc->tp->env->recv(tc->owner, body, blen);
    break;
  case TF_RD_REQ:
  case TF_WR_REQ:
  case TF_AT_REQ:
  case TF_RD_DIR:
  case TF_WR_DIR:
    if (remote_allowed(tc))
      rmx__tcp_serve(tc, kind, body, blen);
    break;
  case TF_RD_DONE:
    if (remote_allowed(tc))
      rmx__tcp_pulled(tc, rmx__tf_done_get(body));
    break;
  default: /* the responses */
    rmx__tcp_on_resp(tc, kind, body, blen);
    break;
  }
}
