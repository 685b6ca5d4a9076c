/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program from outside the tree, built against an installed rmx
 * (tests/install/install_check.sh builds it three ways): connect to an
 * echo server, send one message, check the echo, close, and say which
 * library it ran with.
 *
 *   rmx-hello URI
 */
#include <rmx/rmx.h>
#include <stdio.h>
#include <string.h>

static const char msg[] = "hello from outside the tree";
static rmx_ctx_t *ctx;
static int echoed, failed;

static void on_closed(rmx_conn_t *c, void *arg) { rmx_ctx_stop(ctx); }

static void finish(rmx_conn_t *c, int ok)
{
  failed |= !ok;
  if (rmx_conn_close(c, on_closed, NULL) != 0)
    rmx_ctx_stop(ctx);
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  echoed = len == sizeof(msg) && memcmp(data, msg, len) == 0;
  finish(c, echoed);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  fprintf(stderr, "hello: lost the server: %s\n", rmx_strerror(status));
  finish(c, 0);
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  if (status != 0 || rmx_send(c, msg, sizeof(msg), NULL, NULL) != 0) {
    fprintf(stderr, "hello: %s\n", rmx_strerror(status));
    finish(c, 0);
  }
}

int main(int argc, char **argv)
{
  rmx_conn_t *c;
  if (argc != 2) {
    fprintf(stderr, "usage: rmx-hello URI\n");
    return 2;
  }
  if (rmx_version() != RMX_VERSION) { /* the test installs the same version */
    fprintf(stderr, "hello: header %d.%d.%d, library %s\n", RMX_VERSION_MAJOR,
            RMX_VERSION_MINOR, RMX_VERSION_PATCH, rmx_version_string());
    return 1;
  }
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0 ||
      rmx_connect(ctx, argv[1], on_connected, NULL, &c) != 0)
    return 1;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect},
                   NULL);
  rmx_ctx_run(ctx);
  if (rmx_ctx_destroy(ctx) != 0 || failed || !echoed)
    return 1;
  printf("hello: echo checked, rmx %s over %s\n", rmx_version_string(), argv[1]);
  return 0;
}
