/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory registration and remote keys.
 *
 * A registration is made with every transport the context uses, so one
 * packed key works on any of its connections. The packed key is versioned:
 * see docs/protocol.md ("Remote keys").
 */
#include <stdlib.h>
#include <string.h>

#include "rails.h"
#include "rmx_int.h"

#define RKEY_VERSION 2
#define RKEY_HDR 24
#define RKEY_ENTRY 16

/*
 * CRC-32C (Castagnoli) of a packed key, so a key damaged on its way to the
 * peer (a bit flip in the application's own channel) is refused instead of
 * aimed at the wrong memory. It detects corruption; it is not what keeps
 * keys from being forged: that is the transport key's randomness and its
 * scope. Small and ours, so written here (docs/security.md).
 */
static uint32_t crc32c(const uint8_t *p, size_t n)
{
  uint32_t crc = 0xffffffffu;
  while (n--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
  }
  return ~crc;
}

/* Entries a packed key may hold: one per transport (rmx_mem_pack), or one
 * per lane of one connection (rmx_mem_pack_for). */
#define RKEY_ENTRIES (RMX__LANES > RMX_TP_COUNT ? RMX__LANES : RMX_TP_COUNT)
_Static_assert(RKEY_HDR + RKEY_ENTRIES * RKEY_ENTRY <= RMX_RKEY_MAX, "RMX_RKEY_MAX too small");

static uint32_t rkey_sum(const uint8_t *p, size_t len)
{
  uint8_t tmp[RKEY_HDR + RKEY_ENTRIES * RKEY_ENTRY];
  memcpy(tmp, p, len);
  memset(tmp + 4, 0, 4);
  return crc32c(tmp, len);
}

static unsigned tp_access(unsigned a)
{
  return (a & RMX_MEM_LOCAL ? RMX_TP_ACC_LOCAL : 0) |
         (a & RMX_MEM_REMOTE_READ ? RMX_TP_ACC_REMOTE_READ : 0) |
         (a & RMX_MEM_REMOTE_WRITE ? RMX_TP_ACC_REMOTE_WRITE : 0) |
         (a & RMX_MEM_REMOTE_ATOMIC ? RMX_TP_ACC_REMOTE_ATOMIC : 0);
}

/* Register with each transport in use that lacks it. A transport with no
 * device yet is skipped; it is tried again at the next pack. */
static int reg_missing(rmx_mem_t *m)
{
  rmx_ctx_t *ctx = m->ctx;
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (!ctx->tp[i] || m->reg[i])
      continue;
    int rc = ctx->tp_ops[i]->mem_reg(ctx->tp[i], m->addr, m->len, tp_access(m->access), NULL,
                                     &m->reg[i]);
    if (rc && rc != RMX_ENODEV)
      return rc;
  }
  return 0;
}

int rmx_mem_reg(rmx_ctx_t *ctx, void *addr, size_t len, unsigned access, rmx_mem_t **out)
{
  if (!ctx || !addr || !len || !out || !access ||
      (access & ~(unsigned)(RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE |
                            RMX_MEM_REMOTE_ATOMIC)))
    return RMX_EINVAL;
  if ((uintptr_t)addr + len < (uintptr_t)addr)
    return RMX_EINVAL;
  rmx_mem_t *m = calloc(1, sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  m->ctx = ctx;
  m->addr = addr;
  m->len = len;
  m->access = access;
  rmx_list_init(&m->grants);
  ctx->nmems++;
  ctx->mem_reg_bytes += len;
  int rc = reg_missing(m);
  if (rc) {
    rmx_mem_dereg(m);
    return rc;
  }
  *out = m;
  return 0;
}

static void grant_release(rmx__grant_t *g)
{
  /* its peer may still hold it (a reader racing the withdrawal): from now
   * on a use of it on this connection is stale, not a guess */
  rmx__guard_withdrawn(&g->c->guard, g->c->ops->mem_rkey(g->tm));
  if (g->c->user_closed && g->c->tp_state == RMX_TPS_OPEN)
    g->c->ops->flush(g->c->tc); /* closing: its BYE goes to the device before the key ends */
  rmx_list_del(&g->mem_link);
  rmx_list_del(&g->conn_link);
  g->c->ops->mem_dereg(g->tm);
  free(g);
}

static rmx__grant_t *grant_find(rmx_mem_t *m, rmx_conn_t *c)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &m->grants) {
    rmx__grant_t *g = rmx_container_of(n, rmx__grant_t, mem_link);
    if (g->c == c)
      return g;
  }
  return NULL;
}

