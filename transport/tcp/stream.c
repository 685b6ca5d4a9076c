/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The byte stream of one connection over its pipe (tcp.h: a socket, or a
 * shared-memory channel): frames handed to the pipe's queued writes (or
 * written at once where it takes them), the read buffer where frames are
 * reassembled and parsed in place, payloads that stream from the pipe
 * straight to where they belong, and the connection's end. What a frame
 * means is for the files above (tcp.h), reached through tp->up.
 *
 * Stream framing: u32 body length, u8 kind, u8 flags, u16 reserved, body;
 * an rmx frame's header is carried in that one (frame.h). A peer that
 * sends anything else is cut off; see docs/protocol.md.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "../../src/base/bytes.h"
#include "tcp.h"

/* ---- closing ---- */

static void ended_report(rmx_tp_conn_t *tc);

void rmx__tcp_pipe_closed(rmx_tp_conn_t *tc)
{
  if (--tc->open_handles != 0)
    return;
  ended_report(tc); /* every op is reported before CLOSED */
  tc->tp->up->closed(tc);
}

static void timer_closed(uv_handle_t *h) { rmx__tcp_pipe_closed(h->data); }

void rmx__tcp_conn_close(rmx_tp_conn_t *tc)
{
  if (tc->closing)
    return;
  rmx__tcp_flush(tc); /* posted sends are written or cancelled with the rest */
  tc->closing = 1;
  if (tc->tp->hot == tc)
    tc->tp->hot = NULL;
  rmx_list_del(&tc->later_link);
  if (tc->lst) {
    rmx_tp_listener_t *l = tc->lst;
    rmx_list_del(&tc->lst_link);
    l->npending--;
    tc->lst = NULL;
    tc->tp->up->slot_free(l); /* the next peer waiting may come in */
  }
  uv_close((uv_handle_t *)&tc->timer, timer_closed);
  tc->tp->pipe->close(tc);
}

/*
 * The orderly end, after the owner's last frame (BYE): what we wrote goes
 * first, then the pipe's shutdown (a socket's FIN), and the socket closes
 * when the peer ends its side. Closing at once would be wrong: a socket
 * closed with bytes from the peer unread, or one that gets more afterwards
 * (a credit return, a keepalive), makes the kernel answer with a reset and
 * drop what it had not sent yet, BYE included. Until the peer's end, its
 * bytes are read and dropped. The owner's close deadline bounds the wait
 * (rmx__tcp_conn_close then cuts it short).
 */
void rmx__tcp_conn_finish(rmx_tp_conn_t *tc)
{
  if (tc->dead || tc->closing || tc->state != TC_UP) {
    rmx__tcp_conn_close(tc);
    return;
  }
  rmx__tcp_flush(tc);
  tc->state = TC_FINISHING;
  tc->sinking = 0; /* a payload still streaming in is dropped too */
  tc->rpos = tc->rlen = 0;
  tc->tp->pipe->shutdown(tc);
}

/* I/O is over for this connection: tell the owner once, or just close. */
void rmx__tcp_fail(rmx_tp_conn_t *tc, int status)
{
  if (tc->dead || tc->closing)
    return;
  if (status == RMX_ECONNRESET && tc->spin_err) /* the socket's own cause, */
    status = rmx__uv_err(tc->spin_err);         /* which a write or busy-poll took off it */
  if (tc->state == TC_FINISHING) { /* the peer's end (or a reset): done */
    rmx__tcp_conn_close(tc);
    return;
  }
  tc->dead = 1;
  tc->tp->pipe->read_stop(tc);
  if (tc->owner)
    tc_ev(tc, RMX_TP_EV_DISCONNECTED, status, NULL, NULL, 0);
  else
    rmx__tcp_conn_close(tc);
}

/* The peer for the log, or "?". */
const char *rmx__tcp_peer(rmx_tp_conn_t *tc, char *buf, size_t size)
{
  return tc->tp->pipe->peer(tc, buf, size);
}

void rmx__tcp_proto_fail(rmx_tp_conn_t *tc, const char *why)
{
  char peer[80] = "?";
  if (tc->tp->env->log_level >= RMX_LOG_ERROR)
    rmx__tcp_peer(tc, peer, sizeof(peer));
  if (tc->passive && tc->state == TC_WAIT_HELLO) /* not rmx at all (a port scan, HTTP) */
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_hello, uv_now(tc->tp->loop), ERROR,
                       "%s: refusing incoming peer %s before its hello: %s", tc->tp->name,
                       peer, why);
  else
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_proto, uv_now(tc->tp->loop), ERROR,
                       "%s: closing connection with %s: %s", tc->tp->name, peer, why);
  rmx__tcp_fail(tc, RMX_EPROTO);
}

