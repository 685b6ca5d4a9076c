/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP stream framing's header checks (transport/tcp/frame.c) against
 * docs/protocol.md: which kinds each connection state takes, the body
 * lengths, the flags and reserved bits that must be zero, and rmx frames
 * carried with their header's fields in the stream header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../transport/tcp/frame.h"

static const char *check(tc_state_t st, uint8_t kind, uint32_t blen)
{
  uint8_t h[TF_HDR], k;
  uint32_t b;
  rmx__tf_hdr(h, blen, kind);
  const char *why = rmx__tf_check(h, st, 8192, &k, &b);
  assert_int_equal(k, kind);
  assert_int_equal(b, blen);
  return why;
}

/* The body length each kind must have (0: any in its range). */
static uint32_t good_len(uint8_t kind)
{
  switch (kind) {
  case TF_HELLO: case TF_HELLO_ACK: return 32;
  case TF_REJECT: return 4;
  case TF_RD_REQ: return TF_RDREQ_LEN;
  case TF_RD_RESP: return TF_RESP_SUB + 10;
  case TF_WR_REQ: return TF_WRREQ_SUB + 10;
  case TF_WR_RESP: return TF_RESP_SUB;
  case TF_AT_REQ: return TF_ATREQ_LEN;
  case TF_RD_DIR: return TF_RDDIR_LEN;
  case TF_WR_DIR: return TF_WRDIR_LEN;
  case TF_RD_DONE: return TF_RDDONE_LEN;
  default: return TF_ATRESP_LEN;
  }
}

static void each_kind_only_in_its_states(void **state)
{
  for (int st = TC_CONNECTING; st <= TC_REJECTING; st++)
    for (uint8_t kind = TF_HELLO; kind <= TF_RD_DONE; kind++) {
      int allowed = kind == 4             ? 0 /* version 2's MSG */
                    : kind == TF_HELLO    ? st == TC_WAIT_HELLO
                    : kind == TF_HELLO_ACK || kind == TF_REJECT ? st == TC_HELLO_SENT
                                                                : st == TC_UP;
      const char *why = check((tc_state_t)st, kind, good_len(kind));
      if (allowed)
        assert_null(why);
      else
        assert_non_null(why);
    }
}

static void lengths_are_checked(void **state)
{
  assert_non_null(check(TC_WAIT_HELLO, TF_HELLO, TF_HELLO_MAX + 1));
  assert_null(check(TC_WAIT_HELLO, TF_HELLO, TF_HELLO_MAX));
  assert_non_null(check(TC_HELLO_SENT, TF_REJECT, 5));
  assert_non_null(check(TC_UP, TF_RD_REQ, TF_RDREQ_LEN + 1));
  assert_non_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB - 1));
  assert_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB)); /* a 0-byte read, or an error */
  assert_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB + TF_CHUNK)); /* one whole chunk */
  assert_non_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB + TF_CHUNK + 1));
  assert_non_null(check(TC_UP, TF_WR_REQ, TF_WRREQ_SUB - 1));
  assert_non_null(check(TC_UP, TF_WR_RESP, TF_RESP_SUB + 1));
  assert_non_null(check(TC_UP, TF_AT_REQ, TF_ATREQ_LEN - 1));
  assert_non_null(check(TC_UP, TF_AT_RESP, TF_ATRESP_LEN + 1));
  /* the direct kinds are fixed: no data follows a direct write */
  assert_non_null(check(TC_UP, TF_RD_DIR, TF_RDDIR_LEN - 1));
  assert_non_null(check(TC_UP, TF_RD_DIR, TF_RDDIR_LEN + 1));
  assert_non_null(check(TC_UP, TF_WR_DIR, TF_WRDIR_LEN + 10));
  assert_int_equal(rmx__tf_buffered(TF_WR_DIR, TF_WRDIR_LEN), TF_WRDIR_LEN);
  assert_non_null(check(TC_UP, TF_RD_DONE, TF_RDDONE_LEN - 1));
  assert_non_null(check(TC_UP, TF_RD_DONE, TF_RDDONE_LEN + 1));
}