void rmx__mem_conn_gone(rmx_conn_t *c)
{
  rmx_list_t *n;
  while ((n = c->grants.next) != &c->grants)
    grant_release(rmx_container_of(n, rmx__grant_t, conn_link));
}

void rmx_mem_dereg(rmx_mem_t *m)
{
  rmx_list_t *n;
  if (!m)
    return;
  if (m->name) /* its name first: the peers that looked it up forget it */
    m->ctx->up.name_forget(m, NULL);
  while ((n = m->grants.next) != &m->grants) /* windows go before their region */
    grant_release(rmx_container_of(n, rmx__grant_t, mem_link));
  for (int i = 0; i < RMX_TP_COUNT; i++)
    if (m->reg[i]) {
      if (m->cap) /* any peer may hold it still: stale on every connection */
        rmx__guard_cap_gone(&m->ctx->guard, m->ctx->tp_ops[i]->mem_rkey(m->reg[i]));
      m->ctx->tp_ops[i]->mem_dereg(m->reg[i]);
    }
  m->ctx->nmems--;
  m->ctx->mem_reg_bytes -= m->len;
  free(m);
}

static int has_remote(const rmx_mem_t *m)
{
  return (m->access & (RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE | RMX_MEM_REMOTE_ATOMIC)) != 0;
}

/* Write the header and n entries (wire id, lane, key) of a packed key;
 * lane NULL: all 0. */
static int pack_keys(const rmx_mem_t *m, const uint8_t *wire, const uint8_t *lane,
                     const uint64_t *key, int n, void *blob, size_t *len)
{
  uint8_t *p = blob;
  size_t need = RKEY_HDR + (size_t)n * RKEY_ENTRY;
  if (*len < need)
    return RMX_EINVAL;
  memset(p, 0, need);
  p[0] = RKEY_VERSION;
  p[1] = (uint8_t)n;
  rmx_put16(p + 2, (uint16_t)m->access);
  rmx_put64(p + 8, (uintptr_t)m->addr);
  rmx_put64(p + 16, m->len);
  for (int i = 0; i < n; i++) {
    uint8_t *e = p + RKEY_HDR + (size_t)i * RKEY_ENTRY;
    e[0] = wire[i];
    e[1] = lane ? lane[i] : 0;
    rmx_put64(e + 8, key[i]);
  }
  rmx_put32(p + 4, rkey_sum(p, need));
  *len = need;
  return 0;
}

int rmx_mem_pack(rmx_mem_t *m, void *blob, size_t *len)
{
  uint8_t wire[RMX_TP_COUNT];
  uint64_t key[RMX_TP_COUNT];
  int n = 0, rc;
  if (!m || !blob || !len)
    return RMX_EINVAL;
  if (!has_remote(m))
    return RMX_EINVAL; /* nothing a peer could do with it */
  if ((rc = reg_missing(m)) != 0)
    return rc;
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (!m->reg[i])
      continue;
    /* a capability: any peer of the transport holding the key */
    if ((rc = m->ctx->tp_ops[i]->mem_open(m->reg[i])) != 0)
      return rc;
    wire[n] = m->ctx->tp_ops[i]->wire_id;
    key[n++] = m->ctx->tp_ops[i]->mem_rkey(m->reg[i]);
  }
  if (n == 0)
    return RMX_ENOTCONN;
  m->cap = 1;
  return pack_keys(m, wire, NULL, key, n, blob, len);
}

