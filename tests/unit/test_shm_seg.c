/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory segment (transport/shm/seg.c, fds.c): created as a
 * sealed memfd that leaves nothing in /dev/shm, attached from fds passed
 * over a socket pair, and the rings of both sides joined; attach refusing
 * every fd and header a peer could get wrong, closing what it was given;
 * fd passing with the wrong number of fds (none, one too few, one too
 * many, far too many) refused with nothing left open; the boot id. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "../../transport/shm/seg.h"

static int count_dir(const char *path)
{
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int n = 0;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

static int open_fds(void)
{
  return count_dir("/proc/self/fd");
}

static int is_open(int fd)
{
  return fcntl(fd, F_GETFD) != -1;
}

static void create_attach_and_talk(void **state)
{
  int shm_before = count_dir("/dev/shm"), fds_before = open_fds();
  rmx_shm_seg_t a, b;
  assert_int_equal(rmx__shm_seg_create(&a, 0), 0);
  assert_int_equal(a.size, 36864); /* 512 + 2 x 16 KiB, in pages: an idle connection */
  assert_int_equal(count_dir("/dev/shm"), shm_before); /* a memfd: no file anywhere */
  /* nobody can change its size any more */
  assert_int_not_equal(ftruncate(a.memfd, 4096), 0);
  assert_int_not_equal(ftruncate(a.memfd, 1 << 20), 0);
  int sv[2], fds[RMX_SHM_NFDS], got[RMX_SHM_NFDS];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  rmx__shm_seg_fds(&a, fds);
  assert_int_equal(rmx__shm_fds_send(sv[0], "hi", 2, fds, RMX_SHM_NFDS), 2);
  char buf[8];
  assert_int_equal(rmx__shm_fds_recv(sv[1], buf, sizeof(buf), got, RMX_SHM_NFDS), 2);
  assert_int_equal(fcntl(got[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  const char *why = "unset";
  assert_int_equal(rmx__shm_seg_attach(&b, got, &why), 0);
  assert_null(why);
  assert_int_equal(b.side, 1);
  assert_int_equal(b.lay.ring_size, RMX_SHM_RING_DEFAULT);

  rmx_shm_ring_t atx, arx, btx, brx;
  rmx__shm_seg_rings(&a, &atx, &arx);
  rmx__shm_seg_rings(&b, &btx, &brx);
  struct iovec v = {.iov_base = "ping", .iov_len = 4};
  char in[8] = {0};
  assert_int_equal(rmx__shm_ring_arm_read(&brx), 0);
  assert_int_equal(rmx__shm_ring_write(&atx, &v, 1), 4);
  uint64_t n;
  assert_int_equal(read(b.bell[1], &n, 8), 8); /* the attacher's doorbell, rung by the creator */
  assert_int_equal(rmx__shm_ring_read(&brx, in, 8), 4);
  assert_string_equal(in, "ping");
  v.iov_base = "pong";
  assert_int_equal(rmx__shm_ring_arm_read(&arx), 0);
  assert_int_equal(rmx__shm_ring_write(&btx, &v, 1), 4);
  assert_int_equal(read(a.bell[0], &n, 8), 8);
  assert_int_equal(rmx__shm_ring_read(&arx, in, 8), 4);
  assert_string_equal(in, "pong");

  rmx__shm_seg_close(&a);
  rmx__shm_seg_close(&b);
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(open_fds(), fds_before);
}

/* A memfd with the given seals and size holding hdr (NULL: a good one for
 * a ring of 4096), and two eventfds, as a peer would pass them. */
static void peer_fds(int fds[3], int seals, size_t size, const uint8_t *hdr)
{
  fds[0] = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  assert_true(fds[0] >= 0);
  assert_int_equal(ftruncate(fds[0], (off_t)size), 0);
  uint8_t good[RMX_SHM_HDR] = {'R', 'M', 'X', 'S', 1, 0, 64, 0, 0, 0x10, 0, 0, 0, 0x30, 0, 0};
  assert_int_equal(pwrite(fds[0], hdr ? hdr : good, RMX_SHM_HDR, 0), RMX_SHM_HDR);
  if (seals)
    assert_int_equal(fcntl(fds[0], F_ADD_SEALS, seals), 0);
  fds[1] = eventfd(0, EFD_CLOEXEC);
  fds[2] = eventfd(0, EFD_CLOEXEC);
}

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static void refused(int fds[3], const char *want)
{
  rmx_shm_seg_t s;
  const char *why = NULL;
  assert_int_equal(rmx__shm_seg_attach(&s, fds, &why), RMX_EPROTO);
  assert_non_null(why);
  if (!strstr(why, want))
    fail_msg("refused for \"%s\", not \"%s\"", why, want);
  for (int i = 0; i < 3; i++)
    assert_false(is_open(fds[i])); /* taken, and closed */
}

static void attach_refuses_what_the_peer_got_wrong(void **state)
{
  int before = open_fds(), fds[3];
  peer_fds(fds, SEALS, 12288, NULL); /* the good one */
  rmx_shm_seg_t s;
  assert_int_equal(rmx__shm_seg_attach(&s, fds, NULL), 0);
  rmx__shm_seg_close(&s);

  peer_fds(fds, 0, 12288, NULL);
  refused(fds, "sealed against shrinking");
  peer_fds(fds, F_SEAL_SHRINK, 12288, NULL);
  refused(fds, "sealed against shrinking");
  peer_fds(fds, SEALS | F_SEAL_FUTURE_WRITE, 12288, NULL);
  refused(fds, "writing");
  peer_fds(fds, SEALS, 16384, NULL);
  refused(fds, "segment size");
  peer_fds(fds, SEALS, 1u << 30, NULL);
  refused(fds, "size is out of range");
  uint8_t h[RMX_SHM_HDR] = {'R', 'M', 'X', 'S', 1, 0, 64, 0, 0, 0x10, 0, 0, 0, 0x30, 0, 0};
  h[0] = 'X';
  peer_fds(fds, SEALS, 12288, h);
  refused(fds, "magic");
  h[0] = 'R', h[4] = 2;
  peer_fds(fds, SEALS, 12288, h);
  refused(fds, "version");
  h[4] = 1, h[9] = 0x11; /* 4352: no power of two */
  peer_fds(fds, SEALS, 12288, h);
  refused(fds, "ring size");
  h[9] = 0x10, h[40] = 1;
  peer_fds(fds, SEALS, 12288, h);
  refused(fds, "reserved");
  /* doorbells that are not eventfds, or the same one twice */
  int pp[2];
  h[40] = 0;
  peer_fds(fds, SEALS, 12288, h);
  assert_int_equal(pipe(pp), 0);
  close(fds[2]);
  fds[2] = pp[1];
  refused(fds, "not an eventfd");
  close(pp[0]);
  peer_fds(fds, SEALS, 12288, h);
  close(fds[2]);
  fds[2] = fds[1];
  refused(fds, "three different");
  /* a plain file is no memfd */
  peer_fds(fds, SEALS, 12288, h);
  close(fds[0]);
  fds[0] = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  refused(fds, "sealed against shrinking");
  assert_int_equal(open_fds(), before);
}

static void header_check_reads_only_the_copy(void **state)
{
  rmx_shm_layout_t lay;
  uint8_t h[RMX_SHM_HDR] = {'R', 'M', 'X', 'S', 1, 0, 64, 0, 0, 0, 1, 0, 0, 0x10, 2, 0};
  assert_null(rmx__shm_hdr_check(h, 2 * 65536 + 4096, &lay)); /* rings of 64 KiB */
  assert_int_equal(lay.ring_size, 65536);
  assert_int_equal(lay.data_off[1], 512 + 65536);
  assert_non_null(rmx__shm_hdr_check(h, 2 * 65536 + 8192, &lay));
  h[6] = 32;
  assert_non_null(rmx__shm_hdr_check(h, 2 * 65536 + 4096, &lay));
  assert_int_equal(rmx__shm_layout(RMX_SHM_RING_MAX * 2, &lay), RMX_EINVAL);
  assert_int_equal(rmx__shm_layout(RMX_SHM_RING_MIN / 2, &lay), RMX_EINVAL);
  rmx_shm_seg_t s;
  assert_int_equal(rmx__shm_seg_create(&s, 1000), RMX_EINVAL);
}

/* Sends n eventfds, receives expecting want; returns what recv did. */
static ssize_t pass(int n, int want, int *got)
{
  int sv[2], fds[RMX_SHM_FDS_MAX];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  for (int i = 0; i < n; i++)
    fds[i] = eventfd(0, EFD_CLOEXEC);
  assert_int_equal(rmx__shm_fds_send(sv[0], "x", 1, fds, n), 1);
  for (int i = 0; i < n; i++)
    close(fds[i]);
  char b[4];
  ssize_t k = rmx__shm_fds_recv(sv[1], b, sizeof(b), got, want);
  close(sv[0]);
  close(sv[1]);
  return k;
}

static void fd_counts_must_be_exact(void **state)
{
  int before = open_fds(), got[RMX_SHM_FDS_MAX] = {-1, -1, -1};
  assert_int_equal(pass(3, 3, got), 1);
  for (int i = 0; i < 3; i++) {
    assert_true(is_open(got[i]));
    close(got[i]);
  }
  assert_int_equal(open_fds(), before);
  got[0] = got[1] = got[2] = -7;
  assert_int_equal(pass(0, 3, got), RMX_EPROTO);
  assert_int_equal(pass(2, 3, got), RMX_EPROTO);
  assert_int_equal(pass(4, 3, got), RMX_EPROTO);                /* one too many */
  assert_int_equal(pass(RMX_SHM_FDS_MAX, 3, got), RMX_EPROTO);  /* cut short: MSG_CTRUNC */
  assert_int_equal(pass(1, 0, got), RMX_EPROTO);
  assert_int_equal(got[0], -7); /* untouched on failure */
  assert_int_equal(open_fds(), before); /* every fd that came was closed */

  int sv[2], e = eventfd(0, EFD_CLOEXEC);
  char b[4];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
  assert_int_equal(rmx__shm_fds_recv(sv[1], b, 4, got, 3), RMX_EAGAIN);
  assert_int_equal(rmx__shm_fds_send(sv[0], "", 0, &e, 1), RMX_EINVAL);
  assert_int_equal(rmx__shm_fds_send(sv[0], "x", 1, &e, RMX_SHM_FDS_MAX + 1), RMX_EINVAL);
  close(sv[0]);
  assert_int_equal(rmx__shm_fds_recv(sv[1], b, 4, got, 3), RMX_ECONNRESET);
  assert_int_equal(rmx__shm_fds_send(sv[1], "x", 1, &e, 1), RMX_ECONNRESET);
  close(sv[1]);
  close(e);
  assert_int_equal(open_fds(), before);
}

static void boot_id(void **state)
{
  char a[RMX_SHM_BOOT_ID_LEN + 1], b[RMX_SHM_BOOT_ID_LEN + 1];
  assert_int_equal(rmx__shm_boot_id(a), 0);
  assert_int_equal(rmx__shm_boot_id(b), 0);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), RMX_SHM_BOOT_ID_LEN);
  assert_int_equal(rmx__shm_boot_id_at("/nonexistent/boot_id", a), RMX_ENOENT);
  char path[] = "/tmp/rmx-boot-id-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *bad[] = {"", "0123\n", "0123456789abcdef0123456789abcdef0123\n",
                       "01234567-89ab-cdef-0123-456789abcdeZ\n",
                       "01234567-89ab-cdef-0123-456789abcdef", /* no newline */
                       "01234567-89ab-cdef-0123-456789abcdef\nmore"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, bad[i], strlen(bad[i]), 0), (ssize_t)strlen(bad[i]));
    assert_int_equal(rmx__shm_boot_id_at(path, a), RMX_EIO);
  }
  const char *good = "01234567-89ab-cdef-0123-456789abcdef\n";
  assert_int_equal(pwrite(fd, good, strlen(good), 0), (ssize_t)strlen(good));
  assert_int_equal(ftruncate(fd, (off_t)strlen(good)), 0);
  assert_int_equal(rmx__shm_boot_id_at(path, a), 0);
  assert_string_equal(a, "01234567-89ab-cdef-0123-456789abcdef");
  close(fd);
  unlink(path);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(create_attach_and_talk),
    cmocka_unit_test(attach_refuses_what_the_peer_got_wrong),
    cmocka_unit_test(header_check_reads_only_the_copy),
    cmocka_unit_test(fd_counts_must_be_exact),
    cmocka_unit_test(boot_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
