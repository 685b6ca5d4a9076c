/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one-sided target: remote reads, writes and atomics a peer asks of
 * us, served from registered memory after checking the key, the scope,
 * the bounds and the rights.
 *
 * The target never sends memory it no longer owns. A read is answered in
 * chunks written straight from the registered memory (no copy), a few at a
 * time, each after checking the registration still stands. Deregistering
 * memory while a chunk of it is in the socket's queue shuts the socket's
 * write side at once (the kernel then never reads that memory again) and
 * ends the connection: a peer that sends the FIN of a rendezvous before it
 * has read the message, so that the sender frees the buffer, only cuts
 * itself off. A write streams into place only while its registration
 * lives. Requests a peer may have outstanding here are bounded
 * (rma_window); past that the peer is cut off.
 */
#include <string.h>
#include <sys/socket.h>

#include "tcp.h"

#define TF_CHUNKS_OUT 4 /* read response frames queued at once per connection */

/* ---- registrations ---- */

rmx_tp_mem_t *rmx__tcp_mem_find(rmx_tp_t *tp, uint64_t key)
{
  rmx_list_t *head = &tp->mem[key % MEM_BUCKETS], *n;
  rmx_list_foreach(n, head) {
    rmx_tp_mem_t *m = rmx_container_of(n, rmx_tp_mem_t, link);
    if (m->key == key)
      return m;
  }
  return NULL;
}

static void mem_use(rmx_tp_mem_t *m) { m->uses++; }

static void mem_unuse(rmx_tp_mem_t *m)
{
  if (--m->uses == 0 && m->dead)
    free(m);
}

/* ---- the target checks everything first ---- */

static void refused(rmx_tp_conn_t *tc, const char *what, uint64_t len, uint64_t addr, int status)
{
  char peer[80] = "?";
  if (tc->tp->env->log_level >= RMX_LOG_WARN)
    rmx__tcp_peer(tc, peer, sizeof(peer));
  RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), WARN,
                     "%s: refused a remote %s of %llu bytes at 0x%llx from %s: %s", tc->tp->name, what,
                     (unsigned long long)len, (unsigned long long)addr, peer,
                     rmx_strerror(status));
}

/* The registration a request may use, or NULL with *status set. */
static rmx_tp_mem_t *check_access(rmx_tp_conn_t *tc, uint64_t key, uint64_t addr, uint64_t len,
                                  unsigned need, const char *what, int32_t *status)
{
  rmx_tp_mem_t *m = rmx__tcp_mem_find(tc->tp, key);
  *status = 0;
  if (!m || (m->scope ? m->scope != tc->serial : !m->open) || !(m->access & need) || addr < m->addr ||
      len > m->len || addr - m->addr > m->len - len)
    *status = RMX_EACCES;
  if (*status) {
    refused(tc, what, len, addr, *status);
    if (tc->owner) /* a guess, or a peer's bug: the guard counts it, unless stale */
      tc->tp->env->strike(tc->owner, &key);
    return NULL;
  }
  return m;
}

/* A new request to serve, if the peer keeps to the window. */
static srv_t *srv_new(rmx_tp_conn_t *tc, uint8_t kind, uint64_t id)
{
  if (tc->nsrv >= tc->tp->env->cfg->rma_window) {
    rmx__tcp_proto_fail(tc, "more remote requests outstanding than the window allows");
    return NULL;
  }
  srv_t *sv = rec_get(&tc->tp->free_srv, &tc->tp->nfree_srv, sizeof(*sv));
  if (!sv) {
    rmx__tcp_fail(tc, RMX_ENOMEM);
    return NULL;
  }
  memset(sv, 0, sizeof(*sv));
  sv->kind = kind;
  sv->id = id;
  sv->ready = 1;
  rmx_list_push(&tc->srvq, &sv->link);
  tc->nsrv++;
  return sv;
}

static void srv_free(rmx_tp_conn_t *tc, srv_t *sv)
{
  if (sv->m)
    mem_unuse(sv->m);
  tc->nsrv--;
  rec_put(&tc->tp->free_srv, &tc->tp->nfree_srv, &sv->link);
}

/* The connection is being freed: requests we were serving go (their writes
 * were cancelled with the handle), and so does a streaming write's use. */
void rmx__tcp_target_drop(rmx_tp_conn_t *tc)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&tc->srvq)) != NULL)
    srv_free(tc, rmx_container_of(n, srv_t, link));
  while ((n = rmx_list_pop(&tc->srv_sent)) != NULL)
    srv_free(tc, rmx_container_of(n, srv_t, link));
  while ((n = rmx_list_pop(&tc->srv_held)) != NULL)
    srv_free(tc, rmx_container_of(n, srv_t, link));
  if (tc->sink.m)
    mem_unuse(tc->sink.m);
}

