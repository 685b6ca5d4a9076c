/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registered-buffer pool. Buffers come in power-of-two size classes
 * (256 B .. 1 MiB) cut from page-aligned slabs; a slab is registered with
 * each transport that needs it once, when a buffer is taken from it (or,
 * for a transport with no device open yet, when one is first posted), and
 * every buffer in it shares that registration. Larger requests get a slab
 * of their own, mapped for them and unmapped once unused for a second (a
 * few are kept as spares, see rmx__buf_free): what a burst of
 * large messages took goes back to the system when the burst is over,
 * whatever malloc does with blocks of that size (glibc's raises its mmap
 * threshold as large blocks are freed, up to 32 MiB, and then keeps such
 * blocks in its heap: 650 MB stayed in an echo server after rounds of
 * 2 .. 16 MiB echoes; docs/architecture.md, "Memory").
 * Steady state: a list pop and a list push per message.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rmx_int.h"

#define SLAB_BYTES (256u << 10) /* target slab size for small classes */
#define SLAB_MIN_BUFS 4u
#define RMX_POOL_SPARE_MS 1000 /* large buffers kept unused for so long go */
#define RMX_POOL_SPARES 4      /* large buffers kept at most (RMX_RNDV_DEPTH's default)... */
#define RMX_POOL_SPARE_BYTES (32u << 20) /* ...and bytes, past the first */

struct rmx__slab {
  rmx_list_t link;
  rmx__slab_t *spare_next; /* a spare's (large slabs): the next spare */
  rmx_ctx_t *ctx;
  uint8_t *mem;
  size_t bytes;
  uint32_t nbufs;
  rmx_tp_mem_t *reg[RMX_TP_COUNT];
  rmx_buf_t bufs[];
};

void rmx__pool_init(rmx__pool_t *p)
{
  for (int i = 0; i < RMX_POOL_CLASSES; i++)
    rmx_list_init(&p->free[i]);
  rmx_list_init(&p->slabs);
  p->bytes = 0;
}

int rmx__pool_class(size_t size)
{
  for (int i = 0; i < RMX_POOL_CLASSES; i++)
    if (size <= ((size_t)1 << (RMX_POOL_MIN_SHIFT + i)))
      return i;
  return -1;
}

static rmx__slab_t *slab_new(rmx_ctx_t *ctx, size_t cap, uint32_t n, int cls)
{
  rmx__pool_t *p = &ctx->pool;
  size_t stride = RMX_BUF_HEADROOM + cap;
  size_t bytes = (stride * n + 4095) & ~(size_t)4095;
  rmx__slab_t *s = calloc(1, sizeof(*s) + n * sizeof(rmx_buf_t));
  if (!s)
    return NULL;
  if (cls < 0) {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s->mem = m == MAP_FAILED ? NULL : m;
  } else {
    s->mem = aligned_alloc(4096, bytes);
  }
  if (!s->mem) {
    free(s);
    return NULL;
  }
  s->ctx = ctx;
  s->bytes = bytes;
  s->nbufs = n;
  for (uint32_t i = 0; i < n; i++) {
    rmx_buf_t *b = &s->bufs[i];
    b->slab = s;
    b->base = s->mem + i * stride;
    b->cap = (uint32_t)cap;
    b->cls = (int8_t)cls;
    rmx_list_init(&b->link);
    if (cls >= 0)
      rmx_list_push(&p->free[cls], &b->link);
  }
  rmx_list_push(&p->slabs, &s->link);
  p->bytes += bytes;
  return s;
}

static void slab_free(rmx_ctx_t *ctx, rmx__pool_t *p, rmx__slab_t *s)
{
  for (int i = 0; i < RMX_TP_COUNT; i++)
    if (s->reg[i])
      ctx->tp_ops[i]->mem_dereg(s->reg[i]);
  rmx_list_del(&s->link);
  p->bytes -= s->bytes;
  if (s->bufs[0].cls < 0)
    munmap(s->mem, s->bytes);
  else
    free(s->mem);
  free(s);
}

void rmx__pool_fini(rmx_ctx_t *ctx, rmx__pool_t *p)
{
  rmx_list_t *n;
  p->spare = NULL; /* on the slab list too */
  while ((n = p->slabs.next) != &p->slabs)
    slab_free(ctx, p, rmx_container_of(n, rmx__slab_t, link));
  rmx__pool_init(p);
}

/*
 * Register s now with each transport in use that needs local registration.
 * A failure is then the caller's error, returned by rmx_send or
 * rmx_rpc_call, where registering when the frame is posted could only end
 * the connection after the call had returned 0. A transport with no device
 * open yet answers RMX_ENODEV and is skipped: posting registers then
 * (rmx__buf_mem). Once registered, a slab costs one test per buffer.
 */
static int slab_reg(rmx_ctx_t *ctx, rmx__slab_t *s)
{
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (!ctx->tp[i] || s->reg[i] || !(ctx->tp_ops[i]->flags & RMX_TP_F_LOCAL_REG))
      continue;
    int rc = ctx->tp_ops[i]->mem_reg(ctx->tp[i], s->mem, s->bytes, RMX_TP_ACC_LOCAL, NULL,
                                     &s->reg[i]);
    if (rc && rc != RMX_ENODEV)
      return rc;
  }
  return 0;
}