/* ---- writing ---- */

wreq_t *rmx__tcp_wreq_get(rmx_tp_conn_t *tc, wkind_t kind, void *op)
{
  wreq_t *w = rec_get(&tc->tp->free_w, &tc->tp->nfree_w, sizeof(*w));
  if (!w)
    return NULL;
  w->tc = tc;
  w->op = op;
  w->kind = kind;
  w->data = w->last = 0;
  w->next = NULL;
  return w;
}

/* One request's end; a batch's requests end one by one, in order. */
static void wreq_done(rmx_tp_conn_t *tc, wreq_t *w, int rc)
{
  wkind_t kind = w->kind;
  void *op = w->op;
  uint8_t data = w->data, last = w->last;
  W_PUT(tc->tp, w);
  switch (kind) {
  case W_RESP:
    tc->tp->up->resp_written(tc, op, data, last, rc);
    break;
  case W_SEND:
    tc_ev(tc, RMX_TP_EV_SEND, rc, op, NULL, 0);
    break;
  case W_HELLO_ACK:
    tc->tp->up->acked(tc, rc);
    break;
  case W_REJECT:
    rmx__tcp_conn_close(tc);
    break;
  case W_CTRL:
    break;
  }
}

static void ended_report(rmx_tp_conn_t *tc);

/* A chain the pipe queued has ended (rc: 0 written, or why not). */
void rmx__tcp_write_end(wreq_t *w, int rc)
{
  wreq_t *next;
  rmx_tp_conn_t *tc = w->tc;
  wkind_t kind = w->kind;
  tc->wr_busy--;
  ended_report(tc);
  for (; w; w = next) {
    next = w->next;
    wreq_done(tc, w, rc);
  }
  if (rc && rc != RMX_ECANCELED && kind != W_REJECT)
    rmx__tcp_fail(tc, rc);
}

/* ---- what ends from the loop ---- */

/* Requests that ended without a libuv callback (written at once, or
 * refused) are reported from the loop, in order; a write callback reports
 * them first, since they are older than any request libuv still holds. */
static void ended_report(rmx_tp_conn_t *tc)
{
  wreq_t *w = tc->ended, *next;
  tc->ended = tc->ended_last = NULL;
  for (; w; w = next) {
    next = w->next;
    wreq_done(tc, w, w->status);
  }
}

/* The instance's idle handle: what ended since, connection by connection.
 * Only those queued before this pass: what their callbacks queue waits for
 * the next turn, so the loop still polls in between. A connection closed
 * meanwhile has left the list (its handles' close reports for it). */
void rmx__tcp_later_run(rmx_tp_t *tp)
{
  rmx_list_t now, *n;
  rmx_list_init(&now);
  rmx_list_splice(&now, &tp->laterq);
  while ((n = rmx_list_pop(&now)) != NULL) {
    rmx_tp_conn_t *tc = rmx_container_of(n, rmx_tp_conn_t, later_link);
    ended_report(tc);
    if (tc->fail_later)
      rmx__tcp_fail(tc, tc->fail_later);
  }
  if (rmx_list_empty(&tp->laterq))
    uv_idle_stop(&tp->later);
}

static void tcp_later_cb(uv_idle_t *h) { rmx__tcp_later_run(h->data); }

static void later(rmx_tp_conn_t *tc)
{
  rmx_tp_t *tp = tc->tp;
  if (!rmx_list_empty(&tc->later_link))
    return;
  if (rmx_list_empty(&tp->laterq))
    uv_idle_start(&tp->later, tcp_later_cb);
  rmx_list_push(&tp->laterq, &tc->later_link);
}

/* The chain first..last ended with status: report it from the loop. */
static void ended_add(rmx_tp_conn_t *tc, wreq_t *first, wreq_t *last, int status)
{
  for (wreq_t *w = first; w; w = w->next)
    w->status = status;
  if (tc->ended_last)
    tc->ended_last->next = first;
  else
    tc->ended = first;
  tc->ended_last = last;
  if (!tc->closing) /* else the handles' close reports it */
    later(tc);
}

