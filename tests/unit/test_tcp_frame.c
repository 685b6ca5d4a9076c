/* The TCP stream framing's header checks (transport/tcp/frame.c) against
 * docs/protocol.md: which kinds each connection state takes, the body
 * lengths, and the flags and reserved bits that must be zero. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../transport/tcp/frame.h"

static const char *check(tc_state_t st, uint8_t kind, uint32_t blen)
{
  uint8_t h[TF_HDR], k;
  uint32_t b;
  tf_hdr(h, blen, kind);
  const char *why = tf_check(h, st, 8192, &k, &b);
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
  case TF_MSG: return 100;
  case TF_RD_REQ: return TF_RDREQ_LEN;
  case TF_RD_RESP: return TF_RESP_SUB + 10;
  case TF_WR_REQ: return TF_WRREQ_SUB + 10;
  case TF_WR_RESP: return TF_RESP_SUB;
  case TF_AT_REQ: return TF_ATREQ_LEN;
  default: return TF_ATRESP_LEN;
  }
}

static void each_kind_only_in_its_states(void **state)
{
  for (int st = TC_CONNECTING; st <= TC_REJECTING; st++)
    for (uint8_t kind = TF_HELLO; kind <= TF_AT_RESP; kind++) {
      int allowed = kind == TF_HELLO      ? st == TC_WAIT_HELLO
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
  assert_non_null(check(TC_UP, TF_MSG, 8193)); /* over the receive buffers */
  assert_null(check(TC_UP, TF_MSG, 8192));
  assert_non_null(check(TC_UP, TF_RD_REQ, TF_RDREQ_LEN + 1));
  assert_non_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB - 1));
  assert_null(check(TC_UP, TF_RD_RESP, TF_RESP_SUB)); /* a 0-byte read, or an error */
  assert_non_null(check(TC_UP, TF_WR_REQ, TF_WRREQ_SUB - 1));
  assert_non_null(check(TC_UP, TF_WR_RESP, TF_RESP_SUB + 1));
  assert_non_null(check(TC_UP, TF_AT_REQ, TF_ATREQ_LEN - 1));
  assert_non_null(check(TC_UP, TF_AT_RESP, TF_ATRESP_LEN + 1));
}

static void unknown_kinds_and_set_bits_are_refused(void **state)
{
  assert_non_null(check(TC_UP, 0, 0));
  assert_non_null(check(TC_UP, TF_AT_RESP + 1, 0));
  assert_non_null(check(TC_WAIT_HELLO, 0x47, 0x20544547)); /* "GET " */
  uint8_t h[TF_HDR], k;
  uint32_t b;
  for (int i = 5; i < TF_HDR; i++) {
    tf_hdr(h, 100, TF_MSG);
    h[i] = 1;
    assert_non_null(tf_check(h, TC_UP, 8192, &k, &b));
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(each_kind_only_in_its_states),
    cmocka_unit_test(lengths_are_checked),
    cmocka_unit_test(unknown_kinds_and_set_bits_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
