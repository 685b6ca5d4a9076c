/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A peer that goes away under transfers, per transport:
 *   rmx-peer-gone SCHEME [FILTER]
 * SCHEME is tcp (127.0.0.1) or rdma ($RMX_TEST_ADDR, else $RXE_VM_ADDR);
 * FILTER runs the cases whose name contains it. The target is a child
 * process (this program with --target): it registers a region, packs a key
 * for its one connection and sends it, then on the initiator's word closes
 * that connection, closes everything and destroys its context, or kills
 * itself (SIGKILL). The initiator keeps transfer requests (reads and
 * writes) and single one-sided reads and writes in flight against that key
 * the whole time, posting each again as it succeeds.
 *
 * What is checked: the initiator sees the peer's close or loss as what it
 * is: on_disconnect runs once with 0 for a close and a context destroy (over RDMA a destroy, which releases the memory at once, may read as lost)
 * (the peer closed on purpose) and with RMX_ECONNRESET for a killed peer,
 * never with RMX_EACCES, and every request and operation ends exactly once,
 * none with RMX_EACCES (the peer withdrew its keys as part of going away,
 * which is not a key the initiator got wrong) and none that fails naming
 * an entry. And a key the target revoked on a live connection still fails
 * with RMX_EACCES (on RDMA the refusal ends the connection with it). And a
 * target that bans an address at its first strike (RMX_GUARD_STRIKES=1)
 * and closes under the requests takes no strike from what it refused after
 * its close: the initiator connects to it again (close_no_strike).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rmx/rmx.h>

#define TEST_NAME "peer-gone"
#include "test_util.h"

#define REGION (16u << 20)
#define NX 8     /* transfer requests, half reads */
#define NE 16    /* entries each */
#define EB 32768 /* bytes an entry */
#define NOP 8    /* single one-sided operations, half reads */
#define OPB (256u << 10)

static const char *scheme;

/* ---- the target (child) ---- */

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *t;
  rmx_mem_t *mem;
  char word[16];
  int closed;
} T;

static void t_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  if (len < sizeof(T.word))
    memcpy(T.word, data, len);
}

static void t_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)status;
  (void)arg;
  strcpy(T.word, "gone"); /* nothing more will come: close */
}

static void t_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = t_recv, .on_disconnect = t_disconnect};
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  (void)l;
  (void)arg;
  T.t = c;
  rmx_conn_set_cbs(c, &cbs, NULL);
  if (rmx_mem_pack_for(T.mem, c, blob, &len) || rmx_send(c, blob, len, NULL, NULL))
    FAIL("target: pack and send the key");
}

static void t_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  T.closed = 1;
}

static void t_wait_word(void)
{
  uint64_t end = now_ms() + 120000;
  T.word[0] = 0;
  while (!T.word[0] && now_ms() < end)
    if (rmx_ctx_progress(T.ctx) < 0)
      FAIL("target: progress");
}

static int target_main(void)
{
  char uri[128];
  rmx_listener_t *l;
  uint8_t *region = calloc(1, REGION);
  listen_uri(scheme, uri, sizeof(uri));
  if (!region || rmx_ctx_create(&T.ctx, NULL, NULL) ||
      rmx_mem_reg(T.ctx, region, REGION, RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                  &T.mem) ||
      rmx_listen(T.ctx, uri, t_accept, NULL, &l) || rmx_listener_uri(l, uri, sizeof(uri)))
    FAIL("target: listen");
  printf("%s\n", uri);
  fflush(stdout);
  for (;;) {
    t_wait_word();
    if (strcmp(T.word, "revoke") == 0) { /* a key gone from a live connection */
      if (rmx_mem_revoke(T.mem, T.t) || rmx_send(T.t, "revoked", 7, NULL, NULL))
        FAIL("target: revoke");
      continue;
    }
    break;
  }
  if (strcmp(T.word, "kill") == 0)
    raise(SIGKILL);
  if (rmx_conn_close(T.t, t_closed, NULL))
    FAIL("target: close");
  if (strcmp(T.word, "destroy") == 0) {
    rmx_listener_close(l);
    rmx_mem_dereg(T.mem);
    if (rmx_ctx_destroy(T.ctx)) /* runs the loop until everything is closed */
      FAIL("target: destroy");
    char b;
    while (read(0, &b, 1) > 0) /* stay until the initiator is done */
      ;
    return 0;
  }
  /* Closed: still listening (a connection again must be welcome) until the
   * initiator is done. */
  struct pollfd in = {.fd = 0, .events = POLLIN};
  while (poll(&in, 1, 0) == 0 || !in.revents)
    if (rmx_ctx_progress(T.ctx) < 0)
      FAIL("target: progress");
  return 0;
}

