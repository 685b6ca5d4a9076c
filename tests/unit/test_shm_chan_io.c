/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory channel once set up (transport/shm/chan.c), both ends
 * on one loop: a writer stopped by a full ring is woken by writable once
 * room comes, sleeping and polling (and a polling writer costs the reader
 * no doorbell); a reader switched between polling and sleeping; a close delivers every byte written before the peer's
 * end, even to a reader that never polls; a peer that scribbles on the
 * shared indices ends the channel with RMX_EPROTO (its peer then sees
 * RMX_ECONNRESET), whatever it writes, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "shm_chan_test.h"

static void want_why(const side_t *s, const char *part)
{
  if (!strstr(s->why, part))
    fail_msg("ended for \"%s\", not \"%s\"", s->why, part);
}

/* A loop turn, and a poll of each polling side. */
static void turn(pair_t *p)
{
  uv_run(&p->loop, UV_RUN_NOWAIT);
  if (p->l.ch.cfg.polling)
    rmx__shm_chan_poll(&p->l.ch);
  if (p->c.ch.cfg.polling)
    rmx__shm_chan_poll(&p->c.ch);
}

static void blocked_writer(int polling)
{
  int before = open_fds();
  char name[128];
  pair_t p = {0};
  p.ccfg.polling = polling;
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  uint64_t pos = 0;
  ssize_t k;
  while ((k = side_write(&p.c, &pos, 5000)) == 5000)
    ;
  assert_true(k >= 0 && k < 5000);
  assert_int_equal(pos, RMX_SHM_RING_DEFAULT); /* the ring is full */
  assert_int_equal(side_write(&p.c, &pos, 100), 0);
  for (int i = 0; i < 20; i++)
    turn(&p);
  assert_int_equal(p.c.writable, 0); /* the reader took nothing: no room */
  assert_true(p.l.readable >= 1);
  /* the reader takes 1000 bytes: the writer hears of it once */
  struct iovec sp[2];
  assert_int_equal(rmx__shm_chan_peek(&p.l.ch, sp), RMX_SHM_RING_DEFAULT);
  assert_true(shm_stream_ok(0, sp[0].iov_base, 1000));
  assert_int_equal(rmx__shm_chan_consume(&p.l.ch, 1000), 0);
  while (!p.c.writable)
    turn(&p);
  for (int i = 0; i < 20; i++)
    turn(&p);
  assert_int_equal(p.c.writable, 1);
  assert_int_equal(side_write(&p.c, &pos, 5000), 1000); /* the room that came */
  /* a sleeping writer armed once and was rung once; a polling one never
   * armed, and the reader made no system call for it */
  assert_int_equal(p.l.ch.rx.wakes, polling ? 0 : 1);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
  assert_int_equal(open_fds(), before);
}

static void a_blocked_writer_is_woken(void **state)
{
  blocked_writer(0);
  blocked_writer(1);
}

/* A polling reader hears of nothing until it polls; switched to sleeping
 * it arms and hears of what is there, then of what comes; switched back
 * it polls again. */
static void a_reader_switches_between_polling_and_sleeping(void **state)
{
  char name[128];
  pair_t p = {0};
  p.lcfg.polling = 1;
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  p.l.consume = 1;
  uint64_t pos = 0;
  assert_int_equal(side_write(&p.c, &pos, 100), 100);
  run_turns(&p.loop, 10);
  assert_int_equal(p.l.readable, 0);
  rmx__shm_chan_set_polling(&p.l.ch, 0);
  run_turns(&p.loop, 10);
  assert_int_equal(p.l.readable, 1);
  assert_int_equal(side_write(&p.c, &pos, 100), 100);
  while (p.l.got < 200)
    uv_run(&p.loop, UV_RUN_ONCE); /* woken by its doorbell */
  rmx__shm_chan_set_polling(&p.l.ch, 1);
  assert_int_equal(side_write(&p.c, &pos, 100), 100);
  run_turns(&p.loop, 10);
  assert_int_equal(p.l.got, 200);
  assert_int_equal(rmx__shm_chan_poll(&p.l.ch), 1);
  assert_int_equal(p.l.got, 300);
  assert_int_equal(rmx__shm_chan_poll(&p.l.ch), 0); /* nothing new */
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
}

/* The writer fills the ring and closes at once; the reader gets it all,
 * then its end, 0. A polling reader that never polls gets it too. */
static void close_delivers(int reader_polls)
{
  int before = open_fds();
  char name[128];
  pair_t p = {0};
  p.lcfg.polling = reader_polls;
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 0)), 0);
  p.l.consume = 1;
  uint64_t pos = 0;
  for (int i = 0; i < 5 && !reader_polls; i++) { /* some of it read as it comes */
    assert_int_equal(side_write(&p.c, &pos, 10000), 10000);
    while (p.l.got < pos)
      uv_run(&p.loop, UV_RUN_ONCE);
  }
  while (side_write(&p.c, &pos, 65536) > 0)
    ;
  assert_true(pos - p.l.got == RMX_SHM_RING_DEFAULT); /* a full ring unread */
  rmx__shm_chan_close(&p.c.ch);
  run_until(&p.loop, &p.l.ends, 1);
  assert_int_equal(p.l.status, 0);
  want_why(&p.l, "the peer closed");
  assert_int_equal(p.l.got, pos); /* every byte, before the end */
  run_turns(&p.loop, 10);
  pair_close(&p);
  assert_int_equal(p.c.status, RMX_ECANCELED);
  assert_int_equal(p.l.ends + p.c.ends + p.l.closed + p.c.closed, 4);
  assert_false(p.l.bad | p.c.bad); /* nothing after an end or a close */
  assert_int_equal(open_fds(), before);
}

