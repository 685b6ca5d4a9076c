/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rmx logs and what it tells about a connection (TCP):
 * - a line on stderr carries the UTC time with milliseconds, the process
 *   and thread ids and the level; a line about a connection names the
 *   peer's address, never a pointer; connecting, accepting and closing are
 *   logged at info; the log handler gets the same message without the
 *   prefix;
 * - RMX_LOG=trace logs every frame posted and every transport event, and
 *   none of it below trace;
 * - rmx_conn_peer_addr and rmx_conn_local_addr on both ends;
 * - a flood of 300 bad hellos, of 300 connections that are not rmx at all
 *   (HTTP), then of 300 failed authentications, from a raw client, logs
 *   one line per second at most, and every refusal is either logged or
 *   counted in the next line's "N more"; the same for 300 connections
 *   that shake hands and then send a transport frame of no known kind, and
 *   300 that send an rmx frame of no known type (protocol errors, which a
 *   peer can repeat at will too);
 *   every line of a flood, any level, is bounded too; failed accepts
 *   (accept4 made to fail, as EMFILE would) log one line per second too;
 * - with getpeername failing, an established connection tells its local
 *   address all the same;
 * - a REJECT with any status reaches on_connected as an RMX_E* code.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <regex.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

/* ---- faults: this program's accept4 and getpeername come before libc's
 * (libuv's calls bind to them: libuv is linked here, so they are exported) */

static atomic_int fail_accepts;  /* accept4 fails with ENOBUFS this many more times */
static atomic_int fail_peername; /* getpeername fails with ENOTCONN while set */

int accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
  static int (*real)(int, struct sockaddr *, socklen_t *, int);
  if (atomic_fetch_sub(&fail_accepts, 1) > 0)
    return errno = ENOBUFS, -1;
  atomic_fetch_add(&fail_accepts, 1);
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "accept4");
  return real(fd, sa, len, flags);
}

int getpeername(int fd, struct sockaddr *sa, socklen_t *len)
{
  static int (*real)(int, struct sockaddr *, socklen_t *);
  if (atomic_load(&fail_peername))
    return errno = ENOTCONN, -1;
  if (!real)
    *(void **)&real = dlsym(RTLD_NEXT, "getpeername");
  return real(fd, sa, len);
}

/* ---- a log handler that keeps every line ---- */

#define MAX_LINES 4096
static char *lines[MAX_LINES];
static int line_lvl[MAX_LINES];
static int nlines;
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep(rmx_log_level_t lvl, const char *line, void *arg)
{
  pthread_mutex_lock(&lines_lock);
  if (nlines < MAX_LINES) {
    line_lvl[nlines] = lvl;
    lines[nlines++] = strdup(line);
  }
  pthread_mutex_unlock(&lines_lock);
}

static void lines_clear(void)
{
  for (int i = 0; i < nlines; i++)
    free(lines[i]);
  nlines = 0;
}

/* Lines holding all of a, b (b may be NULL). */
static int count(const char *a, const char *b)
{
  int n = 0;
  for (int i = 0; i < nlines; i++)
    n += strstr(lines[i], a) && (!b || strstr(lines[i], b));
  return n;
}

static const char *find(const char *a, const char *b)
{
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], a) && (!b || strstr(lines[i], b)))
      return lines[i];
  return NULL;
}

static void dump_and_fail(const char *why)
{
  for (int i = 0; i < nlines; i++)
    print_message("  [%d] %s\n", line_lvl[i], lines[i]);
  fail_msg("%s", why);
}

/* A connection's life, at whatever RMX_LOG says: connect, one message each
 * way, close by the client. */
static void one_connection(int *port)
{
  srv_t s;
  cl_t k;
  static const uint8_t hi[5] = "hello";
  srv_open(&s, NULL, 0);
  *port = s.port;
  cl_connect(&k, NULL, s.uri);
  assert_int_equal(k.status, 0);
  k.expect[0] = hi, k.expect_len[0] = sizeof(hi);
  assert_int_equal(rmx_send(k.c, hi, sizeof(hi), c_sent, &k), 0);
  PUMP_UNTIL(k.recvs == 1);
  cl_close(&k);
  PUMP_UNTIL(s.disconnects == 1);
  srv_close(&s);
}

