/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory channel between two loops (transport/shm/chan.c):
 * 100 MB each way at once, in gather lists of random shape, read as a
 * frame engine would (a header copied out, the rest taken from the spans
 * in place, part of a frame sometimes left for later), both sides
 * sleeping on their doorbells or both polling (then no doorbell is ever
 * rung); the checksums and counts of both directions agree and each side
 * ends once. And a peer process killed with SIGKILL is seen at once
 * through the Unix socket, RMX_ECONNRESET, no keepalive involved. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "shm_chan_test.h"

#define TOTAL (100ull << 20)
#define PAT_LEN ((1u << 20) + 4099) /* not a multiple of any ring size */

static uint8_t pat[PAT_LEN]; /* byte p of each stream is pat[p % PAT_LEN] */

typedef struct peer {
  uv_loop_t loop;
  rmx_shm_chan_t ch;
  rmx_shm_listener_t lst;
  int polling;
  const char *name;
  uint64_t sent, got, fnv_sent, fnv_got, rng, wakes;
  int ready, ends, closed, writables, status, bad;
  char why[320];
} peer_t;

static void done_check(peer_t *p)
{
  if (p->sent == TOTAL && p->got == TOTAL)
    rmx__shm_chan_close(&p->ch); /* the peer reads what is left, then ends */
}

static void pump(peer_t *p)
{
  while (p->sent < TOTAL) {
    struct iovec v[3];
    int n = 1 + (int)(shm_rand(&p->rng) % 3);
    size_t offered = 0;
    uint64_t at = p->sent;
    for (int i = 0; i < n; i++) {
      size_t want = 1 + shm_rand(&p->rng) % 40000, start = at % PAT_LEN;
      if (want > PAT_LEN - start)
        want = PAT_LEN - start;
      if (want > TOTAL - at)
        want = (size_t)(TOTAL - at);
      v[i] = (struct iovec){pat + start, want};
      offered += want;
      at += want;
    }
    ssize_t k = rmx__shm_chan_write(&p->ch, v, n);
    if (k < 0) {
      p->bad |= 1;
      return;
    }
    for (int i = 0, left = (int)k; i < n && left > 0; i++) {
      size_t take = v[i].iov_len < (size_t)left ? v[i].iov_len : (size_t)left;
      p->fnv_sent = shm_fnv(p->fnv_sent, v[i].iov_base, take);
      left -= (int)take;
    }
    p->sent += (uint64_t)k;
    if ((size_t)k < offered)
      break; /* writable comes when there is room */
  }
  done_check(p);
}

/* n bytes at off of the spans: checked against the stream and summed. */
static void take(peer_t *p, const struct iovec sp[2], size_t off, size_t n)
{
  for (int i = 0; i < 2 && n > 0; i++) {
    if (off >= sp[i].iov_len) {
      off -= sp[i].iov_len;
      continue;
    }
    size_t k = sp[i].iov_len - off < n ? sp[i].iov_len - off : n;
    const uint8_t *b = (const uint8_t *)sp[i].iov_base + off;
    for (size_t done = 0; done < k;) { /* the pattern wraps every PAT_LEN bytes */
      size_t start = (p->got + done) % PAT_LEN, run = k - done;
      if (run > PAT_LEN - start)
        run = PAT_LEN - start;
      if (memcmp(b + done, pat + start, run) != 0)
        p->bad |= 2;
      done += run;
    }
    p->fnv_got = shm_fnv(p->fnv_got, b, k);
    p->got += k;
    n -= k;
    off = 0;
  }
}

static void on_readable(rmx_shm_chan_t *ch)
{
  peer_t *p = ch->data;
  struct iovec sp[2];
  ssize_t avail = rmx__shm_chan_peek(ch, sp);
  if (avail <= 0)
    return;
  size_t off = 0;
  while (off < (size_t)avail) {
    size_t left = (size_t)avail - off, n = 1 + shm_rand(&p->rng) % 20000;
    if (n > left)
      n = left;
    if (n == left && n < 8 && p->got + n < TOTAL && (shm_rand(&p->rng) & 1))
      break; /* part of a header: wait for the rest */
    uint8_t hdr[8]; /* what a frame engine parses is copied out once */
    size_t h = n < 8 ? n : 8;
    if (rmx__shm_chan_copy(ch, off, hdr, h) != 0)
      p->bad |= 4;
    for (size_t i = 0; i < h; i++)
      if (hdr[i] != pat[(p->got + i) % PAT_LEN])
        p->bad |= 8;
    take(p, sp, off, n);
    off += n;
  }
  if (rmx__shm_chan_consume(ch, off) != 0)
    p->bad |= 16;
  done_check(p);
}

static void on_ready(rmx_shm_chan_t *ch)
{
  peer_t *p = ch->data;
  p->ready++;
  pump(p);
}

static void on_writable(rmx_shm_chan_t *ch)
{
  peer_t *p = ch->data;
  p->writables++;
  pump(p);
}

static void on_end(rmx_shm_chan_t *ch, int status, const char *why)
{
  peer_t *p = ch->data;
  p->ends++;
  p->status = status;
  p->wakes = ch->tx.wakes + ch->rx.wakes;
  snprintf(p->why, sizeof(p->why), "%s", why);
  rmx__shm_chan_close(ch);
}

