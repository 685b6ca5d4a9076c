/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the conformance suites (public API only). */
#ifndef RMX_TEST_HARNESS_H
#define RMX_TEST_HARNESS_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>

extern const char *scheme; /* "tcp", "rdma" or "shm" */
extern const char *addr;   /* where to listen and connect */

/* What a server does with a message: drop it, send it back, or check that
 * it carries the next sequence number (4 bytes; a longer one repeats the
 * number's low byte in its last byte), or check it and send it back. */
enum { SRV_SINK, SRV_ECHO, SRV_SEQ, SRV_SEQ_ECHO };

typedef struct server {
  rmx_listener_t *l;
  char uri[128];
  rmx_conn_t *conns[128];
  int nconns, accepted, disconnects, last_disconnect, recvs, closed;
  int echo; /* SRV_* */
  int bad;  /* SRV_SEQ: messages out of order or damaged */
  uint32_t next;
  int remote, id; /* it lives on the peer host, as id there */
} server_t;

typedef struct client {
  rmx_conn_t *c;
  int connected, connect_status, disconnects, last_disconnect, closed;
  int recvs, sent_ok, sent_err, last_err, bad;
  size_t expect_len;
  uint32_t expect_seed;
  int sent_before_disconnect;
} client_t;

void uri_for(char *buf, size_t len, int port);
rmx_ctx_t *ctx_new(uint64_t max_msg);
/* Run the loop until *counter reaches want. */
void run_until(rmx_ctx_t *ctx, const int *counter, int want);
/* Run the loop for about ms milliseconds. */
void run_for_ms(rmx_ctx_t *ctx, uint64_t ms);
void pattern(uint8_t *p, size_t len, uint32_t seed);
void srv_sent(rmx_conn_t *c, int status, void *arg);
void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg);
void srv_conn_closed(rmx_conn_t *c, void *arg);
void srv_disconnect(rmx_conn_t *c, int status, void *arg);
void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg);
void server_start(rmx_ctx_t *ctx, server_t *s, int echo);
void server_stop(rmx_ctx_t *ctx, server_t *s);
/* Stop listening; connections stay. */
void server_unlisten(rmx_ctx_t *ctx, server_t *s);
/* Run the loop until the server's *field reaches want; on the peer host,
 * its counters are fetched until they do. Afterwards every counter is
 * current. */
void server_until(rmx_ctx_t *ctx, server_t *s, const int *field, int want);

/* The servers live in this process unless peer_ctl names a control
 * listener of `rmx-conformance SCHEME --serve` on another host
 * (RMX_TEST_PEER, read by rmx-conformance only); then server_start and
 * the dying server below run there, and the cases are a cross-host run. */
extern const char *peer_ctl;
int serve_main(const char *ready_file);
/* A server in another process that dies (SIGKILL) on its first message;
 * returns a handle for dying_server_reap, which gives its wait status. */
long dying_server(char *uri, size_t len);
int dying_server_reap(long handle);
/* The control requests behind the above (peer.c). */
void peer_server_start(server_t *s);
void peer_server_stop(server_t *s);
void peer_server_unlisten(server_t *s);
void peer_server_stats(server_t *s);
void cl_connected(rmx_conn_t *c, int status, void *arg);
void cl_recv(rmx_conn_t *c, const void *data, size_t len, void *arg);
void cl_sent(rmx_conn_t *c, int status, void *arg);
void cl_disconnect(rmx_conn_t *c, int status, void *arg);
void cl_closed(rmx_conn_t *c, void *arg);
void client_connect(rmx_ctx_t *ctx, client_t *cl, const char *uri);
void client_close(rmx_ctx_t *ctx, client_t *cl);
void ctx_done(rmx_ctx_t *ctx);
#include <sys/types.h>
pid_t spawn(const char *role, const char *uri, int *out_fd);
void read_line(int fd, char *buf, size_t len);
/* Pick the scheme and address from argv[1] and the environment. */
int harness_args(int argc, char **argv);

#endif