/* ---- answers ---- */

/* A response frame is in the socket: its chunk no longer reads the memory,
 * and with its last frame the request leaves the window, unless it is a
 * direct read's yes whose done has not come: the peer may be pulling. */
static void resp_done(rmx_tp_conn_t *tc, srv_t *sv, int data, int last)
{
  if (data) {
    tc->chunks_out--;
    sv->inflight--;
  }
  if (last) {
    rmx_list_del(&sv->link);
    if (sv->hold && !sv->pulled)
      rmx_list_push(&tc->srv_held, &sv->link);
    else
      srv_free(tc, sv);
  }
}

/* The peer has pulled the bytes of the oldest direct read we said yes to
 * and not heard of since (answers and dones keep request order). One that
 * names another id, or none, is a broken peer. */
void rmx__tcp_pulled(rmx_tp_conn_t *tc, uint64_t id)
{
  srv_t *sv = NULL;
  rmx_list_t *n;
  int held = !rmx_list_empty(&tc->srv_held);
  if (held) {
    sv = rmx_container_of(tc->srv_held.next, srv_t, link);
  } else {
    rmx_list_foreach(n, &tc->srv_sent) { /* its answer's write not ended yet */
      srv_t *s = rmx_container_of(n, srv_t, link);
      if (s->hold && !s->pulled) {
        sv = s;
        break;
      }
    }
  }
  if (!sv || sv->id != id) {
    rmx__tcp_proto_fail(tc, "done for no direct read answered");
    return;
  }
  if (held) {
    rmx_list_del(&sv->link);
    srv_free(tc, sv);
  } else {
    sv->pulled = 1; /* freed when its write ends */
  }
}

/*
 * Write answers in request order. A read's data goes a chunk at a time,
 * straight from the registered memory, after checking the registration
 * still stands; deregistered before a chunk went, the rest of the read is
 * refused with RMX_EACCES (see tcp_mem_dereg for chunks already queued).
 *
 * A frame written at once (the usual case) is done here and now, not a
 * loop turn later when libuv would call back: the peer counts a request
 * until the response arrives, so the target must not count it longer, or
 * a peer that keeps the window could be cut off. What the socket cannot
 * take is done in rmx__tcp_resp_written.
 */
static void srv_pump(rmx_tp_conn_t *tc)
{
  rmx_list_t *n;
  while (tc->chunks_out < TF_CHUNKS_OUT && !tc->dead && !tc->closing && !tc->cut &&
         tc->state == TC_UP &&
         (n = tc->srvq.next) != &tc->srvq) {
    srv_t *sv = rmx_container_of(n, srv_t, link);
    size_t chunk = 0;
    if (!sv->ready)
      return; /* a write whose data is still arriving */
    if (sv->kind == TF_RD_RESP && sv->status == 0 && sv->m && sv->m->dead) {
      sv->status = RMX_EACCES;
      sv->hold = 0; /* a direct read: refused, so the peer pulls nothing */
      refused(tc, "read (deregistered while read)", sv->left, sv->addr, sv->status);
    }
    if (sv->kind == TF_RD_RESP && sv->status == 0)
      chunk = sv->left < TF_CHUNK ? sv->left : TF_CHUNK;
    wreq_t *w = rmx__tcp_wreq_get(tc, W_RESP, sv);
    if (!w) {
      rmx__tcp_fail(tc, RMX_ENOMEM);
      return;
    }
    tf_resp_t r = {.id = sv->id, .status = sv->status, .old = sv->old};
    size_t head = rmx__tf_resp_put(w->hdr, sv->kind, &r, chunk);
    uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, (unsigned)head),
                        uv_buf_init((char *)sv->addr, (unsigned)chunk)};
    if (chunk) {
      sv->addr += chunk;
      sv->left -= chunk;
      sv->inflight++;
      tc->chunks_out++;
      w->data = 1;
    }
    w->last = sv->kind != TF_RD_RESP || sv->status || sv->left == 0;
    if (w->last) { /* counted until this write completes */
      rmx_list_del(&sv->link);
      rmx_list_push(&tc->srv_sent, &sv->link);
    }
    int data = w->data, last = w->last;
    int rc = rmx__tcp_write_now(tc, w, bufs, chunk ? 2 : 1);
    if (rc == 1) {
      resp_done(tc, sv, data, last);
    } else if (rc) {
      if (chunk) {
        sv->inflight--;
        tc->chunks_out--;
      }
      rmx__tcp_fail(tc, rc);
      return;
    }
  }
}

