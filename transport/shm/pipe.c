/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shared-memory channel as the stream's pipe (tcp.h, tcp_pipe_t). Writes
 * are copies into the ring: what it takes is written at once, the rest
 * waits in the pipe's queue (its buffers copied) for the channel's
 * writable. Reads copy out of the ring into the buffer the stream names
 * (its read buffer, or a payload's destination: one copy), so the stream
 * parses only private memory. The orderly end is the channel's close,
 * once the queue is written: the channel's bye follows the last byte.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tp.h"

/* libuv's buffers are iovecs on this platform. */
_Static_assert(sizeof(uv_buf_t) == sizeof(struct iovec) &&
               offsetof(uv_buf_t, base) == offsetof(struct iovec, iov_base) &&
               offsetof(uv_buf_t, len) == offsetof(struct iovec, iov_len),
               "uv_buf_t is an iovec");

struct shm_wq {
  shm_wq_t *next;
  wreq_t *w;      /* the chain's first request: its end ends the chain */
  unsigned n, i;  /* bufs[i..n) are left */
  uv_buf_t bufs[];
};

static shm_pipe_t *pipe_of(rmx_tp_conn_t *tc) { return rmx_container_of(tc->ch, shm_pipe_t, ch); }

shm_pipe_t *rmx__shm_pipe_new(rmx_tp_conn_t *tc)
{
  shm_pipe_t *p = calloc(1, sizeof(*p));
  if (!p)
    return NULL;
  p->ch.data = tc;
  tc->ch = &p->ch;
  return p;
}

void rmx__shm_pipe_started(rmx_tp_conn_t *tc)
{
  pipe_of(tc)->started = 1;
  tc->open_handles++;
}

void rmx__shm_pipe_cfg(rmx_tp_conn_t *tc, rmx_shm_chan_cfg_t *cfg)
{
  const rmx_config_t *c = tc->tp->env->cfg;
  memset(cfg, 0, sizeof(*cfg));
  cfg->handshake_ms = tc->passive ? c->handshake_timeout_ms : c->connect_timeout_ms;
  /* Poll progress reads the rings every pass: a peer never rings for it. */
  cfg->polling = c->progress == RMX_PROGRESS_POLL;
  cfg->copy = c->shm_copy != 0;
}

/* ---- writing ---- */

static ssize_t pipe_try_write(rmx_tp_conn_t *tc, const uv_buf_t *bufs, unsigned n)
{
  shm_pipe_t *p = pipe_of(tc);
  if (p->q)
    return 0; /* behind the queue */
  return rmx__shm_chan_write(&p->ch, (const struct iovec *)bufs, (int)n);
}

/* Advance e past k written bytes: 1 when all of it is written. */
static int wq_advance(shm_wq_t *e, size_t k)
{
  while (e->i < e->n && k >= e->bufs[e->i].len)
    k -= e->bufs[e->i++].len;
  if (e->i == e->n)
    return 1;
  e->bufs[e->i].base += k;
  e->bufs[e->i].len -= k;
  return 0;
}

/* Write what the ring takes of the queue, ending each chain written; a
 * chain the channel refuses ends with the refusal, the rest with it. */
static void drain(rmx_tp_conn_t *tc)
{
  shm_pipe_t *p = pipe_of(tc);
  while (p->q && !tc->closing) {
    shm_wq_t *e = p->q;
    int rc = 0;
    if (p->cut) {
      rc = RMX_ECONNRESET; /* its memory may be gone: never read it */
    } else {
      ssize_t k = rmx__shm_chan_write(&p->ch, (const struct iovec *)(e->bufs + e->i),
                                      (int)(e->n - e->i));
      if (k < 0)
        rc = (int)k;
      else if (!wq_advance(e, (size_t)k))
        return; /* the ring is full: the channel owes a writable */
    }
    p->q = e->next;
    if (!p->q)
      p->q_last = NULL;
    wreq_t *w = e->w;
    free(e);
    rmx__tcp_write_end(w, rc); /* may post more: they queue behind */
  }
  if (!p->q && p->shut && !tc->closing)
    rmx__tcp_conn_close(tc);
}

static int pipe_write(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n)
{
  shm_pipe_t *p = pipe_of(tc);
  if (!p->up || p->ch.ended)
    return RMX_ENOTCONN;
  shm_wq_t *e = malloc(sizeof(*e) + n * sizeof(bufs[0]));
  if (!e)
    return RMX_ENOMEM;
  memcpy(e->bufs, bufs, n * sizeof(bufs[0]));
  e->n = n;
  e->i = 0;
  e->w = w;
  e->next = NULL;
  if (!p->q) { /* nothing ahead: written now as far as it fits */
    ssize_t k = rmx__shm_chan_write(&p->ch, (const struct iovec *)e->bufs, (int)n);
    if (k < 0) {
      free(e);
      return (int)k;
    }
    if (wq_advance(e, (size_t)k)) {
      free(e);
      return 1; /* all of it: the stream reports its end from the loop */
    }
  }
  if (p->q_last)
    p->q_last->next = e;
  else
    p->q = e;
  p->q_last = e;
  return 0;
}

static void on_writable(rmx_shm_chan_t *ch) { drain(ch->data); }

/* Memory a queued write or a peer's pull reads from is going: neither may
 * read it again (the peer learns before this returns). */
static void pipe_cut(rmx_tp_conn_t *tc)
{
  shm_pipe_t *p = pipe_of(tc);
  p->cut = 1;
  if (p->started)
    rmx__shm_chan_cut(&p->ch);
}

/* ---- reading ---- */

/* Copy what the ring holds into the stream's buffers, frame by frame. */
static void on_readable(rmx_shm_chan_t *ch)
{
  rmx_tp_conn_t *tc = ch->data;
  shm_pipe_t *p = pipe_of(tc);
  struct iovec span[2];
  /* What is there now; what comes meanwhile is the channel's next readable. */
  ssize_t have = p->reading ? rmx__shm_chan_peek(ch, span) : 0;
  while (have > 0 && p->reading && !tc->closing && !tc->dead) {
    uv_buf_t b;
    rmx__tcp_rbuf(tc, &b);
    if (b.len == 0) {
      rmx__tcp_fail(tc, RMX_ENOMEM);
      return;
    }
    size_t k = (size_t)have < b.len ? (size_t)have : b.len;
    if (rmx__shm_chan_copy(ch, 0, b.base, k) != 0 || rmx__shm_chan_consume(ch, k) != 0)
      return; /* a broken ring ends the channel from the loop */
    have -= (ssize_t)k;
    rmx__tcp_got(tc, k);
  }
}

static int pipe_read_start(rmx_tp_conn_t *tc)
{
  pipe_of(tc)->reading = 1;
  return 0;
}

static void pipe_read_stop(rmx_tp_conn_t *tc) { pipe_of(tc)->reading = 0; }

static int pipe_read_now(rmx_tp_conn_t *tc) { return rmx__shm_chan_poll(tc->ch); }

/* ---- set-up and the end ---- */

/* Polling channels are read by the core's busy-poll, which starts with the
 * connection's first traffic; until the stream's handshake is done the
 * channel reads every loop turn itself, so a loop that may sleep between
 * rmx_ctx_progress calls (rmx_ctx_timeout) does not wait for a timer. */
static int handshaking(rmx_shm_chan_t *ch)
{
  rmx_tp_conn_t *tc = ch->data;
  return !tc->established && !tc->closing && !tc->dead;
}

static void on_ready(rmx_shm_chan_t *ch)
{
  rmx_tp_conn_t *tc = ch->data;
  pipe_of(tc)->up = 1;
  ch->eager = handshaking;
  if (tc->passive) {
    if (rmx__tcp_read_start(tc) != 0)
      rmx__tcp_fail(tc, RMX_EIO);
  } else {
    rmx__tcp_connected(tc, 0);
  }
}

static void on_end(rmx_shm_chan_t *ch, int status, const char *why)
{
  rmx_tp_conn_t *tc = ch->data;
  shm_pipe_t *p = pipe_of(tc);
  char peer[160];
  if (tc->closing)
    return;
  if (!p->up) { /* the set-up failed */
    if (tc->passive)
      RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_hello, uv_now(tc->tp->loop), WARN,
                         "shm: incoming peer on %s: set-up failed: %s", ch->name, why);
    else
      RMX_TP_LOG(tc->tp->env, WARN, "shm: cannot connect to %s: %s", ch->name, why);
    rmx__tcp_connected(tc, status ? status : RMX_ECONNRESET);
    return;
  }
  if (status == RMX_EPROTO) {
    rmx__tcp_proto_fail(tc, why);
    return;
  }
  if (status && status != RMX_ECONNRESET)
    RMX_TP_LOG(tc->tp->env, WARN, "shm: connection with %s ends: %s",
               rmx__tcp_peer(tc, peer, sizeof(peer)), why);
  rmx__tcp_fail(tc, status ? status : RMX_ECONNRESET); /* the peer's close reads as TCP's */
}

