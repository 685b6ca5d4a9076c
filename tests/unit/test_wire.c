/* SPDX-License-Identifier: BSD-3-Clause */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "rmx_int.h"

static void hello_round_trip(void **state)
{
  rmx_wire_hello_t in = {.magic = RMX_WIRE_MAGIC, .version = RMX_WIRE_VERSION, .eager_size = 8192,
                         .rx_depth = 64, .max_msg = 1ull << 36, .silence_ms = 4000, .rma_window = 64}, out;
  uint8_t buf[RMX_WIRE_HELLO_LEN];
  rmx__wire_hello_encode(&in, buf);
  assert_int_equal(rmx__wire_hello_decode(buf, sizeof(buf), &out), 0);
  assert_int_equal(out.eager_size, 8192);
  assert_int_equal(out.rx_depth, 64);
  assert_true(out.max_msg == 1ull << 36);
  /* Little-endian on the wire whatever the host. */
  assert_int_equal(buf[0], 'R');
  assert_int_equal(buf[3], '1');
}

static void hello_rejects_strangers(void **state)
{
  rmx_wire_hello_t h = {.magic = RMX_WIRE_MAGIC, .version = RMX_WIRE_VERSION}, out;
  uint8_t buf[RMX_WIRE_HELLO_LEN];
  rmx__wire_hello_encode(&h, buf);
  for (size_t n = 0; n < sizeof(buf); n++) /* every truncation */
    assert_int_not_equal(rmx__wire_hello_decode(buf, n, &out), 0);
  buf[0] ^= 1;
  assert_int_equal(rmx__wire_hello_decode(buf, sizeof(buf), &out), RMX_EPROTO);
  buf[0] ^= 1;
  h.version = RMX_WIRE_VERSION + 1;
  rmx__wire_hello_encode(&h, buf);
  assert_int_equal(rmx__wire_hello_decode(buf, sizeof(buf), &out), RMX_EVERSION);
  assert_int_equal(rmx__wire_hello_decode("GET / HTTP/1.1\r\n", 16, &out), RMX_EPROTO);
}

/* docs/protocol.md, "Versions and features". */
static void versions_agree_on_the_highest_common(void **state)
{
  uint16_t v;
  uint32_t f;
  rmx_wire_range_t r = {.highest = RMX_WIRE_VERSION, .features = RMX_FEAT_NOTIFY}, back;
  uint8_t buf[RMX_WIRE_RANGE_LEN], zeros[RMX_WIRE_RANGE_LEN] = {0};
  rmx__wire_range_encode(&r, buf);
  assert_int_equal(rmx__wire_range_decode(buf, sizeof(buf), &back), 1);
  assert_int_equal(back.highest, RMX_WIRE_VERSION);
  assert_int_equal(back.features, RMX_FEAT_NOTIFY);
  /* absent: rdma_cm's zero padding, or too short */
  assert_int_equal(rmx__wire_range_decode(zeros, sizeof(zeros), &back), 0);
  assert_int_equal(rmx__wire_range_decode(buf, sizeof(buf) - 1, &back), 0);
  /* a version-4 peer (no range): 4, with version 4's features */
  assert_int_equal(rmx__wire_version_agree(4, NULL, &v, &f), 0);
  assert_int_equal(v, 4);
  assert_int_equal(f, RMX_FEAT_NOTIFY | RMX_FEAT_RAILS);
  /* this build's own range: its highest, and the features both have */
  assert_int_equal(rmx__wire_version_agree(RMX_WIRE_VERSION_MIN, &r, &v, &f), 0);
  assert_int_equal(v, RMX_WIRE_VERSION);
  assert_int_equal(f, RMX_FEAT_NOTIFY);
  /* a later build: our highest, none of the features we do not know */
  r = (rmx_wire_range_t){.highest = RMX_WIRE_VERSION + 3, .features = 0xffffffffu};
  assert_int_equal(rmx__wire_version_agree(RMX_WIRE_VERSION, &r, &v, &f), 0);
  assert_int_equal(v, RMX_WIRE_VERSION);
  assert_int_equal(f, RMX_FEAT_ALL);
  /* an earlier lowest whose range reaches ours */
  r.highest = RMX_WIRE_VERSION_MIN;
  assert_int_equal(rmx__wire_version_agree(RMX_WIRE_VERSION_MIN - 1, &r, &v, &f), 0);
  assert_int_equal(v, RMX_WIRE_VERSION_MIN);
  /* ranges that do not meet, from below */
  assert_int_equal(rmx__wire_version_agree(RMX_WIRE_VERSION_MIN - 1, NULL, &v, &f), RMX_EVERSION);
  r.highest = RMX_WIRE_VERSION_MIN - 1;
  assert_int_equal(rmx__wire_version_agree(RMX_WIRE_VERSION_MIN - 2, &r, &v, &f), RMX_EVERSION);
  /* and from above: the decoder refuses a lowest past our highest */
  rmx_wire_hello_t h = {.magic = RMX_WIRE_MAGIC, .version = RMX_WIRE_VERSION}, out;
  uint8_t hb[RMX_WIRE_HELLO_LEN];
  rmx__wire_hello_encode(&h, hb);
  assert_int_equal(rmx__wire_hello_decode(hb, sizeof(hb), &out), 0);
  h.version = RMX_WIRE_VERSION + 1;
  rmx__wire_hello_encode(&h, hb);
  assert_int_equal(rmx__wire_hello_decode(hb, sizeof(hb), &out), RMX_EVERSION);
}

