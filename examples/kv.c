/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-kv: a key-value service over rmx RPC, and its client.
 *
 *   rmx-kv server URI
 *   rmx-kv put URI KEY VALUE      (VALUE "@FILE" reads a file)
 *   rmx-kv get URI KEY            (the value goes to stdout)
 *   rmx-kv del URI KEY
 *   rmx-kv demo URI               put/get/delete small and large values, checked
 *
 * Exit 0 when done, 1 when it failed, 2 for a bad command line (tool.h).
 *
 * Small values travel inside the RPCs. Values of 64 KiB and more go
 * zero-copy: a large put sends the server a key to the client's buffer and
 * the server RDMA-reads the value straight into its storage; a large get
 * sends a key to the client's buffer and the server RDMA-writes into it.
 */
#include <fcntl.h>
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

enum { KV_PUT = 1, KV_GET, KV_DEL, KV_PUT_FROM, KV_GET_INTO };
enum { GOT_INLINE = 1, GOT_LARGE = 2 };
#define LARGE (64u << 10)
#define KEY_MAX 250
#define BUCKETS 1024

static rmx_ctx_t *ctx;

/* ---- the store ---- */

typedef struct value {
  uint32_t refs; /* the table's, plus one per write in flight from it */
  size_t len;
  uint8_t *data;
  rmx_mem_t *mem; /* large values: registered to be written from */
} value_t;

typedef struct entry {
  struct entry *next;
  char key[KEY_MAX + 1];
  value_t *v;
} entry_t;

static entry_t *table[BUCKETS];

static unsigned hash(const char *k)
{
  unsigned h = 5381;
  while (*k)
    h = h * 33 + (unsigned char)*k++;
  return h % BUCKETS;
}

static void value_unref(value_t *v)
{
  if (v && --v->refs == 0) {
    rmx_mem_dereg(v->mem);
    free(v->data);
    free(v);
  }
}

static entry_t **find(const char *key)
{
  entry_t **e = &table[hash(key)];
  while (*e && strcmp((*e)->key, key) != 0)
    e = &(*e)->next;
  return e;
}

static void store(const char *key, value_t *v)
{
  entry_t **e = find(key);
  if (!*e) {
    *e = calloc(1, sizeof(**e));
    snprintf((*e)->key, sizeof((*e)->key), "%s", key);
  } else {
    value_unref((*e)->v);
  }
  (*e)->v = v;
}

static value_t *value_new(size_t len)
{
  value_t *v = calloc(1, sizeof(*v));
  v->refs = 1;
  v->len = len;
  v->data = malloc(len ? len : 1);
  return v;
}

/* Requests start with [u16 key length][key]. */
static int take_key(const uint8_t **p, size_t *len, char *key)
{
  uint16_t kl;
  if (*len < 2)
    return -1;
  memcpy(&kl, *p, 2);
  if (kl == 0 || kl > KEY_MAX || *len < 2u + kl)
    return -1;
  memcpy(key, *p + 2, kl);
  key[kl] = '\0';
  *p += 2 + kl;
  *len -= 2 + (size_t)kl;
  return 0;
}

/* ---- the server ---- */

static void h_put(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  char key[KEY_MAX + 1];
  const uint8_t *p = data;
  if (take_key(&p, &len, key)) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  value_t *v = value_new(len);
  memcpy(v->data, p, len);
  store(key, v);
  rmx_rpc_reply(req, NULL, 0);
}

static void h_get(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  char key[KEY_MAX + 1];
  const uint8_t *p = data;
  entry_t *e;
  if (take_key(&p, &len, key)) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  if (!(e = *find(key))) {
    rmx_rpc_reply_error(req, RMX_ENOENT);
    return;
  }
  if (e->v->len >= LARGE) { /* tell the size; the client comes back with a buffer */
    uint8_t r[9] = {GOT_LARGE};
    memcpy(r + 1, &(uint64_t){e->v->len}, 8);
    rmx_rpc_reply(req, r, sizeof(r));
    return;
  }
  rmx_buf_t *b;
  if (rmx_buf_get(ctx, 1 + e->v->len, &b)) {
    rmx_rpc_reply_error(req, RMX_ENOMEM);
    return;
  }
  uint8_t *out = rmx_buf_data(b);
  out[0] = GOT_INLINE;
  memcpy(out + 1, e->v->data, e->v->len);
  rmx_rpc_reply_buf(req, b, 1 + e->v->len);
}