/* End the connection with status from the loop, not from inside the call
 * that found the failure; the first cause is the one reported. */
void rmx__tcp_fail_later(rmx_tp_conn_t *tc, int status)
{
  if (tc->closing || tc->fail_later)
    return;
  tc->fail_later = status;
  later(tc);
}

/* Queue a chain on the pipe; its end comes through rmx__tcp_write_end, or
 * from the loop where the pipe wrote it all at once. */
static int write_counted(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n)
{
  int r = tc->tp->pipe->write(tc, w, bufs, n);
  if (r == 0)
    tc->wr_busy++;
  if (r != 1)
    return r;
  wreq_t *last = w;
  while (last->next)
    last = last->next;
  ended_add(tc, w, last, 0);
  return 0;
}

int rmx__tcp_write_bufs(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n)
{
  rmx__tcp_flush(tc); /* frames leave in the order they were made */
  int rc = write_counted(tc, w, bufs, n);
  if (rc)
    W_PUT(tc->tp, w);
  return rc;
}

/*
 * Hand a frame to the pipe, written at once where it takes it all: 1, and
 * w is released. What it cannot take is queued (0), and its end comes
 * through rmx__tcp_write_end. An error: w released.
 */
int rmx__tcp_write_now(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n)
{
  size_t total = 0, skip;
  unsigned i = 0;
  rmx__tcp_flush(tc);
  for (unsigned k = 0; k < n; k++)
    total += bufs[k].len;
  ssize_t r = tc->tp->pipe->try_write(tc, bufs, n); /* 0 while writes queue */
  if (r < 0) {
    W_PUT(tc->tp, w);
    return (int)r;
  }
  if ((size_t)r == total) {
    W_PUT(tc->tp, w);
    return 1;
  }
  for (skip = (size_t)r; skip >= bufs[i].len; i++)
    skip -= bufs[i].len;
  bufs[i].base += skip;
  bufs[i].len -= skip;
  /* A pipe that copies (shm) may take the rest whole: done now as well,
   * so the caller counts nothing of it as still reading its memory. */
  int rc = tc->tp->pipe->write(tc, w, bufs + i, n - i);
  if (rc == 0)
    tc->wr_busy++;
  else
    W_PUT(tc->tp, w);
  return rc;
}

/* A frame whose body is small and lives in the request itself. */
int rmx__tcp_write_small(rmx_tp_conn_t *tc, wkind_t kind, uint8_t fkind, const void *body,
                         size_t blen)
{
  wreq_t *w = rmx__tcp_wreq_get(tc, kind, NULL);
  if (!w)
    return RMX_ENOMEM;
  uint8_t *b = blen <= TF_RDREQ_LEN ? w->hdr : NULL;
  rmx__tf_hdr(w->hdr, (uint32_t)blen, fkind);
  uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, TF_HDR),
                      uv_buf_init((char *)body, (unsigned)blen)};
  if (b) {
    memcpy(w->hdr + TF_HDR, body, blen);
    bufs[0].len += blen;
    return rmx__tcp_write_bufs(tc, w, bufs, 1);
  }
  /* Larger bodies (hellos) live in tc->hello, which outlives the write. */
  return rmx__tcp_write_bufs(tc, w, bufs, 2);
}

int rmx__tcp_send(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  uv_buf_t bufs[1 + RMX_TP_MAX_SGE];
  size_t total = 0;
  unsigned nb = 1;

  if (tc->dead || tc->closing || tc->state != TC_UP)
    return RMX_ENOTCONN;
  if (n < 1 || n > RMX_TP_MAX_SGE || sge[0].len < TF_HDR)
    return RMX_EINVAL;
  /* The frame's header goes into the stream header (w->hdr); the rest follows. */
  const uint8_t *frame = sge[0].addr;
  for (int i = 0; i < n; i++) {
    size_t skip = i == 0 ? TF_HDR : 0;
    if (sge[i].len > skip)
      bufs[nb++] = uv_buf_init((char *)(uintptr_t)sge[i].addr + skip,
                               (unsigned)(sge[i].len - skip));
    total += sge[i].len;
  }
  if (total > tc->max_frame)
    return RMX_EMSGSIZE;
  if (rmx_get32(frame + 4) != total - TF_HDR || frame[0] > 255 - TF_FRAME)
    return RMX_EINVAL;
  wreq_t *w = rmx__tcp_wreq_get(tc, W_SEND, op);
  if (!w)
    return RMX_ENOMEM;
  rmx__tf_frame_hdr(w->hdr, frame);
  bufs[0] = uv_buf_init((char *)w->hdr, TF_HDR);
  rmx__tcp_batch_add(tc, w, bufs, nb);
  return 0;
}

