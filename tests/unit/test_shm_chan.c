/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory channel's set-up (transport/shm/chan_setup.c), on one
 * loop: over a path and over an abstract name, bad names, a listener on
 * another kernel (an injected boot id), nobody listening, and fake peers
 * on both ends that send garbage, the wrong fds or nothing; each refused
 * with its reason, every callback once, every fd given back. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "shm_chan_test.h"

static void want_why(const side_t *s, const char *part)
{
  if (!strstr(s->why, part))
    fail_msg("ended for \"%s\", not \"%s\"", s->why, part);
}

static void setup_over(const char *name, int abstract)
{
  int before = open_fds();
  pair_t p = {0};
  assert_int_equal(pair_open(&p, name), 0);
  struct stat st;
  assert_int_equal(stat(name, &st) == 0 && S_ISSOCK(st.st_mode), !abstract);
  /* a second listener on the same name is refused, the first lives on */
  rmx_shm_listener_t l2;
  assert_int_equal(rmx__shm_listen(&l2, &p.loop, name, pair_incoming), RMX_EADDRINUSE);
  /* bytes both ways */
  p.l.consume = p.c.consume = 1;
  uint64_t lpos = 0, cpos = 0;
  assert_int_equal(side_write(&p.c, &cpos, 1000), 1000);
  assert_int_equal(side_write(&p.l, &lpos, 3000), 3000);
  while (p.l.got < 1000 || p.c.got < 3000)
    uv_run(&p.loop, UV_RUN_ONCE);
  /* the connector closes: the other side gets the peer's end, 0 */
  rmx__shm_chan_close(&p.c.ch);
  run_until(&p.loop, &p.l.ends, 1);
  assert_int_equal(p.l.status, 0);
  want_why(&p.l, "closed");
  assert_int_equal(rmx__shm_chan_write(&p.l.ch, &(struct iovec){"x", 1}, 1), RMX_ENOTCONN);
  pair_close(&p);
  assert_int_equal(p.c.status, RMX_ECANCELED); /* its owner closed it first */
  assert_int_equal(p.l.ready + p.c.ready + p.l.ends + p.c.ends + p.l.closed + p.c.closed, 6);
  assert_false(p.l.bad | p.c.bad);
  assert_int_not_equal(stat(name, &st), 0); /* the listener's file is gone */
  assert_int_equal(open_fds(), before);
}

static void setup_over_a_path_and_an_abstract_name(void **state)
{
  char name[128];
  setup_over(test_name(name, sizeof(name), 0), 0);
  setup_over(test_name(name, sizeof(name), 1), 1);
}

/* The connector's ready: a message, and its close at once. */
static void write_and_close(side_t *s)
{
  uint64_t pos = 0;
  if (side_write(s, &pos, 100) != 100)
    s->bad |= 8;
  rmx__shm_chan_close(&s->ch);
}

/* Its answer and its bye reach the listener back to back: each is read
 * alone, and the listener gets ready, the bytes, then the peer's end. */
static void a_connector_that_closes_at_once(void **state)
{
  int before = open_fds();
  char name[128];
  pair_t p = {0};
  uv_loop_init(&p.loop);
  side_init(&p.l);
  side_init(&p.c);
  p.lst.data = &p;
  p.l.consume = 1;
  p.c.on_ready = write_and_close;
  assert_int_equal(rmx__shm_listen(&p.lst, &p.loop, test_name(name, sizeof(name), 1),
                                   pair_incoming), 0);
  assert_int_equal(rmx__shm_chan_connect(&p.c.ch, &p.loop, name, NULL, &side_cbs), 0);
  p.connected = 1;
  run_until(&p.loop, &p.l.ends, 1);
  assert_int_equal(p.l.ready, 1);
  if (p.l.status != 0)
    fail_msg("ended for \"%s\"", p.l.why);
  assert_int_equal(p.l.got, 100);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
  assert_int_equal(open_fds(), before);
}

