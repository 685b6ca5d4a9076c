/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer authentication with a shared secret (docs/protocol.md, "Peer
 * authentication"). All the cryptography is libsodium's:
 *
 *   key    K = BLAKE2b-256("rmx auth key v1" || secret)    crypto_generichash
 *   proofs HMAC-SHA-512-256 keyed with K                    crypto_auth
 *          server: over "rmx auth server" || client hello || server hello
 *          client: over "rmx auth client" || client hello || server hello
 *          (then both version ranges, where both sides sent one)
 *
 * where each hello is the 32-byte hello plus that side's 16-byte nonce
 * (randombytes_buf). Nothing secret goes on the wire; each proof covers
 * both nonces, so a recorded exchange does not verify on a new connection
 * (the server picks a new nonce every time). Proofs are checked with
 * crypto_auth_verify (constant time).
 *
 * The connecting side checks the server's proof in the hello before
 * anything else and answers with AUTH as its first frame; the accepting
 * side checks AUTH before the connection is handed to the application
 * (on_accept) and answers AUTH_OK, on which the connecting side's
 * on_connected(0) runs. Until then the only frame either side accepts is
 * that one; anything else closes the connection with RMX_EACCES.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef RMX_HAVE_SODIUM
#include <sodium.h>
#endif

#include "rmx_int.h"

#define LABEL_LEN 15 /* each label below, without a terminator */
static const char key_label[] = "rmx auth key v1";
static const char server_label[] = "rmx auth server";
static const char client_label[] = "rmx auth client";
_Static_assert(sizeof(key_label) - 1 == LABEL_LEN && sizeof(server_label) - 1 == LABEL_LEN &&
               sizeof(client_label) - 1 == LABEL_LEN, "labels are 15 bytes");

_Static_assert(RMX_WIRE_HDR_LEN + RMX_WIRE_AUTH_PROOF_LEN <= RMX_WIRE_CTRL_MAX,
               "an AUTH frame fits in a control op");

#define HELLO_LEN RMX_WIRE_HELLO_AUTH_CONNECT_LEN /* hello + nonce, per side */
#define TRANSCRIPT_LEN (LABEL_LEN + 2 * HELLO_LEN + 2 * RMX_WIRE_RANGE_LEN) /* the longest */

static void wipe(void *p, size_t n)
{
#ifdef RMX_HAVE_SODIUM
  sodium_memzero(p, n);
#else
  explicit_bzero(p, n);
#endif
}

/* ---- configuration ---- */

/* The file is the secret, raw bytes (any value, NUL and newline
 * included), 1 to RMX_AUTH_FILE_MAX of them; the field gets their
 * lowercase hex, which both sides derive the key from alike. */
#define RMX_AUTH_FILE_MAX 63
_Static_assert(2 * RMX_AUTH_FILE_MAX < sizeof(((rmx_config_t *)0)->auth_secret),
               "the hex of the longest file fits the field with its NUL");

int rmx__auth_config(rmx_config_t *cfg)
{
  const char *path = getenv("RMX_AUTH_SECRET_FILE");
  uint8_t buf[RMX_AUTH_FILE_MAX + 1];
  struct stat st;
  const char *why = NULL;

  if (!path || !*path)
    return 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    RMX_LOG_AT(cfg->log_level, ERROR, "RMX_AUTH_SECRET_FILE=%s cannot be read: %s", path,
               strerror(errno));
    return RMX_EINVAL;
  }
  size_t n = fread(buf, 1, sizeof(buf), f);
  int failed = ferror(f);
  if (!failed && fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
    RMX_LOG_AT(cfg->log_level, WARN, "RMX_AUTH_SECRET_FILE=%s is readable by other users "
               "(mode %03o)", path, (unsigned)(st.st_mode & 0777));
  fclose(f);
  if (failed)
    why = "cannot be read";
  else if (n == 0)
    why = "is empty (the whole file is the secret: 32 random bytes, for example from "
          "head -c 32 /dev/urandom)";
  else if (n > RMX_AUTH_FILE_MAX)
    why = "is longer than 63 bytes (the whole file is the secret, raw bytes: 32 random "
          "bytes are enough)";
  if (why) {
    wipe(buf, sizeof(buf));
    RMX_LOG_AT(cfg->log_level, ERROR, "RMX_AUTH_SECRET_FILE=%s %s", path, why);
    return RMX_EINVAL;
  }
  if (n < 16)
    RMX_LOG_AT(cfg->log_level, WARN, "RMX_AUTH_SECRET_FILE=%s holds only %zu bytes: a recorded "
               "handshake lets an eavesdropper guess a short secret offline; use 32 random "
               "bytes", path, n);
  static const char hex[] = "0123456789abcdef";
  for (size_t k = 0; k < n; k++) {
    cfg->auth_secret[2 * k] = hex[buf[k] >> 4];
    cfg->auth_secret[2 * k + 1] = hex[buf[k] & 15];
  }
  cfg->auth_secret[2 * n] = '\0';
  wipe(buf, sizeof(buf));
  return 0;
}

/* ---- the context ---- */

int rmx__auth_ctx_init(rmx_ctx_t *ctx)
{
  char *secret = ctx->cfg.auth_secret;
  size_t n = strnlen(secret, sizeof(ctx->cfg.auth_secret));

  rmx_list_init(&ctx->authing);
  if (n == sizeof(ctx->cfg.auth_secret)) {
    RMX_LOG(ctx, ERROR, "auth_secret is not a NUL-terminated string of at most 127 bytes");
    wipe(secret, sizeof(ctx->cfg.auth_secret));
    return RMX_EINVAL;
  }
  if (n == 0)
    return 0;
#ifndef RMX_HAVE_SODIUM
  RMX_LOG(ctx, ERROR, "a peer-authentication secret is configured, but this rmx was built "
          "without libsodium: refusing to create a context that would not authenticate");
  wipe(secret, sizeof(ctx->cfg.auth_secret));
  return RMX_ENOTSUP;
#else
  if (sodium_init() < 0) {
    RMX_LOG(ctx, ERROR, "libsodium failed to initialise: no peer authentication possible");
    wipe(secret, sizeof(ctx->cfg.auth_secret));
    return RMX_EIO;
  }
  if (n < 16)
    RMX_LOG(ctx, WARN, "the authentication secret is only %zu bytes: a recorded handshake lets "
            "an eavesdropper guess a short secret offline; use 32 random bytes", n);
  crypto_generichash_state h;
  crypto_generichash_init(&h, NULL, 0, sizeof(ctx->auth_key));
  crypto_generichash_update(&h, (const unsigned char *)key_label, LABEL_LEN);
  crypto_generichash_update(&h, (const unsigned char *)secret, n);
  crypto_generichash_final(&h, ctx->auth_key, sizeof(ctx->auth_key));
  sodium_memzero(&h, sizeof(h));
  /* The context keeps the key, never the secret. */
  sodium_memzero(secret, sizeof(ctx->cfg.auth_secret));
  ctx->auth_on = 1;
  RMX_LOG(ctx, INFO, "peer authentication on: every connection must prove the shared secret");
  return 0;
#endif
}

static void auth_timer_cb(uv_timer_t *t);

void rmx__auth_ctx_timer(rmx_ctx_t *ctx)
{
  uv_timer_init(ctx->loop, &ctx->auth_timer);
  ctx->auth_timer.data = ctx;
  uv_unref((uv_handle_t *)&ctx->auth_timer);
}

void rmx__auth_ctx_fini(rmx_ctx_t *ctx)
{
  wipe(ctx->auth_key, sizeof(ctx->auth_key));
  wipe(ctx->cfg.auth_secret, sizeof(ctx->cfg.auth_secret));
  ctx->auth_on = 0;
}

/* ---- logging: who the peer is, never the secret or the key ---- */

static const char *peer_name(rmx_conn_t *c, char *buf, size_t len)
{
  if (!c->passive)
    snprintf(buf, len, "%s server %s", c->ops->name, c->peer);
  else
    snprintf(buf, len, "incoming %s peer %s", c->ops->name, c->peer);
  return buf;
}

/* An incoming peer can fail as often as it likes: its refusals share the
 * context's limiter (one line per second); ours, as a client, are not. */
#define AUTH_LOG(c, lvl, ...)                                      \
  do {                                                             \
    if ((c)->passive)                                              \
      RMX_LOG_LIMITED((c)->ctx, &(c)->ctx->rl_refused, lvl, __VA_ARGS__); \
    else                                                           \
      RMX_LOG((c)->ctx, lvl, __VA_ARGS__);                         \
  } while (0)

void rmx__auth_refuse(rmx_conn_t *c, const char *why)
{
  char who[400];
  AUTH_LOG(c, ERROR, "%s: authentication failed, refused: %s", peer_name(c, who, sizeof(who)),
           why);
  rmx__conn_down(c, RMX_EACCES);
}

/* ---- proofs ---- */

#ifdef RMX_HAVE_SODIUM
/* Returns the transcript's length: both ranges count only when both sides
 * sent one, so a relay that strips either makes the proofs disagree. */
static size_t transcript(uint8_t m[TRANSCRIPT_LEN], const char *label, const rmx__auth_conn_t *a)
{
  size_t n = LABEL_LEN;
  memcpy(m, label, LABEL_LEN);
  memcpy(m + n, a->chello, HELLO_LEN);
  n += HELLO_LEN;
  memcpy(m + n, a->shello, HELLO_LEN);
  n += HELLO_LEN;
  if (a->ranged) {
    memcpy(m + n, a->crange, RMX_WIRE_RANGE_LEN);
    memcpy(m + n + RMX_WIRE_RANGE_LEN, a->srange, RMX_WIRE_RANGE_LEN);
    n += 2 * RMX_WIRE_RANGE_LEN;
  }
  return n;
}

static void proof(rmx_ctx_t *ctx, const char *label, const rmx__auth_conn_t *a,
                  uint8_t out[RMX_WIRE_AUTH_PROOF_LEN])
{
  uint8_t m[TRANSCRIPT_LEN];
  _Static_assert(crypto_auth_BYTES == RMX_WIRE_AUTH_PROOF_LEN, "HMAC-SHA-512-256 is 32 bytes");
  _Static_assert(crypto_auth_KEYBYTES == sizeof(ctx->auth_key), "the key is 32 bytes");
  crypto_auth(out, m, transcript(m, label, a), ctx->auth_key);
}

/* 0 when p is the proof for label over this connection's transcript. */
static int proof_check(rmx_ctx_t *ctx, const char *label, const rmx__auth_conn_t *a,
                       const uint8_t *p)
{
  uint8_t m[TRANSCRIPT_LEN];
  return crypto_auth_verify(p, m, transcript(m, label, a), ctx->auth_key);
}

static void nonce(uint8_t *out) { randombytes_buf(out, RMX_WIRE_AUTH_NONCE_LEN); }
#else
/* Never reached: without libsodium no context has auth_on set. */
static void proof(rmx_ctx_t *ctx, const char *label, const rmx__auth_conn_t *a, uint8_t *out)
{
  abort();
}
static int proof_check(rmx_ctx_t *ctx, const char *label, const rmx__auth_conn_t *a,
                       const uint8_t *p)
{
  return -1;
}
static void nonce(uint8_t *out) { abort(); }
#endif

static void set_auth_flag(uint8_t *hello)
{
  rmx_put16(hello + 6, (uint16_t)(rmx_get16(hello + 6) | RMX_HELLO_F_AUTH));
}

/* ---- the handshake ---- */

size_t rmx__auth_hello(rmx_conn_t *c, uint8_t out[RMX_AUTH_HELLO_MAX])
{
  if (!c->ctx->auth_on)
    return RMX_WIRE_HELLO_LEN;
  set_auth_flag(out);
  nonce(out + RMX_WIRE_HELLO_LEN);
  memcpy(c->auth.chello, out, HELLO_LEN);
  c->auth.on = 1;
  return HELLO_LEN;
}

int rmx__auth_accept(rmx_conn_t *c, rmx_listener_t *l, const uint8_t *peer, size_t plen,
                     const rmx_wire_hello_t *h, uint8_t out[RMX_AUTH_HELLO_MAX], size_t *len)
{
  rmx_ctx_t *ctx = c->ctx;
  int peer_auth = (h->flags & RMX_HELLO_F_AUTH) != 0;
  char uri[160] = "?", who[400];

  if (!peer_auth && !ctx->auth_on)
    return 0;
  rmx_listener_uri(l, uri, sizeof(uri));
  peer_name(c, who, sizeof(who));
  if (peer_auth && plen < HELLO_LEN) {
    AUTH_LOG(c, ERROR, "%s on %s set the authentication flag in a %zu-byte handshake (%u "
             "expected with its nonce): refused", who, uri, plen, HELLO_LEN);
    return RMX_EPROTO;
  }
  if (peer_auth != ctx->auth_on) {
    AUTH_LOG(c, ERROR, "%s on %s: authentication failed, refused: %s", who, uri,
             peer_auth ? "it asks to authenticate and this side has no secret (RMX_AUTH_SECRET_FILE)"
                      : "it does not authenticate and this side requires it");
    return RMX_EACCES;
  }
  memcpy(c->auth.chello, peer, HELLO_LEN);
  set_auth_flag(out);
  nonce(out + RMX_WIRE_HELLO_LEN);
  memcpy(c->auth.shello, out, HELLO_LEN);
  proof(ctx, server_label, &c->auth, out + HELLO_LEN);
  *len = RMX_WIRE_HELLO_AUTH_ACCEPT_LEN;
  c->auth.on = 1;
  return 0;
}

int rmx__auth_check_server(rmx_conn_t *c, const rmx_wire_hello_t *h, const uint8_t *data,
                           size_t len)
{
  int peer_auth = (h->flags & RMX_HELLO_F_AUTH) != 0;
  char who[400];

  if (!c->auth.on && !peer_auth)
    return 0;
  peer_name(c, who, sizeof(who));
  if (!c->auth.on) {
    RMX_LOG(c->ctx, ERROR, "%s: authentication failed, refused: it answered with "
            "authentication this side never asked for (no secret here)", who);
    return RMX_EACCES;
  }
  if (!peer_auth) {
    RMX_LOG(c->ctx, ERROR, "%s: authentication failed, refused: it does not authenticate "
            "(this side has a secret)", who);
    return RMX_EACCES;
  }
  if (len < RMX_WIRE_HELLO_AUTH_ACCEPT_LEN) {
    RMX_LOG(c->ctx, ERROR, "%s: authentication failed, refused: its handshake is %zu bytes, "
            "%u expected with its nonce and proof", who, len, RMX_WIRE_HELLO_AUTH_ACCEPT_LEN);
    return RMX_EACCES;
  }
  memcpy(c->auth.shello, data, HELLO_LEN);
  if (proof_check(c->ctx, server_label, &c->auth, data + HELLO_LEN) != 0) {
    RMX_LOG(c->ctx, ERROR, "%s: authentication failed, refused: its proof is wrong (it holds "
            "another secret, or the handshake was altered)", who);
    return RMX_EACCES;
  }
  return 1;
}

/* ---- the deadline: a peer cannot hold a connection unauthenticated ---- */

/* An incoming peer has the listener's short handshake limit; our own
 * connect the connect's. */
static uint32_t auth_limit(const rmx_conn_t *c)
{
  return c->passive ? c->ctx->cfg.handshake_timeout_ms : c->ctx->cfg.connect_timeout_ms;
}

static void auth_timer_cb(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  uint64_t now = uv_now(ctx->loop);
  rmx_list_t *n;
  char who[400];
  /* The list is in deadline order (rmx__auth_begin). */
  while ((n = ctx->authing.next) != &ctx->authing) {
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, auth.link);
    if (c->state == RMX_CS_AUTH && c->auth.deadline > now) {
      uv_timer_start(&ctx->auth_timer, auth_timer_cb, c->auth.deadline - now, 0);
      return;
    }
    rmx__auth_end(c);
    if (c->state != RMX_CS_AUTH)
      continue; /* already going down */
    AUTH_LOG(c, ERROR, "%s: authentication not finished within %u ms (%s): closing",
             peer_name(c, who, sizeof(who)), auth_limit(c),
             c->passive ? "RMX_HANDSHAKE_TIMEOUT_MS" : "RMX_CONNECT_TIMEOUT_MS");
    rmx__conn_down(c, RMX_ETIMEDOUT);
  }
}

