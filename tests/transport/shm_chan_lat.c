/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Latency of the shared-memory channel (transport/shm/chan.c) on libuv,
 * beside TCP loopback on libuv measured in the same run, not a test: two
 * processes pinned to CPU 0 and CPU 1 ping-pong SIZE bytes N times, each
 * side in its own uv loop, and the median and 99th percentile of half a
 * round trip are printed.
 *   sleep: both sides sleep in uv_run (the channel on its doorbell, TCP on
 *          its socket);
 *   poll:  both sides spin: rmx__shm_chan_poll and a uv_run(UV_RUN_NOWAIT)
 *          every K polls for the channel (-k, default 1: one loop turn,
 *          an epoll_wait, per poll, as a busy-polling rmx loop makes), a
 *          uv_run(UV_RUN_NOWAIT) per turn for TCP.
 *   rmx-shm-chan-lat [-n N] [-s SIZE] [-k K] [-m sleep|poll|both]
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../transport/shm/chan.h"
#define LAT_PROG "shm_chan_lat"
#include "lat.h"

static long n_msgs = 100000, warm;
static size_t size = 8;
static int every = 1; /* polls per loop turn */

/* One side of a ping-pong, whatever carries it. */
typedef struct side {
  uv_loop_t loop;
  int initiator, polling, done;
  long round;   /* round trips finished */
  size_t have;  /* bytes of the current message in */
  double t0, *rtt;
  uint8_t msg[4096];
  rmx_shm_chan_t ch;
  uv_tcp_t tcp, conn;
} side_t;

/* A whole message came back (initiator) or in (echo). Returns 1 to send
 * the next one. */
static int arrived(side_t *s)
{
  if (!s->initiator)
    return 1;
  double t = now_ns();
  if (s->round >= warm)
    s->rtt[s->round - warm] = t - s->t0;
  if (++s->round == warm + n_msgs) {
    s->done = 1;
    return 0;
  }
  s->t0 = now_ns();
  return 1;
}

static void spin(side_t *s, int (*poll)(side_t *));

/* The initiator, on CPU 0, against the echo process pid; then the figures. */
static void initiate(const char *what, side_t *s, pid_t pid, int (*poll)(side_t *))
{
  pin(0);
  s->initiator = 1;
  s->rtt = malloc(sizeof(double) * (size_t)n_msgs);
  spin(s, poll);
  waitpid(pid, NULL, 0);
  uv_loop_close(&s->loop);
  qsort(s->rtt, (size_t)n_msgs, sizeof(double), cmp);
  printf("%-20s %zu B x %ld: one way median %7.3f us, p99 %7.3f us\n", what, size, n_msgs,
         s->rtt[n_msgs / 2] / 2000, s->rtt[n_msgs * 99 / 100] / 2000);
  free(s->rtt);
}

static void spin(side_t *s, int (*poll)(side_t *))
{
  if (!s->polling) {
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return;
  }
  for (long i = 0; !s->done; i++) {
    if (poll)
      poll(s);
    if (i % every == 0)
      uv_run(&s->loop, UV_RUN_NOWAIT);
  }
  uv_run(&s->loop, UV_RUN_DEFAULT); /* the closes */
}

/* ---- the channel ---- */

static void ch_send(side_t *s)
{
  struct iovec v = {s->msg, size};
  if (rmx__shm_chan_write(&s->ch, &v, 1) != (ssize_t)size)
    die("the ring had no room for a message"); /* one in flight at a time */
}

static void ch_ready(rmx_shm_chan_t *ch)
{
  side_t *s = ch->data;
  if (s->initiator) {
    s->t0 = now_ns();
    ch_send(s);
  }
}

static void ch_readable(rmx_shm_chan_t *ch)
{
  side_t *s = ch->data;
  struct iovec sp[2];
  while (!s->done && rmx__shm_chan_peek(ch, sp) >= (ssize_t)size) {
    rmx__shm_chan_copy(ch, 0, s->msg, size);
    rmx__shm_chan_consume(ch, size);
    if (arrived(s))
      ch_send(s);
    else
      rmx__shm_chan_close(ch);
  }
}

static void ch_writable(rmx_shm_chan_t *ch) { (void)ch; }

static void ch_end(rmx_shm_chan_t *ch, int status, const char *why)
{
  side_t *s = ch->data;
  if (!s->done && status != 0)
    fprintf(stderr, "shm_chan_lat: the channel ended: %s\n", why);
  s->done = 1;
  rmx__shm_chan_close(ch);
}

static void ch_closed(rmx_shm_chan_t *ch) { (void)ch; }

static const rmx_shm_chan_cbs_t cbs = {ch_ready, ch_readable, ch_writable, ch_end, ch_closed, NULL};

static int ch_poll(side_t *s)
{
  return rmx__shm_chan_poll(&s->ch);
}

static side_t *lst_side;

static void ch_incoming(rmx_shm_listener_t *l)
{
  rmx_shm_chan_cfg_t cfg = {.polling = lst_side->polling};
  if (rmx__shm_chan_accept(&lst_side->ch, l, &cfg, &cbs) == 0)
    rmx__shm_listener_close(l, NULL);
}