static void on_closed(rmx_shm_chan_t *ch)
{
  rmx_tp_conn_t *tc = ch->data;
  shm_pipe_t *p = pipe_of(tc);
  shm_wq_t *e;
  while ((e = p->q) != NULL) { /* as a socket's close cancels libuv's queued writes */
    p->q = e->next;
    wreq_t *w = e->w;
    free(e);
    rmx__tcp_write_end(w, RMX_ECANCELED);
  }
  tc->ch = NULL;
  free(p);
  rmx__tcp_pipe_closed(tc);
}

static void on_copy(rmx_shm_chan_t *ch, int ok, const char *why);

const rmx_shm_chan_cbs_t rmx__shm_pipe_cbs = {
  .ready = on_ready,
  .readable = on_readable,
  .writable = on_writable,
  .end = on_end,
  .closed = on_closed,
  .copy = on_copy,
};

static void pipe_shutdown(rmx_tp_conn_t *tc)
{
  shm_pipe_t *p = pipe_of(tc);
  p->shut = 1;
  if (!p->q)
    rmx__tcp_conn_close(tc);
}

static void pipe_close(rmx_tp_conn_t *tc)
{
  if (!tc->ch)
    return;
  shm_pipe_t *p = pipe_of(tc);
  if (p->started) { /* its end comes through on_closed */
    rmx__shm_chan_close(tc->ch);
    return;
  }
  free(p);
  tc->ch = NULL;
}

