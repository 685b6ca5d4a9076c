/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the authentication cases (auth_*.c) share: one loop per test, an
 * echoing server and a client with a secret each, raw peers in helper
 * threads, and the proofs of docs/protocol.md computed with libsodium. The
 * framing is rawpeer.h's.
 */
#ifndef RMX_TEST_AUTH_H
#define RMX_TEST_AUTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <rmx/rmx.h>
#include <uv.h>

#include "harness.h"
#include "rawpeer.h"

#define SECRET_A "correct horse battery staple, 32+ bytes of it"
#define SECRET_B "another secret entirely, also long enough......"

/* ---- the loop and the contexts ---- */

/* One loop per test: a test that fails leaves its contexts behind, and
 * their loop is abandoned rather than run forever. */
extern uv_loop_t loops[64];
extern int cur;
#define LOOP (&loops[cur])

/* Run the loop until cond (a 20 s guard; the tick keeps turns short). */
#define PUMP_UNTIL(cond)                                                        \
  do {                                                                          \
    uint64_t t0_ = now_ms();                                                    \
    while (!(cond)) {                                                           \
      uv_run(LOOP, UV_RUN_ONCE);                                                \
      if (now_ms() - t0_ > 20000)                                               \
        fail_msg("%s:%d: timed out waiting for %s", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

void pump_for(unsigned ms);
/* Every case's setup and teardown: a new loop, and its end. */
int setup(void **state);
int teardown(void **state);
/* A context on the test's loop with this secret (NULL: none). */
rmx_ctx_t *mkctx(const char *secret, uint32_t connect_timeout_ms);

/* ---- a server: echoes messages, serves RPC 42 (the request reversed) ---- */

typedef struct srv {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[128];
  int port;
  rmx_conn_t *conns[16];
  int n, accepted, recvs, disconnects, closed;
} srv_t;

void srv_open_ctx(srv_t *s, rmx_ctx_t *ctx);
void srv_open(srv_t *s, const char *secret, uint32_t connect_timeout_ms);
void srv_close(srv_t *s);

/* ---- a client ---- */

typedef struct cl {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, status, recvs, bad, disconnects, closed, sent;
  int rpc_done, rpc_status;
  uint8_t rpc_reply[64];
  size_t rpc_len;
  const uint8_t *expect[16];
  size_t expect_len[16];
} cl_t;

void c_sent(rmx_conn_t *c, int st, void *a);
void c_reply(rmx_conn_t *c, int st, const void *d, size_t n, void *a);
/* Connect with this secret to uri and wait for on_connected. */
void cl_connect(cl_t *k, const char *secret, const char *uri);
void cl_close(cl_t *k);

/* ---- raw peers: a blocking socket in a helper thread ---- */

typedef struct raw raw_t;
typedef int (*script_fn)(raw_t *r);

struct raw {
  int fd, lfd; /* lfd: a raw server's listening socket */
  int port;
  pthread_t th;
  script_fn script;
  int mode;
  atomic_int done, step;
  char why[300];
  uint8_t rec[512]; /* bytes recorded from an exchange, to replay */
  uint8_t srv_nonce[NONCE_LEN]; /* the server's, in that exchange */
  size_t reclen;
  int32_t reject; /* a REJECT's status */
  uint64_t rd_addr, rd_key; /* RC_READ_FIRST: a registration at the server */
  uint64_t ms;    /* how long until the server hung up */
  const void *secret; /* a raw client's secret string S (NULL: SECRET_A) */
  size_t secret_len;
};

/* In a script: give up with a reason, which raw_join fails the test with. */
#define RCHECK(r, cond, ...)                                       \
  do {                                                             \
    if (!(cond)) {                                                 \
      int n_ = snprintf((r)->why, sizeof((r)->why), "line %d: ", __LINE__); \
      snprintf((r)->why + n_, sizeof((r)->why) - (size_t)n_, __VA_ARGS__);  \
      return -1;                                                   \
    }                                                              \
  } while (0)

void raw_start(raw_t *r, script_fn fn, int mode);
void raw_join(raw_t *r);

/* ---- the page's authentication ---- */

/* A 32-byte hello: eager 8192, depth 64, 1 MiB, rendezvous 4, window 64. */
void auth_hello(uint8_t *o, uint16_t flags);
/* K = BLAKE2b-256("rmx auth key v1" || secret). */
void derive(const char *secret, uint8_t k[32]);
/* The same over len bytes of any value. */
void derive_bytes(const void *secret, size_t len, uint8_t k[32]);
/* HMAC-SHA-512-256(K, label || C || S), label "rmx auth server" / "client". */
void proof(const uint8_t k[32], const char *who, const uint8_t *c, const uint8_t *s,
           uint8_t out[32]);

/* ---- the cases ---- */

void ranges_pass_through_a_relay(void **state); /* auth_versions.c */
void a_stripped_range_is_a_version_4_peer(void **state);
void a_stripped_range_fails_authentication(void **state);
void same_secret_connects_and_carries_messages_and_rpc(void **state); /* auth_api.c */
void different_secrets_are_refused(void **state);
void secret_on_server_only_is_refused(void **state);
void secret_on_client_only_is_refused(void **state);
void secret_file_is_read_and_checked(void **state);
void raw_client_keyed_by_the_files_hex_is_served(void **state); /* auth_raw_client.c */
void authenticated_raw_client_is_served(void **state); /* auth_raw_client.c */
void data_before_auth_is_cut_off(void **state);
void read_before_auth_is_cut_off(void **state);
void rts_before_auth_is_cut_off(void **state);
void credit_before_auth_is_cut_off(void **state);
void auth_with_another_key_is_refused(void **state);
void short_auth_is_refused(void **state);
void long_auth_is_refused(void **state);
void flagged_auth_is_refused(void **state);
void auth_ok_from_a_client_is_refused(void **state);
void second_auth_is_a_protocol_error(void **state);
void replayed_exchange_is_refused(void **state);
void hello_without_nonce_or_flag_is_rejected(void **state);
void silent_peer_is_cut_at_the_deadline(void **state);
void destroy_while_a_peer_authenticates(void **state);
void data_before_auth_ok_is_refused(void **state); /* auth_raw_server.c */
void server_hello_without_proof_is_refused(void **state);
void replayed_server_hello_is_refused(void **state);

#endif