/* ---- the initiator ---- */

typedef struct slot {
  int posts, calls, status, eacces, named;
  rmx_xfer_t *x;
  int op; /* single operations: 1 write, 2 read */
  uint8_t *buf;
} slot_t;

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  rmx_rkey_t *rk;
  rmx_mem_t *lmem;
  uint8_t *local;
  slot_t xs[NX], ops[NOP];
  int connected, disconnects, last_disconnect, closed, done, failed, stop;
  int strict; /* the target bans an address at its first strike */
  char msg[16], uri[128];
  pid_t pid;
  int to_child;
} I;

static void i_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)arg;
  if (!I.rk) {
    if (rmx_rkey_unpack(c, data, len, &I.rk))
      FAIL("unpack the target's key");
  } else if (len < sizeof(I.msg)) {
    memcpy(I.msg, data, len);
  }
}

static void i_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  I.disconnects++;
  I.last_disconnect = status;
}

static void i_connected(rmx_conn_t *c, int status, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = i_recv, .on_disconnect = i_disconnect};
  (void)arg;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  rmx_conn_set_cbs(c, &cbs, NULL);
  I.connected = 1;
}

static void i_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  I.closed = 1;
}

static void op_post(slot_t *s);

static void ended(slot_t *s, int status, size_t failed)
{
  s->calls++;
  s->status = status;
  if (status == RMX_EACCES)
    s->eacces++;
  if (status && failed != RMX_XFER_NO_ENTRY)
    s->named++;
  if (status == 0)
    I.done++;
  else
    I.failed++;
  if (status == 0 && !I.stop)
    op_post(s);
}

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  (void)x;
  ended(arg, status, failed);
}

static void op_cb(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  ended(arg, status, RMX_XFER_NO_ENTRY);
}

static void op_post(slot_t *s)
{
  int rc;
  if (s->x) {
    rc = rmx_xfer_post(s->x, NULL, 0, xfer_cb, s);
  } else {
    rmx_iov_t v = {.addr = s->buf, .len = OPB, .mem = I.lmem};
    uint64_t off = REGION - (uint64_t)(s - I.ops + 1) * OPB;
    rc = s->op == 1 ? rmx_write(I.c, &v, 1, I.rk, off, op_cb, s)
                    : rmx_read(I.c, &v, 1, I.rk, off, op_cb, s);
  }
  if (rc == 0)
    s->posts++;
  else if (rc != RMX_ENOTCONN) /* a post after the loss is refused, no callback */
    FAIL("post: %s", rmx_strerror(rc));
}

static int pending(void)
{
  int n = 0;
  for (int i = 0; i < NX; i++)
    n += I.xs[i].posts - I.xs[i].calls;
  for (int i = 0; i < NOP; i++)
    n += I.ops[i].posts - I.ops[i].calls;
  return n;
}

static void say(const char *word)
{
  if (rmx_send(I.c, word, strlen(word), NULL, NULL))
    FAIL("send %s", word);
}

