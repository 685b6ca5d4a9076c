/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One context on two RDMA devices at once:
 *   rmx-multi-device   (inside the SoftRoCE VM: $RXE_VM_ADDR on rxe0 and
 *                       $RXE_VM_ADDR2 on rxe1; skipped, 77, without the second)
 *
 * A server context listens on both addresses, a client context connects to
 * the first, then the second, so in each context the first device opened is
 * rxe0 and rxe1 comes second (a protection domain per connection there,
 * whatever RMX_KEY_SCOPE says). On each connection: the server packs a key
 * to a region of its own for that connection (rmx_mem_pack_for) and sends
 * it; the client sends messages of many sizes and one large enough for the
 * rendezvous, which the server checks and echoes; the client writes the
 * region through the key from unregistered memory (the registration
 * cache's, made on the first device), reads it back into a registration of
 * its own (also the first device's), and has the server check the region.
 * Every byte is checked. The connection lines of the log (a handler takes
 * them) must name the device each connection is on, and each context must
 * say it uses the second device in its own mode. A third connection, on
 * rxe1 too, gets a capability key (rmx_mem_pack: the first device's
 * registration); the client's read with it must be refused, which ends
 * that connection (with RMX_KEY_SCOPE=pd there is no capability key to
 * give). Every callback runs exactly once, nothing else is lost, and
 * everything is released (ASan's leak check in the sanitizer build).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <rmx/rmx.h>

#define TEST_NAME "multi-device"
#include "test_util.h"

#define NRAIL 2  /* a connection on each device */
#define NPATH 3  /* and one more on the second for a capability key */
#define NMSG 24
#define BIG (3u << 20)     /* far above the eager size: a rendezvous */
#define REGION (2u << 20)
#define SECS 120

typedef struct path {
  int i, cap;               /* cap: the server gives a capability key */
  const char *addr, *dev;
  char port[16];            /* the listener's */
  /* server side */
  rmx_listener_t *l;
  rmx_conn_t *sc;
  uint8_t *region;
  rmx_mem_t *region_mem;
  int accepted, s_recv, s_sent, s_closed, s_lost, checked;
  /* client side */
  rmx_conn_t *cc;
  rmx_rkey_t *rk;
  uint8_t *msg[NMSG + 1], *src, *dst; /* each message's, until it is sent */
  rmx_mem_t *dst_mem;
  int connected, c_recv, c_sent, c_closed, c_lost, wrote, readback, answered;
  int no_cap, cap_read;     /* rmx_mem_pack refused (a PD per connection); read with it */
} path_t;

static path_t paths[NPATH];

/* ---- the log: connection lines kept, errors shown ---- */

#define LOG_KEEP 64
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[LOG_KEEP][512];
static int log_n;

static void log_fn(rmx_log_level_t level, const char *line, void *arg)
{
  (void)arg;
  if (level <= RMX_LOG_WARN)
    fprintf(stderr, "rmx: %s\n", line);
  if (!strstr(line, ": connected (") && !strstr(line, ": accepted on ") &&
      !strstr(line, "rdma: using "))
    return;
  pthread_mutex_lock(&log_lock);
  if (log_n < LOG_KEEP)
    snprintf(log_lines[log_n++], sizeof(log_lines[0]), "%s", line);
  pthread_mutex_unlock(&log_lock);
}

/* Lines holding both a and b. */
static int logged(const char *a, const char *b)
{
  int n = 0;
  pthread_mutex_lock(&log_lock);
  for (int i = 0; i < log_n; i++)
    n += strstr(log_lines[i], a) && (!b || strstr(log_lines[i], b));
  pthread_mutex_unlock(&log_lock);
  return n;
}

/* ---- contents ---- */

static uint8_t pat(int path, int what, size_t off)
{
  return (uint8_t)(off * 131 + (off >> 8) * 7 + (size_t)what * 29 + (size_t)path * 71 + 1);
}

static void fill(uint8_t *p, size_t len, int path, int what)
{
  for (size_t o = 0; o < len; o++)
    p[o] = pat(path, what, o);
}

static int same(const uint8_t *p, size_t len, int path, int what)
{
  for (size_t o = 0; o < len; o++)
    if (p[o] != pat(path, what, o))
      return 0;
  return 1;
}

/* Message k of a path: NMSG of many sizes, then the big one. */
static size_t msg_len(int k) { return k < NMSG ? (size_t)k * k * 23 + 1 : BIG; }

/* ---- the server ---- */

static void s_sent_cb(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = &paths[*(int *)arg];
  (void)c;
  free(arg);
  if (status)
    FAIL("path %d: a server send failed: %s", p->i, rmx_strerror(status));
  p->s_sent++;
}

static void s_send_copy(path_t *p, const void *data, size_t len)
{
  /* the echo's copy, until it is sent; it starts with the path's index */
  int *buf = malloc(sizeof(int) + len);
  if (!buf)
    FAIL("malloc");
  *buf = p->i;
  memcpy(buf + 1, data, len);
  /* the callback frees buf; the payload after the index is what goes */
  int rc = rmx_send(p->sc, buf + 1, len, s_sent_cb, buf);
  if (rc)
    FAIL("path %d: echo: %s", p->i, rmx_strerror(rc));
}

static void s_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  path_t *p = arg;
  int k = p->s_recv++;
  (void)c;
  if (k <= NMSG) {
    if (len != msg_len(k) || !same(data, len, p->i, k))
      FAIL("path %d: message %d (%zu bytes) arrived wrong", p->i, k, len);
    s_send_copy(p, data, len);
  } else if (k == NMSG + 1) { /* the client wrote the region: check it */
    if (len != 1 || !same(p->region, REGION, p->i, 1000))
      FAIL("path %d: the region does not hold what the client wrote", p->i);
    p->checked = 1;
    s_send_copy(p, "k", 1);
  } else {
    FAIL("path %d: an unexpected message %d", p->i, k);
  }
}

/* Either side: no connection is lost here but the capability's. */
static void on_lost(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  int client = c == p->cc;
  (*(client ? &p->c_lost : &p->s_lost))++;
  if (p->cap)
    return;
  FAIL("path %d: the %s lost its connection: %s", p->i, client ? "client" : "server",
       rmx_strerror(status));
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  path_t *p = arg;
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  (void)l;
  if (p->accepted++)
    FAIL("path %d: a second accept", p->i);
  p->sc = c;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = s_recv, .on_disconnect = on_lost}, p);
  int rc = p->cap ? rmx_mem_pack(p->region_mem, blob, &len)
                  : rmx_mem_pack_for(p->region_mem, c, blob, &len);
  if (rc == RMX_ENOTSUP && p->cap) /* the first device has a PD per connection */
    blob[0] = 'n', len = 1;
  else if (rc)
    FAIL("path %d: pack: %s", p->i, rmx_strerror(rc));
  s_send_copy(p, blob, len);
}