/* ---- the format ---- */

static void stderr_lines_carry_time_pid_thread_and_peer(void **state)
{
  char path[] = "/tmp/rmx-logs-XXXXXX", buf[512], want[128];
  int fd = mkstemp(path), port = 0;
  assert_true(fd >= 0);
  unlink(path);
  fflush(stderr);
  int saved = dup(2);
  assert_int_equal(dup2(fd, 2), 2);
  setenv("RMX_LOG", "info", 1);
  one_connection(&port);
  unsetenv("RMX_LOG");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);

  FILE *f = fdopen(fd, "r");
  assert_non_null(f);
  rewind(f);
  regex_t re;
  char pre[160];
  /* 2026-11-26T01:54:08.123Z rmx[PID/TID] info: */
  snprintf(pre, sizeof(pre),
           "^[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z "
           "rmx\\[%ld/%ld\\] (error|warn|info|debug|trace): [^ ]",
           (long)getpid(), (long)syscall(SYS_gettid));
  assert_int_equal(regcomp(&re, pre, REG_EXTENDED | REG_NOSUB), 0);
  int n = 0, accepted = 0, connected = 0, closed = 0, closed_by_peer = 0;
  while (fgets(buf, sizeof(buf), f)) {
    n++;
    buf[strcspn(buf, "\n")] = '\0';
    if (regexec(&re, buf, 0, NULL, 0) != 0)
      fail_msg("a log line without time, pid/thread and level: '%s'", buf);
    if (strstr(buf, "(connection") || strstr(buf, "0x7f") || strstr(buf, "0x5"))
      fail_msg("a line names a connection by pointer: '%s'", buf);
    snprintf(want, sizeof(want), "accepted on 127.0.0.1:%d", port);
    accepted += strstr(buf, "info: tcp peer 127.0.0.1:") && strstr(buf, want);
    snprintf(want, sizeof(want), ": connected (127.0.0.1:%d from 127.0.0.1:", port);
    connected += strstr(buf, "info: tcp peer 127.0.0.1:") && strstr(buf, want);
    closed += strstr(buf, "info: tcp peer ") && strstr(buf, ": closed") && !strstr(buf, "by");
    closed_by_peer += strstr(buf, "info: tcp peer 127.0.0.1:") && strstr(buf, ": closed by the peer");
  }
  regfree(&re);
  fclose(f);
  assert_true(n >= 4);
  assert_int_equal(accepted, 1);
  assert_int_equal(connected, 1);
  assert_int_equal(closed, 1);         /* the client closed */
  assert_int_equal(closed_by_peer, 1); /* the server saw it */
}

static void handler_gets_the_message_with_the_peer(void **state)
{
  int port = 0;
  char want[64];
  lines_clear();
  rmx_log_set_handler(keep, NULL);
  setenv("RMX_LOG", "info", 1);
  one_connection(&port);
  unsetenv("RMX_LOG");
  rmx_log_set_handler(NULL, NULL);
  snprintf(want, sizeof(want), "accepted on 127.0.0.1:%d", port);
  const char *l = find("tcp peer 127.0.0.1:", want);
  if (!l)
    dump_and_fail("no accepted line naming the peer");
  /* The message alone: the handler takes its own time and thread. */
  assert_true(strncmp(l, "tcp peer ", 9) == 0);
  for (int i = 0; i < nlines; i++)
    if (line_lvl[i] > RMX_LOG_INFO)
      dump_and_fail("a line above info reached the handler at RMX_LOG=info");
  lines_clear();
}

/* ---- trace ---- */

static void trace_logs_frames_and_events(void **state)
{
  int port;
  lines_clear();
  rmx_log_set_handler(keep, NULL);
  setenv("RMX_LOG", "debug", 1);
  one_connection(&port);
  int at_debug = count(" bytes posted", NULL) + count(": RECV, status", NULL);
  lines_clear();
  setenv("RMX_LOG", "trace", 1);
  one_connection(&port);
  unsetenv("RMX_LOG");
  rmx_log_set_handler(NULL, NULL);
  assert_int_equal(at_debug, 0);
  /* the message and the BYE each way at least */
  if (count("tcp peer ", " bytes posted") < 2 || count("tcp peer ", ": RECV, status 0") < 2 ||
      count("tcp peer ", ": SEND, status 0") < 2 || count("tcp peer ", ": ESTABLISHED") < 2)
    dump_and_fail("RMX_LOG=trace logs too few frames and events");
  lines_clear();
}