/* Every field of the direct requests goes and comes back. */
static void direct_requests_round_trip(void **state)
{
  uint8_t buf[TF_HDR + TF_ATREQ_LEN], k;
  uint32_t blen;
  for (uint8_t kind = TF_RD_DIR; kind <= TF_WR_DIR; kind++) {
    tf_req_t r = {.id = 0x0102030405060708ull, .addr = 0x1112131415161718ull,
                  .len = 0x2122232425262728ull, .key = 0x3132333435363738ull,
                  .flags = kind == TF_WR_DIR, .imm = kind == TF_WR_DIR ? 0x41424344u : 0,
                  .from = 0x5152535455565758ull}, got;
    size_t n = rmx__tf_req_put(buf, kind, &r);
    assert_int_equal(n, TF_HDR + (kind == TF_RD_DIR ? TF_RDDIR_LEN : TF_WRDIR_LEN));
    assert_null(rmx__tf_check(buf, TC_UP, 8192, &k, &blen));
    assert_int_equal(k, kind);
    assert_int_equal(blen, n - TF_HDR);
    rmx__tf_req_get(buf + TF_HDR, kind, &got);
    assert_memory_equal(&got, &r, sizeof(r));
  }
  /* and a direct read's done: its id */
  rmx__tf_hdr(buf, TF_RDDONE_LEN, TF_RD_DONE);
  rmx__tf_done_put(buf + TF_HDR, 0x6162636465666768ull);
  assert_null(rmx__tf_check(buf, TC_UP, 8192, &k, &blen));
  assert_int_equal(k, TF_RD_DONE);
  assert_int_equal(blen, TF_RDDONE_LEN);
  assert_true(rmx__tf_done_get(buf + TF_HDR) == 0x6162636465666768ull);
}

static void unknown_kinds_and_set_bits_are_refused(void **state)
{
  assert_non_null(check(TC_UP, 0, 0));
  assert_non_null(check(TC_UP, TF_RD_DONE + 1, 0));
  uint8_t h[TF_HDR], k;
  uint32_t b;
  memcpy(h, "GET / HT", TF_HDR); /* kind 'H': an rmx frame's kind, but not first */
  assert_non_null(rmx__tf_check(h, TC_WAIT_HELLO, 8192, &k, &b));
  for (int i = 5; i < TF_HDR; i++) {
    rmx__tf_hdr(h, TF_RDREQ_LEN, TF_RD_REQ);
    h[i] = 1;
    assert_non_null(rmx__tf_check(h, TC_UP, 8192, &k, &b));
  }
  for (int kind = TF_RD_DONE + 1; kind < TF_FRAME; kind++)
    assert_non_null(check(TC_UP, (uint8_t)kind, 0));
}

/* An rmx frame's header (type, flags, credits, body length) in a stream
 * header of kind 16 + type, and back. */
static const char *frame_check(tc_state_t st, const uint8_t rmx_hdr[TF_HDR], uint32_t *blen)
{
  uint8_t h[TF_HDR], k;
  rmx__tf_frame_hdr(h, rmx_hdr);
  const char *why = rmx__tf_check(h, st, 8192, &k, blen);
  assert_int_equal(k, TF_FRAME);
  return why;
}

static void rmx_frames_carry_their_header(void **state)
{
  /* protocol.md's example: DATA, 5 bytes, 3 credits */
  const uint8_t data[TF_HDR] = {1, 0, 3, 0, 5, 0, 0, 0};
  const uint8_t wire[TF_HDR] = {5, 0, 0, 0, 0x11, 0, 3, 0};
  uint8_t h[TF_HDR], k;
  uint32_t b;
  rmx__tf_frame_hdr(h, data);
  assert_memory_equal(h, wire, TF_HDR);
  assert_null(rmx__tf_check(h, TC_UP, 8192, &k, &b));
  assert_int_equal(k, TF_FRAME);
  assert_int_equal(b, 5);
  rmx__tf_frame_unhdr(h);
  assert_memory_equal(h, data, TF_HDR);

  /* every type, flag and credit value goes through unchanged */
  const uint8_t odd[TF_HDR] = {7, 0xa5, 0x34, 0x12, 0, 0, 0, 0};
  rmx__tf_frame_hdr(h, odd);
  assert_int_equal(h[4], TF_FRAME + 7);
  rmx__tf_frame_unhdr(h);
  assert_memory_equal(h, odd, TF_HDR);

  /* the body may fill a receive buffer with the frame's header, no more */
  uint8_t big[TF_HDR] = {1, 0, 0, 0};
  big[4] = (8192 - TF_HDR) & 0xff, big[5] = (8192 - TF_HDR) >> 8;
  assert_null(frame_check(TC_UP, big, &b));
  assert_int_equal(b, 8192 - TF_HDR);
  big[4]++;
  assert_non_null(frame_check(TC_UP, big, &b));

  /* only on an established connection */
  for (int st = TC_CONNECTING; st <= TC_REJECTING; st++)
    if (st != TC_UP)
      assert_non_null(frame_check((tc_state_t)st, data, &b));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(each_kind_only_in_its_states),
    cmocka_unit_test(lengths_are_checked),
    cmocka_unit_test(direct_requests_round_trip),
    cmocka_unit_test(unknown_kinds_and_set_bits_are_refused),
    cmocka_unit_test(rmx_frames_carry_their_header),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