void rmx__tcp_resp_written(rmx_tp_conn_t *tc, void *op, int data, int last, int status)
{
  resp_done(tc, op, data, last);
  if (status == 0)
    srv_pump(tc);
}

/* ---- deregistration while served ---- */

/* Does tc have data of m queued in its socket, or may its peer be
 * pulling from m (a direct read answered yes, its done not come)? */
int rmx__tcp_sends_from(rmx_tp_conn_t *tc, const rmx_tp_mem_t *m)
{
  rmx_list_t *lists[3] = {&tc->srvq, &tc->srv_sent, &tc->srv_held}, *n;
  for (int i = 0; i < 3; i++)
    rmx_list_foreach(n, lists[i]) {
      srv_t *sv = rmx_container_of(n, srv_t, link);
      if (sv->m == m && (sv->inflight || (i > 0 && sv->hold && !sv->pulled)))
        return 1;
    }
  return 0;
}

/* Memory whose data tc's socket still has queued is going away: shut the
 * write side now, so no write reads it again (they fail with EPIPE, which
 * the library's SIGPIPE setting makes harmless), and end the connection
 * from the loop (not from inside mem_dereg). */
void rmx__tcp_cut_writes(rmx_tp_conn_t *tc)
{
  char peer[80];
  if (tc->cut || tc->closing)
    return;
  tc->cut = 1;
  tc->tp->pipe->cut(tc);
  /* An incoming peer can cause this on every connection it makes (it
   * sends a rendezvous FIN before reading the data): limited then. */
  if (tc->passive)
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_cut, uv_now(tc->tp->loop), WARN, "%s: memory "
                       "%s was reading was released while its data was being sent or pulled (a "
                       "rendezvous FIN before the data arrived?): closing the connection",
                       tc->tp->name, rmx__tcp_peer(tc, peer, sizeof(peer)));
  else
    RMX_TP_LOG(tc->tp->env, WARN, "%s: memory %s was reading was released while its data was "
               "being sent or pulled (a rendezvous FIN before the data arrived?): closing the "
               "connection",
               tc->tp->name, rmx__tcp_peer(tc, peer, sizeof(peer)));
  rmx__tcp_fail_later(tc, RMX_EACCES);
}

/* ---- requests ---- */

static void serve_read(rmx_tp_conn_t *tc, const tf_req_t *r)
{
  srv_t *sv = srv_new(tc, TF_RD_RESP, r->id);
  if (!sv)
    return;
  rmx_tp_mem_t *m = check_access(tc, r->key, r->addr, r->len, RMX_TP_ACC_REMOTE_READ, "read",
                                 &sv->status);
  if (m) {
    mem_use(m);
    sv->m = m;
    sv->addr = (uintptr_t)r->addr;
    sv->left = r->len;
  }
  srv_pump(tc);
}

static void serve_atomic(rmx_tp_conn_t *tc, const tf_req_t *r)
{
  uint64_t old = 0;
  if (r->pad != 0) {
    rmx__tcp_proto_fail(tc, "malformed atomic request");
    return;
  }
  srv_t *sv = srv_new(tc, TF_AT_RESP, r->id);
  if (!sv)
    return;
  rmx_tp_mem_t *m = check_access(tc, r->key, r->addr, 8, RMX_TP_ACC_REMOTE_ATOMIC, "atomic",
                                 &sv->status);
  if (m && (r->addr % 8 || r->op > RMX_TP_CSWAP))
    sv->status = RMX_EINVAL;
  if (m && sv->status == 0) {
    uint64_t *word = (uint64_t *)(uintptr_t)r->addr;
    if (r->op == RMX_TP_FADD) {
      old = __atomic_fetch_add(word, r->cmp_add, __ATOMIC_SEQ_CST);
    } else {
      old = r->cmp_add;
      __atomic_compare_exchange_n(word, &old, r->swap, 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST); /* old: the value found either way */
    }
  }
  sv->old = old;
  srv_pump(tc);
}

/* A write's data is in place (or was refused): answer, then tell the core
 * of its immediate. */
static void written(rmx_tp_conn_t *tc, srv_t *sv, int has_imm, uint32_t imm, size_t total)
{
  int32_t status = sv->status; /* the pump may answer and free sv */
  sv->ready = 1;
  srv_pump(tc);
  if (has_imm && tc->owner && !tc->dead && !tc->closing) {
    /* refused too: the writer spent one of our receive credits on it */
    rmx_tp_ev_t ev = {.type = RMX_TP_EV_IMM, .status = status, .imm = imm, .len = total};
    tc->tp->env->event(tc->owner, &ev);
  }
}