/* ---- the addresses ---- */

static void conn_status(rmx_conn_t *c, int st, void *a) { *(int *)a = st; }

static int port_of(const struct sockaddr_storage *ss)
{
  assert_int_equal(ss->ss_family, AF_INET);
  const struct sockaddr_in *in = (const void *)ss;
  assert_int_equal(ntohl(in->sin_addr.s_addr), INADDR_LOOPBACK);
  return ntohs(in->sin_port);
}

static void conn_addresses_on_both_ends(void **state)
{
  srv_t s;
  cl_t k;
  struct sockaddr_storage ss, cp, cl, sp, sl;
  rmx_conn_t *c;
  srv_open(&s, NULL, 0);
  /* Not yet established: nothing to tell. */
  rmx_ctx_t *ctx = mkctx(NULL, 0);
  int st = 1;
  assert_int_equal(rmx_connect(ctx, s.uri, conn_status, &st, &c), 0);
  assert_int_equal(rmx_conn_peer_addr(c, &ss), RMX_ENOTCONN);
  assert_int_equal(rmx_conn_local_addr(c, &ss), RMX_ENOTCONN);
  assert_int_equal(rmx_conn_peer_addr(NULL, &ss), RMX_EINVAL);
  assert_int_equal(rmx_conn_peer_addr(c, NULL), RMX_EINVAL);
  assert_int_equal(rmx_conn_local_addr(c, NULL), RMX_EINVAL);
  assert_int_equal(rmx_conn_close(c, NULL, NULL), 0);
  PUMP_UNTIL(st != 1);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);

  cl_connect(&k, NULL, s.uri);
  assert_int_equal(k.status, 0);
  PUMP_UNTIL(s.accepted == 1);
  assert_int_equal(rmx_conn_peer_addr(k.c, &cp), 0);
  assert_int_equal(rmx_conn_local_addr(k.c, &cl), 0);
  assert_int_equal(rmx_conn_peer_addr(s.conns[0], &sp), 0);
  assert_int_equal(rmx_conn_local_addr(s.conns[0], &sl), 0);
  assert_int_equal(port_of(&cp), s.port); /* the client's peer: the listener */
  assert_int_equal(port_of(&sl), s.port); /* the server's end: the listener's port */
  assert_int_equal(port_of(&cl), port_of(&sp)); /* and the client's port both ways */
  assert_int_not_equal(port_of(&cl), s.port);
  /* Still there after the peer went away. */
  srv_close(&s);
  PUMP_UNTIL(k.disconnects == 1);
  memset(&ss, 0, sizeof(ss));
  assert_int_equal(rmx_conn_peer_addr(k.c, &ss), 0);
  assert_int_equal(port_of(&ss), port_of(&cp));
  assert_int_equal(rmx_conn_local_addr(k.c, &ss), 0);
  assert_int_equal(port_of(&ss), port_of(&cl));
  cl_close(&k);

  /* Established while the peer's address cannot be read (getpeername
   * fails, as it does once the peer has reset the connection): no peer
   * address, but the local one on both ends all the same. */
  srv_open(&s, NULL, 0);
  atomic_store(&fail_peername, 1);
  cl_connect(&k, NULL, s.uri);
  PUMP_UNTIL(s.accepted == 1);
  atomic_store(&fail_peername, 0);
  assert_int_equal(k.status, 0);
  assert_int_equal(rmx_conn_peer_addr(k.c, &ss), RMX_ENOTCONN);
  assert_int_equal(rmx_conn_peer_addr(s.conns[0], &ss), RMX_ENOTCONN);
  assert_int_equal(rmx_conn_local_addr(k.c, &cl), 0);
  assert_int_not_equal(port_of(&cl), s.port);
  assert_int_equal(rmx_conn_local_addr(s.conns[0], &sl), 0);
  assert_int_equal(port_of(&sl), s.port);
  cl_close(&k);
  PUMP_UNTIL(s.disconnects == 1);
  srv_close(&s);
}

