/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kills test's client (rmx-fault-peer victim URI): it connects, sends
 * its pid and a key to its region (fault_kills.h), and then only answers:
 * it checks every message and notification, echoes RPC 1 and answers
 * FK_RPC_VERIFY with what it got. The server starts every operation; this
 * process is usually killed or stopped at a point the server picks. Let go
 * (the server closes), it exits 0 when everything it got was right and its
 * context destroyed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_kills.h"

static struct {
  rmx_ctx_t *ctx;
  uint8_t *region;
  rmx_mem_t *mem;
  fk_verify_rep_t got;
  int connected, disc_status, failed;
} V;

static void on_closed(rmx_conn_t *c, void *arg)
{
  rmx_ctx_stop(V.ctx);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  V.disc_status = status;
  rmx_conn_close(c, on_closed, NULL);
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  V.got.msgs++;
  V.got.bad_msgs += !fp_msg_ok(data, len);
}

static void on_notify(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  V.got.notes++;
  V.got.bad_notes += !fp_msg_ok(data, len);
}

static void rpc_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_rpc_reply(req, data, len);
}

static void rpc_verify(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  fk_verify_req_t q;
  fk_verify_rep_t r = V.got;
  if (len != sizeof(q)) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  memcpy(&q, data, sizeof(q));
  for (uint32_t i = 0; i < q.n && i < FK_RANGES; i++) {
    const fk_range_t *g = &q.r[i];
    if (g->off > FK_AREA || g->len > FK_AREA - g->off ||
        fp_check(V.region + FK_AREA + g->off, g->len, FK_WSEED, g->off))
      r.bad_ranges++;
  }
  rmx_rpc_reply(req, &r, sizeof(r));
}

static void key_sent(rmx_conn_t *c, int status, void *arg) {}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  uint8_t blob[FK_KEY_HDR + RMX_RKEY_MAX];
  size_t blen = RMX_RKEY_MAX;
  uint32_t pid = (uint32_t)getpid();
  if (status) {
    fprintf(stderr, "fault-victim: connect: %s\n", rmx_strerror(status));
    V.failed = 1;
    rmx_conn_close(c, on_closed, NULL);
    return;
  }
  V.connected = 1;
  blob[0] = FP_KEY_MSG;
  memcpy(blob + 1, &pid, sizeof(pid));
  int rc = rmx_mem_pack_for(V.mem, c, blob + FK_KEY_HDR, &blen);
  if (rc == 0)
    rc = rmx_send(c, blob, FK_KEY_HDR + blen, key_sent, NULL);
  if (rc) {
    fprintf(stderr, "fault-victim: sending the key: %s\n", rmx_strerror(rc));
    V.failed = 1;
    rmx_conn_close(c, on_closed, NULL);
  }
}

int fp_victim_main(const char *uri)
{
  rmx_conn_t *c;
  V.region = calloc(1, FK_REGION);
  if (!V.region)
    return 1;
  fp_fill(V.region, FK_AREA, FK_RSEED, 0);
  int rc = rmx_ctx_create(&V.ctx, NULL, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(V.ctx, FP_RPC_ECHO, rpc_echo, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(V.ctx, FK_RPC_VERIFY, rpc_verify, NULL);
  if (rc == 0)
    rc = rmx_mem_reg(V.ctx, V.region, FK_REGION,
                     RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &V.mem);
  if (rc == 0)
    rc = rmx_connect(V.ctx, uri, on_connected, NULL, &c);
  if (rc) {
    fprintf(stderr, "fault-victim: %s: %s\n", uri, rmx_strerror(rc));
    return 1;
  }
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect,
                                        .on_notify = on_notify}, NULL);
  rmx_ctx_run(V.ctx);
  rmx_mem_dereg(V.mem);
  rc = rmx_ctx_destroy(V.ctx);
  free(V.region);
  if (rc || V.failed || !V.connected || V.disc_status || V.got.bad_msgs || V.got.bad_notes) {
    fprintf(stderr, "fault-victim: destroy %s, connected %d, disconnect %s, bad messages %llu, "
            "bad notifications %llu\n", rc ? rmx_err_name(rc) : "0", V.connected,
            rmx_err_name(V.disc_status), (unsigned long long)V.got.bad_msgs,
            (unsigned long long)V.got.bad_notes);
    return 1;
  }
  return 0;
}
