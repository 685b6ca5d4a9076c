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

void secret_file_is_read_and_checked(void **state)
{
  rmx_config_t cfg;
  char line[200];
  assert_int_equal(config_from("first line\nsecond\n", 18, &cfg), 0);
  assert_string_equal(cfg.auth_secret, "first line");
  assert_int_equal(config_from("no newline", 10, &cfg), 0);
  assert_string_equal(cfg.auth_secret, "no newline");
  assert_int_equal(config_from("", 0, &cfg), RMX_EINVAL);
  assert_int_equal(config_from("\nsecret on line 2\n", 18, &cfg), RMX_EINVAL);
  assert_int_equal(config_from("nul\0inside\n", 11, &cfg), RMX_EINVAL);
  memset(line, 'x', sizeof(line));
  line[127] = '\n';
  assert_int_equal(config_from(line, 128, &cfg), 0);
  assert_int_equal(strlen(cfg.auth_secret), 127);
  assert_int_equal(config_from(line, 127, &cfg), 0); /* 127 bytes, no newline */
  line[127] = 'x';
  assert_int_equal(config_from(line, 128, &cfg), RMX_EINVAL); /* 128 before any newline */
  assert_int_equal(config_from(line, sizeof(line), &cfg), RMX_EINVAL);
  setenv("RMX_AUTH_SECRET_FILE", "/nonexistent/rmx-secret", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_AUTH_SECRET_FILE");
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_string_equal(cfg.auth_secret, ""); /* default: no authentication */

  /* A context configured from the file talks to one given the same secret
   * in the field, and rmx_ctx_create(NULL cfg) reads the file too. */
  srv_t s;
  cl_t k;
  rmx_ctx_t *ctx;
  secret_file(SECRET_A "\n", strlen(SECRET_A) + 1);
  assert_int_equal(rmx_ctx_create(&ctx, LOOP, NULL), 0);
  unlink(tmp_path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  srv_open_ctx(&s, ctx);
  cl_connect(&k, SECRET_A, s.uri);
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