int rmx__buf_alloc(rmx_ctx_t *ctx, size_t size, rmx_buf_t **out)
{
  rmx__pool_t *p = &ctx->pool;
  int cls = rmx__pool_class(size);
  if (cls < 0) {
    if (size > UINT32_MAX)
      return RMX_EMSGSIZE;
    size_t bytes = (RMX_BUF_HEADROOM + size + 4095) & ~(size_t)4095;
    rmx__slab_t *s, **at = &p->spare;
    for (s = *at; s; at = &s->spare_next, s = *at)
      if (s->bytes >= bytes && s->bytes / 2 <= bytes) { /* fits, wastes at most half */
        *at = s->spare_next;
        s->bufs[0].cap = (uint32_t)size;
        *out = &s->bufs[0];
        return 0;
      }
    s = slab_new(ctx, size, 1, -1);
    if (!s)
      return RMX_ENOMEM;
    int rc = slab_reg(ctx, s);
    if (rc) {
      slab_free(ctx, p, s);
      return rc;
    }
    *out = &s->bufs[0];
    return 0;
  }
  if (rmx_list_empty(&p->free[cls])) {
    size_t cap = (size_t)1 << (RMX_POOL_MIN_SHIFT + cls);
    uint32_t n = (uint32_t)(SLAB_BYTES / (cap + RMX_BUF_HEADROOM));
    if (!slab_new(ctx, cap, n < SLAB_MIN_BUFS ? SLAB_MIN_BUFS : n, cls))
      return RMX_ENOMEM;
  }
  rmx_buf_t *b = rmx_container_of(rmx_list_pop(&p->free[cls]), rmx_buf_t, link);
  int rc = slab_reg(ctx, b->slab);
  if (rc) {
    rmx_list_push(&p->free[cls], &b->link); /* the slab stays, unregistered */
    return rc;
  }
  *out = b;
  return 0;
}

/* Large buffers given back stay as spares, the newest first, up to
 * RMX_POOL_SPARES and RMX_POOL_SPARE_BYTES (the oldest beyond go): a
 * stream of large messages (rendezvous destinations, RMX_RNDV_DEPTH at
 * once) then maps and faults in its memory once, not per message. They go
 * RMX_POOL_SPARE_MS after the last one came back (rmx__pool_trim, from the
 * context's keepalive tick), or with the context. */
void rmx__buf_free(rmx_ctx_t *ctx, rmx_buf_t *b)
{
  rmx__pool_t *p = &ctx->pool;
  if (b->cls >= 0) {
    rmx_list_push(&p->free[b->cls], &b->link);
    return;
  }
  rmx__slab_t *s = b->slab, **at;
  s->spare_next = p->spare;
  p->spare = s;
  p->spare_at = uv_now(ctx->loop);
  size_t kept = s->bytes;
  int n = 1;
  for (at = &s->spare_next; *at; n++) {
    if (n >= RMX_POOL_SPARES || kept + (*at)->bytes > RMX_POOL_SPARE_BYTES) {
      rmx__slab_t *old = *at;
      *at = old->spare_next;
      slab_free(ctx, p, old);
      continue;
    }
    kept += (*at)->bytes;
    at = &(*at)->spare_next;
  }
}

void rmx__pool_trim(rmx_ctx_t *ctx, uint64_t now)
{
  rmx__pool_t *p = &ctx->pool;
  if (now < p->spare_at + RMX_POOL_SPARE_MS)
    return;
  while (p->spare) {
    rmx__slab_t *s = p->spare;
    p->spare = s->spare_next;
    slab_free(ctx, p, s);
  }
}

int rmx__buf_mem(rmx_ctx_t *ctx, rmx_buf_t *b, int tpi, rmx_tp_mem_t **out)
{
  rmx__slab_t *s = b->slab;
  if (!s->reg[tpi]) {
    int rc = ctx->tp_ops[tpi]->mem_reg(ctx->tp[tpi], s->mem, s->bytes, RMX_TP_ACC_LOCAL, NULL,
                                       &s->reg[tpi]);
    if (rc)
      return rc;
  }
  *out = s->reg[tpi];
  return 0;
}

/* ---- public ---- */

int rmx_buf_get(rmx_ctx_t *ctx, size_t size, rmx_buf_t **b)
{
  if (!ctx || !b)
    return RMX_EINVAL;
  if (size > ctx->cfg.max_msg_size)
    return RMX_EMSGSIZE;
  return rmx__buf_alloc(ctx, size, b);
}

void *rmx_buf_data(rmx_buf_t *b) { return b->base + RMX_BUF_HEADROOM; }
size_t rmx_buf_size(const rmx_buf_t *b) { return b->cap; }

void rmx_buf_put(rmx_buf_t *b)
{
  if (b)
    rmx__buf_free(b->slab->ctx, b);
}