/* A frame for the batch the owner's next flush writes (n <= 4 buffers). */
void rmx__tcp_batch_add(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n)
{
  if (tc->bq_n + n > TC_BATCH_BUFS)
    rmx__tcp_flush(tc);
  memcpy(tc->bq_bufs + tc->bq_n, bufs, n * sizeof(bufs[0]));
  tc->bq_n += n;
  if (tc->bq_last)
    tc->bq_last->next = w;
  else
    tc->bq_first = w;
  tc->bq_last = w;
}

/*
 * Write the sends posted since the last flush at once, with one system
 * call, when the pipe takes them all (their ends are reported from the
 * loop); what it does not take goes through one queued write, whose end
 * ends each in order (libuv copies a list of more than four buffers: an
 * allocation per batch, not per message). A batch the pipe refuses fails
 * from the loop, and the connection with it.
 */
void rmx__tcp_flush(rmx_tp_conn_t *tc)
{
  wreq_t *w = tc->bq_first, *last = tc->bq_last;
  uv_buf_t *bufs = tc->bq_bufs;
  unsigned n = tc->bq_n, i = 0;
  if (!w)
    return;
  tc->bq_first = tc->bq_last = NULL;
  tc->bq_n = 0;
  /* Not while a queued write's end is still to come: the pipe may have
   * written it already (its queue is empty, so it would take these), but
   * its end must be reported before theirs. */
  ssize_t r = tc->wr_busy ? 0 : tc->tp->pipe->try_write(tc, bufs, n);
  if (r >= 0) { /* 0: writes are queued ahead, or the pipe is full */
    size_t skip = (size_t)r;
    for (; i < n && skip >= bufs[i].len; i++)
      skip -= bufs[i].len;
    if (i == n) {
      ended_add(tc, w, last, 0);
      return;
    }
    bufs[i].base += skip;
    bufs[i].len -= skip;
    if ((r = write_counted(tc, w, bufs + i, n - i)) == 0)
      return;
  }
  ended_add(tc, w, last, (int)r);
  rmx__tcp_fail_later(tc, (int)r);
}

/* Bytes wait for the peer, and it took none since the last look. */
int rmx__tcp_stuck(rmx_tp_conn_t *tc)
{
  uint64_t taken = tc->taken;
  int waiting = !tc->closing && tc->tp->pipe->waiting(tc, &taken);
  int stuck = waiting && taken == tc->taken;
  tc->taken = taken;
  return stuck;
}

/* Bytes came from the peer since the last look: frames, or a read's answer. */
int rmx__tcp_heard(rmx_tp_conn_t *tc)
{
  int heard = tc->got != tc->got_seen;
  tc->got_seen = tc->got;
  return heard;
}

/* ---- reading ---- */

static void sink_done(rmx_tp_conn_t *tc)
{
  tc->sinking = 0;
  tc->sink.done(tc);
}

/* Stream the payload tc->sink describes: take what the read buffer already
 * holds, then the rest from the pipe. */
void rmx__tcp_sink_start(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  size_t have = tc->rlen - tc->rpos;
  if (have > k->left)
    have = k->left;
  if (k->dst) {
    memcpy(k->dst, tc->rbuf + tc->rpos, have);
    k->dst += have;
  }
  tc->rpos += have;
  k->left -= have;
  tc->sinking = 1;
  if (k->left == 0) {
    sink_done(tc);
    return;
  }
  tc->rpos = tc->rlen = 0; /* everything buffered was consumed */
}

/* Traffic needs more than the small buffer: the large one, what is buffered at its front. */
static int rbuf_grow(rmx_tp_conn_t *tc)
{
  size_t cap = TF_HDR + tc->max_frame + RBUF_EXTRA, have = tc->rlen - tc->rpos;
  if (cap < tc->rneed)
    cap = tc->rneed;
  uint8_t *p = malloc(cap);
  if (!p)
    return -1;
  memcpy(p, tc->rbuf + tc->rpos, have);
  if (tc->rbuf != tc->rsmall)
    free(tc->rbuf);
  tc->rbuf = p;
  tc->rcap = cap;
  tc->rlen = have;
  tc->rpos = tc->rneed = tc->rfull = tc->rquiet = 0;
  return 0;
}