/* A write landed (or was refused and skipped): answer, then tell the core. */
static void write_landed(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  srv_t *sv = k->srv;
  if (k->m) {
    mem_unuse(k->m);
    k->m = NULL;
  }
  written(tc, sv, k->has_imm, k->imm, k->total);
}

/* A write into memory deregistered meanwhile: the rest goes nowhere and
 * the writer is told. */
static void write_check(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  if (k->m && k->m->dead && k->dst) {
    k->dst = NULL;
    k->srv->status = RMX_EACCES;
    refused(tc, "write (deregistered while written)", k->left, 0, RMX_EACCES);
  }
}

/* A write request: check, then stream its data into place, or nowhere. */
static void serve_write(rmx_tp_conn_t *tc, const tf_req_t *r, uint32_t blen)
{
  if (r->len != blen - TF_WRREQ_SUB || (r->flags & ~1u)) {
    rmx__tcp_proto_fail(tc, "malformed write request");
    return;
  }
  srv_t *sv = srv_new(tc, TF_WR_RESP, r->id);
  if (!sv)
    return;
  sv->ready = 0;
  rmx_tp_mem_t *m = check_access(tc, r->key, r->addr, r->len, RMX_TP_ACC_REMOTE_WRITE, "write",
                                 &sv->status);
  if (m)
    mem_use(m);
  tc->sink = (sink_t){.dst = m ? (uint8_t *)(uintptr_t)r->addr : NULL, .left = r->len,
                      .check = write_check, .done = write_landed, .srv = sv, .m = m,
                      .has_imm = r->flags & 1, .imm = r->imm, .total = r->len};
  rmx__tcp_sink_start(tc);
}

/*
 * A read or write by one copy: the answer carries no data. The
 * registration is checked as for any request, in request order. A write's
 * bytes we pull ourselves, at once, from the address the initiator named
 * in its own memory into the registration; a read's the initiator pulls
 * from the registration once it has our yes, and we keep the registration
 * (a deregistration cuts the connection) until its done says it has. Bytes
 * move only towards the side that copies, so no process writes into
 * another. A copy that fails (the peer named memory it does not have:
 * RMX_EINVAL) fails the request; one the initiator's end cut across
 * (RMX_ECONNRESET) is answered so, and its immediate, whose bytes may not
 * have landed, is not reported: the connection ends with the bye that
 * follows.
 */
static void serve_direct(rmx_tp_conn_t *tc, uint8_t kind, const tf_req_t *r)
{
  int rd = kind == TF_RD_DIR, rc = 0;
  const tcp_pipe_t *pp = tc->tp->pipe;
  if (!pp->pull || !pp->direct(tc, 1)) {
    rmx__tcp_proto_fail(tc, "direct request on a connection that agreed to no such thing");
    return;
  }
  if (r->len > TF_MAX_IO || (!rd && (r->flags & ~1u))) {
    rmx__tcp_proto_fail(tc, "malformed direct request");
    return;
  }
  srv_t *sv = srv_new(tc, rd ? TF_RD_RESP : TF_WR_RESP, r->id);
  if (!sv)
    return;
  rmx_tp_mem_t *m = check_access(tc, r->key, r->addr, r->len,
                                 rd ? RMX_TP_ACC_REMOTE_READ : RMX_TP_ACC_REMOTE_WRITE,
                                 rd ? "read" : "write", &sv->status);
  if (m && r->len && rd) {
    mem_use(m);
    sv->m = m;
    sv->hold = 1;
  } else if (m && r->len) {
    rc = pp->pull(tc, (void *)(uintptr_t)r->addr, r->from, r->len);
    if (rc == RMX_EPROTO) { /* the agreement ended meanwhile: sv goes with the connection */
      rmx__tcp_proto_fail(tc, "direct request on a connection that agreed to no such thing");
      return;
    }
    if (rc == 0)
      tc->tp->direct_bytes += r->len;
    else if ((sv->status = rc) != RMX_ECONNRESET)
      refused(tc, "direct write (the copy failed)", r->len, r->addr, rc);
  }
  if (rd)
    srv_pump(tc); /* sv->left 0: the answer has no data */
  else
    written(tc, sv, (r->flags & 1) && rc != RMX_ECONNRESET, r->imm, r->len);
}

/* A request from the peer, whom the core has accepted. */
void rmx__tcp_serve(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen)
{
  tf_req_t r;
  rmx__tf_req_get(body, kind, &r);
  if (kind == TF_RD_REQ)
    serve_read(tc, &r);
  else if (kind == TF_WR_REQ)
    serve_write(tc, &r, blen);
  else if (kind == TF_AT_REQ)
    serve_atomic(tc, &r);
  else
    serve_direct(tc, kind, &r);
}