static void names_refused(void **state)
{
  uv_loop_t loop;
  rmx_shm_listener_t l;
  rmx_shm_chan_t ch;
  char longname[200];
  memset(longname, 'x', sizeof(longname));
  longname[0] = '/';
  longname[sizeof(longname) - 1] = '\0';
  uv_loop_init(&loop);
  assert_int_equal(rmx__shm_listen(&l, &loop, "", pair_incoming), RMX_EINVAL);
  assert_int_equal(rmx__shm_listen(&l, &loop, "@", pair_incoming), RMX_EINVAL);
  assert_int_equal(rmx__shm_listen(&l, &loop, longname, pair_incoming), RMX_EINVAL);
  assert_int_equal(rmx__shm_listen(&l, &loop, "/nonexistent/dir/x.sock", pair_incoming),
                   RMX_ENOENT);
  assert_int_equal(rmx__shm_chan_connect(&ch, &loop, longname, NULL, &side_cbs), RMX_EINVAL);
  rmx_shm_chan_cbs_t partial = side_cbs;
  partial.writable = NULL;
  assert_int_equal(rmx__shm_chan_connect(&ch, &loop, "@x", NULL, &partial), RMX_EINVAL);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(uv_loop_close(&loop), 0); /* nothing was started */
}

static void another_kernel_refused(void **state)
{
  int before = open_fds();
  char path[] = "/tmp/rmx-boot-id-XXXXXX", name[128];
  int fd = mkstemp(path);
  const char *other = "01234567-89ab-cdef-0123-456789abcdef\n";
  assert_int_equal(write(fd, other, strlen(other)), (ssize_t)strlen(other));
  close(fd);
  pair_t p = {0};
  p.lcfg.boot_id_path = path; /* the listener reads another kernel's id */
  assert_int_not_equal(pair_open(&p, test_name(name, sizeof(name), 1)), 0);
  run_until(&p.loop, &p.l.ends, 1);
  assert_int_equal(p.c.status, RMX_EADDRNOTAVAIL);
  want_why(&p.c, "another kernel (boot id 01234567-89ab-cdef-0123-456789abcdef");
  assert_int_equal(p.l.status, RMX_ECONNREFUSED); /* told by the connector's answer */
  want_why(&p.l, "refused");
  assert_int_equal(p.l.ready + p.c.ready, 0);
  pair_close(&p);
  assert_false(p.l.bad | p.c.bad);
  unlink(path);
  assert_int_equal(open_fds(), before);
}

/* Connect one channel to name, run until it ends, close it. */
static void connect_fails(const char *name, unsigned ms, int want, const char *why)
{
  uv_loop_t loop;
  side_t s;
  side_init(&s);
  uv_loop_init(&loop);
  rmx_shm_chan_cfg_t cfg = {.handshake_ms = ms};
  assert_int_equal(rmx__shm_chan_connect(&s.ch, &loop, name, &cfg, &side_cbs), 0);
  assert_int_equal(s.ends, 0); /* from the loop, not from inside the call */
  run_until(&loop, &s.ends, 1);
  assert_int_equal(s.status, want);
  want_why(&s, why);
  rmx__shm_chan_close(&s.ch);
  run_until(&loop, &s.closed, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(s.ready + s.readable + s.writable, 0);
  assert_int_equal(s.ends + s.closed, 2);
  assert_false(s.bad);
}

static int raw_socket(const char *name, int do_listen)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t n = strlen(name);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] != '@'));
  memcpy(sa.sun_path, name, n);
  if (name[0] == '@')
    sa.sun_path[0] = '\0';
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
  if (do_listen)
    assert_int_equal(listen(fd, 8), 0);
  return fd;
}

static void lst_gone(rmx_shm_listener_t *l)
{
  ++*(int *)l->data;
}