static void h_del(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  char key[KEY_MAX + 1];
  const uint8_t *p = data;
  entry_t **e;
  if (take_key(&p, &len, key)) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  if (!*(e = find(key))) {
    rmx_rpc_reply_error(req, RMX_ENOENT);
    return;
  }
  entry_t *gone = *e;
  *e = gone->next;
  value_unref(gone->v); /* a write still going out keeps it until done */
  free(gone);
  rmx_rpc_reply(req, NULL, 0);
}

typedef struct transfer {
  rmx_rpc_req_t *req;
  rmx_rkey_t *rk;
  value_t *v;
  char key[KEY_MAX + 1];
} transfer_t;

static void pulled(rmx_conn_t *c, int status, void *arg)
{
  transfer_t *t = arg;
  if (status == 0) {
    store(t->key, t->v);
    rmx_rpc_reply(t->req, NULL, 0);
  } else {
    value_unref(t->v);
    rmx_rpc_reply_error(t->req, status);
  }
  rmx_rkey_release(t->rk);
  free(t);
}

/* [key][u64 size][packed key of the client's buffer]: read it from there. */
static void h_put_from(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  transfer_t *t = calloc(1, sizeof(*t));
  const uint8_t *p = data;
  uint64_t size;
  t->req = req;
  if (take_key(&p, &len, t->key) || len < 8) {
    free(t);
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  memcpy(&size, p, 8);
  int rc = rmx_rkey_unpack(rmx_rpc_req_conn(req), p + 8, len - 8, &t->rk);
  if (rc == 0 && rmx_rkey_size(t->rk) < size)
    rc = RMX_EINVAL;
  if (rc == 0) {
    t->v = value_new(size);
    rc = rmx_mem_reg(ctx, t->v->data, size ? size : 1, RMX_MEM_LOCAL, &t->v->mem);
  }
  rmx_iov_t iov = {t->v ? t->v->data : NULL, size, t->v ? t->v->mem : NULL};
  if (rc == 0)
    rc = rmx_read(rmx_rpc_req_conn(req), &iov, 1, t->rk, 0, pulled, t);
  if (rc) {
    if (t->rk)
      rmx_rkey_release(t->rk);
    value_unref(t->v);
    free(t);
    rmx_rpc_reply_error(req, rc);
  }
}

static void pushed(rmx_conn_t *c, int status, void *arg)
{
  transfer_t *t = arg;
  if (status == 0)
    rmx_rpc_reply(t->req, &(uint64_t){t->v->len}, 8);
  else
    rmx_rpc_reply_error(t->req, status);
  value_unref(t->v);
  rmx_rkey_release(t->rk);
  free(t);
}

/* [key][packed key of the client's buffer]: write the value there. */
static void h_get_into(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  transfer_t *t = calloc(1, sizeof(*t));
  const uint8_t *p = data;
  entry_t *e;
  t->req = req;
  int rc = take_key(&p, &len, t->key) ? RMX_EINVAL : 0;
  if (rc == 0 && !(e = *find(t->key)))
    rc = RMX_ENOENT;
  if (rc == 0)
    rc = rmx_rkey_unpack(rmx_rpc_req_conn(req), p, len, &t->rk);
  if (rc == 0 && rmx_rkey_size(t->rk) < e->v->len)
    rc = RMX_EMSGSIZE;
  if (rc == 0 && !e->v->mem)
    rc = rmx_mem_reg(ctx, e->v->data, e->v->len, RMX_MEM_LOCAL, &e->v->mem);
  if (rc == 0) {
    t->v = e->v;
    t->v->refs++;
    rmx_iov_t iov = {t->v->data, t->v->len, t->v->mem};
    if ((rc = rmx_write(rmx_rpc_req_conn(req), &iov, 1, t->rk, 0, pushed, t)) != 0)
      value_unref(t->v);
  }
  if (rc) {
    if (t->rk)
      rmx_rkey_release(t->rk);
    free(t);
    rmx_rpc_reply_error(req, rc);
  }
}

static void srv_closed(rmx_conn_t *c, void *arg) {}
static void srv_disc(rmx_conn_t *c, int st, void *arg) { rmx_conn_close(c, srv_closed, NULL); }
static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_disconnect = srv_disc};
  rmx_conn_set_cbs(c, &cbs, NULL);
}

static int serve(const char *uri)
{
  rmx_listener_t *l;
  char bound[128];
  rmx_rpc_register(ctx, KV_PUT, h_put, NULL);
  rmx_rpc_register(ctx, KV_GET, h_get, NULL);
  rmx_rpc_register(ctx, KV_DEL, h_del, NULL);
  rmx_rpc_register(ctx, KV_PUT_FROM, h_put_from, NULL);
  rmx_rpc_register(ctx, KV_GET_INTO, h_get_into, NULL);
  int rc = rmx_listen(ctx, uri, srv_accept, NULL, &l);
  if (rc)
    return tool_uri_failed("listen on", uri, rc);
  if ((rc = rmx_listener_uri(l, bound, sizeof(bound))) != 0) {
    fprintf(stderr, "rmx-kv: the bound URI: %s\n", rmx_strerror(rc));
    return 1;
  }
  printf("kv: serving on %s\n", bound);
  fflush(stdout);
  rmx_ctx_run(ctx);
  return 0;
}

