/* SPDX-License-Identifier: BSD-3-Clause */
/* What the shared-memory channel tests share: one side of a channel that
 * counts its callbacks and checks their order, a pair of channels set up
 * on one loop, unique names, and the count of open fds. */
#ifndef RMX_TEST_SHM_CHAN_H
#define RMX_TEST_SHM_CHAN_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../transport/shm/chan.h"
#include "shm_test.h"

typedef struct side {
  rmx_shm_chan_t ch;
  int ready, readable, writable, ends, closed;
  int status;
  char why[320];
  int bad;          /* a callback out of order: after end or closed, or end twice */
  int consume;      /* readable consumes all: 1 checking it is the stream's next bytes, 2 not */
  uint64_t got;     /* bytes consumed so far (the stream's position) */
  uint64_t wakes;   /* doorbells this side rang, taken at its end */
  void (*on_ready)(struct side *s);
  void (*on_end)(struct side *s);
} side_t;

static inline side_t *side_of(rmx_shm_chan_t *ch)
{
  return ch->data;
}

static inline void cb_ready(rmx_shm_chan_t *ch)
{
  side_t *s = side_of(ch);
  s->bad |= s->ends || s->closed || s->ready;
  s->ready++;
  if (s->on_ready)
    s->on_ready(s);
}

/* Consume everything there is, checking it against the stream. */
static inline void side_drain(side_t *s)
{
  struct iovec sp[2];
  ssize_t n = rmx__shm_chan_peek(&s->ch, sp);
  if (n <= 0)
    return;
  for (int i = 0; i < 2; i++) {
    if (s->consume == 1 && !shm_stream_ok(s->got, sp[i].iov_base, sp[i].iov_len))
      s->bad |= 2;
    s->got += sp[i].iov_len;
  }
  if (rmx__shm_chan_consume(&s->ch, (size_t)n) != 0)
    s->bad |= 4;
}

static inline void cb_readable(rmx_shm_chan_t *ch)
{
  side_t *s = side_of(ch);
  s->bad |= s->ends || s->closed || !s->ready;
  s->readable++;
  if (s->consume)
    side_drain(s);
}

static inline void cb_writable(rmx_shm_chan_t *ch)
{
  side_t *s = side_of(ch);
  s->bad |= s->ends || s->closed || !s->ready;
  s->writable++;
}

static inline void cb_end(rmx_shm_chan_t *ch, int status, const char *why)
{
  side_t *s = side_of(ch);
  s->bad |= s->ends || s->closed;
  s->ends++;
  s->status = status;
  snprintf(s->why, sizeof(s->why), "%s", why ? why : "(null)");
  s->wakes = ch->tx.wakes + ch->rx.wakes;
  if (s->on_end)
    s->on_end(s);
}

static inline void cb_closed(rmx_shm_chan_t *ch)
{
  side_t *s = side_of(ch);
  s->bad |= s->closed || !s->ends;
  s->closed++;
}

static const rmx_shm_chan_cbs_t side_cbs = {cb_ready, cb_readable, cb_writable, cb_end, cb_closed,
                                            NULL};

static inline void side_init(side_t *s)
{
  memset(s, 0, sizeof(*s));
  s->ch.data = s;
}

/* Write the stream's next bytes, up to n; returns what the channel took. */
static inline ssize_t side_write(side_t *s, uint64_t *pos, size_t n)
{
  uint8_t buf[65536];
  if (n > sizeof(buf))
    n = sizeof(buf);
  shm_stream(*pos, buf, n);
  struct iovec v = {buf, n};
  ssize_t k = rmx__shm_chan_write(&s->ch, &v, 1);
  if (k > 0)
    *pos += (uint64_t)k;
  return k;
}

static inline void run_until(uv_loop_t *loop, const int *flag, int want)
{
  while (*flag < want)
    uv_run(loop, UV_RUN_ONCE);
}

static inline void run_turns(uv_loop_t *loop, int n)
{
  for (int i = 0; i < n; i++)
    uv_run(loop, UV_RUN_NOWAIT);
}

/* A name nobody else uses: "@..." abstract, or a file under /tmp. */
static inline const char *test_name(char *buf, size_t size, int abstract)
{
  static int n;
  snprintf(buf, size, abstract ? "@rmx-shm-test-%d-%d" : "/tmp/rmx-shm-test-%d-%d.sock",
           (int)getpid(), n++);
  return buf;
}

static inline int open_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d)
    return -1;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

/* libuv opens a pipe of its own at the first loop's init, for good: done
 * before any test counts its fds. */
static inline void libuv_warm(void)
{
  uv_loop_t loop;
  uv_loop_init(&loop);
  uv_loop_close(&loop);
}

/* A listener that accepts one peer into its side. */
typedef struct pair {
  uv_loop_t loop;
  rmx_shm_listener_t lst;
  side_t l, c; /* the accepting side and the connector */
  rmx_shm_chan_cfg_t lcfg, ccfg;
  int accepted, connected, lst_closed;
} pair_t;

static inline void pair_incoming(rmx_shm_listener_t *lst)
{
  pair_t *p = lst->data;
  if (p->accepted || rmx__shm_chan_accept(&p->l.ch, lst, &p->lcfg, &side_cbs) == 0)
    p->accepted = 1;
}

static inline void pair_lst_closed(rmx_shm_listener_t *lst)
{
  ((pair_t *)lst->data)->lst_closed = 1;
}

/* Listen on name, connect to it, and run until both sides are ready (or
 * ended). Returns 0 when both are ready. */
static inline int pair_open(pair_t *p, const char *name)
{
  uv_loop_init(&p->loop);
  side_init(&p->l);
  side_init(&p->c);
  p->accepted = p->lst_closed = 0;
  p->lst.data = p;
  if (rmx__shm_listen(&p->lst, &p->loop, name, pair_incoming) != 0)
    return -1;
  if (rmx__shm_chan_connect(&p->c.ch, &p->loop, name, &p->ccfg, &side_cbs) != 0)
    return -1;
  p->connected = 1;
  while (!(p->l.ready || p->l.ends) || !(p->c.ready || p->c.ends))
    uv_run(&p->loop, UV_RUN_ONCE);
  return p->l.ready && p->c.ready ? 0 : -1;
}

/* Close what is open and run until everything closed. */
static inline void pair_close(pair_t *p)
{
  if (p->accepted)
    rmx__shm_chan_close(&p->l.ch);
  if (p->connected)
    rmx__shm_chan_close(&p->c.ch);
  rmx__shm_listener_close(&p->lst, pair_lst_closed);
  while (!p->lst_closed || (p->connected && !p->c.closed) || (p->accepted && !p->l.closed))
    uv_run(&p->loop, UV_RUN_ONCE);
  if (uv_loop_close(&p->loop) != 0) {
    uv_run(&p->loop, UV_RUN_DEFAULT); /* handles still closing: fail, but leak nothing */
    uv_loop_close(&p->loop);
    p->l.bad |= 64;
  }
}

#endif