static void nobody_listens(void **state)
{
  int before = open_fds();
  char name[128];
  connect_fails("/nonexistent/rmx.sock", 0, RMX_ECONNREFUSED, "nobody listens at");
  connect_fails(test_name(name, sizeof(name), 1), 0, RMX_ECONNREFUSED, "nobody listens at");
  int fd = raw_socket(test_name(name, sizeof(name), 0), 0); /* bound, not listening */
  connect_fails(name, 0, RMX_ECONNREFUSED, "nobody listens at");
  close(fd);
  unlink(name);
  /* a listener that was there and closed */
  uv_loop_t loop;
  rmx_shm_listener_t l;
  int closed = 0;
  uv_loop_init(&loop);
  l.data = &closed;
  assert_int_equal(rmx__shm_listen(&l, &loop, test_name(name, sizeof(name), 1), pair_incoming), 0);
  rmx__shm_listener_close(&l, lst_gone);
  run_until(&loop, &closed, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  connect_fails(name, 0, RMX_ECONNREFUSED, "nobody listens at");
  assert_int_equal(open_fds(), before);
}

/* ---- a fake listener ---- */

enum { F_SEG, F_EVENTFDS };

typedef struct hello_case {
  const char *what;
  int len;       /* bytes of the message sent; 0: close at once; -1: say nothing */
  int nfds, kind;
  int ring, version, bad_id, garbage;
  int want;
  const char *why;
} hello_case_t;

static void fake_listener(const hello_case_t *hc)
{
  int before = open_fds();
  char name[128], id[RMX_SHM_BOOT_ID_LEN + 1];
  uv_loop_t loop;
  side_t s;
  side_init(&s);
  uv_loop_init(&loop);
  int lfd = raw_socket(test_name(name, sizeof(name), 1), 1);
  rmx_shm_chan_cfg_t cfg = {.handshake_ms = hc->len < 0 ? 50 : 0};
  assert_int_equal(rmx__shm_chan_connect(&s.ch, &loop, name, &cfg, &side_cbs), 0);
  int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC); /* queued by connect already */
  assert_true(fd >= 0);
  rmx_shm_seg_t seg;
  int fds[RMX_SHM_FDS_MAX];
  assert_int_equal(rmx__shm_seg_create(&seg, 0), 0);
  rmx__shm_seg_fds(&seg, fds);
  for (int i = 0; i < RMX_SHM_FDS_MAX; i++)
    if (i >= RMX_SHM_NFDS || hc->kind == F_EVENTFDS)
      fds[i] = eventfd(0, EFD_CLOEXEC);
  uint8_t m[RMX_SHM_MSG];
  assert_int_equal(rmx__shm_boot_id(id), 0);
  rmx__shm_msg_put(m, RMX_SHM_HELLO_MAGIC, hc->ring ? (uint32_t)hc->ring : seg.lay.ring_size,
                   0, id);
  if (hc->version)
    m[4] = (uint8_t)hc->version;
  if (hc->bad_id)
    m[16] = 'Z';
  if (hc->garbage)
    memset(m, 0xab, sizeof(m));
  if (hc->len > 0)
    assert_int_equal(rmx__shm_fds_send(fd, m, (size_t)hc->len, fds, hc->nfds), hc->len);
  if (hc->len == 0)
    close(fd);
  run_until(&loop, &s.ends, 1);
  print_message("  %s: %s\n", hc->what, s.why);
  assert_int_equal(s.status, hc->want);
  want_why(&s, hc->why);
  if (hc->len > 0) { /* the connector said why before it went */
    uint8_t a[RMX_SHM_MSG + 1];
    uint32_t w;
    int32_t st;
    assert_int_equal(rmx__shm_fds_recv(fd, a, sizeof(a), NULL, 0), RMX_SHM_MSG);
    assert_null(rmx__shm_msg_check(a, RMX_SHM_MSG, RMX_SHM_ANSWER_MAGIC, &w, &st, id));
    assert_int_equal(st, hc->want);
  }
  rmx__shm_chan_close(&s.ch);
  run_until(&loop, &s.closed, 1);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(s.ready + s.readable + s.writable, 0);
  assert_false(s.bad);
  if (hc->len != 0)
    close(fd);
  close(lfd);
  rmx__shm_seg_close(&seg);
  for (int i = RMX_SHM_NFDS; i < RMX_SHM_FDS_MAX; i++)
    close(fds[i]);
  if (hc->kind == F_EVENTFDS)
    for (int i = 0; i < RMX_SHM_NFDS; i++)
      close(fds[i]);
  assert_int_equal(open_fds(), before); /* whatever came to the connector was closed */
}

