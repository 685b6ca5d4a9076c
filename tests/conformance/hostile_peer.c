/* SPDX-License-Identifier: BSD-3-Clause */
/* The hostile-peer suite's raw peers: helper threads that run a script on
 * a socket to the server, and what they read and write (hostile.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

static peer_t *peers[64];
static int npeers;
atomic_int main_step, aborting;

static void wake(void *a) { (void)a; }

void pfail_at(peer_t *p, const char *file, int line, const char *fmt, ...)
{
  if (p->failed++)
    return;
  const char *base = strrchr(file, '/');
  int n = snprintf(p->why, sizeof(p->why), "%s:%d: ", base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->why + n, sizeof(p->why) - (size_t)n, fmt, ap);
  va_end(ap);
}
void pmark(peer_t *p, int k)
{
  atomic_store(&p->step, k);
  rmx_ctx_post(S.ctx, wake, NULL);
}

int pwait(peer_t *p, int k)
{
  uint64_t t0 = now_ms();
  while (atomic_load(&main_step) < k) {
    if (atomic_load(&aborting) || now_ms() - t0 > 20000) {
      pfail(p, "gave up waiting for the main thread's step %d", k);
      return -1;
    }
    usleep(200);
  }
  return 0;
}

int raw_connect(void)
{
  int fd = raw_dial(S.port);
  assert_true(fd >= 0);
  return fd;
}

static void *peer_main(void *arg)
{
  peer_t *p = arg;
  int rc = p->script(p);
  if (rc && !p->failed)
    pfail(p, "the script stopped at step %d: %s", atomic_load(&p->step),
          p->saw_eof ? "the server hung up" : p->timed_out ? "nothing came for too long"
                                                           : "a write failed");
  atomic_store(&p->done, 1);
  rmx_ctx_post(S.ctx, wake, NULL);
  return NULL;
}

peer_t *peer_start(script_fn fn, void *arg, int iarg)
{
  peer_t *p = calloc(1, sizeof(*p));
  assert_non_null(p);
  p->fd = raw_connect();
  p->script = fn;
  p->arg = arg;
  p->iarg = iarg;
  assert_true(npeers < 64);
  peers[npeers++] = p;
  assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
  return p;
}

void wait_step(peer_t *p, int k)
{
  PUMP_UNTIL(atomic_load(&p->step) >= k || atomic_load(&p->done));
}

void peer_join(peer_t *p)
{
  PUMP_UNTIL(atomic_load(&p->done));
  pthread_join(p->th, NULL);
  p->joined = 1;
  close(p->fd);
  p->fd = -1;
  if (p->failed)
    fail_msg("raw peer: %s", p->why);
}

static void peers_free(void)
{
  for (int i = 0; i < npeers; i++) {
    peer_t *p = peers[i];
    if (!p->joined) {
      if (p->fd >= 0)
        shutdown(p->fd, SHUT_RDWR);
      pthread_join(p->th, NULL);
    }
    if (p->fd >= 0)
      close(p->fd);
    free(p);
  }
  npeers = 0;
}

void peers_stop(void)
{
  atomic_store(&aborting, 1);
  for (int i = 0; i < npeers; i++)
    if (!peers[i]->joined && peers[i]->fd >= 0)
      shutdown(peers[i]->fd, SHUT_RDWR);
  peers_free();
}

/* ---- the peer's I/O ---- */

int rd_full(peer_t *p, void *b, size_t n)
{
  uint8_t *q = b;
  p->partial = 0;
  while (n) {
    ssize_t r = read(p->fd, q, n);
    if (r > 0) {
      q += r;
      n -= (size_t)r;
      p->partial += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0 || errno == ECONNRESET)
      p->saw_eof = 1;
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
      p->timed_out = 1;
    return -1;
  }
  return 0;
}