/* Start a target, connect, take its key, prepare the requests. */
static void start(char **argv, int strict)
{
  int up[2], down[2];
  char uri[128];
  memset(&I, 0, sizeof(I));
  I.strict = strict;
  if (pipe(up) || pipe(down))
    FAIL("pipe");
  if ((I.pid = fork()) == 0) {
    dup2(up[1], 1);
    dup2(down[0], 0);
    close(up[0]);
    close(down[1]);
    if (strict)
      setenv("RMX_GUARD_STRIKES", "1", 1);
    execl("/proc/self/exe", argv[0], scheme, "--target", (char *)NULL);
    _exit(127);
  }
  test_server_pid = I.pid;
  close(up[1]);
  close(down[0]);
  I.to_child = down[1];
  FILE *f = fdopen(up[0], "r");
  if (!f || !fgets(uri, sizeof(uri), f))
    FAIL("the target gave no URI");
  fclose(f);
  uri[strcspn(uri, "\n")] = 0;
  snprintf(I.uri, sizeof(I.uri), "%s", uri);
  I.local = calloc(1, (size_t)NX * NE * EB + (size_t)NOP * OPB);
  if (!I.local || rmx_ctx_create(&I.ctx, NULL, NULL) ||
      rmx_mem_reg(I.ctx, I.local, (size_t)NX * NE * EB + (size_t)NOP * OPB, RMX_MEM_LOCAL, &I.lmem))
    FAIL("initiator context");
  rmx_conn_t *c;
  if (rmx_connect(I.ctx, uri, i_connected, NULL, &c))
    FAIL("connect");
  I.c = c;
  progress_until(I.ctx, &I.connected, NULL, 1, 60);
  uint64_t end = now_ms() + 60000;
  while (!I.rk && now_ms() < end)
    rmx_ctx_progress(I.ctx);
  if (!I.rk)
    FAIL("no key from the target");
  for (int i = 0; i < NX; i++) {
    rmx_xfer_entry_t e[NE];
    uint8_t *b = I.local + (size_t)i * NE * EB;
    for (int j = 0; j < NE; j++) /* every other block: NE segments */
      e[j] = (rmx_xfer_entry_t){.addr = b + (size_t)j * EB, .len = EB, .mem = I.lmem,
                                .rkey = I.rk, .offset = ((uint64_t)i * NE + j) * 2 * EB};
    if (rmx_xfer_prep(I.c, i % 2 ? RMX_XFER_READ : RMX_XFER_WRITE, e, NE, &I.xs[i].x))
      FAIL("prep");
  }
  for (int i = 0; i < NOP; i++) {
    I.ops[i].op = 1 + i % 2;
    I.ops[i].buf = I.local + (size_t)NX * NE * EB + (size_t)i * OPB;
  }
}

static void finish(void)
{
  int st;
  for (int i = 0; i < NX; i++)
    rmx_xfer_release(I.xs[i].x);
  rmx_rkey_release(I.rk);
  if (rmx_conn_close(I.c, i_closed, NULL))
    FAIL("close");
  progress_until(I.ctx, &I.closed, NULL, 1, 60);
  close(I.to_child);
  if (waitpid(I.pid, &st, 0) != I.pid)
    FAIL("wait for the target");
  test_server_pid = 0;
  rmx_mem_dereg(I.lmem);
  if (rmx_ctx_destroy(I.ctx))
    FAIL("destroy");
  free(I.local);
}

/* Every fault of the requests and operations, on stderr; how many. */
static int slot_faults(const char *what)
{
  int bad = 0;
  for (int i = 0; i < NX + NOP; i++) {
    slot_t *s = i < NX ? &I.xs[i] : &I.ops[i - NX];
    const char *kind = i < NX ? "request" : "operation";
    int n = i < NX ? i : i - NX;
    if (s->calls != s->posts)
      bad += fprintf(stderr, "%s: %s %d: %d posts, %d callbacks\n", what, kind, n, s->posts,
                     s->calls) > 0;
    if (s->eacces)
      bad += fprintf(stderr, "%s: %s %d failed %d times with RMX_EACCES: the peer's own "
                     "going away reads as a bad key\n", what, kind, n, s->eacces) > 0;
    if (s->named)
      bad += fprintf(stderr, "%s: %s %d failed naming an entry (%s)\n", what, kind, n,
                     rmx_strerror(s->status)) > 0;
  }
  return bad;
}