static void run_chan(int polling)
{
  static side_t s;
  char name[64];
  rmx_shm_listener_t l;
  memset(&s, 0, sizeof(s));
  s.polling = polling;
  s.ch.data = &s;
  snprintf(name, sizeof(name), "@rmx-shm-chan-lat-%d", (int)getpid());
  uv_loop_init(&s.loop);
  if (rmx__shm_listen(&l, &s.loop, name, ch_incoming) != 0)
    die("cannot listen");
  pid_t pid = fork();
  if (pid == 0) { /* the echo side, on CPU 1, on a loop of its own */
    static side_t e;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(1);
    e.polling = polling;
    e.ch.data = &e;
    uv_loop_init(&e.loop);
    rmx_shm_chan_cfg_t cfg = {.polling = polling};
    if (rmx__shm_chan_connect(&e.ch, &e.loop, name, &cfg, &cbs) != 0)
      die("cannot connect");
    spin(&e, ch_poll);
    _exit(0);
  }
  lst_side = &s;
  initiate(polling ? "shm channel, poll" : "shm channel, sleep", &s, pid, ch_poll);
}

/* ---- TCP loopback on libuv, for comparison ---- */

static void tcp_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
  side_t *s = h->data;
  (void)want;
  *buf = uv_buf_init((char *)s->msg + s->have, (unsigned)(size - s->have));
}

static void tcp_send(side_t *s)
{
  uv_buf_t b = uv_buf_init((char *)s->msg, (unsigned)size);
  if (uv_try_write((uv_stream_t *)&s->conn, &b, 1) != (int)size)
    die("the socket had no room for a message");
}

static void tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
  side_t *s = st->data;
  (void)buf;
  if (n < 0) {
    s->done = 1;
    uv_close((uv_handle_t *)st, NULL);
    return;
  }
  if ((s->have += (size_t)n) < size)
    return;
  s->have = 0;
  if (arrived(s))
    tcp_send(s);
  else
    uv_close((uv_handle_t *)st, NULL);
}

static void tcp_start(side_t *s)
{
  uv_tcp_nodelay(&s->conn, 1);
  s->conn.data = s;
  uv_read_start((uv_stream_t *)&s->conn, tcp_alloc, tcp_read);
  if (s->initiator) {
    s->t0 = now_ns();
    tcp_send(s);
  }
}

static void tcp_incoming(uv_stream_t *l, int status)
{
  side_t *s = l->data;
  uv_tcp_init(&s->loop, &s->conn);
  if (status != 0 || uv_accept(l, (uv_stream_t *)&s->conn) != 0)
    die("accept");
  uv_close((uv_handle_t *)l, NULL);
  tcp_start(s);
}

static void tcp_connected(uv_connect_t *req, int status)
{
  if (status != 0)
    die("connect");
  tcp_start(req->data);
}

static void run_tcp(int polling)
{
  static side_t s;
  struct sockaddr_in sa;
  int len = sizeof(sa);
  memset(&s, 0, sizeof(s));
  s.polling = polling;
  uv_loop_init(&s.loop);
  uv_tcp_init(&s.loop, &s.tcp);
  s.tcp.data = &s;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  if (uv_tcp_bind(&s.tcp, (struct sockaddr *)&sa, 0) != 0 ||
      uv_listen((uv_stream_t *)&s.tcp, 1, tcp_incoming) != 0 ||
      uv_tcp_getsockname(&s.tcp, (struct sockaddr *)&sa, &len) != 0)
    die("cannot listen on TCP");
  pid_t pid = fork();
  if (pid == 0) {
    static side_t e;
    uv_connect_t req;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(1);
    e.polling = polling;
    uv_loop_init(&e.loop);
    uv_tcp_init(&e.loop, &e.conn);
    req.data = &e;
    if (uv_tcp_connect(&req, &e.conn, (struct sockaddr *)&sa, tcp_connected) != 0)
      die("cannot connect over TCP");
    spin(&e, NULL);
    _exit(0);
  }
  initiate(polling ? "tcp loopback, poll" : "tcp loopback, sleep", &s, pid, NULL);
}

int main(int argc, char **argv)
{
  const char *mode = "both";
  int o;
  while ((o = getopt(argc, argv, "n:s:k:m:")) != -1) {
    if (o == 'n')
      n_msgs = atol(optarg);
    else if (o == 's')
      size = (size_t)atol(optarg);
    else if (o == 'k')
      every = atoi(optarg);
    else if (o == 'm')
      mode = optarg;
    else
      return 2;
  }
  if (n_msgs < 1 || size < 1 || size > 4096 || every < 1)
    die("-n at least 1, -s from 1 to 4096, -k at least 1");
  warm = n_msgs / 10 + 100;
  for (int polling = 0; polling < 2; polling++) {
    if (strcmp(mode, "both") != 0 && strcmp(mode, polling ? "poll" : "sleep") != 0)
      continue;
    run_chan(polling);
    run_tcp(polling);
  }
  return 0;
}
