/* SPDX-License-Identifier: BSD-3-Clause */
/* Peer authentication (src/conn/auth.c); included by rmx_int.h. */
#ifndef RMX_CONN_AUTH_H
#define RMX_CONN_AUTH_H

/* The longest hello we send: the accepting side's, with its range. */
#define RMX_AUTH_HELLO_MAX (RMX_WIRE_HELLO_AUTH_ACCEPT_LEN + RMX_WIRE_RANGE_LEN)
/* RMX_AUTH_SECRET_FILE into cfg->auth_secret: 0 or RMX_EINVAL (logged). */
int rmx__auth_config(rmx_config_t *cfg);
/* Derive the key from ctx->cfg.auth_secret and wipe the copy: 0, RMX_EINVAL,
 * RMX_ENOTSUP (built without libsodium). */
int rmx__auth_ctx_init(rmx_ctx_t *ctx);
void rmx__auth_ctx_timer(rmx_ctx_t *ctx); /* the deadline timer, on the context's loop */
void rmx__auth_ctx_fini(rmx_ctx_t *ctx);  /* wipe the key */
/* Connecting: extend our 32-byte hello in out; returns its length. */
size_t rmx__auth_hello(rmx_conn_t *c, uint8_t out[RMX_AUTH_HELLO_MAX]);
/* Accepting: check the peer's hello against our policy and extend ours in
 * out (*len grows): 0, RMX_EACCES or RMX_EPROTO (logged). */
int rmx__auth_accept(rmx_conn_t *c, rmx_listener_t *l, const uint8_t *peer, size_t plen,
                     const rmx_wire_hello_t *h, uint8_t out[RMX_AUTH_HELLO_MAX], size_t *len);
/* Connecting, the server's hello arrived: 0 (no authentication), 1 (its
 * proof is good: call rmx__auth_begin after rmx__msg_init), or RMX_EACCES
 * (logged). */
int rmx__auth_check_server(rmx_conn_t *c, const rmx_wire_hello_t *h, const uint8_t *data,
                           size_t len);
/* Both sides: enter RMX_CS_AUTH (the client sends AUTH). */
void rmx__auth_begin(rmx_conn_t *c);
/* A frame arrived in RMX_CS_AUTH: 1 when the peer is authenticated now
 * (the caller hands the connection over: rmx__conn_ready). */
int rmx__auth_recv(rmx_conn_t *c, const void *frame, size_t len);
/* A refusal in RMX_CS_AUTH for something other than a frame (logged). */
void rmx__auth_refuse(rmx_conn_t *c, const char *why);
/* The connection leaves RMX_CS_AUTH's deadline list (any outcome). */
void rmx__auth_end(rmx_conn_t *c);

#endif