/* m's key for c's peer alone: the grant made at the first pack, or one now. */
static int grant_key(rmx_mem_t *m, rmx_conn_t *c, uint64_t *key)
{
  int rc;
  if (c->state != RMX_CS_ESTABLISHED || c->tp_state != RMX_TPS_OPEN || !c->tc)
    return RMX_ENOTCONN;
  rmx__grant_t *g = grant_find(m, c);
  if (!g) {
    if (!m->reg[c->tpi] && (rc = reg_missing(m)) != 0)
      return rc;
    if (!m->reg[c->tpi])
      return RMX_ENOTCONN;
    if (!(g = calloc(1, sizeof(*g))))
      return RMX_ENOMEM;
    if ((rc = c->ops->mem_grant(m->reg[c->tpi], c->tc, &g->tm)) != 0) {
      free(g);
      return rc;
    }
    g->m = m;
    g->c = c;
    rmx_list_push(&m->grants, &g->mem_link);
    rmx_list_push(&c->grants, &g->conn_link);
  }
  *key = c->ops->mem_rkey(g->tm);
  return 0;
}

int rmx_mem_pack_for(rmx_mem_t *m, rmx_conn_t *c, void *blob, size_t *len)
{
  uint8_t wire[RMX__LANES], lane[RMX__LANES];
  uint64_t key[RMX__LANES];
  int n = 1, rc;
  if (!m || !c || !blob || !len || c->ctx != m->ctx || !has_remote(m) || c->lane)
    return RMX_EINVAL;
  if (*len < RKEY_HDR + RKEY_ENTRY)
    return RMX_EINVAL;
  if ((rc = grant_key(m, c, &key[0])) != 0)
    return rc;
  wire[0] = c->ops->wire_id;
  lane[0] = 0;
  /* A key for each rail up, for that rail alone; one that cannot have its
   * key (closing) is left out, and carries none of this region's parts. */
  for (unsigned l = 1; c->rails && l < RMX__LANES; l++) {
    rmx_conn_t *r = rmx__rail_up(c->rails, l);
    if (r && *len >= RKEY_HDR + (size_t)(n + 1) * RKEY_ENTRY && grant_key(m, r, &key[n]) == 0) {
      wire[n] = r->ops->wire_id;
      lane[n++] = (uint8_t)l;
    }
  }
  return pack_keys(m, wire, lane, key, n, blob, len);
}

int rmx_mem_revoke(rmx_mem_t *m, rmx_conn_t *c)
{
  if (!m || !c)
    return RMX_EINVAL;
  rmx__grant_t *g = grant_find(m, c);
  if (!g)
    return RMX_ENOENT;
  if (m->name) /* the peer forgets the key it found by name */
    m->ctx->up.name_forget(m, c);
  grant_release(g);
  for (unsigned l = 1; c->rails && !c->lane && l < RMX__LANES; l++) /* and its rails' */
    if (c->rails->lane[l] && (g = grant_find(m, c->rails->lane[l])) != NULL)
      grant_release(g);
  return 0;
}

int rmx__rkey_decode(const void *blob, size_t len, uint8_t wire_id, rmx_rkey_t *out)
{
  const uint8_t *p = blob;
  if (!blob || len < RKEY_HDR)
    return RMX_EINVAL;
  unsigned n = p[1];
  if (p[0] != RKEY_VERSION)
    return RMX_EVERSION;
  if (n == 0 || n > RKEY_ENTRIES || len != RKEY_HDR + n * RKEY_ENTRY)
    return RMX_EINVAL;
  if (rmx_get32(p + 4) != rkey_sum(p, len))
    return RMX_EINVAL; /* damaged */
  uint64_t base = rmx_get64(p + 8), size = rmx_get64(p + 16);
  unsigned access = rmx_get16(p + 2);
  if (size == 0 || base + size < base || access == 0 || (access & ~0xfu))
    return RMX_EINVAL;
  int found = 0;
  uint8_t seen[8] = {0}; /* by transport: the lanes seen */
  out->lanes = 0;
  for (unsigned i = 0; i < n; i++) {
    const uint8_t *e = p + RKEY_HDR + i * RKEY_ENTRY;
    if (e[0] == 0 || e[0] > 7 || e[1] > RMX_RAILS_MAX || (seen[e[0]] & (1u << e[1])))
      return RMX_EINVAL; /* unknown transport or lane, or repeated */
    seen[e[0]] |= (uint8_t)(1u << e[1]);
    for (int k = 2; k < 8; k++)
      if (e[k])
        return RMX_EINVAL; /* reserved bytes are zero */
    if (e[0] != wire_id)
      continue;
    out->lane_key[e[1]] = rmx_get64(e + 8);
    out->lanes |= (uint8_t)(1u << e[1]);
    if (e[1] == 0) {
      out->access = access;
      out->base = base;
      out->len = size;
      out->key = out->lane_key[0];
      found = 1;
    }
  }
  return found ? 0 : RMX_ENOENT;
}

