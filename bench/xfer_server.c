/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-xfer's server: one region registered at start for every client to
 * read and write, a key to it packed for each connection and sent as the
 * connection's first message; control requests in messages fill or verify
 * a range and report the notifications the connection received.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf.h"
#include "xfer.h"

static struct {
  rmx_ctx_t *ctx;
  uint8_t *region;
  size_t len;
  rmx_mem_t *mem;
} S;

typedef struct xconn {
  uint64_t notes, seq_sum, bad;
} xconn_t;

static void on_note(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  xconn_t *s = arg;
  xfer_note_t n;
  if (len != sizeof(n)) {
    s->bad++;
    return;
  }
  memcpy(&n, data, sizeof(n));
  if (n.magic != XFER_NOTE_MAGIC)
    s->bad++;
  s->notes++;
  s->seq_sum += n.seq;
}

/* A control request (xfer.h), answered in a message of the same kind. */
static void on_msg(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  xconn_t *s = arg;
  xfer_ctl_t m;
  xfer_ctl_reply_t r = {XFER_REPLY_MAGIC, 0, 0, 0, 0};
  if (len != sizeof(m)) {
    fprintf(stderr, "rmx-xfer server: an unexpected message of %zu bytes\n", len);
    return;
  }
  memcpy(&m, data, sizeof(m));
  if (m.cmd != XCTL_NOTES && (m.off > S.len || m.len > S.len - m.off))
    m.cmd = UINT32_MAX;
  switch (m.cmd) {
  case XCTL_FILL:
    for (uint64_t i = m.off; i < m.off + m.len; i++)
      S.region[i] = m.arg ? pattern_at(i) : (uint8_t)~pattern_at(i);
    break;
  case XCTL_VERIFY:
    for (uint64_t i = m.off; i < m.off + m.len; i++)
      r.b += S.region[i] != pattern_at(i);
    r.a = m.len;
    break;
  case XCTL_NOTES:
    r.a = s->notes, r.b = s->seq_sum, r.c = s->bad;
    break;
  default:
    r.status = RMX_EINVAL;
  }
  if (rmx_send(c, &r, sizeof(r), NULL, NULL) != 0)
    fprintf(stderr, "rmx-xfer server: cannot answer a control request\n");
}

static void on_closed(rmx_conn_t *c, void *arg) { free(arg); }
static void on_disc(rmx_conn_t *c, int st, void *arg) { rmx_conn_close(c, on_closed, arg); }

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  xconn_t *s = calloc(1, sizeof(*s));
  rmx_conn_cbs_t cbs = {.on_recv = on_msg, .on_disconnect = on_disc, .on_notify = on_note};
  uint8_t msg[sizeof(xfer_key_hdr_t) + RMX_RKEY_MAX];
  size_t klen = RMX_RKEY_MAX;
  if (!s) {
    rmx_conn_close(c, NULL, NULL);
    return;
  }
  rmx_conn_set_cbs(c, &cbs, s);
  int rc = rmx_mem_pack_for(S.mem, c, msg + sizeof(xfer_key_hdr_t), &klen);
  if (rc == 0) {
    xfer_key_hdr_t h = {XFER_KEY_MAGIC, (uint32_t)klen, S.len};
    memcpy(msg, &h, sizeof(h));
    rc = rmx_send(c, msg, sizeof(h) + klen, NULL, NULL);
  }
  if (rc) {
    fprintf(stderr, "rmx-xfer server: cannot hand a key to a client: %s\n", rmx_strerror(rc));
    rmx_conn_close(c, on_closed, s);
  }
}

/* The region: size bytes, or half as much until it can be mapped and
 * registered (at least 64 MiB). */
static int region_make(uint64_t size)
{
  for (uint64_t n = size; n >= (64u << 20) || n == size; n /= 2) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      continue;
    int rc = rmx_mem_reg(S.ctx, p, n,
                         RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &S.mem);
    if (rc == 0) {
      S.region = p;
      S.len = n;
      return 0;
    }
    munmap(p, n);
    fprintf(stderr, "rmx-xfer server: registering %llu bytes: %s\n", (unsigned long long)n,
            rmx_strerror(rc));
  }
  return -1;
}

int xfer_server(rmx_ctx_t *ctx, const char *uri, uint64_t size, const char *const *also,
                int nalso)
{
  rmx_listener_t *l, *more[RMX_RAILS_MAX] = {NULL};
  char bound[128];
  S.ctx = ctx;
  int rc = rmx_listen(ctx, uri, on_accept, NULL, &l); /* opens the transport: register after */
  if (rc == 0)
    rc = rmx_listener_uri(l, bound, sizeof(bound));
  if (rc == RMX_EINVAL) {
    fprintf(stderr, "rmx-xfer: cannot serve on '%s': %s (try 'rmx-xfer --help')\n", uri,
            rmx_strerror(rc));
    return 2;
  }
  if (rc) {
    fprintf(stderr, "rmx-xfer: cannot serve on %s: %s\n", uri, rmx_strerror(rc));
    return 1;
  }
  for (int i = 0; i < nalso && rc == 0; i++) /* where clients open rails */
    if ((rc = rmx_listen(ctx, also[i], on_accept, NULL, &more[i])) != 0)
      fprintf(stderr, "rmx-xfer: cannot serve on %s: %s\n", also[i], rmx_strerror(rc));
  if (rc || region_make(size) != 0) {
    for (int i = 0; i < nalso; i++)
      if (more[i])
        rmx_listener_close(more[i]);
    rmx_listener_close(l);
    return 1;
  }
  if ((rc = rmx_mem_publish(S.mem, XFER_NAME)) != 0)
    fprintf(stderr, "rmx-xfer: cannot publish the region: %s\n", rmx_strerror(rc));
  printf("listening on %s", bound);
  for (int i = 0; i < nalso; i++)
    printf(" and %s", also[i]);
  printf(", region %llu bytes\n", (unsigned long long)S.len);
  fflush(stdout);
  perf_run_until_signal(ctx);
  for (int i = 0; i < nalso; i++)
    rmx_listener_close(more[i]);
  rmx_listener_close(l);
  rmx_mem_dereg(S.mem);
  munmap(S.region, S.len);
  return 0;
}
