/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Passing a segment's fds over a Unix-domain socket (SCM_RIGHTS), and the
 * boot id two processes compare to know they share a host (seg.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "seg.h"

static int sock_err(int e)
{
  switch (e) {
  case EAGAIN: return RMX_EAGAIN;
  case EPIPE: case ECONNRESET: return RMX_ECONNRESET;
  case EBADF: case ENOTSOCK: case EINVAL: case EOPNOTSUPP: return RMX_EINVAL;
  case ENOMEM: case ENOBUFS: return RMX_ENOMEM;
  default: return RMX_EIO;
  }
}

ssize_t rmx__shm_fds_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
  if (len == 0 || nfds < 0 || nfds > RMX_SHM_FDS_MAX || (nfds > 0 && fds == NULL))
    return RMX_EINVAL;
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * RMX_SHM_FDS_MAX)];
  } cm;
  memset(&cm, 0, sizeof(cm));
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) {
    msg.msg_control = cm.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t k;
  do
    k = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (k < 0 && errno == EINTR);
  return k < 0 ? sock_err(errno) : k;
}

/* The fds of every SCM_RIGHTS message in msg, into got (room for max),
 * all counted in *n; those past max, closed at once. Returns 1 when there
 * was ancillary data other than SCM_RIGHTS. */
static int fds_take(struct msghdr *msg, int *got, int max, int *n)
{
  int odd = 0;
  *n = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      odd = 1; /* SCM_CREDENTIALS and the like: nothing to close */
      continue;
    }
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*n < max)
        got[*n] = fd;
      else
        close(fd);
      ++*n;
    }
  }
  return odd;
}

ssize_t rmx__shm_fds_recv(int sock, void *buf, size_t len, int *fds, int nfds)
{
  if (len == 0 || nfds < 0 || nfds > RMX_SHM_FDS_MAX || (nfds > 0 && fds == NULL))
    return RMX_EINVAL;
  /* room for one fd more than expected, so that one too many shows as a
   * wrong count; more than that is cut short (MSG_CTRUNC): the kernel
   * drops those that did not fit, and what did fit is closed below */
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * (RMX_SHM_FDS_MAX + 1))];
  } cm;
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * (nfds + 1))};
  ssize_t k;
  do
    k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (k < 0 && errno == EINTR);
  if (k < 0)
    return sock_err(errno);
  int got[RMX_SHM_FDS_MAX + 1], n;
  int odd = fds_take(&msg, got, nfds + 1, &n);
  if (k > 0 && !odd && n == nfds && !(msg.msg_flags & MSG_CTRUNC)) {
    if (nfds > 0) /* fds may be NULL when none are expected */
      memcpy(fds, got, sizeof(int) * nfds);
    return k;
  }
  for (int i = 0; i < n && i < nfds + 1; i++) /* the rest are closed already */
    close(got[i]);
  return k == 0 && n == 0 ? RMX_ECONNRESET : RMX_EPROTO;
}

int rmx__shm_boot_id_at(const char *path, char out[RMX_SHM_BOOT_ID_LEN + 1])
{
  char b[RMX_SHM_BOOT_ID_LEN + 2];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? RMX_ENOENT : RMX_EIO;
  size_t n = 0;
  while (n < sizeof(b)) {
    ssize_t k = read(fd, b + n, sizeof(b) - n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    n += (size_t)k;
  }
  close(fd);
  /* 36 characters and a newline; hex digits and dashes in their places */
  if (n != RMX_SHM_BOOT_ID_LEN + 1 || b[RMX_SHM_BOOT_ID_LEN] != '\n')
    return RMX_EIO;
  for (int i = 0; i < (int)RMX_SHM_BOOT_ID_LEN; i++) {
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = b[i];
    int hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (dash ? c != '-' : !hex)
      return RMX_EIO;
  }
  memcpy(out, b, RMX_SHM_BOOT_ID_LEN);
  out[RMX_SHM_BOOT_ID_LEN] = '\0';
  return 0;
}

int rmx__shm_boot_id(char out[RMX_SHM_BOOT_ID_LEN + 1])
{
  return rmx__shm_boot_id_at("/proc/sys/kernel/random/boot_id", out);
}