void rmx__auth_end(rmx_conn_t *c)
{
  char who[400];
  if (!c->auth.waiting)
    return;
  c->auth.waiting = 0;
  rmx_list_del(&c->auth.link);
  /* Lost in the middle for a reason not logged yet: most often the peer
   * refused us (it holds another secret, and a peer that refuses never
   * sends its own proof). */
  if (c->state == RMX_CS_DOWN && c->err != RMX_EACCES && c->err != RMX_ECANCELED &&
      c->err != RMX_ETIMEDOUT)
    AUTH_LOG(c, WARN, "%s: the connection ended during authentication (%s): does the peer "
             "hold the same secret?", peer_name(c, who, sizeof(who)), rmx_strerror(c->err));
}

void rmx__auth_begin(rmx_conn_t *c)
{
  rmx_ctx_t *ctx = c->ctx;
  c->state = RMX_CS_AUTH;
  c->auth.deadline = uv_now(ctx->loop) + auth_limit(c);
  /* In deadline order: after the last one due no later (two limits). */
  rmx_list_t *at = ctx->authing.prev;
  while (at != &ctx->authing &&
         rmx_container_of(at, rmx_conn_t, auth.link)->auth.deadline > c->auth.deadline)
    at = at->prev;
  if (at == &ctx->authing) /* the first due: the timer follows it */
    uv_timer_start(&ctx->auth_timer, auth_timer_cb, auth_limit(c), 0);
  rmx_list_push(at->next, &c->auth.link); /* before at's successor */
  c->auth.waiting = 1;
  if (!c->passive) {
    uint8_t p[RMX_WIRE_AUTH_PROOF_LEN];
    proof(ctx, client_label, &c->auth, p);
    int rc = rmx__msg_queue_auth(c, RMX_FR_AUTH, p, sizeof(p));
    if (rc)
      rmx__conn_down(c, rc);
  }
}