static void a_close_delivers_every_byte_then_the_end(void **state)
{
  close_delivers(0);
  close_delivers(1);
}

/* The shared words of ring r in the listener's mapping: ring.h's layout. */
static uint32_t *word(pair_t *p, int r, int which)
{
  static const unsigned at[] = {0, RMX_SHM_LINE, 2 * RMX_SHM_LINE, 2 * RMX_SHM_LINE + 4};
  rmx_shm_seg_t *s = &p->l.ch.seg;
  return (uint32_t *)(s->base + s->lay.ctrl_off[r] + at[which]);
}
enum { W_HEAD_, W_TAIL_, W_RD_, W_WR_ };

static void peer_sees_a_reset(pair_t *p, side_t *other)
{
  run_until(&p->loop, &other->ends, 1);
  assert_int_equal(other->status, RMX_ECONNRESET);
  want_why(other, "without a bye");
}

static void scribbled_head(int polling)
{
  char name[128];
  pair_t p = {0};
  p.lcfg.polling = polling;
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  /* the connector's ring (1): its head, past a lap of what the listener read */
  *word(&p, 1, W_HEAD_) = p.l.ch.rx.pos + p.l.ch.rx.cap + 1;
  if (polling) {
    rmx__shm_chan_poll(&p.l.ch);
  } else {
    rmx__shm_doorbell_ring(p.l.ch.seg.bell[0]); /* as a peer would, to wake it */
    run_turns(&p.loop, 10); /* the doorbell is readable now: the next turn sees it */
  }
  assert_int_equal(p.l.ends, 1);
  assert_int_equal(p.l.status, RMX_EPROTO);
  want_why(&p.l, "broke the ring it writes");
  peer_sees_a_reset(&p, &p.c);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
}

static void scribbled_tail(void)
{
  char name[128];
  pair_t p = {0};
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  uint64_t pos = 0;
  assert_int_equal(side_write(&p.c, &pos, 1000), 1000);
  *word(&p, 1, W_TAIL_) = 5000; /* consumed more than was written */
  assert_int_equal(side_write(&p.c, &pos, 16000), RMX_EPROTO);
  assert_int_equal(p.c.ends, 0); /* from the loop, not from inside the write */
  run_until(&p.loop, &p.c.ends, 1);
  assert_int_equal(p.c.status, RMX_EPROTO);
  want_why(&p.c, "broke the ring it reads");
  assert_int_equal(side_write(&p.c, &pos, 10), RMX_ENOTCONN);
  peer_sees_a_reset(&p, &p.l);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);

  /* closed before the loop raised it: the end still names the cause */
  pair_t q = {0};
  assert_int_equal(pair_open(&q, test_name(name, sizeof(name), 1)), 0);
  pos = 0;
  assert_int_equal(side_write(&q.l, &pos, 1000), 1000);
  *word(&q, 0, W_TAIL_) = 5000; /* the listener's ring: consumed more than was written */
  assert_int_equal(side_write(&q.l, &pos, 16000), RMX_EPROTO);
  rmx__shm_chan_close(&q.l.ch);
  run_until(&q.loop, &q.l.ends, 1);
  assert_int_equal(q.l.status, RMX_EPROTO);
  peer_sees_a_reset(&q, &q.c); /* and no bye went to the peer */
  pair_close(&q);
  assert_false(q.l.bad | q.c.bad);
}

/* Random words into random places while bytes flow both ways. */
static void scribbled_at_random(uint64_t seed)
{
  char name[128];
  pair_t p = {0};
  assert_int_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  p.l.consume = p.c.consume = 2; /* the bytes are the peer's: not checked */
  uint64_t lpos = 0, cpos = 0, rng = seed;
  for (int round = 0; round < 100000 && !(p.l.ends && p.c.ends); round++) {
    side_write(&p.c, &cpos, shm_rand(&rng) % 3000);
    side_write(&p.l, &lpos, shm_rand(&rng) % 3000);
    uint64_t r = shm_rand(&rng);
    uint32_t *w = word(&p, (int)(r & 1), (int)((r >> 1) & 3));
    uint32_t v = (uint32_t)(r >> 32);
    if ((r >> 3) % 3 == 0) /* near the truth as often as anywhere */
      *w += (uint32_t)(r >> 40) % 64 - 32;
    else if ((r >> 3) % 3 == 1)
      *w = v;
    if (r >> 63)
      rmx__shm_doorbell_ring(p.l.ch.seg.bell[r >> 62 & 1]);
    uv_run(&p.loop, UV_RUN_NOWAIT);
  }
  assert_int_equal(p.l.ends, 1);
  assert_int_equal(p.c.ends, 1);
  assert_true(p.l.status == RMX_EPROTO || p.c.status == RMX_EPROTO);
  assert_true(p.l.status == RMX_EPROTO || p.l.status == RMX_ECONNRESET);
  assert_true(p.c.status == RMX_EPROTO || p.c.status == RMX_ECONNRESET);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
}

static void a_scribbling_peer_ends_the_channel(void **state)
{
  int before = open_fds();
  scribbled_head(0);
  scribbled_head(1);
  scribbled_tail();
  for (uint64_t seed = 1; seed <= 20; seed++)
    scribbled_at_random(seed * 0x9e3779b97f4a7c15ull);
  assert_int_equal(open_fds(), before);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_blocked_writer_is_woken),
    cmocka_unit_test(a_reader_switches_between_polling_and_sleeping),
    cmocka_unit_test(a_close_delivers_every_byte_then_the_end),
    cmocka_unit_test(a_scribbling_peer_ends_the_channel),
  };
  libuv_warm();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
