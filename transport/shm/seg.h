/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared segment of one shared-memory connection: an anonymous memfd
 * (no file in /dev/shm, gone with its last fd and mapping) holding a
 * header and two rings (ring.h), and two doorbells (eventfds), one per
 * side. The creator makes them and passes the three fds to its peer over
 * a Unix-domain socket (SCM_RIGHTS); the peer checks them and maps the
 * segment. docs/architecture.md, "Shared memory: the ring".
 *
 * Layout (version 1), offsets in bytes:
 *   0    header, 64 bytes: u32 magic "RMXS", u16 version, u16 header size
 *        (64), u32 ring size, u32 segment size, the rest zero
 *   64   ring 0's control (192): the creator produces, the attacher consumes
 *   256  ring 1's control (192): the attacher produces, the creator consumes
 *   512  ring 0's data (ring size), then ring 1's data (ring size)
 * and the segment is that rounded up to 4096. Every offset follows from
 * the ring size: the attacher computes them and checks the header and the
 * file's size against them, from a copy of the header taken once.
 *
 * The creator sizes the memfd, allocates its pages (fallocate) and seals
 * it against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW, then
 * F_SEAL_SEAL): a peer that could truncate it would make our next access
 * a SIGBUS. The attacher accepts only a memfd sealed so.
 */
#ifndef RMX_SHM_SEG_H
#define RMX_SHM_SEG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ring.h"

#define RMX_SHM_MAGIC 0x53584d52u /* "RMXS" as a little-endian u32 */
#define RMX_SHM_VERSION 1
#define RMX_SHM_HDR 64u
#define RMX_SHM_NFDS 3             /* memfd, the creator's doorbell, the attacher's */
#define RMX_SHM_FDS_MAX 8          /* most fds one rmx__shm_fds_* call carries */
#define RMX_SHM_BOOT_ID_LEN 36     /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */

/* Where everything lies, from the ring size alone. */
typedef struct rmx_shm_layout {
  uint32_t ring_size;
  uint32_t seg_size;
  uint32_t ctrl_off[2];
  uint32_t data_off[2];
} rmx_shm_layout_t;

/* One side's view of a segment. side 0 created it, side 1 attached. */
typedef struct rmx_shm_seg {
  uint8_t *base;
  size_t size;
  int memfd;
  int bell[2];         /* bell[s]: the doorbell side s polls and the other side rings */
  int side;
  rmx_shm_layout_t lay;
} rmx_shm_seg_t;

/* The layout for a ring size: 0, or RMX_EINVAL when it is no power of two
 * within [RMX_SHM_RING_MIN, RMX_SHM_RING_MAX]. */
int rmx__shm_layout(uint32_t ring_size, rmx_shm_layout_t *lay);

/* Check a copy of a segment's header against the file it came from
 * (file_size bytes). Returns NULL and fills *lay when it is one this
 * build speaks, else why not. Pure: the fuzz target's subject. */
const char *rmx__shm_hdr_check(const uint8_t hdr[RMX_SHM_HDR], size_t file_size,
                               rmx_shm_layout_t *lay);

/* Create a segment with two rings of ring_size bytes (0: the default) and
 * the two doorbells, mapped. Returns 0, RMX_EINVAL (ring size),
 * RMX_ENOMEM, RMX_EMFILE, or RMX_EIO; on failure nothing is left open. */
int rmx__shm_seg_create(rmx_shm_seg_t *seg, uint32_t ring_size);

/* The fds a creator passes: memfd, bell[0], bell[1] (still its own). */
void rmx__shm_seg_fds(const rmx_shm_seg_t *seg, int fds[RMX_SHM_NFDS]);

/* Attach to a segment from the fds a peer passed, in rmx__shm_seg_fds'
 * order. The fds are taken in every case (closed on failure). Returns 0;
 * RMX_EPROTO when they are not what the protocol says (not a memfd sealed
 * against shrinking and growing, a size or header that does not match,
 * a doorbell that is no eventfd), with *why set; RMX_ENOMEM or RMX_EIO. */
int rmx__shm_seg_attach(rmx_shm_seg_t *seg, const int fds[RMX_SHM_NFDS], const char **why);

/* This side's two rings: tx (we produce) and rx (we consume), both
 * ringing the peer's doorbell. Our own, to poll, is seg->bell[seg->side]. */
void rmx__shm_seg_rings(rmx_shm_seg_t *seg, rmx_shm_ring_t *tx, rmx_shm_ring_t *rx);

/* Unmap and close everything (the peer's mapping lives on). */
void rmx__shm_seg_close(rmx_shm_seg_t *seg);

/* Send len bytes (at least 1) with nfds fds (at most RMX_SHM_FDS_MAX) in
 * one sendmsg on a Unix-domain socket. Returns the bytes sent, RMX_EAGAIN,
 * RMX_EINVAL, RMX_ECONNRESET, or RMX_EIO. The fds stay ours. */
ssize_t rmx__shm_fds_send(int sock, const void *buf, size_t len, const int *fds, int nfds);

/* Receive up to len bytes and exactly nfds fds in one recvmsg. Returns the
 * bytes received with fds[0..nfds) filled in (close-on-exec). Any other
 * count of fds, ancillary data that was cut short (MSG_CTRUNC) or is not
 * SCM_RIGHTS: every fd that came is closed and it returns RMX_EPROTO.
 * Else RMX_EAGAIN, RMX_ECONNRESET (the peer closed: 0 bytes), RMX_EINVAL,
 * RMX_EIO. fds is set only on success. */
ssize_t rmx__shm_fds_recv(int sock, void *buf, size_t len, int *fds, int nfds);

/* This boot's id (/proc/sys/kernel/random/boot_id) into out, NUL-ended:
 * two processes on one host see the same. 0, RMX_ENOENT (no such file),
 * or RMX_EIO (not a boot id). rmx__shm_boot_id_at reads another path. */
int rmx__shm_boot_id(char out[RMX_SHM_BOOT_ID_LEN + 1]);
int rmx__shm_boot_id_at(const char *path, char out[RMX_SHM_BOOT_ID_LEN + 1]);

#endif