int rmx__auth_recv(rmx_conn_t *c, const void *buf, size_t len)
{
  static const char *const names[] = {"an unknown", "a DATA", "an RTS", "a FIN", "a CREDIT",
                                      "a BYE", "an AUTH", "an AUTH_OK"};
  uint8_t want = c->passive ? RMX_FR_AUTH : RMX_FR_AUTH_OK;
  char why[128];
  rmx_frame_t f;
  const char *bad;

  if (rmx__wire_decode(buf, len, &f, &bad) != 0) {
    snprintf(why, sizeof(why), "malformed first frame: %s", bad);
    rmx__auth_refuse(c, why);
    return 0;
  }
  if (f.type != want) {
    snprintf(why, sizeof(why), "%s frame came before %s", names[f.type],
             c->passive ? "its AUTH" : "AUTH_OK");
    rmx__auth_refuse(c, why);
    return 0;
  }
  if (rmx__credit_returned(&c->cr, f.credits) != 0) {
    rmx__auth_refuse(c, "its first frame returned credits it was never owed");
    return 0;
  }
  /* Like a CREDIT frame: it used a receive buffer, returned in the header
   * of a later frame, never a reason for a CREDIT frame of its own. */
  c->cr.rx_unreturned++;
  rmx__credit_freed(&c->cr, 1);
  if (c->passive) {
    if (proof_check(c->ctx, client_label, &c->auth, f.payload) != 0) {
      rmx__auth_refuse(c, "wrong proof in AUTH (another secret, or a replayed exchange)");
      return 0;
    }
    int rc = rmx__msg_queue_auth(c, RMX_FR_AUTH_OK, NULL, 0);
    if (rc) {
      rmx__conn_down(c, rc);
      return 0;
    }
  }
  rmx__auth_end(c);
  return c->state == RMX_CS_AUTH;
}