/* ---- the client: one call at a time, the loop run until it ends ---- */

static rmx_conn_t *conn;
static int ended, status;
static uint8_t *reply;
static size_t reply_len;

static void on_reply(rmx_conn_t *c, int st, const void *data, size_t len, void *arg)
{
  ended = 1;
  rmx_ctx_stop(ctx);
  status = st;
  free(reply);
  reply = malloc(len ? len : 1);
  memcpy(reply, data, len);
  reply_len = len;
}

static int call(uint32_t id, const void *req, size_t len)
{
  ended = 0;
  int rc = rmx_rpc_call(conn, id, req, len, 30000, on_reply, NULL, NULL);
  if (rc)
    return rc;
  while (!ended)
    rmx_ctx_run(ctx); /* on_reply stops it */
  return status;
}

static size_t put_key(uint8_t *p, const char *key)
{
  uint16_t kl = (uint16_t)strlen(key);
  memcpy(p, &kl, 2);
  memcpy(p + 2, key, kl);
  return 2u + kl;
}

/* Share a local buffer with the server for one call. */
static int with_buffer(uint32_t id, const char *key, void *buf, size_t len, unsigned access,
                       int with_size)
{
  rmx_mem_t *m;
  uint8_t req[2 + KEY_MAX + 8 + RMX_RKEY_MAX];
  size_t n = put_key(req, key), blen = RMX_RKEY_MAX;
  int rc = rmx_mem_reg(ctx, buf, len ? len : 1, access, &m);
  if (rc)
    return rc;
  if (with_size) {
    memcpy(req + n, &(uint64_t){len}, 8);
    n += 8;
  }
  if ((rc = rmx_mem_pack_for(m, conn, req + n, &blen)) == 0) /* for the server alone */
    rc = call(id, req, n + blen);
  rmx_mem_dereg(m);
  return rc;
}

static int kv_put(const char *key, const void *val, size_t len)
{
  if (len >= LARGE)
    return with_buffer(KV_PUT_FROM, key, (void *)(uintptr_t)val, len, RMX_MEM_REMOTE_READ, 1);
  uint8_t *req = malloc(2 + KEY_MAX + len);
  size_t n = put_key(req, key);
  memcpy(req + n, val, len);
  int rc = call(KV_PUT, req, n + len);
  free(req);
  return rc;
}

/* The value in *out (malloc'd), its length in *len. */
static int kv_get(const char *key, uint8_t **out, size_t *len)
{
  uint8_t req[2 + KEY_MAX];
  int rc = call(KV_GET, req, put_key(req, key));
  if (rc)
    return rc;
  if (reply_len >= 1 && reply[0] == GOT_INLINE) {
    *len = reply_len - 1;
    *out = malloc(*len ? *len : 1);
    memcpy(*out, reply + 1, *len);
    return 0;
  }
  if (reply_len != 9 || reply[0] != GOT_LARGE)
    return RMX_EPROTO;
  uint64_t size;
  memcpy(&size, reply + 1, 8);
  *out = malloc(size);
  *len = size;
  return with_buffer(KV_GET_INTO, key, *out, size, RMX_MEM_REMOTE_WRITE, 0);
}

static int kv_del(const char *key)
{
  uint8_t req[2 + KEY_MAX];
  return call(KV_DEL, req, put_key(req, key));
}

static int connected_status = 1;
static void on_conn(rmx_conn_t *c, int st, void *arg)
{
  connected_status = st;
  rmx_ctx_stop(ctx);
}

