/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A shared-memory connection's segment (seg.h): its layout and header,
 * creating it (memfd, pages, seals, doorbells) and attaching to one a
 * peer made, checking everything the peer controls before it is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "../../src/base/bytes.h"
#include "seg.h"

#define SEG_ALIGN 4096u
#define SEG_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int rmx__shm_layout(uint32_t ring_size, rmx_shm_layout_t *lay)
{
  if (ring_size < RMX_SHM_RING_MIN || ring_size > RMX_SHM_RING_MAX ||
      (ring_size & (ring_size - 1)) != 0)
    return RMX_EINVAL;
  lay->ring_size = ring_size;
  lay->ctrl_off[0] = RMX_SHM_HDR;
  lay->ctrl_off[1] = RMX_SHM_HDR + RMX_SHM_RING_CTRL;
  lay->data_off[0] = 512; /* the header and both controls, on a round offset */
  lay->data_off[1] = 512 + ring_size;
  uint32_t end = 512 + 2 * ring_size;
  lay->seg_size = (end + SEG_ALIGN - 1) / SEG_ALIGN * SEG_ALIGN;
  return 0;
}
_Static_assert(RMX_SHM_HDR + 2 * RMX_SHM_RING_CTRL <= 512, "the controls fit before the data");

static void hdr_write(uint8_t *p, const rmx_shm_layout_t *lay)
{
  memset(p, 0, RMX_SHM_HDR);
  rmx_put32(p, RMX_SHM_MAGIC);
  rmx_put16(p + 4, RMX_SHM_VERSION);
  rmx_put16(p + 6, RMX_SHM_HDR);
  rmx_put32(p + 8, lay->ring_size);
  rmx_put32(p + 12, lay->seg_size);
}

const char *rmx__shm_hdr_check(const uint8_t hdr[RMX_SHM_HDR], size_t file_size,
                               rmx_shm_layout_t *lay)
{
  rmx_shm_layout_t l;
  if (rmx_get32(hdr) != RMX_SHM_MAGIC)
    return "not an rmx segment (magic)";
  if (rmx_get16(hdr + 4) != RMX_SHM_VERSION)
    return "a segment layout version this build does not speak";
  if (rmx_get16(hdr + 6) != RMX_SHM_HDR)
    return "wrong header size";
  if (rmx__shm_layout(rmx_get32(hdr + 8), &l) != 0)
    return "ring size out of range or no power of two";
  if (rmx_get32(hdr + 12) != l.seg_size || file_size != l.seg_size)
    return "segment size does not match its ring size";
  for (unsigned i = 16; i < RMX_SHM_HDR; i++)
    if (hdr[i] != 0)
      return "reserved header bytes are not zero";
  *lay = l;
  return NULL;
}

static int err_of(int e)
{
  switch (e) {
  case ENOMEM: case ENOSPC: case EFBIG: return RMX_ENOMEM;
  case EMFILE: case ENFILE: return RMX_EMFILE;
  default: return RMX_EIO;
  }
}