/* The peer closes, destroys or dies while everything is in flight. */
static void peer_goes(char **argv, const char *word, int want, int strict)
{
  start(argv, strict);
  for (int i = 0; i < NX; i++)
    op_post(&I.xs[i]);
  for (int i = 0; i < NOP; i++)
    op_post(&I.ops[i]);
  progress_until(I.ctx, &I.done, NULL, 4 * (NX + NOP), 120); /* all of them moving */
  say(word);
  uint64_t end = now_ms() + 120000;
  while ((!I.disconnects || pending()) && now_ms() < end)
    if (rmx_ctx_progress(I.ctx) < 0)
      FAIL("progress");
  I.stop = 1;
  if (!I.disconnects || pending())
    FAIL("%s: %d disconnects, %d callbacks missing after 120 s", word, I.disconnects, pending());
  end = now_ms() + 200; /* nothing fires twice */
  while (now_ms() < end)
    rmx_ctx_progress(I.ctx);
  if (strict) { /* what it refused after its own close struck nobody */
    rmx_conn_t *again;
    if (rmx_conn_close(I.c, i_closed, NULL))
      FAIL("close");
    progress_until(I.ctx, &I.closed, NULL, 1, 60);
    I.closed = I.connected = 0;
    if (rmx_connect(I.ctx, I.uri, i_connected, NULL, &again))
      FAIL("connect again");
    I.c = again;
    progress_until(I.ctx, &I.connected, NULL, 1, 60);
    finish(); /* the close itself is the plain case's */
    return;
  }
  int bad = slot_faults(word);
  if (I.disconnects != 1)
    FAIL("%s: %d disconnects", word, I.disconnects);
  if (I.last_disconnect == RMX_EACCES)
    FAIL("%s: on_disconnect(RMX_EACCES): the peer's %s reads as a bad key", word, word);
  /* A target that releases its memory right after its close (destroy)
   * ends its keys before its BYE may have left: over RDMA the initiator
   * may then see the connection lost instead; over shm the answers still
   * queued behind a full ring read from the memory released, and the
   * target cuts the connection (docs/transfer.md). */
  int lost_ok = want == 0 && strcmp(word, "destroy") == 0 && strcmp(scheme, "tcp") != 0 &&
                I.last_disconnect == RMX_ECONNRESET;
  if (I.last_disconnect != want && !lost_ok)
    FAIL("%s: on_disconnect(%s), want %s", word, rmx_err_name(I.last_disconnect),
         rmx_err_name(want));
  if (bad)
    FAIL("%s: %d requests or operations ended wrong (above)", word, bad);
  printf("peer-gone %s: %s: on_disconnect(%s), %d done, %d failed with the peer gone\n", scheme,
         word, rmx_err_name(I.last_disconnect), I.done, I.failed);
  finish();
}

static char **args;
static void case_close(void) { peer_goes(args, "close", 0, 0); }
static void case_destroy(void) { peer_goes(args, "destroy", 0, 0); }
static void case_kill(void) { peer_goes(args, "kill", RMX_ECONNRESET, 0); }
/* A target that bans at the first strike, closing under the requests, is
 * welcome to connect to again: its own close is nobody's strike. */
static void case_close_no_strike(void) { peer_goes(args, "close", 0, 1); }

/* A key revoked on a live connection is a bad key: RMX_EACCES. */
static void case_bad_key(void)
{
  start(args, 0);
  say("revoke");
  uint64_t end = now_ms() + 60000;
  while (strcmp(I.msg, "revoked") && now_ms() < end)
    rmx_ctx_progress(I.ctx);
  if (strcmp(I.msg, "revoked"))
    FAIL("the target did not revoke");
  I.stop = 1;
  op_post(&I.xs[1]); /* a read */
  progress_until(I.ctx, &I.xs[1].calls, NULL, 1, 60);
  if (I.xs[1].status != RMX_EACCES)
    FAIL("a revoked key: %s, want RMX_EACCES", rmx_err_name(I.xs[1].status));
  if (strcmp(scheme, "rdma") == 0) { /* the device's refusal ends the connection */
    progress_until(I.ctx, &I.disconnects, NULL, 1, 60);
    if (I.last_disconnect != RMX_EACCES)
      FAIL("a revoked key over RDMA: on_disconnect(%s), want RMX_EACCES",
           rmx_err_name(I.last_disconnect));
  } else if (I.disconnects) {
    FAIL("a revoked key over TCP ended the connection");
  }
  finish();
}

int main(int argc, char **argv)
{
  static const struct { const char *name; void (*fn)(void); } cases[] = {
    {"close", case_close}, {"destroy", case_destroy}, {"kill", case_kill},
    {"bad_key", case_bad_key}, {"close_no_strike", case_close_no_strike},
  };
  if (argc < 2)
    FAIL("usage: rmx-peer-gone tcp|rdma [filter]");
  scheme = argv[1];
  if (argc > 2 && strcmp(argv[2], "--target") == 0)
    return target_main();
  args = argv;
  alarm(900);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (argc > 2 && !strstr(cases[i].name, argv[2]))
      continue;
    uint64_t t0 = now_ms();
    cases[i].fn();
    printf("peer-gone %s: %s ok (%llu ms)\n", scheme, cases[i].name,
           (unsigned long long)(now_ms() - t0));
    fflush(stdout);
  }
  printf("peer-gone %s: all passed\n", scheme);
  return 0;
}