int wr_full(peer_t *p, const void *b, size_t n)
{
  const uint8_t *q = b;
  while (n) {
    ssize_t r = write(p->fd, q, n);
    if (r > 0) {
      q += r;
      n -= (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    return r < 0 ? errno : EIO;
  }
  return 0;
}

void drain(peer_t *p, unsigned ms)
{
  uint8_t buf[4096];
  ssize_t n;
  set_rcvtimeo(p->fd, ms);
  p->reply_len = 0;
  for (;;) {
    n = read(p->fd, buf, sizeof(buf));
    if (n > 0) {
      size_t room = sizeof(p->reply) - p->reply_len, k = (size_t)n < room ? (size_t)n : room;
      memcpy(p->reply + p->reply_len, buf, k);
      p->reply_len += k;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0 || errno == ECONNRESET)
      p->saw_eof = 1;
    else
      p->timed_out = 1;
    return;
  }
}

int next_ev(peer_t *p, ev_t *e)
{
  uint8_t h[8], b[64];
  if (rd_full(p, h, 8))
    return -1;
  e->blen = g32(h);
  e->kind = h[4];
  e->tflags = h[5];
  PCHECK(p, e->kind >= K_FRAME || (h[5] == 0 && g16(h + 6) == 0),
         "server frame with flags or reserved bits");
  if (e->kind >= K_FRAME) { /* an rmx frame: its header's fields are the stream header's */
    PCHECK(p, e->kind < K_FRAME + 8 && e->blen + 8 <= p->srv.eager && e->blen + 8 <= 8192,
           "rmx frame of kind %u, %u bytes", e->kind, e->blen);
    e->ftype = (uint8_t)(e->kind - K_FRAME);
    e->fflags = h[5];
    e->fcredits = g16(h + 6);
    e->flen = e->blen;
    e->kind = K_FRAME;
    if (rd_full(p, e->fbody, e->flen))
      return -1;
    p->credits += e->fcredits;
    if (e->ftype != F_BYE)
      p->owed++;
    return 0;
  }
  switch (e->kind) {
  case K_HELLO_ACK:
    PCHECK(p, e->blen >= HELLO_LEN && e->blen <= 256, "HELLO_ACK of %u bytes", e->blen);
    if (rd_full(p, e->fbody, e->blen))
      return -1;
    hello_dec(e->fbody, &e->hello);
    return 0;
  case K_REJECT:
    PCHECK(p, e->blen == 4, "REJECT of %u bytes", e->blen);
    if (rd_full(p, b, 4))
      return -1;
    e->status = (int32_t)g32(b);
    return 0;
  case K_RD_REQ:
    PCHECK(p, e->blen == 32, "RD_REQ of %u bytes", e->blen);
    if (rd_full(p, b, 32))
      return -1;
    e->id = g64(b), e->addr = g64(b + 8), e->len = g64(b + 16), e->key = g64(b + 24);
    return 0;
  case K_RD_RESP:
    PCHECK(p, e->blen >= 12, "RD_RESP of %u bytes", e->blen);
    if (rd_full(p, b, 12))
      return -1;
    e->id = g64(b), e->status = (int32_t)g32(b + 8), e->dlen = e->blen - 12;
    return 0;
  case K_WR_RESP:
    PCHECK(p, e->blen == 12, "WR_RESP of %u bytes", e->blen);
    if (rd_full(p, b, 12))
      return -1;
    e->id = g64(b), e->status = (int32_t)g32(b + 8);
    return 0;
  case K_AT_RESP:
    PCHECK(p, e->blen == 24, "AT_RESP of %u bytes", e->blen);
    if (rd_full(p, b, 24))
      return -1;
    e->id = g64(b), e->status = (int32_t)g32(b + 8), e->old = g64(b + 16);
    PCHECK(p, g32(b + 12) == 0, "AT_RESP pad not zero");
    return 0;
  default:
    PCHECK(p, 0, "server sent frame kind %u", e->kind);
  }
  return -1;
}

int rd_data(peer_t *p, uint8_t *dst, size_t n)
{
  static _Thread_local uint8_t scratch[64 << 10];
  if (dst)
    return rd_full(p, dst, n);
  while (n) {
    size_t k = n < sizeof(scratch) ? n : sizeof(scratch);
    if (rd_full(p, scratch, k))
      return -1;
    n -= k;
  }
  return 0;
}

int send_rmx(peer_t *p, uint8_t type, uint8_t flags, const void *body, uint32_t blen)
{
  uint8_t buf[16 + 8192];
  uint16_t ret = type == F_BYE ? 0 : (uint16_t)(p->owed > 0xffff ? 0xffff : p->owed);
  p->owed -= ret;
  if (type != F_BYE)
    p->credits--;
  return wr_full(p, buf, msg_frame(buf, type, flags, ret, body, blen));
}

int handshake_with(peer_t *p, const hello_t *h)
{
  uint8_t b[8 + HELLO_LEN];
  ev_t *e = malloc(sizeof(*e));
  hello_frame(b, h, 0, 0);
  p->srv.eager = 8192;
  int rc = wr_full(p, b, sizeof(b)) == 0 && next_ev(p, e) == 0 ? 0 : -1;
  if (rc == 0 && e->kind != K_HELLO_ACK) {
    pfail(p, "answer to HELLO is kind %u (status %d)", e->kind, e->status);
    rc = -1;
  }
  if (rc == 0) {
    p->srv = e->hello;
    p->credits = (int32_t)p->srv.depth;
  }
  free(e);
  if (rc && !p->failed)
    pfail(p, "handshake failed");
  return rc;
}

int handshake(peer_t *p)
{
  hello_t h = hello_default();
  return handshake_with(p, &h);
}

int handshake_and_wait(peer_t *p)
{
  if (handshake(p))
    return -1;
  pmark(p, 1);
  return pwait(p, 1);
}

int rd_collect(peer_t *p, uint64_t id, uint8_t *dst, uint64_t len, uint64_t *got, int32_t *end,
               ev_t *e)
{
  int first = 1;
  *got = 0;
  *end = 0;
  while (first || *got < len) {
    if (next_ev(p, e))
      return -1;
    if (e->kind == K_FRAME)
      continue;
    PCHECK(p, e->kind == K_RD_RESP, "expected RD_RESP for %llu, got kind %u",
           (unsigned long long)id, e->kind);
    PCHECK(p, e->id == id, "RD_RESP for %llu, expected %llu", (unsigned long long)e->id,
           (unsigned long long)id);
    first = 0;
    if (e->status) {
      PCHECK(p, e->dlen == 0, "error RD_RESP carries %u bytes of data", e->dlen);
      *end = e->status;
      return 0;
    }
#ifndef HOSTILE_OLD_PROTOCOL
    PCHECK(p, e->dlen <= CHUNK_MAX, "RD_RESP chunk of %u bytes", e->dlen);
    PCHECK(p, e->dlen > 0 || len == 0, "empty RD_RESP chunk");
#endif
    PCHECK(p, e->dlen <= len - *got, "RD_RESP brings %u bytes, only %llu were asked", e->dlen,
           (unsigned long long)(len - *got));
    if (rd_data(p, dst ? dst + *got : NULL, e->dlen)) {
      if (dst)
        *got += p->partial; /* what came of the chunk before the hang-up */
      return -1;
    }
    *got += e->dlen;
  }
  return 0;
}

int goodbye(peer_t *p)
{
  PCHECK(p, send_rmx(p, F_BYE, 0, NULL, 0) == 0, "BYE not sent");
  drain(p, 5000);
  PCHECK(p, p->saw_eof, "server did not hang up after BYE");
  return 0;
}

int wait_rts(peer_t *p, ev_t *e, uint64_t *id, uint64_t *addr, uint64_t *size, uint64_t *key)
{
  do {
    if (next_ev(p, e))
      return -1;
    PCHECK(p, e->kind == K_FRAME, "expected an RTS, got kind %u", e->kind);
  } while (e->ftype != F_RTS);
  PCHECK(p, e->flen == 32 && e->fflags == 0, "RTS of %u bytes, flags %u", e->flen, e->fflags);
  *id = g64(e->fbody), *addr = g64(e->fbody + 8), *size = g64(e->fbody + 16);
  *key = g64(e->fbody + 24);
  return 0;
}


int send_fin(peer_t *p, uint64_t id, uint32_t pad)
{
  uint8_t fin[16];
  p64(fin, id);
  p32(fin + 8, 0);
  p32(fin + 12, pad);
  return send_rmx(p, F_FIN, 0, fin, 16);
}