/* ---- the client ---- */

static void c_sent_cb(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  (void)c;
  if (status)
    FAIL("path %d: a client send failed: %s", p->i, rmx_strerror(status));
  p->c_sent++;
}

static void c_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  path_t *p = arg;
  int k = p->c_recv++ - 1; /* the key came first */
  if (k < 0 && p->cap && len == 1) {
    p->no_cap = 1;
  } else if (k < 0) {
    int rc = rmx_rkey_unpack(c, data, len, &p->rk);
    if (rc)
      FAIL("path %d: unpack: %s", p->i, rmx_strerror(rc));
  } else if (k <= NMSG) {
    if (len != msg_len(k) || !same(data, len, p->i, k))
      FAIL("path %d: echo %d (%zu bytes) came back wrong", p->i, k, len);
  } else if (k == NMSG + 1) {
    if (len != 1 || *(const char *)data != 'k')
      FAIL("path %d: the server's answer is wrong", p->i);
    p->answered++;
  } else {
    FAIL("path %d: an unexpected message %d", p->i, k);
  }
}

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  (void)c;
  if (status)
    FAIL("path %d: connect to %s: %s", p->i, p->addr, rmx_strerror(status));
  p->connected++;
}

static void c_read(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  if (status)
    FAIL("path %d: read: %s", p->i, rmx_strerror(status));
  if (p->readback++)
    FAIL("path %d: the read completed twice", p->i);
  if (!same(p->dst, REGION, p->i, 1000))
    FAIL("path %d: the read brought other bytes back", p->i);
  int rc = rmx_send(c, "w", 1, c_sent_cb, p); /* the server checks the region */
  if (rc)
    FAIL("path %d: send: %s", p->i, rmx_strerror(rc));
}