/* ---- floods of refusals ---- */

static int flood = 300; /* peers (or failed accepts) per flood */

static int flood_bad_hellos(raw_t *r)
{
  uint8_t b[64];
  hello_t h = hello_default();
  h.magic = 0x0badc0de;
  for (int i = 0; i < flood + r->mode; i++) {
    int fd = raw_dial(r->port);
    RCHECK(r, fd >= 0, "dial %d", i);
    size_t n = hello_frame(b, &h, 0, 0);
    RCHECK(r, wr_all(fd, b, n) == 0, "write %d", i);
    drain_eof(fd, 10000); /* the REJECT, then the close: the server is done with it */
    close(fd);
  }
  return 0;
}

/* Not rmx at all: what a web client sends. */
static int flood_http(raw_t *r)
{
  static const char get[] = "GET / HTTP/1.0\r\n\r\n";
  for (int i = 0; i < flood + r->mode; i++) {
    int fd = raw_dial(r->port);
    RCHECK(r, fd >= 0, "dial %d", i);
    RCHECK(r, wr_all(fd, get, sizeof(get) - 1) == 0, "write %d", i);
    drain_eof(fd, 10000);
    close(fd);
  }
  return 0;
}

/* A hello with the flag and a nonce, then an AUTH whose proof is zeros. */
static int flood_bad_proofs(raw_t *r)
{
  uint8_t b[256], body[256], kind, zero[PROOF_LEN] = {0};
  uint32_t blen;
  for (int i = 0; i < flood + r->mode; i++) {
    int fd = raw_dial(r->port);
    RCHECK(r, fd >= 0, "dial %d", i);
    auth_hello(body, 1);
    randombytes_buf(body + HELLO_LEN, NONCE_LEN);
    size_t n = tframe(b, K_HELLO, body, C_HELLO_LEN);
    RCHECK(r, wr_all(fd, b, n) == 0, "write %d", i);
    RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO_ACK,
           "no HELLO_ACK %d", i);
    n = msg_frame(b, F_AUTH, 0, 0, zero, PROOF_LEN);
    RCHECK(r, wr_all(fd, b, n) == 0, "write AUTH %d", i);
    drain_eof(fd, 10000);
    close(fd);
  }
  return 0;
}

/* A hello, its HELLO_ACK, then the frame in bad[0..nbad). */
static int flood_after_hello(raw_t *r, const uint8_t *bad, size_t nbad)
{
  uint8_t b[64], body[256], kind;
  uint32_t blen;
  hello_t h = hello_default();
  for (int i = 0; i < flood + r->mode; i++) {
    int fd = raw_dial(r->port);
    RCHECK(r, fd >= 0, "dial %d", i);
    size_t n = hello_frame(b, &h, 0, 0);
    RCHECK(r, wr_all(fd, b, n) == 0, "write %d", i);
    RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO_ACK,
           "no HELLO_ACK %d", i);
    RCHECK(r, wr_all(fd, bad, nbad) == 0, "write the bad frame %d", i);
    drain_eof(fd, 10000);
    close(fd);
  }
  return 0;
}

/* A transport frame of kind 11: between the transport's own and rmx's. */
static int flood_unknown_kinds(raw_t *r)
{
  uint8_t b[16];
  return flood_after_hello(r, b, tfx(b, 11, 0, 0, 0));
}

/* An rmx frame of type 15: no such frame. */
static int flood_unknown_types(raw_t *r)
{
  uint8_t b[64];
  return flood_after_hello(r, b, msg_frame(b, 15, 0, 0, NULL, 0));
}

/* The "N more" a line ends with, or 0. */
static unsigned held_in(const char *l)
{
  const char *p = strstr(l, " (and ");
  return p ? (unsigned)strtoul(p + 6, NULL, 10) : 0;
}