static void frames_round_trip(void **state)
{
  uint8_t buf[64];
  rmx_frame_t f;
  const char *why;

  size_t n = rmx__wire_hdr_encode(buf, RMX_FR_DATA, 7, 5);
  memcpy(buf + n, "hello", 5);
  assert_int_equal(rmx__wire_decode(buf, n + 5, &f, &why), 0);
  assert_int_equal(f.type, RMX_FR_DATA);
  assert_int_equal(f.credits, 7);
  assert_int_equal(f.payload_len, 5);
  assert_memory_equal(f.payload, "hello", 5);

  rmx_wire_rts_t rts = {.id = 9, .addr = 0x7fff00001000ull, .size = 1ull << 33, .rkey = 0xabcdef};
  n = rmx__wire_rts_encode(buf, 65535, &rts);
  assert_int_equal(rmx__wire_decode(buf, n, &f, &why), 0);
  assert_int_equal(f.type, RMX_FR_RTS);
  assert_int_equal(f.credits, 65535);
  assert_true(f.u.rts.addr == rts.addr && f.u.rts.size == rts.size && f.u.rts.rkey == rts.rkey);

  rmx_wire_fin_t fin = {.id = 9, .status = RMX_EACCES};
  n = rmx__wire_fin_encode(buf, 0, &fin);
  assert_int_equal(rmx__wire_decode(buf, n, &f, &why), 0);
  assert_int_equal(f.u.fin.status, RMX_EACCES);

  n = rmx__wire_hdr_encode(buf, RMX_FR_DATA, 0, 0); /* a 0-byte message */
  assert_int_equal(rmx__wire_decode(buf, n, &f, &why), 0);
  assert_int_equal(f.payload_len, 0);
}

static void frames_reject_malformed(void **state)
{
  uint8_t buf[64];
  rmx_frame_t f;
  const char *why = NULL;
  rmx_wire_rts_t rts = {0};
  size_t n = rmx__wire_rts_encode(buf, 0, &rts);

  for (size_t i = 0; i < n; i++) /* every truncation of a whole frame */
    assert_int_equal(rmx__wire_decode(buf, i, &f, &why), RMX_EPROTO);
  assert_non_null(why);
  /* more bytes than the header claims */
  assert_int_equal(rmx__wire_decode(buf, n + 1, &f, &why), RMX_EPROTO);

  /* a length field claiming more than was received (oversized) */
  rmx__wire_hdr_encode(buf, RMX_FR_DATA, 0, 0xffffffffu);
  assert_int_equal(rmx__wire_decode(buf, 16, &f, &why), RMX_EPROTO);

  /* unknown types */
  rmx__wire_hdr_encode(buf, 0, 0, 0);
  assert_int_equal(rmx__wire_decode(buf, RMX_WIRE_HDR_LEN, &f, &why), RMX_EPROTO);
  rmx__wire_hdr_encode(buf, RMX_FR_TYPE_MAX_ + 1, 0, 0);
  assert_int_equal(rmx__wire_decode(buf, RMX_WIRE_HDR_LEN, &f, &why), RMX_EPROTO);

  /* a control frame with a body it should not have */
  rmx__wire_hdr_encode(buf, RMX_FR_CREDIT, 0, 4);
  assert_int_equal(rmx__wire_decode(buf, RMX_WIRE_HDR_LEN + 4, &f, &why), RMX_EPROTO);
  rmx__wire_hdr_encode(buf, RMX_FR_FIN, 0, 8);
  assert_int_equal(rmx__wire_decode(buf, RMX_WIRE_HDR_LEN + 8, &f, &why), RMX_EPROTO);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(hello_round_trip),
    cmocka_unit_test(hello_rejects_strangers),
    cmocka_unit_test(versions_agree_on_the_highest_common),
    cmocka_unit_test(frames_round_trip),
    cmocka_unit_test(frames_reject_malformed),
  };
  return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