int rmx_rkey_unpack(rmx_conn_t *c, const void *blob, size_t len, rmx_rkey_t **out)
{
  rmx_rkey_t k = {0};
  if (!c || !blob || !out)
    return RMX_EINVAL;
  int rc = rmx__rkey_decode(blob, len, c->ops->wire_id, &k);
  if (rc == RMX_ENOENT)
    rc = RMX_EINVAL; /* no key for this connection's transport */
  if (rc)
    return rc;
  rmx_rkey_t *rk = malloc(sizeof(*rk));
  if (!rk)
    return RMX_ENOMEM;
  *rk = k;
  rk->tpi = c->tpi;
  *out = rk;
  return 0;
}

size_t rmx_rkey_size(const rmx_rkey_t *rk) { return rk->len; }
void rmx_rkey_release(rmx_rkey_t *rk) { free(rk); }

/* The local registration for a transfer on c: the caller's, the cache's, or
 * none where the transport needs none. */
int rmx__mem_local(rmx_conn_t *c, void *addr, size_t len, unsigned access, rmx_mem_t *given,
                   rmx_tp_mem_t **mem, rmx__rc_entry_t **cached)
{
  *mem = NULL;
  *cached = NULL;
  if (given) {
    if ((uint8_t *)addr < given->addr || len > given->len ||
        (size_t)((uint8_t *)addr - given->addr) > given->len - len)
      return RMX_EINVAL; /* the buffer is not inside the registration */
    int rc;
    if (!given->reg[c->tpi] && (rc = reg_missing(given)) != 0)
      return rc;
    *mem = given->reg[c->tpi];
    return 0;
  }
  if (!(c->ops->flags & RMX_TP_F_LOCAL_REG))
    return 0;
  int rc = rmx__regcache_get(c->ctx, c->tpi, addr, len, access, cached);
  if (rc == 0)
    *mem = (*cached)->mem;
  return rc;
}

int rmx_ctx_stats_get(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st, size_t size)
{
  if (!ctx || !st || size < RMX_CTX_STATS_SIZE_V0)
    return RMX_EINVAL;
  rmx_ctx_stats_t all = ctx->st;
  all.reg_cache_bytes = ctx->rc.bytes;
  all.pool_bytes = ctx->pool.bytes;
  all.conns = ctx->nconns;
  all.mem_reg_bytes = ctx->mem_reg_bytes;
  all.mem_regs = ctx->nmems;
  rmx_tp_stats_t tp = {0};
  for (int i = 0; i < RMX_TP_COUNT; i++)
    if (ctx->tp[i] && ctx->tp_ops[i]->stats)
      ctx->tp_ops[i]->stats(ctx->tp[i], &tp);
  all.tp_reg_bytes = tp.reg_bytes;
  all.tp_refused = tp.refused;
  all.tp_direct_bytes = tp.direct_bytes;
  /* Whole fields only; a newer caller's fields past ours read 0. */
  size_t n = size < sizeof(all) ? size - size % sizeof(uint64_t) : sizeof(all);
  memcpy(st, &all, n);
  if (size > n)
    memset((char *)st + n, 0, size - n);
  return 0;
}

/* The first version of the structure: callers built before conns was
 * added allocate only that much. */
_Static_assert(offsetof(rmx_ctx_stats_t, conns) == RMX_CTX_STATS_SIZE_V0,
               "rmx_ctx_stats_t's first fields moved");

void rmx_ctx_stats(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st)
{
  rmx_ctx_stats_get(ctx, st, RMX_CTX_STATS_SIZE_V0);
}