/* flood refusals, then one more after the limiter's second: at most one
 * line per second of flood, each refusal logged or counted; and at most
 * kinds * (1 + took / 1000) lines of any kind during the flood, kinds being
 * the limited kinds of line the flood is expected to cause (each limiter
 * lets a line out at the flood's start and then one per full second of its
 * took ms): a line per connection that no limiter holds back exceeds it. A
 * refusal names the peer's address unless anonymous (a failed accept has
 * no peer yet). */
static void flood_case(srv_t *s, script_fn fn, const char *what, unsigned kinds, int anonymous)
{
  raw_t r = {.port = s->port};
  lines_clear();
  rmx_log_set_handler(keep, NULL);
  uint64_t t0 = now_ms();
  raw_start(&r, fn, 0);
  raw_join(&r);
  uint64_t took = now_ms() - t0;
  pthread_mutex_lock(&lines_lock);
  int during = count(what, NULL), total = nlines;
  pthread_mutex_unlock(&lines_lock);
  pump_for(1100); /* the limiter's second is over */
  r.mode = 1 - flood;  /* one more */
  raw_start(&r, fn, r.mode);
  raw_join(&r);
  pump_for(50);
  rmx_log_set_handler(NULL, NULL);
  unsigned logged = 0, held = 0;
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], what)) {
      logged++;
      held += held_in(lines[i]);
      if (!anonymous && !strstr(lines[i], "peer 127.0.0.1:") &&
          !strstr(lines[i], "with 127.0.0.1:"))
        dump_and_fail("a refusal that does not name the peer's address");
    }
  print_message("%s: %d lines (%d of any kind) in %llu ms of flood; %u logged, %u counted in "
                "all\n", what, during, total, (unsigned long long)took, logged, held);
  if (during < 1 || (uint64_t)during > 1 + took / 1000)
    dump_and_fail("more than one refusal line per second");
  if ((uint64_t)total > kinds * (1 + took / 1000))
    dump_and_fail("more lines during the flood than its limiters let out");
  if (logged + held != (unsigned)flood + 1)
    dump_and_fail("refusals neither logged nor counted");
  const char *last = lines[nlines - 1];
  if (!strstr(last, " more like it not logged in the last "))
    dump_and_fail("the line after the flood does not say how many were held back");
  lines_clear();
}

static void refusal_floods_log_one_line_per_second(void **state)
{
  srv_t s;
  srv_open(&s, SECRET_A, 0);
  flood_case(&s, flood_bad_hellos, "sent a handshake that is not rmx's", 1, 0);
  pump_for(1100);
  flood_case(&s, flood_http, "before its hello", 1, 0);
  pump_for(1100);
  flood_case(&s, flood_bad_proofs, "authentication failed, refused: wrong proof", 1, 0);
  assert_int_equal(s.accepted, 0);
  srv_close(&s);
}

/* An accepted connection that fails is closed at once. */
static void closing_disconnect(rmx_conn_t *c, int status, void *arg)
{
  ++*(int *)arg;
  assert_int_equal(status, RMX_EPROTO);
  assert_int_equal(rmx_conn_close(c, NULL, NULL), 0);
}

static void closing_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_disconnect = closing_disconnect}, arg);
}

static void protocol_error_floods_log_one_line_per_second(void **state)
{
  srv_t s = {.ctx = mkctx(NULL, 0)};
  int cut = 0;
  assert_int_equal(rmx_listen(s.ctx, "tcp://127.0.0.1:0", closing_accept, &cut, &s.l), 0);
  assert_int_equal(rmx_listener_uri(s.l, s.uri, sizeof(s.uri)), 0);
  s.port = atoi(strrchr(s.uri, ':') + 1);
  flood_case(&s, flood_unknown_kinds, "tcp: closing connection with", 1, 0);
  pump_for(1100);
  flood_case(&s, flood_unknown_types, "its protocol error", 1, 0);
  PUMP_UNTIL(cut == 2 * (flood + 1));
  rmx_listener_close(s.l);
  assert_int_equal(rmx_ctx_destroy(s.ctx), 0);
}

/* flood failed accepts, as under EMFILE: accept4 fails that many times (the
 * listener tries again 200 ms after each), then takes the one this makes. */