/* "NAME, pid P uid U" from the socket's credentials. */
static const char *pipe_peer(rmx_tp_conn_t *tc, char *buf, size_t size)
{
  struct ucred cr;
  socklen_t len = sizeof(cr);
  if (!tc->ch)
    return "?";
  if (tc->ch->sock >= 0 && getsockopt(tc->ch->sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
    snprintf(buf, size, "%s pid %d uid %u", tc->ch->name, (int)cr.pid, (unsigned)cr.uid);
  else
    snprintf(buf, size, "%s", tc->ch->name);
  return buf;
}

/* Bytes wait in the ring or the queue; the peer took what its tail says
 * (a count that wraps at 2^32: only compared for change). */
static int pipe_waiting(rmx_tp_conn_t *tc, uint64_t *taken)
{
  shm_pipe_t *p = pipe_of(tc);
  if (!p->up)
    return 0;
  ssize_t room = rmx__shm_ring_room(&p->ch.tx);
  if (room < 0)
    return 0; /* broken: the channel ends it */
  *taken = p->ch.tx.seen;
  return p->q != NULL || (uint32_t)room < p->ch.tx.cap;
}

static void pipe_open(rmx_tp_conn_t *tc) { tc->ch = NULL; }

/* One copy for transfers of RMX_SHM_COPY_MIN and more, once agreed. */
static size_t pipe_direct(rmx_tp_conn_t *tc, int sync)
{
  return tc->ch && rmx__shm_chan_direct(tc->ch, sync) ? RMX_SHM_COPY_MIN : 0;
}

static int pipe_pull(rmx_tp_conn_t *tc, void *local, uint64_t remote, size_t len)
{
  return tc->ch ? rmx__shm_chan_pull(tc->ch, local, remote, len) : RMX_EPROTO;
}

/* The copy mode, once known: one log line per connection. */
static void on_copy(rmx_shm_chan_t *ch, int ok, const char *why)
{
  rmx_tp_conn_t *tc = ch->data;
  char peer[RMX_SHM_NAME_MAX + 48];
  if (tc->tp->env->log_level < RMX_LOG_INFO)
    return;
  pipe_peer(tc, peer, sizeof(peer));
  if (ok)
    RMX_TP_LOG(tc->tp->env, INFO, "shm: %s: one copy (process_vm_readv) for remote reads "
               "and writes of %u bytes and more", peer, (unsigned)RMX_SHM_COPY_MIN);
  else
    RMX_TP_LOG(tc->tp->env, INFO, "shm: %s: the segment carries every byte: %s", peer, why);
}

const tcp_pipe_t rmx__shm_pipe = {
  .open = pipe_open,
  .try_write = pipe_try_write,
  .write = pipe_write,
  .read_start = pipe_read_start,
  .read_stop = pipe_read_stop,
  .shutdown = pipe_shutdown,
  .close = pipe_close,
  .cut = pipe_cut,
  .read_now = pipe_read_now,
  .peer = pipe_peer,
  .waiting = pipe_waiting,
  .direct = pipe_direct,
  .pull = pipe_pull,
};
