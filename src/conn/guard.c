/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The guard: guessing costs the guesser. Every remote access this side
 * refuses (a read, write or atomic with a bad key, out of bounds or
 * without the rights) is a strike against the peer's IP address (the
 * port is not part of it: a new connection is a new port). A peer with
 * RMX_GUARD_STRIKES strikes within RMX_GUARD_WINDOW_MS has its new
 * incoming connections refused for RMX_GUARD_BAN_MS; its connections that
 * stand are left alone (the transport already cuts or refuses what each
 * one does wrong). The table is fixed (RMX__GUARD_SLOTS addresses, the
 * least recently struck that is not banned makes room), so a flood of
 * addresses costs no memory; it may make the guard forget one of them.
 *
 * Not every refusal is a guess. A key the peer held on this connection and
 * saw withdrawn since (revoked, its registration released, or ended with
 * its transport connection where the connection reconnects) is stale: a reader racing the owner, which bulk
 * movers do routinely; the connection remembers the last RMX__GUARD_STALE
 * of them, and the context its last deregistered capability keys, and a
 * refusal of one strikes nobody. A key never given to this connection
 * (another's, a guess) is no stale key, so a guesser cannot launder its
 * tries. And a key counts once: the refusals of the other parts of its
 * request (or of a retry) after its strike, while the connection still
 * remembers it among its last RMX__GUARD_RECENT struck keys, strike no more,
 * since a key refused again tells its sender nothing new; each new key
 * tried is a strike. Transports that cannot tell which key was refused
 * (verbs, where the refusal also ends the connection) strike once per
 * refusal.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/un.h>

#include "rmx_int.h"

/* The address part of sa, IPv4-mapped IPv6 as IPv4: 4 or 16 bytes into
 * key; a Unix socket's name (shm://) as 8 bytes of its hash, so every
 * peer of one name is one address, as every peer on loopback is; 0 for
 * other families (not guarded). */
static unsigned addr_key(const struct sockaddr *sa, uint8_t key[16])
{
  if (sa->sa_family == AF_UNIX) {
    const struct sockaddr_un *un = (const void *)sa;
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof(un->sun_path); i++)
      h = (h ^ (uint8_t)un->sun_path[i]) * 1099511628211ull;
    memcpy(key, &h, sizeof(h));
    return sizeof(h);
  }
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (sa->sa_family == AF_INET) {
    memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 4;
  }
  if (sa->sa_family == AF_INET6) {
    const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    if (memcmp(a, mapped, sizeof(mapped)) == 0) {
      memcpy(key, a + 12, 4);
      return 4;
    }
    memcpy(key, a, 16);
    return 16;
  }
  return 0;
}

static rmx__guard_slot_t *slot_find(rmx__guard_t *g, const uint8_t *key, unsigned len)
{
  for (unsigned i = 0; i < RMX__GUARD_SLOTS; i++)
    if (g->slot[i].len == len && memcmp(g->slot[i].key, key, len) == 0)
      return &g->slot[i];
  return NULL;
}

uint64_t rmx__guard_banned(rmx_ctx_t *ctx, const struct sockaddr *sa)
{
  uint8_t key[16];
  unsigned len;
  if (!ctx->cfg.guard_strikes || !(len = addr_key(sa, key)))
    return 0;
  rmx__guard_slot_t *s = slot_find(&ctx->guard, key, len);
  uint64_t now = uv_now(ctx->loop);
  return s && s->banned_until > now ? s->banned_until - now : 0;
}

void rmx__guard_strike(rmx_ctx_t *ctx, const struct sockaddr *sa)
{
  rmx__guard_t *g = &ctx->guard;
  uint8_t key[16];
  unsigned len;
  if (!ctx->cfg.guard_strikes || !(len = addr_key(sa, key)))
    return;
  uint64_t now = uv_now(ctx->loop);
  rmx__guard_slot_t *s = slot_find(g, key, len);
  if (!s) {
    /* A free slot, else the least recently struck one not banned, else
     * the least recently struck. */
    rmx__guard_slot_t *old = NULL, *old_free = NULL;
    for (unsigned i = 0; i < RMX__GUARD_SLOTS && !s; i++) {
      rmx__guard_slot_t *t = &g->slot[i];
      if (!t->len)
        s = t;
      else if (t->banned_until <= now && (!old_free || t->last < old_free->last))
        old_free = t;
      else if (!old || t->last < old->last)
        old = t;
    }
    s = s ? s : old_free ? old_free : old;
    memset(s, 0, sizeof(*s));
    memcpy(s->key, key, len);
    s->len = (uint8_t)len;
    s->win_start = now;
  }
  if (now - s->win_start >= ctx->cfg.guard_window_ms) {
    s->win_start = now;
    s->strikes = 0;
  }
  s->last = now;
  if (++s->strikes < ctx->cfg.guard_strikes)
    return;
  s->banned_until = now + ctx->cfg.guard_ban_ms;
  s->strikes = 0;
  s->win_start = now;
  char addr[RMX_URI_NAME_MAX + 2] = "?";
  rmx__sa_str(sa, addr, sizeof(addr));
  RMX_LOG_LIMITED(ctx, &g->rl, WARN,
                  "guard: peer address %s made %u refused remote accesses within %u ms "
                  "(RMX_GUARD_STRIKES, RMX_GUARD_WINDOW_MS): its new connections are refused "
                  "for %u ms (RMX_GUARD_BAN_MS)",
                  addr, ctx->cfg.guard_strikes, ctx->cfg.guard_window_ms, ctx->cfg.guard_ban_ms);
}

static int ring_has(const uint64_t *ring, uint32_t n, uint32_t cap, uint64_t key)
{
  for (uint32_t i = 0; ring && i < n && i < cap; i++)
    if (ring[i] == key)
      return 1;
  return 0;
}

/* The transports' strike (rmx_tp_env_t): the connection's peer address,
 * unless key is stale there or struck already, or this side closed the
 * connection: its keys end with the close, so what the peer still had in
 * flight against them is stale, however the transport reports it (a verbs
 * QP's access error names no key). 1 unless this side closed it. */
int rmx__tp_strike(void *owner, const uint64_t *key)
{
  rmx_conn_t *c = owner;
  struct sockaddr_storage ss;
  if (!c || c->user_closed)
    return 0;
  if (key) {
    rmx__guard_conn_t *g = &c->guard;
    rmx__guard_t *cg = &c->ctx->guard;
    if (ring_has(g->stale, g->nstale, RMX__GUARD_STALE, *key) ||
        ring_has(cg->caps, cg->ncaps, RMX__GUARD_STALE, *key) ||
        ring_has(g->recent, g->nrecent, RMX__GUARD_RECENT, *key))
      return 1;
    rmx__guard_ring_put(g->recent, &g->nrecent, RMX__GUARD_RECENT, *key);
  }
  if (c->has_peer_ss)
    ss = c->peer_ss;
  else if (!c->tc || c->ops->peer_addr(c->tc, &ss) != 0)
    return 1;
  rmx__guard_strike(c->ctx, (const struct sockaddr *)&ss);
  return 1;
}