static void on_closed(rmx_shm_chan_t *ch)
{
  ((peer_t *)ch->data)->closed++;
}

static const rmx_shm_chan_cbs_t peer_cbs = {on_ready, on_readable, on_writable, on_end, on_closed,
                                            NULL};

static void lst_closed(rmx_shm_listener_t *l) { (void)l; }

static void incoming(rmx_shm_listener_t *l)
{
  peer_t *p = l->data;
  rmx_shm_chan_cfg_t cfg = {.polling = p->polling};
  if (rmx__shm_chan_accept(&p->ch, l, &cfg, &peer_cbs) == 0)
    rmx__shm_listener_close(l, lst_closed); /* one peer */
}

static void run_peer(peer_t *p)
{
  while (p->polling && !p->closed) {
    rmx__shm_chan_poll(&p->ch);
    uv_run(&p->loop, UV_RUN_NOWAIT);
  }
  uv_run(&p->loop, UV_RUN_DEFAULT);
  uv_loop_close(&p->loop);
}

static void *connector(void *arg)
{
  peer_t *p = arg;
  rmx_shm_chan_cfg_t cfg = {.polling = p->polling};
  if (rmx__shm_chan_connect(&p->ch, &p->loop, p->name, &cfg, &peer_cbs) != 0)
    p->bad |= 32;
  else
    run_peer(p);
  return NULL;
}

static void stream_both_ways(int polling)
{
  int before = open_fds();
  char name[128];
  static peer_t a, b; /* a listens on the test's thread, b connects from another */
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  a.ch.data = &a, b.ch.data = &b, a.lst.data = &a;
  a.polling = b.polling = polling;
  a.rng = 1, b.rng = 2;
  a.fnv_sent = a.fnv_got = b.fnv_sent = b.fnv_got = SHM_FNV_INIT;
  b.name = test_name(name, sizeof(name), 1);
  uv_loop_init(&a.loop);
  uv_loop_init(&b.loop);
  assert_int_equal(rmx__shm_listen(&a.lst, &a.loop, name, incoming), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, connector, &b), 0);
  run_peer(&a);
  pthread_join(t, NULL);
  peer_t *s[2] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    peer_t *p = s[i], *o = s[1 - i];
    print_message("  %s, side %d: %s; %d writables, %llu doorbells rung\n",
                  polling ? "polling" : "sleeping", i, p->why, p->writables,
                  (unsigned long long)p->wakes);
    assert_int_equal(p->bad, 0);
    assert_int_equal(p->ready + p->ends + p->closed, 3);
    assert_true(p->status == 0 || p->status == RMX_ECANCELED);
    assert_true(p->sent == TOTAL && p->got == TOTAL);
    assert_true(p->fnv_got == o->fnv_sent);
    if (polling)
      assert_int_equal(p->wakes, 0); /* nobody ever slept: no system call to wake it */
  }
  assert_int_equal(open_fds(), before);
}

static void a_hundred_megabytes_each_way_sleeping(void **state)
{
  stream_both_ways(0);
}

static void a_hundred_megabytes_each_way_polling(void **state)
{
  stream_both_ways(1);
}

/* ---- a killed peer ---- */

static void a_killed_peer_is_seen_at_once(void **state)
{
  int before = open_fds();
  char name[128];
  pair_t p = {0};
  uv_loop_init(&p.loop);
  side_init(&p.l);
  p.lst.data = &p;
  assert_int_equal(rmx__shm_listen(&p.lst, &p.loop, test_name(name, sizeof(name), 1),
                                   pair_incoming), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* the peer: its own loop; writes 100 bytes, then reads nothing */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uv_loop_t loop;
    side_t s;
    uint64_t pos = 0;
    side_init(&s);
    uv_loop_init(&loop);
    if (rmx__shm_chan_connect(&s.ch, &loop, name, NULL, &side_cbs) != 0)
      _exit(1);
    while (!s.ready && !s.ends)
      uv_run(&loop, UV_RUN_ONCE);
    if (!s.ready || side_write(&s, &pos, 100) != 100)
      _exit(1);
    uv_run(&loop, UV_RUN_DEFAULT);
    _exit(1);
  }
  p.l.consume = 1;
  while (p.l.got < 100 && !p.l.ends)
    uv_run(&p.loop, UV_RUN_ONCE);
  assert_int_equal(p.l.got, 100);
  uint64_t pos = 0;
  while (side_write(&p.l, &pos, 65536) == 65536)
    ; /* and our ring to it full: a writer waiting for room */
  kill(pid, SIGKILL);
  run_until(&p.loop, &p.l.ends, 1);
  assert_int_equal(p.l.status, RMX_ECONNRESET);
  if (!strstr(p.l.why, "without a bye"))
    fail_msg("ended for \"%s\"", p.l.why);
  assert_int_equal(p.l.writable, 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  pair_close(&p);
  assert_false(p.l.bad);
  assert_int_equal(open_fds(), before);
}

int main(void)
{
  uint64_t r = 7;
  for (size_t i = 0; i < PAT_LEN; i++)
    pat[i] = (uint8_t)shm_rand(&r);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_hundred_megabytes_each_way_sleeping),
    cmocka_unit_test(a_hundred_megabytes_each_way_polling),
    cmocka_unit_test(a_killed_peer_is_seen_at_once),
  };
  libuv_warm();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
