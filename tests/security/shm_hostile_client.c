/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The good client (shm_hostile.h): one connection to the victim carrying
 * strict traffic (shm_hostile_traffic.c) for as long as it runs. Any wrong
 * byte, failed operation or disconnect ends it with "fail WHY" and status 1.
 *
 *   long:  "up" once traffic flows; "check" asks for proof the victim still
 *          serves it: "checked DONE" once 32 more operations completed;
 *          "stop" drains, closes and says "good DONE".
 *   fresh: 200 operations, then as "stop".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_hostile.h"

#define CHECK_OPS 32
#define FRESH_OPS 200

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  sh_traffic_t t;
  int connected, closing, closed;
} C;

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  if (!C.closing) {
    sh_say("fail disconnected: %s", rmx_strerror(status));
    exit(1);
  }
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)arg;
  if (status != 0) {
    sh_say("fail cannot connect: %s", rmx_strerror(status));
    exit(1);
  }
  rmx_conn_cbs_t cbs = {.on_recv = sh_traffic_recv, .on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, &C.t);
  C.connected = 1;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  C.closed = 1;
}

/* Turn until cond holds (bounded: the driver's own limits are longer). */
#define TURN_UNTIL(cond, what)                                                    \
  do {                                                                            \
    uint64_t end_ = sh_now_ms() + 120000;                                         \
    while (!(cond)) {                                                             \
      if (sh_now_ms() > end_) {                                                   \
        sh_say("fail stuck waiting for %s", what);                               \
        exit(1);                                                                  \
      }                                                                           \
      sh_turn(C.ctx, NULL, 50);                                                   \
      sh_traffic_pump(&C.t);                                                      \
    }                                                                             \
  } while (0)

static int finish(void)
{
  C.t.posting = 0;
  TURN_UNTIL(sh_traffic_idle(&C.t), "the last operations");
  C.closing = 1;
  if (rmx_conn_close(C.c, on_closed, NULL) != 0)
    sh_die("client: close refused");
  TURN_UNTIL(C.closed, "the close");
  sh_traffic_fini(&C.t);
  if (rmx_ctx_destroy(C.ctx) != 0)
    sh_die("client: rmx_ctx_destroy refused");
  sh_say("good %llu", (unsigned long long)C.t.done);
  return 0;
}

int sh_client_main(const char *name, const char *mode)
{
  char uri[160], line[256];
  sh_lines_t in = {.fd = 0};
  int fresh = strcmp(mode, "fresh") == 0;
  uint64_t want = 0;
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  snprintf(uri, sizeof(uri), "shm://%s", name);
  int rc = rmx_ctx_create(&C.ctx, NULL, NULL);
  if (rc == 0)
    rc = rmx_connect(C.ctx, uri, on_connected, NULL, &C.c);
  if (rc != 0)
    sh_die("client: cannot connect to %s: %s", uri, rmx_strerror(rc));
  sh_traffic_init(&C.t, C.ctx, C.c, (uint64_t)getpid() * 7919u, 1);
  TURN_UNTIL(C.connected, "the connection");
  C.t.posting = 1;
  TURN_UNTIL(C.t.rk && C.t.done >= 8, "the first operations");
  if (fresh) {
    TURN_UNTIL(C.t.done >= FRESH_OPS, "the operations");
    return finish();
  }
  sh_say("up");
  for (;;) {
    if (sh_turn(C.ctx, &in, 50)) {
      while (sh_lines_next(&in, line, sizeof(line))) {
        if (strcmp(line, "check") == 0 && want == 0)
          want = C.t.done + CHECK_OPS;
        else if (strcmp(line, "stop") == 0)
          return finish();
        else
          sh_die("client: unknown command '%s'", line);
      }
      if (in.eof)
        return finish();
    }
    sh_traffic_pump(&C.t);
    if (want && C.t.done >= want) {
      sh_say("checked %llu", (unsigned long long)C.t.done);
      want = 0;
    }
  }
}