static int flood_failed_accepts(raw_t *r)
{
  atomic_store(&fail_accepts, flood + r->mode);
  int fd = raw_dial(r->port);
  RCHECK(r, fd >= 0, "dial");
  for (int i = 0; atomic_load(&fail_accepts) > 0; i++) {
    RCHECK(r, i < 10000, "accept4 was not called %d more times", atomic_load(&fail_accepts));
    usleep(1000);
  }
  close(fd);
  return 0;
}

static void failed_accepts_log_one_line_per_second(void **state)
{
  srv_t s;
  srv_open(&s, NULL, 0);
  flood = 10; /* 2 s of them */
  flood_case(&s, flood_failed_accepts, "tcp: cannot accept", 1, 1);
  atomic_store(&fail_accepts, 0), flood = 300; /* the other cases' */
  srv_close(&s);
}

/* ---- a REJECT's status ---- */

static int reject_with(raw_t *r)
{
  uint8_t body[256], b[64], st[4], kind;
  uint32_t blen;
  r->fd = accept(r->lfd, NULL, NULL);
  RCHECK(r, r->fd >= 0, "accept");
  RCHECK(r, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO,
         "no HELLO");
  p32(st, (uint32_t)r->reject);
  size_t n = tframe(b, K_REJECT, st, 4);
  RCHECK(r, wr_all(r->fd, b, n) == 0, "write REJECT");
  drain_eof(r->fd, 10000);
  close(r->fd);
  return 0;
}

static void reject_status_is_an_rmx_code(void **state)
{
  static const struct {
    int32_t sent;
    int want;
  } cases[] = {
    {-1, RMX_ECONNREFUSED},      {-4999, RMX_ECONNREFUSED},     {0, RMX_ECONNREFUSED},
    {5, RMX_ECONNREFUSED},       {INT32_MIN, RMX_ECONNREFUSED}, {INT32_MAX, RMX_ECONNREFUSED},
    {-5000, RMX_ECONNREFUSED},   {RMX_EACCES, RMX_EACCES},      {RMX_EVERSION, RMX_EVERSION},
    {RMX_ENOHANDLER, RMX_ENOHANDLER},
  };
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  raw_t r = {0};
  char uri[64];
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  r.lfd = tcp_socket();
  assert_int_equal(bind(r.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(r.lfd, 4), 0);
  assert_int_equal(getsockname(r.lfd, (struct sockaddr *)&sa, &sl), 0);
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
  rmx_ctx_t *ctx = mkctx(NULL, 0);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    rmx_conn_t *c;
    int st = 1;
    r.reject = cases[i].sent;
    raw_start(&r, reject_with, 0);
    assert_int_equal(rmx_connect(ctx, uri, conn_status, &st, &c), 0);
    PUMP_UNTIL(st != 1);
    raw_join(&r);
    if (st != cases[i].want)
      fail_msg("a REJECT with status %d reached on_connected as %d (%s), not %s",
               (int)cases[i].sent, st, rmx_err_name(st), rmx_err_name(cases[i].want));
    assert_int_equal(rmx_conn_close(c, NULL, NULL), 0);
  }
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  close(r.lfd);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  unsetenv("RMX_AUTH_SECRET_FILE");
  unsetenv("RMX_LOG");
  if (sodium_init() < 0)
    return 2;
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(stderr_lines_carry_time_pid_thread_and_peer, setup, teardown),
    cmocka_unit_test_setup_teardown(handler_gets_the_message_with_the_peer, setup, teardown),
    cmocka_unit_test_setup_teardown(trace_logs_frames_and_events, setup, teardown),
    cmocka_unit_test_setup_teardown(conn_addresses_on_both_ends, setup, teardown),
    cmocka_unit_test_setup_teardown(refusal_floods_log_one_line_per_second, setup, teardown),
    cmocka_unit_test_setup_teardown(protocol_error_floods_log_one_line_per_second, setup, teardown),
    cmocka_unit_test_setup_teardown(failed_accepts_log_one_line_per_second, setup, teardown),
    cmocka_unit_test_setup_teardown(reject_status_is_an_rmx_code, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
