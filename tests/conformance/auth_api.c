/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Authentication over the public API, on either transport: the same secret
 * connects and carries messages and an RPC, another secret or a secret on
 * one side only is refused; and the secret read from its file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

/* ------------------------------------------------------------------ */
/* Over the public API, either transport                               */
/* ------------------------------------------------------------------ */

void same_secret_connects_and_carries_messages_and_rpc(void **state)
{
  srv_t s;
  cl_t k;
  static uint8_t small[100], big[300000]; /* big goes by rendezvous */
  srv_open(&s, SECRET_A, 0);
  cl_connect(&k, SECRET_A, s.uri);
  assert_int_equal(k.status, 0);
  PUMP_UNTIL(s.accepted == 1);
  for (size_t i = 0; i < sizeof(small); i++)
    small[i] = (uint8_t)(i * 7 + 1);
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (uint8_t)(i * 13 + 5);
  k.expect[0] = small, k.expect_len[0] = sizeof(small);
  k.expect[1] = big, k.expect_len[1] = sizeof(big);
  k.expect[2] = small, k.expect_len[2] = 1;
  assert_int_equal(rmx_send(k.c, small, sizeof(small), c_sent, &k), 0);
  assert_int_equal(rmx_send(k.c, big, sizeof(big), c_sent, &k), 0);
  assert_int_equal(rmx_send(k.c, small, 1, c_sent, &k), 0);
  PUMP_UNTIL(k.recvs == 3 && k.sent == 3);
  assert_int_equal(k.bad, 0);
  assert_int_equal(s.recvs, 3);
  assert_int_equal(rmx_rpc_call(k.c, 42, "abcdef", 6, 10000, c_reply, &k, NULL), 0);
  PUMP_UNTIL(k.rpc_done);
  assert_int_equal(k.rpc_status, 0);
  assert_int_equal(k.rpc_len, 6);
  assert_memory_equal(k.rpc_reply, "fedcba", 6);
  /* A second connection authenticates on its own (new nonces). */
  cl_t k2;
  cl_connect(&k2, SECRET_A, s.uri);
  assert_int_equal(k2.status, 0);
  PUMP_UNTIL(s.accepted == 2);
  cl_close(&k2);
  cl_close(&k);
  PUMP_UNTIL(s.disconnects == 2);
  assert_int_equal(k.disconnects, 0);
  srv_close(&s);
}

/* A connect that must be refused: EACCES at the client, nothing at the
 * server (no on_accept, so no message could reach it). */
static void refused_case(const char *server_secret, const char *client_secret)
{
  srv_t s;
  cl_t k;
  srv_open(&s, server_secret, 0);
  cl_connect(&k, client_secret, s.uri);
  assert_int_equal(k.status, RMX_EACCES);
  assert_int_equal(rmx_send(k.c, "x", 1, c_sent, &k), RMX_ENOTCONN);
  pump_for(100);
  assert_int_equal(s.accepted, 0);
  assert_int_equal(s.recvs, 0);
  assert_int_equal(k.recvs, 0);
  assert_int_equal(k.disconnects, 0); /* on_connected reported it, once */
  cl_close(&k);
  /* The server carries on: a right client still gets in. */
  if (server_secret) {
    cl_connect(&k, server_secret, s.uri);
    assert_int_equal(k.status, 0);
    PUMP_UNTIL(s.accepted == 1);
    cl_close(&k);
    PUMP_UNTIL(s.disconnects == 1);
  }
  srv_close(&s);
}

void different_secrets_are_refused(void **state) { refused_case(SECRET_B, SECRET_A); }
void secret_on_server_only_is_refused(void **state) { refused_case(SECRET_A, NULL); }
void secret_on_client_only_is_refused(void **state) { refused_case(NULL, SECRET_A); }

/* ------------------------------------------------------------------ */
/* The configuration                                                   */
/* ------------------------------------------------------------------ */

static char tmp_path[64];