static int bell_new(void)
{
  return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int rmx__shm_seg_create(rmx_shm_seg_t *seg, uint32_t ring_size)
{
  rmx_shm_layout_t lay;
  int rc = rmx__shm_layout(ring_size ? ring_size : RMX_SHM_RING_DEFAULT, &lay);
  if (rc != 0)
    return rc;
  int fd = memfd_create("rmx-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return err_of(errno);
  /* pages allocated now, so that touching them later cannot fail */
  if (ftruncate(fd, lay.seg_size) != 0 || (errno = posix_fallocate(fd, 0, lay.seg_size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, SEG_SEALS) != 0) {
    rc = err_of(errno);
    goto close_fd;
  }
  void *base = mmap(NULL, lay.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = err_of(errno);
    goto close_fd;
  }
  int b0 = bell_new(), b1 = b0 >= 0 ? bell_new() : -1;
  if (b1 < 0) {
    rc = err_of(errno);
    goto close_bells;
  }
  hdr_write(base, &lay);
  rmx__shm_ring_reset((uint8_t *)base + lay.ctrl_off[0]);
  rmx__shm_ring_reset((uint8_t *)base + lay.ctrl_off[1]);
  *seg = (rmx_shm_seg_t){.base = base, .size = lay.seg_size, .memfd = fd, .bell = {b0, b1},
                         .side = 0, .lay = lay};
  return 0;

close_bells:
  if (b0 >= 0)
    close(b0);
  munmap(base, lay.seg_size);
close_fd:
  close(fd);
  return rc;
}

void rmx__shm_seg_fds(const rmx_shm_seg_t *seg, int fds[RMX_SHM_NFDS])
{
  fds[0] = seg->memfd;
  fds[1] = seg->bell[0];
  fds[2] = seg->bell[1];
}

/* An eventfd, and non-blocking, so that ringing it never waits (a peer's
 * pipe or socket in its place could block us). */
static const char *bell_check(int fd)
{
  char path[64], link[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof(link) - 1);
  if (n < 0)
    return "a doorbell fd cannot be inspected";
  link[n] = '\0';
  if (strcmp(link, "anon_inode:[eventfd]") != 0)
    return "a doorbell is not an eventfd";
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return "a doorbell cannot be made non-blocking";
  return NULL;
}

int rmx__shm_seg_attach(rmx_shm_seg_t *seg, const int fds[RMX_SHM_NFDS], const char **why)
{
  int fd = fds[0], rc = RMX_EPROTO;
  const char *w = NULL;
  uint8_t hdr[RMX_SHM_HDR];
  rmx_shm_layout_t lay;
  struct stat st;
  void *base = MAP_FAILED;

  /* Seals first: once F_SEAL_SHRINK is there it stays, so the size read
   * next cannot change under us. */
  int seals = fcntl(fd, F_GET_SEALS);
  if (fds[1] == fds[2] || fds[1] == fd || fds[2] == fd)
    w = "the fds are not three different files";
  else if (seals < 0 || (seals & SEG_SEALS) != SEG_SEALS)
    w = "the segment is not a memfd sealed against shrinking and growing";
  else if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
    w = "the segment is sealed against writing";
  else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)SEG_ALIGN ||
           st.st_size > (off_t)(2 * (size_t)RMX_SHM_RING_MAX + SEG_ALIGN))
    w = "the segment's size is out of range";
  else if ((w = bell_check(fds[1])) == NULL)
    w = bell_check(fds[2]);
  if (w)
    goto fail;
  /* Our own allocation of the pages: the peer may have left holes, and a
   * hole that cannot be filled later is a SIGBUS. */
  if ((errno = posix_fallocate(fd, 0, st.st_size)) != 0) {
    rc = err_of(errno);
    w = "the segment's pages cannot be allocated";
    goto fail;
  }
  base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = err_of(errno);
    w = "the segment cannot be mapped";
    goto fail;
  }
  memcpy(hdr, base, sizeof(hdr)); /* the one read of the header */
  if ((w = rmx__shm_hdr_check(hdr, (size_t)st.st_size, &lay)) != NULL)
    goto fail;
  *seg = (rmx_shm_seg_t){.base = base, .size = lay.seg_size, .memfd = fd,
                         .bell = {fds[1], fds[2]}, .side = 1, .lay = lay};
  if (why)
    *why = NULL;
  return 0;

fail:
  if (base != MAP_FAILED)
    munmap(base, (size_t)st.st_size);
  for (int i = 0; i < RMX_SHM_NFDS; i++) {
    int seen = fds[i] < 0;
    for (int j = 0; j < i; j++)
      seen |= fds[j] == fds[i];
    if (!seen) /* each fd once, even when the same one came twice */
      close(fds[i]);
  }
  if (why)
    *why = w;
  return rc;
}

void rmx__shm_seg_rings(rmx_shm_seg_t *seg, rmx_shm_ring_t *tx, rmx_shm_ring_t *rx)
{
  int s = seg->side, peer_bell = seg->bell[1 - s];
  const rmx_shm_layout_t *l = &seg->lay;
  /* sizes and offsets were checked at create or attach: init cannot fail */
  rmx__shm_ring_init(tx, seg->base + l->ctrl_off[s], seg->base + l->data_off[s], l->ring_size, 1,
                     peer_bell);
  rmx__shm_ring_init(rx, seg->base + l->ctrl_off[1 - s], seg->base + l->data_off[1 - s],
                     l->ring_size, 0, peer_bell);
}

void rmx__shm_seg_close(rmx_shm_seg_t *seg)
{
  if (seg->base) {
    munmap(seg->base, seg->size);
    seg->base = NULL;
  }
  int *fds[] = {&seg->memfd, &seg->bell[0], &seg->bell[1]};
  for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
    if (*fds[i] >= 0) {
      close(*fds[i]);
      *fds[i] = -1;
    }
}