static void c_wrote(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  if (status)
    FAIL("path %d: write: %s", p->i, rmx_strerror(status));
  if (p->wrote++)
    FAIL("path %d: the write completed twice", p->i);
  rmx_iov_t v = {.addr = p->dst, .len = REGION, .mem = p->dst_mem};
  int rc = rmx_read(c, &v, 1, p->rk, 0, c_read, p);
  if (rc)
    FAIL("path %d: read: %s", p->i, rmx_strerror(rc));
}

/* A capability key is the first device's registration: on a connection
 * through rxe1 the device refuses it like a forged key, which ends the
 * connection (no MR with remote rights is in that connection's domain). */
static void c_cap_read(rmx_conn_t *c, int status, void *arg)
{
  path_t *p = arg;
  (void)c;
  if (p->cap_read++)
    FAIL("the capability's read completed twice");
  if (status == 0)
    FAIL("a capability key of the first device read %s through %s",
         same(p->dst, 4096, p->i, 1000) ? "the registration" : "memory", p->addr);
}

static void closed_cb(rmx_conn_t *c, void *arg)
{
  (void)c;
  (*(int *)arg)++;
}

/* ---- the run ---- */

static rmx_ctx_t *srv, *cli;

static void until(const char *what, int (*done)(void))
{
  uint64_t end = now_ms() + SECS * 1000;
  while (!done()) {
    if (rmx_ctx_progress(srv) < 0 || rmx_ctx_progress(cli) < 0)
      FAIL("progress");
    if (now_ms() > end)
      FAIL("timed out waiting for %s", what);
  }
}

static int cur; /* the path being connected */
static int up(void)
{
  return paths[cur].connected && paths[cur].accepted && (paths[cur].rk || paths[cur].no_cap);
}
static int refused(void) { return paths[NRAIL].cap_read && paths[NRAIL].c_lost; }
static int all(int n, int (*one)(const path_t *))
{
  for (int i = 0; i < n; i++)
    if (!one(&paths[i]))
      return 0;
  return 1;
}
static int echoed1(const path_t *p) { return p->c_recv == NMSG + 2 && p->c_sent == NMSG + 1; }
static int echoed(void) { return all(NRAIL, echoed1); }
static int answered1(const path_t *p)
{
  return p->answered && p->c_sent == NMSG + 2 && p->s_sent == NMSG + 3;
}
static int answered(void) { return all(NRAIL, answered1); }
static int closed1(const path_t *p) { return p->c_closed && p->s_closed; }
static int closed(void) { return all(NPATH, closed1); }

static void check_local_addr(path_t *p, rmx_conn_t *c, const char *side)
{
  struct sockaddr_storage ss;
  struct in_addr want;
  if (inet_pton(AF_INET, p->addr, &want) != 1)
    return; /* not IPv4: the log lines below still name the device */
  if (rmx_conn_local_addr(c, &ss) || ss.ss_family != AF_INET ||
      ((struct sockaddr_in *)&ss)->sin_addr.s_addr != want.s_addr)
    FAIL("path %d: the %s's local address is not %s", p->i, side, p->addr);
}

static void check_devices(void)
{
  char a[160], b[160];
  for (int i = 0; i < NPATH; i++) {
    path_t *p = &paths[i];
    check_local_addr(p, p->cc, "client");
    check_local_addr(p, p->sc, "server");
    if (!p->dev)
      continue;
    /* "rdma peer A:PORT QP 0x12 on DEV: connected (A:PORT from ...)", and
     * the server's "rdma peer A:... QP 0x13 on DEV: accepted on A:PORT" */
    snprintf(a, sizeof(a), " on %s: connected (%s:%s from", p->dev, p->addr, p->port);
    snprintf(b, sizeof(b), " on %s: accepted on %s:%s", p->dev, p->addr, p->port);
    if (logged(a, NULL) != 1 || logged(b, NULL) != 1)
      FAIL("path %d: no single log line says its connection is on %s (\"%s\": %d, \"%s\": %d)",
           i, p->dev, a, logged(a, NULL), b, logged(b, NULL));
    if (i >= NRAIL)
      continue;
    snprintf(a, sizeof(a), "rdma: using %s ", p->dev);
    int later = logged(a, "not the context's first device");
    if (logged(a, NULL) != 2 || later != (i ? 2 : 0))
      FAIL("path %d: %s is not opened once per context as its %s device (%d lines, %d later)",
           i, p->dev, i ? "second" : "first", logged(a, NULL), later);
  }
}

