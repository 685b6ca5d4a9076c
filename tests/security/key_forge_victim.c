/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The key-forging test's victim: an ordinary client. It gets a registration
 * of its own from the server and reads it with the key it was given (so the
 * key and the region work: a control), then asks for the stream of 16 MiB
 * messages and receives them until stdin reaches EOF.
 *
 * Control lines (stdout): "ready KEYHEX" after its first message (the key
 * the server packed for it, which the driver hands the attacker for attack
 * (c)), and at the end "victim received N bad N lost N".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "key_forge.h"

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, cstatus, closed, eof, lost;
  int rpc_done, rpc_status;
  uint8_t reply[RMX_RKEY_MAX];
  size_t reply_len;
  int op_done, op_status;
  uint64_t received, bad;
  char keyhex[2 * RMX_RKEY_MAX + 1];
} V;

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  /* every 64 KiB, one word: the message is the server's victim-tagged buffer */
  int ok = len == KF_MSG;
  for (size_t off = 0; ok && off < len; off += 65536)
    ok = kf_count((const uint8_t *)data + off, 8, KF_TAG_VICTIM) == 8;
  V.bad += !ok;
  if (++V.received == 1)
    kf_say("ready %s", V.keyhex);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  fprintf(stderr, "key-forge victim: connection lost: %s\n", rmx_strerror(status));
  V.lost++;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, NULL);
  V.cstatus = status;
  V.connected = 1;
}

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  V.rpc_status = status;
  V.reply_len = len < sizeof(V.reply) ? len : sizeof(V.reply);
  if (status == 0 && len)
    memcpy(V.reply, data, V.reply_len);
  V.rpc_done = 1;
}

static int rpc(uint32_t id, const void *req, size_t len)
{
  V.rpc_done = 0;
  int rc = rmx_rpc_call(V.c, id, req, len, 30000, on_reply, NULL, NULL);
  if (rc)
    return rc;
  kf_run_until(V.ctx, &V.rpc_done);
  return V.rpc_status;
}

static void on_op(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  V.op_status = status;
  V.op_done = 1;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  V.closed = 1;
}

static int fail(const char *what, int rc)
{
  fprintf(stderr, "key-forge victim: %s: %s\n", what, rmx_strerror(rc));
  return 2;
}

int kf_victim_main(const char *uri)
{
  V.ctx = kf_ctx();
  int rc = rmx_connect(V.ctx, uri, on_connected, NULL, &V.c);
  if (rc)
    return fail("connect", rc);
  kf_run_until(V.ctx, &V.connected);
  if (V.cstatus)
    return fail("connect", V.cstatus);
  if ((rc = rpc(KF_RPC_REGISTER, "victim", 6)) != 0)
    return fail("register", rc);
  kf_hex(V.reply, V.reply_len, V.keyhex);

  /* the control: its own key reads its own region, all of it tagged */
  rmx_rkey_t *rk;
  if ((rc = rmx_rkey_unpack(V.c, V.reply, V.reply_len, &rk)) != 0)
    return fail("unpack its key", rc);
  uint8_t *buf = kf_map(KF_REGION);
  rmx_iov_t iov = {buf, KF_REGION, NULL};
  if ((rc = rmx_read(V.c, &iov, 1, rk, 0, on_op, NULL)) == 0) {
    kf_run_until(V.ctx, &V.op_done);
    rc = V.op_status;
  }
  rmx_rkey_release(rk);
  if (rc)
    return fail("read its own region", rc);
  if (kf_count(buf, KF_REGION, KF_TAG_VICTIM) != KF_REGION) {
    fprintf(stderr, "key-forge victim: its own region does not hold its tag\n");
    return 2;
  }
  kf_unmap(buf, KF_REGION);

  if ((rc = rpc(KF_RPC_STREAM, NULL, 0)) != 0)
    return fail("stream", rc);
  kf_stdin_watch(V.ctx, NULL, &V.eof);
  kf_run_until(V.ctx, &V.eof);

  rmx_conn_close(V.c, on_closed, NULL);
  kf_run_until(V.ctx, &V.closed);
  rc = rmx_ctx_destroy(V.ctx);
  kf_say("victim received %llu bad %llu lost %d", (unsigned long long)V.received,
         (unsigned long long)V.bad, V.lost);
  return rc || V.bad ? 2 : 0;
}