static void secret_file(const void *data, size_t len)
{
  snprintf(tmp_path, sizeof(tmp_path), "/tmp/rmx-auth-test-XXXXXX");
  int fd = mkstemp(tmp_path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  close(fd);
  setenv("RMX_AUTH_SECRET_FILE", tmp_path, 1);
}

static int config_from(const void *data, size_t len, rmx_config_t *cfg)
{
  secret_file(data, len);
  int rc = rmx_config_init(cfg);
  unlink(tmp_path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  return rc;
}

static void to_hex(const uint8_t *b, size_t n, char *out)
{
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", b[i]);
  out[2 * n] = '\0';
}

void secret_file_is_read_and_checked(void **state)
{
  rmx_config_t cfg;
  uint8_t raw[64];
  char hex[129];
  /* The whole file, raw bytes, newlines and NULs included, as lowercase
   * hex in the field. */
  assert_int_equal(config_from("first line\nsecond\n", 18, &cfg), 0);
  to_hex((const uint8_t *)"first line\nsecond\n", 18, hex);
  assert_string_equal(cfg.auth_secret, hex);
  assert_int_equal(config_from("nul\0inside\n", 11, &cfg), 0);
  assert_string_equal(cfg.auth_secret, "6e756c00696e736964650a");
  assert_int_equal(config_from("\n", 1, &cfg), 0); /* one byte (logged as short) */
  assert_string_equal(cfg.auth_secret, "0a");
  assert_int_equal(config_from("", 0, &cfg), RMX_EINVAL); /* empty */
  memset(raw, 0xff, sizeof(raw));
  assert_int_equal(config_from(raw, 63, &cfg), 0); /* the longest */
  assert_int_equal(strlen(cfg.auth_secret), 126);
  assert_int_equal(config_from(raw, 64, &cfg), RMX_EINVAL); /* one byte too many */
  setenv("RMX_AUTH_SECRET_FILE", "/nonexistent/rmx-secret", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_AUTH_SECRET_FILE");
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_string_equal(cfg.auth_secret, ""); /* default: no authentication */

  /* 100 random 32-byte secrets (every one with a NUL and a newline in
   * it, at varying places), each from its file on both sides: the same
   * file authenticates, another one is refused. */
  for (int i = 0; i < 100; i++) {
    srv_t s;
    cl_t k;
    rmx_ctx_t *ctx;
    randombytes_buf(raw, 32);
    raw[i % 32] = 0;
    raw[(i * 7 + 3) % 32] = '\n';
    if (i % 4 == 0)
      raw[31] = '\n'; /* a trailing newline is part of the secret too */
    assert_int_equal(config_from(raw, 32, &cfg), 0);
    to_hex(raw, 32, hex);
    assert_string_equal(cfg.auth_secret, hex);
    secret_file(raw, 32);
    assert_int_equal(rmx_ctx_create(&ctx, LOOP, NULL), 0); /* reads the file */
    srv_open_ctx(&s, ctx);
    assert_int_equal(rmx_config_init(&cfg), 0); /* the client: from the same file */
    unlink(tmp_path);
    unsetenv("RMX_AUTH_SECRET_FILE");
    cl_connect(&k, cfg.auth_secret, s.uri);
    assert_int_equal(k.status, 0);
    cl_close(&k);
    if (i % 10 == 0) { /* one byte off: refused */
      raw[(i * 5 + 1) % 32] ^= 1;
      to_hex(raw, 32, hex);
      cl_connect(&k, hex, s.uri);
      assert_int_equal(k.status, RMX_EACCES);
      cl_close(&k);
    }
    PUMP_UNTIL(s.accepted == 1 && s.disconnects == 1);
    srv_close(&s);
  }

  /* A context configured from a text file talks to one given the file's
   * hex in the field (its newline included), not to one given the text. */
  srv_t s;
  cl_t k;
  rmx_ctx_t *ctx;
  secret_file(SECRET_A "\n", strlen(SECRET_A) + 1);
  assert_int_equal(rmx_ctx_create(&ctx, LOOP, NULL), 0);
  unlink(tmp_path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  srv_open_ctx(&s, ctx);
  cl_connect(&k, SECRET_A, s.uri);
  assert_int_equal(k.status, RMX_EACCES);
  cl_close(&k);
  to_hex((const uint8_t *)SECRET_A "\n", strlen(SECRET_A) + 1, hex);
  cl_connect(&k, hex, s.uri);
  assert_int_equal(k.status, 0);
  cl_close(&k);
  cl_connect(&k, SECRET_B, s.uri);
  assert_int_equal(k.status, RMX_EACCES);
  cl_close(&k);
  PUMP_UNTIL(s.accepted == 1 && s.disconnects == 1);
  srv_close(&s);

  /* An unterminated field is refused by rmx_ctx_create. */
  assert_int_equal(rmx_config_init(&cfg), 0);
  memset(cfg.auth_secret, 'a', sizeof(cfg.auth_secret));
  assert_int_equal(rmx_ctx_create(&ctx, LOOP, &cfg), RMX_EINVAL);
}