/* After a read: one that filled the small buffer asks for the large one; RBUF_QUIET
 * in a row that the small one would have held, leaving nothing buffered, give it back. */
static void rbuf_settle(rmx_tp_conn_t *tc, size_t nread)
{
  if (tc->rbuf == tc->rsmall) {
    tc->rfull = tc->rlen == tc->rcap;
  } else if (tc->rpos != tc->rlen || tc->sinking || tc->closing || nread > RBUF_SMALL) {
    tc->rquiet = 0;
  } else if (++tc->rquiet == RBUF_QUIET) {
    free(tc->rbuf);
    tc->rbuf = tc->rsmall;
    tc->rcap = RBUF_SMALL;
    tc->rpos = tc->rlen = tc->rquiet = 0;
  }
}

/* Where the pipe's next read goes (len 0: no memory for it, the caller
 * fails the connection). */
void rmx__tcp_rbuf(rmx_tp_conn_t *tc, uv_buf_t *buf)
{
  /* The large buffer: for frames, and for a refused write's payload, dropped in large reads. */
  int more = tc->sinking ? !tc->sink.dst && tc->sink.left > RBUF_SMALL && tc->rbuf == tc->rsmall
                         : tc->rneed > tc->rcap || tc->rfull;
  if (more && tc->state != TC_FINISHING && rbuf_grow(tc) != 0) {
    *buf = uv_buf_init(NULL, 0); /* the connection fails */
    return;
  }
  if (tc->state == TC_FINISHING) { /* dropped: the buffer is free to scribble on */
    *buf = uv_buf_init((char *)tc->rbuf, (unsigned)tc->rcap);
    return;
  }
  if (tc->sinking) {
    size_t left = tc->sink.left;
    if (tc->sink.check)
      tc->sink.check(tc);
    if (tc->sink.dst) {
      buf->base = (char *)tc->sink.dst;
      buf->len = left > TF_MAX_IO ? TF_MAX_IO : left;
    } else { /* discarding: the read buffer is empty and free to scribble on */
      buf->base = (char *)tc->rbuf;
      buf->len = left < tc->rcap ? left : tc->rcap;
    }
    return;
  }
  if (tc->rpos) { /* keep the partial frame at the front */
    memmove(tc->rbuf, tc->rbuf + tc->rpos, tc->rlen - tc->rpos);
    tc->rlen -= tc->rpos;
    tc->rpos = 0;
  }
  buf->base = (char *)tc->rbuf + tc->rlen;
  buf->len = tc->rcap - tc->rlen;
}

static void parse(rmx_tp_conn_t *tc)
{
  while (!tc->closing && !tc->dead && !tc->sinking) {
    size_t avail = tc->rlen - tc->rpos;
    if (avail < TF_HDR)
      break;
    uint8_t *p = tc->rbuf + tc->rpos;
    uint32_t blen;
    uint8_t kind;
    const char *why = rmx__tf_check(p, tc->state, tc->max_frame, &kind, &blen);
    if (why) {
      rmx__tcp_proto_fail(tc, why);
      return;
    }
    /* a payload that streams: its sink takes it */
    size_t head = TF_HDR + rmx__tf_buffered(kind, blen);
    if (avail < head) {
      if (head > tc->rcap)
        tc->rneed = head; /* the next read goes to a large buffer */
      break;
    }
    tc->rpos += head;
    if (kind == TF_FRAME) { /* the stream header becomes the frame's own */
      rmx__tf_frame_unhdr(p);
      tc->tp->up->frame(tc, kind, p, TF_HDR + blen);
    } else {
      tc->tp->up->frame(tc, kind, p + TF_HDR, blen);
    }
  }
}

/* nread bytes came into the buffer rmx__tcp_rbuf gave. */
void rmx__tcp_got(rmx_tp_conn_t *tc, size_t nread)
{
  tc->got += nread;
  if (tc->state == TC_FINISHING)
    return;
  if (tc->sinking) {
    if (tc->sink.dst)
      tc->sink.dst += nread;
    tc->sink.left -= nread;
    if (tc->sink.left == 0) {
      sink_done(tc);
      parse(tc); /* nothing is buffered, but keep the shape */
    }
    return;
  }
  tc->rlen += nread;
  tc->tp->hot = tc;
  parse(tc);
  rbuf_settle(tc, nread);
}