/* RMX_DEVICE keeps a context to the device it names: the second refused. */
static void device_named(const char *a1, const char *a2, const char *dev)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  rmx_listener_t *l1, *l2;
  char uri[160];
  if (!dev)
    return;
  if (rmx_config_init(&cfg))
    FAIL("config");
  snprintf(cfg.device, sizeof(cfg.device), "%s", dev);
  cfg.log_level = RMX_LOG_NONE; /* the refusal is expected */
  snprintf(uri, sizeof(uri), "rdma://%s:0", a1);
  if (rmx_ctx_create(&ctx, NULL, &cfg) || rmx_listen(ctx, uri, s_accept, NULL, &l1))
    FAIL("RMX_DEVICE=%s: listen on %s", dev, uri);
  snprintf(uri, sizeof(uri), "rdma://%s:0", a2);
  int rc = rmx_listen(ctx, uri, s_accept, NULL, &l2);
  if (rc != RMX_ENODEV)
    FAIL("RMX_DEVICE=%s: listening on %s gave %s, not RMX_ENODEV", dev, uri, rmx_strerror(rc));
  rmx_listener_close(l1);
  if (rmx_ctx_destroy(ctx))
    FAIL("RMX_DEVICE=%s: destroy", dev);
}

static void path_open(path_t *p)
{
  char uri[160], where[160];
  p->region = calloc(1, REGION);
  p->src = malloc(REGION);
  p->dst = calloc(1, REGION);
  if (!p->region || !p->src || !p->dst)
    FAIL("malloc");
  for (int k = 0; k <= NMSG; k++) {
    if (!(p->msg[k] = malloc(msg_len(k))))
      FAIL("malloc");
    fill(p->msg[k], msg_len(k), p->i, k);
  }
  fill(p->src, REGION, p->i, 1000);
  if (p->cap)
    fill(p->region, REGION, p->i, 1000); /* what the capability must not reach */
  snprintf(uri, sizeof(uri), "rdma://%s:0", p->addr);
  int rc = rmx_listen(srv, uri, s_accept, p, &p->l);
  if (rc || rmx_listener_uri(p->l, where, sizeof(where)))
    FAIL("listen on %s: %s", uri, rmx_strerror(rc));
  snprintf(p->port, sizeof(p->port), "%s", strrchr(where, ':') + 1);
  /* registered once the context has its first device: rxe0's */
  if (rmx_mem_reg(srv, p->region, REGION, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                  &p->region_mem))
    FAIL("path %d: register the region", p->i);
  cur = p->i;
  if ((rc = rmx_connect(cli, where, c_connected, p, &p->cc)) != 0)
    FAIL("connect to %s: %s", where, rmx_strerror(rc));
  rmx_conn_set_cbs(p->cc, &(rmx_conn_cbs_t){.on_recv = c_recv, .on_disconnect = on_lost}, p);
  until("a connection and its key", up);
  if (rmx_mem_reg(cli, p->dst, REGION, RMX_MEM_LOCAL, &p->dst_mem))
    FAIL("path %d: register the read's destination", p->i);
}

/* Each callback once; the capability's connection alone was lost, by the
 * client at least (the server's end may hear of it only at its close). */
static void path_close(path_t *p)
{
  int cap_used = p->cap && p->rk;
  int rail = !p->cap;
  if (p->accepted != 1 || p->connected != 1 || p->c_closed != 1 || p->s_closed != 1 ||
      p->c_lost != cap_used || p->s_lost > cap_used || p->cap_read != cap_used ||
      p->wrote != rail || p->readback != rail || p->answered != rail || p->checked != rail ||
      p->c_sent != (rail ? NMSG + 2 : 0) || p->s_sent != (rail ? NMSG + 3 : 1) ||
      p->c_recv != (rail ? NMSG + 3 : 1) || p->s_recv != (rail ? NMSG + 2 : 0))
    FAIL("path %d: callbacks not each once (accept %d, connect %d, closes %d/%d, lost %d/%d, "
         "write %d, read %d, capability read %d, sent %d/%d, received %d/%d)", p->i,
         p->accepted, p->connected, p->c_closed, p->s_closed, p->c_lost, p->s_lost, p->wrote,
         p->readback, p->cap_read, p->c_sent, p->s_sent, p->c_recv, p->s_recv);
  if (p->rk)
    rmx_rkey_release(p->rk);
  rmx_mem_dereg(p->dst_mem);
  rmx_mem_dereg(p->region_mem);
  rmx_listener_close(p->l);
}