static int demo(void)
{
  static const size_t sizes[] = {0, 5, 4000, LARGE - 1, LARGE, 3u << 20, 16u << 20};
  char key[32];
  int rc;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i], got_len;
    uint8_t *val = malloc(n ? n : 1), *got;
    for (size_t j = 0; j < n; j++)
      val[j] = (uint8_t)(j * 7 + i);
    snprintf(key, sizeof(key), "key-%zu", n);
    if ((rc = kv_put(key, val, n)) || (rc = kv_get(key, &got, &got_len))) {
      fprintf(stderr, "rmx-kv: %s: %s\n", key, rmx_strerror(rc));
      return 1;
    }
    int same = got_len == n && memcmp(got, val, n) == 0;
    printf("kv: %-14s %9zu bytes put, got back %s (%s)\n", key, n, same ? "intact" : "DIFFERENT",
           n >= LARGE ? "zero-copy, one-sided" : "inline");
    free(got);
    free(val);
    if (!same)
      return 1;
  }
  if ((rc = kv_del("key-5")) || kv_del("key-5") != RMX_ENOENT) {
    fprintf(stderr, "rmx-kv: delete did not behave\n");
    return 1;
  }
  uint8_t *got;
  size_t gl;
  printf("kv: key-5 deleted; get now says: %s\n", rmx_strerror(kv_get("key-5", &got, &gl)));
  return 0;
}

static const char usage[] =
    "usage: rmx-kv server URI\n"
    "       rmx-kv put URI KEY VALUE    (VALUE @FILE: the file's bytes)\n"
    "       rmx-kv get URI KEY\n"
    "       rmx-kv del URI KEY\n"
    "       rmx-kv demo URI             put and get values of 0 B to 16 MiB, checked\n"
    "       rmx-kv --help | --version\n"
    "  URI: tcp://HOST:PORT, rdma://HOST:PORT or auto://HOST:PORT; KEY: 1 to 250\n"
    "  bytes. Exit 0: done; 1: it failed (no such key included); 2: a bad\n"
    "  command line.\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage), nops = argc - first;
  static const struct {
    const char *cmd;
    int operands;
  } cmds[] = {{"server", 2}, {"put", 4}, {"get", 3}, {"del", 3}, {"demo", 2}};
  int known = 0;
  argv += first - 1; /* argv[1] is the command, as before */
  argc = nops + 1;
  static const char *const takes[] = {"a URI", "a URI, a KEY and a VALUE", "a URI and a KEY",
                                      "a URI and a KEY", "a URI"};
  if (nops < 1)
    tool_bad("server, put, get, del or demo, and a URI");
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if (strcmp(argv[1], cmds[i].cmd) == 0) {
      known = 1;
      if (nops != cmds[i].operands)
        tool_bad("%s takes %s", cmds[i].cmd, takes[i]);
    }
  if (!known)
    tool_bad("'%s' is not server, put, get, del or demo", argv[1]);
  tool_uri("URI", argv[2]);
  if (argc > 3 && (argv[3][0] == '\0' || strlen(argv[3]) > KEY_MAX))
    tool_bad("KEY must be 1 to %d bytes, not %zu", KEY_MAX, strlen(argv[3]));
  int rc = rmx_ctx_create(&ctx, NULL, NULL);
  if (rc) {
    fprintf(stderr, "rmx-kv: %s\n", rmx_strerror(rc));
    return 1;
  }
  if (strcmp(argv[1], "server") == 0)
    return serve(argv[2]);
  if ((rc = rmx_connect(ctx, argv[2], on_conn, NULL, &conn)) != 0)
    return tool_uri_failed("connect to", argv[2], rc);
  rmx_ctx_run(ctx);
  if (connected_status) {
    fprintf(stderr, "rmx-kv: connect: %s\n", rmx_strerror(connected_status));
    return 1;
  }
  rc = 1;
  if (strcmp(argv[1], "demo") == 0) {
    rc = demo();
  } else if (strcmp(argv[1], "put") == 0 && argc == 5) {
    const char *v = argv[4];
    size_t n = strlen(v);
    uint8_t *buf = NULL;
    if (v[0] == '@') {
      int fd = open(v + 1, O_RDONLY);
      struct stat st;
      if (fd < 0 || fstat(fd, &st)) {
        perror(v + 1);
        return 1;
      }
      buf = malloc((size_t)st.st_size + 1);
      n = (size_t)read(fd, buf, (size_t)st.st_size);
      close(fd);
      v = (const char *)buf;
    }
    rc = kv_put(argv[3], v, n);
    free(buf);
  } else if (strcmp(argv[1], "get") == 0 && argc == 4) {
    uint8_t *val;
    size_t n;
    if ((rc = kv_get(argv[3], &val, &n)) == 0) {
      fwrite(val, 1, n, stdout);
      free(val);
    }
  } else if (strcmp(argv[1], "del") == 0 && argc == 4) {
    rc = kv_del(argv[3]);
  }
  if (rc && rc != 1)
    fprintf(stderr, "rmx-kv: %s\n", rmx_strerror(rc));
  rmx_conn_close(conn, NULL, NULL);
  rmx_ctx_run(ctx);
  rmx_ctx_destroy(ctx);
  return rc ? 1 : 0;
}
