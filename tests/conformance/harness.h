/* Helpers shared by the conformance suites (public API only). */
#ifndef RMX_TEST_HARNESS_H
#define RMX_TEST_HARNESS_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>

extern const char *scheme; /* "tcp" or "rdma" */
extern const char *addr;   /* where to listen and connect */

typedef struct server {
  rmx_listener_t *l;
  char uri[128];
  rmx_conn_t *conns[128];
  int nconns, accepted, disconnects, last_disconnect, recvs, closed;
  int echo; /* echo messages back */
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
void pattern(uint8_t *p, size_t len, uint32_t seed);
void srv_sent(rmx_conn_t *c, int status, void *arg);
void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg);
void srv_conn_closed(rmx_conn_t *c, void *arg);
void srv_disconnect(rmx_conn_t *c, int status, void *arg);
void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg);
void server_start(rmx_ctx_t *ctx, server_t *s, int echo);
void server_stop(rmx_ctx_t *ctx, server_t *s);
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