int main(void)
{
  const char *a1 = getenv("RMX_TEST_ADDR") ? getenv("RMX_TEST_ADDR") : getenv("RXE_VM_ADDR");
  const char *a2 = getenv("RXE_VM_ADDR2");
  if (!a1 || !a2) {
    printf("multi-device: SKIP: no second RDMA address (RXE_VM_ADDR2: tests/vm/rxe-vm)\n");
    return 77;
  }
  paths[0] = (path_t){.i = 0, .addr = a1, .dev = getenv("RXE_VM_DEV")};
  paths[1] = (path_t){.i = 1, .addr = a2, .dev = getenv("RXE_VM_DEV2")};
  paths[2] = (path_t){.i = 2, .addr = a2, .dev = getenv("RXE_VM_DEV2"), .cap = 1};
  rmx_log_set_handler(log_fn, NULL);
  device_named(a1, a2, paths[0].dev);
  rmx_config_t cfg;
  if (rmx_config_init(&cfg))
    FAIL("config");
  cfg.log_level = RMX_LOG_INFO;
  if (rmx_ctx_create(&srv, NULL, &cfg) || rmx_ctx_create(&cli, NULL, &cfg))
    FAIL("contexts");
  for (int i = 0; i < NPATH; i++)
    path_open(&paths[i]);

  for (int i = 0; i < NRAIL; i++)
    for (int k = 0; k <= NMSG; k++) {
      int rc = rmx_send(paths[i].cc, paths[i].msg[k], msg_len(k), c_sent_cb, &paths[i]);
      if (rc)
        FAIL("path %d: send %d: %s", i, k, rmx_strerror(rc));
    }
  until("every message and its echo", echoed);

  for (int i = 0; i < NRAIL; i++) {
    rmx_iov_t v = {.addr = paths[i].src, .len = REGION}; /* the registration cache's */
    int rc = rmx_write(paths[i].cc, &v, 1, paths[i].rk, 0, c_wrote, &paths[i]);
    if (rc)
      FAIL("path %d: write: %s", i, rmx_strerror(rc));
  }
  until("the writes, the reads and the server's checks", answered);
  check_devices();

  path_t *cp = &paths[NRAIL];
  if (cp->rk) {
    rmx_iov_t v = {.addr = cp->dst, .len = 4096, .mem = cp->dst_mem};
    int rc = rmx_read(cp->cc, &v, 1, cp->rk, 0, c_cap_read, cp);
    if (rc)
      FAIL("the capability's read: %s", rmx_strerror(rc));
    until("the capability's refusal", refused);
  }

  for (int i = 0; i < NPATH; i++)
    if (rmx_conn_close(paths[i].cc, closed_cb, &paths[i].c_closed) ||
        rmx_conn_close(paths[i].sc, closed_cb, &paths[i].s_closed))
      FAIL("path %d: close", i);
  until("every close", closed);
  for (int i = 0; i < NPATH; i++)
    path_close(&paths[i]);
  if (rmx_ctx_destroy(cli) || rmx_ctx_destroy(srv))
    FAIL("destroy");
  rmx_log_set_handler(NULL, NULL);
  for (int i = 0; i < NPATH; i++) {
    free(paths[i].region);
    for (int k = 0; k <= NMSG; k++)
      free(paths[i].msg[k]);
    free(paths[i].src);
    free(paths[i].dst);
  }
  printf("multi-device: a connection on %s and one on %s, from one context to another: "
         "messages, a %u MiB rendezvous, a %u MiB write and read each, every byte right; "
         "%s\n", paths[0].dev ? paths[0].dev : a1, paths[1].dev ? paths[1].dev : a2,
         BIG >> 20, REGION >> 20,
         cp->no_cap ? "no capability keys (a protection domain per connection)"
                    : "a capability key of the first device refused on the second");
  return 0;
}
