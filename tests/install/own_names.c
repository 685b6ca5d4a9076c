/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that links librmx.a and has functions of its own named as
 * generic as a transport's internals could be (tcp_connect, tf_check,
 * vb_send): every global of the static library is rmx_ (the API) or
 * rmx__ (internal), so these link beside it. It connects over TCP so that
 * the TCP transport's objects are part of the link.
 *
 *   rmx-own-names   (exits 0 when the link worked and the names are ours)
 */
#include <rmx/rmx.h>
#include <stdio.h>

int tcp_connect(void);
int tf_check(void);
int vb_send(void);
int tcp_connect(void) { return 1; }
int tf_check(void) { return 2; }
int vb_send(void) { return 3; }

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  *(int *)arg = status;
}

int main(void)
{
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int status = 1;
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0)
    return 1;
  /* Nothing listens on port 1: the connect is refused, through the TCP transport. */
  if (rmx_connect(ctx, "tcp://127.0.0.1:1", on_connected, &status, &c) == 0)
    rmx_ctx_run(ctx);
  rmx_ctx_destroy(ctx);
  printf("own names: tcp_connect %d, tf_check %d, vb_send %d; refused connect: %s\n", tcp_connect(),
         tf_check(), vb_send(), rmx_strerror(status));
  return tcp_connect() == 1 && tf_check() == 2 && vb_send() == 3 && status != 0 ? 0 : 1;
}