static void a_fake_listener_is_refused(void **state)
{
  const int M = RMX_SHM_MSG;
  const hello_case_t cases[] = {
    {"garbage", M, 3, F_SEG, .garbage = 1, .want = RMX_EPROTO, .why = "magic"},
    {"no fds", M, 0, F_SEG, .want = RMX_EPROTO, .why = "exactly the segment's three fds"},
    {"two fds", M, 2, F_SEG, .want = RMX_EPROTO, .why = "three fds"},
    {"four fds", M, 4, F_SEG, .want = RMX_EPROTO, .why = "three fds"},
    {"eight fds", M, 8, F_SEG, .want = RMX_EPROTO, .why = "three fds"},
    {"short", 10, 3, F_SEG, .want = RMX_EPROTO, .why = "came short"},
    {"no memfd", M, 3, F_EVENTFDS, .want = RMX_EPROTO, .why = "not a memfd sealed"},
    {"ring size", M, 3, F_SEG, .ring = 4096, .want = RMX_EPROTO, .why = "ring size"},
    {"version", M, 3, F_SEG, .version = 2, .want = RMX_EPROTO, .why = "version"},
    {"boot id", M, 3, F_SEG, .bad_id = 1, .want = RMX_EPROTO, .why = "malformed"},
    {"gone", 0, 0, F_SEG, .want = RMX_ECONNRESET, .why = "closed before its hello"},
    {"silent", -1, 0, F_SEG, .want = RMX_ETIMEDOUT, .why = "no hello from the listener"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    fake_listener(&cases[i]);
}

/* ---- a fake connector ---- */

enum { A_GARBAGE, A_FDS, A_GONE, A_SILENT, A_REFUSE, A_OTHER_KERNEL, A_LONG };

static void fake_connector(int what, int want, const char *why)
{
  int before = open_fds();
  char name[128], id[RMX_SHM_BOOT_ID_LEN + 1];
  pair_t p = {0};
  uv_loop_init(&p.loop);
  side_init(&p.l);
  p.lst.data = &p;
  p.lcfg.handshake_ms = what == A_SILENT ? 50 : 0;
  assert_int_equal(rmx__shm_listen(&p.lst, &p.loop, test_name(name, sizeof(name), 1),
                                   pair_incoming), 0);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa,
                           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))), 0);
  while (!p.accepted)
    uv_run(&p.loop, UV_RUN_ONCE);
  uint8_t m[RMX_SHM_MSG + 1] = {0};
  int fds[RMX_SHM_NFDS];
  assert_int_equal(rmx__shm_fds_recv(fd, m, sizeof(m), fds, RMX_SHM_NFDS), RMX_SHM_MSG);
  for (int i = 0; i < RMX_SHM_NFDS; i++)
    close(fds[i]);
  assert_int_equal(rmx__shm_boot_id(id), 0);
  rmx__shm_msg_put(m, RMX_SHM_ANSWER_MAGIC, 0, what == A_REFUSE ? RMX_EPROTO : 0, id);
  if (what == A_OTHER_KERNEL)
    memcpy(m + 16, "01234567", 8);
  if (what == A_GARBAGE)
    m[0] ^= 1;
  int efd = eventfd(0, EFD_CLOEXEC);
  if (what != A_GONE && what != A_SILENT)
    assert_int_equal(rmx__shm_fds_send(fd, m, RMX_SHM_MSG + (what == A_LONG), &efd,
                                       what == A_FDS), RMX_SHM_MSG + (what == A_LONG));
  close(efd);
  if (what == A_GONE)
    close(fd);
  run_until(&p.loop, &p.l.ends, 1);
  print_message("  %s\n", p.l.why);
  assert_int_equal(p.l.status, want);
  want_why(&p.l, why);
  pair_close(&p);
  assert_int_equal(p.l.ready, what == A_LONG); /* a good answer, then a byte that is no bye */
  assert_int_equal(p.l.readable + p.l.writable, 0);
  assert_false(p.l.bad);
  if (what != A_GONE)
    close(fd);
  assert_int_equal(open_fds(), before);
}

static void a_fake_connector_is_refused(void **state)
{
  fake_connector(A_GARBAGE, RMX_EPROTO, "magic");
  fake_connector(A_FDS, RMX_EPROTO, "carried fds");
  fake_connector(A_LONG, RMX_EPROTO, "no bye after set-up (a set-up message came short)");
  fake_connector(A_GONE, RMX_ECONNRESET, "closed before it answered");
  fake_connector(A_SILENT, RMX_ETIMEDOUT, "no answer from the connector");
  fake_connector(A_REFUSE, RMX_ECONNREFUSED, "refused the segment");
  fake_connector(A_OTHER_KERNEL, RMX_EADDRNOTAVAIL, "another kernel");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(setup_over_a_path_and_an_abstract_name),
    cmocka_unit_test(a_connector_that_closes_at_once),
    cmocka_unit_test(names_refused),
    cmocka_unit_test(another_kernel_refused),
    cmocka_unit_test(nobody_listens),
    cmocka_unit_test(a_fake_listener_is_refused),
    cmocka_unit_test(a_fake_connector_is_refused),
  };
  libuv_warm();
  return cmocka_run_group_tests(tests, NULL, NULL);
}
